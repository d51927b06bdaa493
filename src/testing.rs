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
//!   decision (tool call id, target fixed at submit time, SHA-256) and the run state. Each
//!   [`Op`] (a message, a `submit_plan` call on a valid or refused file, a decision, an abort,
//!   a manual switch, a call to a tool outside the mode, a process restart, ...) becomes a
//!   [`Step`] saying what the real session must return and emit, in order.
//!   [`ReferenceSession::ops`] is a strategy for the operations that make sense in the current
//!   state; [`sessions`] a strategy for whole operation sequences.
//! - [`Harness`] drives a real [`crate::Session`] with a scripted model in a temporary
//!   workspace, performs each step and reports the first [`Divergence`].
//! - [`walk_edges`] fires every edge `(from, cause, to)` of the transition relation after a
//!   shortest path from the default mode.
//!
//! # Checking your controller
//!
//! [`check_controller`] runs the property test (random operation sequences on the reference
//! model and on your controller, compared after every step) and the exhaustive edge walk on a
//! config file. You give it the config and the way you build your controller: it hands you a
//! builder that already has the config's mode graph, a scripted model and a temporary
//! workspace, and you add what your harness adds (your tools, your step limit, your session
//! store: with one, the sequences also restart the process and restore the session).
//!
//! ```
//! use agent_controller::ToolRegistry;
//! use agent_controller::testing::check_controller;
//!
//! let report = check_controller("config/modes.toml", |builder| {
//!     builder.tools(ToolRegistry::with_workspace_tools()).build()
//! })?;
//! assert!(report.edges.is_complete());
//! assert_eq!(report.edges.total(), 7); // plan: approve + 4 ways not to; 2 manual switches
//! println!("{report}"); // config/modes.toml: 256 cases passed, edges covered: 7/7
//! # Ok::<(), agent_controller::testing::CheckError>(())
//! ```
//!
//! Call it from a plain `#[test]`, not from inside an async runtime. The case count follows
//! proptest's (`PROPTEST_CASES`); [`check_controller_with`] takes [`CheckOptions`].
//!
//! # Your own state machine test
//!
//! With `proptest-state-machine`, use [`ReferenceSession`] as the reference state
//! ([`ReferenceSession::ops`] for the transitions, [`ReferenceSession::can_apply`] as the
//! preconditions, [`ReferenceSession::apply`] to move it) and a [`Harness`] as the system under
//! test ([`Harness::step`] after each transition); the crate's `tests/transitions.rs` does this
//! for generated configs.

mod configs;
mod edges;
mod facts;
mod harness;
mod reference;

use std::cell::RefCell;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::collection::SizeRange;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use proptest_state_machine::Sequential;

pub use self::configs::{
    ConfigSpec, InvalidConfig, MAX_MODES, ModeSpec, Mutation, invalid_configs, valid_configs,
};
pub use self::edges::{Cause, Edge, EdgeReport, Miss, edges, walk_edges};
pub use self::facts::{ConfigFacts, FactsError, ModeFacts, UNKNOWN_TOOL};
pub use self::harness::{Aspect, Divergence, Harness, HarnessError};
pub use self::reference::{
    Action, Call, Expected, Feedback, Offered, Op, Outcome, PLAN_COUNT, PendingPlan, PlanFile,
    ReferenceSession, Refusal, Reply, ResultKind, Revision, RunRef, ScriptedCall, ShaChoice, Step,
    SwitchTo, Then, Trace, plan_sha256, plan_text,
};
use crate::config::{self, ConfigError};
use crate::controller::{AgentController, AgentControllerBuilder};
use crate::mode::ModeGraph;

/// How much [`check_controller_with`] tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOptions {
    /// Random operation sequences to run (default: proptest's case count, 256 unless
    /// `PROPTEST_CASES` says otherwise).
    pub cases: u32,
    /// The longest operation sequence (default 32).
    pub max_ops: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            cases: Config::default().cases,
            max_ops: 32,
        }
    }
}

/// What a passing [`check_controller`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The config file checked.
    pub config: String,
    /// The number of random operation sequences that passed.
    pub cases: u32,
    /// The edge walk (complete when the check passed).
    pub edges: EdgeReport,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} cases passed, {}",
            self.config, self.cases, self.edges
        )
    }
}

/// Why [`check_controller`] failed.
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
    /// Some edges were not exercised (the session diverged on them).
    #[error("{0}")]
    Edges(EdgeReport),
    /// A random operation sequence made the controller diverge from the reference model; `ops`
    /// is the shrunk sequence, the last of which diverged.
    #[error("{}", diverged_message(.start, .ops, .divergence))]
    Diverged {
        /// The mode the session was started in by name (`None`: the default mode).
        start: Option<String>,
        /// The operations applied, the last of which diverged.
        ops: Vec<Op>,
        /// What differed.
        divergence: Box<Divergence>,
    },
    /// The property test gave up or failed without a reproducible divergence.
    #[error("the property test stopped: {0}")]
    Stopped(String),
}

fn diverged_message(start: &Option<String>, ops: &[Op], divergence: &Divergence) -> String {
    let mut message = format!(
        "the controller diverged from the reference model in a session started in {}:",
        start.as_deref().unwrap_or("the default mode")
    );
    for (i, op) in ops.iter().enumerate() {
        message.push_str(&format!("\n  {}. {op:?}", i + 1));
    }
    message.push_str(&format!("\n{divergence}"));
    message
}

/// Checks your controller against the reference model on the config at `config`: runs the
/// property test ([`CheckOptions::default`] cases of random operation sequences, compared after
/// every step) and the exhaustive edge walk. When your controller has a session store, the
/// sequences also restart the process ([`Op::Restart`]): a restored session must be the same.
///
/// `build` receives a builder over the config's mode graph with the check's scripted model and
/// a temporary workspace; add what your controller has (tools, step limit) and build it. Leave
/// the workspace as it is: plan files are placed in the built controller's plans directory.
///
/// # Errors
/// [`CheckError::Config`] for an invalid config, [`CheckError::Setup`] when `build` or the
/// workspace fails, [`CheckError::Edges`] naming every edge not exercised, and
/// [`CheckError::Diverged`] with a shrunk operation sequence and the first difference.
///
/// # Examples
/// See the [module docs](self).
pub fn check_controller<F, E>(config: impl AsRef<Path>, build: F) -> Result<CheckReport, CheckError>
where
    F: Fn(AgentControllerBuilder) -> Result<AgentController, E>,
    E: fmt::Display,
{
    check_controller_with(config, CheckOptions::default(), build)
}

/// [`check_controller`] with explicit [`CheckOptions`].
///
/// # Errors
/// As [`check_controller`].
pub fn check_controller_with<F, E>(
    config: impl AsRef<Path>,
    options: CheckOptions,
    build: F,
) -> Result<CheckReport, CheckError>
where
    F: Fn(AgentControllerBuilder) -> Result<AgentController, E>,
    E: fmt::Display,
{
    let path = config.as_ref();
    let graph = config::load(path)?;
    let text = std::fs::read_to_string(path).map_err(HarnessError::Io)?;
    let facts = Arc::new(ConfigFacts::from_toml(&text)?);

    let mut harness = Harness::new(graph.clone(), facts.clone(), &build)?;
    let edges = walk_edges(&mut harness, &facts);
    if !edges.is_complete() {
        return Err(CheckError::Edges(edges));
    }
    drop(harness);

    property(&graph, &facts, options, &build)?;
    Ok(CheckReport {
        config: path.display().to_string(),
        cases: options.cases,
        edges,
    })
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

fn property<F, E>(
    graph: &ModeGraph,
    facts: &Arc<ConfigFacts>,
    options: CheckOptions,
    build: &F,
) -> Result<(), CheckError>
where
    F: Fn(AgentControllerBuilder) -> Result<AgentController, E>,
    E: fmt::Display,
{
    // One controller and workspace for all cases: each case starts a fresh session.
    let harness = RefCell::new(Harness::new(graph.clone(), facts.clone(), build)?);
    // A controller with a store must survive restarts in any state.
    let restarts = harness.borrow().controller().store().is_some();
    let strategy = sessions(facts, options.max_ops, restarts);
    let mut runner = TestRunner::new(Config {
        cases: options.cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&strategy, |(initial, ops, seen)| {
        run_case(&mut harness.borrow_mut(), &initial, &ops, seen.as_deref())
            .map_err(|e| TestCaseError::fail(e.to_string()))
    });
    match result {
        Ok(()) => Ok(()),
        Err(TestError::Fail(reason, (initial, ops, _))) => {
            // Replay the shrunk case on a fresh controller for a typed report.
            let mut fresh = Harness::new(graph.clone(), facts.clone(), build)?;
            match run_case(&mut fresh, &initial, &ops, None) {
                Err(divergence) => Err(CheckError::Diverged {
                    start: initial.start().map(|m| facts.id(m).to_owned()),
                    ops,
                    divergence: Box::new(divergence),
                }),
                Ok(()) => Err(CheckError::Stopped(reason.to_string())),
            }
        }
        Err(TestError::Abort(reason)) => Err(CheckError::Stopped(reason.to_string())),
    }
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
