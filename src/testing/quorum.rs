//! Quorum in the kit (`approvers = N` on a mode or on an `ask` rule, issue 41): the reference
//! model's own statement of the rule, and what the harness does to drive it.
//!
//! The rule, as the reference states it (independently of `src/machine/quorum.rs`):
//!
//! - a plan submitted in a mode, or a call of it waiting for approval, needs as many approvals
//!   by distinct identities as the mode's `approvers`, or the `ask` rule's that held the call,
//!   whichever is higher ([`ConfigFacts::plan_quorum`], [`ConfigFacts::call_quorum`]);
//! - an approval short of the quorum leaves it waiting; the same identity approving twice is
//!   refused; the approval that completes the quorum applies it;
//! - a rejection by any one rejects, as without a quorum;
//! - an always-allow and an edited plan are refused under a quorum ([`Refusal::Quorum`]), and
//!   nothing changes;
//! - a hook's allow never counts toward it: the call waits for the people
//!   ([`quorum_holds_hook_allow`]).
//!
//! One approving operation of the kit under a quorum of N is N host calls: the harness gives
//! the approvals of [`approver`] 1 to N−1 first, checking that each leaves the decision waiting
//! and that approver 1 approving again is refused; the operation's own call carries approver
//! N ([`QuorumStep`]) and must do what the reference predicts for the completed quorum.
//! Not modelled: the calls a subagent's child makes (a child's waiting call is given no
//! quorum here; the kit's quorum configs have no subagents).

use serde_json::Value;

use super::facts::ConfigFacts;
use super::reference::{Action, Outcome, ReferenceSession, Refusal, RunRef};
use crate::run::{Decision, DecisionAction};

/// The prefix of the identities the kit approves as: `kit-approver-1`, `kit-approver-2`, ….
pub const KIT_APPROVER: &str = "kit-approver";

/// The identity of the kit's `n`th approver under a quorum.
///
/// # Examples
/// ```
/// use agent_controller::testing::approver;
/// assert_eq!(approver(2), "kit-approver-2");
/// ```
pub fn approver(n: u8) -> String {
    format!("{KIT_APPROVER}-{n}")
}

/// An approval under a quorum, as one kit operation: the quorum it completes. The harness
/// gives approvals 1 to `needed − 1` first (each leaves the decision waiting; approver 1 again
/// is refused), then the step's own host call as approver `needed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuorumStep {
    /// How many approvals by distinct identities the decision needs (above 1).
    pub needed: u8,
}

/// Whether a hook's allow on a call of `tool` in `mode` is held back: the call needs a quorum,
/// to which a hook never counts.
pub(crate) fn quorum_holds_hook_allow(facts: &ConfigFacts, mode: usize, tool: &str) -> bool {
    facts.call_quorum(mode, tool) > 1
}

/// `action` decided as identity `by` (`decidedBy`; in JSON resume data, its `decidedBy` key).
pub(crate) fn as_identity(action: &Action, by: &str) -> Action {
    let named = |decision: &Decision| Decision {
        decided_by: Some(by.to_owned()),
        ..decision.clone()
    };
    match action {
        Action::Resume {
            run,
            tool_call_id,
            decision,
        } => Action::Resume {
            run: run.clone(),
            tool_call_id: tool_call_id.clone(),
            decision: named(decision),
        },
        Action::Decide {
            decision_id,
            decision,
        } => Action::Decide {
            decision_id: decision_id.clone(),
            decision: named(decision),
        },
        Action::ResumeJson {
            run,
            tool_call_id,
            data,
        } => {
            let mut data = data.clone();
            if let Value::Object(map) = &mut data {
                map.insert("decidedBy".to_owned(), Value::String(by.to_owned()));
            }
            Action::ResumeJson {
                run: run.clone(),
                tool_call_id: tool_call_id.clone(),
                data,
            }
        }
        other => other.clone(),
    }
}

/// The decision `action` carries, when it decides (from JSON resume data, when that reads as
/// one).
fn decision_of(action: &Action) -> Option<Decision> {
    match action {
        Action::Resume { decision, .. } | Action::Decide { decision, .. } => Some(decision.clone()),
        Action::ResumeJson { data, .. } => serde_json::from_value(data.clone()).ok(),
        _ => None,
    }
}

/// How many approvals by distinct identities what `action` addresses needs, in `before` (the
/// session before the action): the pending plan's, or the waiting call's; 1 for anything else
/// (a question, a child's call, an unknown id).
fn needed(before: &ReferenceSession, action: &Action) -> u8 {
    let facts = before.facts();
    let mode = before.mode();
    let (run, id) = match action {
        Action::Resume {
            run, tool_call_id, ..
        }
        | Action::ResumeJson {
            run, tool_call_id, ..
        } => (Some(run), tool_call_id.as_str()),
        Action::Decide { decision_id, .. } => (None, decision_id.as_str()),
        _ => return 1,
    };
    let same_run = |ordinal: usize| run.is_none_or(|r| *r == RunRef::Run(ordinal));
    if let Some(plan) = before.pending()
        && run.is_some()
        && plan.tool_call_id == id
        && same_run(plan.run)
    {
        return facts.plan_quorum(mode);
    }
    before
        .waiting()
        .iter()
        .find(|w| {
            let by_id = if run.is_some() {
                w.tool_call_id == id
            } else {
                w.decision_id == id
            };
            by_id && same_run(w.run)
        })
        .filter(|w| w.asks.is_none() && w.child.is_none() && w.decided.is_none())
        .map_or(1, |w| facts.call_quorum(mode, &w.tool))
}

/// The quorum's say on one step, the reference's `before` it and what it predicts without a
/// quorum (`action`, `outcome`): `None` when no quorum applies (no approval, a quorum of 1, or
/// the decision refused anyway); else the refusal of an always-allow or an edited plan
/// (`Err`: nothing changes), or the approval's [`QuorumStep`] with `action` carrying approver
/// N (`Ok`).
pub(crate) fn ruled(
    before: &ReferenceSession,
    action: &Action,
    outcome: &Outcome,
) -> Option<Result<(QuorumStep, Action), Refusal>> {
    // The decision's own checks (its ids, its sha256, its target, its edit's text) come
    // first; a store that cannot keep a workspace allowance comes after the quorum.
    let store = *outcome == Outcome::Refused(Refusal::Store);
    if matches!(outcome, Outcome::Refused(_) | Outcome::NoDecision) && !store {
        return None;
    }
    let decision = decision_of(action)?;
    if decision.action != DecisionAction::Approved {
        // A rejection by any one rejects: as without a quorum.
        return None;
    }
    let needed = needed(before, action);
    if needed <= 1 {
        return None;
    }
    if decision.always_allow || decision.plan.is_some() {
        return Some(Err(Refusal::Quorum));
    }
    if store {
        return None;
    }
    Some(Ok((
        QuorumStep { needed },
        as_identity(action, &approver(needed)),
    )))
}
