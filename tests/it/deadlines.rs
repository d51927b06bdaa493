//! Approval deadlines (issue 12, "Deadlines"): a mode's `approvalTimeout`, the deadline a plan
//! records, and the expiry of a plan nobody decided in time, applied exactly once by whoever
//! looks next. The clock is the controller's ([`AgentControllerBuilder::clock`]), so no test
//! sleeps; the CLI tests move a stored deadline into the past instead.
#![cfg(feature = "openai")]

use crate::common;

#[cfg(feature = "cli")]
use std::path::Path;
#[cfg(feature = "cli")]
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agent_controller::config::{self, ConfigErrorKind};
use agent_controller::deadline::{self, ApprovalTimeout};
use agent_controller::store::{
    MemoryStore, PendingListing, SessionRecord, SessionStore, StoreError, open_store,
};
use agent_controller::{
    AgentController, Decision, Event, RunOutcome, Session, SessionError, SessionOptions,
    ToolRegistry, config::ModeBuilder, config::ModeGraphBuilder, event::DecisionOutcome,
    event::RunState, event::SuspendPayload, model::Message,
};
use common::clock::{T0, TestClock};
#[cfg(feature = "cli")]
use common::json_lines;
use common::openai_server::{Reply, ScriptedServer, call, calls, contents, submit, text};
use common::{Recorder, Workspace};

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

const HOUR: u64 = 3_600_000;

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

#[cfg(feature = "schema")]
#[test]
fn the_schema_takes_a_duration_string() {
    use serde_json::Value;

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
#[cfg(feature = "cli")]
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
    let pending = session.pending_plan().expect("pending");
    assert_eq!(
        pending.payload().terms.approval_timeout.as_deref(),
        Some("24h")
    );
    assert_eq!(pending.payload().terms.deadline_at_ms, Some(T0 + 24 * HOUR));
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
    assert_eq!(stored.terms.deadline_at_ms, Some(T0 + 24 * HOUR));
    let listing = ctl.list_pending().await.expect("list");
    assert_eq!(listing.pending.len(), 1);
    assert_eq!(
        listing.pending[0].terms.deadline_at_ms,
        Some(T0 + 24 * HOUR)
    );
    assert_eq!(
        listing.pending[0].terms.approval_timeout.as_deref(),
        Some("24h")
    );

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

#[cfg(feature = "cli")]
fn bin() -> Command {
    crate::common::agent_controller()
}

/// The shipped config with `approvalTimeout = "24h"` on its planning mode, written into `dir`.
#[cfg(feature = "cli")]
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

#[cfg(feature = "cli")]
fn now_ms() -> u64 {
    deadline::millis_since_epoch(std::time::SystemTime::now())
}

/// A plan left pending by `run --detach` under the timed config: (config, store spec, session).
#[cfg(feature = "cli")]
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
#[cfg(feature = "cli")]
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

// ---------------------------------------------------------------------------------------------
// Expiry

/// The deadline of the plan submitted at T0 (T0 + 24h), as the note and the record show it.
const DEADLINE_TEXT: &str = "2027-01-16T08:00:00Z";
const EXPIRED_NOTE: &str = "Not approved: no decision was taken within 24h (approvalTimeout); the plan expired at 2027-01-16T08:00:00Z.";

/// The `submit_plan` results for `call_1` in the conversation.
fn results_of_call_1(messages: &[Message]) -> Vec<&str> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } if tool_call_id == "call_1" => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// The decision records the events carried, by outcome.
fn decided_events(events: &[Event]) -> Vec<(String, Option<DecisionOutcome>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolEnd {
                decision: Some(d), ..
            } => Some((d.decision_id.clone(), d.outcome)),
            _ => None,
        })
        .collect()
}

/// One millisecond before the deadline the plan is still pending and an approval works as
/// always: the mode changes and the model carries on.
#[tokio::test]
async fn a_decision_before_the_deadline_works_normally() {
    let clock = TestClock::at(T0);
    let (server, _ws, _ctl, mut session, _recorder) =
        submitted(vec![text("building")], None, &clock).await;
    clock.set(T0 + 24 * HOUR - 1);
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approved before the deadline");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(session.mode().id(), "build");
    assert_eq!(
        session.decision_history().last().and_then(|d| d.outcome),
        Some(DecisionOutcome::Approved)
    );
    assert_eq!(server.served(), 2);
}

/// At the deadline, an approval (and a rejection, and a decision by run and tool-call id) is
/// refused with `Expired`; the plan counts as rejected once: the model's result says so, the
/// history records `expired`, the run ended `completed`, the mode stays, no model call is made.
/// With and without a store.
#[tokio::test]
async fn an_approval_after_the_deadline_is_refused_and_the_plan_counts_as_rejected() {
    for store in [
        None,
        Some(Arc::new(MemoryStore::new()) as Arc<dyn SessionStore>),
    ] {
        let with_store = store.is_some();
        let clock = TestClock::at(T0);
        let (server, _ws, _ctl, mut session, recorder) =
            submitted(vec![text("must not be asked")], store.clone(), &clock).await;
        let run_id = session.pending_plan().expect("pending").run_id().to_owned();
        recorder.take();
        clock.set(T0 + 24 * HOUR);
        let refused = session
            .decide("decision_1", Decision::approve())
            .await
            .expect_err("too late");
        assert_eq!(
            refused,
            SessionError::Expired {
                decision_id: "decision_1".into(),
                deadline_at: DEADLINE_TEXT.into(),
                tool_name: None,
                suspension_kind: None,
            },
            "store: {with_store}"
        );
        assert!(
            refused.to_string().contains("counts as rejected"),
            "{refused}"
        );
        assert_eq!(session.mode().id(), "plan");
        assert!(session.pending_plan().is_none());
        assert_eq!(
            session.run_state(),
            Some((run_id.as_str(), RunState::Completed))
        );
        let history = session.decision_history();
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].outcome, Some(DecisionOutcome::Expired));
        assert_eq!(history[0].decision_id, "decision_1");
        assert_eq!(history[0].decided_at.as_deref(), Some(DEADLINE_TEXT));
        assert_eq!(history[0].decided_by, None);
        assert_eq!(history[0].target_mode_id, None);
        let results = results_of_call_1(session.messages());
        assert_eq!(results.len(), 1);
        assert!(results[0].starts_with(EXPIRED_NOTE), "{}", results[0]);
        let events = recorder.take();
        assert_eq!(
            common::kinds(&events),
            ["agent_start", "tool_end", "agent_end"],
            "store: {with_store}"
        );
        assert_eq!(
            decided_events(&events),
            [("decision_1".to_owned(), Some(DecisionOutcome::Expired))]
        );
        assert!(matches!(
            events.last(),
            Some(Event::AgentEnd {
                reason: RunState::Completed,
                ..
            })
        ));
        // Applied once: later decisions are refused the same way and change nothing.
        for again in [
            session.decide("decision_1", Decision::reject()).await,
            session.resume(&run_id, "call_1", Decision::approve()).await,
        ] {
            assert!(
                matches!(again, Err(SessionError::Expired { .. })),
                "{again:?}"
            );
        }
        assert!(recorder.take().is_empty());
        assert_eq!(session.decision_history().len(), 1);
        assert_eq!(server.served(), 1, "no model call after an expiry");
        if let Some(store) = store {
            let record = store
                .load(session.id())
                .await
                .expect("load")
                .expect("saved");
            assert!(record.pending.is_none());
            assert_eq!(record.history.len(), 1);
            assert_eq!(record.version, session.version());
        }
    }
}

/// `Session::expired`: a host that finds nothing pending learns from the library that the
/// decision expired (the refusal `decide` gives), not that it was decided.
#[tokio::test]
async fn a_host_asks_the_session_whether_a_decision_expired() {
    let clock = TestClock::at(T0);
    let (_server, _ws, _ctl, mut session, _recorder) =
        submitted(vec![text("must not be asked")], None, &clock).await;
    assert_eq!(session.expired(None), None, "pending, not expired");
    assert_eq!(session.expired(Some("decision_1")), None);
    clock.set(T0 + 24 * HOUR);
    session.expire_if_due().await.expect("expire");
    let expired = || SessionError::Expired {
        decision_id: "decision_1".into(),
        deadline_at: DEADLINE_TEXT.into(),
        tool_name: None,
        suspension_kind: None,
    };
    assert_eq!(session.expired(None), Some(expired()));
    assert_eq!(session.expired(Some("decision_1")), Some(expired()));
    assert_eq!(session.expired(Some("decision_9")), None, "never given out");
    let refused = session.decide("decision_1", Decision::approve()).await;
    assert_eq!(
        refused.expect_err("refused"),
        expired(),
        "as decide refuses it"
    );
}

/// A message sent after the deadline finds the plan expired (not cancelled by the message), and
/// the model reads why in the conversation: it may revise when asked.
#[tokio::test]
async fn a_message_after_the_deadline_finds_the_plan_expired() {
    let clock = TestClock::at(T0);
    let (server, _ws, _ctl, mut session, _recorder) =
        submitted(vec![text("revising")], None, &clock).await;
    clock.set(T0 + 25 * HOUR);
    session.send_message("still there?").await.expect("run");
    let outcomes: Vec<_> = session
        .decision_history()
        .iter()
        .map(|d| d.outcome)
        .collect();
    assert_eq!(outcomes, [Some(DecisionOutcome::Expired)]);
    let bodies = server.bodies().await;
    let tool_results = contents(&bodies[1], "tool");
    assert!(
        tool_results.iter().any(|c| c.starts_with(EXPIRED_NOTE)),
        "{tool_results:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Every store

/// A store of each kind this build has, with a second handle on the same data (another host's).
struct Backend {
    name: &'static str,
    store: Arc<dyn SessionStore>,
    other: Arc<dyn SessionStore>,
    _dir: tempfile::TempDir,
    #[cfg(feature = "postgres")]
    _schema: Option<common::postgres::TestSchema>,
}

fn backends() -> Vec<Backend> {
    let mut all = Vec::new();
    let memory: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let mut specs: Vec<(&'static str, Option<String>)> = Vec::new();
    let dir = tempfile::tempdir().expect("tmp");
    all.push(Backend {
        name: "memory",
        store: memory.clone(),
        other: memory,
        _dir: dir,
        #[cfg(feature = "postgres")]
        _schema: None,
    });
    specs.push(("files", None));
    #[cfg(feature = "sqlite")]
    specs.push(("sqlite", None));
    for (name, _) in specs {
        let dir = tempfile::tempdir().expect("tmp");
        let spec = match name {
            "sqlite" => format!("sqlite:{}", dir.path().join("sessions.db").display()),
            _ => dir.path().join("sessions").display().to_string(),
        };
        all.push(Backend {
            name,
            store: open_store(&spec).expect("store"),
            other: open_store(&spec).expect("store"),
            _dir: dir,
            #[cfg(feature = "postgres")]
            _schema: None,
        });
    }
    #[cfg(feature = "postgres")]
    if let Some(schema) = common::postgres::TestSchema::new() {
        let spec = schema.url.clone();
        all.push(Backend {
            name: "postgres",
            store: open_store(&spec).expect("store"),
            other: open_store(&spec).expect("store"),
            _dir: tempfile::tempdir().expect("tmp"),
            _schema: Some(schema),
        });
    }
    all
}

/// A plan submitted at T0 on `store`, left pending (the host stopped): (server, workspace,
/// session id).
async fn pending_on(store: &Arc<dyn SessionStore>) -> (ScriptedServer, Workspace, String) {
    let clock = TestClock::at(T0);
    let (server, ws, _ctl, session, _recorder) =
        submitted(Vec::new(), Some(store.clone()), &clock).await;
    (server, ws, session.id().to_owned())
}

/// What the store holds after the expiry: nothing pending, one expired decision in the history,
/// one result for the plan's call with the note, the run ended, the mode unchanged.
fn assert_expired_once(record: &SessionRecord, name: &str) {
    assert!(record.pending.is_none(), "{name}");
    assert_eq!(record.mode_id, "plan", "{name}");
    let outcomes: Vec<_> = record.history.iter().map(|d| d.outcome).collect();
    assert_eq!(outcomes, [Some(DecisionOutcome::Expired)], "{name}");
    assert_eq!(
        record.last_decided.as_ref().and_then(|d| d.outcome),
        Some(DecisionOutcome::Expired),
        "{name}"
    );
    let results = results_of_call_1(&record.messages);
    assert_eq!(results.len(), 1, "{name}: {results:?}");
    assert!(
        results[0].starts_with(EXPIRED_NOTE),
        "{name}: {}",
        results[0]
    );
    assert_eq!(
        record.run.as_ref().map(|r| r.state),
        Some(RunState::Completed),
        "{name}"
    );
}

/// Two hosts restore the session at once after its deadline (both read it before either
/// saves): the expiry is applied once (one save, one set of events, one history entry); the
/// host that loses the compare-and-swap loads the session again, and both come back without
/// the plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_concurrently_after_the_deadline_expires_once_on_every_store() {
    for b in backends() {
        let (server, ws, id) = pending_on(&b.store).await;
        let before = b
            .store
            .load(&id)
            .await
            .expect("load")
            .expect("saved")
            .version;
        let late = TestClock::at(T0 + 25 * HOUR);
        // Both hosts load the session before either saves: their saves meet at the gate.
        let gate = Arc::new(tokio::sync::Barrier::new(2));
        let hosts = [&b.store, &b.other].map(|store| {
            let racing: Arc<dyn SessionStore> =
                Arc::new(Racing::gated(store.clone(), gate.clone()));
            let ctl = controller(CONFIG, &server, &ws, Some(racing), &late);
            let recorder = Recorder::default();
            let id = id.clone();
            let options = recorder.options();
            let task = tokio::spawn(async move { ctl.restore_session(&id, options).await });
            (task, recorder)
        });
        let mut applied = 0;
        for (task, recorder) in hosts {
            let session = task.await.expect("task").expect("restored");
            assert!(session.pending_plan().is_none(), "{}", b.name);
            assert_eq!(session.decision_history().len(), 1, "{}", b.name);
            let events = recorder.take();
            match decided_events(&events).as_slice() {
                [] => assert!(events.is_empty(), "{}: {events:?}", b.name),
                [(_, Some(DecisionOutcome::Expired))] => applied += 1,
                other => panic!("{}: {other:?}", b.name),
            }
        }
        assert_eq!(
            applied, 1,
            "{}: exactly one host applies the expiry",
            b.name
        );
        let record = b.store.load(&id).await.expect("load").expect("saved");
        assert_expired_once(&record, b.name);
        assert_eq!(record.version, before + 1, "{}: one save", b.name);
    }
}

/// A host's view of a store for forcing races: it returns one stale record first (the session
/// as it was before another host saved), and its first save waits at `gate` until the other
/// host's save gets there too, so both saves name the same version.
struct Racing {
    inner: Arc<dyn SessionStore>,
    stale: std::sync::Mutex<Option<SessionRecord>>,
    gate: Option<Arc<tokio::sync::Barrier>>,
}

impl Racing {
    fn stale(inner: Arc<dyn SessionStore>, record: SessionRecord) -> Self {
        Self {
            inner,
            stale: std::sync::Mutex::new(Some(record)),
            gate: None,
        }
    }

    fn gated(inner: Arc<dyn SessionStore>, gate: Arc<tokio::sync::Barrier>) -> Self {
        Self {
            inner,
            stale: std::sync::Mutex::new(None),
            gate: Some(gate),
        }
    }
}

#[agent_controller::async_trait]
impl SessionStore for Racing {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let stale = self.stale.lock().expect("lock").take();
        match stale {
            Some(record) => Ok(Some(record)),
            None => self.inner.load(id).await,
        }
    }
    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        if let Some(gate) = &self.gate {
            gate.wait().await;
        }
        self.inner.save(record, expected).await
    }
    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.delete(id).await
    }
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        self.inner.list_pending(now_ms).await
    }
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.inner.expire(before).await
    }
}

/// The race made certain: a host read the session before another applied the expiry, so its
/// own expiry loses the compare-and-swap; it loads the session again and returns it as the
/// other left it, without applying anything (no events, still one history entry).
#[tokio::test]
async fn a_host_that_loses_the_race_to_expire_loads_the_expired_session() {
    for b in backends() {
        let (server, ws, id) = pending_on(&b.store).await;
        let stale = b.store.load(&id).await.expect("load").expect("saved");
        let late = TestClock::at(T0 + 25 * HOUR);
        let expired = deadline::expire_due(&*b.other, late.now())
            .await
            .expect("expire");
        assert_eq!(expired.len(), 1, "{}", b.name);
        let racing: Arc<dyn SessionStore> = Arc::new(Racing::stale(b.store.clone(), stale));
        let ctl = controller(CONFIG, &server, &ws, Some(racing), &late);
        let recorder = Recorder::default();
        let session = ctl
            .restore_session(&id, recorder.options())
            .await
            .expect("restored after losing the race");
        assert!(session.pending_plan().is_none(), "{}", b.name);
        assert_eq!(session.decision_history().len(), 1, "{}", b.name);
        assert!(recorder.take().is_empty(), "{}", b.name);
        let record = b.store.load(&id).await.expect("load").expect("saved");
        assert_expired_once(&record, b.name);
    }
}

/// `list_pending` (and `deadline::expire_due`) after the deadline: nothing is pending, the
/// history shows the expiry, and looking again expires nothing more. Before the deadline the
/// plan is listed and left alone.
#[tokio::test]
async fn pending_after_the_deadline_lists_nothing_and_the_history_shows_the_expiry() {
    for b in backends() {
        let (server, ws, id) = pending_on(&b.store).await;
        let clock = TestClock::at(T0 + 23 * HOUR);
        let ctl = controller(CONFIG, &server, &ws, Some(b.other.clone()), &clock);
        let listed = ctl.list_pending().await.expect("list");
        assert_eq!(listed.pending.len(), 1, "{}", b.name);
        assert_eq!(
            deadline::expire_due(&*b.store, clock.now())
                .await
                .expect("expire"),
            [],
            "{}",
            b.name
        );
        clock.set(T0 + 24 * HOUR);
        let listed = ctl.list_pending().await.expect("list");
        assert!(listed.pending.is_empty(), "{}: {listed:?}", b.name);
        let record = b.store.load(&id).await.expect("load").expect("saved");
        assert_expired_once(&record, b.name);
        assert_eq!(
            deadline::expire_due(&*b.store, clock.now())
                .await
                .expect("expire"),
            [],
            "{}: applied once",
            b.name
        );
        // A host restoring it now finds it expired, and an approval is refused.
        let mut session = ctl
            .restore_session(&id, SessionOptions::new())
            .await
            .expect("restore");
        assert!(matches!(
            session.decide("decision_1", Decision::approve()).await,
            Err(SessionError::Expired { .. })
        ));
        let record = b.store.load(&id).await.expect("load").expect("saved");
        assert_expired_once(&record, b.name);
    }
}

/// The expiry a session applies and the one applied to a stored record (`pending`, no
/// controller) leave the same conversation, history and run.
#[tokio::test]
async fn a_session_and_a_store_expire_a_plan_alike() {
    let mut records = Vec::new();
    for by_session in [true, false] {
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let clock = TestClock::at(T0);
        let server =
            ScriptedServer::start(vec![calls([submit("call_1", ".agent/plans/p.md")])]).await;
        let ws = Workspace::new();
        ws.plan("p.md", PLAN);
        let ctl = controller(CONFIG, &server, &ws, Some(store.clone()), &clock);
        let mut session = ctl
            .start_session(SessionOptions::new().mode("plan").id("s1"))
            .await
            .expect("session");
        session.send_message("Add dark mode").await.expect("run");
        clock.set(T0 + 30 * HOUR);
        if by_session {
            let expired = session.expire_if_due().await.expect("expire");
            assert_eq!(expired.len(), 1);
            assert_eq!(expired[0].outcome, Some(DecisionOutcome::Expired));
            assert_eq!(session.expire_if_due().await.expect("again"), []);
        } else {
            let expired = deadline::expire_due(&*store, clock.now())
                .await
                .expect("expire");
            assert_eq!(expired.len(), 1);
            assert_eq!(expired[0].session_id, "s1");
        }
        let mut record = store.load("s1").await.expect("load").expect("saved");
        record.updated_at = 0;
        // Each side ran in a workspace of its own.
        record.workspace = None;
        records.push(record);
    }
    assert_expired_once(&records[0], "session");
    assert_eq!(records[0], records[1]);
}

// ---------------------------------------------------------------------------------------------
// The CLI after the deadline

/// Moves the stored deadline of `session`'s pending plan to one second ago: what the store
/// holds once 24 hours have passed.
#[cfg(feature = "cli")]
fn pass_the_deadline(spec: &str, session: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = open_store(spec).expect("store");
        let mut record = store.load(session).await.expect("load").expect("saved");
        let payload = &mut record.pending.as_mut().expect("pending").suspend_payload;
        let past = now_ms() - 1_000;
        payload.terms.deadline_at_ms = Some(past);
        let expected = record.version;
        record.version += 1;
        store.save(&record, Some(expected)).await.expect("save");
        deadline::deadline_text(past)
    })
}

#[cfg(feature = "cli")]
fn load_record(spec: &str, session: &str) -> SessionRecord {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let store = open_store(spec).expect("store");
            store.load(session).await.expect("load").expect("saved")
        })
}

/// What keeps a store alive while a test uses it (a Postgres schema).
#[cfg(feature = "cli")]
type Keep = Option<Box<dyn std::any::Any>>;

/// Every store the CLI can open in this build: (name, spec, what keeps it).
#[cfg(feature = "cli")]
fn cli_stores(ws: &Workspace) -> Vec<(&'static str, String, Keep)> {
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(unused_mut))]
    let mut stores = vec![(
        "dir",
        ws.path().join("sessions").display().to_string(),
        None,
    )];
    #[cfg(feature = "sqlite")]
    stores.push((
        "sqlite",
        format!("sqlite:{}", ws.path().join("sessions.db").display()),
        None,
    ));
    #[cfg(feature = "postgres")]
    if let Some(schema) = common::postgres::TestSchema::new() {
        stores.push((
            "postgres",
            schema.url.clone(),
            Some(Box::new(schema) as Box<dyn std::any::Any>),
        ));
    }
    stores
}

/// `run --detach` under the timed config on `spec`: the session id.
#[cfg(feature = "cli")]
fn detach_on(ws: &Workspace, config: &Path, spec: &str) -> String {
    let out = bin()
        .arg("run")
        .arg("--config")
        .arg(config)
        .arg("--workspace")
        .arg(ws.path())
        .args([
            "--store",
            spec,
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
    json_lines(&out)[0]["sessionId"]
        .as_str()
        .expect("id")
        .to_owned()
}

/// After the deadline, `pending` lists nothing (saying on stderr which plan expired), the
/// record's history shows the expiry, and a second `pending` expires nothing more; on every
/// store.
#[cfg(feature = "cli")]
#[test]
fn cli_pending_after_the_deadline_shows_nothing_and_the_history_shows_the_expiry() {
    let ws = Workspace::new();
    let config = timed_config(ws.path());
    for (name, spec, _keep) in cli_stores(&ws) {
        let session = detach_on(&ws, &config, &spec);
        let deadline = pass_the_deadline(&spec, &session);
        let out = bin()
            .args(["pending", "--store", &spec, "--json"])
            .output()
            .expect("pending");
        assert_eq!(out.status.code(), Some(0), "{name}");
        assert!(json_lines(&out).is_empty(), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "expired: session {session} decision decision_1: no decision by {deadline}"
            )),
            "{name}: {stderr}"
        );
        let record = load_record(&spec, &session);
        assert!(record.pending.is_none(), "{name}");
        assert_eq!(
            record.history.iter().map(|d| d.outcome).collect::<Vec<_>>(),
            [Some(DecisionOutcome::Expired)],
            "{name}"
        );
        assert_eq!(record.mode_id, "plan");
        let again = bin()
            .args(["pending", "--store", &spec])
            .output()
            .expect("pending");
        assert!(
            !String::from_utf8_lossy(&again.stderr).contains("expired:"),
            "{name}: applied once"
        );
        assert_eq!(
            load_record(&spec, &session).version,
            record.version,
            "{name}"
        );
    }
}

/// `decide --approve` after the deadline: refused with exit 3 (the plan counts as rejected,
/// not approved), saying it expired; the events show the expiry this process applied; the mode
/// stays. Deciding again is refused the same way. Before the deadline `decide` works as always.
#[cfg(feature = "cli")]
#[test]
fn cli_decide_after_the_deadline_is_refused_with_exit_3() {
    let ws = Workspace::new();
    let config = timed_config(ws.path());
    let spec = ws.path().join("sessions").display().to_string();
    let decide = |session: &str| {
        bin()
            .arg("decide")
            .arg("--config")
            .arg(&config)
            .arg("--workspace")
            .arg(ws.path())
            .args(["--store", &spec, session, "--approve", "--json"])
            .output()
            .expect("decide")
    };
    let session = detach_on(&ws, &config, &spec);
    pass_the_deadline(&spec, &session);
    let out = decide(&session);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("decision `decision_1` expired at"),
        "{stderr}"
    );
    assert!(stderr.contains("counts as rejected"), "{stderr}");
    let events = json_lines(&out);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["agent_start", "tool_end", "agent_end"],
        "{events:?}"
    );
    assert_eq!(events[1]["decision"]["outcome"], "expired");
    assert!(
        events[1]["result"]
            .as_str()
            .is_some_and(|r| r.starts_with("Not approved: no decision was taken within 24h")),
        "{events:?}"
    );
    let again = decide(&session);
    assert_eq!(again.status.code(), Some(3));
    assert!(json_lines(&again).is_empty(), "nothing applied twice");
    let record = load_record(&spec, &session);
    assert_eq!(record.mode_id, "plan");
    assert_eq!(record.history.len(), 1);

    // Before the deadline: approved, handed over to build.
    let session = detach_on(&ws, &config, &spec);
    let out = decide(&session);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(load_record(&spec, &session).mode_id, "build");
}

/// The terminal shows when the plan expires: under the plan at the prompt, and in the
/// `plan submitted` line.
#[cfg(feature = "cli")]
#[test]
fn the_terminal_shows_the_deadline_under_the_plan_and_in_the_event_line() {
    let ws = Workspace::new();
    let config = timed_config(ws.path());
    let spec = ws.path().join("sessions").display().to_string();
    let out = bin()
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--workspace")
        .arg(ws.path())
        .args(["--store", &spec, "--mode", "plan", "Add dark mode"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(4),
        "dismissed with a store: pending"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let session = stdout
        .lines()
        .find_map(|l| l.strip_prefix("suspended: session "))
        .and_then(|rest| rest.split(' ').next())
        .expect("the suspended line");
    let record = load_record(&spec, session);
    let at = record
        .pending
        .expect("pending")
        .suspend_payload
        .terms
        .deadline_at_ms;
    let by = format!(
        "(decide by {}, approvalTimeout 24h; after that it counts as rejected)",
        deadline::deadline_text(at.expect("a deadline"))
    );
    assert!(
        stdout.contains(&format!("waiting for a decision {by}")),
        "{stdout}"
    );
    let shown = stderr
        .lines()
        .skip_while(|l| !l.starts_with("(plan file "))
        .nth(1);
    assert_eq!(shown, Some(by.as_str()), "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// Tool calls that wait for approval

/// A mode whose `write_file` calls wait for approval, for at most an hour.
const TOOL_CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
approvalTimeout = "1h"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

fn write(id: &str, path: &str) -> common::openai_server::Call {
    call(
        id,
        "write_file",
        &serde_json::json!({ "path": path, "content": "x" }).to_string(),
    )
}

/// Two `write_file` calls of one reply made at T0 wait for approval on `store` (if any).
async fn two_calls_waiting(
    store: Option<Arc<dyn SessionStore>>,
    clock: &TestClock,
    id: &str,
) -> (
    ScriptedServer,
    Workspace,
    AgentController,
    Session,
    Recorder,
) {
    let server = ScriptedServer::start(vec![
        calls([write("c1", "a.txt"), write("c2", "b.txt")]),
        text("must not be asked"),
    ])
    .await;
    let ws = Workspace::new();
    let ctl = controller(TOOL_CONFIG, &server, &ws, store, clock);
    let recorder = Recorder::default();
    let mut session = ctl
        .start_session(recorder.options().id(id))
        .await
        .expect("session");
    let outcome = session.send_message("write both").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    (server, ws, ctl, session, recorder)
}

/// A tool call's deadline is that of the mode it was made in (1h here): recorded in its
/// payload and listing. Past it, an approval is refused (`Expired`); the undecided call expires,
/// the call approved while it waited never runs, no file is written, no model call is made, and
/// the history shows both decisions in the model's order.
#[tokio::test]
async fn a_tool_call_not_decided_by_its_deadline_expires_and_nothing_of_its_reply_runs() {
    let clock = TestClock::at(T0);
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let (server, ws, ctl, mut session, recorder) =
        two_calls_waiting(Some(store.clone()), &clock, "t1").await;
    let waiting = common::waiting_calls(&session);
    assert_eq!(waiting.len(), 2);
    for call in &waiting {
        assert_eq!(call.payload().terms.approval_timeout.as_deref(), Some("1h"));
        assert_eq!(call.payload().terms.deadline_at_ms, Some(T0 + HOUR));
    }
    let listed = ctl.list_pending().await.expect("list");
    assert_eq!(
        listed
            .pending
            .iter()
            .map(|p| p.terms.deadline_at_ms)
            .collect::<Vec<_>>(),
        [Some(T0 + HOUR), Some(T0 + HOUR)]
    );
    let (first, second) = (
        waiting[0].decision_id().to_owned(),
        waiting[1].decision_id().to_owned(),
    );
    clock.set(T0 + HOUR - 1);
    session
        .decide(&first, Decision::approve())
        .await
        .expect("approved in time");
    recorder.take();
    clock.set(T0 + HOUR);
    let refused = session
        .decide(&second, Decision::approve())
        .await
        .expect_err("too late");
    assert_eq!(
        refused,
        SessionError::Expired {
            decision_id: second.clone(),
            deadline_at: deadline::deadline_text(T0 + HOUR),
            tool_name: Some("write_file".into()),
            suspension_kind: None,
        }
    );
    assert!(!ws.path().join("a.txt").exists() && !ws.path().join("b.txt").exists());
    assert_eq!(server.served(), 1, "no model call after an expiry");
    assert!(session.pending().is_empty());
    assert_eq!(
        session.run_state().map(|(_, s)| s),
        Some(RunState::Completed)
    );
    let history: Vec<_> = session
        .decision_history()
        .iter()
        .map(|d| (d.decision_id.clone(), d.outcome))
        .collect();
    assert_eq!(
        history,
        [
            (first.clone(), Some(DecisionOutcome::Approved)),
            (second.clone(), Some(DecisionOutcome::Expired)),
        ]
    );
    let results = common::tool_results(session.messages());
    let results: Vec<(&str, &str)> = results
        .iter()
        .map(|(id, content)| (id.as_str(), content.as_str()))
        .collect();
    assert_eq!(
        results,
        [
            ("c1", deadline::APPROVED_NOT_RUN_RESULT),
            (
                "c2",
                "Not approved: no decision was taken within 1h (approvalTimeout); this tool call expired at 2027-01-15T09:00:00Z and was not executed."
            ),
        ]
    );
    let events = recorder.take();
    assert_eq!(
        common::kinds(&events),
        ["agent_start", "tool_end", "tool_end", "agent_end"]
    );
    assert_eq!(
        decided_events(&events),
        [
            (first.clone(), Some(DecisionOutcome::Approved)),
            (second.clone(), Some(DecisionOutcome::Expired)),
        ]
    );
    // Applied once: deciding the expired call again is refused too, and nothing more happens.
    assert!(matches!(
        session.decide(&second, Decision::reject()).await,
        Err(SessionError::Expired { .. })
    ));
    assert!(recorder.take().is_empty());
    let record = store.load("t1").await.expect("load").expect("saved");
    assert!(record.pending_tool_calls.is_empty());
    assert_eq!(record.history.len(), 2);
}

/// Tool calls past their deadline on every store: `list_pending` expires them (listing nothing),
/// once; a session that expires them leaves the same record as a store-only host (`pending`).
#[tokio::test]
async fn waiting_tool_calls_expire_once_on_every_store_and_a_session_and_a_store_agree() {
    for b in backends() {
        let clock = TestClock::at(T0);
        let (server, ws, ctl, _session, _recorder) =
            two_calls_waiting(Some(b.store.clone()), &clock, "t-store").await;
        clock.set(T0 + 2 * HOUR);
        let late = controller(TOOL_CONFIG, &server, &ws, Some(b.other.clone()), &clock);
        assert!(
            late.list_pending().await.expect("list").pending.is_empty(),
            "{}",
            b.name
        );
        assert!(ctl.list_pending().await.expect("again").pending.is_empty());
        let by_store = b.store.load("t-store").await.expect("load").expect("saved");
        let outcomes: Vec<_> = by_store.history.iter().map(|d| d.outcome).collect();
        assert_eq!(
            outcomes,
            [
                Some(DecisionOutcome::Expired),
                Some(DecisionOutcome::Expired)
            ],
            "{}",
            b.name
        );
        assert_eq!(
            deadline::expire_due(&*b.store, clock.now())
                .await
                .expect("expire"),
            [],
            "{}: applied once",
            b.name
        );
        // The same expiry applied by a session (restore), on a twin session.
        let clock = TestClock::at(T0);
        let (_server, _ws, ctl, _session, _recorder) =
            two_calls_waiting(Some(b.store.clone()), &clock, "t-session").await;
        clock.set(T0 + 2 * HOUR);
        let restored = ctl
            .restore_session("t-session", SessionOptions::new())
            .await
            .expect("restore");
        assert!(restored.pending().is_empty(), "{}", b.name);
        let by_session = b
            .store
            .load("t-session")
            .await
            .expect("load")
            .expect("saved");
        let same = |r: &SessionRecord| (r.messages.clone(), r.history.clone(), r.run.clone());
        assert_eq!(same(&by_session), same(&by_store), "{}", b.name);
    }
}

/// On the command line: a waiting tool call shows its deadline (`pending`, the event), and
/// `decide --approve` after it is refused with exit 3 and runs nothing.
#[cfg(feature = "cli")]
#[test]
fn cli_a_tool_call_after_its_deadline_is_refused_and_not_run() {
    let ws = Workspace::new();
    let config = ws.path().join("tools.toml");
    std::fs::write(&config, TOOL_CONFIG).expect("config");
    let spec = ws.path().join("sessions").display().to_string();
    let server = ScriptedServer::start_blocking(vec![calls([write("c1", "a.txt")])]);
    let cli = |command: &str, args: &[&str]| {
        bin()
            .arg(command)
            .arg("--config")
            .arg(&config)
            .arg("--workspace")
            .arg(ws.path())
            .args(["--model", "openai/test-model", "--store", &spec])
            .args(args)
            .envs(server.env())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("cli")
    };
    let out = cli("run", &["--json", "write it"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out);
    let session = events[0]["sessionId"].as_str().expect("id").to_owned();
    let suspended = events
        .iter()
        .find(|e| e["type"] == "tool_suspended")
        .expect("tool_suspended");
    assert_eq!(suspended["suspendPayload"]["approvalTimeout"], "1h");
    let at = suspended["suspendPayload"]["deadlineAtMs"]
        .as_u64()
        .expect("deadlineAtMs");
    let listed = bin()
        .args(["pending", "--store", &spec])
        .output()
        .expect("pending");
    let line = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        line.contains("tool call write_file")
            && line
                .trim_end()
                .ends_with(&format!("\tdeadline {}", deadline::deadline_text(at))),
        "{line}"
    );
    // An hour later (the stored deadline moved into the past).
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let store = open_store(&spec).expect("store");
            let mut record = store.load(&session).await.expect("load").expect("saved");
            record.pending_tool_calls[0]
                .suspend_payload
                .terms
                .deadline_at_ms = Some(now_ms() - 1_000);
            let expected = record.version;
            record.version += 1;
            store.save(&record, Some(expected)).await.expect("save");
        });
    let out = cli("decide", &[&session, "--approve", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("expired at"), "{stderr}");
    assert!(
        !ws.path().join("a.txt").exists(),
        "an expired call never runs"
    );
    assert_eq!(server.served(), 1, "no model call after the expiry");
    let record = load_record(&spec, &session);
    assert!(record.pending_tool_calls.is_empty());
    assert_eq!(
        record.history.iter().map(|d| d.outcome).collect::<Vec<_>>(),
        [Some(DecisionOutcome::Expired)]
    );
}

/// A tool call decided after its deadline is refused with `Expired`, whose message speaks of
/// the tool call (by its tool), not of a plan (issue 19, Low).
#[tokio::test]
async fn a_tool_call_decided_after_its_deadline_is_refused_speaking_of_the_tool_call_not_a_plan() {
    let clock = TestClock::at(T0);
    let (_server, _ws, _ctl, mut session, _recorder) = two_calls_waiting(None, &clock, "t9").await;
    clock.set(T0 + HOUR);
    let refused = session
        .decide("decision_1", Decision::approve())
        .await
        .expect_err("too late");
    let text = refused.to_string();
    assert!(
        text.contains("so the `write_file` tool call counts as rejected"),
        "{text}"
    );
    assert!(!text.contains("plan"), "{text}");
}

/// `pending` after the deadline of tool calls waiting for approval says which tool call
/// expired, not that a plan did (issue 19, Low).
#[cfg(feature = "cli")]
#[test]
fn cli_pending_after_a_tool_calls_deadline_speaks_of_the_tool_call_not_a_plan() {
    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    // Made two hours ago by the controller's clock: their 1h deadline has passed.
    let clock = TestClock::at(now_ms() - 2 * HOUR);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let store = open_store(&spec).expect("store");
            two_calls_waiting(Some(store), &clock, "s-tools").await;
        });
    let out = bin()
        .args(["pending", "--store", &spec])
        .output()
        .expect("pending");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for decision in ["decision_1", "decision_2"] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("expired: session s-tools decision {decision}:")))
            .unwrap_or_else(|| panic!("no expiry of {decision}: {stderr}"));
        assert!(
            line.ends_with("so the `write_file` tool call counts as rejected"),
            "{line}"
        );
    }
    assert!(
        !stderr
            .lines()
            .any(|l| l.starts_with("expired:") && l.contains("plan")),
        "{stderr}"
    );
}

/// Issue 23, item 4: `onTimeout` is `reject` or `abort`; a deadline never approves, so
/// `"approve"` is refused at its line and column, saying why.
mod on_timeout {
    use agent_controller::deadline::OnTimeout;
    use agent_controller::{config, config::ConfigErrorKind};

    fn errors(text: &str) -> Vec<(usize, usize, ConfigErrorKind, String)> {
        config::check(text, "modes.toml")
            .iter()
            .map(|e| {
                let at = e.location().expect("a place");
                (at.line, at.column, e.kind(), e.message().to_owned())
            })
            .collect()
    }

    #[test]
    fn approve_is_refused_at_line_and_column_with_why() {
        let text = "[[modes]]\nid = \"plan\"\napprovalTimeout = \"1h\"\nonTimeout = \"approve\"\n";
        let found = errors(text);
        assert_eq!(found.len(), 1, "{found:?}");
        let (line, column, kind, message) = &found[0];
        assert_eq!(
            (*line, *column, *kind),
            (4, 13, ConfigErrorKind::InvalidOnTimeout)
        );
        assert!(message.contains("a deadline never approves"), "{message}");
        assert!(
            config::parse(text, "modes.toml").is_err(),
            "bad input changes nothing"
        );
    }

    #[test]
    fn reject_is_the_default_and_abort_is_read() {
        let plain = config::parse(
            "[[modes]]\nid = \"plan\"\napprovalTimeout = \"1h\"\n",
            "m.toml",
        )
        .expect("valid");
        assert_eq!(plain.default_mode().on_timeout(), OnTimeout::Reject);
        let abort = config::parse(
            "[[modes]]\nid = \"plan\"\napprovalTimeout = \"1h\"\nonTimeout = \"abort\"\n",
            "m.toml",
        )
        .expect("valid");
        assert_eq!(abort.default_mode().on_timeout(), OnTimeout::Abort);
        assert_ne!(plain.fingerprint(), abort.fingerprint());
        let reject = config::parse(
            "[[modes]]\nid = \"plan\"\napprovalTimeout = \"1h\"\nonTimeout = \"reject\"\n",
            "m.toml",
        )
        .expect("valid");
        assert_eq!(plain.fingerprint(), reject.fingerprint());
    }

    #[test]
    fn an_unknown_value_or_no_deadline_is_refused() {
        let unknown =
            errors("[[modes]]\nid = \"p\"\napprovalTimeout = \"1h\"\nonTimeout = \"wait\"\n");
        assert_eq!(unknown[0].2, ConfigErrorKind::InvalidOnTimeout);
        assert!(unknown[0].3.contains("use `reject`"), "{}", unknown[0].3);
        let orphan = errors("[[modes]]\nid = \"p\"\nonTimeout = \"reject\"\n");
        assert_eq!(
            (orphan[0].0, orphan[0].2),
            (3, ConfigErrorKind::InvalidOnTimeout)
        );
        assert!(
            orphan[0].3.contains("no approvalTimeout"),
            "{}",
            orphan[0].3
        );
    }

    #[cfg(feature = "schema")]
    #[test]
    fn the_schema_lists_reject_and_abort() {
        let schema = config::schema();
        let on_timeout = &schema["definitions"]["Mode"]["properties"]["onTimeout"];
        assert_eq!(on_timeout["enum"], serde_json::json!(["reject", "abort"]));
        assert!(on_timeout["description"].is_string());
    }
}

/// Issue 23, item 4: `onTimeout = "abort"` applied. A plan or a reply's tool calls nobody
/// decided by the deadline count as not approved, every call has its result, no model call
/// follows, the mode stays, and the run ends `aborted`: in a session, in a store's expiry and
/// in `agent-controller pending`. A deadline never approves. The clock is the test's.
mod on_timeout_abort {
    use super::*;

    const ABORT_PLAN: &str = r#"
[[modes]]
id = "plan"
approvalTimeout = "24h"
onTimeout = "abort"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
"#;

    const ABORT_TOOLS: &str = r#"
[[modes]]
id = "build"
default = true
approvalTimeout = "1h"
onTimeout = "abort"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

    #[test]
    fn a_controller_builds_a_config_with_abort() {
        let graph = config::parse(ABORT_PLAN, "m.toml").expect("valid");
        let model = Arc::new(agent_controller::model::scripted::ScriptedModel::new());
        let built = AgentController::builder(graph, model)
            .tools(ToolRegistry::with_workspace_tools())
            .build();
        assert!(built.is_ok(), "{:?}", built.err());
    }

    #[tokio::test]
    async fn an_expired_plan_with_abort_ends_the_run_aborted_and_is_not_approved() {
        let clock = TestClock::at(T0);
        let server =
            ScriptedServer::start(vec![calls([submit("call_1", ".agent/plans/p.md")])]).await;
        let ws = Workspace::new();
        ws.plan("p.md", PLAN);
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let ctl = controller(ABORT_PLAN, &server, &ws, Some(store.clone()), &clock);
        let recorder = Recorder::default();
        let mut session = ctl
            .start_session(recorder.options().mode("plan").id("a1"))
            .await
            .expect("session");
        let outcome = session.send_message("Add dark mode").await.expect("run");
        let payload = payload_of(&outcome).clone();
        assert_eq!(
            payload.terms.on_timeout,
            deadline::OnTimeout::Abort,
            "fixed at submit time"
        );
        let json = serde_json::to_value(&payload).expect("json");
        assert_eq!(json["onTimeout"], "abort");
        // A host listing the store (`pending --json`) is told what the deadline will do.
        let listing = store.list_pending(T0).await.expect("list");
        let listed = serde_json::to_value(&listing.pending[0]).expect("json");
        assert_eq!(listed["onTimeout"], "abort", "{listed}");
        assert_eq!(listed["approvalTimeout"], "24h", "{listed}");
        recorder.take();
        clock.set(T0 + 24 * HOUR - 1);
        assert!(session.expire_if_due().await.expect("expire").is_empty());
        clock.set(T0 + 24 * HOUR);
        let expired = session.expire_if_due().await.expect("expire");
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].outcome, Some(DecisionOutcome::Expired));
        assert_eq!(session.run_state().map(|(_, s)| s), Some(RunState::Aborted));
        assert_eq!(
            session.mode().id(),
            "plan",
            "a deadline never approves: the mode stays"
        );
        assert_eq!(server.served(), 1, "no model call after an expiry");
        let events = recorder.take();
        assert_eq!(
            common::kinds(&events),
            ["agent_start", "tool_end", "agent_end"]
        );
        assert!(matches!(
            events.last(),
            Some(Event::AgentEnd {
                reason: RunState::Aborted,
                ..
            })
        ));
        let results = common::tool_results(session.messages());
        assert_eq!(
            results.last().map(|(_, r)| r.as_str()),
            Some(
                "Not approved: no decision was taken within 24h (approvalTimeout); the plan expired at 2027-01-16T08:00:00Z, and the run was aborted (onTimeout = \"abort\"). Stay in this mode; the user may ask for the plan again."
            )
        );
        // An approval after it is refused, as with reject.
        assert!(matches!(
            session.decide("decision_1", Decision::approve()).await,
            Err(SessionError::Expired { .. })
        ));
        let record = store.load("a1").await.expect("load").expect("saved");
        assert_eq!(record.run.map(|r| r.state), Some(RunState::Aborted));
    }

    async fn tools_waiting(
        store: Arc<dyn SessionStore>,
        clock: &TestClock,
        id: &str,
    ) -> (ScriptedServer, Workspace, AgentController, Session) {
        let server = ScriptedServer::start(vec![
            calls([write("c1", "a.txt"), write("c2", "b.txt")]),
            text("must not be asked"),
        ])
        .await;
        let ws = Workspace::new();
        let ctl = controller(ABORT_TOOLS, &server, &ws, Some(store), clock);
        let mut session = ctl
            .start_session(SessionOptions::new().id(id))
            .await
            .expect("session");
        let outcome = session.send_message("write both").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
            "{outcome:?}"
        );
        (server, ws, ctl, session)
    }

    #[tokio::test]
    async fn expired_tool_calls_with_abort_each_get_a_result_and_the_run_ends_aborted() {
        let clock = TestClock::at(T0);
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let (server, ws, _ctl, mut session) = tools_waiting(store.clone(), &clock, "t1").await;
        let first = common::waiting_calls(&session)[0].decision_id().to_owned();
        session
            .decide(&first, Decision::approve())
            .await
            .expect("approved in time");
        clock.set(T0 + HOUR);
        let expired = session.expire_if_due().await.expect("expire");
        assert_eq!(expired.len(), 1, "the undecided call expired");
        assert_eq!(session.run_state().map(|(_, s)| s), Some(RunState::Aborted));
        assert!(!ws.path().join("a.txt").exists() && !ws.path().join("b.txt").exists());
        assert_eq!(server.served(), 1, "no model call after an expiry");
        let results = common::tool_results(session.messages());
        let results: Vec<(&str, &str)> = results
            .iter()
            .map(|(id, content)| (id.as_str(), content.as_str()))
            .collect();
        assert_eq!(
            results,
            [
                ("c1", deadline::APPROVED_NOT_RUN_RESULT),
                (
                    "c2",
                    "Not approved: no decision was taken within 1h (approvalTimeout); this tool call expired at 2027-01-15T09:00:00Z and was not executed. The run was aborted (onTimeout = \"abort\")."
                ),
            ]
        );
    }

    #[tokio::test]
    async fn a_store_expires_abort_alike_and_says_how_the_run_ended() {
        let clock = TestClock::at(T0);
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let (_server, _ws, _ctl, _session) = tools_waiting(store.clone(), &clock, "s1").await;
        let expired = deadline::expire_due(
            &*store,
            std::time::UNIX_EPOCH + Duration::from_millis(T0 + HOUR),
        )
        .await
        .expect("expire");
        assert_eq!(expired.len(), 2, "{expired:?}");
        assert!(expired.iter().all(|e| e.run_state == RunState::Aborted));
        let record = store.load("s1").await.expect("load").expect("saved");
        assert_eq!(record.run.map(|r| r.state), Some(RunState::Aborted));
        assert!(record.pending_tool_calls.is_empty());
        assert_eq!(
            record.history.iter().map(|d| d.outcome).collect::<Vec<_>>(),
            [
                Some(DecisionOutcome::Expired),
                Some(DecisionOutcome::Expired)
            ]
        );
    }

    #[cfg(feature = "cli")]
    #[test]
    fn cli_pending_says_the_run_was_aborted() {
        let ws = Workspace::new();
        let spec = ws.path().join("sessions").display().to_string();
        // Made two hours ago by the controller's clock: their 1h deadline has passed.
        let clock = TestClock::at(now_ms() - 2 * HOUR);
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async {
                let store = open_store(&spec).expect("store");
                tools_waiting(store, &clock, "s-abort").await;
            });
        let out = bin()
            .args(["pending", "--store", &spec])
            .output()
            .expect("pending");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.contains("expired: session s-abort decision decision_1:"))
            .unwrap_or_else(|| panic!("no expiry: {stderr}"));
        assert!(
            line.ends_with(
                "so the `write_file` tool call counts as not approved and its run was aborted (onTimeout = \"abort\")"
            ),
            "{line}"
        );
        let record = load_record(&spec, "s-abort");
        assert_eq!(record.run.map(|r| r.state), Some(RunState::Aborted));
    }
}
