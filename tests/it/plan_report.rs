//! The report at the end of an approved plan's run (issue 40): steps approved, files written
//! inside the plan's files, writes outside them (approved, refused by the user, refused by
//! `enforce`), declared files never touched, and whether the plan file changed since approval;
//! the `plan_report` event, the session's and the record's last report. Driven by the real
//! `OpenAiModel` against the scripted OpenAI-compatible server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::plan_report::PlanReport;
use agent_controller::store::{FileStore, SessionStore};
use agent_controller::{AgentController, Decision, Event, RunOutcome, ToolRegistry, config};
use common::openai_server::{Call, ScriptedServer, call, calls, submit, text};
use common::{Recorder, Workspace};
use serde_json::json;

const CONFIG: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
{POLICY}

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
requireApproval = ["write_file"]
"#;

const PLAN: &str = "# Dark mode\n\n1. Add the theme.\n2. Use it in the UI.\n\n## Files\n- `src/theme.rs`\n- `src/ui/**`\n";

fn write(id: &str, path: &str) -> Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": "x" }).to_string(),
    )
}

fn controller(
    server: &ScriptedServer,
    ws: &Workspace,
    policy: &str,
    store: Arc<dyn SessionStore>,
) -> AgentController {
    let config = CONFIG.replace("{POLICY}", &format!("planScope = \"{policy}\""));
    AgentController::builder(
        config::parse(&config, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .store(store)
    .build()
    .expect("controller")
}

fn reports(events: &[Event]) -> Vec<PlanReport> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::PlanReport { report, .. } => Some((**report).clone()),
            _ => None,
        })
        .collect()
}

/// Under `ask`: one write inside runs, one drift approved, one refused; the report counts
/// exactly those, names the declared entry never touched, and survives a restore from the
/// file store.
#[tokio::test]
async fn under_ask_the_report_counts_inside_approved_and_refused_drift() {
    let server = ScriptedServer::start(vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        calls([
            write("w_in", "src/theme.rs"),
            write("w_ok", "src/main.rs"),
            write("w_no", "src/lib.rs"),
        ]),
        text("done"),
    ])
    .await;
    let ws = Workspace::new();
    ws.plan("p.md", PLAN);
    let store = Arc::new(FileStore::open(ws.path().join("st")).expect("store"));
    let controller = controller(&server, &ws, "ask", store.clone());
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    session.send_message("plan it").await.expect("run");
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(tool_calls.len(), 2);
    assert!(session.plan_report().is_none(), "the run has not ended");
    let ok = tool_calls[0].decision_id().to_owned();
    let no = tool_calls[1].decision_id().to_owned();
    session.decide(&ok, Decision::approve()).await.expect("ok");
    let outcome = session.decide(&no, Decision::reject()).await.expect("no");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let emitted = reports(&recorder.take());
    assert_eq!(emitted.len(), 1, "{emitted:?}");
    let report = &emitted[0];
    assert_eq!(report.decision_id, "decision_1");
    assert_eq!(report.mode_id, "build");
    assert_eq!(report.written_inside, ["src/theme.rs"]);
    assert_eq!(report.drift_approved, ["src/main.rs"]);
    assert_eq!(report.drift_rejected, ["src/lib.rs"]);
    assert!(report.enforced.is_empty());
    assert_eq!(report.untouched, ["src/ui/**"]);
    assert_eq!(report.steps_approved, [1, 2]);
    assert_eq!(report.steps_done, None, "build keeps no task list");
    assert!(!report.plan_changed, "{report:?}");
    assert_eq!(session.plan_report(), Some(report));
    let json = serde_json::to_value(report).expect("json");
    assert_eq!(json["driftApproved"], json!(["src/main.rs"]));
    assert_eq!(json["planChanged"], false);
    // Restored from the file store, in a new controller: the same report.
    let id = session.id().to_owned();
    drop(session);
    let again = controller
        .restore_session(&id, agent_controller::SessionOptions::new())
        .await
        .expect("restore");
    assert_eq!(again.plan_report(), Some(report));
    let record = store.load(&id).await.expect("load").expect("exists");
    assert_eq!(record.plan_report.as_ref(), Some(report));
    drop(again);
    cli_prints(&ws, &id, report);
}

/// `agent-controller report SESSION --store DIR [--json]` prints the stored report; a session
/// without one is refused (exit 5) saying so.
#[cfg(feature = "cli")]
fn cli_prints(ws: &Workspace, id: &str, report: &PlanReport) {
    use crate::common::cli::bin;
    let dir = ws.path().join("st");
    let dir = dir.to_str().expect("utf-8");
    let out = bin(ws.path(), &["report", id, "--store", dir, "--json"], "");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::common::stderr(&out)
    );
    let printed: PlanReport = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(&printed, report);
    let out = bin(ws.path(), &["report", id, "--store", dir], "");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::common::stderr(&out)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("outside, approved: src/main.rs"), "{text}");
    assert!(
        text.contains("outside, refused by the user: src/lib.rs"),
        "{text}"
    );
    assert!(text.contains("never touched: src/ui/**"), "{text}");
    let out = bin(ws.path(), &["report", "nobody", "--store", dir], "");
    assert_eq!(out.status.code(), Some(5));
    assert!(
        crate::common::stderr(&out).contains("no session nobody"),
        "{}",
        crate::common::stderr(&out)
    );
}

#[cfg(not(feature = "cli"))]
fn cli_prints(_: &Workspace, _: &str, _: &PlanReport) {}

/// A session where no run of an approved plan ended has no report: `report` says so (exit 5).
#[cfg(feature = "cli")]
#[test]
fn report_of_a_session_without_one_is_refused() {
    use crate::common::cli::{STORE, bin, pending_plan};
    let ws = tempfile::tempdir().expect("tempdir");
    let id = pending_plan(ws.path());
    let out = bin(ws.path(), &["report", &id, "--store", STORE], "");
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        crate::common::stderr(&out)
    );
    let err = crate::common::stderr(&out);
    assert!(err.contains("has no plan report"), "{err}");
}

/// Under `enforce`: the write outside is refused unasked and counted as such; the plan file
/// the model rewrote after approval (declared among the plan's files) is reported changed.
#[tokio::test]
async fn under_enforce_the_refused_write_and_the_changed_plan_file_are_reported() {
    let plan = format!("{PLAN}- `.agent/plans/p.md`\n");
    let server = ScriptedServer::start(vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        calls([
            write("w_in", "src/ui/button.rs"),
            write("w_out", "src/main.rs"),
            write("w_plan", ".agent/plans/p.md"),
        ]),
        text("done"),
    ])
    .await;
    let ws = Workspace::new();
    ws.plan("p.md", &plan);
    let dir = ws.path().join("st");
    std::fs::create_dir_all(&dir).expect("dir");
    #[cfg(feature = "sqlite")]
    let store: Arc<dyn SessionStore> = Arc::new(
        agent_controller::store::SqliteStore::open(dir.join("sessions.db")).expect("sqlite"),
    );
    #[cfg(not(feature = "sqlite"))]
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(&dir).expect("store"));
    let controller = controller(&server, &ws, "enforce", store.clone());
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    session.send_message("plan it").await.expect("run");
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let emitted = reports(&recorder.take());
    assert_eq!(emitted.len(), 1, "{emitted:?}");
    let report = &emitted[0];
    assert_eq!(
        report.written_inside,
        ["src/ui/button.rs", ".agent/plans/p.md"]
    );
    assert_eq!(report.enforced, ["src/main.rs"]);
    assert!(report.drift_approved.is_empty() && report.drift_rejected.is_empty());
    assert_eq!(report.untouched, ["src/theme.rs"]);
    assert!(report.plan_changed, "{report:?}");
    assert_ne!(
        report.current_sha256.as_deref(),
        Some(report.approved_sha256.as_str())
    );
    let id = session.id().to_owned();
    drop(session);
    let again = controller
        .restore_session(&id, agent_controller::SessionOptions::new())
        .await
        .expect("restore");
    assert_eq!(again.plan_report(), Some(report));
}

const CHILD_CONFIG: &str = r#"
[[subagents]]
id = "worker"
description = "Writes what it is told."
availableTools = ["read_file", "write_file"]

[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
{POLICY}

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "subagent"]
requireApproval = ["write_file"]
subagents = ["worker"]
"#;

const CHILD_PLAN: &str = "# Notes\n\n1. Write a.\n\n## Files\n- `src/a.txt`\n";

/// A child started by `subagent` in the plan's run writes as the parent's: its write inside
/// the plan's files and its write outside (waiting as drift under `ask`, or refused unasked
/// under `enforce`) count in the parent's report, and the declared file it wrote is not
/// untouched. The child itself reports nothing.
async fn child_run(policy: &str, approve: bool) -> (PlanReport, Vec<Event>, Workspace) {
    let script = vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        calls([call(
            "s_1",
            "subagent",
            &json!({ "agentType": "worker", "task": "Write a and b." }).to_string(),
        )]),
        calls([write("c_in", "src/a.txt"), write("c_out", "src/b.txt")]),
        text("CHILD-DONE"),
        text("done"),
    ];
    let server = ScriptedServer::start(script).await;
    let ws = Workspace::new();
    ws.plan("p.md", CHILD_PLAN);
    let config = CHILD_CONFIG.replace("{POLICY}", &format!("planScope = \"{policy}\""));
    let controller = AgentController::builder(
        config::parse(&config, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    session.send_message("plan it").await.expect("run");
    let mut outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    if policy == "ask" {
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = &outcome else {
            panic!("the child's write outside waits: {outcome:?}");
        };
        assert_eq!(tool_calls.len(), 1, "{tool_calls:?}");
        assert_eq!(tool_calls[0].tool_call_id(), "c_out");
        assert!(ws.path().join("src/a.txt").exists(), "inside ran unasked");
        let id = tool_calls[0].decision_id().to_owned();
        let decision = if approve {
            Decision::approve()
        } else {
            Decision::reject()
        };
        outcome = session.decide(&id, decision).await.expect("decide");
    }
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "done"),
        "{outcome:?}"
    );
    let events = recorder.take();
    let emitted = reports(&events);
    assert_eq!(emitted.len(), 1, "{emitted:?}");
    assert_eq!(session.plan_report(), Some(&emitted[0]));
    (emitted[0].clone(), events, ws)
}

#[tokio::test]
async fn a_childs_writes_count_in_the_parents_report_under_ask_refused() {
    let (report, events, ws) = child_run("ask", false).await;
    assert_eq!(report.written_inside, ["src/a.txt"]);
    assert_eq!(report.drift_rejected, ["src/b.txt"]);
    assert!(report.drift_approved.is_empty() && report.enforced.is_empty());
    assert!(report.untouched.is_empty(), "{report:?}");
    assert!(!ws.path().join("src/b.txt").exists());
    let child_reports = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentEvent { event, .. } if matches!(**event, Event::PlanReport { .. })))
        .count();
    assert_eq!(child_reports, 0, "the child reports nothing of its own");
}

#[tokio::test]
async fn a_childs_writes_count_in_the_parents_report_under_ask_approved() {
    let (report, _, ws) = child_run("ask", true).await;
    assert_eq!(report.written_inside, ["src/a.txt"]);
    assert_eq!(report.drift_approved, ["src/b.txt"]);
    assert!(report.drift_rejected.is_empty() && report.enforced.is_empty());
    assert!(report.untouched.is_empty(), "{report:?}");
    assert!(ws.path().join("src/b.txt").exists());
}

#[tokio::test]
async fn a_childs_writes_count_in_the_parents_report_under_enforce() {
    let (report, _, ws) = child_run("enforce", false).await;
    assert_eq!(report.written_inside, ["src/a.txt"]);
    assert_eq!(report.enforced, ["src/b.txt"]);
    assert!(report.drift_approved.is_empty() && report.drift_rejected.is_empty());
    assert!(report.untouched.is_empty(), "{report:?}");
    assert!(!ws.path().join("src/b.txt").exists());
}
