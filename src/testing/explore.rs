//! The exhaustive exploration: every reachable state of a session for a config, every
//! operation from each, on the real controller beside the reference model.
//!
//! A state is what the rules of the mode state machine look at: the current mode, the target
//! of the pending decision (if a plan waits), the latest run's state, the tool calls waiting for
//! approval (with the decisions taken on them while others wait), the allowances in force (by
//! scope, mode, tool and pattern),
//! where the kit's clock stands before the deadline of what waits (none, in time, one
//! millisecond before, due) and whether the decision settled last expired. From the start state
//! (a new session in the default mode) the walk goes breadth first; from each state it applies
//! every operation of a fixed list that makes sense there ([`operations`]): a message, a message
//! on which the model submits a valid or a refused plan, calls each tool (registered or not,
//! offered or not) or fails; every kind of decision (an approval to every mode, listed as a
//! target or not, too), every kind of decision on the first and second tool call waiting for
//! approval (approve, always allow, reject with and without feedback, a stale or upper-case
//! hash, by decision id; on the first, always allow of scope `session` and `workspace`, and one
//! narrowed to paths under `src/`), two calls at once of each tool that waits, a call with a
//! path inside `src/` and one walking out of it of one tool that waits and takes a path (the
//! one the walk narrows allowances of), the
//! revocation of the first and the last allowance in force and of an id nobody gave, an abort, decisions on unknown runs and
//! tool calls and malformed ones, a manual switch to every mode and to an unknown id, a
//! restart and a new session when the controller has a store, and, for a config with an `approvalTimeout`, time
//! passing (to just before the deadline, to it, an hour on) and `expire_if_due`. With a store, every decision that changes the
//! session (a plan or tool-call decision, an answer, an abort, a manual switch, time passing, an
//! expiry, a revocation) is also tried
//! once more on the same path with the process restarted before and after each decision on it:
//! what a restored session does with its history (an approval decided after a restart, a
//! restart after an approval or after a switch that ended an always-allow) is compared too,
//! though the state itself holds no history; so is every decision taken again (it reads the
//! history a restart restores). Each (state, operation) pair is one transition:
//! a fresh session replays the shortest path to the state and then the operation, compared with
//! the reference after every step. Because states are visited in order of distance, the first
//! transition that diverges has a shortest path: it is reported as the counterexample.
//!
//! Why a small breadth-first walk and not a model checker such as `stateright`: the state space
//! is small (tens to a few hundred states for real configs), and the system under test, a real
//! session on an async runtime with a scripted model, can be neither cloned, hashed nor moved
//! between checker threads, so a checker would replay paths from a fresh session just as this
//! walk does; what it adds (parallel and symmetry-reduced search, liveness properties) buys
//! nothing here, and it would bring its own dependency tree into the `testing` feature. The
//! walk is a queue and a set.

use std::collections::{HashSet, VecDeque};
use std::fmt;

use serde_json::json;

use super::ask::{AnswerChoice, Ask};
use super::facts::ConfigFacts;
use super::harness::{Divergence, Harness};
use super::reference::{
    Call, CallPath, EditedPlan, Op, PlanFile, ReferenceSession, Revision, RevokeChoice, ShaChoice,
    Subject, Then, Until,
};
use super::subagents::{ChildStep, SubagentCall};
use crate::allowance::AllowanceScope;
use crate::event::RunState;
use crate::run::DecisionAction;
use crate::subagent::SUBAGENT;
use crate::tool::ASK_USER;

/// What the rules of the mode state machine look at: mode, pending target, run state, the tool
/// calls waiting (each by tool, what it asks and its decision so far), the allowances in force
/// (by scope, mode and tool), and where the clock stands before the deadline of what waits.
type Rules = (
    usize,
    Option<(usize, bool)>,
    Option<RunState>,
    Vec<String>,
    Vec<String>,
    Clock,
    bool,
);

/// Where the clock stands before the earliest deadline of what waits: what a decision, a
/// restart or time passing does depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Clock {
    /// Nothing waits with a deadline.
    NoDeadline,
    /// More than a millisecond before it.
    InTime,
    /// One millisecond before it.
    JustBefore,
    /// At or past it: the expiry is due (not applied yet).
    Due,
}

fn clock(reference: &ReferenceSession) -> Clock {
    match reference.next_deadline() {
        None => Clock::NoDeadline,
        Some(at) if at <= reference.now() => Clock::Due,
        Some(at) if at - reference.now() == 1 => Clock::JustBefore,
        Some(_) => Clock::InTime,
    }
}

fn rules(reference: &ReferenceSession) -> Rules {
    // The allowances in force by scope, mode, tool and pattern (what the tools always allowed
    // in the current mode follow from).
    let mut allowed: Vec<String> = reference
        .allowances()
        .iter()
        .map(|a| {
            // A plan's allowance by whether it refuses writes outside its files (`enforce`).
            let enforces = a.scope == AllowanceScope::Plan && reference.plan_enforces();
            format!(
                "{} {} {} {:?} {enforces}",
                a.scope, a.mode, a.tool, a.pattern
            )
        })
        .collect();
    allowed.sort();
    (
        reference.mode(),
        // Whether the plan that waits declares its files: approving it binds the next mode.
        reference
            .pending()
            .map(|p| (p.target, super::reference::plan_declares_files(p.plan))),
        reference.run().map(|(_, s)| s),
        reference
            .waiting()
            .iter()
            // What a waiting call asks is part of its state: the answers that fit differ.
            // A child's call by its type (its parent's call id counts up along the path).
            // A write waiting as drift is a state of its own (the plan's files made it wait).
            .map(|w| {
                let child = w.child.as_ref().map(|c| &c.agent_type);
                format!(
                    "{} {:?} {:?} {child:?} drift {}",
                    w.tool, w.asks, w.decided, w.drift
                )
            })
            .collect(),
        allowed,
        clock(reference),
        reference.last_settled_expired(),
    )
}

/// A state of the walk: the rules' state.
type State = Rules;

/// Whether `op` decides something: a plan or tool-call decision, an answer, an abort, a manual
/// switch, time passing, an expiry, a revocation. With a store, the walk also replays every path that ends in one with a restart
/// before and after each decision on it ([`with_restarts_around_decisions`]).
fn is_decision(op: &Op) -> bool {
    matches!(
        op,
        Op::Decide { .. }
            | Op::Answer(_)
            | Op::Abort
            | Op::Switch(_)
            | Op::Wait(_)
            | Op::ExpireIfDue
            | Op::Revoke(_)
    )
}

/// `path` with a restart before and after each of its decisions (where the reference allows
/// one; never two in a row), or `None` when the reference cannot follow it.
fn with_restarts_around_decisions(root: &ReferenceSession, path: &[Op]) -> Option<Vec<Op>> {
    let mut reference = root.clone();
    let mut ops: Vec<Op> = Vec::new();
    let restart = |reference: &mut ReferenceSession, ops: &mut Vec<Op>| {
        if ops.last() != Some(&Op::Restart) && reference.can_apply(&Op::Restart) {
            reference.apply(&Op::Restart);
            ops.push(Op::Restart);
        }
    };
    for op in path {
        if is_decision(op) {
            restart(&mut reference, &mut ops);
        }
        if !reference.can_apply(op) {
            return None;
        }
        reference.apply(op);
        ops.push(op.clone());
        if is_decision(op) {
            restart(&mut reference, &mut ops);
        }
    }
    Some(ops)
}

/// The one tool the walk narrows allowances of and calls with a path: the first that waits for
/// approval somewhere and takes a path ([`ConfigFacts::path_tools`]). One is enough to check
/// narrowing; every such tool would multiply the states by its allowances.
fn narrowed_tool(facts: &ConfigFacts) -> Option<String> {
    (0..facts.len())
        .flat_map(|mode| facts.approval_tools(mode))
        .find(|tool| facts.path_tools().contains(tool))
}

/// Whether the walk tries `op` at `at` (where it applies): a narrowed "always allow" only on a
/// call of the tool it narrows (`narrowing`), and no "always allow" on a write waiting as drift
/// ([`super::scope::always_allows_drift`]).
fn walks(at: &ReferenceSession, op: &Op, narrowing: Option<&str>) -> bool {
    (match op {
        Op::Decide {
            on:
                Subject::ToolCall {
                    call,
                    narrowed: true,
                    ..
                },
            ..
        } => at
            .waiting()
            .get(*call)
            .is_some_and(|w| Some(w.tool.as_str()) == narrowing),
        _ => true,
    }) && !super::scope::always_allows_drift(at, op)
}

/// What [`explore`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Exploration {
    /// Distinct states reached: mode, pending target, run state, tool calls waiting, tools
    /// always allowed.
    pub states: usize,
    /// The states explored: reached, and every operation tried from them. What the bound of
    /// [`explore_up_to`] counts; at most [`Exploration::states`], equal to it when the walk is
    /// [`complete`](Exploration::complete).
    pub explored: usize,
    /// (state, operation) pairs performed and compared.
    pub transitions: usize,
    /// The first divergence, with a shortest operation sequence; `None` when all matched.
    pub counterexample: Option<Counterexample>,
    /// Whether the walk reached every state: `false` when it stopped at its bound
    /// ([`explore_up_to`], [`crate::testing::Check::max_states`]) with states left unexplored.
    pub complete: bool,
    /// Of the states reached, those in which an approved plan's files bind the current mode
    /// (an allowance of scope `plan` in force: `planScope` `ask` or `enforce`).
    pub scoped: usize,
    /// Of the states reached, those in which a write outside an approved plan's files waits
    /// for approval as drift.
    pub drifting: usize,
}

impl Exploration {
    /// Whether every transition matched the reference.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{ToolRegistry, config};
    /// use agent_controller::testing::{ConfigFacts, Harness, explore};
    /// let text = std::fs::read_to_string("config/modes.toml")?;
    /// let graph = config::parse(&text, "config/modes.toml")?;
    /// let facts = Arc::new(ConfigFacts::from_toml(&text)?);
    /// let mut harness = Harness::new(graph, facts, |setup| {
    ///     setup.builder().tools(ToolRegistry::with_workspace_tools()).build()
    /// })?;
    /// let exploration = explore(&mut harness);
    /// assert!(exploration.is_ok());
    /// assert!(exploration.counterexample.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_ok(&self) -> bool {
        self.counterexample.is_none()
    }
}

impl fmt::Display for Exploration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.counterexample {
            // The bound counts the states explored; the others reached are named beside it.
            None if !self.complete => write!(
                f,
                "{} states (the bound) of {} states reached, {} transitions checked; {} more \
                 states were not explored",
                self.explored,
                self.states,
                self.transitions,
                self.states - self.explored
            ),
            None => write!(
                f,
                "{} states, {} transitions, all checked",
                self.states, self.transitions
            ),
            Some(c) => write!(
                f,
                "{} states, {} transitions checked before a divergence:\n{c}",
                self.states, self.transitions
            ),
        }
    }
}

/// A failing operation sequence: from a new session in `start`, the operations in order, the
/// last of which diverged as `divergence` says.
#[derive(Debug, Clone, PartialEq)]
pub struct Counterexample {
    /// The mode the session started in (by id).
    pub start: String,
    /// The operations, modes named by id; the last one diverged.
    pub ops: Vec<Op>,
    /// What differed.
    pub divergence: Divergence,
    /// What the kit's hook answered in it ([`crate::testing::HookScript`]; none where the
    /// explorer or the edge walk found it).
    pub hooks: crate::testing::HookScript,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "  a session started in `{}`", self.start)?;
        if !self.hooks.is_empty() {
            write!(f, ", the kit's hook answering {:?}", self.hooks)?;
        }
        for (i, op) in self.ops.iter().enumerate() {
            write!(f, "\n  {}. {op:?}", i + 1)?;
        }
        write!(f, "\n{}", self.divergence)
    }
}

/// The operations the walk tries from every state (those that apply there): one of each kind
/// the reference model knows, every tool of [`ConfigFacts::tool_names`], a switch to every mode
/// and to an unknown id, and [`Op::Restart`] when `restarts`.
///
/// # Examples
/// ```
/// use agent_controller::testing::{ConfigFacts, Op, operations};
/// let facts = ConfigFacts::from_toml(&std::fs::read_to_string("config/modes.toml")?)?;
/// let ops = operations(&facts, false);
/// assert!(!ops.contains(&Op::Restart), "no store: no restarts");
/// assert!(operations(&facts, true).contains(&Op::Restart));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn operations(facts: &ConfigFacts, restarts: bool) -> Vec<Op> {
    let mut ops = vec![
        Op::message(),
        Op::model_fails(),
        Op::submit(0),
        Op::submit_file(PlanFile::Missing),
        Op::Message {
            calls: vec![
                Call::Tool(super::UNKNOWN_TOOL.to_owned()),
                Call::SubmitPlan(PlanFile::Valid(1)),
            ],
            then: Then::Text,
        },
    ];
    ops.extend(facts.tool_names().into_iter().map(Op::call));
    // Two calls of a tool that waits for approval somewhere, in one reply: two decisions.
    let mut waiting_tools: Vec<String> = Vec::new();
    for mode in 0..facts.len() {
        for tool in facts.approval_tools(mode) {
            if !waiting_tools.contains(&tool) {
                waiting_tools.push(tool);
            }
        }
    }
    ops.extend(waiting_tools.iter().map(|t| Op::calls([t, t])));
    // Where a mode offers `ask_user`: a question alone, a question beside a call that waits for
    // approval in one reply, and a question before a plan (which is refused beside it).
    let offered = |ask: Ask| (0..facts.len()).any(|m| facts.offers(m, ask.tool()) == Some(true));
    let asks = offered(Ask::Select);
    if asks {
        ops.push(Op::ask());
        // The question's other shapes: several options to pick, and free text.
        ops.extend([Op::ask_with(Ask::MultiSelect), Op::ask_with(Ask::FreeText)]);
        if let Some(tool) = waiting_tools.first() {
            ops.push(Op::calls([ASK_USER, tool.as_str()]));
        }
        ops.push(Op::Message {
            calls: vec![
                Call::Tool(ASK_USER.to_owned()),
                Call::SubmitPlan(PlanFile::Valid(1)),
            ],
            then: Then::Text,
        });
    }
    // Where a mode runs the task tools at once, each of the kit's task calls (the list is not
    // part of a state: each call is tried from every state, on the list the shortest path
    // there left).
    for call in super::TaskCall::ALL {
        if (0..facts.len()).any(|m| super::reference::runs_task_tool(facts, m, call.tool())) {
            ops.push(Op::Message {
                calls: vec![Call::Task(call)],
                then: Then::Text,
            });
        }
    }
    // Where a mode offers `subagent`: for each type, a child that answers at once and children
    // that call a tool: one that waits for approval in a child (alone, and beside a call of
    // the parent's that waits), `ask_user`, one that writes (refused to a child of a planning
    // mode) and each a type's rules name; a call naming no type and one with an empty task.
    if (0..facts.len()).any(|m| facts.offers(m, SUBAGENT) == Some(true)) {
        let mut probes: Vec<String> = (0..facts.len())
            .filter_map(|m| super::subagents::child_waiting(facts, m).map(|(_, tool)| tool))
            .collect();
        probes.push(ASK_USER.to_owned());
        probes.extend(facts.writing_tools().first().cloned());
        // Each tool a type's rules name (a `deny` rule of a type's: refused in its child).
        for kind in facts.subagent_types() {
            probes.extend(
                kind.rules
                    .iter()
                    .filter(|r| !r.tool.ends_with("__*"))
                    .map(|r| r.tool.clone()),
            );
        }
        for kind in facts.subagent_types() {
            let start = |child| {
                Call::Subagent(SubagentCall::Start {
                    agent_type: kind.id.clone(),
                    child,
                })
            };
            let mut calls = vec![start(ChildStep::Answers)];
            let mut seen: Vec<&String> = Vec::new();
            for tool in &probes {
                if !seen.contains(&tool) {
                    seen.push(tool);
                    calls.push(start(ChildStep::Calls(tool.clone())));
                }
            }
            ops.extend(calls.into_iter().map(|call| Op::Message {
                calls: vec![call],
                then: Then::Text,
            }));
            if let (Some(child), Some(parent)) = (
                (0..facts.len()).find_map(|m| super::subagents::child_waiting(facts, m)),
                waiting_tools.first(),
            ) && child.0 == kind.id
            {
                ops.push(Op::Message {
                    calls: vec![start(ChildStep::Calls(child.1)), Call::Tool(parent.clone())],
                    then: Then::Text,
                });
            }
        }
        ops.push(Op::Message {
            calls: vec![Call::Subagent(SubagentCall::UnknownType)],
            then: Then::Text,
        });
        if let Some(kind) = facts.subagent_types().first() {
            ops.push(Op::Message {
                calls: vec![Call::Subagent(SubagentCall::EmptyTask(kind.id.clone()))],
                then: Then::Text,
            });
        }
    }
    // A call with a path inside `src/` and one that walks out of it, of the tool the walk
    // narrows allowances of: a narrowed allowance covers the first only.
    if let Some(tool) = narrowed_tool(facts) {
        for path in [CallPath::Src, CallPath::WalksOut] {
            ops.push(Op::Message {
                calls: vec![Call::ToolAt(tool.clone(), path)],
                then: Then::Text,
            });
        }
    }
    // Where an approved plan's files can bind a write: the plan that declares them, a write
    // inside them and one outside (see `scope`).
    ops.extend(super::scope::scope_operations(
        facts,
        narrowed_tool(facts).as_deref(),
    ));
    ops.extend([
        Op::approve(),
        Op::Decide {
            on: Subject::Plan {
                json: true,
                revision: Revision::Text,
                to: None,
                plan: None,
            },
            action: DecisionAction::Approved,
            feedback: super::Feedback::Omitted,
            sha256: ShaChoice::MatchingUppercase,
        },
        Op::Decide {
            on: Subject::Plan {
                json: false,
                revision: Revision::Text,
                to: None,
                plan: None,
            },
            action: DecisionAction::Approved,
            feedback: super::Feedback::Omitted,
            sha256: ShaChoice::Stale,
        },
        Op::reject(),
        Op::reject_with("add tests"),
        Op::Decide {
            on: Subject::Plan {
                json: false,
                revision: Revision::Resubmit(2),
                to: None,
                plan: None,
            },
            action: DecisionAction::Rejected,
            feedback: super::Feedback::Text("split step 2".to_owned()),
            sha256: ShaChoice::Matching,
        },
        Op::Answer(None),
        Op::Answer(Some("y".to_owned())),
        Op::Answer(Some(String::new())),
        Op::Abort,
        Op::DecideAgain,
        Op::DecideUnknownCall,
        Op::DecideUnknownRun,
        Op::Malformed(json!({ "action": "approve" })),
    ]);
    // An approval to every mode (listed as a target or not) and to an unknown id.
    ops.extend(facts.modes().iter().map(|m| Op::approve_to(m.id.clone())));
    ops.push(Op::approve_to("no-such-mode"));
    ops.push(Op::approve_edited(1));
    ops.push(Op::Decide {
        on: Subject::Plan {
            json: true,
            revision: Revision::Text,
            to: None,
            plan: Some(EditedPlan::Blank),
        },
        action: DecisionAction::Approved,
        feedback: super::Feedback::Omitted,
        sha256: ShaChoice::Omitted,
    });
    // Every kind of decision on the first and the second waiting tool call.
    for call in 0..2 {
        ops.extend([
            Op::approve_tool(call),
            Op::always_allow_tool(call),
            Op::reject_tool(call, None),
            Op::reject_tool(call, Some("use another path")),
        ]);
    }
    // The other allowance scopes, on the first waiting call: `session` (kept across mode
    // changes, applying in its own mode) and `workspace` (kept in the store, for later
    // sessions too; refused without a store).
    ops.extend([
        Op::always_allow_tool_for(0, AllowanceScope::Session),
        Op::always_allow_tool_for(0, AllowanceScope::Workspace),
    ]);
    // An "always allow" narrowed to paths under `src/`, on the first waiting call (where its
    // tool takes a path).
    ops.push(Op::always_allow_narrowed(0));
    // The first waiting call decided with a pin in capitals, with a stale pin, and a rejection
    // that asks for an allowance; the first two address it by its decision id.
    let first_call = |always_allow, by_id, action, sha256| Op::Decide {
        on: Subject::ToolCall {
            call: 0,
            always_allow,
            scope: None,
            narrowed: false,
            by_id,
        },
        action,
        feedback: super::Feedback::Omitted,
        sha256,
    };
    let (approved, rejected) = (DecisionAction::Approved, DecisionAction::Rejected);
    ops.extend([
        first_call(false, true, approved, ShaChoice::MatchingUppercase),
        first_call(true, true, approved, ShaChoice::Stale),
        first_call(true, false, rejected, ShaChoice::Matching),
    ]);
    // Where a mode offers the kit's own suspending tool: its call alone, and beside a question.
    let confirms = offered(Ask::Confirm);
    if confirms {
        ops.push(Op::ask_with(Ask::Confirm));
        if asks {
            ops.push(Op::Message {
                calls: vec![Call::Ask(Ask::Confirm), Call::Ask(Ask::MultiSelect)],
                then: Then::Text,
            });
        }
    }
    if asks || confirms {
        // Every kind of decision on the first and second waiting question: answered, declined
        // (with and without feedback), an answer that is not an option, one of the wrong type,
        // one with a stale pin, an approval (refused), and an answer to a call that waits for
        // approval (refused: the second position, beside a question).
        for call in 0..2 {
            ops.extend([
                Op::answer_question(call),
                Op::decline_question(call, None),
                Op::decline_question(call, Some("ask me later")),
                Op::answer_question_with(call, AnswerChoice::NotAnOption, ShaChoice::Matching),
            ]);
        }
        ops.extend([
            Op::answer_question_with(0, AnswerChoice::WrongType, ShaChoice::Omitted),
            Op::answer_question_with(0, AnswerChoice::Fits, ShaChoice::Stale),
            Op::Decide {
                on: Subject::Question {
                    call: 0,
                    answer: None,
                    by_id: true,
                },
                action: DecisionAction::Approved,
                feedback: super::Feedback::Omitted,
                sha256: ShaChoice::Omitted,
            },
        ]);
    }
    ops.extend(facts.modes().iter().map(|m| Op::switch(m.id.clone())));
    ops.push(Op::switch("no-such-mode"));
    // The revocation of the first and the last allowance in force and of an id nobody gave
    // (where allowances are in force); after the switches, so that of two paths as short
    // that end an allowance the walk reports the switch.
    ops.extend([
        Op::Revoke(RevokeChoice::First),
        Op::Revoke(RevokeChoice::Last),
        Op::Revoke(RevokeChoice::Unknown),
    ]);
    if restarts {
        // A restart restores the session; a new session keeps only the workspace allowances.
        ops.extend([Op::Restart, Op::NewSession]);
    }
    if facts.has_deadlines() {
        ops.extend([
            Op::Wait(Until::JustBefore),
            Op::Wait(Until::Deadline),
            Op::Wait(Until::AnHour),
            Op::ExpireIfDue,
        ]);
    }
    ops
}

/// Walks every reachable state of a session on `harness`'s controller, breadth first, and
/// every operation of [`operations`] from each, comparing the real session with the reference
/// after every step (see the [`testing`](crate::testing) module). With a session store on the controller,
/// restarts are among the operations.
///
/// Stops at the first divergence, which has a shortest path to it.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::{ToolRegistry, config};
/// use agent_controller::testing::{ConfigFacts, Harness, explore};
/// let text = std::fs::read_to_string("config/modes.toml")?;
/// let graph = config::parse(&text, "config/modes.toml")?;
/// let facts = Arc::new(ConfigFacts::from_toml(&text)?);
/// let mut harness = Harness::new(graph, facts, |setup| {
///     setup.builder().tools(ToolRegistry::with_workspace_tools()).build()
/// })?;
/// let exploration = explore(&mut harness);
/// assert!(exploration.is_ok(), "{exploration}");
/// assert!(exploration.complete);
/// assert!(exploration.states > 1 && exploration.transitions > exploration.states);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn explore(harness: &mut Harness) -> Exploration {
    explore_up_to(harness, None)
}

/// [`explore`], bounded: with `Some(max_states)` the walk expands at most that many states
/// (in order of distance from the start, so the nearest ones) and reports
/// [`Exploration::complete`] `false` when more were reachable.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::{ToolRegistry, config};
/// use agent_controller::testing::{ConfigFacts, Harness, explore};
/// let text = std::fs::read_to_string("config/modes.toml")?;
/// let graph = config::parse(&text, "config/modes.toml")?;
/// let facts = Arc::new(ConfigFacts::from_toml(&text)?);
/// let mut harness = Harness::new(graph, facts, |setup| {
///     setup.builder().tools(ToolRegistry::with_workspace_tools()).build()
/// })?;
/// use agent_controller::testing::explore_up_to;
/// let exploration = explore_up_to(&mut harness, Some(2));
/// assert!(!exploration.complete, "more states were reachable");
/// assert!(exploration.is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn explore_up_to(harness: &mut Harness, max_states: Option<usize>) -> Exploration {
    let facts = harness.facts().clone();
    let restarts = harness.controller().store().is_some();
    let root = ReferenceSession::new(facts.clone(), None).with_restarts(restarts);
    let ops = operations(&facts, restarts);
    let narrowing = narrowed_tool(&facts);
    let narrowing = narrowing.as_deref();
    let mut seen: HashSet<State> = HashSet::from([rules(&root)]);
    let (mut scoped_states, mut drifting_states) = (0, 0);
    let mut queue: VecDeque<(ReferenceSession, Vec<Op>)> =
        VecDeque::from([(root.clone(), Vec::new())]);
    let mut transitions = 0;
    let mut expanded = 0;
    while let Some((at, path)) = queue.pop_front() {
        if max_states.is_some_and(|max| expanded >= max) {
            return Exploration {
                states: seen.len(),
                explored: expanded,
                transitions,
                counterexample: None,
                complete: false,
                scoped: scoped_states,
                drifting: drifting_states,
            };
        }
        expanded += 1;
        for op in ops
            .iter()
            .filter(|op| at.can_apply(op) && walks(&at, op, narrowing))
        {
            transitions += 1;
            let mut next_path = path.clone();
            next_path.push(op.clone());
            // With a store, a decision that changed the session is also tried in a process
            // restarted before and after each decision on its path: a history the state does
            // not hold (a stale record, a half-restored session) shows there.
            let result = match harness.run(&root, &next_path) {
                Err(failure) => Err((next_path, failure)),
                Ok(next) => {
                    // Deciding again reads the history a restart restores: after a restart too.
                    let reads_history = *op == Op::DecideAgain;
                    let variant = (restarts
                        && (reads_history || is_decision(op) && rules(&next) != rules(&at)))
                    .then(|| with_restarts_around_decisions(&root, &next_path))
                    .flatten();
                    match variant.map(|v| (harness.run(&root, &v), v)) {
                        Some((Err(failure), variant)) => Err((variant, failure)),
                        _ => Ok((next, next_path)),
                    }
                }
            };
            match result {
                Ok((next, next_path)) => {
                    if seen.insert(rules(&next)) {
                        scoped_states += usize::from(super::reference::scoped(&next));
                        drifting_states += usize::from(super::scope::drifting(&next));
                        queue.push_back((next, next_path));
                    }
                }
                Err((mut ops, (failed, divergence))) => {
                    ops.truncate(failed.map_or(0, |i| i + 1));
                    return Exploration {
                        states: seen.len(),
                        explored: expanded,
                        transitions,
                        counterexample: Some(Counterexample {
                            start: facts.id(root.mode()).to_owned(),
                            ops,
                            divergence,
                            hooks: Default::default(),
                        }),
                        complete: true,
                        scoped: scoped_states,
                        drifting: drifting_states,
                    };
                }
            }
        }
    }
    Exploration {
        states: seen.len(),
        explored: expanded,
        transitions,
        counterexample: None,
        complete: true,
        scoped: scoped_states,
        drifting: drifting_states,
    }
}
