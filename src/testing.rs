//! Property-testing support (cargo feature `testing`): strategies for mode configs, a reference
//! model of a session, and a one-call check of *your* controller against both.
//!
//! The pieces, from the config to the running session:
//!
//! - [`valid_configs`] generates arbitrary valid configs as [`ConfigSpec`]s (render them with
//!   [`ConfigSpec::to_toml`]); [`invalid_configs`] breaks one with a known [`Mutation`] and pairs
//!   it with the [`crate::config::ConfigErrorKind`] loading it must give.
//! - [`ConfigFacts`] reads what a config means (default mode, hand-over targets, tool lists)
//!   straight from the TOML text, independently of [`crate::config`].
//! - [`ReferenceSession`] is a small pure model of a session: the current mode, the pending
//!   decision (tool call id, target fixed at submit time, SHA-256), the tool calls waiting for
//!   approval (`requireApproval`) with the decisions taken on them, the allowances in force
//!   (each by scope, mode, tool and pattern: [`ModelAllowance`]), and the run state. Each [`Op`] (a message, a `submit_plan` call on a valid or refused
//!   file, a call with a path inside or outside `src/` ([`CallPath`]), a decision on a plan or
//!   on a waiting tool call (an "always allow" of each scope, narrowed to [`NARROWING`] or
//!   not), the revocation of an allowance, an abort, a manual switch, a call to
//!   a tool outside the mode, a process restart, a new session on the same controller, time
//!   passing to just before or to a deadline, ...) becomes a
//!   [`Step`] saying what the real session must return and emit, in order.
//!   [`ReferenceSession::ops`] is a strategy for the operations that make sense in the current
//!   state; [`sessions`] a strategy for whole operation sequences.
//! - [`Harness`] drives a real [`crate::Session`] with a scripted model in a temporary
//!   workspace, performs each step and reports the first [`Divergence`]. Every registered
//!   tool is wrapped by a spy, so a tool counts as executed exactly when its `execute` ran,
//!   and the workspace is compared before and after every step in which no tool ran.
//! - [`explore`] walks every reachable state (mode, pending decision, run state) breadth first
//!   and performs every operation of [`operations`] from each; [`walk_edges`] fires every edge
//!   `(from, cause, to)` of the transition relation after a shortest path from the default mode.
//!
//! # Checking your controller
//!
//! [`check_controller`] (or a [`Check`], for options and your own invariants) explores every
//! state, walks every edge and runs the random state-machine test (operation sequences on the
//! reference model and on your controller, compared after every step) on a config file. You
//! give it the config and the way you build your controller from a [`Setup`]: the config's
//! mode graph (or one your code built: [`Setup::builder_for`]), the kit's scripted model (wrap
//! it in your own model layer if you have one) and a temporary workspace; a builder you made
//! yourself goes through [`Setup::observe`]. Add what your harness adds: your tools (the kit calls each of them, and
//! a name no tool has, in every mode), your step limit, your session store (with one, the
//! sequences also restart the process and restore the session).
//!
//! ```
//! use agent_controller::ToolRegistry;
//! use agent_controller::testing::check_controller;
//!
//! let report = check_controller("config/modes.toml", |setup| {
//!     setup.builder().tools(ToolRegistry::with_workspace_tools()).build()
//! })?;
//! assert!(report.is_ok());
//! assert_eq!(report.edges.total(), 14); // plan: approve + 4 ways not to, 4 of questions; build: 3 of questions; 2 manual switches
//! println!("{report}");
//! // config/modes.toml: explored N states, M transitions, all checked
//! // config/modes.toml: 256 random cases passed (seed S), edges covered: 14/14
//! # Ok::<(), agent_controller::testing::CheckError>(())
//! ```
//!
//! Call it from a plain `#[test]`, not from inside an async runtime. The case count follows
//! proptest's (`PROPTEST_CASES`); a failure prints the seed ([`Check::seed`] replays it) and is
//! kept in a regression file of the check's own ([`REGRESSIONS_DIR`]), with modes named by id and
//! only the first item that differs shown, and a command that replays it. A [`CheckError`]
//! prints the same readable report with `{}` and `{:?}`, so `?` in a test shows it. The same check runs from the command line, with the built-in
//! tools: `agent-controller verify CONFIG`.
//!
//! # Deadlines
//!
//! A config's `approvalTimeout`s are checked on the kit's clock, which starts at
//! [`CLOCK_START_MS`] and moves only when an operation says so ([`Op::Wait`]: to one
//! millisecond before the earliest deadline of what waits, to that deadline, or an hour on).
//! The reference knows each plan's and waiting tool call's deadline (compared with the
//! `deadlineAtMs` the session records), applies the expiry where the session does (first thing
//! in every host call that looks at the session, in a restore, in
//! [`crate::Session::expire_if_due`]; not in a resume with malformed data, nor in a switch to
//! the current mode) and refuses a decision on what expired. The exploration's states include
//! where the clock stands before the deadline (in time, one millisecond before, due), and with
//! a store it restarts around time passing as around decisions. `onTimeout = "abort"` is
//! modelled (the run ends `aborted`); sessions refuse it until they apply it. The controller
//! must read the kit's clock: do not set `.clock(...)` on the builder a [`Setup`] gives you.
//!
//! # Allowances
//!
//! Decisions on waiting tool calls "always allow" with each scope ([`crate::allowance`]): `mode`
//! (the default; ends at any change of mode), `session` (kept across mode changes, applying
//! only while the session is in the mode it was given in) and `workspace` (kept in the store:
//! applying in later sessions of the same workspace and config, in its mode; refused without a
//! store, and allowing nothing with a store that keeps none: [`WorkspaceStore`]). The harness
//! compares the allowances in force (scope, tool, mode, pattern) after every step and the
//! allowance a call it ran names (`allowedBy`); restarts ([`Op::Restart`]) and new sessions
//! ([`Op::NewSession`]) show what carries over. [`check_other_workspace`] drives a second
//! controller over the same store in another workspace, where none of them may apply.
//!
//! An "always allow" of scope `mode` or `session` may be narrowed to [`NARROWING`] (`src/**`):
//! the kit's calls of a tool that takes a path ([`ConfigFacts::path_tools`]) carry one of
//! [`CallPath`] (`src/a.txt`, `.env`, `src/../.env`), and a narrowed allowance runs only the
//! calls whose path leads into `src/`. [`Op::Revoke`] revokes the first or the last allowance
//! in force, or an id nobody gave ([`crate::Session::revoke_allowance`]): a revoked workspace
//! allowance is gone from the store, so no restart or new session has it. Not generated: a
//! narrowed `workspace` allowance (a store lists those in an order of its own, which decides
//! which of two covering allowances a call names) and patterns on other arguments.
//!
//! # An approved plan's files
//!
//! The kit's ordinary plans declare no files and bind nothing once approved. One more plan,
//! [`SCOPED_PLAN`] ([`plan_declares_files`]: a `## Files` section naming [`PLAN_FILES`], where
//! [`CallPath::Src`] leads), is submitted by its own operation, [`Op::submit_scoped`], so that
//! which plan waits splits no state but those reached through it; the explorer tries it, and a
//! write inside those files and one outside, only where some mode hands over to a mode that
//! offers a tool writing the file at its `path`. The payload of a plan that waits must show the
//! files it declares. Approved (not as the user's edit, which declares none), the plan that
//! declares them gives the mode it hands over to an allowance of scope `plan`, listed with the
//! others and ended by the next mode change or the next approved plan, unless the planning
//! mode's `planScope` is `off`. While it is in force, a call of a tool that writes
//! ([`ConfigFacts::writing_tools`]) is bound: one of a tool that writes the file at its `path`
//! ([`ConfigFacts::path_writers`]) with a path leading there is inside, and runs where
//! `requireApproval` would hold it (its record names the plan's allowance); any other write is
//! outside: under `ask` it waits for approval as drift (the payload's `drift`), whatever else
//! would let it run; under `enforce` it is refused unasked ([`ResultKind::OutsidePlan`]). A
//! `deny` rule still refuses. A child's writes are bound as its parent's are. The explorer
//! counts the states it reaches with a plan's
//! allowance in force and with a write waiting as drift ([`Exploration::scoped`],
//! [`Exploration::drifting`]).
//!
//! # What the kit cannot see
//!
//! The kit compares what it can observe: the session's events, mode, pending decision and run
//! state, every model call (mode, tools offered, notices), every `execute` of a registered tool
//! (through its spy), and the temporary workspace's files in steps in which no tool ran. So it
//! cannot see, and a passing check says nothing about:
//!
//! - **Side effects outside the tool registry**: what your host, your model layer or anything
//!   else does without calling a registered tool's `execute` (network calls, databases,
//!   processes, files outside the temporary workspace). A model layer that runs a tool of its own
//!   before each call, not through the registry, goes unseen.
//! - **What a tool does on its own**: a tool whose `execute` ran where it was allowed is trusted to
//!   do only what its call asked. One that writes while declared read-only
//!   ([`crate::tool::ToolAccess`]), writes outside the workspace, or leaves a background task that
//!   writes later is seen only if the write lands in the workspace in a step in which no tool ran.
//! - **A controller it cannot observe** is refused, not checked: the spies, the workspace and
//!   the clock are installed by [`Setup::builder`], [`Setup::builder_with`],
//!   [`Setup::builder_for`] (your own mode graph) and [`Setup::observe`] (a builder you made);
//!   a controller built another way fails the check with [`HarnessError::Unobservable`], which
//!   says what to change. A model layer that answers without passing requests on to
//!   [`Setup::model`] shows as a divergence that says so.
//! - **What your tool layers hand on**: the spy sits outside the layers you wrap your tools in,
//!   so it sees the call the session made (tool, mode), not what your layer passes to the tool
//!   (a layer that hands the tool another mode id, or runs it twice, goes unseen).
//! - **Listing pending decisions**: a check drives one session by its own ids and never calls
//!   `list_pending`; a store whose listing leaves a decision out is what [`StoreConformance`]
//!   catches.
//! - **Several hosts at once**: a check drives one session at a time; the store's side of racing
//!   hosts is what [`StoreConformance`] checks.
//!
//!
//! # Checking your store
//!
//! A [`crate::SessionStore`] of your own must keep the contract the controller relies on:
//! [`StoreConformance`] (or [`store_conformance`]) checks compare-and-swap (also with racing savers
//! and racing deciders: exactly one wins), read-your-writes across handles, `list_pending` (each
//! pending plan and waiting tool call once, oldest first; with [`StoreConformance::raw_records`],
//! unreadable records reported apart and older records migrated), interrupted runs and leases, and
//! `expire`. Run it in a `#[tokio::test]`; `?` prints the report:
//!
//! ```
//! use std::sync::Arc;
//! use agent_controller::MemoryStore;
//! use agent_controller::testing::store_conformance;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = Arc::new(MemoryStore::new()); // your store here
//! let report = store_conformance(move || store.clone()).await?;
//! println!("{report}");
//! // store conformance: 7 passed, 0 failed, 2 skipped
//! //   ok    read your writes
//! //   ok    compare-and-swap
//! //   ...
//! # Ok::<(), agent_controller::testing::ConformanceFailure>(())
//! # }).unwrap();
//! ```
//!
//!
//! # Your own state machine test
//!
//! With `proptest-state-machine`, use [`ReferenceSession`] as the reference state
//! ([`ReferenceSession::ops`] for the transitions, [`ReferenceSession::can_apply`] as the
//! preconditions, [`ReferenceSession::apply`] to move it) and a [`Harness`] as the system under
//! test ([`Harness::step`] after each transition); the crate's `tests/it/transitions.rs` does this
//! for generated configs.

mod ask;
mod configs;
mod conformance;
mod edges;
mod explore;
mod facts;
mod harness;
mod hooks;
mod quorum;
mod reference;
mod regression_file;
mod scope;
mod subagents;

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::collection::SizeRange;
use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngSeed, TestCaseError, TestError, TestRunner,
};
use proptest_state_machine::Sequential;

pub use self::ask::{AnswerChoice, Ask, CONFIRM_TOOL, ConfirmTool, QUESTION, QUESTION_OPTIONS};
pub use self::configs::{
    ConfigLimits, ConfigSpec, InvalidConfig, MAX_MODES, ModeSpec, Mutation, invalid_configs,
    realistic_configs, valid_configs,
};
pub use self::conformance::{
    ConformanceCheck, ConformanceFailure, ConformanceOutcome, ConformanceReport, StoreConformance,
    store_conformance,
};
pub use self::edges::{Cause, Edge, EdgeReport, Miss, edges, walk_edges};
pub use self::explore::{Counterexample, Exploration, explore, explore_up_to, operations};
pub use self::facts::{
    Approvals, ConfigFacts, FactsError, ModeFacts, SubagentFacts, TimeoutRule, UNKNOWN_TOOL,
    WorkspaceStore,
};
pub use self::harness::{Aspect, Divergence, Harness, HarnessError, Invariant, Setup};
pub use self::hooks::{HookAnswer, HookScript, KIT_HOOK, KIT_HOOK_REASON, is_scripted_tool};
pub use self::quorum::{KIT_APPROVER, QuorumStep, approver};
pub use self::reference::{
    Action, CLOCK_START_MS, Call, CallPath, Decided, EditedPlan, Expected, Feedback,
    ModelAllowance, ModelTask, NARROWING, Offered, Op, Outcome, PLAN_COUNT, PendingPlan, PlanFile,
    ReferenceSession, Refusal, Reply, ResultKind, Revision, RevokeChoice, RunRef, ScriptedCall,
    ShaChoice, Step, Subject, TaskCall, Then, Trace, Until, WaitingCall, edited_plan_sha256,
    edited_plan_text, plan_sha256, plan_text, tool_args_sha256,
};
pub use self::reference::{PLAN_FILES, SCOPED_PLAN, plan_declares_files};
pub use self::subagents::{
    CHILD_ANSWER, ChildOrigin, ChildStep, SUBAGENT_TASK, SubagentCall, UNKNOWN_SUBAGENT,
};
use crate::config::{self, ConfigError};
use crate::controller::AgentController;
use crate::mode::ModeGraph;
use crate::session::Session;

/// The directory where [`Check`] keeps failing cases by default (relative to the working
/// directory, which is the package root under `cargo test`): one file per check,
/// `NAME.txt`, named by the test that runs it (the name `cargo test` gives its thread, `::` as
/// `-`) or, outside a test, by the config file's name. They are replayed first on every later
/// run of that check.
pub const REGRESSIONS_DIR: &str = "proptest-regressions/agent-controller-check";

/// Where a [`Check`] keeps failing cases.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Regressions {
    /// A file of its own in [`REGRESSIONS_DIR`], named by the test or the config.
    Named,
    /// The file the user named.
    File(PathBuf),
    /// Nowhere.
    Off,
}

/// A check of your controller on one config: the exploration of every state ([`explore`]),
/// the edge walk ([`walk_edges`]) and the random state-machine test, with your invariants.
///
/// ```
/// use agent_controller::ToolRegistry;
/// use agent_controller::testing::Check;
///
/// let report = Check::new("config/modes.toml")
///     .cases(32)
///     .seed(7)
///     .without_regressions()
///     .invariant(|session, reference| {
///         // Your own rule, after every step: here, a pending plan always waits in `plan`.
///         match session.pending_plan() {
///             Some(_) if session.mode().id() != "plan" => Err("a plan pending outside plan".into()),
///             _ => Ok(()),
///         }
///     })
///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
/// assert!(report.is_ok());
/// println!("{report}");
/// # Ok::<(), agent_controller::testing::CheckError>(())
/// ```
#[derive(Clone)]
pub struct Check {
    config: PathBuf,
    /// The merged layers to check instead of the file at `config` alone ([`Check::layers`]).
    layers: Option<Arc<config::Layers>>,
    cases: u32,
    max_ops: usize,
    seed: Option<u64>,
    regressions: Regressions,
    invariants: Vec<Invariant>,
    max_states: Option<usize>,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Check")
            .field("config", &self.config)
            .field("layers", &self.layers.is_some())
            .field("cases", &self.cases)
            .field("max_ops", &self.max_ops)
            .field("seed", &self.seed)
            .field("regressions", &self.regressions)
            .field("invariants", &self.invariants.len())
            .field("max_states", &self.max_states)
            .finish()
    }
}

impl Check {
    /// A check of the config file at `config`: proptest's case count (256 unless
    /// `PROPTEST_CASES` says otherwise), sequences of up to 32 operations, a random seed
    /// (`PROPTEST_RNG_SEED` fixes it), failures kept in a file of the check's own in
    /// [`REGRESSIONS_DIR`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::Check;
    /// let report = Check::new("config/modes.toml")
    ///     .cases(4)
    ///     .without_regressions()
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert!(report.is_ok());
    /// assert_eq!(report.cases, 4);
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn new(config: impl AsRef<Path>) -> Self {
        let defaults = Config::default();
        Self {
            config: config.as_ref().to_owned(),
            layers: None,
            cases: defaults.cases,
            max_ops: 32,
            seed: match defaults.rng_seed {
                RngSeed::Fixed(seed) => Some(seed),
                RngSeed::Random => None,
            },
            regressions: Regressions::Named,
            invariants: Vec::new(),
            max_states: None,
        }
    }

    /// A check of the merged config `layers` (as [`config::ConfigSources::load`] reads it: the
    /// user's, the project's, its local and the managed file), the config every host runs, with
    /// the defaults of [`Check::new`]. The real controller gets the merged graph
    /// ([`config::Layers::graph`], the managed rules marked), the reference model the merged
    /// text; the report and the regression file go by the project's file
    /// ([`config::Layers::origin`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::config::ConfigSources;
    /// use agent_controller::testing::Check;
    /// let dir = tempfile::tempdir()?;
    /// let project = dir.path().join("modes.toml");
    /// std::fs::copy("config/modes.toml", &project)?;
    /// // A local file beside it: read with the project's, as every command reads them.
    /// std::fs::write(dir.path().join("modes.local.toml"), "[[modes]]\nid = \"build\"\nname = \"Mine\"\n")?;
    /// let layers = ConfigSources::new(&project).no_user_config().managed_file(None).load()?;
    /// let report = Check::layers(layers)
    ///     .cases(2)
    ///     .without_regressions()
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert!(report.is_ok(), "{report}");
    /// assert_eq!(report.config, project.display().to_string());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn layers(layers: config::Layers) -> Self {
        let mut check = Self::new(layers.origin());
        check.layers = Some(Arc::new(layers));
        check
    }

    /// Random operation sequences to run.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::Check;
    /// let report = Check::new("config/modes.toml")
    ///     .cases(2)
    ///     .without_regressions()
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert_eq!(report.cases, 2);
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases;
        self
    }

    /// Bounds the exploration: it expands at most `max_states` states, the nearest to the start
    /// first, and the report says when more were left unexplored
    /// ([`Exploration::complete`]). Unbounded by default; a generated config of many modes can
    /// have thousands of states.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::Check;
    ///
    /// let report = Check::new("config/modes.toml")
    ///     .max_states(3)
    ///     .cases(8)
    ///     .without_regressions()
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert!(!report.exploration.complete);
    /// assert!(report.to_string().contains("more states were not explored"));
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn max_states(mut self, max_states: usize) -> Self {
        self.max_states = Some(max_states.max(1));
        self
    }

    /// The longest random operation sequence.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::Check;
    /// let report = Check::new("config/modes.toml")
    ///     .cases(2)
    ///     .max_ops(4)
    ///     .without_regressions()
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert!(report.is_ok());
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn max_ops(mut self, max_ops: usize) -> Self {
        self.max_ops = max_ops.max(1);
        self
    }

    /// The seed of the random test: the report prints the one used, so a failure can be
    /// replayed with it.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::Check;
    /// let report = Check::new("config/modes.toml")
    ///     .cases(2)
    ///     .seed(42)
    ///     .without_regressions()
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert_eq!(report.seed, 42);
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Keep failing cases in `file` (proptest's regression format), replayed first next time.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::Check;
    /// let dir = tempfile::tempdir()?;
    /// let report = Check::new("config/modes.toml")
    ///     .cases(2)
    ///     .regressions(dir.path().join("modes.txt"))
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert!(report.is_ok());
    /// assert!(!dir.path().join("modes.txt").exists(), "nothing failed, nothing kept");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn regressions(mut self, file: impl Into<PathBuf>) -> Self {
        self.regressions = Regressions::File(file.into());
        self
    }

    /// Keep no regression file.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::Check;
    /// let report = Check::new("config/modes.toml")
    ///     .cases(2)
    ///     .without_regressions()
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert!(report.is_ok());
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn without_regressions(mut self) -> Self {
        self.regressions = Regressions::Off;
        self
    }

    /// Adds a check of your own, called with the real session and the reference model after
    /// the start and after every step of the exploration, the edge walk and the random test
    /// (as proptest-state-machine's `check_invariants` and Hypothesis' `@invariant`).
    /// `Err(message)` fails the check there.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::{Check, CheckError};
    /// let check = Check::new("config/modes.toml").cases(2).without_regressions();
    /// // The tools the real session always allows are the reference model's.
    /// let report = check
    ///     .clone()
    ///     .invariant(|session, reference| {
    ///         let (real, expected) = (session.always_allowed(), reference.always_allowed());
    ///         if real == expected { Ok(()) } else { Err(format!("allowed {real:?}, expected {expected:?}")) }
    ///     })
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert!(report.is_ok());
    /// // An invariant that cannot hold fails the check.
    /// let failing = check
    ///     .invariant(|_, _| Err("never".to_owned()))
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build());
    /// assert!(matches!(failing, Err(CheckError::Failed(_))));
    /// # Ok::<(), CheckError>(())
    /// ```
    pub fn invariant(
        mut self,
        check: impl Fn(&Session, &ReferenceSession) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.invariants.push(Arc::new(check));
        self
    }

    /// Runs the check. `build` receives a [`Setup`] (the config's mode graph, the kit's
    /// scripted model and a temporary workspace) and builds your controller from it:
    /// `setup.builder()` and your tools, step limit, store; or `setup.builder_with(model)`
    /// with your model layer around `setup.model()`. It is called once per harness (a few
    /// times per check). With a session store, the random sequences and the exploration also
    /// restart the process ([`Op::Restart`]): a restored session must be the same.
    ///
    /// Every part runs to its end (an edge-walk miss does not stop the random test).
    ///
    /// # Errors
    /// [`CheckError::Config`] for an invalid config, [`CheckError::Facts`] when the reference
    /// cannot read it, [`CheckError::Setup`] when `build` or the workspace fails, and
    /// [`CheckError::Failed`] with the whole report when anything diverged.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::{Check, CheckError};
    /// let check = Check::new("config/modes.toml").cases(2).without_regressions();
    /// assert!(check.run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?.is_ok());
    /// // Without the workspace tools the controller cannot be built: a setup error.
    /// assert!(matches!(check.run(|setup| setup.builder().build()), Err(CheckError::Setup(_))));
    /// # Ok::<(), CheckError>(())
    /// ```
    pub fn run<F, E>(&self, build: F) -> Result<CheckReport, CheckError>
    where
        F: Fn(Setup) -> Result<AgentController, E>,
        E: fmt::Display,
    {
        let path = &self.config;
        let (graph, text) = self.load()?;
        let facts = Arc::new(ConfigFacts::from_toml(&text)?);

        let mut harness = self.harness(&graph, &facts, &build)?;
        let facts = harness.facts().clone();
        let mut exploration = explore_up_to(&mut harness, self.max_states);
        if let Some(found) = exploration.counterexample.take() {
            exploration.counterexample = Some(shrunk(&mut harness, found));
        }
        let edges = walk_edges(&mut harness);
        drop(harness);

        let seed = self.seed.unwrap_or_else(random_seed);
        let test = test_name();
        let random = self.property(&graph, &facts, seed, &build, test.as_deref())?;
        let report = CheckReport {
            config: path.display().to_string(),
            exploration,
            edges,
            cases: self.cases,
            seed,
            counterexample: random.as_ref().map(|r| r.counterexample.clone()),
            replays: random.as_ref().is_none_or(|r| r.replays),
            failed_case: random.map(|r| r.failed_case),
            test,
        };
        if report.is_ok() {
            Ok(report)
        } else {
            Err(CheckError::Failed(Box::new(report)))
        }
    }

    /// Replays `counterexample` (from a [`CheckReport`]: the exploration's, an edge walk's
    /// [`Miss::Diverged`] or the random test's) on a fresh controller that `build` builds, and
    /// returns the divergence it shows now, or `None` when it passes (a fix works).
    ///
    /// # Errors
    /// As [`Check::run`], and [`CheckError::Setup`] when the counterexample starts in a mode
    /// the config does not have.
    pub fn replay<F, E>(
        &self,
        counterexample: &Counterexample,
        build: F,
    ) -> Result<Option<Divergence>, CheckError>
    where
        F: Fn(Setup) -> Result<AgentController, E>,
        E: fmt::Display,
    {
        let (graph, text) = self.load()?;
        let facts = Arc::new(ConfigFacts::from_toml(&text)?);
        let mut harness = self.harness(&graph, &facts, &build)?;
        let facts = harness.facts().clone();
        let start = facts.index_of(&counterexample.start).ok_or_else(|| {
            HarnessError::Build(format!(
                "the counterexample starts in mode `{}`, which {} does not have",
                counterexample.start,
                self.config.display()
            ))
        })?;
        let start = (start != facts.default_mode()).then_some(start);
        let restarts = harness.controller().store().is_some();
        let initial = ReferenceSession::new(facts, start)
            .with_restarts(restarts)
            .with_hooks(counterexample.hooks.clone());
        Ok(harness
            .run(&initial, &counterexample.ops)
            .err()
            .map(|(_, d)| d))
    }

    /// The config checked: its graph and its text (the merged layers', or the file's).
    fn load(&self) -> Result<(ModeGraph, String), CheckError> {
        match &self.layers {
            Some(layers) => Ok((layers.graph()?, layers.text().to_owned())),
            None => Ok((config::load(&self.config)?, read_config_text(&self.config)?)),
        }
    }

    /// The regression file of this check, if it keeps one.
    fn regression_file(&self, test: Option<&str>) -> Option<PathBuf> {
        match &self.regressions {
            Regressions::Off => None,
            Regressions::File(file) => Some(file.clone()),
            Regressions::Named => {
                let name = match test {
                    Some(test) => test.replace("::", "-"),
                    None => self
                        .config
                        .file_name()
                        .map_or_else(|| "check".to_owned(), |n| n.to_string_lossy().into_owned()),
                };
                let name: String = name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                Some(Path::new(REGRESSIONS_DIR).join(format!("{name}.txt")))
            }
        }
    }

    fn harness<F, E>(
        &self,
        graph: &ModeGraph,
        facts: &Arc<ConfigFacts>,
        build: &F,
    ) -> Result<Harness, HarnessError>
    where
        F: Fn(Setup) -> Result<AgentController, E>,
        E: fmt::Display,
    {
        let mut harness = Harness::new(graph.clone(), facts.clone(), build)?;
        for check in &self.invariants {
            harness.invariant(check.clone());
        }
        Ok(harness)
    }

    /// The random state-machine test; a failure comes back shrunk, without the operations it
    /// does not need, as a counterexample.
    fn property<F, E>(
        &self,
        graph: &ModeGraph,
        facts: &Arc<ConfigFacts>,
        seed: u64,
        build: &F,
        test: Option<&str>,
    ) -> Result<Option<RandomFailure>, CheckError>
    where
        F: Fn(Setup) -> Result<AgentController, E>,
        E: fmt::Display,
    {
        // One controller and workspace for all cases: each case starts a fresh session.
        let harness = RefCell::new(self.harness(graph, facts, build)?);
        // A controller with a store must survive restarts in any state.
        let restarts = harness.borrow().controller().store().is_some();
        let strategy = sessions(facts, self.max_ops, restarts);
        if let Some(file) = self.regression_file(test) {
            regression_file::check(&file).map_err(|reason| CheckError::Regressions {
                path: file.display().to_string(),
                reason,
            })?;
        }
        let persistence = self.regression_file(test).map(|file| {
            // proptest wants a `'static` path: one small string per check.
            let file: &'static str = Box::leak(file.display().to_string().into_boxed_str());
            Box::new(FileFailurePersistence::Direct(file)) as _
        });
        let mut runner = TestRunner::new(Config {
            cases: self.cases,
            failure_persistence: persistence,
            rng_seed: RngSeed::Fixed(seed),
            ..Config::default()
        });
        // Every failing case and how it diverged, for a failure that does not replay alone.
        let failures: RefCell<Vec<(usize, Vec<Op>, Divergence)>> = RefCell::new(Vec::new());
        // Cases run until the first failure (shrinking runs more after it).
        let run = AtomicUsize::new(0);
        let first_failed = AtomicUsize::new(0);
        let result = runner.run(&strategy, |(initial, ops, seen)| {
            let n = run.fetch_add(1, Ordering::SeqCst) + 1;
            run_case(&mut harness.borrow_mut(), &initial, &ops, seen.as_deref()).map_err(|e| {
                let _ = first_failed.compare_exchange(0, n, Ordering::SeqCst, Ordering::SeqCst);
                failures
                    .borrow_mut()
                    .push((initial.mode(), ops.clone(), e.clone()));
                TestCaseError::fail(e.to_string())
            })
        });
        let failed_case = first_failed.load(Ordering::SeqCst);
        let (initial, ops) = match result {
            Ok(()) => return Ok(None),
            Err(TestError::Fail(_, (initial, ops, _))) => (initial, ops),
            Err(TestError::Abort(reason)) => {
                return Err(CheckError::Stopped(reason.to_string()));
            }
        };
        // Replay the shrunk case on a fresh controller, then drop the operations it does not
        // need (no-ops the shrinker left, steps before an earlier divergence).
        let mut fresh = self.harness(graph, facts, build)?;
        let start = facts.id(initial.mode()).to_owned();
        let Err((at, divergence)) = fresh.run(&initial, &ops) else {
            // It depends on what earlier cases left in the shared controller: keep it as found.
            let divergence = failures
                .into_inner()
                .into_iter()
                .rev()
                .find(|(mode, found, _)| *mode == initial.mode() && *found == ops)
                .map_or_else(
                    || Divergence {
                        aspect: harness::Aspect::Panic,
                        op: "the case".to_owned(),
                        expected: "the case to pass".to_owned(),
                        actual: "it failed, and its divergence was not kept".to_owned(),
                    },
                    |(_, _, d)| d,
                );
            return Ok(Some(RandomFailure {
                counterexample: Counterexample {
                    start,
                    ops,
                    divergence,
                    hooks: initial.hooks().clone(),
                },
                replays: false,
                failed_case,
            }));
        };
        let mut ops = ops;
        ops.truncate(at.map_or(0, |i| i + 1));
        let (ops, divergence) = without_unneeded_ops(&mut fresh, &initial, ops, divergence);
        Ok(Some(RandomFailure {
            counterexample: Counterexample {
                start,
                ops,
                divergence,
                hooks: initial.hooks().clone(),
            },
            replays: true,
            failed_case,
        }))
    }
}

/// The random test's failure: the counterexample, and whether it fails alone on a fresh
/// controller.
struct RandomFailure {
    counterexample: Counterexample,
    replays: bool,
    failed_case: usize,
}

/// The name of the test running this thread: `cargo test` names each test's thread by the
/// test's path (also with `--test-threads=1`); `None` on the main thread (the CLI).
fn test_name() -> Option<String> {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(str::to_owned)
}

/// `found` (from the exploration, which starts in the default mode) without the operations it
/// does not need, replayed on `harness`.
fn shrunk(harness: &mut Harness, found: Counterexample) -> Counterexample {
    let restarts = harness.controller().store().is_some();
    let initial = ReferenceSession::new(harness.facts().clone(), None).with_restarts(restarts);
    let (ops, divergence) = without_unneeded_ops(harness, &initial, found.ops, found.divergence);
    Counterexample {
        start: found.start,
        ops,
        divergence,
        hooks: found.hooks,
    }
}

/// Removes, one at a time from the end, every operation without which the sequence still
/// diverges in the same way (the same aspect).
fn without_unneeded_ops(
    harness: &mut Harness,
    initial: &ReferenceSession,
    mut ops: Vec<Op>,
    mut divergence: Divergence,
) -> (Vec<Op>, Divergence) {
    let mut i = ops.len();
    while i > 0 {
        i -= 1;
        let mut shorter = ops.clone();
        shorter.remove(i);
        if let Err((Some(at), d)) = harness.run(initial, &shorter)
            && d.aspect == divergence.aspect
        {
            shorter.truncate(at + 1);
            ops = shorter;
            divergence = d;
            i = i.min(ops.len());
        }
    }
    (ops, divergence)
}

/// A fresh seed: std's randomly keyed hasher over the time.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    hasher.finish()
}

/// What a [`Check`] did: the exploration, the edge walk and the random test, each with what
/// failed in it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckReport {
    /// The config file checked.
    pub config: String,
    /// The exploration of every state.
    pub exploration: Exploration,
    /// The edge walk.
    pub edges: EdgeReport,
    /// The number of random operation sequences run.
    pub cases: u32,
    /// The seed of the random test ([`Check::seed`] replays it).
    pub seed: u64,
    /// The random test's shrunk failure, if it failed.
    pub counterexample: Option<Counterexample>,
    /// Whether the random test's failure fails again alone, on a fresh controller. `false`
    /// when it failed only after the cases before it (in the controller all cases share):
    /// then `counterexample` is the case as found, not shrunk further.
    pub replays: bool,
    /// The random case that failed first, counted from 1 (the cases of the regression file
    /// first), before shrinking; `None` when none failed.
    pub failed_case: Option<usize>,
    /// The test that ran the check (its thread's name under `cargo test`), for the replay
    /// command the report prints.
    pub test: Option<String>,
}

impl CheckReport {
    /// Whether everything matched the reference.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::testing::Check;
    /// let report = Check::new("config/modes.toml")
    ///     .cases(2)
    ///     .without_regressions()
    ///     .run(|setup| setup.builder().tools(ToolRegistry::with_workspace_tools()).build())?;
    /// assert!(report.is_ok());
    /// assert!(report.exploration.is_ok());
    /// # Ok::<(), agent_controller::testing::CheckError>(())
    /// ```
    pub fn is_ok(&self) -> bool {
        self.exploration.is_ok() && self.edges.is_complete() && self.counterexample.is_none()
    }

    /// The command that runs this check again: `cargo test TEST -- --exact` under a test.
    fn rerun(&self, env: &str) -> String {
        match &self.test {
            Some(test) => format!("{env}cargo test {test} -- --exact"),
            None => format!("{env}run this check again"),
        }
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = &self.config;
        writeln!(f, "{config}: explored {}", self.exploration)?;
        match &self.counterexample {
            None => write!(
                f,
                "{config}: {} random cases passed (seed {}), {}",
                self.cases, self.seed, self.edges
            )?,
            Some(c) if self.replays => write!(
                f,
                "{config}: {}\n{config}: random case {} of {} failed (seed {}; replay with it):\n{c}",
                self.edges,
                self.failed_case.unwrap_or_default(),
                self.cases,
                self.seed
            )?,
            Some(c) => write!(
                f,
                "{config}: {}\n{config}: a random case failed (seed {}), but passed when replayed \
                 alone on a fresh controller: it fails only after the cases before it, so \
                 something outlives a session (state your controller, model layer, tools or store \
                 keep across sessions). The case as found, with the ops so far:\n{c}",
                self.edges, self.seed
            )?,
        }
        if !self.exploration.is_ok() || !self.edges.is_complete() {
            write!(
                f,
                "\n{config}: replay the exploration and the edge walk (deterministic): {}",
                self.rerun("")
            )?;
        }
        if self.counterexample.is_some() {
            write!(
                f,
                "\n{config}: replay the random test: {} (or Check::seed({}))",
                self.rerun(&format!("PROPTEST_RNG_SEED={} ", self.seed)),
                self.seed
            )?;
        }
        Ok(())
    }
}

/// Why a [`Check`] failed. `Debug` prints the same readable text as `Display`, so a test that
/// returns `Result<(), CheckError>` and uses `?` shows the report, not its fields.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The config file is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The config cannot be read as a mode graph by the reference model.
    #[error(transparent)]
    Facts(#[from] FactsError),
    /// The controller or its workspace could not be set up.
    #[error(transparent)]
    Setup(#[from] HarnessError),
    /// The controller diverged from the reference model: the report says where (a shortest
    /// counterexample from the exploration, the edges where the walk diverged, the random
    /// test's shrunk failure with its seed), and how to replay each.
    #[error("{0}")]
    Failed(Box<CheckReport>),
    /// The regression file cannot be used: a symlink, FIFO or device, larger than
    /// [`MAX_CONFIG_BYTES`](crate::config::MAX_CONFIG_BYTES), or not UTF-8. Nothing was run.
    #[error("the regression file {path} is refused: {reason}")]
    Regressions {
        /// The regression file as named.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The random test gave up without a divergence (proptest aborted: too many rejected
    /// cases).
    #[error("the property test stopped: {0}")]
    Stopped(String),
}

impl fmt::Debug for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The config's text, read the bounded way [`config::load`] reads it (a regular file, at most
/// [`config::MAX_CONFIG_BYTES`], UTF-8), so the file cannot grow or turn into a FIFO between the two reads.
fn read_config_text(path: &Path) -> Result<String, HarnessError> {
    let bytes = crate::jail::read_file(path, config::MAX_CONFIG_BYTES)
        .map_err(|e| HarnessError::Io(std::io::Error::other(e.to_string())))?;
    String::from_utf8(bytes)
        .map_err(|e| HarnessError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Checks your controller against the reference model on the config at `config`: a [`Check`]
/// with its defaults.
///
/// # Errors
/// As [`Check::run`].
///
/// # Examples
/// ```
/// use agent_controller::ToolRegistry;
/// use agent_controller::testing::check_controller;
/// let report = check_controller("config/modes.toml", |setup| {
///     setup.builder().tools(ToolRegistry::with_workspace_tools()).max_steps(8).build()
/// })?;
/// assert!(report.is_ok(), "{report}");
/// assert!(report.exploration.complete);
/// assert_eq!(report.edges.total(), 14);
/// # Ok::<(), agent_controller::testing::CheckError>(())
/// ```
///
/// The [module docs](self) say what it checks and what it cannot see.
pub fn check_controller<F, E>(config: impl AsRef<Path>, build: F) -> Result<CheckReport, CheckError>
where
    F: Fn(Setup) -> Result<AgentController, E>,
    E: fmt::Display,
{
    Check::new(config).run(build)
}

/// A strategy for a new reference session on `facts` (started in the default mode or in a
/// named mode, its hook's verdicts generated: [`ReferenceSession::with_hooks`]) and up to
/// `max_ops` operations that make sense in turn, for a proptest
/// [`TestRunner`]; `restarts` adds [`Op::Restart`] (for a controller with a store). The third
/// element counts the operations applied, for shrinking: increment it before each one, as
/// [`proptest_state_machine::StateMachineTest`] does.
pub fn sessions(
    facts: &Arc<ConfigFacts>,
    max_ops: usize,
    restarts: bool,
) -> impl Strategy<Value = (ReferenceSession, Vec<Op>, Option<Arc<AtomicUsize>>)> + use<> {
    let facts = facts.clone();
    Sequential::new(
        SizeRange::from(1..=max_ops.max(1)),
        move || {
            let facts = facts.clone();
            let n = facts.len();
            // Each case's hook verdicts are an input, as its operations are.
            (0..=n, hooks::scripts(&facts))
                .prop_map(move |(start, script)| {
                    ReferenceSession::new(facts.clone(), (start < n).then_some(start))
                        .with_restarts(restarts)
                        .with_hooks(script)
                })
                .boxed()
        },
        |state: &ReferenceSession, op: &Op| state.can_apply(op),
        |state: &ReferenceSession| state.ops(),
        |mut state: ReferenceSession, op: &Op| {
            state.apply(op);
            state
        },
    )
}

/// Workspace allowances across workspaces (issue 23): `cases` random operation sequences
/// (from proptest seed `seed`; every allowance scope, restarts, new sessions) on `first`, each
/// followed on `second`, a controller over the same session store in another workspace, by a
/// new session that calls every tool that waits, in every mode. That session must start with
/// none of the workspace allowances the first gave, and ask before each call: a store (or a
/// layer) that hands one workspace's allowances to another shows here. Returns how many
/// sequences ended with a workspace allowance kept.
///
/// # Errors
/// The shrunk sequence and how the second workspace (or the first) diverged.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::{MemoryStore, SessionStore, ToolRegistry, config};
/// use agent_controller::testing::{ConfigFacts, Harness, check_other_workspace};
/// let path = "tests/fixtures/configs/valid/targets-list.toml";
/// let graph = config::load(path)?;
/// let facts = Arc::new(ConfigFacts::from_toml(&std::fs::read_to_string(path)?)?);
/// let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
/// let build = |setup: agent_controller::testing::Setup| {
///     setup.builder().tools(ToolRegistry::with_workspace_tools()).store(store.clone()).build()
/// };
/// let mut first = Harness::new(graph.clone(), facts.clone(), build)?;
/// let mut second = Harness::new(graph, facts, build)?;
/// let kept = check_other_workspace(&mut first, &mut second, 64, 23).map_err(|e| e.to_string())?;
/// assert!(kept > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_other_workspace(
    first: &mut Harness,
    second: &mut Harness,
    cases: u32,
    seed: u64,
) -> Result<usize, Box<WorkspaceCounterexample>> {
    let facts = second.facts().clone();
    let mut probe = Vec::new();
    for mode in 0..facts.len() {
        probe.push(Op::switch(facts.id(mode)));
        probe.extend(facts.approval_tools(mode).into_iter().map(Op::call));
    }
    let restarts = first.controller().store().is_some();
    let strategy = sessions(first.facts(), 16, restarts);
    let harnesses = RefCell::new((first, second));
    let kept = AtomicUsize::new(0);
    let found: RefCell<Option<Divergence>> = RefCell::new(None);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    });
    let result = runner.run(&strategy, |(initial, ops, seen)| {
        let mut harnesses = harnesses.borrow_mut();
        let (first, second) = &mut *harnesses;
        let failed = |d: Divergence| {
            let message = d.to_string();
            *found.borrow_mut() = Some(d);
            TestCaseError::fail(message)
        };
        run_case(first, &initial, &ops, seen.as_deref()).map_err(&failed)?;
        let mut ended = initial.clone();
        for op in &ops {
            ended.apply(op);
        }
        if ended
            .allowances()
            .iter()
            .any(|a| a.scope == crate::allowance::AllowanceScope::Workspace)
        {
            kept.fetch_add(1, Ordering::SeqCst);
        }
        let fresh = ReferenceSession::new(second.facts().clone(), None).with_restarts(restarts);
        second
            .run(&fresh, &probe)
            .map(|_| ())
            .map_err(|(_, d)| failed(d))
    });
    match result {
        Ok(()) => Ok(kept.load(Ordering::SeqCst)),
        Err(TestError::Fail(_, (initial, ops, _))) => {
            // Replay the shrunk case for its own divergence.
            let mut guard = harnesses.borrow_mut();
            let (first, second) = &mut *guard;
            let in_first = run_case(first, &initial, &ops, None).err();
            let fresh = ReferenceSession::new(facts.clone(), None).with_restarts(restarts);
            let in_second = match &in_first {
                Some(_) => None,
                None => second.run(&fresh, &probe).err(),
            };
            let (in_second, divergence) = match (in_first, in_second) {
                (Some(d), _) => (false, d),
                (None, Some((at, d))) => {
                    probe.truncate(at.map_or(0, |i| i + 1));
                    (true, d)
                }
                (None, None) => (
                    true,
                    found.into_inner().unwrap_or_else(|| Divergence {
                        aspect: harness::Aspect::Panic,
                        op: "the case".to_owned(),
                        expected: "the case to pass".to_owned(),
                        actual: "it failed, and its divergence was not kept".to_owned(),
                    }),
                ),
            };
            Err(Box::new(WorkspaceCounterexample {
                start: facts.id(initial.mode()).to_owned(),
                first: ops,
                second: in_second.then_some(probe),
                divergence,
            }))
        }
        Err(TestError::Abort(reason)) => Err(Box::new(WorkspaceCounterexample {
            start: facts.id(facts.default_mode()).to_owned(),
            first: Vec::new(),
            second: None,
            divergence: Divergence {
                aspect: harness::Aspect::Panic,
                op: "the check".to_owned(),
                expected: "the cases to run".to_owned(),
                actual: reason.to_string(),
            },
        })),
    }
}

/// What [`check_other_workspace`] found: the operations in the first workspace, then (when it
/// diverged there) those of the new session in the second, and the divergence.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceCounterexample {
    /// The mode the first workspace's session started in (by id).
    pub start: String,
    /// The operations in the first workspace.
    pub first: Vec<Op>,
    /// The operations of the new session in the second workspace (default mode), the last of
    /// which diverged; `None` when the first workspace diverged.
    pub second: Option<Vec<Op>>,
    /// What differed.
    pub divergence: Divergence,
}

impl fmt::Display for WorkspaceCounterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "  in the first workspace, a session started in `{}`",
            self.start
        )?;
        for (i, op) in self.first.iter().enumerate() {
            write!(f, "\n  {}. {op:?}", i + 1)?;
        }
        if let Some(second) = &self.second {
            write!(
                f,
                "\n  then a new session in the second workspace (the same store)"
            )?;
            for (i, op) in second.iter().enumerate() {
                write!(f, "\n  {}. {op:?}", i + 1)?;
            }
        }
        write!(f, "\n{}", self.divergence)
    }
}

impl std::error::Error for WorkspaceCounterexample {}

fn run_case(
    harness: &mut Harness,
    initial: &ReferenceSession,
    ops: &[Op],
    seen: Option<&AtomicUsize>,
) -> Result<(), Divergence> {
    harness.start(initial)?;
    let mut reference = initial.clone();
    for op in ops {
        if let Some(seen) = seen {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        reference.apply(op);
        harness.step(&reference)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
