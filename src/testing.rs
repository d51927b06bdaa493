//! Property-testing support (cargo feature `testing`): strategies for mode configs, a reference
//! model of a session, and a one-call check of *your* controller against both.
//!
//! The pieces, from the config to the running session:
//!
//! - [`valid_configs`] generates arbitrary valid configs as [`ConfigSpec`]s (render them with
//!   [`ConfigSpec::to_toml`]); [`invalid_configs`] breaks one with a known [`Mutation`] and pairs
//!   it with the [`crate::ConfigErrorKind`] loading it must give.
//! - [`ConfigFacts`] reads what a config means (default mode, hand-over targets, tool lists)
//!   straight from the TOML text, independently of [`crate::config`].
//! - [`ReferenceSession`] is a small pure model of a session: the current mode, the pending
//!   decision (tool call id, target fixed at submit time, SHA-256), the tool calls waiting for
//!   approval (`requireApproval`) with the decisions taken on them, the tools always allowed,
//!   and the run state. Each [`Op`] (a message, a `submit_plan` call on a valid or refused
//!   file, a decision on a plan or on a waiting tool call, an abort, a manual switch, a call to
//!   a tool outside the mode, a process restart, ...) becomes a
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
//! mode graph, the kit's scripted model (wrap it in your own model layer if you have one) and a
//! temporary workspace. Add what your harness adds: your tools (the kit calls each of them, and
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
//! assert_eq!(report.edges.total(), 7); // plan: approve + 4 ways not to; 2 manual switches
//! println!("{report}");
//! // config/modes.toml: explored N states, M transitions, all checked
//! // config/modes.toml: 256 random cases passed (seed S), edges covered: 7/7
//! # Ok::<(), agent_controller::testing::CheckError>(())
//! ```
//!
//! Call it from a plain `#[test]`, not from inside an async runtime. The case count follows
//! proptest's (`PROPTEST_CASES`); a failure prints the seed ([`Check::seed`] replays it) and is
//! kept in a regression file ([`DEFAULT_REGRESSIONS`]), with modes named by id and only the
//! first item that differs shown. The same check runs from the command line, with the built-in
//! tools: `agent-controller verify CONFIG`.
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

mod configs;
mod conformance;
mod edges;
mod explore;
mod facts;
mod harness;
mod reference;

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

pub use self::configs::{
    ConfigSpec, InvalidConfig, MAX_MODES, ModeSpec, Mutation, invalid_configs, valid_configs,
};
pub use self::conformance::{
    ConformanceCheck, ConformanceFailure, ConformanceOutcome, ConformanceReport, StoreConformance,
    store_conformance,
};
pub use self::edges::{Cause, Edge, EdgeReport, Miss, edges, walk_edges};
pub use self::explore::{Counterexample, Exploration, explore, operations};
pub use self::facts::{Approvals, ConfigFacts, FactsError, ModeFacts, UNKNOWN_TOOL};
pub use self::harness::{Aspect, Divergence, Harness, HarnessError, Invariant, Setup};
pub use self::reference::{
    Action, Call, Decided, EditedPlan, Expected, Feedback, Offered, Op, Outcome, PLAN_COUNT,
    PendingPlan, PlanFile, ReferenceSession, Refusal, Reply, ResultKind, Revision, RunRef,
    ScriptedCall, ShaChoice, Step, Subject, Then, Trace, WaitingCall, edited_plan_sha256,
    edited_plan_text, plan_sha256, plan_text, tool_args_sha256,
};
use crate::config::{self, ConfigError};
use crate::controller::AgentController;
use crate::mode::ModeGraph;
use crate::session::Session;

/// Where [`Check`] keeps failing cases by default (relative to the working directory, which is
/// the package root under `cargo test`); they are replayed first on every later run.
pub const DEFAULT_REGRESSIONS: &str = "proptest-regressions/agent-controller-check.txt";

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
    cases: u32,
    max_ops: usize,
    seed: Option<u64>,
    regressions: Option<PathBuf>,
    invariants: Vec<Invariant>,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Check")
            .field("config", &self.config)
            .field("cases", &self.cases)
            .field("max_ops", &self.max_ops)
            .field("seed", &self.seed)
            .field("regressions", &self.regressions)
            .field("invariants", &self.invariants.len())
            .finish()
    }
}

impl Check {
    /// A check of the config file at `config`: proptest's case count (256 unless
    /// `PROPTEST_CASES` says otherwise), sequences of up to 32 operations, a random seed
    /// (`PROPTEST_RNG_SEED` fixes it), failures kept in [`DEFAULT_REGRESSIONS`].
    pub fn new(config: impl AsRef<Path>) -> Self {
        let defaults = Config::default();
        Self {
            config: config.as_ref().to_owned(),
            cases: defaults.cases,
            max_ops: 32,
            seed: match defaults.rng_seed {
                RngSeed::Fixed(seed) => Some(seed),
                RngSeed::Random => None,
            },
            regressions: Some(PathBuf::from(DEFAULT_REGRESSIONS)),
            invariants: Vec::new(),
        }
    }

    /// Random operation sequences to run.
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases;
        self
    }

    /// The longest random operation sequence.
    pub fn max_ops(mut self, max_ops: usize) -> Self {
        self.max_ops = max_ops.max(1);
        self
    }

    /// The seed of the random test: the report prints the one used, so a failure can be
    /// replayed with it.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Keep failing cases in `file` (proptest's regression format), replayed first next time.
    pub fn regressions(mut self, file: impl Into<PathBuf>) -> Self {
        self.regressions = Some(file.into());
        self
    }

    /// Keep no regression file.
    pub fn without_regressions(mut self) -> Self {
        self.regressions = None;
        self
    }

    /// Adds a check of your own, called with the real session and the reference model after
    /// the start and after every step of the exploration, the edge walk and the random test
    /// (as proptest-state-machine's `check_invariants` and Hypothesis' `@invariant`).
    /// `Err(message)` fails the check there.
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
    pub fn run<F, E>(&self, build: F) -> Result<CheckReport, CheckError>
    where
        F: Fn(Setup) -> Result<AgentController, E>,
        E: fmt::Display,
    {
        let path = &self.config;
        let graph = config::load(path)?;
        let text = std::fs::read_to_string(path).map_err(HarnessError::Io)?;
        let facts = Arc::new(ConfigFacts::from_toml(&text)?);

        let mut harness = self.harness(&graph, &facts, &build)?;
        let facts = harness.facts().clone();
        let exploration = explore(&mut harness);
        let edges = walk_edges(&mut harness);
        drop(harness);

        let seed = self.seed.unwrap_or_else(random_seed);
        let counterexample = self.property(&graph, &facts, seed, &build)?;
        let report = CheckReport {
            config: path.display().to_string(),
            exploration,
            edges,
            cases: self.cases,
            seed,
            counterexample,
        };
        if report.is_ok() {
            Ok(report)
        } else {
            Err(CheckError::Failed(Box::new(report)))
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
    ) -> Result<Option<Counterexample>, CheckError>
    where
        F: Fn(Setup) -> Result<AgentController, E>,
        E: fmt::Display,
    {
        // One controller and workspace for all cases: each case starts a fresh session.
        let harness = RefCell::new(self.harness(graph, facts, build)?);
        // A controller with a store must survive restarts in any state.
        let restarts = harness.borrow().controller().store().is_some();
        let strategy = sessions(facts, self.max_ops, restarts);
        let persistence = self.regressions.as_ref().map(|file| {
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
        let result = runner.run(&strategy, |(initial, ops, seen)| {
            run_case(&mut harness.borrow_mut(), &initial, &ops, seen.as_deref())
                .map_err(|e| TestCaseError::fail(e.to_string()))
        });
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
        let Err((at, divergence)) = fresh.run(&initial, &ops) else {
            return Err(CheckError::Stopped(
                "a failing case passed when replayed on a fresh controller".to_owned(),
            ));
        };
        let mut ops = ops;
        ops.truncate(at.map_or(0, |i| i + 1));
        let (ops, divergence) = without_unneeded_ops(&mut fresh, &initial, ops, divergence);
        Ok(Some(Counterexample {
            start: facts.id(initial.mode()).to_owned(),
            ops,
            divergence,
        }))
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
}

impl CheckReport {
    /// Whether everything matched the reference.
    pub fn is_ok(&self) -> bool {
        self.exploration.is_ok() && self.edges.is_complete() && self.counterexample.is_none()
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: explored {}", self.config, self.exploration)?;
        match &self.counterexample {
            None => write!(
                f,
                "{}: {} random cases passed (seed {}), {}",
                self.config, self.cases, self.seed, self.edges
            ),
            Some(c) => write!(
                f,
                "{}: {}\n{}: a random case failed (seed {}; replay with it):\n{c}",
                self.config, self.edges, self.config, self.seed
            ),
        }
    }
}

/// Why a [`Check`] failed.
#[derive(Debug, thiserror::Error)]
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
    /// counterexample from the exploration, the edges not exercised, the random test's shrunk
    /// failure with its seed).
    #[error("{0}")]
    Failed(Box<CheckReport>),
    /// The random test gave up without a reproducible divergence.
    #[error("the property test stopped: {0}")]
    Stopped(String),
}

/// Checks your controller against the reference model on the config at `config`: a [`Check`]
/// with its defaults.
///
/// # Errors
/// As [`Check::run`].
///
/// # Examples
/// See the [module docs](self).
pub fn check_controller<F, E>(config: impl AsRef<Path>, build: F) -> Result<CheckReport, CheckError>
where
    F: Fn(Setup) -> Result<AgentController, E>,
    E: fmt::Display,
{
    Check::new(config).run(build)
}

/// A strategy for a new reference session on `facts` (started in the default mode or in a
/// named mode) and up to `max_ops` operations that make sense in turn, for a proptest
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
            (0..=n)
                .prop_map(move |start| {
                    ReferenceSession::new(facts.clone(), (start < n).then_some(start))
                        .with_restarts(restarts)
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
