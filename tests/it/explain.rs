//! `explain` (issue 42): what a session would do with a tool call, and each step of why,
//! without running it, by the session's own ruling: not offered, refused by rule N (at its
//! file:line:col), asks (an `ask` rule or `requireApproval`), or allowed (by a rule, an
//! allowance or the default); arguments that do not fit the tool's schema are an error.

use std::sync::Arc;

use agent_controller::explain::{Check, ExplainError, Outcome};
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{AgentController, ToolRegistry, config};
use serde_json::json;

use crate::common::Workspace;

const CONFIG: &str = r#"[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "**/.env*", action = "deny" },
  { tool = "write_file", path = "src/**", action = "allow" },
  { tool = "write_file", path = "ops/**", action = "ask" },
]

[[modes]]
id = "review"
availableTools = ["read_file"]
"#;

fn controller(ws: &Workspace) -> AgentController {
    AgentController::builder(
        config::parse(CONFIG, "modes.toml").expect("config"),
        Arc::new(ScriptedModel::new()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller")
}

#[test]
fn explain_names_the_deciding_rule_with_its_place_and_each_step() {
    let ws = Workspace::new();
    std::fs::create_dir(ws.path().join("src")).expect("src");
    let controller = controller(&ws);
    let write = |path: &str| json!({ "path": path, "content": "x" });

    // `src/../.env` is `.env` once resolved: the deny rule wins over the allow rule.
    let denied = controller
        .explain("build", "write_file", write("src/../.env"))
        .expect("explained");
    assert_eq!(denied.outcome, Outcome::Deny);
    assert_eq!(denied.decided_by, Check::Rule(1));
    assert_eq!(denied.at.as_deref(), Some("modes.toml:7:12"));
    assert!(
        denied.reason.contains("rule 1 of mode `build`"),
        "{}",
        denied.reason
    );
    let checks: Vec<String> = denied.steps.iter().map(|s| s.check.to_string()).collect();
    assert_eq!(
        checks,
        [
            "availableTools",
            "arguments",
            "rule 1",
            "rule 2",
            "rule 3",
            "rule 1"
        ]
    );
    assert!(
        denied.steps[2].finding.contains("matches `.env`"),
        "{:?}",
        denied.steps[2]
    );
    assert!(
        denied.steps[3].finding.contains("does not match"),
        "{:?}",
        denied.steps[3]
    );
    assert_eq!(denied.steps[4].at.as_deref(), Some("modes.toml:9:12"));

    let allowed = controller
        .explain("build", "write_file", write("src/a.rs"))
        .expect("explained");
    assert_eq!(
        (allowed.outcome, allowed.decided_by),
        (Outcome::Allow, Check::Rule(2))
    );

    let asked = controller
        .explain("build", "write_file", write("ops/deploy.sh"))
        .expect("explained");
    assert_eq!(
        (asked.outcome, asked.decided_by),
        (Outcome::Ask, Check::Rule(3))
    );

    let held = controller
        .explain("build", "write_file", write("docs/a.md"))
        .expect("explained");
    assert_eq!(
        (held.outcome, held.decided_by, held.at),
        (Outcome::Ask, Check::RequireApproval, None)
    );

    let read = controller
        .explain("build", "read_file", json!({ "path": "src/a.rs" }))
        .expect("explained");
    assert_eq!(
        (read.outcome, read.decided_by),
        (Outcome::Allow, Check::Default)
    );

    let unavailable = controller
        .explain("review", "write_file", write("src/a.rs"))
        .expect("explained");
    assert_eq!(
        (unavailable.outcome, unavailable.decided_by),
        (Outcome::Unavailable, Check::AvailableTools)
    );
    assert_eq!(unavailable.steps.len(), 1, "nothing else is weighed");
}

#[test]
fn explain_refuses_bad_input_before_any_rule() {
    let ws = Workspace::new();
    let controller = controller(&ws);
    let err = controller
        .explain("build", "write_file", json!({ "path": 3, "content": "x" }))
        .expect_err("a path that is not a string does not fit the schema");
    assert!(matches!(err, ExplainError::Arguments { .. }), "{err}");
    let err = controller
        .explain("build", "write_fiel", json!({}))
        .expect_err("unknown tool");
    assert!(matches!(err, ExplainError::UnknownTool { .. }), "{err}");
    assert!(
        err.to_string().contains("did you mean `write_file`"),
        "{err}"
    );
    let err = controller
        .explain("biuld", "write_file", json!({}))
        .expect_err("unknown mode");
    assert!(err.to_string().contains("unknown mode `biuld`"), "{err}");
}

/// A session's "always allow" weighs in, by the session's own ruling: it stands in for
/// `requireApproval` (explain says allowed, by the allowance, and the next call runs unasked),
/// never for a rule (`ops/**` still asks, `.env` is still refused).
#[cfg(feature = "openai")]
#[tokio::test]
async fn a_sessions_allowance_weighs_in_as_the_session_rules() {
    use crate::common::openai_server::{ScriptedServer, call, calls, text};
    use agent_controller::{Decision, RunOutcome, SessionOptions};
    let ws = Workspace::new();
    let write = |id: &str, path: &str| {
        call(
            id,
            "write_file",
            &json!({ "path": path, "content": "x" }).to_string(),
        )
    };
    let server = ScriptedServer::start(vec![
        calls([write("call_1", "docs/a.md")]),
        text("done"),
        calls([write("call_2", "docs/b.md")]),
        text("done"),
    ])
    .await;
    let controller = AgentController::builder(
        config::parse(CONFIG, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let args = json!({ "path": "docs/b.md", "content": "x" });
    let before = session
        .explain("write_file", args.clone())
        .expect("explained");
    assert_eq!(before.outcome, Outcome::Ask);
    let outcome = session.send_message("write").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    session
        .decide("decision_1", Decision::approve().always_allow())
        .await
        .expect("decided");

    let after = session.explain("write_file", args).expect("explained");
    assert_eq!(
        (after.outcome, after.decided_by),
        (Outcome::Allow, Check::Allowance)
    );
    let ops = json!({ "path": "ops/x.sh", "content": "x" });
    let asked = session.explain("write_file", ops).expect("explained");
    assert_eq!(
        (asked.outcome, asked.decided_by),
        (Outcome::Ask, Check::Rule(3))
    );
    let env = json!({ "path": ".env", "content": "x" });
    let denied = session.explain("write_file", env).expect("explained");
    assert_eq!(
        (denied.outcome, denied.decided_by),
        (Outcome::Deny, Check::Rule(1))
    );

    // What it said is what the session does: the next such call runs without asking.
    let outcome = session.send_message("again").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(ws.path().join("docs/b.md").exists());
}
