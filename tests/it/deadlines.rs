//! Approval deadlines (issue 12, "Deadlines"): a mode's `approvalTimeout`, the deadline a plan
//! records, and the expiry of a plan nobody decided in time, applied exactly once by whoever
//! looks next. The clock is the controller's ([`AgentControllerBuilder::clock`]), so no test
//! sleeps; the CLI tests move a stored deadline into the past instead.
#![cfg(feature = "openai")]

use crate::common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_controller::config::{self, ConfigErrorKind};
use agent_controller::deadline::{self, ApprovalTimeout};
use agent_controller::store::{MemoryStore, SessionStore};
use agent_controller::{
    AgentController, Event, ModeBuilder, ModeGraphBuilder, RunOutcome, Session, SessionOptions,
    SuspendPayload, ToolRegistry,
};
use common::openai_server::{Reply, ScriptedServer, calls, submit};
use common::{Recorder, Workspace};
use serde_json::Value;

const CONFIG: &str = r#"
[[modes]]
id = "plan"
approvalTimeout = "24h"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
"#;

const PLAN: &str = "# Add dark mode\n\n1. Add a theme setting.\n";

/// 2027-01-15T08:00:00Z, in milliseconds since the Unix epoch.
const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;

/// A clock the test sets (milliseconds since the Unix epoch).
#[derive(Clone)]
struct TestClock(Arc<AtomicU64>);

impl TestClock {
    fn at(ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(ms)))
    }
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.0.load(Ordering::SeqCst))
    }
}

fn controller(
    config_text: &str,
    server: &ScriptedServer,
    ws: &Workspace,
    store: Option<Arc<dyn SessionStore>>,
    clock: &TestClock,
) -> AgentController {
    let clock = clock.clone();
    let mut builder = AgentController::builder(
        config::parse(config_text, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .clock(move || clock.now());
    if let Some(store) = store {
        builder = builder.store(store);
    }
    builder.build().expect("controller")
}

fn payload_of(outcome: &RunOutcome) -> &SuspendPayload {
    match outcome {
        RunOutcome::Suspended { payload, .. } => payload,
        other => panic!("expected a suspension, got {other:?}"),
    }
}

/// A plan submitted at T0 in `plan` (approvalTimeout 24h), waiting: the server has answered one
/// request and holds `more` replies for later.
async fn submitted(
    server_more: Vec<Reply>,
    store: Option<Arc<dyn SessionStore>>,
    clock: &TestClock,
) -> (
    ScriptedServer,
    Workspace,
    AgentController,
    Session,
    Recorder,
) {
    let mut script = vec![calls([submit("call_1", ".agent/plans/p.md")])];
    script.extend(server_more);
    let server = ScriptedServer::start(script).await;
    let ws = Workspace::new();
    ws.plan("p.md", PLAN);
    let controller = controller(CONFIG, &server, &ws, store, clock);
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("Add dark mode").await.expect("run");
    payload_of(&outcome);
    (server, ws, controller, session, recorder)
}

// ---------------------------------------------------------------------------------------------
// The config key

/// Each bad value is refused by the loader and by `check`, at the value's line and column,
/// naming the mode and the value; nothing is half-loaded.
#[test]
fn bad_approval_timeouts_are_refused_with_line_and_column() {
    for (value, says) in [
        ("soon", "not a duration"),
        ("24", "not a duration"),
        ("-5m", "not a duration"),
        ("1 h", "not a duration"),
        ("30m1h", "not a duration"),
        ("1.5h", "not a duration"),
        ("0s", "zero"),
        ("0h0m", "zero"),
        ("3651d", "too long"),
        ("99999999999999999999999s", "too long"),
    ] {
        let text = format!(
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\napprovalTimeout = \"{value}\"\n\n[[modes]]\nid = \"build\"\n"
        );
        let errors = config::check(&text, "modes.toml");
        assert_eq!(errors.len(), 1, "{value}: {errors:?}");
        let error = &errors[0];
        assert_eq!(
            error.kind(),
            ConfigErrorKind::InvalidApprovalTimeout,
            "{value}"
        );
        let at = error.location().expect("a location");
        assert_eq!((at.line, at.column), (4, 19), "{value}");
        assert!(error.message().contains(value), "{value}: {error}");
        assert!(error.message().contains(says), "{value}: {error}");
        assert!(error.message().contains("mode `plan`"), "{value}: {error}");
        assert!(error.to_string().starts_with("modes.toml:4:19:"), "{error}");
        let loaded = config::parse(&text, "modes.toml").expect_err("refused by the loader");
        assert_eq!(loaded.kind(), ConfigErrorKind::InvalidApprovalTimeout);
    }
    // Not a string at all: a type error at the value.
    let text = "[[modes]]\nid = \"plan\"\napprovalTimeout = 24\n";
    let errors = config::check(text, "modes.toml");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].location().map(|l| l.line), Some(3));
    assert!(errors[0].message().contains("string"), "{}", errors[0]);
}

#[test]
fn good_approval_timeouts_load_with_their_duration() {
    let graph = config::parse(CONFIG, "modes.toml").expect("valid");
    let plan = graph.mode(graph.get("plan").expect("plan"));
    let timeout = plan.approval_timeout().expect("a timeout");
    assert_eq!(timeout.as_str(), "24h");
    assert_eq!(timeout.duration(), Duration::from_secs(86_400));
    let build = graph.mode(graph.get("build").expect("build"));
    assert_eq!(build.approval_timeout(), None);
    // The same rules from code.
    let built = ModeGraphBuilder::new()
        .mode(
            ModeBuilder::new("plan")
                .transitions_to("build")
                .approval_timeout("1h30m"),
        )
        .mode(ModeBuilder::new("build"))
        .build()
        .expect("valid");
    let plan = built.mode(built.get("plan").expect("plan"));
    assert_eq!(
        plan.approval_timeout().map(ApprovalTimeout::duration),
        Some(Duration::from_secs(5_400))
    );
    let refused = ModeGraphBuilder::new()
        .mode(
            ModeBuilder::new("plan")
                .transitions_to("build")
                .approval_timeout("soon"),
        )
        .mode(ModeBuilder::new("build"))
        .build()
        .expect_err("refused");
    assert_eq!(refused.kind(), ConfigErrorKind::InvalidApprovalTimeout);
}

#[test]
fn the_schema_takes_a_duration_string() {
    let validator = jsonschema::validator_for(&config::schema()).expect("schema");
    let config = |timeout: Value| {
        serde_json::json!({ "modes": [
            { "id": "plan", "transitionsTo": "build", "approvalTimeout": timeout },
            { "id": "build" },
        ]})
    };
    for good in ["24h", "1h30m", "90s", "2d12h"] {
        assert!(validator.is_valid(&config(good.into())), "{good}");
    }
    for bad in [
        Value::from("soon"),
        Value::from("-5m"),
        Value::from("30m1h"),
        Value::from(""),
        Value::from(24),
    ] {
        assert!(!validator.is_valid(&config(bad.clone())), "{bad}");
    }
}

/// `agent-controller check` prints the error at `file:line:col` with the line and exits 2.
#[test]
fn check_refuses_a_bad_approval_timeout_at_its_line_and_column() {
    let ws = Workspace::new();
    let file = ws.path().join("modes.toml");
    std::fs::write(
        &file,
        "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\napprovalTimeout = \"soon\"\n\n[[modes]]\nid = \"build\"\n",
    )
    .expect("write");
    let out = bin().arg("check").arg(&file).output().expect("check");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:4:19: mode `plan`: approvalTimeout `soon`",
            file.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("approvalTimeout = \"soon\""), "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// The deadline a plan records

/// Submitted at T0 in a mode with `approvalTimeout = "24h"`: the payload (outcome, event, record,
/// listing) carries the timeout and T0 + 24h; a mode without a timeout records neither.
#[tokio::test]
async fn a_plan_records_its_deadline_in_the_payload_event_record_and_listing() {
    let clock = TestClock::at(T0);
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let (_server, _ws, ctl, session, recorder) =
        submitted(Vec::new(), Some(store.clone()), &clock).await;
    let pending = session.pending().expect("pending");
    assert_eq!(pending.payload().approval_timeout.as_deref(), Some("24h"));
    assert_eq!(pending.payload().deadline_at_ms, Some(T0 + 24 * HOUR));
    let suspended = recorder
        .take()
        .into_iter()
        .find_map(|e| match e {
            Event::ToolSuspended {
                suspend_payload, ..
            } => Some(suspend_payload),
            _ => None,
        })
        .expect("tool_suspended");
    let json = serde_json::to_value(&suspended).expect("json");
    assert_eq!(json["approvalTimeout"], "24h");
    assert_eq!(json["deadlineAtMs"], T0 + 24 * HOUR);
    let record = store
        .load(session.id())
        .await
        .expect("load")
        .expect("saved");
    let stored = &record.pending.expect("pending record").suspend_payload;
    assert_eq!(stored.deadline_at_ms, Some(T0 + 24 * HOUR));
    let listing = ctl.list_pending().await.expect("list");
    assert_eq!(listing.pending.len(), 1);
    assert_eq!(listing.pending[0].deadline_at_ms, Some(T0 + 24 * HOUR));
    assert_eq!(listing.pending[0].approval_timeout.as_deref(), Some("24h"));

    // Without approvalTimeout: no deadline anywhere.
    let server = ScriptedServer::start(vec![calls([submit("call_1", ".agent/plans/p.md")])]).await;
    let ws = Workspace::new();
    ws.plan("p.md", PLAN);
    let untimed = CONFIG.replace("approvalTimeout = \"24h\"\n", "");
    let untimed = controller(&untimed, &server, &ws, None, &clock);
    let mut session = untimed
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("x").await.expect("run");
    let json = serde_json::to_value(payload_of(&outcome)).expect("json");
    assert!(json.get("deadlineAtMs").is_none(), "{json}");
    assert!(json.get("approvalTimeout").is_none(), "{json}");
}

// ---------------------------------------------------------------------------------------------
// The CLI

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agent-controller"))
}

/// The shipped config with `approvalTimeout = "24h"` on its planning mode, written into `dir`.
fn timed_config(dir: &Path) -> std::path::PathBuf {
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml"))
            .expect("shipped config");
    let timed = shipped.replacen(
        "transitionsTo = \"build\"\n",
        "transitionsTo = \"build\"\napprovalTimeout = \"24h\"\n",
        1,
    );
    assert_ne!(timed, shipped);
    let path = dir.join("timed.toml");
    std::fs::write(&path, timed).expect("write config");
    path
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

fn now_ms() -> u64 {
    deadline::millis_since_epoch(SystemTime::now())
}

/// A plan left pending by `run --detach` under the timed config: (config, store spec, session).
fn detached(ws: &Workspace) -> (std::path::PathBuf, String, String) {
    let config = timed_config(ws.path());
    let spec = ws.path().join("sessions").display().to_string();
    let out = bin()
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--workspace")
        .arg(ws.path())
        .args([
            "--store",
            &spec,
            "--detach",
            "--mode",
            "plan",
            "--json",
            "Add dark mode",
        ])
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out);
    let suspended = events
        .iter()
        .find(|e| e["type"] == "tool_suspended")
        .expect("tool_suspended");
    assert_eq!(suspended["suspendPayload"]["approvalTimeout"], "24h");
    let session = events[0]["sessionId"].as_str().expect("id").to_owned();
    (config, spec, session)
}

/// `pending` shows when each plan expires: `deadline <RFC 3339>` on its line, `deadlineAtMs`
/// and `approvalTimeout` in `--json`; the event the run printed carried them too.
#[test]
fn pending_shows_the_deadline() {
    let ws = Workspace::new();
    let before = now_ms();
    let (_config, spec, session) = detached(&ws);
    let after = now_ms();
    let out = bin()
        .args(["pending", "--store", &spec, "--json"])
        .output()
        .expect("pending");
    assert_eq!(out.status.code(), Some(0));
    let listed = json_lines(&out);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["sessionId"], session.as_str());
    assert_eq!(listed[0]["approvalTimeout"], "24h");
    let at = listed[0]["deadlineAtMs"].as_u64().expect("deadlineAtMs");
    assert!(
        (before + 24 * HOUR..=after + 24 * HOUR).contains(&at),
        "{at}"
    );
    let out = bin()
        .args(["pending", "--store", &spec])
        .output()
        .expect("pending");
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        line.trim_end()
            .ends_with(&format!("\tdeadline {}", deadline::deadline_text(at))),
        "{line}"
    );
}
