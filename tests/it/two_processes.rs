//! Two processes, one truth: two controllers on one store (two hosts, or a host and the CLI), over
//! the JSON files, SQLite and PostgreSQL. A change one makes while the other's run holds the
//! session is refused, or seen by the run before its next call; an open session that sat idle
//! reloads before it acts; no turn is lost to a conflict.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_controller::allowance::AllowanceScope;
use agent_controller::model::scripted::ReplayModel;
use agent_controller::store::{FileStore, MemoryStore, SessionStore};
use agent_controller::{
    AgentController, Decision, Event, LanguageModel, ModelError, ModelRequest, ModelResponse,
    RunOutcome, SessionError, SessionOptions, ToolRegistry, event::ModeChangeReason,
    event::RunState,
};
use common::{PLAN_BUILD, Recorder, Workspace};
use serde_json::json;

/// `build` asks before `write_file`.
const ASKING: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
default = true
requireApproval = ["write_file"]
"#;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Memory,
    Files,
    #[cfg(feature = "sqlite")]
    Sqlite,
    #[cfg(feature = "postgres")]
    Postgres,
}

/// Every backend this build has; Postgres unless `AGENT_CONTROLLER_SKIP_POSTGRES=1`.
fn backends() -> Vec<Backend> {
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(unused_mut))]
    let mut backends = vec![Backend::Memory, Backend::Files];
    #[cfg(feature = "sqlite")]
    backends.push(Backend::Sqlite);
    #[cfg(feature = "postgres")]
    if !common::postgres::skipped() {
        backends.push(Backend::Postgres);
    }
    backends
}

/// A test's scratch space: a directory for files and SQLite, and (for Postgres) a schema of
/// its own, dropped with it.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Self {
        Self(tempfile::tempdir().expect("tmp"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        #[cfg(feature = "postgres")]
        common::postgres::drop_schema_of(self.0.path());
    }
}

/// The store of `backend` in `dir`: a new handle each call (a process of its own), except for
/// Memory, where "the other process" shares `memory`.
fn open(backend: Backend, dir: &Path, memory: &Arc<MemoryStore>) -> Arc<dyn SessionStore> {
    match backend {
        Backend::Memory => memory.clone(),
        Backend::Files => Arc::new(FileStore::open(dir.join("sessions")).expect("file store")),
        #[cfg(feature = "sqlite")]
        Backend::Sqlite => Arc::new(
            agent_controller::store::SqliteStore::open(dir.join("sessions.db")).expect("sqlite"),
        ),
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            use agent_controller::store::postgres::{PostgresConfig, PostgresStore};
            let schema = common::postgres::TestSchema::for_dir(dir);
            common::postgres::mark_schema_of(dir);
            let config = PostgresConfig::from_url(&schema.url).expect("url");
            Arc::new(PostgresStore::open(config).expect("postgres"))
        }
    }
}

/// Two hosts on one store: `a` and `b` open it each on their own.
struct Hosts {
    backend: Backend,
    scratch: Scratch,
    memory: Arc<MemoryStore>,
    ws: Workspace,
    config: &'static str,
}

impl Hosts {
    fn new(backend: Backend, config: &'static str) -> Self {
        Self {
            backend,
            scratch: Scratch::new(),
            memory: Arc::new(MemoryStore::new()),
            ws: Workspace::new(),
            config,
        }
    }

    fn store(&self) -> Arc<dyn SessionStore> {
        open(self.backend, self.scratch.0.path(), &self.memory)
    }

    /// A host named `owner` with its own handle on the store, running `model`.
    fn host(&self, owner: &str, model: Arc<dyn LanguageModel>) -> AgentController {
        AgentController::builder(common::graph(self.config), model)
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(self.ws.path())
            .store(self.store())
            .lease_owner(owner)
            .build()
            .expect("controller")
    }

    fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.ws.path().join(name)).ok()
    }
}

/// A model that replays its replies, and before its `at`-th call tells the test (`reached`)
/// and waits until the test lets it go on (`release`): a run that hangs between two steps.
struct Gated {
    inner: ReplayModel,
    calls: AtomicUsize,
    at: usize,
    reached: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
}

impl Gated {
    fn new(at: usize, replies: impl IntoIterator<Item = ModelResponse>) -> Arc<Self> {
        Arc::new(Self {
            inner: ReplayModel::new(replies),
            calls: AtomicUsize::new(0),
            at,
            reached: Arc::new(tokio::sync::Notify::new()),
            release: Arc::new(tokio::sync::Notify::new()),
        })
    }
}

#[agent_controller::async_trait]
impl LanguageModel for Gated {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
            self.reached.notify_one();
            self.release.notified().await;
        }
        self.inner.generate(request).await
    }
}

fn write(id: &str, path: &str, content: &str) -> ModelResponse {
    ReplayModel::call(id, "write_file", json!({"path": path, "content": content}))
}

/// The texts of the assistant's messages of `record`, in order.
fn said(messages: &[agent_controller::model::Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            agent_controller::model::Message::Assistant { content, .. } => Some(content.clone()),
            _ => None,
        })
        .filter(|c| !c.is_empty())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_by_another_host_while_a_run_holds_the_session_is_refused_and_no_turn_is_lost() {
    for backend in backends() {
        let hosts = Hosts::new(backend, PLAN_BUILD);
        let model = Gated::new(
            2,
            [
                write("c1", "a.txt", "one"),
                write("c2", "b.txt", "two"),
                ReplayModel::text("wrote both"),
            ],
        );
        let a = hosts.host("host-a", model.clone());
        let mut session = a
            .start_session(SessionOptions::new().mode("build"))
            .await
            .expect("start");
        let id = session.id().to_owned();
        let run = tokio::spawn(async move {
            let outcome = session.send_message("write two files").await;
            (session, outcome)
        });
        model.reached.notified().await;
        assert_eq!(hosts.file("a.txt").as_deref(), Some("one"), "{backend:?}");

        // Host B (the CLI's `switch`) while A's run is between its two calls: refused.
        let b = hosts.host("host-b", common::replay(vec![]));
        let mut other = b
            .restore_session(&id, SessionOptions::new())
            .await
            .expect("restore");
        let err = other
            .switch_mode("plan")
            .await
            .expect_err("the run holds the session");
        assert!(
            matches!(&err, SessionError::LeaseHeld { owner, .. } if owner == "host-a"),
            "{backend:?}: {err}"
        );

        model.release.notify_one();
        let (session, outcome) = run.await.expect("join");
        let outcome = outcome.unwrap_or_else(|e| panic!("{backend:?}: the turn was lost: {e}"));
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{backend:?}: {outcome:?}"
        );
        assert_eq!(hosts.file("b.txt").as_deref(), Some("two"), "{backend:?}");
        let record = hosts.store().load(&id).await.expect("load").expect("kept");
        assert_eq!(record.mode_id, "build", "{backend:?}");
        assert_eq!(said(&record.messages), ["wrote both"], "{backend:?}");
        assert_eq!(record.version, session.version(), "{backend:?}");

        // Once the run ended, the switch goes through.
        let mut other = b
            .restore_session(&id, SessionOptions::new())
            .await
            .expect("restore");
        assert!(
            other.switch_mode("plan").await.expect("switch"),
            "{backend:?}"
        );
    }
}

/// Gives a workspace allowance for `write_file` in `build` on host `a` (a session of its own);
/// returns its id.
async fn allow_writes(a: &AgentController) -> String {
    let model = common::replay(vec![
        write("s1", "seed.txt", "seed"),
        ReplayModel::text("seeded"),
    ]);
    let mut seed = a
        .start_session(SessionOptions::new().model(model))
        .await
        .expect("start");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } =
        seed.send_message("seed").await.expect("send")
    else {
        panic!("write_file asks");
    };
    let always = Decision::approve()
        .always_allow()
        .scope(AllowanceScope::Workspace);
    seed.decide(tool_calls[0].decision_id(), always)
        .await
        .expect("decide");
    let kept = seed.allowances();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].scope, AllowanceScope::Workspace);
    kept[0].id.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_allowance_revoked_by_another_host_stops_the_running_run_at_its_next_call() {
    for backend in backends() {
        let hosts = Hosts::new(backend, ASKING);
        let a = hosts.host("host-a", common::replay(vec![]));
        let allowance = allow_writes(&a).await;
        let model = Gated::new(
            2,
            [
                write("c1", "a.txt", "one"),
                write("c2", "b.txt", "two"),
                ReplayModel::text("wrote both"),
            ],
        );
        let mut session = a
            .start_session(SessionOptions::new().model(model.clone()))
            .await
            .expect("start");
        let run = tokio::spawn(async move {
            let outcome = session.send_message("write two files").await;
            (session, outcome)
        });
        model.reached.notified().await;
        assert_eq!(
            hosts.file("a.txt").as_deref(),
            Some("one"),
            "{backend:?}: allowed"
        );

        // Host B (`allowances revoke`) while A's run is between its two calls.
        assert!(
            hosts
                .store()
                .revoke_workspace_allowance(&allowance)
                .await
                .expect("revoke"),
            "{backend:?}"
        );

        model.release.notify_one();
        let (session, outcome) = run.await.expect("join");
        let outcome = outcome.unwrap_or_else(|e| panic!("{backend:?}: {e}"));
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = &outcome else {
            panic!("{backend:?}: the revoked allowance let the call run: {outcome:?}");
        };
        assert_eq!(tool_calls[0].tool_name(), "write_file", "{backend:?}");
        assert_eq!(hosts.file("b.txt"), None, "{backend:?}: asked, not written");
        assert!(session.allowances().is_empty(), "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_idle_session_sees_a_switch_by_another_host_before_it_acts() {
    for backend in backends() {
        let hosts = Hosts::new(backend, PLAN_BUILD);
        let model = common::replay(vec![
            ReplayModel::text("hello"),
            write("c1", "c.txt", "written in the wrong mode"),
            ReplayModel::text("could not write"),
        ]);
        let a = hosts.host("host-a", model);
        let recorder = Recorder::default();
        let mut session = a
            .start_session(recorder.options().mode("build"))
            .await
            .expect("start");
        let id = session.id().to_owned();
        session.send_message("hi").await.expect("first turn");

        // Host B switches the session to `plan` (an ACP agent's session stays open meanwhile).
        let b = hosts.host("host-b", common::replay(vec![]));
        let mut other = b
            .restore_session(&id, SessionOptions::new())
            .await
            .expect("restore");
        assert!(
            other.switch_mode("plan").await.expect("switch"),
            "{backend:?}"
        );
        recorder.take();

        let outcome = session
            .send_message("write c.txt")
            .await
            .unwrap_or_else(|e| panic!("{backend:?}: the turn was lost: {e}"));
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{backend:?}: {outcome:?}"
        );
        assert_eq!(session.mode().id(), "plan", "{backend:?}");
        assert_eq!(
            hosts.file("c.txt"),
            None,
            "{backend:?}: plan mode never writes"
        );
        let events = recorder.take();
        assert!(
            matches!(
                &events[0],
                Event::ModeChanged { mode_id, previous_mode_id, reason: ModeChangeReason::Manual, .. }
                    if &**mode_id == "plan" && &**previous_mode_id == "build"
            ),
            "{backend:?}: the host hears of the switch first: {events:?}"
        );
        let record = hosts.store().load(&id).await.expect("load").expect("kept");
        assert_eq!(record.mode_id, "plan", "{backend:?}");
        assert_eq!(
            said(&record.messages),
            ["hello", "could not write"],
            "{backend:?}"
        );
        assert_eq!(
            record.run.map(|r| r.state),
            Some(RunState::Completed),
            "{backend:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_idle_session_sees_a_revoke_by_another_host_before_its_next_call() {
    for backend in backends() {
        let hosts = Hosts::new(backend, ASKING);
        let a = hosts.host("host-a", common::replay(vec![]));
        let allowance = allow_writes(&a).await;
        let model = common::replay(vec![
            write("c1", "a.txt", "one"),
            ReplayModel::text("wrote a"),
            write("c2", "b.txt", "two"),
            ReplayModel::text("wrote b"),
        ]);
        let mut session = a
            .start_session(SessionOptions::new().model(model))
            .await
            .expect("start");
        let first = session.send_message("write a").await.expect("first turn");
        assert!(
            matches!(first, RunOutcome::Completed { .. }),
            "{backend:?}: allowed: {first:?}"
        );

        assert!(
            hosts
                .store()
                .revoke_workspace_allowance(&allowance)
                .await
                .expect("revoke"),
            "{backend:?}"
        );

        let outcome = session.send_message("write b").await.expect("second turn");
        assert!(
            matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
            "{backend:?}: the revoked allowance let the call run: {outcome:?}"
        );
        assert_eq!(hosts.file("b.txt"), None, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_own_allowance_revoked_by_another_host_during_its_run_takes_effect_and_no_turn_is_lost()
 {
    for backend in backends() {
        let hosts = Hosts::new(backend, ASKING);
        let model = Gated::new(
            4,
            [
                write("s1", "seed.txt", "seed"),
                ReplayModel::text("seeded"),
                write("c1", "a.txt", "one"),
                write("c2", "b.txt", "two"),
                ReplayModel::text("wrote both"),
            ],
        );
        let a = hosts.host("host-a", model.clone());
        let mut session = a.start_session(SessionOptions::new()).await.expect("start");
        let id = session.id().to_owned();
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } =
            session.send_message("seed").await.expect("send")
        else {
            panic!("write_file asks");
        };
        let allowance = tool_calls[0].decision_id().to_owned();
        let always = Decision::approve()
            .always_allow()
            .scope(AllowanceScope::Session);
        session.decide(&allowance, always).await.expect("decide");
        let run = tokio::spawn(async move {
            let outcome = session.send_message("write two files").await;
            (session, outcome)
        });
        model.reached.notified().await;
        assert_eq!(
            hosts.file("a.txt").as_deref(),
            Some("one"),
            "{backend:?}: allowed"
        );

        // Host B (`allowances revoke --session`) while A's run is between its two calls.
        let b = hosts.host("host-b", common::replay(vec![]));
        let mut other = b
            .restore_session(&id, SessionOptions::new())
            .await
            .expect("restore");
        assert!(
            other.revoke_allowance(&allowance).await.expect("revoked"),
            "{backend:?}"
        );

        model.release.notify_one();
        let (session, outcome) = run.await.expect("join");
        let outcome = outcome.unwrap_or_else(|e| panic!("{backend:?}: the turn was lost: {e}"));
        assert!(
            matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
            "{backend:?}: the revoked allowance let the call run: {outcome:?}"
        );
        assert_eq!(hosts.file("b.txt"), None, "{backend:?}");
        assert!(session.allowances().is_empty(), "{backend:?}");
        let record = hosts.store().load(&id).await.expect("load").expect("kept");
        assert!(record.allowances.is_empty(), "{backend:?}");
        assert_eq!(record.version, session.version(), "{backend:?}");
        assert!(
            common::tool_results(&record.messages)
                .iter()
                .any(|(call, result)| call == "c1" && !result.is_empty()),
            "{backend:?}: the first write's result is kept"
        );
    }
}
