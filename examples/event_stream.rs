//! A host that consumes the event stream: one task drives the session (plan, approve, build)
//! while another reads its events as an async stream and writes each as a JSON line, the way a
//! web host forwards them to a browser over server-sent events. The stream delivers every event
//! in order, from `session_started` on, and ends when the session is dropped.
//!
//!     cargo run --example event_stream
//!
//! The example checks what it shows and exits non-zero if the order breaks: the plan suspends
//! the first run, the approval switches the mode exactly once, after the plan's `tool_end` and
//! before the build's model call.

use std::sync::Arc;

use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{
    AgentController, Decision, Event, RunOutcome, SessionOptions, ToolRegistry,
};

const MODES: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = tempfile::tempdir()?;
    let graph = agent_controller::config::parse(MODES, "modes.toml")?;
    let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(workspace.path())
        .build()?;

    let (options, mut events) = SessionOptions::new().mode("plan").event_stream();

    // The consumer: every event as one JSON line (its `type` is `Event::kind`), until the
    // stream ends.
    let consumer = tokio::spawn(async move {
        let mut kinds = Vec::new();
        while let Some(event) = events.next().await {
            println!(
                "{}",
                serde_json::to_string(&event).expect("events serialize")
            );
            kinds.push(match &event {
                Event::ModeChanged { mode_id, .. } => format!("mode_changed:{mode_id}"),
                Event::AgentEnd { reason, .. } => format!("agent_end:{reason}"),
                Event::ToolEnd { tool_name, .. } => format!("tool_end:{tool_name}"),
                other => other.kind().to_owned(),
            });
        }
        kinds
    });

    // The driver: plan, approve pinned to what was shown, build.
    let mut session = controller.start_session(options).await?;
    let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else {
        panic!("the scripted model submits a plan in plan mode");
    };
    let approve = Decision::approve().with_sha256(&payload.submission.sha256);
    let outcome = session.decide(&payload.decision_id, approve).await?;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    drop(session); // ends the stream

    let kinds = consumer.await?;
    let at = |kind: &str| {
        kinds
            .iter()
            .position(|k| k == kind)
            .unwrap_or_else(|| panic!("no {kind} in {kinds:?}"))
    };
    assert_eq!(kinds.first().map(String::as_str), Some("session_started"));
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with("mode_changed"))
            .count(),
        1,
        "one switch: {kinds:?}"
    );
    assert!(at("tool_suspended") < at("agent_end:suspended"));
    assert!(at("agent_end:suspended") < at("tool_end:submit_plan"));
    assert!(at("tool_end:submit_plan") < at("mode_changed:build"));
    assert!(
        kinds[at("mode_changed:build")..].contains(&"assistant_message".to_owned()),
        "the build's model call comes after the switch: {kinds:?}"
    );
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("agent_end:completed")
    );
    eprintln!("{} events, in order", kinds.len());
    Ok(())
}
