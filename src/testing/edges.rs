//! The exhaustive edge walk: every edge `(from, cause, to)` of a config's transition relation,
//! reached by a shortest path from the default mode in a fresh session and fired, each step
//! compared with the reference model.

use std::collections::VecDeque;
use std::fmt;

use super::explore::Counterexample;
use super::facts::ConfigFacts;
use super::harness::Harness;
use super::reference::{
    Call, Feedback, Op, PlanFile, ReferenceSession, Revision, ShaChoice, Subject, Then, Until,
};
use super::subagents::{ChildStep, SubagentCall, child_asking, child_waiting};
use crate::run::DecisionAction;
use crate::subagent::SUBAGENT;
use crate::tool::ASK_USER;

/// What moves a session along an edge.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
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
    schemars(inline, schema_with = "crate::names::schema::<Cause>")
)]
#[non_exhaustive]
pub enum Cause {
    /// A plan submitted in `from` is approved to `to`, one of `from`'s targets (a plain
    /// approval for the first, [`crate::Decision::to`] for the others): the session hands
    /// over.
    Approve,
    /// A plan is rejected without feedback: the mode stays.
    Reject,
    /// A plan is rejected with feedback: the mode stays.
    RejectWithFeedback,
    /// The run is aborted while the plan is pending: the mode stays.
    Abort,
    /// A user message arrives while the plan is pending: the mode stays.
    UserMessage,
    /// The host switches to `to` by hand.
    Manual,
    /// A tool call that waits for approval in `from` (its `requireApproval`) is approved:
    /// it runs; the mode stays.
    ApproveTool,
    /// Such a call is rejected with feedback: it does not run; the mode stays.
    RejectTool,
    /// Such a call is approved with "always allow": it runs, and later calls of the tool
    /// run without waiting; the mode stays.
    AlwaysAllowTool,
    /// After an "always allow" in `from`, the host switches to `to` by hand: the switch
    /// ends the always-allow (back in `from`, the tool waits again).
    ManualEndsAlwaysAllow,
    /// After an "always allow" in the planning mode `from`, a plan is approved and hands
    /// over to `to`: the switch ends the always-allow, as every mode change does.
    ApprovalEndsAlwaysAllow,
    /// A call a `deny` rule of `from` decides (issue 23): it never runs, and the model is
    /// told which rule refused it; the mode stays.
    RuleDeny,
    /// A call an `ask` rule of `from` decides: it waits as under `requireApproval`, and is
    /// approved: it runs; the mode stays.
    RuleAsk,
    /// A call an `allow` rule of `from` decides: it runs without asking (even when
    /// `requireApproval` lists its tool); the mode stays.
    RuleAllow,
    /// A plan submitted in `from`, which has an `approvalTimeout`, is not decided by its
    /// deadline: it expires, not approved; the mode stays.
    Expire,
    /// A tool call waiting for approval in `from`, which has an `approvalTimeout`, is not
    /// decided by its deadline: it expires and never runs; the mode stays.
    ExpireTool,
    /// The model asks a question (`ask_user`, offered in `from`) and the user answers it: the
    /// answer goes to the tool's `resume` step and its result to the model; the mode stays.
    AnswerQuestion,
    /// Such a question is declined (dismissed with a rejection): the model is told the user did
    /// not answer; the mode stays.
    DeclineQuestion,
    /// The run is aborted while such a question waits: the model is told the user did not
    /// answer; the mode stays.
    AbortQuestion,
    /// Such a question, in a mode with an `approvalTimeout`, is not answered by its deadline:
    /// it expires unanswered; the mode stays.
    ExpireQuestion,
    /// A question and a call that waits for approval in one reply, each decided on its own
    /// (answered, approved): the answer is resumed, the call runs; the mode stays.
    AnswerBesideTool,
    /// In the planning mode `from`, a question is answered, then a plan is submitted and
    /// approved to `to`: the session hands over.
    AnswerThenApprove,
    /// A `subagent` call in `from` starts a child of a type the mode may start, which answers
    /// at once: its answer is the call's result; the mode stays.
    SubagentAnswers,
    /// A `subagent` call naming no type is refused with an error result, and no child starts;
    /// the mode stays.
    SubagentRefused,
    /// A child's call waits for approval (its type's `requireApproval` or rules, or the
    /// parent mode's) as a decision of the parent's session naming the subagent, and is
    /// approved: it runs in the child, which answers; the mode stays.
    ApproveChildTool,
    /// Such a child's call is rejected with feedback: it does not run, and the child answers;
    /// the mode stays.
    RejectChildTool,
    /// A child's question (`ask_user`) waits as a decision of the parent's session and is
    /// answered: the answer goes to the child's tool, and the child answers; the mode stays.
    AnswerChildQuestion,
    /// A child's call that waits for approval beside a call of the parent's that waits in the
    /// same reply: the run suspends once on both, each is approved, the parent's runs, then
    /// the child's, and the child answers; the mode stays.
    ChildBesideTool,
    /// The run is aborted while a child's call waits: the child is ended, its call not
    /// approved; the mode stays.
    AbortChild,
}

impl Cause {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether the edge is one of a subagent (a `subagent` call): a child that answers, a
    /// refused call, a child's call that waits and is approved, rejected, answered, waits
    /// beside the parent's, or is aborted.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::Cause;
    /// assert!(Cause::ChildBesideTool.is_subagent());
    /// assert!(!Cause::ApproveTool.is_subagent());
    /// ```
    pub fn is_subagent(self) -> bool {
        matches!(
            self,
            Cause::SubagentAnswers
                | Cause::SubagentRefused
                | Cause::ApproveChildTool
                | Cause::RejectChildTool
                | Cause::AnswerChildQuestion
                | Cause::ChildBesideTool
                | Cause::AbortChild
        )
    }

    /// Whether the edge is one of a question (`ask_user`): answered, declined, aborted,
    /// expired, answered beside a waiting call, or before a plan's approval.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::Cause;
    /// assert!(Cause::AnswerQuestion.is_question());
    /// assert!(!Cause::ApproveTool.is_question());
    /// ```
    pub fn is_question(self) -> bool {
        matches!(
            self,
            Cause::AnswerQuestion
                | Cause::DeclineQuestion
                | Cause::AbortQuestion
                | Cause::ExpireQuestion
                | Cause::AnswerBesideTool
                | Cause::AnswerThenApprove
        )
    }
}

/// One edge of the transition relation, by mode ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Edge {
    /// The mode the edge starts in.
    pub from: String,
    /// What fires it.
    pub cause: Cause,
    /// The mode the session is in afterwards.
    pub to: String,
}

impl fmt::Display for Edge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} --{}--> {}", self.from, self.cause, self.to)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IndexEdge {
    from: usize,
    cause: Cause,
    to: usize,
}

fn index_edges(facts: &ConfigFacts) -> Vec<IndexEdge> {
    let mut edges = Vec::new();
    for from in 0..facts.len() {
        let mut edge = |cause, to| edges.push(IndexEdge { from, cause, to });
        if facts.is_planning(from) {
            for to in facts.transition_targets(from) {
                edge(Cause::Approve, to);
            }
            for cause in [
                Cause::Reject,
                Cause::RejectWithFeedback,
                Cause::Abort,
                Cause::UserMessage,
            ] {
                edge(cause, from);
            }
            if facts.approval_timeout_ms(from).is_some() {
                edge(Cause::Expire, from);
            }
        }
        for to in (0..facts.len()).filter(|to| *to != from) {
            edge(Cause::Manual, to);
        }
        if !facts.approval_tools(from).is_empty() {
            for cause in [
                Cause::ApproveTool,
                Cause::RejectTool,
                Cause::AlwaysAllowTool,
            ] {
                edge(cause, from);
            }
            for to in (0..facts.len()).filter(|to| *to != from) {
                edge(Cause::ManualEndsAlwaysAllow, to);
            }
            if facts.approval_timeout_ms(from).is_some() {
                edge(Cause::ExpireTool, from);
            }
            if facts.is_planning(from) {
                for to in facts.transition_targets(from) {
                    edge(Cause::ApprovalEndsAlwaysAllow, to);
                }
            }
        }
        // Where the mode offers `ask_user` and no `deny` rule refuses its calls.
        let denied = facts
            .rule_for(from, ASK_USER)
            .is_some_and(|(_, action)| action == "deny");
        if facts.offers(from, ASK_USER) == Some(true) && !denied {
            for cause in [
                Cause::AnswerQuestion,
                Cause::DeclineQuestion,
                Cause::AbortQuestion,
            ] {
                edge(cause, from);
            }
            if facts.approval_timeout_ms(from).is_some() {
                edge(Cause::ExpireQuestion, from);
            }
            if !facts.approval_tools(from).is_empty() {
                edge(Cause::AnswerBesideTool, from);
            }
            if facts.is_planning(from) {
                for to in facts.transition_targets(from) {
                    edge(Cause::AnswerThenApprove, to);
                }
            }
        }
        if facts.offers(from, SUBAGENT) == Some(true) {
            edge(Cause::SubagentRefused, from);
            if startable(facts, from).is_some() {
                edge(Cause::SubagentAnswers, from);
            }
            if child_waiting(facts, from).is_some() {
                for cause in [
                    Cause::ApproveChildTool,
                    Cause::RejectChildTool,
                    Cause::AbortChild,
                ] {
                    edge(cause, from);
                }
                if !facts.approval_tools(from).is_empty() {
                    edge(Cause::ChildBesideTool, from);
                }
            }
            if child_asking(facts, from).is_some() {
                edge(Cause::AnswerChildQuestion, from);
            }
        }
        for (cause, action) in [
            (Cause::RuleDeny, "deny"),
            (Cause::RuleAsk, "ask"),
            (Cause::RuleAllow, "allow"),
        ] {
            if !facts.ruled_tools(from, action).is_empty() {
                edge(cause, from);
            }
        }
    }
    edges
}

/// The first subagent type `mode` may start.
fn startable(facts: &ConfigFacts, mode: usize) -> Option<String> {
    facts
        .subagent_types()
        .iter()
        .find(|t| facts.may_start(mode, &t.id))
        .map(|t| t.id.clone())
}

/// Every edge of the config's transition relation: for each planning mode an approval
/// hand-over to each of its targets and the four ways a plan is not approved (rejection with
/// and without feedback, abort, a user message); a manual switch between every ordered pair of
/// modes; and for each mode where a tool call waits for approval (`requireApproval`), the
/// approval, the rejection and the "always allow" of such a call, and a manual switch to every
/// other mode after an "always allow", which ends it (and, from a planning mode, the approval to
/// each of its targets after an "always allow", which ends it too). In a mode with an
/// `approvalTimeout`, the expiry of a plan and of a waiting tool call nobody decided in time.
/// For each mode with a rule that decides a call of one of its tools: a call each of its
/// `deny`, `ask` (approved) and `allow` rules decides. For each mode that offers `ask_user`: a
/// question answered, declined, aborted, expired (with an `approvalTimeout`), answered beside
/// a call that waits for approval (where one does), and, from a planning mode, answered before
/// a plan approved to each of its targets. For each mode that offers `subagent`: a call naming
/// no type (refused), a child that answers at once (where the mode may start a type), a
/// child's call that waits for approval approved, rejected, aborted and beside a call of the
/// parent's that waits (where one does), and a child's question answered.
pub fn edges(facts: &ConfigFacts) -> Vec<Edge> {
    index_edges(facts)
        .into_iter()
        .map(|e| named(facts, e))
        .collect()
}

fn named(facts: &ConfigFacts, e: IndexEdge) -> Edge {
    Edge {
        from: facts.id(e.from).to_owned(),
        cause: e.cause,
        to: facts.id(e.to).to_owned(),
    }
}

/// The operations that fire `edge` from a session in `edge.from` with nothing pending; they
/// leave nothing pending.
fn fire(facts: &ConfigFacts, edge: IndexEdge) -> Vec<Op> {
    let submit = Op::Message {
        calls: vec![Call::SubmitPlan(PlanFile::Valid(0))],
        then: Then::Text,
    };
    let decide = |action, feedback| Op::Decide {
        on: Subject::Plan {
            json: false,
            revision: Revision::Text,
            to: None,
            plan: None,
        },
        action,
        feedback,
        sha256: ShaChoice::Matching,
    };
    // The first tool that waits for approval in the edge's start mode.
    let waiting_tool = || {
        facts
            .approval_tools(edge.from)
            .into_iter()
            .next()
            .unwrap_or_default()
    };
    // The first tool a rule with `action` decides in the edge's start mode.
    let ruled_tool = |action: &str| {
        facts
            .ruled_tools(edge.from, action)
            .into_iter()
            .next()
            .unwrap_or_default()
    };
    let start = |child: ChildStep| {
        let agent_type = match &child {
            ChildStep::Answers => startable(facts, edge.from),
            ChildStep::Calls(tool) if tool == ASK_USER => child_asking(facts, edge.from),
            ChildStep::Calls(_) => child_waiting(facts, edge.from).map(|(t, _)| t),
        };
        Call::Subagent(SubagentCall::Start {
            agent_type: agent_type.unwrap_or_default(),
            child,
        })
    };
    let child_tool = || {
        ChildStep::Calls(
            child_waiting(facts, edge.from)
                .map(|(_, tool)| tool)
                .unwrap_or_default(),
        )
    };
    let message = |calls: Vec<Call>| Op::Message {
        calls,
        then: Then::Text,
    };
    match edge.cause {
        Cause::SubagentAnswers => vec![message(vec![start(ChildStep::Answers)])],
        Cause::SubagentRefused => vec![message(vec![Call::Subagent(SubagentCall::UnknownType)])],
        Cause::ApproveChildTool => vec![message(vec![start(child_tool())]), Op::approve_tool(0)],
        Cause::RejectChildTool => vec![
            message(vec![start(child_tool())]),
            Op::reject_tool(0, Some("use another path")),
        ],
        Cause::AbortChild => vec![message(vec![start(child_tool())]), Op::Abort],
        Cause::AnswerChildQuestion => vec![
            message(vec![start(ChildStep::Calls(ASK_USER.to_owned()))]),
            Op::answer_question(0),
        ],
        Cause::ChildBesideTool => vec![
            message(vec![start(child_tool()), Call::Tool(waiting_tool())]),
            Op::approve_tool(0),
            Op::approve_tool(1),
        ],
        Cause::RuleDeny => vec![Op::call(ruled_tool("deny"))],
        Cause::RuleAsk => vec![Op::call(ruled_tool("ask")), Op::approve_tool(0)],
        Cause::RuleAllow => vec![Op::call(ruled_tool("allow"))],
        Cause::Manual => vec![Op::switch(facts.id(edge.to))],
        Cause::ApproveTool => vec![Op::call(waiting_tool()), Op::approve_tool(0)],
        Cause::RejectTool => vec![
            Op::call(waiting_tool()),
            Op::reject_tool(0, Some("use another path")),
        ],
        Cause::AlwaysAllowTool => vec![
            Op::call(waiting_tool()),
            Op::always_allow_tool(0),
            // Allowed now: the next call runs without waiting.
            Op::call(waiting_tool()),
        ],
        Cause::ManualEndsAlwaysAllow => vec![
            Op::call(waiting_tool()),
            Op::always_allow_tool(0),
            Op::switch(facts.id(edge.to)),
        ],
        Cause::ApprovalEndsAlwaysAllow => vec![
            Op::call(waiting_tool()),
            Op::always_allow_tool(0),
            submit,
            Op::approve_to(facts.id(edge.to)),
        ],
        Cause::Approve if edge.to == facts.transition_target(edge.from) => {
            vec![submit, decide(DecisionAction::Approved, Feedback::Omitted)]
        }
        Cause::Approve => vec![submit, Op::approve_to(facts.id(edge.to))],
        Cause::Reject => vec![submit, decide(DecisionAction::Rejected, Feedback::Omitted)],
        Cause::RejectWithFeedback => vec![
            submit,
            decide(
                DecisionAction::Rejected,
                Feedback::Text("add tests".to_owned()),
            ),
        ],
        Cause::Abort => vec![submit, Op::Abort],
        Cause::Expire => vec![submit, Op::Wait(Until::Deadline), Op::ExpireIfDue],
        Cause::ExpireTool => vec![
            Op::call(waiting_tool()),
            Op::Wait(Until::Deadline),
            Op::ExpireIfDue,
        ],
        Cause::AnswerQuestion => vec![Op::ask(), Op::answer_question(0)],
        Cause::DeclineQuestion => vec![Op::ask(), Op::decline_question(0, Some("ask me later"))],
        Cause::AbortQuestion => vec![Op::ask(), Op::Abort],
        Cause::ExpireQuestion => vec![Op::ask(), Op::Wait(Until::Deadline), Op::ExpireIfDue],
        Cause::AnswerBesideTool => vec![
            Op::calls([ASK_USER.to_owned(), waiting_tool()]),
            Op::answer_question(0),
            Op::approve_tool(1),
        ],
        Cause::AnswerThenApprove => vec![
            Op::ask(),
            Op::answer_question(0),
            submit,
            Op::approve_to(facts.id(edge.to)),
        ],
        Cause::UserMessage => vec![
            submit,
            Op::Message {
                calls: Vec::new(),
                then: Then::Text,
            },
        ],
    }
}

/// A shortest path of edges from `start` to `goal` (breadth first, edges in config order).
fn shortest_path(
    edges: &[IndexEdge],
    n: usize,
    start: usize,
    goal: usize,
) -> Option<Vec<IndexEdge>> {
    let mut via: Vec<Option<IndexEdge>> = vec![None; n];
    let mut seen = vec![false; n];
    let mut queue = VecDeque::from([start]);
    seen[start] = true;
    while let Some(mode) = queue.pop_front() {
        if mode == goal {
            let mut path = Vec::new();
            let mut at = goal;
            while let Some(edge) = via[at] {
                path.push(edge);
                at = edge.from;
            }
            path.reverse();
            return Some(path);
        }
        for edge in edges.iter().filter(|e| e.from == mode) {
            if seen[edge.to] {
                continue;
            }
            seen[edge.to] = true;
            via[edge.to] = Some(*edge);
            queue.push_back(edge.to);
        }
    }
    None
}

/// Why an edge was not exercised.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Miss {
    /// No path from the default mode reaches the edge's start.
    Unreachable,
    /// The session diverged from the reference on the way or when firing: the session's start,
    /// the operations up to the one that diverged (the path to the edge, then the edge), and
    /// the divergence. [`crate::testing::Check::replay`] replays it.
    Diverged(Box<Counterexample>),
    /// The reference model could not fire the edge (a bug in the walk, not in the session).
    Reference(String),
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Miss::Unreachable => write!(f, "unreachable from the default mode"),
            Miss::Diverged(c) => write!(f, "diverged:\n{c}"),
            Miss::Reference(e) => write!(f, "the reference model could not fire it: {e}"),
        }
    }
}

/// The result of an edge walk: every edge, and those not exercised with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeReport {
    /// Every edge of the relation, in walk order.
    pub edges: Vec<Edge>,
    /// The edges not exercised, with why.
    pub missed: Vec<(Edge, Miss)>,
}

impl EdgeReport {
    /// The number of edges.
    pub fn total(&self) -> usize {
        self.edges.len()
    }

    /// The number of edges reached and fired with the session matching the reference.
    pub fn covered(&self) -> usize {
        self.edges.len() - self.missed.len()
    }

    /// Whether every edge was exercised.
    pub fn is_complete(&self) -> bool {
        self.missed.is_empty()
    }

    /// Adds another report's edges (for a total over several configs).
    pub fn merge(&mut self, other: EdgeReport) {
        self.edges.extend(other.edges);
        self.missed.extend(other.missed);
    }
}

impl fmt::Display for EdgeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "edges covered: {}/{}", self.covered(), self.total())?;
        for (edge, miss) in &self.missed {
            match miss {
                Miss::Diverged(c) => write!(f, "\n  diverged at edge {edge}:\n{c}")?,
                other => write!(f, "\n  not exercised: {edge}: {other}")?,
            }
        }
        Ok(())
    }
}

/// Walks every edge of `harness`'s config: for each, a fresh session in the default mode
/// follows a shortest path to the edge's start, fires the edge, and every step is compared
/// with a [`ReferenceSession`]; with a session store on the controller, the process then
/// restarts and the restored session is compared too. An edge counts as covered when all
/// steps matched and the session ended in the edge's target. A miss is recorded and the walk
/// goes on.
pub fn walk_edges(harness: &mut Harness) -> EdgeReport {
    let facts = &harness.facts().clone();
    let all = index_edges(facts);
    let mut report = EdgeReport {
        edges: all.iter().map(|e| named(facts, *e)).collect(),
        missed: Vec::new(),
    };
    for edge in &all {
        if let Err(miss) = walk_one(harness, facts, &all, *edge) {
            report.missed.push((named(facts, *edge), miss));
        }
    }
    report
}

fn walk_one(
    harness: &mut Harness,
    facts: &std::sync::Arc<ConfigFacts>,
    all: &[IndexEdge],
    edge: IndexEdge,
) -> Result<(), Miss> {
    let restarts = harness.controller().store().is_some();
    let mut reference = ReferenceSession::new(facts.clone(), None).with_restarts(restarts);
    let path =
        shortest_path(all, facts.len(), reference.mode(), edge.from).ok_or(Miss::Unreachable)?;
    let start = facts.id(reference.mode()).to_owned();
    let diverged = |ops: &[Op], divergence| {
        Miss::Diverged(Box::new(Counterexample {
            start: start.clone(),
            ops: ops.to_vec(),
            divergence,
            hooks: Default::default(),
        }))
    };
    harness.start(&reference).map_err(|d| diverged(&[], d))?;
    let restart = restarts.then_some(Op::Restart);
    let ops: Vec<Op> = path
        .into_iter()
        .chain([edge])
        .flat_map(|e| fire(facts, e))
        .chain(restart)
        .collect();
    for (i, op) in ops.iter().enumerate() {
        if !reference.can_apply(op) {
            return Err(Miss::Reference(format!("{op:?} does not apply")));
        }
        reference.apply(op);
        harness
            .step(&reference)
            .map_err(|d| diverged(&ops[..=i], d))?;
    }
    if reference.mode() != edge.to {
        return Err(Miss::Reference(format!(
            "the reference ended in `{}`",
            facts.id(reference.mode())
        )));
    }
    Ok(())
}
