//! Quorum in the kit (`approvers = N` on a mode or on an `ask` rule, issue 41): the reference
//! model's own statement of the rule, and what the harness does to drive it.
//!
//! The rule, as the reference states it (independently of `src/machine/quorum.rs`):
//!
//! - a plan submitted in a mode, or a call of it waiting for approval, needs as many approvals
//!   by distinct identities as the mode's `approvers`, or the `ask` rule's that held the call,
//!   whichever is higher ([`ConfigFacts::plan_quorum`], [`ConfigFacts::call_quorum`]);
//!   the reference applies it in `ReferenceSession::apply` (`quorum_ruled` in `reference.rs`);
//! - an approval short of the quorum leaves it waiting; the same identity approving twice is
//!   refused; the approval that completes the quorum applies it;
//! - a rejection by any one rejects, as without a quorum;
//! - an always-allow and an edited plan are refused under a quorum ([`super::reference::Refusal::Quorum`]), and
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

use super::facts::ConfigFacts;

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
