//! [`SessionHandle`]: one session that several tasks hold at once (a web host's requests, a
//! task that carries its run on, a task that streams its events), over the `&mut` [`Session`].
//!
//! The session sits behind an async mutex: one operation at a time, as `&mut` makes it. What a
//! task may do while another operation runs:
//! - read the state ([`SessionHandle::view`]): the last state an operation left, with the run
//!   state and the mode kept current from the session's own events;
//! - subscribe to the events ([`SessionHandle::events`]), without `&mut` access;
//! - cancel the run ([`SessionHandle::cancel`]);
//! - start an operation: it waits for one that decides or starts a run to get going, and is
//!   refused with [`SessionError::Busy`] while a run is in progress, so a request never waits
//!   for a whole run.
//!
//! A decision ([`SessionHandle::decide`]) returns as soon as it is saved
//! ([`DecisionTaken`]); the run it carries on goes on in a task of its own ([`RunTask`]).
//! That task holds the session until the run ends, so the handle knows every run it started,
//! kept or not: [`SessionHandle::cancel_and_wait`] stops them all (a host shutting down, whose
//! requests may have been dropped after a save and before they took the run).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{OwnedMutexGuard, broadcast, oneshot};

use super::{CancelHandle, Decision, RunOutcome, Session, SessionError};
use crate::event::{DecidedRecord, Event, RunState};
use crate::store::{PendingSummary, StoreError};

/// How many events [`SessionHandle::events`] holds for a receiver that has not read them; one
/// further behind misses the oldest.
const HANDLE_EVENTS: usize = 1024;

/// How often an operation waiting for the session checks whether a run got going meanwhile
/// (then it is [`SessionError::Busy`] rather than a wait for the whole run).
const BUSY_CHECK: Duration = Duration::from_millis(20);

/// Where [`Session::decide_notifying`] says the decision was saved.
pub(crate) type TakenNotice = oneshot::Sender<DecisionTaken>;

/// A session as a host shows it ([`SessionHandle::view`], [`Session::view`]): its mode, its
/// latest run and that run's state, and what waits for a decision (each as `pending --json`
/// lists it, [`PendingSummary`]). Serialized camelCase.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::{AgentController, SessionOptions, config, model::scripted::ScriptedModel};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
/// let mut session = controller.start_session(SessionOptions::new()).await?;
/// session.send_message("hello").await?;
/// let view = serde_json::to_value(session.view())?;
/// assert_eq!(view["modeId"], "build");
/// assert_eq!(view["runState"], "completed");
/// assert_eq!(view["pending"], serde_json::json!([]));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionView {
    /// The session id.
    pub session_id: String,
    /// The mode the session is in.
    pub mode_id: String,
    /// The latest run; absent before the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The latest run's state; absent before the first run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_state: Option<RunState>,
    /// What waits for a decision, in the model's order, as `pending --json` lists each.
    pub pending: Vec<PendingSummary>,
    /// The workspace the session works in (its recorded canonical path).
    pub workspace: PathBuf,
    /// The store version last saved or loaded (0: never saved).
    pub version: u64,
}

/// What [`SessionHandle::decide`] answers once the decision is saved, before the run it carries
/// on goes further: the decision's audit record and the session as the decision left it.
/// Serialized camelCase.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DecisionTaken {
    /// The session id.
    pub session_id: String,
    /// The decision id.
    pub decision_id: String,
    /// The audit record (outcome, `decidedAt`, `decidedBy`, ...); absent only if the session
    /// keeps none for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecidedRecord>,
    /// The mode the session is in after the decision (an approved plan's target).
    pub mode_id: String,
    /// What still waits for a decision (the other calls of the reply, say).
    pub pending: Vec<PendingSummary>,
}

/// A run carried on in a task of its own ([`SessionHandle::decide`],
/// [`SessionHandle::send_message`]): await [`RunTask::outcome`] for how it ended, or drop it
/// and the run goes on (its events say how it goes; [`SessionHandle::cancel_and_wait`] still
/// stops it).
#[derive(Debug)]
pub struct RunTask {
    task: tokio::task::JoinHandle<Result<RunOutcome, SessionError>>,
}

impl RunTask {
    /// How the run ended, once it has.
    ///
    /// # Errors
    /// The run's own error ([`SessionError`]), or [`SessionError::Store`] when its task
    /// stopped without an answer (it panicked or its runtime shut down).
    pub async fn outcome(self) -> Result<RunOutcome, SessionError> {
        self.task.await.unwrap_or_else(|e| Err(stopped(&e)))
    }

    /// Whether the run has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

/// The error of a session task that stopped without an answer.
fn stopped(e: &tokio::task::JoinError) -> SessionError {
    SessionError::Store(StoreError::backend_message(format!(
        "the session's task stopped before it answered: {e}"
    )))
}

/// One session shared by several tasks at once (a web host's requests, a task that carries its
/// run on, a task that streams its events), over the `&mut` [`Session`]. Cheap to clone: every
/// clone is the same session.
///
/// The session sits behind an async mutex: one operation at a time, as `&mut` makes it. What a
/// task may do while another operation runs:
/// - read the state ([`SessionHandle::view`]): the last state an operation left, with the run
///   state and the mode kept current from the session's own events;
/// - subscribe to the events ([`SessionHandle::events`]), without `&mut` access;
/// - cancel the run ([`SessionHandle::cancel`]);
/// - start an operation: it waits for one that decides or starts a run to get going, and is
///   refused with [`SessionError::Busy`] while a run is in progress, so a request never waits
///   for a whole run.
///
/// A decision ([`SessionHandle::decide`]) returns as soon as it is saved
/// ([`DecisionTaken`]); the run it carries on goes on in a task of its own ([`RunTask`]),
/// which [`SessionHandle::cancel_and_wait`] stops whether or not anyone kept it.
///
/// # Examples
/// Decide from one task while another streams the events:
/// ```
/// use std::sync::Arc;
/// use agent_controller::{AgentController, Decision, SessionOptions, ToolRegistry};
/// use agent_controller::session::SessionHandle;
/// use agent_controller::model::scripted::ScriptedModel;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let workspace = tempfile::tempdir()?;
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
///     "modes.toml",
/// )?;
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
///     .tools(ToolRegistry::with_workspace_tools())
///     .workspace(workspace.path())
///     .build()?;
/// let session = controller.start_session(SessionOptions::new().mode("plan")).await?;
/// let handle = SessionHandle::new(session);
/// let mut events = handle.events();
/// handle.send_message("Add dark mode").await?.outcome().await?;
/// let waiting = handle.view().pending;
/// assert_eq!(waiting[0].title, "Add dark mode");
///
/// let deciding = handle.clone();
/// let decision_id = waiting[0].decision_id.clone();
/// let (taken, run) = tokio::spawn(async move {
///     deciding.decide(&decision_id, Decision::approve().decided_by("alice")).await
/// })
/// .await??;
/// assert_eq!(taken.mode_id, "build");
/// assert_eq!(taken.decision.unwrap().decided_by.as_deref(), Some("alice"));
/// run.outcome().await?; // the build run, carried on in its own task
/// let mut kinds = Vec::new();
/// while let Ok(event) = events.try_recv() {
///     kinds.push(event.kind());
/// }
/// assert!(kinds.contains(&"mode_changed"));
/// assert_eq!(kinds.last(), Some(&"agent_end"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SessionHandle {
    inner: Arc<Inner>,
}

struct Inner {
    id: Arc<str>,
    session: Arc<tokio::sync::Mutex<Session>>,
    events: broadcast::Sender<Event>,
    cancel: CancelHandle,
    /// The state the last operation left, with the run state and mode kept current from the
    /// session's events while one runs.
    view: Arc<Mutex<SessionView>>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

impl SessionHandle {
    /// Shares `session`: every event it emits from now on also goes to
    /// [`SessionHandle::events`].
    pub fn new(mut session: Session) -> Self {
        let (events, _) = broadcast::channel(HANDLE_EVENTS);
        let view = Arc::new(Mutex::new(session.view()));
        let (sender, kept) = (events.clone(), view.clone());
        session
            .subscribers_mut()
            .add_permanent(Box::new(move |event: &Event| {
                follow(&kept, event);
                if sender.receiver_count() > 0 {
                    let _ = sender.send(event.clone());
                }
            }));
        Self {
            inner: Arc::new(Inner {
                id: session.id.clone(),
                cancel: session.cancel_handle(),
                session: Arc::new(tokio::sync::Mutex::new(session)),
                events,
                view,
            }),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Whether anything but this one handle holds the session: another clone of it (a
    /// request, a task streaming its view), a run carried on in its task, an operation in
    /// progress, or a cancel kept for its next run ([`SessionHandle::cancel`]). A host that
    /// keeps a handle per session may let go of one that is not in use, and restore the
    /// session from the store when it is asked for again; one in use it keeps, so every task
    /// that holds the session shares one handle.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, SessionOptions, config, model::scripted::ScriptedModel};
    /// use agent_controller::session::SessionHandle;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
    /// let handle = SessionHandle::new(controller.start_session(SessionOptions::new()).await?);
    /// assert!(!handle.in_use());
    /// let request = handle.clone();
    /// assert!(handle.in_use());
    /// drop(request);
    /// let run = handle.send_message("hello").await?;
    /// assert!(handle.in_use() || run.is_finished(), "the run's task holds it");
    /// run.outcome().await?;
    /// assert!(!handle.in_use());
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_use(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
            || self.inner.session.try_lock().is_err()
            || self.inner.cancel.is_kept()
    }

    /// The session as it stands: read now when no operation holds it, else as the last
    /// operation left it with its mode and run state as its events since say.
    pub fn view(&self) -> SessionView {
        if let Ok(session) = self.inner.session.try_lock() {
            self.inner.refresh(&session);
        }
        lock(&self.inner.view).clone()
    }

    /// [`SessionHandle::view`] after reading what another process saved since (a decision
    /// `decide` took on the command line, a switch), when no operation holds the session; while
    /// one does, the view as it stands.
    ///
    /// # Errors
    /// [`SessionError::Store`] when the store cannot be read;
    /// [`SessionError::ConfigChanged`] when the stored session is in a mode this config lacks.
    pub async fn reload(&self) -> Result<SessionView, SessionError> {
        if let Ok(mut session) = self.inner.session.clone().try_lock_owned() {
            session.reload().await?;
            self.inner.refresh(&session);
        }
        Ok(lock(&self.inner.view).clone())
    }

    /// Every event of the session from now on, in order, without `&mut` access: a
    /// [`tokio::sync::broadcast`] receiver. Sending never waits: a receiver more than 1024
    /// events behind misses the oldest (its next `recv` says how many).
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.inner.events.subscribe()
    }

    /// Cancels the run in progress, or the next one ([`CancelHandle::cancel`]); returns
    /// whether a run was in progress.
    pub fn cancel(&self) -> bool {
        self.inner.cancel.cancel()
    }

    /// Cancels every run this handle started and waits for each to end, saved as it ended (a
    /// cancelled run `aborted`, [`CancelHandle`]): the run in progress, and the one an
    /// operation about to start a run starts (a decision being saved carries on a run that is
    /// cancelled as it starts). Whether anyone kept its [`RunTask`] or not: each run's task
    /// holds the session until the run ends, so this returns once no operation holds it. A host
    /// calls it on shutdown, where a request dropped after its decision was saved (a client
    /// that hung up) never took the run that decision carries on. Returns at once when nothing
    /// runs; a cancel kept for a next run ([`SessionHandle::cancel`] while none was in
    /// progress) is withdrawn, so the handle's next run goes on as usual.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, SessionOptions, config, model::scripted::ScriptedModel};
    /// use agent_controller::event::RunState;
    /// use agent_controller::session::SessionHandle;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
    /// let handle = SessionHandle::new(controller.start_session(SessionOptions::new()).await?);
    /// drop(handle.send_message("hello").await?); // the run goes on; no one keeps its task
    /// handle.cancel_and_wait().await; // the run has ended (here it completed first)
    /// assert_ne!(handle.view().run_state, Some(RunState::Running));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel_and_wait(&self) {
        loop {
            // Again at each check: a run an operation queued before this one starts is
            // cancelled too.
            self.inner.cancel.cancel();
            let waiting = self.inner.session.clone().lock_owned();
            if let Ok(session) = tokio::time::timeout(BUSY_CHECK, waiting).await {
                self.inner.cancel.withdraw();
                self.inner.refresh(&session);
                return;
            }
        }
    }

    /// The session itself, for any operation of [`Session`], once no other operation holds
    /// it (waits for a run in progress to end).
    pub async fn lock(&self) -> OwnedMutexGuard<Session> {
        self.inner.session.clone().lock_owned().await
    }

    /// Sends the user's `text`, starting a run (see [`Session::send_message`]), carried on in a
    /// task of its own: returns once it has started.
    ///
    /// # Errors
    /// [`SessionError::Busy`] while a run of the session is in progress here. The run's own
    /// errors come from [`RunTask::outcome`].
    pub async fn send_message(&self, text: impl Into<String>) -> Result<RunTask, SessionError> {
        let mut session = self.acquire().await?;
        let (text, inner) = (text.into(), self.inner.clone());
        let task = tokio::spawn(async move {
            let outcome = session.send_message(text).await;
            inner.refresh(&session);
            outcome
        });
        Ok(RunTask { task })
    }

    /// Decides `decision_id` ([`Session::decide`]) and answers once the decision is saved
    /// ([`DecisionTaken`]); the run it carries on goes on in a task of its own ([`RunTask`]).
    /// What another process saved since is read first, so a decision it took is
    /// [`SessionError::AlreadyDecided`] here. Of two tasks deciding the same decision at once,
    /// exactly one is answered with its [`DecisionTaken`]; but an approval toward a quorum that
    /// loses the store's compare-and-swap to another host's save is tried again on what it
    /// saved, as [`Session::decide`] does, so two approvals by two identities both land.
    ///
    /// # Errors
    /// [`SessionError::Busy`] while a run of the session is in progress here; else those of
    /// [`Session::decide`], with nothing changed.
    pub async fn decide(
        &self,
        decision_id: &str,
        decision: Decision,
    ) -> Result<(DecisionTaken, RunTask), SessionError> {
        let mut session = self.acquire().await?;
        session.reload().await?;
        self.decide_on(session, decision_id, decision).await
    }

    /// [`SessionHandle::decide`] with the decision as JSON, read as [`Session::decide_json`]
    /// reads it; `decided_by`, when given, is who decided (it replaces any `decidedBy` the
    /// JSON names: a host sets it from who it authenticated).
    ///
    /// # Errors
    /// [`SessionError::MalformedDecision`] for JSON that is not a decision, then those of
    /// [`SessionHandle::decide`].
    pub async fn decide_json(
        &self,
        decision_id: &str,
        data: &Value,
        decided_by: Option<&str>,
    ) -> Result<(DecisionTaken, RunTask), SessionError> {
        self.decide_json_with(decision_id, data, decided_by, None)
            .await
    }

    /// [`SessionHandle::decide_json`] through channel `via` (`serve` says
    /// [`crate::quorum::Via::Http`]), which the decision's audit record keeps (`via`).
    ///
    /// # Errors
    /// Those of [`SessionHandle::decide_json`].
    pub async fn decide_json_via(
        &self,
        decision_id: &str,
        data: &Value,
        decided_by: Option<&str>,
        via: crate::quorum::Via,
    ) -> Result<(DecisionTaken, RunTask), SessionError> {
        self.decide_json_with(decision_id, data, decided_by, Some(via))
            .await
    }

    async fn decide_json_with(
        &self,
        decision_id: &str,
        data: &Value,
        decided_by: Option<&str>,
        via: Option<crate::quorum::Via>,
    ) -> Result<(DecisionTaken, RunTask), SessionError> {
        let mut session = self.acquire().await?;
        session.reload().await?;
        let mut decision = session.decision_from_json(decision_id, data)?;
        if let Some(who) = decided_by {
            decision = decision.decided_by(who);
        }
        decision.via = via;
        self.decide_on(session, decision_id, decision).await
    }

    async fn decide_on(
        &self,
        mut session: OwnedMutexGuard<Session>,
        decision_id: &str,
        decision: Decision,
    ) -> Result<(DecisionTaken, RunTask), SessionError> {
        let (taken, saved) = oneshot::channel();
        let (decision_id, inner) = (decision_id.to_owned(), self.inner.clone());
        let task = tokio::spawn(async move {
            let outcome = session
                .decide_notifying(&decision_id, decision, Some(taken))
                .await;
            inner.refresh(&session);
            outcome
        });
        match saved.await {
            Ok(taken) => Ok((taken, RunTask { task })),
            // Not saved: the decision was refused (or the task stopped).
            Err(_) => match task.await {
                Ok(Err(e)) => Err(e),
                Ok(Ok(_)) => Err(SessionError::Store(StoreError::backend_message(
                    "the decision returned without saying it was saved",
                ))),
                Err(e) => Err(stopped(&e)),
            },
        }
    }

    /// The session for an operation: at once when free; while another operation holds it,
    /// [`SessionError::Busy`] as soon as that one's run is in progress (its `agent_start` came
    /// and its `agent_end` not yet), else once it is done.
    async fn acquire(&self) -> Result<OwnedMutexGuard<Session>, SessionError> {
        loop {
            let waiting = self.inner.session.clone().lock_owned();
            if let Ok(session) = tokio::time::timeout(BUSY_CHECK, waiting).await {
                return Ok(session);
            }
            // A run in progress (started, not ended): refused. An operation that is about to
            // start its run, or whose run just ended, is waited for.
            let view = lock(&self.inner.view).clone();
            if self.inner.cancel.is_running() && view.run_state == Some(RunState::Running) {
                return Err(SessionError::Busy {
                    session_id: self.inner.id.to_string(),
                    run_id: view.run_id.unwrap_or_default(),
                });
            }
        }
    }
}

impl Inner {
    fn refresh(&self, session: &Session) {
        *lock(&self.view) = session.view();
    }
}

/// Keeps `view`'s mode and run state current with `event` while an operation holds the session.
fn follow(view: &Mutex<SessionView>, event: &Event) {
    let mut view = lock(view);
    match event {
        Event::AgentStart { run_id, .. } => {
            view.run_id = Some(run_id.to_string());
            view.run_state = Some(RunState::Running);
        }
        Event::AgentEnd { run_id, reason, .. } => {
            view.run_id = Some(run_id.to_string());
            view.run_state = Some(*reason);
        }
        Event::ModeChanged { mode_id, .. } => view.mode_id = mode_id.to_string(),
        _ => {}
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Session {
    /// The session as a host shows it: its mode, latest run and what waits
    /// ([`SessionView`]).
    pub fn view(&self) -> SessionView {
        let run = self.run_state();
        SessionView {
            session_id: self.id.to_string(),
            mode_id: self.mode().id().to_owned(),
            run_id: run.map(|(id, _)| id.to_owned()),
            run_state: run.map(|(_, state)| state),
            pending: self.record_of(&self.state).pending_summaries(),
            workspace: self.workspace().to_path_buf(),
            version: self.version,
        }
    }

    /// What [`SessionHandle::decide`] answers once `decision_id` is saved.
    pub(crate) fn decision_taken(&self, decision_id: &str) -> DecisionTaken {
        let decision = self
            .state
            .history
            .iter()
            .rev()
            .find(|d| d.decision_id == decision_id)
            .or_else(|| {
                self.state
                    .pending
                    .iter()
                    .filter(|p| p.decision_id() == decision_id)
                    .find_map(|p| p.decision())
            })
            .cloned();
        DecisionTaken {
            session_id: self.id.to_string(),
            decision_id: decision_id.to_owned(),
            decision,
            mode_id: self.mode().id().to_owned(),
            pending: self.record_of(&self.state).pending_summaries(),
        }
    }
}
