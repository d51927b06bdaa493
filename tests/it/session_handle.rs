//! A session several tasks hold ([`SessionHandle`]): a decision answered once saved while its run
//! goes on in a task of its own, the state read and the events followed meanwhile, an operation
//! refused (not queued) while a run is in progress, two racing deciders of whom one wins; and
//! what starts and stops waiting in a store, seen by a watch ([`PendingWatch`]).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_controller::event::RunState;
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::model::{LanguageModel, ModelError, ModelRequest, ModelResponse};
use agent_controller::session::SessionHandle;
use agent_controller::store::{PendingChange, PendingWatch};
use agent_controller::{
    AgentController, Decision, MemoryStore, RunOutcome, SessionError, SessionOptions, SessionStore,
    ToolRegistry,
};
use common::Workspace;

/// Plan, then build: the scripted model writes and submits a plan in `plan`.
const PLAN_BUILD: &str = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n";

/// The scripted model, whose calls wait for the test once it is `armed`: each says it was
/// called (`called`) and answers when the test lets it (`release`).
struct Gated {
    inner: ScriptedModel,
    armed: AtomicBool,
    called: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl LanguageModel for Gated {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        if self.armed.load(Ordering::Acquire) {
            self.called.notify_one();
            self.release.notified().await;
        }
        self.inner.generate(request).await
    }
}

fn gated() -> Arc<Gated> {
    Arc::new(Gated {
        inner: ScriptedModel::new(),
        armed: AtomicBool::new(false),
        called: tokio::sync::Notify::new(),
        release: tokio::sync::Notify::new(),
    })
}

fn controller(
    ws: &Workspace,
    model: Arc<dyn LanguageModel>,
    store: Arc<dyn SessionStore>,
) -> AgentController {
    let graph = agent_controller::config::parse(PLAN_BUILD, "modes.toml").expect("config");
    AgentController::builder(graph, model)
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(store)
        .build()
        .expect("controller")
}

/// A handle on a session of `controller` whose plan waits: (handle, decision id, sha256).
async fn plan_waiting(controller: &AgentController) -> (SessionHandle, String, String) {
    let session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("start");
    let handle = SessionHandle::new(session);
    let outcome = handle
        .send_message("Add dark mode")
        .await
        .expect("started")
        .outcome()
        .await
        .expect("ran");
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "{outcome:?}"
    );
    let waiting = handle.view().pending;
    assert_eq!(waiting.len(), 1);
    (
        handle,
        waiting[0].decision_id.clone(),
        waiting[0].sha256.clone(),
    )
}

#[tokio::test]
async fn a_decision_answers_once_saved_and_its_run_goes_on_in_a_task_of_its_own() {
    let ws = Workspace::new();
    let model = gated();
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let controller = controller(&ws, model.clone(), store.clone());
    let (handle, decision_id, sha256) = plan_waiting(&controller).await;
    let mut events = handle.events();
    model.armed.store(true, Ordering::Release);

    let approve = Decision::approve().with_sha256(&sha256).decided_by("alice");
    let (taken, run) = handle.decide(&decision_id, approve).await.expect("decided");
    assert_eq!(taken.mode_id, "build");
    assert_eq!(taken.decision_id, decision_id);
    let record = taken.decision.expect("the audit record");
    assert_eq!(record.decided_by.as_deref(), Some("alice"));
    assert!(taken.pending.is_empty());
    // Saved before the run went on: the store has the approval.
    let stored = store
        .load(handle.id())
        .await
        .expect("as expected")
        .expect("stored");
    assert_eq!(stored.mode_id, "build");

    // The build run waits in its model call: the state reads as running, without waiting.
    model.called.notified().await;
    let view = handle.view();
    assert_eq!(view.mode_id, "build");
    assert_eq!(view.run_state, Some(RunState::Running));
    assert!(!run.is_finished());
    // Another operation is refused at once, not queued behind the run.
    let busy = tokio::time::timeout(
        Duration::from_secs(5),
        handle.decide(&decision_id, Decision::approve()),
    )
    .await
    .expect("answered at once")
    .expect_err("busy");
    assert!(matches!(busy, SessionError::Busy { .. }), "{busy}");
    let busy = handle.send_message("more").await.expect_err("busy");
    assert!(matches!(busy, SessionError::Busy { .. }), "{busy}");

    model.armed.store(false, Ordering::Release);
    model.release.notify_one();
    let outcome = run.outcome().await.expect("the run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(handle.view().run_state, Some(RunState::Completed));
    let mut kinds = Vec::new();
    while let Ok(event) = events.try_recv() {
        kinds.push(event.kind());
    }
    assert!(kinds.contains(&"mode_changed"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"agent_end"));
    // Decided: deciding it again is refused as already decided.
    let again = handle
        .decide(&decision_id, Decision::approve())
        .await
        .expect_err("decided before");
    assert!(matches!(again, SessionError::AlreadyDecided(_)), "{again}");
}

/// A run whose [`agent_controller::session::RunTask`] no one kept (a web host's request
/// dropped once the decision was saved, its client gone) is still the handle's: cancelling and
/// waiting stops it, saved `aborted`, and leaves no cancel behind for the next run.
#[tokio::test]
async fn cancel_and_wait_stops_a_run_whose_task_no_one_kept() {
    let ws = Workspace::new();
    let model = gated();
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let controller = controller(&ws, model.clone(), store.clone());
    let (handle, decision_id, sha256) = plan_waiting(&controller).await;
    model.armed.store(true, Ordering::Release);
    let approve = Decision::approve().with_sha256(&sha256);
    drop(handle.decide(&decision_id, approve).await.expect("decided"));
    model.called.notified().await;
    assert_eq!(handle.view().run_state, Some(RunState::Running));

    tokio::time::timeout(Duration::from_secs(30), handle.cancel_and_wait())
        .await
        .expect("the run stops");
    assert_eq!(handle.view().run_state, Some(RunState::Aborted));
    let stored = store
        .load(handle.id())
        .await
        .expect("as expected")
        .expect("stored");
    assert_eq!(stored.run.expect("a run").state, RunState::Aborted);
    assert_eq!(stored.mode_id, "build");

    // Nothing in progress: it returns at once, and the next run is not cancelled.
    model.armed.store(false, Ordering::Release);
    tokio::time::timeout(Duration::from_secs(5), handle.cancel_and_wait())
        .await
        .expect("at once");
    let outcome = handle
        .send_message("again")
        .await
        .expect("started")
        .outcome()
        .await
        .expect("ran");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn of_two_tasks_deciding_one_decision_exactly_one_is_answered() {
    let ws = Workspace::new();
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let controller = controller(&ws, Arc::new(ScriptedModel::new()), store);
    let (handle, decision_id, _) = plan_waiting(&controller).await;
    let (a, b) = (handle.clone(), handle.clone());
    let (ida, idb) = (decision_id.clone(), decision_id.clone());
    let (first, second) = tokio::join!(
        tokio::spawn(async move { a.decide(&ida, Decision::approve()).await }),
        tokio::spawn(async move { b.decide(&idb, Decision::reject()).await }),
    );
    let results = [first.expect("as expected"), second.expect("as expected")];
    let won: Vec<_> = results.iter().filter(|r| r.is_ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    for lost in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            matches!(
                lost,
                SessionError::Busy { .. } | SessionError::AlreadyDecided(_)
            ),
            "{lost}"
        );
    }
}

#[tokio::test]
async fn a_watch_sees_a_decision_start_waiting_and_one_taken_elsewhere() {
    let ws = Workspace::new();
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let here = controller(&ws, Arc::new(ScriptedModel::new()), store.clone());
    let mut watch = PendingWatch::new(store.clone(), Duration::from_millis(10))
        .await
        .expect("watch");
    let (handle, decision_id, _) = plan_waiting(&here).await;
    let changes = watch.changes().await.expect("changes");
    assert!(
        matches!(
            &changes[..],
            [PendingChange::DecisionWaiting { session_id, decision_id: d, decision }]
                if session_id == handle.id() && *d == decision_id && decision.title == "Add dark mode"
        ),
        "{changes:?}"
    );
    // Another host (a controller of its own over the same store) decides it.
    let elsewhere = controller(&ws, Arc::new(ScriptedModel::new()), store.clone());
    let mut session = elsewhere
        .restore_session(handle.id(), SessionOptions::new())
        .await
        .expect("restore");
    session
        .decide(&decision_id, Decision::approve())
        .await
        .expect("decide");
    let changes = watch.changes().await.expect("changes");
    assert_eq!(
        serde_json::to_value(&changes).expect("as expected"),
        serde_json::json!([{
            "type": "decision_settled",
            "sessionId": handle.id(),
            "decisionId": decision_id,
            "modeId": "build",
        }])
    );
    // The handle reads what the other host did before it acts: already decided.
    let err = handle
        .decide(&decision_id, Decision::approve())
        .await
        .expect_err("decided elsewhere");
    assert!(matches!(err, SessionError::AlreadyDecided(_)), "{err}");
}

#[tokio::test]
async fn a_controller_streams_the_events_of_every_session() {
    let ws = Workspace::new();
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
    let controller = controller(&ws, Arc::new(ScriptedModel::new()), store);
    let mut events = controller.events();
    let (a, _, _) = plan_waiting(&controller).await;
    let (b, _, _) = plan_waiting(&controller).await;
    let mut sessions = Vec::new();
    while let Ok(event) = events.try_recv() {
        if event.kind() == "tool_suspended" {
            sessions.push(event.session_id().to_owned());
        }
    }
    assert_eq!(sessions, [a.id().to_owned(), b.id().to_owned()]);
}

#[test]
fn a_run_outcome_and_an_error_serialize_as_a_host_sends_them_on() {
    let failed = serde_json::to_value(SessionError::AlreadyDecided("decision_1".into()))
        .expect("as expected");
    assert_eq!(failed["kind"], "already_decided");
    assert!(
        failed["message"]
            .as_str()
            .expect("as expected")
            .contains("decision_1")
    );
    let aborted = serde_json::to_value(RunOutcome::Aborted {
        run_id: "run_2".into(),
    })
    .expect("as expected");
    assert_eq!(
        aborted,
        serde_json::json!({ "outcome": "aborted", "state": "aborted", "runId": "run_2" })
    );
}
