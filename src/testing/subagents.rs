//! The kit's `subagent` calls: what the kit's model asks a `subagent` call to start, and what
//! the child it starts does (the same scripted model answers the parent and the child).

use serde_json::{Value, json};

use super::facts::ConfigFacts;
use crate::tool::ASK_USER;

/// The task every kit call of `subagent` that starts a child gives it.
pub const SUBAGENT_TASK: &str = "Look around and report.";

/// The final text of every kit child: the result its parent's `subagent` call gets.
pub const CHILD_ANSWER: &str = "The subagent's report.";

/// An `agentType` no config of the kit's tests has: a call naming it is refused.
pub const UNKNOWN_SUBAGENT: &str = "not_a_subagent_type";

/// What the kit's child does once started ([`SubagentCall::Start`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChildStep {
    /// It answers at once with [`CHILD_ANSWER`].
    Answers,
    /// It calls this tool (with `{}`; `ask_user` asks the kit's question), then answers
    /// [`CHILD_ANSWER`] once the call has its result. A call the child's type or the parent's
    /// mode makes wait, and its `ask_user`, wait for the user as the parent's pending
    /// decisions, naming the subagent.
    Calls(String),
}

/// A `subagent` call of the kit's model.
///
/// # Examples
/// ```
/// use agent_controller::testing::{ChildStep, SubagentCall, SUBAGENT_TASK};
/// let call = SubagentCall::Start { agent_type: "explore".to_owned(), child: ChildStep::Answers };
/// assert_eq!(call.args()["agentType"], "explore");
/// assert_eq!(call.args()["task"], SUBAGENT_TASK);
/// assert_eq!(SubagentCall::EmptyTask("explore".to_owned()).args()["task"], "");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SubagentCall {
    /// `agentType` names `agent_type`, with [`SUBAGENT_TASK`]: where the mode may start the
    /// type, the child runs and does `child`; elsewhere (a type the mode's `subagents` list
    /// leaves out) the call is refused with an error result.
    Start {
        /// The type id.
        agent_type: String,
        /// What the child does.
        child: ChildStep,
    },
    /// `agentType` names no type ([`UNKNOWN_SUBAGENT`]): refused with an error result.
    UnknownType,
    /// An empty task for the type with this id: refused with an error result.
    EmptyTask(String),
}

impl SubagentCall {
    /// The call's arguments.
    pub fn args(&self) -> Value {
        match self {
            SubagentCall::Start { agent_type, .. } => {
                json!({ "agentType": agent_type, "task": SUBAGENT_TASK })
            }
            SubagentCall::UnknownType => {
                json!({ "agentType": UNKNOWN_SUBAGENT, "task": SUBAGENT_TASK })
            }
            SubagentCall::EmptyTask(agent_type) => json!({ "agentType": agent_type, "task": "" }),
        }
    }
}

/// The subagent a waiting call comes from, as the reference holds it
/// ([`crate::subagent::SubagentOrigin`], what the kit compares of it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ChildOrigin {
    /// The child's type (`agentType`).
    pub agent_type: String,
    /// The id of the parent's `subagent` call that started the child.
    pub parent_call_id: String,
}

/// The first type `mode` may start and tool whose call in a child of it waits for approval
/// (an `ask` rule of the child's, or a `requireApproval` no allowance passes: none is in force
/// on a shortest path).
pub(crate) fn child_waiting(facts: &ConfigFacts, mode: usize) -> Option<(String, String)> {
    facts
        .subagent_types()
        .iter()
        .filter(|t| facts.may_start(mode, &t.id))
        .find_map(|t| {
            facts
                .child_tools(mode, &t.id)
                .into_iter()
                .filter(|tool| tool != ASK_USER)
                .find(|tool| match facts.child_rule_for(mode, &t.id, tool) {
                    Some((_, action)) => action == "ask",
                    None => facts.child_requires_approval(mode, &t.id, tool),
                })
                .map(|tool| (t.id.clone(), tool))
        })
}

/// The first type `mode` may start whose child asks questions (`ask_user` offered, no `deny`
/// rule on it).
pub(crate) fn child_asking(facts: &ConfigFacts, mode: usize) -> Option<String> {
    facts
        .subagent_types()
        .iter()
        .filter(|t| facts.may_start(mode, &t.id))
        .find(|t| {
            facts
                .child_tools(mode, &t.id)
                .iter()
                .any(|tool| tool == ASK_USER)
                && facts
                    .child_rule_for(mode, &t.id, ASK_USER)
                    .is_none_or(|(_, action)| action != "deny")
        })
        .map(|t| t.id.clone())
}
