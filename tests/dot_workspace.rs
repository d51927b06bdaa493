//! The default workspace `.` (and paths like `./x`) works exactly like an absolute workspace.
//! Its own test binary: it changes the process's current directory, which no other test may see.

#[path = "it/common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;

use agent_controller::model::scripted::ScriptedModel;
use agent_controller::tool::fs::{ListFiles, ReadFile, WriteFile, WritePlan};
use agent_controller::tool::submit_plan::read_plan;
use agent_controller::tool::{Tool, ToolContext, ToolOutput};
use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
use serde_json::{Value, json};

async fn call(tool: &dyn Tool, args: Value) -> ToolOutput {
    let workspace = Path::new(".");
    let plans = workspace.join(".agent/plans");
    let ctx = ToolContext::new(workspace, &plans, "plan");
    tool.execute(&args, &ctx).await
}

#[tokio::test(flavor = "current_thread")]
async fn the_dot_workspace_works_like_an_absolute_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::env::set_current_dir(dir.path()).expect("cd");

    for path in ["new.txt", "sub/new.txt", "./new2.txt"] {
        let out = call(&WriteFile, json!({"path": path, "content": path})).await;
        assert!(!out.is_error, "write_file {path}: {out:?}");
        let out = call(&ReadFile, json!({"path": path})).await;
        assert_eq!(out, ToolOutput::ok(path), "read_file {path}");
    }
    let listing = ToolOutput::ok("new.txt\nnew2.txt\nsub/");
    assert_eq!(call(&ListFiles, json!({})).await, listing);
    assert_eq!(call(&ListFiles, json!({"path": "."})).await, listing);
    assert_eq!(call(&ListFiles, json!({"path": ""})).await, listing);
    assert_eq!(
        call(&ListFiles, json!({"path": "./sub"})).await,
        ToolOutput::ok("new.txt")
    );

    let out = call(
        &WritePlan,
        json!({"path": "p.md", "content": "# P\n\n1. Go\n"}),
    )
    .await;
    assert_eq!(out, ToolOutput::ok(".agent/plans/p.md"));
    let plan = read_plan(
        Path::new("."),
        Path::new("./.agent/plans"),
        ".agent/plans/p.md",
    )
    .expect("plan");
    assert_eq!(plan.title, "P");
    let plan = read_plan(
        Path::new("."),
        Path::new("./.agent/plans"),
        "./.agent/plans/p.md",
    )
    .expect("plan via ./");
    assert_eq!(plan.title, "P");

    // A whole plan -> approve -> build cycle on a controller whose workspace is `.`.
    let graph = agent_controller::config::parse(common::PLAN_BUILD, "modes.toml").expect("config");
    let graph = agent_controller::config::parse(
        &common::PLAN_BUILD.replace(
            "availableTools = [\"read_file\", \"submit_plan\"]",
            "availableTools = [\"read_file\", \"list_files\", \"write_plan\", \"submit_plan\"]",
        ),
        "modes.toml",
    )
    .unwrap_or(graph);
    let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(".")
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("Add dark mode").await.expect("run");
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        payload,
    } = outcome
    else {
        panic!("suspends: {outcome:?}");
    };
    assert_eq!(payload.submission.title, "Add dark mode");
    session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("resume");
    assert_eq!(session.mode().id(), "build");
}
