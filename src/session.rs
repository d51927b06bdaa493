//! A session: the current mode, the conversation, the pending plan decision, and the operations
//! that move between modes.

mod bounded;
mod call_status;
mod drive;
mod expiry;
mod explain;
mod handle;
mod hooks;
mod kind;
mod pending_entries;
mod reviewers;
mod save;
mod stop;
mod subagent;

pub use self::call_status::{CallStatus, result_statuses};
pub use self::handle::{DecisionTaken, RunTask, SessionHandle, SessionView};
pub use self::kind::SessionErrorKind;
pub use self::pending_entries::{PendingEntries, UnreadAllowances, pending_entries};
pub use self::stop::StopReason;
pub(crate) use crate::machine::check::decision_id_for;
pub use crate::machine::decision::{Decision, DecisionAction};
pub use crate::machine::error::SessionError;
pub use crate::machine::pending::{
    PendingDecision, PendingPlan, PendingSuspension, PendingToolCall,
};

use self::save::Saving;
use crate::machine::input::{Abort, Input};
use crate::machine::state::{Lease, State};
pub(crate) use crate::mode::ModeRuntime;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::event::{
    CancelReason, Event, EventStream, RunState, Subscribers, Subscription, SuspendPayload,
};
use crate::extensions::Extensions;
use crate::mode::{Mode, ModeGraph, ModeId};
use crate::model::{LanguageModel, Message, ModelError};
use crate::store::{
    DecidedRecord, PendingRecord, PendingSuspensionRecord, PendingToolCallRecord, RunRecord,
    SCHEMA_VERSION, SessionRecord, SessionStore, StoreError,
};
use crate::tool::{SUBMIT_PLAN, ToolRegistry};
use crate::workspace::{WorkspaceMismatch, WorkspaceRecord};

/// How a call that drives a run returned: the run's state ([`RunOutcome::state`]) with what
/// goes with it (the model's text, the suspended plan, the error).
///
/// `#[non_exhaustive]`: match the outcomes you handle and keep a last arm for the rest
/// ([`RunOutcome::state`] says what any outcome left the run in).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// A run returns one outcome and the host matches on it; boxing the plan would only cost every
// host a deref.
#[allow(clippy::large_enum_variant)]
pub enum RunOutcome {
    /// The model finished; `text` is its last reply.
    Completed {
        /// The run id.
        run_id: Arc<str>,
        /// The model's last text (empty when a rejection ended the run).
        text: String,
    },
    /// The run is suspended on `submit_plan`; decide with [`crate::Session::decide`] and the
    /// payload's `decision_id` (models reuse tool-call ids, so prefer it to
    /// [`crate::Session::resume`]).
    Suspended {
        /// The run id.
        run_id: Arc<str>,
        /// The `submit_plan` call id.
        tool_call_id: String,
        /// The captured plan and the hand-over target.
        payload: SuspendPayload,
    },
    /// The run is suspended on tool calls that wait for the user's approval (the mode's
    /// `requireApproval`): each has its own decision ([`crate::Session::decide`] with its
    /// [`PendingToolCall::decision_id`]), and the run carries on once every one is decided.
    /// The calls of the same reply that need no approval have run.
    ToolCallsSuspended {
        /// The run id.
        run_id: Arc<str>,
        /// The calls still waiting for a decision, in the model's order.
        tool_calls: Vec<PendingToolCall>,
    },
    /// The run is suspended on calls their tools suspended ([`crate::ToolOutput::suspend`]:
    /// a question of `ask_user`, or a tool of your own), each waiting for the user's answer,
    /// and perhaps on calls of the same reply that wait for approval: each has its own
    /// decision ([`PendingDecision::decision_id`]), and the run carries on once every one is
    /// decided.
    AwaitingAnswer {
        /// The run id.
        run_id: Arc<str>,
        /// What still waits, in the model's order: suspended calls
        /// ([`PendingDecision::Suspension`]) and calls waiting for approval. When every call is
        /// decided but this host lacks the tool of an answered one, the decided calls: the host
        /// that has the tool carries the run on ([`Session::continue_run`]).
        pending: Vec<PendingDecision>,
    },
    /// The model failed or the step limit was reached; the session stays usable.
    Failed {
        /// The run id.
        run_id: Arc<str>,
        /// What went wrong: its kind (rate limited, authentication, step limit, ...), a message
        /// and the underlying error as its source.
        error: ModelError,
    },
    /// The host cancelled the run ([`crate::session::CancelHandle::cancel`]): every tool call
    /// of the last model reply has a result (a "cancelled" one where none arrived), the run
    /// ended `aborted`, and the session is ready for the next message.
    Aborted {
        /// The run id.
        run_id: Arc<str>,
    },
}

impl RunOutcome {
    /// The run id.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::RunOutcome;
    /// let outcome = RunOutcome::Aborted { run_id: "run_1".into() };
    /// assert_eq!(&**outcome.run_id(), "run_1");
    /// ```
    pub fn run_id(&self) -> &Arc<str> {
        match self {
            RunOutcome::Completed { run_id, .. }
            | RunOutcome::Suspended { run_id, .. }
            | RunOutcome::ToolCallsSuspended { run_id, .. }
            | RunOutcome::AwaitingAnswer { run_id, .. }
            | RunOutcome::Failed { run_id, .. }
            | RunOutcome::Aborted { run_id } => run_id,
        }
    }

    /// How the run ended (or paused): what its `agent_end` event said and what the session
    /// record keeps.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{RunOutcome, event::RunState};
    /// let outcome = RunOutcome::Aborted { run_id: "run_1".into() };
    /// assert_eq!(outcome.state(), RunState::Aborted);
    /// ```
    pub fn state(&self) -> RunState {
        match self {
            RunOutcome::Completed { .. } => RunState::Completed,
            RunOutcome::Suspended { .. }
            | RunOutcome::ToolCallsSuspended { .. }
            | RunOutcome::AwaitingAnswer { .. } => RunState::Suspended,
            RunOutcome::Failed { .. } => RunState::Failed,
            RunOutcome::Aborted { .. } => RunState::Aborted,
        }
    }
}

/// A [`RunOutcome`] as a host sends it on (an HTTP answer, a JSON line), camelCase: `outcome`
/// (`completed`, `suspended`, `tool_calls_suspended`, `awaiting_answer`, `failed`, `aborted`),
/// `state` ([`RunOutcome::state`]), `runId`, and what goes with it: `text` (completed);
/// `toolCallId` and `payload` (the captured plan); `pending`, each waiting decision as
/// `tool_suspended` showed it ([`PendingDecision::suspension`]); `error` with its `kind` and
/// `message` (failed).
///
/// # Examples
/// ```
/// use agent_controller::RunOutcome;
/// let outcome = RunOutcome::Completed { run_id: "run_1".into(), text: "Done.".into() };
/// assert_eq!(serde_json::to_value(&outcome)?, serde_json::json!({
///     "outcome": "completed", "state": "completed", "runId": "run_1", "text": "Done.",
/// }));
/// # Ok::<(), serde_json::Error>(())
/// ```
impl serde::Serialize for RunOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut out = serializer.serialize_map(None)?;
        let outcome = match self {
            RunOutcome::Completed { .. } => "completed",
            RunOutcome::Suspended { .. } => "suspended",
            RunOutcome::ToolCallsSuspended { .. } => "tool_calls_suspended",
            RunOutcome::AwaitingAnswer { .. } => "awaiting_answer",
            RunOutcome::Failed { .. } => "failed",
            RunOutcome::Aborted { .. } => "aborted",
        };
        out.serialize_entry("outcome", outcome)?;
        out.serialize_entry("state", &self.state())?;
        out.serialize_entry("runId", &**self.run_id())?;
        match self {
            RunOutcome::Completed { text, .. } => out.serialize_entry("text", text)?,
            RunOutcome::Suspended {
                tool_call_id,
                payload,
                ..
            } => {
                out.serialize_entry("toolCallId", tool_call_id)?;
                out.serialize_entry("payload", payload)?;
            }
            RunOutcome::ToolCallsSuspended { tool_calls, .. } => {
                let shown: Vec<_> = tool_calls
                    .iter()
                    .map(|call| crate::event::Suspension::ToolCall(call.payload.clone()))
                    .collect();
                out.serialize_entry("pending", &shown)?;
            }
            RunOutcome::AwaitingAnswer { pending, .. } => {
                let shown: Vec<_> = pending.iter().map(PendingDecision::suspension).collect();
                out.serialize_entry("pending", &shown)?;
            }
            RunOutcome::Failed { error, .. } => {
                let error = serde_json::json!({
                    "kind": error.kind(),
                    "message": error.to_string(),
                });
                out.serialize_entry("error", &error)?;
            }
            RunOutcome::Aborted { .. } => {}
        }
        out.end()
    }
}

/// Everything the sessions of one controller share: read-only after the controller is built
/// ([`crate::controller::AgentControllerBuilder::build`]).
pub(crate) struct Shared {
    pub(crate) graph: ModeGraph,
    pub(crate) tools: ToolRegistry,
    pub(crate) model: Arc<dyn LanguageModel>,
    pub(crate) workspace: PathBuf,
    /// Whether the host named the workspace (an old record without one may adopt it).
    pub(crate) workspace_named: bool,
    pub(crate) plans_dir: PathBuf,
    pub(crate) max_steps: usize,
    /// Plan revisions per run ([`crate::controller::AgentControllerBuilder::max_revisions`]).
    pub(crate) max_revisions: usize,
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    pub(crate) fingerprint: String,
    pub(crate) lease_owner: String,
    pub(crate) lease_duration: Duration,
    pub(crate) protected_paths: Vec<PathBuf>,
    pub(crate) runtimes: Vec<ModeRuntime>,
    /// Now, for deadlines and leases ([`crate::controller::AgentControllerBuilder::clock`]).
    pub(crate) clock: crate::deadline::Clock,
    /// Builds the model an approval chooses for the next mode
    /// ([`crate::controller::AgentControllerBuilder::model_chooser`]).
    pub(crate) model_chooser: Option<Arc<dyn crate::model::ModelChooser>>,
    /// The id of the controller's own model, when the host names it
    /// ([`crate::controller::AgentControllerBuilder::model_id`]).
    pub(crate) model_id: Option<String>,
    /// The models a session may be switched to ([`crate::Session::models`]).
    pub(crate) models: Vec<String>,
    /// What the graph lets each mode do, as records keep it: made at the first save.
    pub(crate) recorded_config: std::sync::OnceLock<crate::store::RecordedConfig>,
    /// The built-in task tools the controller registered (`crate::tool::tasks`): the session
    /// applies their calls to its task list itself.
    pub(crate) task_tools: Vec<&'static str>,
    /// Whether the controller registered the built-in `subagent` tool, whose calls the session
    /// runs itself as child runs ([`crate::subagent`]).
    pub(crate) subagent_tool: bool,
    /// How deep, how many at once and how long subagents run.
    pub(crate) subagent_limits: crate::subagent::SubagentLimits,
    /// How deep the sessions sharing this are: 0 for a controller's, 1 for its children.
    pub(crate) depth: usize,
    /// Every event of the controller's sessions ([`crate::AgentController::events`]); `None`
    /// for a subagent's (its parent wraps them).
    pub(crate) events: Option<tokio::sync::broadcast::Sender<Event>>,
    /// The hooks consulted before a tool call runs or waits and before a plan waits
    /// ([`crate::hook`]), in the order they were registered.
    pub(crate) hooks: Vec<Arc<dyn crate::hook::Hook>>,
    /// The reviewers a mode's `reviewBy` names ([`crate::review`]), by id: the host's, then
    /// the config's `[[reviewers]]` the host registered none for.
    pub(crate) reviewers: std::collections::HashMap<String, Arc<dyn crate::review::Reviewer>>,
    /// The managed config file, looked at before each step: its change rules the calls from
    /// then on ([`crate::config::ManagedWatch`]); `None` for a graph from one file or a child's.
    pub(crate) managed_watch: Option<Arc<crate::config::ManagedWatch>>,
}

impl Shared {
    /// Now by the controller's clock, in milliseconds since the Unix epoch: every time the
    /// session reads (deadlines, leases, `updatedAt`, `decidedAt`) comes from here.
    pub(crate) fn now_ms(&self) -> u64 {
        crate::deadline::millis_since_epoch((self.clock)())
    }

    pub(crate) fn runtime(&self, mode: ModeId) -> &ModeRuntime {
        &self.runtimes[mode.index().min(self.runtimes.len() - 1)]
    }
}

/// The session's own allowances a record keeps: its `allowances`; for a record from before
/// them (`allowances` empty), each tool of its `alwaysAllowed`, of scope `mode` in the record's
/// mode `mode_id`, with the id of the decision that allowed it where the history shows it.
fn recorded_allowances(
    allowances: Vec<crate::allowance::Allowance>,
    tools: &[String],
    history: &[DecidedRecord],
    mode_id: &str,
) -> Vec<crate::allowance::Allowance> {
    if !allowances.is_empty() {
        return allowances;
    }
    tools
        .iter()
        .map(|tool| {
            let id = history
                .iter()
                .rev()
                .find(|d| d.always_allow && d.tool_name.as_deref() == Some(tool.as_str()))
                .map_or_else(
                    || format!("always_allowed_{tool}"),
                    |d| d.decision_id.clone(),
                );
            crate::allowance::Allowance::new(
                crate::allowance::AllowanceScope::Mode,
                id,
                mode_id,
                tool.as_str(),
            )
        })
        .collect()
}

/// The targets of a pending plan restored under `graph`, in the payload's order, and why it can
/// no longer be approved (a listed target is gone, or the config changed what plans from `mode`
/// hand over to), if so.
fn restored_targets(
    graph: &crate::mode::ModeGraph,
    mode: ModeId,
    changed: bool,
    mode_id: &str,
    payload: &crate::event::SuspendPayload,
) -> (Vec<ModeId>, Option<String>) {
    let mut targets = Vec::with_capacity(payload.target_mode_ids.len());
    for wanted in &payload.target_mode_ids {
        match graph.get(wanted) {
            Some(t) => targets.push(t),
            None => {
                let stale =
                    format!("its hand-over target `{wanted}` no longer exists in the config");
                return (vec![mode], Some(stale));
            }
        }
    }
    let now = graph.transition_targets(mode);
    if changed && now != targets {
        let ids = |list: &[ModeId]| {
            list.iter()
                .map(|t| format!("`{}`", graph.mode(*t).id()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let stale = format!(
            "the config now hands plans from `{mode_id}` over to {}, not {} as when it was submitted",
            ids(&now),
            ids(&targets)
        );
        return (targets, Some(stale));
    }
    (targets, None)
}

/// An operation that drives a run, holding its session: dropped before
/// [`Operation::finish`], it ends the run in memory at once ([`Session::abandon`]).
pub(crate) struct Operation<'a> {
    pub(crate) session: &'a mut Session,
    finished: bool,
}

impl<'a> Operation<'a> {
    pub(crate) fn new(session: &'a mut Session) -> Self {
        Self {
            session,
            finished: false,
        }
    }

    /// The operation returned `outcome`: the run is no longer in progress.
    pub(crate) fn finish<T>(mut self, outcome: T) -> T {
        self.finished = true;
        outcome
    }
}

impl Drop for Operation<'_> {
    fn drop(&mut self) {
        if self.finished {
            self.session.finish_operation();
        } else {
            self.session.abandon();
        }
    }
}

/// Cancels a session's run from another task; get one with [`Session::cancel_handle`].
///
/// Cheap to clone, `Send` and `Sync`; every clone cancels the same session's runs. What
/// [`CancelHandle::cancel`] does:
///
/// - **A run in progress** (a [`Session::send_message`], [`Session::resume`],
///   [`Session::decide`] or [`Session::continue_run`] that carries a run on has started and not
///   returned) stops waiting for its model or tool at once (their futures are dropped, and their
///   [`CancellationToken`] is cancelled). From then on the run ends `aborted`, whatever the
///   model or a tool returns as it stops (an error included): what a tool returned is kept as
///   its result, no further call starts or waits for approval, every unanswered tool call gets
///   a result saying so, `agent_end` (reason `aborted`) is emitted, the session is saved, and
///   the operation returns [`RunOutcome::Aborted`].
/// - **No run in progress**: the cancel is kept for the session's next run, the one an
///   operation about to be called (in a task not yet polled, say) starts. That run ends
///   `aborted` at once, before any model or tool call. The message or decision that starts it
///   still counts: the message is in the conversation, the decision is saved (an approved plan
///   switches mode; approved tool calls do not run). A decision that ends the run itself (a plan
///   rejected without feedback) ends it as usual. A kept cancel is used up by that one run; a
///   tool-call decision while other calls of the reply still wait carries no run on and
///   leaves it for the run's resumption; `abort`, `switch_mode` and the like leave it too.
///
/// A save in progress is never interrupted: the run stops after it, and a cancel that arrives
/// while its last save (of its suspension or its end) is under way does not change how it
/// ends.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::{AgentController, RunOutcome, SessionOptions, config};
/// use agent_controller::model::scripted::ScriptedModel;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
/// let mut session = controller.start_session(SessionOptions::new()).await?;
/// let handle = session.cancel_handle();
/// // A host's "stop" button: `tokio::spawn(async move { handle.cancel() })`, or from any thread.
/// // No run is in progress yet: the cancel is kept for the next run, which ends at once.
/// assert!(!handle.cancel());
/// let outcome = session.send_message("hello").await?;
/// assert!(matches!(outcome, RunOutcome::Aborted { .. }));
/// // Used up: the run after it runs.
/// let outcome = session.send_message("hello again").await?;
/// assert!(matches!(outcome, RunOutcome::Completed { .. }));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct CancelHandle {
    current: Arc<Mutex<CancelState>>,
}

/// The run a [`CancelHandle`] cancels: its token while one is in progress, and whether a
/// cancel is kept for the next run.
#[derive(Debug, Default)]
struct CancelState {
    token: Option<CancellationToken>,
    next: bool,
}

impl CancelHandle {
    /// Cancels the run in progress, or, when none is, the session's next run (see
    /// [`CancelHandle`]); returns whether a run was in progress.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::session::CancelHandle;
    /// let handle = CancelHandle::default();
    /// assert!(!handle.cancel(), "no run in progress: the cancel is kept for the next run");
    /// assert!(handle.withdraw());
    /// ```
    pub fn cancel(&self) -> bool {
        let mut state = self.lock();
        match &state.token {
            Some(token) => {
                token.cancel();
                true
            }
            None => {
                state.next = true;
                false
            }
        }
    }

    /// Withdraws a cancel [`CancelHandle::cancel`] kept for the session's next run (one given
    /// while no run was in progress); returns whether one was kept. A host whose "stop" covers
    /// one turn of several runs (the ACP agent's `session/cancel`) calls it when the turn ends,
    /// so a stop that came after the turn's last run does not end the next turn's first run.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::session::CancelHandle;
    /// let handle = CancelHandle::default();
    /// assert!(!handle.cancel()); // no run in progress: kept for the next run
    /// assert!(handle.withdraw());
    /// assert!(!handle.withdraw());
    /// ```
    pub fn withdraw(&self) -> bool {
        std::mem::take(&mut self.lock().next)
    }

    /// Whether a cancel is kept for the session's next run (one given while no run was in
    /// progress, not withdrawn).
    pub(crate) fn is_kept(&self) -> bool {
        self.lock().next
    }

    /// Whether a run is in progress.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// let handle = session.cancel_handle();
    /// assert!(!handle.is_running());
    /// session.send_message("hello").await?;
    /// assert!(!handle.is_running(), "the run ended");
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_running(&self) -> bool {
        self.lock().token.is_some()
    }

    /// A fresh token for a run that starts now: already cancelled when a cancel was kept for
    /// it.
    fn start(&self) -> CancellationToken {
        let token = CancellationToken::new();
        let mut state = self.lock();
        if std::mem::take(&mut state.next) {
            token.cancel();
        }
        state.token = Some(token.clone());
        token
    }

    /// No run is in progress any more; cancels the token of one that was (work a dropped run's
    /// model or tool left behind stops too).
    fn finish(&self) {
        if let Some(token) = self.lock().token.take() {
            token.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CancelState> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Options for [`crate::AgentController::start_session`].
#[derive(Default)]
pub struct SessionOptions {
    pub(crate) mode: Option<String>,
    pub(crate) id: Option<String>,
    pub(crate) subscribers: Subscribers,
    pub(crate) extensions: Extensions,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) model: Option<Arc<dyn LanguageModel>>,
    pub(crate) max_steps: Option<usize>,
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("mode", &self.mode)
            .field("id", &self.id)
            .field("subscribers", &self.subscribers.count_all())
            .field("extensions", &self.extensions)
            .field("metadata", &self.metadata)
            .field("model", &self.model.as_ref().map(|_| "overridden"))
            .field("max_steps", &self.max_steps)
            .finish()
    }
}

impl SessionOptions {
    /// Default options: the resolved default mode, a random id, no subscribers.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let session = controller.start_session(SessionOptions::new()).await?;
    /// assert_eq!(session.mode().id(), "build", "the default mode");
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Start in the mode with this id instead of the default mode.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// assert_eq!(session.mode().id(), "plan");
    /// let unknown = controller.start_session(SessionOptions::new().mode("review")).await;
    /// assert!(matches!(unknown, Err(agent_controller::SessionError::UnknownMode { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn mode(mut self, id: impl Into<String>) -> Self {
        self.mode = Some(id.into());
        self
    }

    /// Use this session id instead of a random UUID: 1 to 128 ASCII letters, digits, `-` and
    /// `_` ([`crate::store::check_session_id`]); with a store it must not exist there yet.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let session = controller.start_session(SessionOptions::new().id("ticket-42")).await?;
    /// assert_eq!(session.id(), "ticket-42");
    /// assert!(controller.start_session(SessionOptions::new().id("not/a/path")).await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Receive every event from the start (including `session_started`).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let kinds = Arc::new(std::sync::Mutex::new(Vec::new()));
    /// let sink = kinds.clone();
    /// let options = SessionOptions::new().on_event(move |event| sink.lock().unwrap().push(event.kind()));
    /// let mut session = controller.start_session(options).await?;
    /// session.send_message("hello").await?;
    /// let kinds = kinds.lock().unwrap();
    /// assert_eq!(kinds.first(), Some(&"session_started"));
    /// assert_eq!(kinds.last(), Some(&"agent_end"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_event(mut self, subscriber: impl FnMut(&Event) + Send + 'static) -> Self {
        self.subscribers.add_permanent(Box::new(subscriber));
        self
    }

    /// Receive every event from the start (including `session_started`) as an async stream;
    /// returns the options and the stream. See [`EventStream`] (in order, unbounded, ends when
    /// the session is dropped).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let (options, mut events) = SessionOptions::new().event_stream();
    /// let mut session = controller.start_session(options).await?;
    /// assert_eq!(events.next().await.map(|e| e.kind()), Some("session_started"));
    /// session.send_message("hello").await?;
    /// assert_eq!(events.try_next().map(|e| e.kind()), Some("agent_start"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn event_stream(mut self) -> (Self, EventStream) {
        let stream = self.subscribers.add_stream();
        (self, stream)
    }

    /// Adds a value of the host's own to the session's [`Extensions`], which its tools
    /// ([`crate::tool::ToolContext::extensions`]) and model
    /// ([`crate::model::ModelRequest::extensions`]) can read; one value per type, a later one
    /// replaces an earlier one. Kept in memory only: give them again to
    /// [`crate::AgentController::restore_session`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::SessionOptions;
    /// struct TenantId(&'static str);
    /// let options = SessionOptions::new().extension(TenantId("acme"));
    /// ```
    pub fn extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Free-form metadata of the host's own (a JSON object), persisted in the session's record
    /// and readable with [`Session::metadata`], also after a restore. Ignored by
    /// [`crate::AgentController::restore_session`], which keeps the stored metadata.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::SessionOptions;
    /// let mut metadata = serde_json::Map::new();
    /// metadata.insert("userId".into(), serde_json::json!("u-42"));
    /// let options = SessionOptions::new().metadata(metadata);
    /// ```
    pub fn metadata(mut self, metadata: Map<String, Value>) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Drives this session's runs with `model` instead of the controller's
    /// ([`crate::AgentController::builder`]). Kept in memory only: give it again to
    /// [`crate::AgentController::restore_session`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// use agent_controller::model::scripted::ReplayModel;
    /// let model = Arc::new(ReplayModel::new([ReplayModel::text("from the session's own model")]));
    /// let mut session = controller.start_session(SessionOptions::new().model(model.clone())).await?;
    /// let outcome = session.send_message("hello").await?;
    /// assert!(matches!(outcome, RunOutcome::Completed { text, .. } if text == "from the session's own model"));
    /// assert_eq!(model.requests().len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn model(mut self, model: Arc<dyn LanguageModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// Limits each run of this session to `steps` model calls (at least 1) instead of the
    /// controller's limit ([`crate::controller::AgentControllerBuilder::max_steps`]); a run that reaches it
    /// fails with [`crate::model::ModelErrorKind::StepLimit`]. Kept in memory only, like
    /// [`SessionOptions::model`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// use agent_controller::model::{ModelErrorKind, scripted::ReplayModel};
    /// let model = Arc::new(ReplayModel::new([
    ///     ReplayModel::call("call_1", "read_file", serde_json::json!({ "path": "a.txt" })),
    ///     ReplayModel::text("never reached"),
    /// ]));
    /// let options = SessionOptions::new().model(model).max_steps(1);
    /// let mut session = controller.start_session(options).await?;
    /// let RunOutcome::Failed { error, .. } = session.send_message("read a.txt").await? else { unreachable!() };
    /// assert_eq!(error.kind(), ModelErrorKind::StepLimit);
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_steps(mut self, steps: usize) -> Self {
        self.max_steps = Some(steps.max(1));
        self
    }
}

/// One conversation with a current mode. Created by [`crate::AgentController::start_session`].
///
/// Every operation takes `&mut self`: one caller drives a session at a time, so two decisions can
/// never race inside one process. Run ids (`run_1`, `run_2`, ...) are unique within a session
/// only: key runs of several sessions by (session id, run id).
pub struct Session {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: Arc<str>,
    /// What the session keeps and saves: the last state saved (or, after a run's future was
    /// dropped, that run's end, saved by the next operation). A change is computed on a copy
    /// and swapped in once saved ([`Session::handle`]).
    pub(crate) state: State,
    /// Callbacks and streams; behind a mutex only so a streaming model can deliver text deltas
    /// while the run loop lends it the conversation (everywhere else it is reached without
    /// locking, through `&mut self`).
    pub(crate) subscribers: Mutex<Subscribers>,
    /// The host's state for tools and models.
    pub(crate) extensions: Extensions,
    /// The host's metadata, persisted in the record.
    pub(crate) metadata: Map<String, Value>,
    /// The model of this session's runs, when not the controller's.
    pub(crate) model: Option<Arc<dyn LanguageModel>>,
    /// The step limit of this session's runs, when not the controller's.
    pub(crate) max_steps: Option<usize>,
    /// The model an approval chose ([`State::model_id`]), once built, with its id.
    pub(crate) chosen_model: Option<(String, Arc<dyn LanguageModel>)>,
    /// The workspace the session works in, recorded when it started ([`crate::workspace`]).
    pub(crate) workspace: WorkspaceRecord,
    /// Cancels the run in progress; shared with the host's handles.
    cancel: CancelHandle,
    /// The token of the run in progress (or of the last one).
    pub(crate) run_token: CancellationToken,
    /// The store version this session last saved or loaded (0: never saved).
    pub(crate) version: u64,
    /// A run's future was dropped: the run's end (aborted) is shown at once, and saved, with
    /// these held-back events, by the next operation or [`Session::settle`].
    abandoned: Option<Vec<Event>>,
    /// While a call of a reply runs: the abort that answers the reply's open calls as the rules
    /// cannot tell them apart (the calls that wait for approval or for an answer, and the
    /// allowance that let the running call run, with its audit record), which
    /// [`Session::abandon`] uses if the run's future is dropped then.
    pub(crate) abort_while_running: Option<crate::machine::input::Abort>,
    /// The results of the `subagent` calls of a reply that run together, each as it finishes
    /// (by its call's position in the reply): what [`Session::abandon`] keeps as their results
    /// if the run's future is dropped while their siblings still run. Behind a mutex only
    /// because the children run while the session is lent to them.
    pub(crate) subagent_results: Mutex<Vec<(usize, crate::tool::ToolOutput)>>,
    /// The children of the running reply's `subagent` calls that wait for the user, each with
    /// its call's position in the reply, as they settle: the run suspends on them.
    pub(crate) waiting_children: Mutex<Vec<(usize, crate::machine::state::WaitingChild)>>,
    /// The writes the children of this session's `subagent` calls noted in their copies of
    /// the approved plan's ledger, as they ended, until the session takes them into its own
    /// ([`Session::note_child_plan_writes`]).
    pub(crate) child_plan_writes: subagent::ChildPlanWrites,
    /// The save of the change in progress, while it runs, with the state it saves.
    saving: Option<Saving>,
    /// The buffer of the last change's events, kept for the next change of a running run.
    spare_events: Vec<Event>,
    /// How the model's last reply in this session finished, if the provider said
    /// ([`Session::last_finish`]).
    pub(crate) last_finish: Option<crate::model::Finish>,
    /// The hooks' verdicts on the calls of the reply being run, by the call's position in the
    /// reply ([`crate::hook`]): what [`crate::machine::ruling::hooked`] narrows each ruling
    /// with, each time the call is ruled again.
    pub(crate) reply_hooks: Vec<Option<crate::hook::HookRecord>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("mode", &self.mode().id())
            .field("run", &self.state.run)
            .field("pending", &self.state.pending)
            .field("always_allowed", &self.state.always_allowed)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A new session in `mode`: saved at once when a store is configured (an id the store
    /// already has is refused), then `session_started` is emitted.
    pub(crate) async fn start(
        shared: Arc<Shared>,
        id: Arc<str>,
        mode: ModeId,
        options: SessionOptions,
    ) -> Result<Self, SessionError> {
        let mut session = Self::unsaved(shared, id, mode, options)?;
        session.load_workspace_allowances().await;
        let started = session.handle(Input::Opened).await;
        match started {
            Ok(_) => Ok(session),
            Err(SessionError::Store(StoreError::Conflict {
                found: Some(_),
                expected: None,
                ..
            })) => Err(SessionError::SessionExists(session.id.to_string())),
            Err(e) => Err(e),
        }
    }

    /// A new session `id` in `mode`, in the controller's workspace, not yet saved nor opened:
    /// what [`Session::start`] begins with, and what [`crate::AgentController::explain`]
    /// rules a call in.
    pub(crate) fn unsaved(
        shared: Arc<Shared>,
        id: Arc<str>,
        mode: ModeId,
        options: SessionOptions,
    ) -> Result<Self, SessionError> {
        let workspace =
            WorkspaceRecord::of(&shared.workspace).map_err(|e| SessionError::WorkspaceGone {
                session_id: id.to_string(),
                path: std::path::absolute(&shared.workspace)
                    .unwrap_or_else(|_| shared.workspace.clone()),
                reason: e.to_string(),
            })?;
        Ok(Self {
            workspace,
            shared,
            id,
            state: State::new(mode),
            subscribers: Mutex::new(options.subscribers),
            extensions: options.extensions,
            metadata: options.metadata.unwrap_or_default(),
            model: options.model,
            max_steps: options.max_steps,
            chosen_model: None,
            cancel: CancelHandle::default(),
            run_token: CancellationToken::new(),
            version: 0,
            abandoned: None,
            abort_while_running: None,
            reply_hooks: Vec::new(),
            subagent_results: Mutex::new(Vec::new()),
            waiting_children: Mutex::new(Vec::new()),
            child_plan_writes: subagent::ChildPlanWrites::default(),
            saving: None,
            spare_events: Vec::new(),
            last_finish: None,
        })
    }

    /// Rebuilds a session from a stored record under the current config.
    pub(crate) fn from_record(
        shared: Arc<Shared>,
        record: SessionRecord,
        options: SessionOptions,
    ) -> Result<Self, SessionError> {
        let workspace = match &record.workspace {
            Some(recorded) => {
                check_workspace(&record.session_id, recorded, &shared.workspace)?;
                recorded.clone()
            }
            // A record from before workspaces: only a workspace the host named is adopted.
            None if shared.workspace_named => {
                WorkspaceRecord::of(&shared.workspace).map_err(|e| SessionError::WorkspaceGone {
                    session_id: record.session_id.clone(),
                    path: std::path::absolute(&shared.workspace)
                        .unwrap_or_else(|_| shared.workspace.clone()),
                    reason: e.to_string(),
                })?
            }
            None => {
                return Err(SessionError::NoWorkspaceRecorded {
                    session_id: record.session_id,
                });
            }
        };
        let graph = &shared.graph;
        let mode = graph.get(&record.mode_id).ok_or_else(|| {
            SessionError::ConfigChanged(format!(
                "session `{}` was in mode `{}`, which the config no longer has",
                record.session_id, record.mode_id
            ))
        })?;
        let changed = record.config_fingerprint != shared.fingerprint;
        let lease = record.run.as_ref().and_then(|r| match (r.state, &r.owner) {
            (RunState::Running, Some(owner)) => Some(Lease {
                owner: owner.clone(),
                expires_at_ms: r.lease_expires_at_ms.unwrap_or(0),
            }),
            _ => None,
        });
        let mut decisions = record.decision_counter;
        let pending = record.pending.map(|mut p| {
            if p.suspend_payload.decision_id.is_empty() {
                // A record from before decision ids: give the pending plan one now.
                decisions += 1;
                p.suspend_payload.decision_id = decision_id_for(decisions);
            }
            if p.suspend_payload.target_mode_ids.is_empty() {
                // A record from before target lists: the one target is the list.
                p.suspend_payload.target_mode_ids = vec![p.suspend_payload.target_mode_id.clone()];
            }
            let (targets, stale) =
                restored_targets(graph, mode, changed, &record.mode_id, &p.suspend_payload);
            let target = targets.first().copied().unwrap_or(mode);
            PendingDecision::Plan(PendingPlan {
                run_id: Arc::from(p.run_id),
                tool_call_id: p.tool_call_id,
                target,
                targets,
                payload: p.suspend_payload,
                stale,
            })
        });
        let calls = record.pending_tool_calls.into_iter().map(|p| {
            PendingDecision::ToolCall(PendingToolCall {
                run_id: Arc::from(p.run_id),
                tool_call_id: p.tool_call_id,
                payload: p.suspend_payload,
                // A record saved before decided records kept the feedback has it beside.
                decided: p.decided.map(|mut d| {
                    if d.feedback.is_none() {
                        d.feedback = p.feedback;
                    }
                    d
                }),
            })
        });
        let suspensions = record.pending_suspensions.into_iter().map(|p| {
            PendingDecision::Suspension(PendingSuspension {
                run_id: Arc::from(p.run_id),
                tool_call_id: p.tool_call_id,
                payload: Arc::new(p.suspend_payload),
                decided: p.decided,
                answer: p.answer,
                feedback: p.feedback,
            })
        });
        // In the model's order of the reply's calls, whatever the kind.
        let mut pending: Vec<PendingDecision> = pending
            .into_iter()
            .chain(calls)
            .chain(suspensions)
            .collect();
        if let Some(at) = record
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
            && let Message::Assistant { tool_calls, .. } = &record.messages[at]
        {
            // A child's decision is not a call of the reply: it sits at its parent's
            // `subagent` call, as it did before the save.
            pending.sort_by_key(|p| {
                let id = p
                    .subagent()
                    .map_or(p.tool_call_id(), |origin| origin.tool_call_id.as_str());
                tool_calls
                    .iter()
                    .position(|c| c.id == id)
                    .unwrap_or(usize::MAX)
            });
        }
        let history = if record.history.is_empty() {
            record.last_decided.into_iter().collect()
        } else {
            record.history
        };
        // Each waiting child's state, read as a session of its own under this config.
        let children = record
            .children
            .into_iter()
            .map(|child| {
                let restored =
                    Self::from_record(shared.clone(), *child.record, SessionOptions::new())?;
                Ok(crate::machine::state::WaitingChild {
                    tool_call_id: child.tool_call_id,
                    agent_type: Arc::from(child.agent_type),
                    child_id: Arc::from(child.child_id),
                    state: Box::new(restored.state),
                })
            })
            .collect::<Result<Vec<_>, SessionError>>()?;
        let allowances = recorded_allowances(
            record.allowances,
            &record.always_allowed,
            &history,
            &record.mode_id,
        );
        let mut session = Self {
            id: Arc::from(record.session_id),
            state: State {
                mode,
                messages: Arc::new(record.messages),
                counter: record.run_counter,
                run: record.run.map(|r| (Arc::from(r.run_id), r.state)),
                pending,
                always_allowed: Vec::new(),
                allowances,
                workspace_allowances: Vec::new(),
                history,
                decisions,
                last_plan: record.last_plan,
                lease,
                holds_lease: false,
                model_id: record.model_id,
                tasks: record.tasks,
                children,
                plan_ledger: record.plan_ledger,
                plan_report: record.plan_report,
            },
            subscribers: Mutex::new(options.subscribers),
            extensions: options.extensions,
            metadata: record.metadata,
            model: options.model,
            max_steps: options.max_steps,
            chosen_model: None,
            workspace,
            cancel: CancelHandle::default(),
            run_token: CancellationToken::new(),
            version: record.version,
            abandoned: None,
            abort_while_running: None,
            reply_hooks: Vec::new(),
            subagent_results: Mutex::new(Vec::new()),
            waiting_children: Mutex::new(Vec::new()),
            child_plan_writes: subagent::ChildPlanWrites::default(),
            saving: None,
            spare_events: Vec::new(),
            last_finish: None,
            shared,
        };
        let mode_id = session.mode_arc();
        session.state.refresh_allowed(&mode_id);
        Ok(session)
    }

    /// The host's parts of this session (subscribers, extensions, model, step limit) as
    /// options, for restoring it again.
    pub(crate) fn into_options(self) -> SessionOptions {
        SessionOptions {
            mode: None,
            id: None,
            subscribers: self
                .subscribers
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner),
            extensions: self.extensions,
            metadata: None,
            model: self.model,
            max_steps: self.max_steps,
        }
    }

    /// The session id.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let a = controller.start_session(SessionOptions::new()).await?;
    /// let b = controller.start_session(SessionOptions::new()).await?;
    /// assert_ne!(a.id(), b.id(), "a random UUID each");
    /// # Ok(())
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The workspace the session works in: the canonical path it recorded when it started
    /// ([`crate::workspace`]).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// assert_eq!(session.workspace(), workspace.path().canonicalize()?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn workspace(&self) -> &Path {
        &self.workspace.path
    }

    /// Checks that the controller's workspace is still the directory this session recorded:
    /// every act that can run a tool checks it first.
    fn check_workspace(&self) -> Result<(), SessionError> {
        check_workspace(&self.id, &self.workspace, &self.shared.workspace)
    }

    /// The host's metadata ([`SessionOptions::metadata`]), as persisted in the record.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let mut metadata = serde_json::Map::new();
    /// metadata.insert("userId".into(), serde_json::json!("u-42"));
    /// let session = controller.start_session(SessionOptions::new().metadata(metadata)).await?;
    /// assert_eq!(session.metadata()["userId"], "u-42");
    /// # Ok(())
    /// # }
    /// ```
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.metadata
    }

    /// The host's state for this session's tools and model ([`SessionOptions::extension`]).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// struct TenantId(&'static str);
    /// let session = controller.start_session(SessionOptions::new().extension(TenantId("acme"))).await?;
    /// assert_eq!(session.extensions().get::<TenantId>().map(|t| t.0), Some("acme"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// The same, to add or replace values between runs.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// struct TenantId(&'static str);
    /// assert!(session.extensions_mut().insert(TenantId("acme")).is_none());
    /// assert!(session.extensions().contains::<TenantId>());
    /// # Ok(())
    /// # }
    /// ```
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }

    /// A handle that cancels this session's run in progress, or its next run, from another
    /// task or thread ([`CancelHandle`]).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// let handle = session.cancel_handle();
    /// std::thread::spawn(move || handle.cancel()).join().unwrap();
    /// assert!(matches!(session.send_message("hello").await?, RunOutcome::Aborted { .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// The current mode: the one whose instructions and tools the next model call uses.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// let mode = session.mode();
    /// assert_eq!(mode.id(), "build");
    /// assert!(!mode.is_planning());
    /// # Ok(())
    /// # }
    /// ```
    pub fn mode(&self) -> &Mode {
        self.shared.graph.mode(self.mode_id())
    }

    /// How the model's last reply in this session finished ([`crate::model::Finish`]), if the
    /// provider said; `None` too after a model call that failed. With the outcome of the run,
    /// [`StopReason::of`] tells how the turn ended.
    pub fn last_finish(&self) -> Option<crate::model::Finish> {
        self.last_finish
    }

    /// The current mode's handle.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// let id = session.mode_id();
    /// assert_eq!(controller.modes().mode(id).id(), "build");
    /// assert_eq!(Some(id), controller.modes().get("build"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn mode_id(&self) -> ModeId {
        self.state.mode
    }

    /// The session's task list, in order ([`crate::tool::tasks`]): what the task tools wrote,
    /// or the numbered steps of the plan approved last; empty before either. Kept in the
    /// session's record, so a restored session has it back.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\ndefault = true\n", "modes.toml")?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let session = controller.start_session(SessionOptions::new()).await?;
    /// assert!(session.tasks().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn tasks(&self) -> &[crate::tool::tasks::Task] {
        &self.state.tasks
    }

    /// The report of the session's last run of an approved plan
    /// ([`crate::plan_report::PlanReport`], also the `plan_report` event); `None` before one
    /// ended. Kept in the session record.
    pub fn plan_report(&self) -> Option<&crate::plan_report::PlanReport> {
        self.state.plan_report.as_ref()
    }

    pub(crate) fn mode_arc(&self) -> Arc<str> {
        self.shared.graph.mode(self.state.mode).id_arc().clone()
    }

    /// The conversation so far.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// use agent_controller::model::Message;
    /// session.send_message("hello").await?;
    /// let messages = session.messages();
    /// assert_eq!(messages[0], Message::User { content: "hello".into() });
    /// assert!(matches!(messages.last(), Some(Message::Assistant { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn messages(&self) -> &[Message] {
        &self.state.messages
    }

    /// What the suspended run waits on, empty when nothing waits: the plan, or the tool calls
    /// waiting for approval (the mode's `requireApproval`) in the model's order, every call of
    /// the run's last reply that needs a decision, the ones decided already while others wait
    /// included ([`PendingDecision::decision`]). Never a plan and tool calls at once.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let pending = session.pending();
    /// assert_eq!(pending.len(), 1);
    /// assert_eq!(pending[0].decision_id(), payload.decision_id);
    /// assert_eq!(pending[0].tool_name(), "submit_plan");
    /// session.decide(&payload.decision_id, Decision::approve()).await?;
    /// assert!(session.pending().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn pending(&self) -> &[PendingDecision] {
        &self.state.pending
    }

    /// The plan among [`Session::pending`], if one waits.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let plan = session.pending_plan().expect("a plan waits");
    /// assert_eq!(plan.payload().submission.title, "Add dark mode");
    /// assert_eq!(controller.modes().mode(plan.target()).id(), "build");
    /// # Ok(())
    /// # }
    /// ```
    pub fn pending_plan(&self) -> Option<&PendingPlan> {
        self.pending().iter().find_map(PendingDecision::as_plan)
    }

    /// The tools an approval allowed ([`Decision::always_allow`]), in the order they were
    /// allowed: their calls run without waiting for approval until the mode changes. Every
    /// mode change empties the list: a manual switch ([`Session::switch_mode`]) and the switch
    /// of an approved plan alike.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// session.decide(tool_calls[0].decision_id(), Decision::approve().always_allow()).await?;
    /// assert_eq!(session.always_allowed(), ["write_file"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn always_allowed(&self) -> &[String] {
        &self.state.always_allowed
    }

    /// Every allowance the session keeps, oldest first: those its decisions gave of scope
    /// `mode` (until the mode changes) and `session` (applying in their own mode only), then the
    /// workspace allowances of its workspace and config, as loaded from the store when it was
    /// opened or restored and as its decisions gave them ([`crate::allowance`]). An allowance
    /// applies in its [`Allowance::mode_id`] only.
    ///
    /// [`Allowance::mode_id`]: crate::allowance::Allowance::mode_id
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// use agent_controller::allowance::{AllowancePattern, AllowanceScope};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "src/a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote it."),
    /// # ]);
    /// # std::fs::create_dir(workspace.path().join("src"))?;
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write src/a.txt").await? else { unreachable!() };
    /// let decision = Decision::approve()
    ///     .always_allow()
    ///     .scope(AllowanceScope::Session)
    ///     .allow_only(AllowancePattern::path("src/**"));
    /// session.decide(tool_calls[0].decision_id(), decision).await?;
    /// let allowances = session.allowances();
    /// assert_eq!(allowances.len(), 1);
    /// assert_eq!(allowances[0].scope, AllowanceScope::Session);
    /// assert_eq!(allowances[0].id, tool_calls[0].decision_id());
    /// # Ok(())
    /// # }
    /// ```
    pub fn allowances(&self) -> Vec<crate::allowance::Allowance> {
        self.state.all_allowances().cloned().collect()
    }

    /// Revokes the allowance with id `id` ([`Session::allowances`]): it no longer applies in
    /// this session; a workspace allowance is revoked in the store first
    /// ([`SessionStore::revoke_workspace_allowance`]), so no session applies it afterwards
    /// (one open elsewhere lists the workspace allowances again before its next call). While a
    /// run in another process holds the session (its lease), the revoke is not held off: it is
    /// saved beside the run, which takes it in at its next save, before its next call, and
    /// carries on ([Two processes, one session](crate::guide::stores#two-processes-one-session)). The
    /// calls of the suspended reply it approved unseen (the other waiting calls of its tool)
    /// and that have not run wait again, to be asked about ([`Session::pending`]);
    /// so does such a call of a session restored after its workspace allowance was revoked in
    /// the store, once the next decision comes. Returns whether the session kept it.
    ///
    /// # Errors
    /// [`SessionError::Store`] when the store fails to revoke or to save the session; the
    /// allowance is then still in force here.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// session.decide(tool_calls[0].decision_id(), Decision::approve().always_allow()).await?;
    /// assert_eq!(session.always_allowed(), ["write_file"]);
    /// assert!(session.revoke_allowance(tool_calls[0].decision_id()).await?);
    /// assert!(session.always_allowed().is_empty());
    /// assert!(!session.revoke_allowance("decision_99").await?, "no such allowance");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn revoke_allowance(&mut self, id: &str) -> Result<bool, SessionError> {
        // A run another process holds is not ended for a revoke, nor does its lease hold the
        // revoke off: the revoke is saved beside it, and the run takes it in at its next save,
        // before its next call (`take_revocations`).
        let held_elsewhere = match &self.state.run {
            Some((run_id, RunState::Running)) => self.check_not_leased(run_id).is_err(),
            _ => false,
        };
        if held_elsewhere {
            self.recover().await?;
            self.load_workspace_allowances().await;
        } else {
            self.settle().await?;
        }
        let Some(kept) = self.state.all_allowances().find(|a| a.id == id).cloned() else {
            return Ok(false);
        };
        if kept.scope == crate::allowance::AllowanceScope::Workspace
            && let Some(store) = self.shared.store.clone()
        {
            store.revoke_workspace_allowance(id).await?;
        }
        self.handle(Input::RevokeAllowance(id.to_owned())).await?;
        Ok(true)
    }

    /// Loads the workspace allowances of this session's workspace and config from the store,
    /// keeping only those in force here ([`crate::allowance::Allowance::applies_in`]: keyed by
    /// both, and given in this same directory), whatever else the store returns. One kept for
    /// this path and config but given in another directory there (deleted and made again, or
    /// replaced), or recording none, is ignored and the log says why. A store that fails to
    /// list them leaves none (an allowance in doubt allows nothing) and says so in the log.
    pub(crate) async fn load_workspace_allowances(&mut self) {
        let Some(store) = self.shared.store.clone() else {
            return;
        };
        let workspace = self.workspace.path.clone();
        let listed = match store.list_workspace_allowances(Some(&workspace)).await {
            Ok(listed) => listed,
            Err(error) => {
                tracing::warn!(session_id = %self.id, %error, "workspace allowances not loaded; none applies");
                Vec::new()
            }
        };
        self.state.workspace_allowances =
            keyed_by(listed, &self.workspace, &self.shared.fingerprint, &self.id);
        let mode_id = self.mode_arc();
        self.state.refresh_allowed(&mode_id);
    }

    /// Takes in what another process saved since this session last saved or loaded:
    /// [`Session::send_message`] and [`Session::switch_mode`] do this first, so a session left
    /// open (an ACP agent's, for days) acts on the session as the store has it, never on a copy
    /// another host changed since (a `switch`, a decision, a run carried on elsewhere). The
    /// stored record replaces the session's state when its version is newer
    /// ([`Session::adopt`]). A decision, an abort or a take-over does not reload: it was made on
    /// what the host showed, and loses to a change made since with [`StoreError::Conflict`],
    /// changing nothing.
    ///
    /// # Errors
    /// [`SessionError::Store`] when the record cannot be read; what restoring it refuses
    /// ([`SessionError::ConfigChanged`] when its mode is gone from this config). Nothing
    /// changes then.
    pub(crate) async fn reload(&mut self) -> Result<(), SessionError> {
        let Some(store) = self.shared.store.clone() else {
            return Ok(());
        };
        if self.version > 0
            && let Some(record) = store.load(&self.id).await?
            && record.version > self.version
        {
            self.adopt(record)?;
        }
        Ok(())
    }

    /// Replaces the session's state with `record`'s, which another process saved: the host's
    /// parts (subscribers, extensions, model, step limit, cancel handle) stay. A changed mode
    /// is announced with `mode_changed` (reason `plan_approved` when the record's last decision
    /// approved a plan into it, else `manual`); the model an approval chose here is dropped
    /// unless the record still names it.
    fn adopt(&mut self, record: SessionRecord) -> Result<(), SessionError> {
        tracing::debug!(session_id = %self.id, from = self.version, to = record.version, "session changed by another writer: reloaded");
        let fresh = Session::from_record(self.shared.clone(), record, SessionOptions::new())?;
        let (previous, decided) = (self.state.mode, self.state.history.len());
        self.state = fresh.state;
        self.version = fresh.version;
        self.metadata = fresh.metadata;
        self.workspace = fresh.workspace;
        if self.chosen_model.as_ref().map(|(id, _)| id) != self.state.model_id.as_ref() {
            self.chosen_model = None;
        }
        if previous != self.state.mode {
            let mode_id = self.mode_arc();
            let approved = self.state.history.len() > decided
                && self.state.history.last().is_some_and(|d| {
                    d.outcome == Some(crate::event::DecisionOutcome::Approved)
                        && d.target_mode_id.as_deref() == Some(&*mode_id)
                });
            let reason = if approved {
                crate::event::ModeChangeReason::PlanApproved
            } else {
                crate::event::ModeChangeReason::Manual
            };
            let event = Event::ModeChanged {
                session_id: self.id.clone(),
                mode_id,
                previous_mode_id: Arc::from(self.shared.graph.mode(previous).id()),
                reason,
            };
            self.emit(event);
        }
        Ok(())
    }

    /// The id of the model an approval chose for the current mode ([`Decision::model`]), which
    /// runs its model calls instead of the session's model until the next change of mode;
    /// `None` when the session's own model runs.
    pub fn chosen_model(&self) -> Option<&str> {
        self.state.model_id.as_deref()
    }

    /// The models the session may be switched to by hand ([`Session::choose_model`]): the
    /// controller's own model when the host names it
    /// ([`crate::controller::AgentControllerBuilder::model_id`]), then every mode's
    /// `defaultModelId`, each id once. Empty when none is named.
    pub fn models(&self) -> &[String] {
        &self.shared.models
    }

    /// The id of the model the current mode's model calls go to: the one chosen
    /// ([`Session::chosen_model`]), else the mode's `defaultModelId`, else the controller's own
    /// model's id; `None` when none of them is named.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, SessionOptions};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ndefaultModelId = \"openai/o3\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    ///     "modes.toml",
    /// )?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .model_id("openai/gpt-4o")
    ///     .build()?;
    /// let mut session = controller.start_session(SessionOptions::new()).await?;
    /// assert_eq!(session.models(), ["openai/gpt-4o", "openai/o3"]);
    /// assert_eq!(session.model_id(), Some("openai/gpt-4o"));
    /// session.switch_mode("plan").await?;
    /// assert_eq!(session.model_id(), Some("openai/o3"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn model_id(&self) -> Option<&str> {
        self.state.model_id.as_deref().or_else(|| {
            crate::machine::models::mode_model(
                &self.shared.graph,
                self.state.mode,
                self.shared.model_id.as_deref(),
            )
        })
    }

    /// Switches the current mode's model calls to the model with id `id`, one of
    /// [`Session::models`]; returns whether anything changed. The choice is saved and runs the
    /// mode until its next change of mode (as an approval's choice, [`Decision::model`]):
    /// choosing the model the mode runs with anyway ends it. What waits for a decision keeps
    /// waiting (a plan's approval may still choose the next mode's model).
    ///
    /// # Errors
    /// [`SessionError::UnknownModel`] when `id` is not offered or the controller's chooser
    /// cannot build it ([`crate::controller::AgentControllerBuilder::model_chooser`]);
    /// [`SessionError::LeaseHeld`] while a run of another process holds the session;
    /// [`SessionError::Store`] when the choice cannot be saved. Nothing changes then.
    pub async fn choose_model(&mut self, id: &str) -> Result<bool, SessionError> {
        // What another process saved counts: it may have changed the mode or the model.
        self.recover().await?;
        self.reload().await?;
        let kept = crate::machine::models::choice(&self.shared.config(), self.state.mode, id)?;
        if kept == self.state.model_id {
            return Ok(false);
        }
        let built = match &kept {
            Some(id) => Some((id.clone(), self.build_model(id)?)),
            None => None,
        };
        self.settle().await?;
        self.handle(Input::ChooseModel(id.to_owned())).await?;
        self.chosen_model = built;
        Ok(true)
    }

    /// The model of the current mode's next model call: the one an approval chose (built by
    /// the controller's chooser once, also after a restore), else the session's or the
    /// controller's; and whether it was chosen (its request then names no mode default model).
    ///
    /// # Errors
    /// A [`ModelError`] when the chosen model cannot be built (any more).
    pub(crate) fn mode_model(&mut self) -> Result<(Arc<dyn LanguageModel>, bool), ModelError> {
        let Some(id) = self.state.model_id.clone() else {
            let model = self.model.clone();
            return Ok((model.unwrap_or_else(|| self.shared.model.clone()), false));
        };
        if let Some((built, model)) = &self.chosen_model
            && *built == id
        {
            return Ok((model.clone(), true));
        }
        let model = self
            .build_model(&id)
            .map_err(|e| ModelError::new(e.to_string()))?;
        self.chosen_model = Some((id, model.clone()));
        Ok((model, true))
    }

    /// Checks that the controller's model chooser can build the model with id `id` (what an
    /// approval naming it with [`Decision::model`](crate::Decision::model) needs), without
    /// keeping it: a host checks a model a person types when it is typed, not at the approval.
    ///
    /// # Errors
    /// [`SessionError::UnknownModel`] when there is no chooser or it cannot build `id`.
    pub fn check_model(&self, id: &str) -> Result<(), SessionError> {
        self.build_model(id).map(drop)
    }

    /// The model with id `id`, as the controller's chooser builds it.
    ///
    /// # Errors
    /// [`SessionError::UnknownModel`] when there is no chooser or it cannot build `id`.
    pub(crate) fn build_model(&self, id: &str) -> Result<Arc<dyn LanguageModel>, SessionError> {
        let unknown = |reason: String| SessionError::UnknownModel {
            model: id.to_owned(),
            reason,
        };
        let Some(chooser) = &self.shared.model_chooser else {
            return Err(unknown(
                "this host chooses no model at approval (it has no model chooser)".to_owned(),
            ));
        };
        chooser.build(id).map_err(unknown)
    }

    /// The latest run's id and state, if a run was started.
    ///
    /// A run whose future was dropped reads as ended at once, whatever await it was dropped at
    /// ([`Session::settle`]): aborted, or, when it was dropped while the save of its end (its
    /// suspension, its completion) was under way, as that save leaves it once it landed (and
    /// while it is still under way); aborted when it did not land.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// use agent_controller::event::RunState;
    /// assert_eq!(session.run_state(), None);
    /// session.send_message("hello").await?;
    /// assert_eq!(session.run_state(), Some(("run_1", RunState::Completed)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_state(&self) -> Option<(&str, RunState)> {
        match &self.saving {
            // Only a dropped operation leaves a save behind: its run reads as ended (unless it
            // was ended in memory already: `abandon`).
            Some(saving) if self.abandoned.is_none() => saving.shown_run(self.state.run.as_ref()),
            _ => self.state.run.as_ref().map(|(id, state)| (&**id, *state)),
        }
    }

    /// Adds an event subscriber; it receives every event from now on, in order.
    ///
    /// Dropping the returned [`Subscription`] unsubscribes the callback;
    /// [`Subscription::detach`] keeps it as long as the session lives. Callbacks run inside the
    /// run loop, in order, and must not block; to process events elsewhere, use
    /// [`Session::events`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    /// let counter = seen.clone();
    /// let subscription = session.subscribe(move |_| {
    ///     counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    /// });
    /// session.send_message("hello").await?;
    /// let after_one_run = seen.load(std::sync::atomic::Ordering::Relaxed);
    /// assert!(after_one_run > 0);
    /// drop(subscription); // unsubscribes
    /// session.send_message("again").await?;
    /// assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), after_one_run);
    /// # Ok(())
    /// # }
    /// ```
    pub fn subscribe(&mut self, subscriber: impl FnMut(&Event) + Send + 'static) -> Subscription {
        self.subscribers_mut().add_callback(Box::new(subscriber))
    }

    /// Every event from now on as an async stream, in order; see [`EventStream`] for
    /// backpressure (unbounded). Dropping the stream unsubscribes it. To get `session_started`
    /// too, use [`SessionOptions::event_stream`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// let mut events = session.events();
    /// session.send_message("hello").await?;
    /// let mut kinds = Vec::new();
    /// while let Some(event) = events.try_next() {
    ///     kinds.push(event.kind());
    /// }
    /// assert_eq!(kinds.first(), Some(&"agent_start"));
    /// assert_eq!(kinds.last(), Some(&"agent_end"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn events(&mut self) -> EventStream {
        self.subscribers_mut().add_stream()
    }

    /// How many callbacks and streams still listen (a dropped [`Subscription`] or
    /// [`EventStream`] no longer counts).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// assert_eq!(session.subscriber_count(), 0);
    /// let events = session.events();
    /// assert_eq!(session.subscriber_count(), 1);
    /// drop(events);
    /// assert_eq!(session.subscriber_count(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn subscriber_count(&mut self) -> usize {
        self.subscribers_mut().len()
    }

    fn subscribers_mut(&mut self) -> &mut Subscribers {
        self.subscribers
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Delivers `event` through `&self`, for a streaming model's text while the run loop lends
    /// out the conversation.
    pub(crate) fn deliver_shared(&self, event: &Event) {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .deliver(event);
        self.broadcast(event);
    }

    /// Delivers `event` to every subscriber now.
    pub(crate) fn emit(&mut self, event: Event) {
        self.subscribers_mut().deliver(&event);
        self.broadcast(&event);
    }

    /// Sends `event` to the controller's receivers ([`crate::AgentController::events`]), if
    /// any listens: never waits (a receiver that falls behind misses the oldest).
    fn broadcast(&self, event: &Event) {
        if let Some(sender) = &self.shared.events
            && sender.receiver_count() > 0
        {
            let _ = sender.send(event.clone());
        }
    }

    /// Records what an operation whose future was dropped left behind, and applies the deadline
    /// of a pending plan that has passed ([`Session::expire_if_due`]); every operation does
    /// this first, so call it only to have it recorded at once (for example before a process
    /// exits after Ctrl-C). Returns at once when there is nothing to record.
    ///
    /// Dropping the future of [`Session::send_message`] or [`Session::resume`] at any `.await`
    /// is safe: a change whose save was under way counts if the save finished and is undone
    /// otherwise (its events are delivered only if it counts), so a plan that was pending and
    /// not decided stays pending. A run dropped while it waited for its model or a tool ends
    /// aborted at once, in memory: [`Session::run_state`] says `aborted` and every tool call of
    /// the last assistant message has a result in [`Session::messages`] (`Cancelled: ...` for
    /// the call that was running, `Not executed: ...` for those after it). Its events
    /// (`tool_end`, `agent_end` with reason `aborted`) go out, and the session is saved, here.
    /// The next model call therefore sends a conversation an OpenAI-compatible server accepts.
    ///
    /// A `Drop` cannot await a save, which is why the save happens here and not when the future
    /// is dropped. A run dropped while a save of it was under way reads as ended at once
    /// ([`Session::run_state`]: as that save leaves it if it landed or is still under way,
    /// aborted if it did not); whether it landed is learned here, where the state it saved is
    /// taken in, or the run is ended aborted. To stop a run more gently, use
    /// [`Session::cancel_handle`].
    ///
    /// # Errors
    /// [`SessionError::Store`] when the aborted run cannot be saved; the session is as before
    /// and the next operation tries again.
    ///
    /// A running run this session did not start or take over (one restored from the store) is
    /// ended the same way if it is interrupted (its lease ended: its process stopped); while its
    /// lease runs, this is [`SessionError::LeaseHeld`] and nothing changes, so an operation never
    /// ends a run another process is carrying on.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// // Nothing was left behind by a dropped operation: returns at once.
    /// session.settle().await?;
    /// assert!(session.run_state().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settle(&mut self) -> Result<(), SessionError> {
        self.recover().await?;
        self.cancel.finish();
        // A workspace allowance another process revoked since no longer applies.
        self.load_workspace_allowances().await;
        if let Some((run_id, RunState::Running)) = &self.state.run {
            let run_id = run_id.clone();
            self.check_not_leased(&run_id)?;
            self.handle(Input::Abort(Abort::Run(run_id))).await?;
        }
        // A plan past its deadline expires before anything else happens.
        self.apply_expiry().await?;
        Ok(())
    }

    /// [`SessionError::LeaseHeld`] when the running run `run_id` has a live lease that this
    /// session does not hold.
    fn check_not_leased(&self, run_id: &str) -> Result<(), SessionError> {
        match &self.state.lease {
            Some(lease) if !self.state.holds_lease => {
                let remaining_ms = lease.expires_at_ms.saturating_sub(self.shared.now_ms());
                if remaining_ms == 0 {
                    return Ok(());
                }
                Err(SessionError::LeaseHeld {
                    session_id: self.id.to_string(),
                    run_id: run_id.to_owned(),
                    owner: lease.owner.clone(),
                    remaining_ms,
                })
            }
            _ => Ok(()),
        }
    }
}

impl Session {
    /// Renews the lease of the run this session carries on, by a save (compare-and-swap): always
    /// when `save_step` (before a step's tool calls run, so each is in the store before it runs,
    /// and a run carried on after a crash never runs it again), else when less than half of the
    /// lease is left (before each model call). Nothing for a run without a lease (one started by
    /// a message: it is saved when it suspends or ends).
    ///
    /// # Errors
    /// [`SessionError::LeaseLost`] when another process changed the session since (it took the
    /// run over); [`SessionError::Store`] when the save fails otherwise.
    pub(crate) async fn keep_lease(
        &mut self,
        run_id: &str,
        save_step: bool,
    ) -> Result<(), SessionError> {
        let Some(lease) = self.state.lease.as_ref().filter(|_| self.state.holds_lease) else {
            return Ok(());
        };
        let half = u64::try_from(self.shared.lease_duration.as_millis() / 2).unwrap_or(u64::MAX);
        if !save_step && lease.expires_at_ms.saturating_sub(self.shared.now_ms()) > half {
            return Ok(());
        }
        let renewed = self.handle(Input::LeaseTick).await;
        renewed.map(drop).map_err(|e| match e {
            SessionError::Store(source @ StoreError::Conflict { .. }) => SessionError::LeaseLost {
                session_id: self.id.to_string(),
                run_id: run_id.to_owned(),
                source,
            },
            other => other,
        })
    }

    /// Carries on the session's *interrupted* run: one that is `running` in the store while the
    /// process that ran it stopped (killed, crashed, or its future dropped) after a save, so that
    /// its lease ran out. Takes the lease by a compare-and-swap save, then makes the model's next
    /// step in the current mode and drives the run as [`Session::send_message`] does, renewing
    /// the lease as it goes. `agent_start` is emitted again (same run id).
    ///
    /// Each step is saved before its tool calls run. A tool call whose result was saved is never
    /// run again; one without a saved result was cut off and may or may not have taken effect: it
    /// is not run again either, but answered "Interrupted: ..." so the model can check and decide.
    /// A model call lost in a crash is made again by the next continuer: at most once per lease.
    /// Restore the session first ([`crate::AgentController::restore_session`]) so it is current.
    ///
    /// It also carries on a suspended run whose calls are all decided, an answer among them
    /// recorded by a host that does not have the call's tool (`agent-controller decide --answer`
    /// of a tool of your own): the approved calls run, each answer goes to its tool's
    /// [`resume`](crate::Tool::resume) step, then the model is called, as when the last decision
    /// is taken in a host that has every tool.
    ///
    /// # Errors
    /// [`SessionError::NoStore`]; [`SessionError::NotInterrupted`] when the latest run is not
    /// running (nor suspended with every call decided and this host having the tools the
    /// answers go to); [`SessionError::LeaseHeld`] while another owner's lease runs (a live run is never
    /// taken over); [`SessionError::Store`] with [`StoreError::Conflict`] when another process
    /// changed the session first (of racing continuers exactly one wins; the others get this and
    /// change nothing); later errors as for [`Session::send_message`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// use agent_controller::SessionError;
    /// // Without a store there is no interrupted run to carry on.
    /// assert!(matches!(session.continue_run().await, Err(SessionError::NoStore)));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn continue_run(&mut self) -> Result<RunOutcome, SessionError> {
        self.recover().await?;
        self.cancel.finish();
        if self.shared.store.is_none() {
            return Err(SessionError::NoStore);
        }
        self.check_workspace()?;
        let answered_elsewhere = matches!(&self.state.run, Some((_, RunState::Suspended)))
            && !self.state.pending.is_empty()
            && !self.state.pending.iter().any(PendingDecision::is_waiting);
        if answered_elsewhere {
            // Every call is decided, an answer among them recorded by a host that lacks its
            // tool (the CLI, for a tool of the user's own): this host carries the run on.
            let operation = Operation::new(self);
            let outcome = operation.session.carry_on_answered().await;
            return operation.finish(outcome);
        }
        let run_id = match &self.state.run {
            Some((run_id, RunState::Running)) => run_id.clone(),
            other => {
                return Err(SessionError::NotInterrupted {
                    session_id: self.id.to_string(),
                    state: other
                        .as_ref()
                        .map_or("none".to_owned(), |(_, s)| s.to_string()),
                });
            }
        };
        self.check_not_leased(&run_id)?;
        self.start_operation();
        let operation = Operation::new(self);
        let outcome = operation.session.take_over(run_id).await;
        operation.finish(outcome)
    }

    /// Starts the cancellation token of a run that starts or resumes now.
    pub(crate) fn start_operation(&mut self) {
        self.run_token = self.cancel.start();
    }

    /// Ends the operation: the host's [`CancelHandle`] has no run to cancel any more.
    pub(crate) fn finish_operation(&mut self) {
        self.cancel.finish();
    }

    /// The record of the session in `state`, with the next version number.
    pub(crate) fn record_of(&self, state: &State) -> SessionRecord {
        // What waits, in one pass: a plan, or the tool calls of one reply.
        let (mut pending, mut pending_tool_calls) = (None, Vec::new());
        let mut pending_suspensions = Vec::new();
        for waiting in &state.pending {
            match waiting {
                PendingDecision::Plan(p) => {
                    pending.get_or_insert_with(|| PendingRecord {
                        run_id: p.run_id.to_string(),
                        tool_call_id: p.tool_call_id.clone(),
                        tool_name: SUBMIT_PLAN.to_owned(),
                        suspend_payload: p.payload.clone(),
                    });
                }
                PendingDecision::ToolCall(c) => pending_tool_calls.push(PendingToolCallRecord {
                    run_id: c.run_id.to_string(),
                    tool_call_id: c.tool_call_id.clone(),
                    suspend_payload: c.payload.clone(),
                    decided: c.decided.clone(),
                    feedback: c.feedback().map(str::to_owned),
                }),
                PendingDecision::Suspension(s) => {
                    pending_suspensions.push(PendingSuspensionRecord {
                        run_id: s.run_id.to_string(),
                        tool_call_id: s.tool_call_id.clone(),
                        suspend_payload: (*s.payload).clone(),
                        decided: s.decided.clone(),
                        answer: s.answer.clone(),
                        feedback: s.feedback.clone(),
                    });
                }
            }
        }
        SessionRecord {
            schema_version: SCHEMA_VERSION,
            session_id: self.id.to_string(),
            version: self.version + 1,
            config_fingerprint: self.shared.fingerprint.clone(),
            mode_id: self.shared.graph.mode(state.mode).id().to_owned(),
            messages: state.messages.to_vec(),
            run_counter: state.counter,
            run: state.run.as_ref().map(|(run_id, run_state)| {
                let lease = state
                    .lease
                    .as_ref()
                    .filter(|_| *run_state == RunState::Running);
                RunRecord {
                    run_id: run_id.to_string(),
                    state: *run_state,
                    owner: lease.map(|l| l.owner.clone()),
                    lease_expires_at_ms: lease.map(|l| l.expires_at_ms),
                }
            }),
            pending,
            pending_tool_calls,
            pending_suspensions,
            // The session's own allowances only: a workspace one lives in the store, and a
            // record read back must not turn it into one of the session's.
            always_allowed: {
                let mode_id = self.shared.graph.mode(state.mode).id();
                let mut tools: Vec<String> = Vec::new();
                for a in state.allowances.iter().filter(|a| a.mode_id == mode_id) {
                    if a.pattern.is_none() && !tools.contains(&a.tool_name) {
                        tools.push(a.tool_name.clone());
                    }
                }
                tools
            },
            allowances: state.allowances.clone(),
            last_decided: state.history.last().cloned(),
            history: state.history.clone(),
            decision_counter: state.decisions,
            updated_at: self.shared.now_ms() / 1000,
            metadata: self.metadata.clone(),
            model_id: state.model_id.clone(),
            tasks: state.tasks.clone(),
            plan_ledger: state.plan_ledger.clone(),
            plan_report: state.plan_report.clone(),
            last_plan: state.last_plan.clone(),
            workspace: Some(self.workspace.clone()),
            config: Some(
                self.shared
                    .recorded_config
                    .get_or_init(|| crate::store::RecordedConfig::of(&self.shared.graph))
                    .clone(),
            ),
            children: state
                .children
                .iter()
                .map(|child| crate::store::ChildRecord {
                    tool_call_id: child.tool_call_id.clone(),
                    agent_type: child.agent_type.to_string(),
                    child_id: child.child_id.to_string(),
                    record: Box::new(self.child_record(&child.child_id, &child.state)),
                })
                .collect(),
        }
    }

    /// The record of a waiting child of this session, `child_id` in `state`: as this session's
    /// (its workspace, its config), under the child's id, with none of the host's metadata.
    pub(crate) fn child_record(&self, child_id: &str, state: &State) -> SessionRecord {
        let mut record = self.record_of(state);
        record.session_id = child_id.to_owned();
        record.version = 0;
        record.metadata = serde_json::Map::new();
        record
    }

    /// The store version this session last saved or was restored at (0: never saved).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let session = controller.start_session(SessionOptions::new()).await?;
    /// assert_eq!(session.version(), 0, "no store: never saved");
    /// # let workspace = tempfile::tempdir()?;
    /// let stored = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .store(Arc::new(agent_controller::MemoryStore::new()))
    ///     .build()?;
    /// let mut session = stored.start_session(SessionOptions::new()).await?;
    /// assert_eq!(session.version(), 1, "saved as it started");
    /// session.send_message("hello").await?;
    /// assert!(session.version() > 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Sends a user message and runs until the model is done or a plan suspends the run.
    ///
    /// A message sent while a plan (or a tool call) is pending counts as *not approved*: the
    /// suspension is cancelled (`tool_suspension_cancelled`, the old run ends `aborted`; a
    /// waiting tool call never runs) and the mode stays.
    ///
    /// A tool call that needs approval in the current mode (its `requireApproval`) does not run:
    /// once the reply's other calls have run, the run suspends on every such call
    /// ([`RunOutcome::ToolCallsSuspended`], a `tool_suspended` event for each).
    ///
    /// With a store, the session first takes in what another process saved since it last saved
    /// or loaded (a switch, a decision: `mode_changed` when the mode changed), and the run
    /// then holds the session from its start: it is saved `running` under this process's lease
    /// before the first model call, so another process's change is refused while it works
    /// ([Two processes, one session](crate::guide::stores#two-processes-one-session)).
    ///
    /// # Errors
    /// [`SessionError::Store`] when a store is configured and a save fails (including a
    /// [`StoreError::Conflict`] when another writer changed the session first);
    /// [`SessionError::LeaseHeld`] while a run of another process holds the session.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// let outcome = session.send_message("hello").await?;
    /// let RunOutcome::Completed { text, .. } = outcome else { unreachable!() };
    /// assert!(!text.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn send_message(
        &mut self,
        text: impl Into<String>,
    ) -> Result<RunOutcome, SessionError> {
        // A session left open acts on what the store has: another process may have switched
        // it, decided what waited, or be running it (then this is `LeaseHeld`).
        self.recover().await?;
        self.reload().await?;
        self.settle().await?;
        self.check_workspace()?;
        self.start_operation();
        let operation = Operation::new(self);
        let outcome = operation.session.replace_pending_and_run(text.into()).await;
        operation.finish(outcome)
    }

    async fn replace_pending_and_run(&mut self, text: String) -> Result<RunOutcome, SessionError> {
        if self.has_pending() {
            let cancel = Abort::Pending(CancelReason::UserMessage);
            self.handle(Input::Abort(cancel)).await?;
        }
        self.start_run(text).await
    }

    /// Decides the pending plan of `run_id` / `tool_call_id` and carries the run on.
    ///
    /// The ids may also name a tool call that waits for approval (the first one not decided
    /// yet, where a model reused the id): it is decided as [`Session::decide`] decides it.
    ///
    /// The ids name the *current* pending plan: a model may reuse a tool-call id (`call_1` in
    /// every response), so after a rejection with feedback its resubmission can carry the same
    /// ids as the plan just rejected. Prefer [`Session::decide`] with the controller's decision
    /// id, and pin the plan you showed with [`Decision::with_sha256`].
    ///
    /// Approved: the session switches to the target fixed at submit time (`mode_changed`, reason
    /// `plan_approved`) before the next model call, which uses the new mode's instructions and
    /// tools. The model's approval result ([`crate::tool::submit_plan::approved_result`]) holds
    /// the approval, the mode-change notice, the feedback given with the approval (if any) and
    /// the approved plan as captured at submit time, so the next mode never re-reads the file.
    /// Rejected with feedback: the model gets the feedback and revises in the same mode.
    /// Rejected without feedback: the run ends; the mode stays.
    ///
    /// # Errors
    /// In each of these cases nothing changes:
    /// - what the ids name: [`SessionError::UnknownRun`], [`SessionError::NotSuspended`],
    ///   [`SessionError::UnknownToolCall`], [`SessionError::AlreadyDecided`], and
    ///   [`SessionError::Expired`] for what expired before this decision;
    /// - the decision, as [`PendingDecision::check`] checks it:
    ///   [`SessionError::MalformedDecision`], [`SessionError::Sha256Mismatch`] (a plan),
    ///   [`SessionError::ArgsSha256Mismatch`] (a tool call), [`SessionError::TargetNotAllowed`],
    ///   [`SessionError::EditedPlan`], [`SessionError::PlanComment`] (a comment on a line the
    ///   plan lacks), [`SessionError::ConfigChanged`] (approval after a restore under a config
    ///   whose target is gone or different);
    /// - [`SessionError::UnknownModel`]: the approval names a model the host's chooser cannot
    ///   build (or the host has none);
    /// - the workspace the session started in: [`SessionError::WorkspaceGone`],
    ///   [`SessionError::WrongWorkspace`], [`SessionError::WorkspaceReplaced`];
    /// - [`SessionError::LeaseHeld`] while another process runs the session's run, and
    ///   [`SessionError::Store`] when the decision cannot be saved or another decider won the
    ///   race.
    ///
    /// A store failure later in the run (after the decision was saved) is also
    /// [`SessionError::Store`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let RunOutcome::Completed { .. } = session
    ///     .resume("run_1", session.pending()[0].tool_call_id().to_owned().as_str(), Decision::approve())
    ///     .await?
    /// else {
    ///     unreachable!()
    /// };
    /// assert_eq!(session.mode().id(), "build");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resume(
        &mut self,
        run_id: &str,
        tool_call_id: &str,
        decision: Decision,
    ) -> Result<RunOutcome, SessionError> {
        self.settle().await?;
        self.check_workspace()?;
        let index = self.pending_named(run_id, tool_call_id)?;
        self.decide_at(index, decision, &mut None).await
    }

    /// Decides the pending plan with this decision id ([`PendingDecision::decision_id`], the
    /// `decisionId` of `tool_suspended` and of [`crate::store::PendingSummary`]) and carries the
    /// run on, as [`Session::resume`] does.
    ///
    /// The decision id may also name a tool call that waits for approval
    /// ([`PendingToolCall::decision_id`]). Approved, it runs; rejected, it does not, and the
    /// model gets an error result with the feedback (or a plain "Not approved" text). While
    /// other calls of the same reply still wait, the decision is saved and the run stays
    /// suspended ([`RunOutcome::ToolCallsSuspended`] lists the rest); the last decision carries
    /// the run on: the rejected calls' results, then the approved calls in the model's order,
    /// then the next model call. [`Decision::always_allow`] also approves the other calls of the
    /// tool waiting in the reply (each recorded with `allowedBy`) and allows the tool until the
    /// mode changes. A `sha256` pin must equal the call's `argsSha256`; a target mode, an edited
    /// plan, or "always allow" with a rejection is [`SessionError::MalformedDecision`].
    ///
    /// # Errors
    /// [`SessionError::AlreadyDecided`] for a decision id that was settled (or, for a tool call,
    /// decided while others wait) before ([`SessionError::Expired`] when it expired),
    /// [`SessionError::UnknownDecision`] for one the session never gave out, then the errors of
    /// the decision itself as for [`Session::resume`]: [`SessionError::MalformedDecision`],
    /// [`SessionError::Sha256Mismatch`], [`SessionError::ArgsSha256Mismatch`],
    /// [`SessionError::TargetNotAllowed`], [`SessionError::EditedPlan`],
    /// [`SessionError::PlanComment`], [`SessionError::ConfigChanged`] and
    /// [`SessionError::UnknownModel`], and those of the workspace and the store
    /// ([`SessionError::WorkspaceGone`], [`SessionError::WrongWorkspace`],
    /// [`SessionError::WorkspaceReplaced`], [`SessionError::LeaseHeld`], [`SessionError::Store`]);
    /// on error nothing changes.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// // Pinned to what was shown: a plan that changed since is refused and nothing changes.
    /// let wrong = Decision::approve().with_sha256("0".repeat(64));
    /// assert!(session.decide(&payload.decision_id, wrong).await.is_err());
    /// assert_eq!(session.mode().id(), "plan");
    /// let approve = Decision::approve().with_sha256(&payload.submission.sha256);
    /// session.decide(&payload.decision_id, approve).await?;
    /// assert_eq!(session.mode().id(), "build");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn decide(
        &mut self,
        decision_id: &str,
        decision: Decision,
    ) -> Result<RunOutcome, SessionError> {
        self.decide_notifying(decision_id, decision, None).await
    }

    /// [`Session::decide`], telling `taken` once the decision is saved, before the run is
    /// carried on ([`crate::session::SessionHandle::decide`]).
    pub(crate) async fn decide_notifying(
        &mut self,
        decision_id: &str,
        decision: Decision,
        taken: Option<handle::TakenNotice>,
    ) -> Result<RunOutcome, SessionError> {
        self.settle().await?;
        self.check_workspace()?;
        let mut index = self.pending_with_id(decision_id)?;
        // An approval toward a quorum that lost the race to another process's save (another
        // approval, most likely) is tried again on the stored record, while the same decision
        // with the same content still waits: two approvals given at once both land, and the
        // quorum's rule counts them there (a second one by the same identity is refused). Any
        // other decision loses with the conflict, as it was made on what the host showed.
        // Every host decides through here (the CLI's `decide`, `serve` and ACP through
        // [`crate::session::SessionHandle`]): `taken` is told once, when the try that lands
        // is saved.
        let mut taken = taken;
        let mut tries = 0;
        loop {
            let pin = self.quorum_pin(index, &decision);
            match self.decide_at(index, decision.clone(), &mut taken).await {
                Err(error) if error.is_conflict() && pin.is_some() && tries < QUORUM_RETRIES => {
                    tries += 1;
                    tracing::debug!(session_id = %self.id, %error, "a quorum approval lost a race; trying it again on the stored record");
                    self.reload().await?;
                    index = self.pending_with_id(decision_id)?;
                    if self.quorum_pin(index, &decision) != pin {
                        return Err(error);
                    }
                }
                outcome => return outcome,
            }
        }
    }

    /// The content (sha256) an approval toward a quorum at `index` approves, `None` for any
    /// other decision (no quorum, a rejection, an answer): what a retry after a lost race must
    /// find again unchanged.
    fn quorum_pin(&self, index: usize, decision: &Decision) -> Option<String> {
        let pending = self.state.pending.get(index)?;
        let under_quorum = pending.terms().approvers_needed.is_some_and(|n| n > 1);
        (under_quorum && decision.action == DecisionAction::Approved)
            .then(|| pending.sha256().to_owned())
    }

    /// Like [`Session::decide`] with resume data as JSON. For a call its tool suspended,
    /// Mastra's bare resume data is taken too: a string, or an array of strings, is the answer
    /// ([`Decision::answer`]; the name of an action alone never is).
    ///
    /// # Errors
    /// [`SessionError::MalformedDecision`] first, then those of [`Session::decide`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let data = serde_json::json!({ "action": "rejected", "feedback": "Also cover the settings page." });
    /// let outcome = session.decide_json(&payload.decision_id, &data).await?;
    /// assert!(matches!(outcome, RunOutcome::Suspended { .. }), "the model revised and submitted again");
    /// let malformed = serde_json::json!({ "action": "approve" });
    /// assert!(session.decide_json(&session.pending()[0].decision_id().to_owned(), &malformed).await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn decide_json(
        &mut self,
        decision_id: &str,
        data: &Value,
    ) -> Result<RunOutcome, SessionError> {
        let decision = self.decision_from_json(decision_id, data)?;
        self.decide(decision_id, decision).await
    }

    /// The decision `data` says for `decision_id`, as [`Session::decide_json`] reads it.
    pub(crate) fn decision_from_json(
        &self,
        decision_id: &str,
        data: &Value,
    ) -> Result<Decision, SessionError> {
        let suspended = self
            .pending_with_id(decision_id)
            .ok()
            .and_then(|i| self.state.pending.get(i))
            .is_some_and(|p| matches!(p, PendingDecision::Suspension(_)));
        match Decision::bare_answer(data) {
            Some(answer) if suspended => Ok(answer),
            _ => Decision::from_json(data),
        }
    }

    /// Every settled decision of the session, oldest first: decision id, outcome, the plan's
    /// sha256, `decidedAt` and `decidedBy` (the audit trail the record keeps as `history`).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// use agent_controller::event::DecisionOutcome;
    /// session.decide(&payload.decision_id, Decision::approve().decided_by("alice")).await?;
    /// let history = session.decision_history();
    /// assert_eq!(history.len(), 1);
    /// assert_eq!(history[0].decision_id, payload.decision_id);
    /// assert_eq!(history[0].decided_by.as_deref(), Some("alice"));
    /// assert!(history[0].outcome.is_some());
    /// # let _ = DecisionOutcome::Approved;
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision_history(&self) -> &[DecidedRecord] {
        &self.state.history
    }

    /// The status of each tool result in [`Session::messages`] ([`result_statuses`] with the
    /// session's decision history): `Some` for each tool result, `None` for every other
    /// message. A call without a result that waits is in [`Session::pending`].
    pub fn result_statuses(&self) -> Vec<Option<CallStatus>> {
        result_statuses(&self.state.messages, &self.state.history)
    }

    /// Like [`Session::resume`] with resume data as JSON (`{"action": "approved"}`, ...).
    ///
    /// # Errors
    /// [`SessionError::MalformedDecision`] for resume data of another shape (checked before
    /// anything else), then the errors of [`Session::resume`]; on error nothing changes.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let (run_id, call_id) = (payload_ids(&session));
    /// # fn payload_ids(session: &agent_controller::Session) -> (String, String) {
    /// #     let p = &session.pending()[0];
    /// #     (p.run_id().to_owned(), p.tool_call_id().to_owned())
    /// # }
    /// let data = serde_json::json!({ "action": "approved", "decidedBy": "ci" });
    /// session.resume_json(&run_id, &call_id, &data).await?;
    /// assert_eq!(session.mode().id(), "build");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resume_json(
        &mut self,
        run_id: &str,
        tool_call_id: &str,
        data: &Value,
    ) -> Result<RunOutcome, SessionError> {
        let decision = Decision::from_json(data)?;
        self.resume(run_id, tool_call_id, decision).await
    }

    /// Aborts a suspended run: the plan, or every tool call waiting for approval (those decided
    /// while others waited too), counts as *not approved* and never runs; the mode stays.
    /// Returns whether there was anything pending to abort.
    ///
    /// # Errors
    /// [`SessionError::Store`] when the change cannot be saved; nothing changes.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// assert!(session.abort().await?);
    /// assert!(session.pending().is_empty());
    /// assert_eq!(session.mode().id(), "plan", "not approved: the mode stays");
    /// assert!(!session.abort().await?, "nothing left to abort");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn abort(&mut self) -> Result<bool, SessionError> {
        self.settle().await?;
        if !self.has_pending() {
            return Ok(false);
        }
        let abort = Abort::Pending(CancelReason::Aborted);
        self.handle(Input::Abort(abort)).await?;
        Ok(true)
    }

    /// Switches to mode `id` by hand; returns whether the mode changed.
    ///
    /// Emits `mode_changed` (reason `manual`); switching to the current mode is a no-op with no
    /// event. A pending plan or tool calls waiting for approval are cancelled first
    /// (`tool_suspension_cancelled`, not approved), and the tools a decision always allowed are
    /// no longer allowed ([`Session::always_allowed`] is emptied).
    ///
    /// # Errors
    /// [`SessionError::LeaseHeld`] while a run of another process holds the session (what that
    /// process saved is taken in first, as [`Session::send_message`] does);
    /// [`SessionError::UnknownMode`] when no mode has this id, [`SessionError::Store`] when the
    /// change cannot be saved; nothing changes.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// assert!(session.switch_mode("plan").await?);
    /// assert_eq!(session.mode().id(), "plan");
    /// assert!(!session.switch_mode("plan").await?, "already there");
    /// assert!(session.switch_mode("review").await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn switch_mode(&mut self, id: &str) -> Result<bool, SessionError> {
        let target = self
            .shared
            .graph
            .get(id)
            .ok_or_else(|| SessionError::unknown_mode(id, &self.shared.graph))?;
        // What another process saved counts: it may have switched the session already.
        self.recover().await?;
        self.reload().await?;
        if target == self.state.mode {
            return Ok(false);
        }
        self.settle().await?;
        self.handle(Input::ManualSwitch(target)).await?;
        Ok(true)
    }
}

/// Of the workspace allowances a store listed, those in force in `workspace` under the config
/// `fingerprint` ([`Allowance::applies_in`](crate::allowance::Allowance::applies_in): keyed by
/// both and given in this same directory), whose id is the one what they allow gives them,
/// whatever else the store returned. One kept for this path and config but given in another
/// directory there (deleted and made again, or replaced), or recording none, is left out and
/// the log says why (for session `session_id`).
fn keyed_by(
    listed: Vec<crate::allowance::Allowance>,
    workspace: &WorkspaceRecord,
    fingerprint: &str,
    session_id: &str,
) -> Vec<crate::allowance::Allowance> {
    use crate::allowance::NotInForce;
    let mut kept = Vec::new();
    for allowance in listed {
        if allowance.id != allowance.workspace_id() {
            continue;
        }
        match allowance.applies_in(workspace, fingerprint) {
            Ok(()) => kept.push(allowance),
            Err(NotInForce::OtherWorkspaceOrConfig) => {}
            Err(why) => {
                tracing::warn!(session_id, allowance = %allowance.id, reason = %why, "workspace allowance not in force here");
            }
        }
    }
    kept
}

/// The allowances a stored session keeps, as [`Session::allowances`] lists them once it is
/// restored, read from `store` alone (no config, no restore; `pending` and `allowances list
/// --session` show them): those its decisions gave (scopes `mode` and `session`), then the
/// workspace allowances `store` keeps for the workspace and config `record` names. Those in
/// force are those of the record's mode (an allowance applies in its
/// [`Allowance::mode_id`](crate::allowance::Allowance::mode_id) only).
///
/// # Errors
/// The store's error when it cannot list the workspace allowances.
///
/// # Examples
/// ```
/// # use std::sync::Arc;
/// # use agent_controller::{AgentController, Decision, MemoryStore, RunOutcome, SessionOptions, SessionStore, ToolRegistry};
/// # use agent_controller::model::scripted::ReplayModel;
/// use agent_controller::allowance::AllowanceScope;
/// use agent_controller::session::stored_allowances;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let workspace = tempfile::tempdir()?;
/// # let graph = agent_controller::config::parse(
/// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
/// #     "modes.toml",
/// # )?;
/// # let model = ReplayModel::new([
/// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
/// #     ReplayModel::text("Wrote a.txt."),
/// # ]);
/// let store = Arc::new(MemoryStore::new());
/// # let controller = AgentController::builder(graph, Arc::new(model))
/// #     .tools(ToolRegistry::with_workspace_tools())
/// #     .workspace(workspace.path())
/// #     .store(store.clone())
/// #     .build()?;
/// # let mut session = controller.start_session(SessionOptions::new()).await?;
/// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
/// let decision = Decision::approve().always_allow().scope(AllowanceScope::Session);
/// session.decide(tool_calls[0].decision_id(), decision).await?;
/// let record = store.load(session.id()).await?.expect("saved");
/// assert_eq!(stored_allowances(&*store, &record).await?, session.allowances());
/// # Ok(())
/// # }
/// ```
pub async fn stored_allowances(
    store: &dyn SessionStore,
    record: &SessionRecord,
) -> Result<Vec<crate::allowance::Allowance>, StoreError> {
    let listed = match &record.workspace {
        Some(workspace) => {
            store
                .list_workspace_allowances(Some(&workspace.path))
                .await?
        }
        None => Vec::new(),
    };
    Ok(stored_allowances_with(record, listed))
}

/// [`stored_allowances`] given `listed`, the workspace allowances the store keeps for the
/// record's workspace (ignored when the record has none).
fn stored_allowances_with(
    record: &SessionRecord,
    listed: Vec<crate::allowance::Allowance>,
) -> Vec<crate::allowance::Allowance> {
    let history: &[DecidedRecord] = if record.history.is_empty() {
        record.last_decided.as_slice()
    } else {
        &record.history
    };
    let mut kept = recorded_allowances(
        record.allowances.clone(),
        &record.always_allowed,
        history,
        &record.mode_id,
    );
    if let Some(workspace) = &record.workspace {
        kept.extend(keyed_by(
            listed,
            workspace,
            &record.config_fingerprint,
            &record.session_id,
        ));
    }
    kept
}

/// [`allowances_in_force`] given `listed`, as [`stored_allowances_with`].
fn allowances_in_force_with(
    record: &SessionRecord,
    listed: Vec<crate::allowance::Allowance>,
) -> Vec<crate::allowance::Allowance> {
    let mut kept = stored_allowances_with(record, listed);
    kept.retain(|a| a.mode_id == record.mode_id);
    kept
}

/// The allowances in force for stored session `record` in the mode it is in now: those of
/// [`stored_allowances`] given for that mode (an allowance of another mode waits until the
/// session is back in it). What `pending --json` and `serve` list as `allowancesInForce`.
///
/// # Errors
/// The store's error when it cannot list the workspace allowances.
pub async fn allowances_in_force(
    store: &dyn SessionStore,
    record: &SessionRecord,
) -> Result<Vec<crate::allowance::Allowance>, StoreError> {
    let mut kept = stored_allowances(store, record).await?;
    kept.retain(|a| a.mode_id == record.mode_id);
    Ok(kept)
}

/// Checks that `dir` (a controller's workspace) is the workspace session `session_id`
/// recorded.
pub(crate) fn check_workspace(
    session_id: &str,
    recorded: &WorkspaceRecord,
    dir: &Path,
) -> Result<(), SessionError> {
    let session_id = session_id.to_owned();
    recorded.check(dir).map_err(|mismatch| match mismatch {
        WorkspaceMismatch::Gone { path, reason } => SessionError::WorkspaceGone {
            session_id,
            path,
            reason,
        },
        WorkspaceMismatch::Elsewhere { recorded, actual } => SessionError::WrongWorkspace {
            session_id,
            recorded,
            actual,
        },
        WorkspaceMismatch::Replaced { path } => {
            SessionError::WorkspaceReplaced { session_id, path }
        }
    })
}

/// How many times an approval toward a quorum that lost a race is tried again
/// ([`Session::decide`]).
const QUORUM_RETRIES: usize = 4;
