//! The harness: a real [`Session`] of a real [`AgentController`], driven by a scripted model in
//! a temporary workspace, doing what a [`ReferenceSession`] step says and comparing the result.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use async_trait::async_trait;
use serde_json::json;

use super::ask::Ask;
use super::facts::{ConfigFacts, WorkspaceStore};
use super::hooks::{KIT_HOOK, ScriptedHook};
use super::quorum::{QuorumStep, approver};
use super::reference::{
    Action, CLOCK_START_MS, Decided, ModelAllowance, Offered, Op, Outcome, PLAN_COUNT, PendingPlan,
    PlanFile, ReferenceSession, Refusal, Reply, ResultKind, RunRef, Step, TaskCall, Trace,
    WaitingCall, as_identity, plan_text,
};
use super::subagents::ChildOrigin;
use crate::allowance::{Allowance, AllowanceScope};
use crate::controller::{AgentController, AgentControllerBuilder, ToolLayer};
use crate::deadline::{APPROVED_NOT_RUN_RESULT, Clock};
use crate::event::{DecisionOutcome, Event, RunState, Suspension, SuspensionKind};
use crate::machine::rejection::{TOOL_FEEDBACK_PREFIX, TOOL_REJECTED_RESULT};
use crate::mode::ModeGraph;
use crate::model::{LanguageModel, Message, ModelError, ModelRequest, ModelResponse};
use crate::quorum::QuorumError;
use crate::run::{DecisionAction, RunOutcome};
use crate::session::{PendingDecision, Session, SessionError, SessionOptions};
use crate::tool::submit_plan::{
    APPROVED_PLAN_BEGIN, APPROVED_PLAN_END, APPROVED_RESULT, REJECTED_RESULT,
    REJECTED_WITH_FEEDBACK_PREFIX, SUBMIT_PLAN,
};
use crate::tool::tasks::TaskStatus;
use crate::tool::{PathLocation, Tool, ToolCall, ToolContext, ToolOutput};

/// Why a [`Harness`] could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The temporary workspace or its plan files could not be written.
    #[error("cannot prepare the workspace: {0}")]
    Io(#[from] std::io::Error),
    /// The async runtime could not be started, or a check was started inside one.
    #[error("cannot run sessions: {0}")]
    Runtime(String),
    /// The caller's build function failed.
    #[error("building the controller failed: {0}")]
    Build(String),
    /// The session could not be started.
    #[error("starting the session failed: {0}")]
    Start(#[from] SessionError),
    /// The kit cannot observe the controller it was given (it was not built from the
    /// [`Setup`]): the message says what it lacks and what to do. Checked before anything
    /// runs, so a controller the kit cannot see is never reported as diverging.
    #[error("the kit cannot observe this controller: {0}")]
    Unobservable(String),
}

/// Which part of the session differed from the reference.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[strum(parse_err_ty = crate::names::UnknownName, parse_err_fn = crate::names::UnknownName::of::<Self>)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(inline, schema_with = "crate::names::schema::<Aspect>")
)]
#[non_exhaustive]
pub enum Aspect {
    /// The return value of the host call.
    Outcome,
    /// The events emitted and model calls made, in order.
    Events,
    /// The current mode afterwards.
    Mode,
    /// The pending decision afterwards.
    Pending,
    /// The latest run's state afterwards.
    Run,
    /// The allowances in force afterwards (scope, tool, pattern, mode), or, at a start,
    /// workspace allowances the kit revoked that the new session still has.
    Allowances,
    /// The session's task list afterwards (each task's id, content and status).
    Tasks,
    /// The workspace changed in a step in which no tool ran.
    Workspace,
    /// An invariant of yours ([`Harness::invariant`]) failed.
    Invariant,
    /// The session panicked.
    Panic,
}

impl Aspect {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A place where the real session did not do what the reference model says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{aspect} differs after {op}\n  expected: {expected}\n  actual:   {actual}")]
pub struct Divergence {
    /// What differed.
    pub aspect: Aspect,
    /// The operation that caused it (`start` for the new session).
    pub op: String,
    /// What the reference expected.
    pub expected: String,
    /// What the session did.
    pub actual: String,
}

/// What the harness records, in order: session events, model calls and tool executions.
// Most entries are events: boxing them would only add an allocation per entry.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
enum Record {
    Event(Event),
    ModelCall {
        /// The session the call belongs to: the parent's, or a child's (a subagent's run).
        session: String,
        mode_id: String,
        tools: Vec<String>,
        /// The last mode-change notice among the messages added since the previous call.
        notice: Option<String>,
        /// The plan text of the last approval result among those messages.
        handed: Option<String>,
    },
    /// A registered tool's `execute` ran (seen by the spy) in the session `session`.
    ToolExecuted {
        session: String,
        tool: String,
        mode: String,
    },
    /// The `execute` logged last ended its call by suspending (seen by the spy).
    ToolSuspendedCall {
        session: String,
        tool_call_id: String,
    },
    /// A registered tool's `resume` step ran with the user's answer (seen by the spy).
    ToolResumed {
        session: String,
        tool: String,
        mode: String,
    },
}

type Log = Arc<Mutex<Vec<Record>>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The model the harness hands the controller: it replays the replies of the current step and
/// logs each call where the events are logged, so their order is seen.
#[derive(Debug, Default)]
struct StepModel {
    replies: Mutex<VecDeque<Result<ModelResponse, ModelError>>>,
    log: Log,
    /// How many messages of each session (the parent's, a child's) the model had seen at its
    /// previous call in it.
    seen: Mutex<BTreeMap<String, usize>>,
}

#[async_trait]
impl LanguageModel for StepModel {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let (notice, handed) = {
            let mut seen = lock(&self.seen);
            let seen = seen.entry(request.session_id.to_owned()).or_default();
            let fresh = request.messages.get(*seen..).unwrap_or_default();
            *seen = request.messages.len();
            // A manual switch tells the model in a system message, an approval inside the
            // approval result.
            let notice = fresh.iter().rev().find_map(|m| match m {
                Message::System { content } | Message::Tool { content, .. }
                    if content.contains("Mode changed: you are now in the ") =>
                {
                    Some(content.clone())
                }
                _ => None,
            });
            let handed = fresh.iter().rev().find_map(|m| match m {
                Message::Tool { content, .. } => approved_plan(content),
                _ => None,
            });
            (notice, handed)
        };
        lock(&self.log).push(Record::ModelCall {
            session: request.session_id.to_owned(),
            mode_id: request.mode_id.to_owned(),
            tools: request.tools.iter().map(|t| t.name.to_string()).collect(),
            notice,
            handed,
        });
        lock(&self.replies)
            .pop_front()
            .unwrap_or_else(|| Err(ModelError::new("the step's script has no more replies")))
    }
}

/// The plan an approval result hands over: its text between [`APPROVED_PLAN_BEGIN`] and the
/// last [`APPROVED_PLAN_END`] line; `None` for any other tool result.
fn approved_plan(result: &str) -> Option<String> {
    if !result.starts_with(APPROVED_RESULT) {
        return None;
    }
    let begin = format!("\n{APPROVED_PLAN_BEGIN}\n");
    let start = result.find(&begin)? + begin.len();
    let end = result.rfind(&format!("\n{APPROVED_PLAN_END} "))?;
    result.get(start..end).map(str::to_owned)
}

/// Wraps every registered tool: logs each `execute` where the events are logged, so "not
/// executed" means `execute` never ran (not merely that the result was an error).
struct Spy {
    tool: Arc<dyn Tool>,
    log: Log,
}

#[async_trait]
impl Tool for Spy {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> String {
        self.tool.description()
    }

    /// The tool's schema without its top-level `required` list: the kit's calls carry `{}`
    /// (one `argsSha256` for every call), and arguments that do not fit the schema are refused
    /// before a call runs or waits ([`crate::tool::input`]).
    fn input_schema(&self) -> serde_json::Value {
        let mut schema = self.tool.input_schema();
        if let Some(object) = schema.as_object_mut() {
            object.remove("required");
        }
        schema
    }

    fn access(&self) -> crate::tool::ToolAccess {
        self.tool.access()
    }

    /// Where the tool takes a path, as it says: the rules and allowances the session checks
    /// read the path it opens.
    fn locate(&self, arg: &str, path: Option<&str>, ctx: &ToolContext<'_>) -> PathLocation {
        self.tool.locate(arg, path, ctx)
    }

    /// The paths the tool writes, as it says: what an approved plan's files bind.
    fn written_path_args(&self, args: &serde_json::Value) -> Vec<String> {
        self.tool.written_path_args(args)
    }

    async fn execute(&self, args: &serde_json::Value, ctx: &ToolContext<'_>) -> ToolOutput {
        lock(&self.log).push(Record::ToolExecuted {
            session: ctx.session_id.to_owned(),
            tool: self.tool.name().to_owned(),
            mode: ctx.mode_id.to_owned(),
        });
        let output = self.tool.execute(args, ctx).await;
        if output.suspension.is_some() {
            lock(&self.log).push(Record::ToolSuspendedCall {
                session: ctx.session_id.to_owned(),
                tool_call_id: ctx.tool_call_id.to_owned(),
            });
        }
        output
    }

    /// The tool's own `resume` step (a tool that suspends turns the answer into its result
    /// there), logged where the events are.
    async fn resume(
        &self,
        args: &serde_json::Value,
        answer: &serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> ToolOutput {
        lock(&self.log).push(Record::ToolResumed {
            session: ctx.session_id.to_owned(),
            tool: self.tool.name().to_owned(),
            mode: ctx.mode_id.to_owned(),
        });
        self.tool.resume(args, answer, ctx).await
    }
}

/// What the kit hands your build function: the mode graph, the kit's scripted model and a
/// temporary workspace (the kit sets no clock: the controller keeps the one its builder has,
/// the system clock unless you set one). Build your controller from
/// [`Setup::builder`] (the kit's model) or [`Setup::builder_with`] (your model layer around
/// [`Setup::model`]), from [`Setup::builder_for`] (a mode graph your own code built), or hand
/// a builder you made to [`Setup::observe`]; add your tools, step limit and store, and build it.
/// Every tool you register is wrapped by the kit's spy when the controller is built, outside
/// your own tool layers.
///
/// The kit checks that it can observe the controller it was given: one built another way (its
/// own workspace, tools without the spy) is refused with
/// [`HarnessError::Unobservable`], which says what to change, rather than reported as
/// divergences that are not there.
pub struct Setup {
    graph: ModeGraph,
    model: Arc<StepModel>,
    workspace: PathBuf,
    spy: ToolLayer,
    clock: Clock,
    /// The kit's hook, answering each case's generated verdicts.
    hook: ScriptedHook,
}

impl fmt::Debug for Setup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Setup")
            .field("modes", &self.graph.len())
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl Setup {
    /// The kit's scripted model: wrap it in your own model layer and pass the layer to
    /// [`Setup::builder_with`]. Your layer must pass requests on (it may look at or change
    /// them: the kit checks what reaches this model).
    pub fn model(&self) -> Arc<dyn LanguageModel> {
        self.model.clone()
    }

    /// The config's mode graph.
    pub fn graph(&self) -> &ModeGraph {
        &self.graph
    }

    /// The temporary workspace (leave it as it is: the kit compares it before and after
    /// every step; keep a session store outside it).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// A builder over the graph with the kit's model and workspace.
    pub fn builder(self) -> AgentControllerBuilder {
        let model = self.model();
        self.builder_with(model)
    }

    /// A builder over the graph with `model` (your layer around [`Setup::model`]) and the kit's
    /// workspace.
    pub fn builder_with(self, model: Arc<dyn LanguageModel>) -> AgentControllerBuilder {
        let graph = self.graph.clone();
        self.builder_for(graph, model)
    }

    /// A builder over `graph`, a mode graph your own code built (from the config, say, with
    /// modes or tools your harness adds), with `model` (the kit's, [`Setup::model`], or your
    /// layer around it) and the kit's workspace and spy. The reference model reads the
    /// config file: a graph that means something else is a divergence, as it would be a bug of
    /// your harness.
    ///
    /// ```
    /// use agent_controller::{ToolRegistry, config};
    /// use agent_controller::testing::Check;
    ///
    /// let report = Check::new("config/modes.toml")
    ///     .cases(8)
    ///     .without_regressions()
    ///     .run(|setup| {
    ///         // Your harness loads the config its own way.
    ///         let graph = config::load("config/modes.toml")?;
    ///         let model = setup.model();
    ///         setup
    ///             .builder_for(graph, model)
    ///             .tools(ToolRegistry::with_workspace_tools())
    ///             .build()
    ///     })?;
    /// assert!(report.is_ok());
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn builder_for(
        self,
        graph: ModeGraph,
        model: Arc<dyn LanguageModel>,
    ) -> AgentControllerBuilder {
        self.observe(AgentController::builder(graph, model))
    }

    /// Makes a builder you made (with your graph, your model layer around [`Setup::model`],
    /// your tools, store and limits) observable: sets the kit's workspace and puts the kit's
    /// spy around every tool it registers when it is built (the clock stays the builder's), and
    /// registers the kit's hook ([`crate::testing::KIT_HOOK`]), which answers each case's
    /// generated verdicts ([`crate::testing::HookScript`]; none: it has no say).
    /// Call it last, or at least do not set the workspace after it.
    ///
    /// ```
    /// use agent_controller::{AgentController, ToolRegistry, config};
    /// use agent_controller::testing::Check;
    ///
    /// let report = Check::new("config/modes.toml")
    ///     .cases(8)
    ///     .without_regressions()
    ///     .run(|setup| {
    ///         let graph = config::load("config/modes.toml")?;
    ///         let yours = AgentController::builder(graph, setup.model())
    ///             .tools(ToolRegistry::with_workspace_tools())
    ///             .max_steps(16);
    ///         setup.observe(yours).build()
    ///     })?;
    /// assert!(report.is_ok());
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn observe(self, builder: AgentControllerBuilder) -> AgentControllerBuilder {
        builder
            .workspace(&self.workspace)
            .tool_layer(self.spy)
            .shared_clock(self.clock)
            .hook(self.hook)
    }

    /// The same setup with a hook of its own, which no case scripts: the controller built
    /// never hears the case's verdicts (a planted bug for the kit's own tests).
    #[cfg(test)]
    pub(crate) fn deaf(mut self) -> Self {
        self.hook = ScriptedHook::default();
        self
    }

    /// The kit's spy, which the built controller puts around every tool: the kit's own tests
    /// plant a bug with it (a tool run behind the session's back, seen by the kit).
    #[cfg(test)]
    pub(crate) fn spy(&self) -> ToolLayer {
        self.spy.clone()
    }
}

/// A check of your own, run after every step: it gets the real session and the reference
/// model and returns `Err(message)` when something is wrong.
pub type Invariant = Arc<dyn Fn(&Session, &ReferenceSession) -> Result<(), String> + Send + Sync>;

/// A real session driven step by step next to a [`ReferenceSession`].
///
/// The harness builds the controller with its own scripted model and a temporary workspace
/// (removed on drop) holding the plan files the steps submit: [`PLAN_COUNT`] valid plans, an
/// empty one, one not named `.md`, and one outside the plans directory.
pub struct Harness {
    runtime: tokio::runtime::Runtime,
    controller: AgentController,
    facts: Arc<ConfigFacts>,
    model: Arc<StepModel>,
    /// The kit's clock, in milliseconds since the Unix epoch: set to the reference's before
    /// every step.
    now: Arc<AtomicU64>,
    session: Option<Session>,
    run_ids: Vec<String>,
    plans_dir: PathBuf,
    outside: PathBuf,
    invariants: Vec<Invariant>,
    /// The workspace allowances this harness's sessions gave (their ids in the store): revoked
    /// before each new start, so every operation sequence starts from a store without them.
    /// Only these: another harness on the same store (another workspace) keeps its own.
    given: Vec<String>,
    /// The kit's hook on the controller: [`Harness::start`] hands it the case's verdicts.
    hook: ScriptedHook,
    _dir: tempfile::TempDir,
}

impl fmt::Debug for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Harness")
            .field("controller", &self.controller)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Harness {
    /// Sets up a workspace and builds the controller: `build` gets a [`Setup`] (the graph, the
    /// harness's model and workspace) and adds what the caller's controller has (tools, step
    /// limit, store, model layer). It should leave the workspace alone: plan files are written
    /// to the built controller's plans directory.
    ///
    /// `facts` without registered tools ([`ConfigFacts::with_tools`]) are completed from the
    /// built controller (its tools and step limit); see [`Harness::facts`].
    ///
    /// # Errors
    /// [`HarnessError::Io`] when the workspace cannot be written, [`HarnessError::Runtime`] when
    /// no runtime can be started (or this runs inside one), [`HarnessError::Build`] when `build`
    /// fails or the controller's tools or step limit are not the ones `facts` name.
    pub fn new<E: fmt::Display>(
        graph: ModeGraph,
        facts: Arc<ConfigFacts>,
        build: impl FnOnce(Setup) -> Result<AgentController, E>,
    ) -> Result<Self, HarnessError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(HarnessError::Runtime(
                "called inside an async runtime: run the check from a plain #[test]".to_owned(),
            ));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| HarnessError::Runtime(e.to_string()))?;
        let dir = tempfile::Builder::new()
            .prefix("agent-controller-testing-")
            .tempdir()?;
        // Canonical, so paths in plan submissions and the plans directory agree after symlinks.
        let root = dir.path().canonicalize()?;
        let workspace = root.join("workspace");
        std::fs::create_dir_all(&workspace)?;
        let model = Arc::new(StepModel::default());
        let log = model.log.clone();
        // The tools the spy wrapped, to tell a controller built without it.
        let spied: Arc<Mutex<Vec<String>>> = Arc::default();
        let wrapped = spied.clone();
        let spy: ToolLayer = Arc::new(move |tool: Arc<dyn Tool>| -> Arc<dyn Tool> {
            lock(&wrapped).push(tool.name().to_owned());
            Arc::new(Spy {
                tool,
                log: log.clone(),
            })
        });
        let now = Arc::new(AtomicU64::new(CLOCK_START_MS));
        let reads = now.clone();
        let clock: Clock = Arc::new(move || UNIX_EPOCH + Duration::from_millis(reads.load(SeqCst)));
        let hook = ScriptedHook::default();
        let setup = Setup {
            graph,
            model: model.clone(),
            workspace: workspace.clone(),
            spy,
            clock: clock.clone(),
            hook: hook.clone(),
        };
        let controller = build(setup).map_err(|e| HarnessError::Build(e.to_string()))?;
        observable(&controller, &workspace, &lock(&spied))?;
        if facts.has_deadlines() && !Arc::ptr_eq(controller.clock(), &clock) {
            return Err(HarnessError::Unobservable(
                "the config has an approvalTimeout, and the controller reads a clock of its own, \
                 not the kit's (which moves time to and past each deadline): do not call \
                 .clock(...) on the builder the Setup gives you, nor after setup.observe(builder)"
                    .to_owned(),
            ));
        }
        let facts = controller_facts(facts, &controller)?;
        let store = runtime.block_on(workspace_store(&controller, &workspace, &root));
        let path_tools = super::facts::path_tools(controller.registry());
        let path_writers = super::facts::path_writers(controller.registry());
        let read_only = super::facts::read_only_tools(controller.registry());
        let facts = Arc::new(
            (*facts)
                .clone()
                .with_workspace_store(store)
                .with_path_tools(path_tools)
                .with_path_writers(path_writers)
                .with_read_only_tools(read_only),
        );
        let plans_dir = controller.plans_dir().to_owned();
        std::fs::create_dir_all(&plans_dir)?;
        for k in (0..PLAN_COUNT).chain([super::SCOPED_PLAN]) {
            std::fs::write(plans_dir.join(format!("plan-{k}.md")), plan_text(k))?;
        }
        std::fs::write(plans_dir.join("empty.md"), "")?;
        std::fs::write(plans_dir.join("plan.txt"), plan_text(0))?;
        let outside = root.join("outside.md");
        std::fs::write(&outside, plan_text(0))?;
        Ok(Self {
            runtime,
            controller,
            facts,
            model,
            now,
            session: None,
            run_ids: Vec::new(),
            plans_dir,
            outside,
            invariants: Vec::new(),
            given: Vec::new(),
            hook,
            _dir: dir,
        })
    }

    /// The facts the harness compares against: the config's, with the controller's registered
    /// tools (which write, which take a path: [`ConfigFacts::path_tools`]), step limit and
    /// what its store does with workspace allowances.
    pub fn facts(&self) -> &Arc<ConfigFacts> {
        &self.facts
    }

    /// Adds a check of your own, run after the start and after every step.
    pub fn invariant(&mut self, check: Invariant) {
        self.invariants.push(check);
    }

    /// Session options whose subscriber logs every event for the comparison.
    fn options(&self) -> SessionOptions {
        let log = self.model.log.clone();
        SessionOptions::new().on_event(move |e| lock(&log).push(Record::Event(e.clone())))
    }

    /// The controller under test.
    pub fn controller(&self) -> &AgentController {
        &self.controller
    }

    /// The current session, once [`Harness::start`] ran.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// Starts a new session as `reference` was started (in its start mode, or the default) and
    /// compares the starting state.
    ///
    /// # Errors
    /// [`Divergence`] when the new session differs from the reference, including a refused start.
    pub fn start(&mut self, reference: &ReferenceSession) -> Result<(), Divergence> {
        // The workspace allowances an earlier sequence gave are no part of this one.
        let revoked = std::mem::take(&mut self.given);
        if let Some(store) = self.controller.store().cloned() {
            for id in &revoked {
                // A store that fails here shows as allowances the reference does not expect.
                let _ = self.runtime.block_on(store.revoke_workspace_allowance(id));
            }
        }
        lock(&self.model.log).clear();
        lock(&self.model.seen).clear();
        self.run_ids.clear();
        self.now.store(reference.now(), SeqCst);
        // The case's hook verdicts, an input as its operations are.
        *lock(&self.hook.script) = reference.hooks().clone();
        let mut options = self.options();
        if let Some(start) = reference.start() {
            options = options.mode(self.facts.id(start));
        }
        let controller = &self.controller;
        let runtime = &self.runtime;
        let started = catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(controller.start_session(options))
        }));
        let session = match started {
            Ok(Ok(session)) => session,
            Ok(Err(e)) => return Err(divergence(Aspect::Outcome, "start", "a session", e)),
            Err(panic) => return Err(panicked("start", &panic)),
        };
        // A revoked workspace allowance the new session still has: the store's revoke left it.
        let kept: Vec<String> = session
            .allowances()
            .iter()
            .filter(|a| revoked.contains(&a.id))
            .map(|a| allowance_view(&model_of(a)))
            .collect();
        self.session = Some(session);
        if !kept.is_empty() {
            self.note_given();
            return Err(divergence(
                Aspect::Allowances,
                "start",
                "none of the workspace allowances the kit revoked before the start (`revoke_workspace_allowance`)",
                format!(
                    "a new session still has revoked workspace allowances: {kept:?} (the store's revoke did not remove them)"
                ),
            ));
        }
        let events = std::mem::take(&mut *lock(&self.model.log));
        let started_in: Vec<String> = events
            .iter()
            .filter_map(|r| match r {
                Record::Event(Event::SessionStarted { mode_id, .. }) => Some(mode_id.to_string()),
                _ => None,
            })
            .collect();
        let expected = vec![self.facts.id(reference.mode()).to_owned()];
        if started_in != expected {
            return Err(divergence(
                Aspect::Events,
                "start",
                format!("session_started in {expected:?}"),
                format!("session_started in {started_in:?}"),
            ));
        }
        self.compare_state(reference, "start")?;
        self.check_invariants(reference, "start")
    }

    /// Starts a session as `initial` was started and performs `ops` one by one, comparing after
    /// each; returns the reference as it ended.
    ///
    /// # Errors
    /// The index of the operation that diverged (`None`: the start) and the [`Divergence`].
    pub fn run(
        &mut self,
        initial: &ReferenceSession,
        ops: &[Op],
    ) -> Result<ReferenceSession, (Option<usize>, Divergence)> {
        self.start(initial).map_err(|d| (None, d))?;
        let mut reference = initial.clone();
        for (i, op) in ops.iter().enumerate() {
            reference.apply(op);
            self.step(&reference).map_err(|d| (Some(i), d))?;
        }
        Ok(reference)
    }

    fn check_invariants(&self, reference: &ReferenceSession, op: &str) -> Result<(), Divergence> {
        let Some(session) = &self.session else {
            return Ok(());
        };
        for check in &self.invariants {
            let result = catch_unwind(AssertUnwindSafe(|| check(session, reference)));
            match result {
                Ok(Ok(())) => {}
                Ok(Err(message)) => {
                    return Err(divergence(Aspect::Invariant, op, "it holds", message));
                }
                Err(panic) => return Err(panicked(op, &panic)),
            }
        }
        Ok(())
    }

    /// Performs the last step `reference` recorded ([`ReferenceSession::apply`]) on the real
    /// session and compares outcome, events and model calls, mode, pending decision and run
    /// state.
    ///
    /// # Errors
    /// [`Divergence`] naming the first aspect that differs (a panic counts as one).
    pub fn step(&mut self, reference: &ReferenceSession) -> Result<(), Divergence> {
        let Some(step) = reference.last_step() else {
            return self.compare_state(reference, "start");
        };
        let op = format!("{:?}", step.op);
        if let Some(quorum) = step.quorum {
            self.quorum_prelude(step, quorum, reference.now(), &op)?;
        }
        let before = workspace_files(self.controller.workspace());
        let outcome = self
            .perform(step, reference.now())
            .map_err(|panic| panicked(&op, &panic))?;
        self.note_given();
        let records = std::mem::take(&mut *lock(&self.model.log));
        let trace = self.trace(records);
        // Either a real bug, or a model layer that never passes requests on: say which to look at.
        let called = |t: &[Trace]| t.iter().any(|t| matches!(t, Trace::ModelCalled { .. }));
        let hint = if called(&step.expected.trace) && !called(&trace) {
            " (no model call reached the kit's model: a model layer of yours must pass each \
             request on to setup.model(), or the kit cannot see the model's calls)"
        } else {
            ""
        };
        if outcome != step.expected.outcome {
            return Err(divergence(
                Aspect::Outcome,
                &op,
                format!("{:?}", step.expected.outcome),
                format!("{outcome:?}{hint}"),
            ));
        }
        if trace != step.expected.trace {
            let (expected, actual) =
                first_difference(&step.expected.trace, &trace, |t| format!("{t:?}"));
            return Err(divergence(
                Aspect::Events,
                &op,
                expected,
                format!("{actual}{hint}"),
            ));
        }
        let ran = trace.iter().any(|t| matches!(t, Trace::ToolRan { .. }));
        let after = workspace_files(self.controller.workspace());
        if !ran && before != after {
            return Err(divergence(
                Aspect::Workspace,
                &op,
                "no change (no tool ran)",
                changed_files(&before, &after),
            ));
        }
        self.compare_state(reference, &op)?;
        self.check_invariants(reference, &op)
    }

    /// The approvals an approval under a quorum needs before its own host call
    /// ([`QuorumStep`]): approvers 1 to N−1 each leave the decision waiting, and approver 1
    /// approving again is refused. What they send is not part of the step's trace.
    ///
    /// # Errors
    /// [`Divergence`] ([`Aspect::Outcome`]) when one of them does otherwise.
    fn quorum_prelude(
        &mut self,
        step: &Step,
        quorum: QuorumStep,
        now: u64,
        op: &str,
    ) -> Result<(), Divergence> {
        self.now.store(now, SeqCst);
        let run_ids = self.run_ids.clone();
        let Some(session) = self.session.as_mut() else {
            return Ok(());
        };
        let runtime = &self.runtime;
        let run_id = |run: &RunRef| match run {
            RunRef::Run(n) => run_ids
                .get(n.wrapping_sub(1))
                .cloned()
                .unwrap_or_else(|| format!("run #{n} was never started")),
            RunRef::Unknown(id) => id.clone(),
        };
        let mut approve = |n: u8| -> Result<RunOutcome, SessionError> {
            match as_identity(&step.action, &approver(n)) {
                Action::Resume {
                    run,
                    tool_call_id,
                    decision,
                } => runtime.block_on(session.resume(&run_id(&run), &tool_call_id, decision)),
                Action::Decide {
                    decision_id,
                    decision,
                } => runtime.block_on(session.decide(&decision_id, decision)),
                Action::ResumeJson {
                    run,
                    tool_call_id,
                    data,
                } => runtime.block_on(session.resume_json(&run_id(&run), &tool_call_id, &data)),
                other => Err(SessionError::MalformedDecision(format!(
                    "not a decision: {other:?}"
                ))),
            }
        };
        let short = |n: u8, got: String| {
            divergence(
                Aspect::Outcome,
                op,
                format!(
                    "approval {n} of {} ({}) leaves the decision waiting",
                    quorum.needed,
                    approver(n)
                ),
                got,
            )
        };
        for n in 1..quorum.needed {
            let outcome = approve(n).map(|o| o.state());
            if !matches!(outcome, Ok(RunState::Suspended)) {
                return Err(short(n, format!("{outcome:?}")));
            }
            if n == 1 {
                // The same identity again: refused, nothing changes.
                let again = approve(1);
                if !matches!(
                    again,
                    Err(SessionError::Quorum(QuorumError::SameIdentity { .. }))
                ) {
                    return Err(divergence(
                        Aspect::Outcome,
                        op,
                        format!("{} approving twice is refused", approver(1)),
                        format!("{:?}", again.map(|o| o.state())),
                    ));
                }
            }
        }
        // Only the completed quorum's call makes what the step compares.
        lock(&self.model.log).clear();
        Ok(())
    }

    fn perform(&mut self, step: &Step, now: u64) -> Result<Outcome, Box<dyn std::any::Any + Send>> {
        // Time passed (or not) before the host call.
        self.now.store(now, SeqCst);
        {
            let mut replies = lock(&self.model.replies);
            replies.clear();
            for reply in &step.replies {
                replies.push_back(self.response(reply));
            }
        }
        let run_id = |run: &RunRef| match run {
            RunRef::Run(n) => self
                .run_ids
                .get(n.wrapping_sub(1))
                .cloned()
                .unwrap_or_else(|| format!("run #{n} was never started")),
            RunRef::Unknown(id) => id.clone(),
        };
        // The allowance a revocation names, by its real id (read before the session is borrowed).
        let revoked = match &step.action {
            Action::Revoke(name) => self.allowance_id(name),
            _ => String::new(),
        };
        let options = self.options();
        let Some(session) = self.session.as_mut() else {
            return Ok(Outcome::NoDecision);
        };
        let runtime = &self.runtime;
        let controller = &self.controller;
        let outcome = catch_unwind(AssertUnwindSafe(|| match &step.action {
            Action::Send(text) => run_outcome(runtime.block_on(session.send_message(text.clone()))),
            Action::Resume {
                run,
                tool_call_id,
                decision,
            } => run_outcome(runtime.block_on(session.resume(
                &run_id(run),
                tool_call_id,
                decision.clone(),
            ))),
            Action::Decide {
                decision_id,
                decision,
            } => run_outcome(runtime.block_on(session.decide(decision_id, decision.clone()))),
            Action::ResumeJson {
                run,
                tool_call_id,
                data,
            } => {
                run_outcome(runtime.block_on(session.resume_json(&run_id(run), tool_call_id, data)))
            }
            Action::Abort => match runtime.block_on(session.abort()) {
                Ok(aborted) => Outcome::Aborted(aborted),
                Err(e) => Outcome::Refused(refusal(&e)),
            },
            Action::Switch(id) => match runtime.block_on(session.switch_mode(id)) {
                Ok(changed) => Outcome::Switched(changed),
                Err(e) => Outcome::Refused(refusal(&e)),
            },
            Action::Restore => {
                match runtime.block_on(controller.restore_session(session.id(), options)) {
                    Ok(restored) => {
                        *session = restored;
                        Outcome::Restored
                    }
                    Err(e) => Outcome::Refused(refusal(&e)),
                }
            }
            Action::NewSession => match runtime.block_on(controller.start_session(options)) {
                Ok(started) => {
                    *session = started;
                    Outcome::Started
                }
                Err(e) => Outcome::Refused(refusal(&e)),
            },
            Action::ExpireIfDue => match runtime.block_on(session.expire_if_due()) {
                Ok(expired) => Outcome::Expired(expired.len()),
                Err(e) => Outcome::Refused(refusal(&e)),
            },
            Action::Revoke(_) => match runtime.block_on(session.revoke_allowance(&revoked)) {
                Ok(kept) => Outcome::Revoked(kept),
                Err(e) => Outcome::Refused(refusal(&e)),
            },
            Action::Nothing => Outcome::NoDecision,
        }));
        lock(&self.model.replies).clear();
        if matches!(outcome, Ok(Outcome::Started)) {
            // Run ordinals and the model's view count from the new session.
            self.run_ids.clear();
            lock(&self.model.seen).clear();
        }
        outcome
    }

    fn response(&self, reply: &Reply) -> Result<ModelResponse, ModelError> {
        match reply {
            Reply::Text(text) => Ok(ModelResponse {
                text: text.clone(),
                tool_calls: Vec::new(),
                ..ModelResponse::default()
            }),
            Reply::Fail => Err(ModelError::new("scripted model failure")),
            Reply::Calls(calls) => Ok(ModelResponse {
                text: String::new(),
                tool_calls: calls
                    .iter()
                    .map(|call| ToolCall {
                        id: call.id.clone(),
                        name: call.tool.clone(),
                        args: match (call.plan, call.path, call.ask) {
                            _ if call.subagent.is_some() => call
                                .subagent
                                .as_ref()
                                .map(super::subagents::SubagentCall::args)
                                .unwrap_or_default(),
                            _ if call.task.is_some() => {
                                call.task.map(TaskCall::args).unwrap_or_default()
                            }
                            (Some(plan), _, _) => json!({ "path": self.plan_path(plan) }),
                            (None, Some(path), _) => json!({ "path": path.as_str() }),
                            // A suspending tool asks what the kit asks of it.
                            (None, None, Some(ask)) => ask.args(),
                            (None, None, None) => json!({}),
                        },
                    })
                    .collect(),
                ..ModelResponse::default()
            }),
        }
    }

    fn plan_path(&self, plan: PlanFile) -> String {
        let path: PathBuf = match plan {
            PlanFile::Valid(k) => self.plans_dir.join(format!("plan-{k}.md")),
            PlanFile::Missing => self.plans_dir.join("missing.md"),
            PlanFile::Empty => self.plans_dir.join("empty.md"),
            PlanFile::NotMarkdown => self.plans_dir.join("plan.txt"),
            PlanFile::Outside => self.outside.clone(),
        };
        path.display().to_string()
    }

    fn run_ordinal(&self, run_id: &str) -> usize {
        self.run_ids
            .iter()
            .position(|id| id == run_id)
            .map_or(0, |i| i + 1)
    }

    fn trace(&mut self, records: Vec<Record>) -> Vec<Trace> {
        let mut trace = Vec::new();
        // A spied execution, until the `tool_end` of its call folds it into `ToolRan`.
        let mut executed: Option<(String, String)> = None;
        // A spied `resume` step, until the `tool_end` of its call folds it into `ToolResumed`.
        let mut resumed: Option<(String, String)> = None;
        // An execution no `tool_end` follows (a controller running a tool behind the session's
        // back) is a `ToolRan` of no call.
        let stray = |executed: &mut Option<(String, String)>, trace: &mut Vec<Trace>| {
            if let Some((tool, mode)) = executed.take() {
                trace.push(Trace::ToolRan {
                    tool_call_id: STRAY_EXECUTION.to_owned(),
                    tool,
                    mode,
                    allowed_by: None,
                    rule: None,
                    hooked: false,
                });
            }
        };
        // A child's records (a subagent's run, in a session of its own, whose id is its
        // parent's followed by a dot and more) are its own: they never fold into the parent's
        // calls. An execution in no session the kit knows is a stray one, as before.
        let children = self
            .session
            .as_ref()
            .map(|s| format!("{}.", s.id()))
            .unwrap_or_default();
        let child = |session: &str| !children.is_empty() && session.starts_with(&children);
        for record in records {
            let item = match record {
                Record::ModelCall {
                    session,
                    mode_id,
                    mut tools,
                    ..
                } if child(&session) => {
                    tools.sort();
                    Some(Trace::ChildModelCalled {
                        mode: mode_id,
                        tools,
                    })
                }
                Record::ToolExecuted {
                    session,
                    tool,
                    mode,
                } if child(&session) => Some(Trace::ChildToolRan {
                    tool,
                    mode,
                    resumed: false,
                }),
                Record::ToolResumed {
                    session,
                    tool,
                    mode,
                } if child(&session) => Some(Trace::ChildToolRan {
                    tool,
                    mode,
                    resumed: true,
                }),
                Record::ToolSuspendedCall { session, .. } if child(&session) => None,
                Record::ModelCall {
                    mode_id,
                    tools,
                    notice,
                    handed,
                    ..
                } => {
                    stray(&mut executed, &mut trace);
                    Some(self.model_called(mode_id, tools, notice.as_deref(), handed))
                }
                Record::ToolExecuted { tool, mode, .. } => {
                    stray(&mut executed, &mut trace);
                    executed = Some((tool, mode));
                    None
                }
                Record::ToolSuspendedCall { tool_call_id, .. } => {
                    executed.take().map(|(tool, mode)| Trace::CallSuspended {
                        tool_call_id,
                        tool,
                        mode,
                    })
                }
                Record::ToolResumed { tool, mode, .. } => {
                    stray(&mut executed, &mut trace);
                    resumed = Some((tool, mode));
                    None
                }
                Record::Event(Event::ToolEnd { tool_call_id, .. }) if resumed.is_some() => {
                    let (tool, mode) = resumed.take().unwrap_or_default();
                    Some(Trace::ToolResumed {
                        tool_call_id,
                        tool,
                        mode,
                    })
                }
                Record::Event(Event::ToolEnd {
                    tool_call_id,
                    decision,
                    ..
                }) if executed.is_some() => {
                    let (tool, mode) = executed.take().unwrap_or_default();
                    let rule = decision
                        .as_ref()
                        .and_then(|d| d.rule.as_ref().map(|r| r.number));
                    let hooked = decision.as_ref().and_then(|d| d.decided_by.as_deref())
                        == Some(&format!("hook {KIT_HOOK}"));
                    let allowed_by = decision
                        .and_then(|d| d.allowed_by)
                        .map(|id| self.named(id, &mode, &tool));
                    Some(Trace::ToolRan {
                        tool_call_id,
                        tool,
                        mode,
                        allowed_by,
                        rule,
                        hooked,
                    })
                }
                Record::Event(event) => {
                    let item = self.event_trace(event);
                    if item.is_some() {
                        stray(&mut executed, &mut trace);
                    }
                    item
                }
            };
            trace.extend(item);
        }
        stray(&mut executed, &mut trace);
        trace
    }

    /// The reference's name of allowance `id`, which let a call to `tool` run in `mode`: a
    /// workspace allowance's id is a hash of the workspace and config
    /// ([`ModelAllowance::workspace_id`] names it by mode and tool), whether the session keeps
    /// it or not (a store that keeps none: the calls of the reply it approved still name it);
    /// any other id as it is.
    fn named(&self, id: String, mode: &str, tool: &str) -> String {
        let allowances = self.session.as_ref().map(Session::allowances);
        let kept = allowances
            .iter()
            .flatten()
            .find(|a| a.id == id && a.scope == AllowanceScope::Workspace)
            .map(|a| model_of(a).id);
        match kept {
            Some(name) => name,
            None if id.starts_with("ws_") => ModelAllowance::workspace_id(mode, tool),
            None => id,
        }
    }

    fn model_called(
        &self,
        mode: String,
        mut tools: Vec<String>,
        notice: Option<&str>,
        handed_plan: Option<String>,
    ) -> Trace {
        let has_list = self
            .facts
            .index_of(&mode)
            .is_some_and(|m| self.facts.modes()[m].tools.is_some());
        // The notice names the new mode as "... now in the Build mode (`build`), previously
        // `plan` ...": the model must be told the mode it is in now.
        let told_mode_change = notice.is_some_and(|n| n.contains(&format!("mode (`{mode}`)")));
        tools.sort();
        Trace::ModelCalled {
            offered: Offered {
                submit_plan: tools.iter().any(|t| t == SUBMIT_PLAN),
                listed: has_list.then_some(tools),
            },
            mode,
            told_mode_change,
            handed_plan,
        }
    }

    fn event_trace(&mut self, event: Event) -> Option<Trace> {
        Some(match event {
            Event::AgentStart {
                run_id, mode_id, ..
            } => {
                if self.run_ordinal(&run_id) == 0 {
                    self.run_ids.push(run_id.to_string());
                }
                Trace::RunStarted {
                    run: self.run_ordinal(&run_id),
                    mode: mode_id.to_string(),
                }
            }
            Event::ToolEnd {
                tool_call_id,
                result,
                is_error,
                decision,
                ..
            } => Trace::ToolEnded {
                tool_call_id,
                is_error,
                result: result_kind(&result),
                decided: decision.map(|d| Decided {
                    sha256: d.sha256.unwrap_or_default(),
                    approved_sha256: d.approved_sha256,
                    rule: d.rule.map(|r| r.number),
                }),
            },
            Event::ToolSuspended {
                tool_call_id,
                suspend_payload,
                ..
            } => match suspend_payload {
                // A child's call that waits, as a decision of this session.
                Suspension::ToolCall(call) if call.subagent.is_some() => Trace::ChildWaits {
                    tool_call_id,
                    tool: call.tool_name,
                    decision_id: call.decision_id,
                    sha256: call.args_sha256,
                    rule: call.rule.map(|r| r.number),
                    question: false,
                    origin: call
                        .subagent
                        .as_deref()
                        .map(child_origin)
                        .unwrap_or_default(),
                },
                Suspension::Tool(tool) if tool.subagent.is_some() => Trace::ChildWaits {
                    tool_call_id,
                    tool: tool.tool_name.clone(),
                    decision_id: tool.decision_id.clone(),
                    sha256: tool.payload_sha256.clone(),
                    rule: None,
                    question: true,
                    origin: tool
                        .subagent
                        .as_deref()
                        .map(child_origin)
                        .unwrap_or_default(),
                },
                Suspension::ToolCall(call) => Trace::ToolCallSuspended {
                    tool_call_id,
                    tool: call.tool_name,
                    decision_id: call.decision_id,
                    args_sha256: call.args_sha256,
                    rule: call.rule.map(|r| r.number),
                    drift: call.drift.is_some(),
                },
                Suspension::Plan(plan) => Trace::Suspended {
                    tool_call_id,
                    target: plan.target_mode_id.to_string(),
                    targets: plan
                        .target_mode_ids
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                    sha256: plan.submission.sha256,
                },
                // A call its tool suspended: it waits for the user's answer.
                other => {
                    let tool = other.as_tool();
                    Trace::AnswerAwaited {
                        tool_call_id,
                        tool: tool.map(|t| t.tool_name.clone()).unwrap_or_default(),
                        decision_id: other.decision_id().to_owned(),
                        payload_sha256: tool.map(|t| t.payload_sha256.clone()).unwrap_or_default(),
                        question: tool.is_some_and(|t| t.kind == SuspensionKind::Question),
                    }
                }
            },
            Event::ToolSuspensionCancelled {
                tool_call_id,
                reason,
                ..
            } => Trace::Cancelled {
                tool_call_id,
                reason,
            },
            Event::ModeChanged {
                mode_id,
                previous_mode_id,
                reason,
                ..
            } => Trace::ModeChanged {
                mode: mode_id.to_string(),
                previous: previous_mode_id.to_string(),
                reason,
            },
            Event::SubagentEnded {
                tool_call_id,
                agent_type,
                outcome,
                ..
            } => Trace::SubagentEnded {
                tool_call_id,
                agent_type,
                outcome,
            },
            Event::AgentEnd { run_id, reason, .. } => Trace::RunEnded {
                run: self.run_ordinal(&run_id),
                reason,
            },
            _ => return None,
        })
    }

    fn compare_state(&self, reference: &ReferenceSession, op: &str) -> Result<(), Divergence> {
        let Some(session) = &self.session else {
            return Err(divergence(Aspect::Mode, op, "a session", "none"));
        };
        let expected_mode = self.facts.id(reference.mode());
        if session.mode().id() != expected_mode {
            return Err(divergence(
                Aspect::Mode,
                op,
                expected_mode,
                session.mode().id(),
            ));
        }
        let expected_pending = reference.pending().map(|p| self.pending_view(p));
        let actual_pending = session.pending_plan().map(|p| PendingView {
            run: self.run_ordinal(p.run_id()),
            tool_call_id: p.tool_call_id().to_owned(),
            target: self.controller.modes().mode(p.target()).id().to_owned(),
            payload_target: p.payload().target_mode_id.to_string(),
            targets: p
                .targets()
                .iter()
                .map(|t| self.controller.modes().mode(*t).id().to_owned())
                .collect(),
            payload_targets: p
                .payload()
                .target_mode_ids
                .iter()
                .map(ToString::to_string)
                .collect(),
            sha256: p.payload().submission.sha256.clone(),
            deadline_at_ms: p.payload().terms.deadline_at_ms,
            scope: p.payload().scope.as_ref().map(|s| s.entries().to_vec()),
        });
        if expected_pending != actual_pending {
            let (expected, actual) = match (&expected_pending, &actual_pending) {
                (Some(e), Some(a)) => e.difference(a),
                _ => (
                    format!("{expected_pending:?}"),
                    format!("{actual_pending:?}"),
                ),
            };
            return Err(divergence(Aspect::Pending, op, expected, actual));
        }
        let expected_waiting: Vec<String> = reference.waiting().iter().map(waiting_view).collect();
        let actual_waiting: Vec<String> = session
            .pending()
            .iter()
            .filter_map(|p| {
                match p {
                    PendingDecision::Suspension(s) => Some(waiting_view(&question_view(
                        s,
                        self.run_ordinal(s.run_id()),
                    ))),
                    _ => None,
                }
                .or_else(|| {
                    p.as_tool_call().map(|p| {
                        waiting_view(&WaitingCall {
                            run: self.run_ordinal(p.run_id()),
                            tool_call_id: p.tool_call_id().to_owned(),
                            tool: p.tool_name().to_owned(),
                            decision_id: p.decision_id().to_owned(),
                            args_sha256: p.args_sha256().to_owned(),
                            decided: p.decision().map(|d| {
                                let action = match d.outcome {
                                    Some(DecisionOutcome::Approved) => DecisionAction::Approved,
                                    _ => DecisionAction::Rejected,
                                };
                                let feedback = p.feedback().is_some_and(|f| !f.trim().is_empty());
                                (action, feedback)
                            }),
                            // A workspace allowance by the kit's name, as a call it runs is named.
                            allowed_by: p
                                .decision()
                                .and_then(|d| d.allowed_by.clone())
                                .map(|id| self.named(id, session.mode().id(), p.tool_name())),
                            rule: p.payload().rule.as_ref().map(|r| r.number),
                            drift: p.payload().drift.is_some(),
                            deadline: p.payload().terms.deadline_at_ms,
                            asks: None,
                            child: p.payload().subagent.as_deref().map(child_origin),
                            starts: None,
                        })
                    })
                })
            })
            .collect();
        if expected_waiting != actual_waiting {
            let (expected, actual) =
                first_difference(&expected_waiting, &actual_waiting, String::clone);
            return Err(divergence(
                Aspect::Pending,
                op,
                format!("waiting tool calls: {expected}"),
                format!("waiting tool calls: {actual}"),
            ));
        }
        let expected_allowances: Vec<String> =
            reference.allowances().iter().map(allowance_view).collect();
        let actual_allowances: Vec<String> = session
            .allowances()
            .iter()
            .map(|a| allowance_view(&model_of(a)))
            .collect();
        if expected_allowances != actual_allowances {
            return Err(divergence(
                Aspect::Allowances,
                op,
                format!("allowances in force: {expected_allowances:?}"),
                format!("allowances in force: {actual_allowances:?}"),
            ));
        }
        if session.always_allowed() != reference.always_allowed() {
            return Err(divergence(
                Aspect::Pending,
                op,
                format!("always allowed: {:?}", reference.always_allowed()),
                format!("always allowed: {:?}", session.always_allowed()),
            ));
        }
        let task_view = |id: &str, content: &str, status: TaskStatus| {
            format!("{id} ({}): {content}", status.as_str())
        };
        let expected_tasks: Vec<String> = reference
            .tasks()
            .iter()
            .map(|t| task_view(&t.id, &t.content, t.status))
            .collect();
        let actual_tasks: Vec<String> = session
            .tasks()
            .iter()
            .map(|t| task_view(&t.id, &t.content, t.status))
            .collect();
        if expected_tasks != actual_tasks {
            return Err(divergence(
                Aspect::Tasks,
                op,
                format!("tasks: {expected_tasks:?}"),
                format!("tasks: {actual_tasks:?}"),
            ));
        }
        let actual_run = session
            .run_state()
            .map(|(id, state)| (self.run_ordinal(id), state));
        if actual_run != reference.run() {
            return Err(divergence(
                Aspect::Run,
                op,
                format!("{:?}", reference.run()),
                format!("{actual_run:?}"),
            ));
        }
        Ok(())
    }

    /// Notes the workspace allowances the current session keeps, to revoke before the next
    /// start ([`Harness::start`]).
    fn note_given(&mut self) {
        let Some(session) = &self.session else {
            return;
        };
        for a in session.allowances() {
            if a.scope == AllowanceScope::Workspace && !self.given.contains(&a.id) {
                self.given.push(a.id);
            }
        }
    }

    /// The real id of the allowance the reference names `name` ([`ModelAllowance::id`]): a
    /// workspace one in force by its mode, tool and pattern; any other name as it is.
    fn allowance_id(&self, name: &str) -> String {
        self.session
            .iter()
            .flat_map(Session::allowances)
            .find(|a| model_of(a).id == name)
            .map_or_else(|| name.to_owned(), |a| a.id)
    }

    fn pending_view(&self, pending: &PendingPlan) -> PendingView {
        let target = self.facts.id(pending.target).to_owned();
        PendingView {
            run: pending.run,
            tool_call_id: pending.tool_call_id.clone(),
            payload_target: target.clone(),
            target,
            targets: pending
                .targets
                .iter()
                .map(|t| self.facts.id(*t).to_owned())
                .collect(),
            payload_targets: pending
                .targets
                .iter()
                .map(|t| self.facts.id(*t).to_owned())
                .collect(),
            sha256: pending.sha256.clone(),
            deadline_at_ms: pending.deadline,
            scope: super::reference::plan_declares_files(pending.plan)
                .then(|| vec![super::PLAN_FILES.to_owned()]),
        }
    }

    /// Where the harness keeps its plan files (the controller's plans directory).
    pub fn plans_dir(&self) -> &Path {
        &self.plans_dir
    }
}

#[derive(Debug, PartialEq, Eq)]
struct PendingView {
    run: usize,
    tool_call_id: String,
    target: String,
    payload_target: String,
    targets: Vec<String>,
    payload_targets: Vec<String>,
    sha256: String,
    deadline_at_ms: Option<u64>,
    /// The files the plan declares (`scope` of the payload), `None` without a `## Files`.
    scope: Option<Vec<String>>,
}

impl PendingView {
    /// Only the fields that differ, as `field: value` lists for the expected and actual side.
    fn difference(&self, actual: &PendingView) -> (String, String) {
        let fields = [
            ("run", self.run.to_string(), actual.run.to_string()),
            (
                "tool_call_id",
                self.tool_call_id.clone(),
                actual.tool_call_id.clone(),
            ),
            ("target", self.target.clone(), actual.target.clone()),
            (
                "payload_target",
                self.payload_target.clone(),
                actual.payload_target.clone(),
            ),
            ("targets", self.targets.join(","), actual.targets.join(",")),
            (
                "payload_targets",
                self.payload_targets.join(","),
                actual.payload_targets.join(","),
            ),
            ("sha256", self.sha256.clone(), actual.sha256.clone()),
            (
                "deadline_at_ms",
                format!("{:?}", self.deadline_at_ms),
                format!("{:?}", actual.deadline_at_ms),
            ),
            (
                "scope",
                format!("{:?}", self.scope),
                format!("{:?}", actual.scope),
            ),
        ];
        let differ: Vec<_> = fields.iter().filter(|(_, e, a)| e != a).collect();
        let side = |expected: bool| {
            differ
                .iter()
                .map(|(name, e, a)| format!("{name}: {}", if expected { e } else { a }))
                .collect::<Vec<_>>()
                .join(", ")
        };
        (side(true), side(false))
    }
}

/// How the result of an expired plan or tool call starts ([`crate::deadline::expired_result`],
/// [`crate::deadline::expired_tool_result`]).
const EXPIRED_RESULT_START: &str = "Not approved: no decision was taken";

/// How the result of an expired question starts ([`crate::deadline::expired_suspension_result`]).
const UNANSWERED_RESULT_START: &str = "Not answered: the user gave no answer";

/// The result of a question the user declined to answer, without feedback.
const DECLINED_RESULT: &str = "Not answered: the user declined to answer; there is no answer.";

/// How the result of a question declined with feedback starts.
const DECLINED_WITH_FEEDBACK_PREFIX: &str = "Not answered: the user declined to answer, and said: ";

/// The tool-call id of a [`Trace::ToolRan`] for an execution no `tool_end` followed.
pub(crate) const STRAY_EXECUTION: &str = "(executed without a tool_end)";

/// An allowance as compared: scope, tool, pattern and mode (and the id a call it runs names),
/// as the library shows one.
fn allowance_view(a: &ModelAllowance) -> String {
    match &a.pattern {
        Some(glob) => format!(
            "{} ({}): {} path `{glob}` in mode `{}`",
            a.id, a.scope, a.tool, a.mode
        ),
        None => format!("{} ({}): {} in mode `{}`", a.id, a.scope, a.tool, a.mode),
    }
}

/// The session's allowance `a` as the reference holds one: a workspace one named by mode,
/// tool and pattern ([`ModelAllowance::narrowed_workspace_id`]), a path pattern by its glob.
fn model_of(a: &Allowance) -> ModelAllowance {
    let pattern = a.pattern.as_ref().map(|p| match (&p.path, &p.arg) {
        (Some(glob), None) => glob.clone(),
        _ => p.to_string(),
    });
    let id = match a.scope {
        AllowanceScope::Workspace => {
            ModelAllowance::narrowed_workspace_id(&a.mode_id, &a.tool_name, pattern.as_deref())
        }
        _ => a.id.clone(),
    };
    ModelAllowance {
        scope: a.scope,
        mode: a.mode_id.clone(),
        tool: a.tool_name.clone(),
        pattern,
        id,
    }
}

/// What the controller's store does with workspace allowances: found by keeping one for a
/// config no session has (a fingerprint of its own) and revoking it again.
async fn workspace_store(
    controller: &AgentController,
    workspace: &Path,
    root: &Path,
) -> WorkspaceStore {
    let Some(store) = controller.store() else {
        return WorkspaceStore::None;
    };
    let keyed = workspace
        .canonicalize()
        .unwrap_or_else(|_| root.join("workspace"));
    let probe = Allowance::new(AllowanceScope::Workspace, "", "kit-probe", "kit-probe")
        .in_workspace(keyed, "agent-controller-testing-probe");
    match store.save_workspace_allowance(&probe).await {
        Ok(()) => {
            let _ = store.revoke_workspace_allowance(&probe.id).await;
            WorkspaceStore::Keeps
        }
        Err(_) => WorkspaceStore::Drops,
    }
}

/// A waiting tool call as the comparison shows it: run, ids, tool, hash and decision so far.
/// A question waiting for its answer (a call its tool suspended), as the reference holds one:
/// its decision so far (answered, or declined with or without feedback).
fn question_view(s: &crate::session::PendingSuspension, run: usize) -> WaitingCall {
    WaitingCall {
        run,
        tool_call_id: s.tool_call_id().to_owned(),
        tool: s.tool_name().to_owned(),
        decision_id: s.decision_id().to_owned(),
        args_sha256: s.payload().payload_sha256.clone(),
        decided: s.decision().map(|d| match d.outcome {
            Some(DecisionOutcome::Answered) => (DecisionAction::Answered, false),
            _ => (
                DecisionAction::Rejected,
                s.feedback().is_some_and(|f| !f.trim().is_empty()),
            ),
        }),
        allowed_by: None,
        rule: None,
        drift: false,
        deadline: s.payload().terms.deadline_at_ms,
        asks: Some(asked(s.payload())),
        child: s.payload().subagent.as_deref().map(child_origin),
        starts: None,
    }
}

/// What the kit compares of the subagent a waiting call comes from.
fn child_origin(origin: &crate::subagent::SubagentOrigin) -> ChildOrigin {
    ChildOrigin {
        agent_type: origin.agent_type.clone(),
        parent_call_id: origin.tool_call_id.clone(),
    }
}

/// What a suspension the library holds asks, read from its kind and payload: a question's
/// shape from its `selectionMode` (none: free text), any other tool's suspension as the kit's
/// own tool's (its tool name and `payloadSha256` are compared beside).
fn asked(payload: &crate::event::ToolSuspendPayload) -> Ask {
    if payload.kind != SuspensionKind::Question {
        return Ask::Confirm;
    }
    match payload
        .payload
        .get("selectionMode")
        .and_then(|m| m.as_str())
    {
        Some("multi_select") => Ask::MultiSelect,
        Some(_) => Ask::Select,
        None => Ask::FreeText,
    }
}

fn waiting_view(w: &WaitingCall) -> String {
    let decided = match w.decided {
        None => "waiting",
        Some((DecisionAction::Approved, _)) => "approved",
        Some((DecisionAction::Rejected, false)) => "rejected",
        Some((DecisionAction::Rejected, true)) => "rejected with feedback",
        Some((DecisionAction::Answered, _)) => "answered",
    };
    let kind = match w.asks {
        None if w.drift => "call outside the approved plan's files (drift)",
        None => "call",
        Some(Ask::Select) => "select question",
        Some(Ask::MultiSelect) => "multi-select question",
        Some(Ask::FreeText) => "free-text question",
        Some(Ask::Confirm) => "suspension",
    };
    let by = match &w.allowed_by {
        Some(allowance) => format!(" (allowed by {allowance})"),
        None => String::new(),
    };
    let deadline = match w.deadline {
        Some(at) => format!(", deadline {at}"),
        None => String::new(),
    };
    let child = match &w.child {
        Some(origin) => format!(
            " made by subagent {} (call {})",
            origin.agent_type, origin.parent_call_id
        ),
        None => String::new(),
    };
    format!(
        "{} {kind} {} of run {} ({}, sha256 {}{deadline}){child}: {decided}{by}",
        w.decision_id, w.tool_call_id, w.run, w.tool, w.args_sha256
    )
}

/// The first item where two lists differ, with its position (the rest is noise), each item
/// as `shown`.
fn first_difference<T: PartialEq>(
    expected: &[T],
    actual: &[T],
    shown: impl Fn(&T) -> String,
) -> (String, String) {
    let at = expected
        .iter()
        .zip(actual)
        .position(|(e, a)| e != a)
        .unwrap_or(expected.len().min(actual.len()));
    let show = |items: &[T]| match items.get(at) {
        Some(item) => format!("item {} of {}: {}", at + 1, items.len(), shown(item)),
        None => format!("nothing after item {at} of {}", items.len()),
    };
    (show(expected), show(actual))
}

/// Every file under `root` with its contents (a workspace is small: the plan files and what
/// tools write).
fn workspace_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(path),
                _ => {
                    let bytes = std::fs::read(&path).unwrap_or_default();
                    files.insert(path, bytes);
                }
            }
        }
    }
    files
}

fn changed_files(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
) -> String {
    let mut changed: Vec<String> = Vec::new();
    for (path, bytes) in after {
        match before.get(path) {
            None => changed.push(format!("created {}", path.display())),
            Some(old) if old != bytes => changed.push(format!("changed {}", path.display())),
            Some(_) => {}
        }
    }
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        changed.push(format!("removed {}", path.display()));
    }
    changed.join(", ")
}

fn run_outcome(result: Result<RunOutcome, SessionError>) -> Outcome {
    match result {
        Ok(outcome) => Outcome::Run(outcome.state()),
        Err(e) => Outcome::Refused(refusal(&e)),
    }
}

fn refusal(error: &SessionError) -> Refusal {
    match error {
        SessionError::UnknownMode { .. } => Refusal::UnknownMode,
        SessionError::UnknownRun(_) => Refusal::UnknownRun,
        SessionError::NotSuspended(_) => Refusal::NotSuspended,
        SessionError::UnknownToolCall { .. } => Refusal::UnknownToolCall,
        SessionError::AlreadyDecided(_) => Refusal::AlreadyDecided,
        SessionError::Sha256Mismatch { .. }
        | SessionError::ArgsSha256Mismatch { .. }
        | SessionError::PayloadSha256Mismatch { .. } => Refusal::Sha256Mismatch,
        SessionError::InvalidAnswer { .. } => Refusal::InvalidAnswer,
        SessionError::MalformedDecision(_) => Refusal::MalformedDecision,
        SessionError::ConfigChanged(_) => Refusal::ConfigChanged,
        SessionError::TargetNotAllowed { .. } => Refusal::TargetNotAllowed,
        SessionError::EditedPlan(_) => Refusal::EditedPlan,
        SessionError::UnknownSession(_) => Refusal::UnknownSession,
        SessionError::Store(_) | SessionError::NoStore => Refusal::Store,
        SessionError::Expired { .. } => Refusal::Expired,
        SessionError::Quorum(_) => Refusal::Quorum,
        #[allow(unreachable_patterns)]
        _ => Refusal::Other,
    }
}

fn result_kind(result: &str) -> ResultKind {
    if result == super::subagents::CHILD_ANSWER {
        ResultKind::SubagentAnswer
    } else if result.starts_with(EXPIRED_RESULT_START)
        || result.starts_with(UNANSWERED_RESULT_START)
    {
        ResultKind::Expired
    } else if result == crate::deadline::ANSWERED_NOT_RESUMED_RESULT {
        ResultKind::AnsweredNotResumed
    } else if result == DECLINED_RESULT {
        ResultKind::Declined
    } else if result.starts_with(DECLINED_WITH_FEEDBACK_PREFIX) {
        ResultKind::DeclinedWithFeedback
    } else if result == APPROVED_NOT_RUN_RESULT {
        ResultKind::ApprovedNotRun
    } else if result == TOOL_REJECTED_RESULT {
        ResultKind::ToolRejected
    } else if result
        .strip_prefix(TOOL_REJECTED_RESULT)
        .is_some_and(|rest| rest.starts_with(TOOL_FEEDBACK_PREFIX))
    {
        ResultKind::ToolRejectedWithFeedback
    } else if result.starts_with(&format!("Not executed: hook `{KIT_HOOK}` denied it")) {
        ResultKind::HookDenied
    } else if result.starts_with("Not executed: ") && result.contains("(planScope `enforce`)") {
        ResultKind::OutsidePlan
    } else if result.starts_with("Not executed: rule ") {
        ResultKind::Denied
    } else if result.starts_with(APPROVED_RESULT) {
        ResultKind::Approved
    } else if result == REJECTED_RESULT {
        ResultKind::Rejected
    } else if result.starts_with(REJECTED_WITH_FEEDBACK_PREFIX) {
        ResultKind::RejectedWithFeedback
    } else {
        ResultKind::Other
    }
}

fn divergence(
    aspect: Aspect,
    op: &str,
    expected: impl fmt::Display,
    actual: impl fmt::Display,
) -> Divergence {
    Divergence {
        aspect,
        op: op.to_owned(),
        expected: expected.to_string(),
        actual: actual.to_string(),
    }
}

fn panicked(op: &str, panic: &Box<dyn std::any::Any + Send>) -> Divergence {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned());
    divergence(
        Aspect::Panic,
        op,
        "no panic",
        format!("panicked: {message}"),
    )
}

/// Whether the kit can observe `controller`: it works in the kit's `workspace` and every tool
/// it registers went through the kit's spy (`spied`). Otherwise the kit would report tool calls
/// that ran as not run, or files the workspace never had: say what to do instead.
fn observable(
    controller: &AgentController,
    workspace: &Path,
    spied: &[String],
) -> Result<(), HarnessError> {
    const HOW: &str = "build it from the Setup the kit passes (setup.builder(), \
        setup.builder_with(your_model_layer), setup.builder_for(your_graph, model)) or pass \
        your own builder through setup.observe(builder)";
    let theirs = controller.workspace();
    let same = theirs == workspace
        || theirs
            .canonicalize()
            .is_ok_and(|dir| dir == workspace.canonicalize().unwrap_or_default());
    if !same {
        return Err(HarnessError::Unobservable(format!(
            "it works in {}, not in the kit's temporary workspace {} (the kit writes its plan \
             files there and watches it for writes): {HOW}, and do not set .workspace(...) \
             after it",
            theirs.display(),
            workspace.display()
        )));
    }
    // The crate's `submit_plan`, when the builder registered it, is not spied: a run never
    // executes it (its plan pends), and only it may take the name.
    let unseen: Vec<&str> = controller
        .registry()
        .names()
        .filter(|name| *name != SUBMIT_PLAN && !spied.iter().any(|s| s == name))
        .collect();
    if !unseen.is_empty() {
        return Err(HarnessError::Unobservable(format!(
            "its tools {unseen:?} were not registered through the kit's spy, so the kit cannot \
             see them run: {HOW}"
        )));
    }
    Ok(())
}

/// `facts` completed with (or checked against) the controller's tools and step limit.
fn controller_facts(
    facts: Arc<ConfigFacts>,
    controller: &AgentController,
) -> Result<Arc<ConfigFacts>, HarnessError> {
    let names: Vec<String> = controller.registry().names().map(str::to_owned).collect();
    let writing = super::facts::writing_tools(controller.registry());
    let max_steps = controller.max_steps();
    let max_revisions = controller.max_revisions();
    match facts.registered() {
        None => Ok(Arc::new(
            (*facts)
                .clone()
                .with_tools(names)
                .with_writing_tools(writing)
                .with_max_steps(max_steps)
                .with_max_revisions(max_revisions),
        )),
        Some(named)
            if named == names.as_slice()
                && facts.writing_tools() == writing.as_slice()
                && facts.max_steps() == max_steps
                && facts.max_revisions() == max_revisions =>
        {
            Ok(facts)
        }
        Some(named) => Err(HarnessError::Build(format!(
            "the reference expects tools {named:?} (writing: {:?}), a step limit of {} and a revision limit of {}, the controller has {names:?} (writing: {writing:?}), {max_steps} and {max_revisions}",
            facts.writing_tools(),
            facts.max_steps(),
            facts.max_revisions()
        ))),
    }
}
