//! Observability: `tracing` spans for runs, model calls, tool calls, decisions and saves, seen
//! by a subscriber the host installs; nothing without one. The CLI prints them with
//! `--log-level`.

#[path = "it/common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_controller::model::scripted::ReplayModel;
use agent_controller::{
    AgentController, Decision, MemoryStore, RunOutcome, SessionOptions, ToolRegistry,
};
use common::{PLAN_BUILD, Workspace, graph, replay};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records every span as `name field=value ...`.
#[derive(Default)]
struct Spans {
    seen: Mutex<Vec<String>>,
    next: AtomicU64,
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }
}

impl Subscriber for Spans {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Fields(span.metadata().name().to_owned());
        span.record(&mut fields);
        self.seen.lock().expect("lock").push(fields.0);
        Id::from_u64(self.next.fetch_add(1, Ordering::SeqCst) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test(flavor = "current_thread")]
async fn runs_model_calls_tool_calls_decisions_and_saves_have_spans() {
    let spans = Arc::new(Spans::default());
    let _guard = tracing::subscriber::set_default(spans.clone());
    let ws = Workspace::new();
    let path = ws.plan("p.md", "# P\n\n1. x\n");
    std::fs::write(ws.path().join("a.txt"), "hello").expect("write");
    let model = replay(vec![
        ReplayModel::call("r1", "read_file", json!({ "path": "a.txt" })),
        ReplayModel::call("c1", "submit_plan", json!({ "path": path })),
        ReplayModel::text("building"),
    ]);
    let controller = AgentController::builder(graph(PLAN_BUILD), model)
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(Arc::new(MemoryStore::new()))
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan").id("s-1"))
        .await
        .expect("session");
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = session.send_message("go").await.expect("run")
    else {
        panic!("suspends")
    };
    session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("approve");
    let seen = spans.seen.lock().expect("lock").clone();
    let has = |prefix: &str| seen.iter().any(|s| s.starts_with(prefix));
    assert!(
        has("run session_id=s-1 run_id=run_1 mode_id=plan"),
        "{seen:#?}"
    );
    assert!(has("model_call step=1 mode_id=plan"), "{seen:#?}");
    assert!(
        has("tool_call tool_call_id=r1 tool_name=read_file"),
        "{seen:#?}"
    );
    assert!(
        has("decision session_id=s-1 run_id=run_1 tool_call_id=c1 action=approved"),
        "{seen:#?}"
    );
    assert!(has("save session_id=s-1 version=1"), "{seen:#?}");
    assert!(
        has("run session_id=s-1 run_id=run_1 mode_id=build"),
        "{seen:#?}"
    );
    assert!(has("model_call step=1 mode_id=build"), "{seen:#?}");
    assert!(has("save session_id=s-1 version=3"), "{seen:#?}");
}

#[test]
fn the_cli_traces_on_stderr_with_log_level_and_is_silent_without() {
    let ws = Workspace::new();
    let no_policy = ws.path().join("managed.toml");
    std::fs::write(&no_policy, "").expect("empty managed file");
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_agent-controller"))
            // Kept from the developer's own config layers.
            .env("XDG_CONFIG_HOME", ws.path().join("no-xdg"))
            .env("AGENT_CONTROLLER_MANAGED_CONFIG", &no_policy)
            .args(["run", "--config"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml"))
            .arg("--workspace")
            .arg(ws.path())
            .args(["--mode", "plan", "--approve", "--json"])
            .args(extra)
            .arg("Add dark mode")
            .output()
            .expect("run")
    };
    let quiet = run(&[]);
    assert!(quiet.status.success(), "{quiet:?}");
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(!stderr.contains("model_call"), "{stderr}");
    let traced = run(&["--log-level", "debug"]);
    assert!(traced.status.success(), "{traced:?}");
    let stderr = String::from_utf8_lossy(&traced.stderr);
    assert!(stderr.contains("run ended"), "{stderr}");
    assert!(stderr.contains("model_call"), "{stderr}");
    // stdout still carries only JSON events.
    for line in String::from_utf8_lossy(&traced.stdout).lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("a JSON event line");
    }
}
