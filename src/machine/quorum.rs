//! The quorum's rule (`approvers = N` on a mode, [`crate::quorum`]): the one place it is
//! applied, for every host. An approval short of the quorum is recorded on the pending
//! decision, which keeps waiting; the approval that completes it applies the decision; a
//! rejection by any one rejects. Each approval needs an identity, one per identity (a name that
//! reads as one that approved already, [`crate::display::look_alike`], is that one); an
//! always-allow and an edited plan are refused under a quorum.

use super::change::Change;
use super::decision::{Decision, DecisionAction};
use super::error::SessionError;
use super::next::Next;
use super::pending::PendingDecision;
use crate::event::WaitTerms;
use crate::quorum::{Approval, QuorumError, identity};

/// What the quorum's rule says of a decision on what waits.
pub(crate) enum Counted {
    /// No quorum, or the decision completes it (or rejects): apply it, recording these
    /// approvals (empty without a quorum) in its audit record.
    Apply(Vec<Approval>),
    /// An approval short of the quorum, recorded on the pending decision: it keeps waiting.
    Waits(Next),
}

impl Change<'_> {
    /// The quorum's rule for `decision` on what waits at `index`: refuses what a quorum does
    /// not take (an approval without an identity, a second one by the same identity, an
    /// always-allow, an edited plan), records an approval short of the quorum on the pending
    /// decision, and otherwise says to apply the decision with the approvals given.
    ///
    /// # Errors
    /// [`SessionError::Quorum`]; nothing changes.
    pub(crate) fn count_approval(
        &mut self,
        index: usize,
        decision: &Decision,
    ) -> Result<Counted, SessionError> {
        let at = self.now_rfc3339();
        let Some(pending) = self.state.pending.get_mut(index) else {
            return Err(SessionError::NotSuspended(String::new()));
        };
        let (run_id, sha256) = match &*pending {
            PendingDecision::Plan(p) => (p.run_id.clone(), p.payload.submission.sha256.clone()),
            PendingDecision::ToolCall(c) => (c.run_id.clone(), c.payload.args_sha256.clone()),
            // A call its tool suspended is answered, never put to a quorum.
            PendingDecision::Suspension(_) => return Ok(Counted::Apply(Vec::new())),
        };
        let Some(terms) = terms_mut(pending) else {
            return Ok(Counted::Apply(Vec::new()));
        };
        let Some(needed) = terms.approvers_needed.filter(|&n| n > 1) else {
            return Ok(Counted::Apply(Vec::new()));
        };
        let given = || Approval {
            by: identity(decision.decided_by.as_deref())
                .unwrap_or_default()
                .to_owned(),
            at: at.clone(),
            via: decision.via,
            sha256: Some(sha256.clone()),
        };
        if decision.action != DecisionAction::Approved {
            // A rejection by any one rejects: the approvals given so far go in its record.
            return Ok(Counted::Apply(terms.approvals.clone()));
        }
        if decision.always_allow {
            return Err(QuorumError::AllowanceUnderQuorum { needed }.into());
        }
        if decision.plan.is_some() {
            return Err(QuorumError::EditUnderQuorum { needed }.into());
        }
        let Some(by) = identity(decision.decided_by.as_deref()) else {
            return Err(QuorumError::NoIdentity { needed }.into());
        };
        // The same name, or one that reads as it (a Cyrillic `а`, a zero-width space): the
        // record would show one person twice.
        if let Some(already) = terms
            .approvals
            .iter()
            .find(|a| a.by == by || crate::display::look_alike(&a.by, by))
        {
            return Err(QuorumError::SameIdentity {
                by: already.by.clone(),
                needed,
                have: terms.approvals.len(),
            }
            .into());
        }
        terms.approvals.push(given());
        if terms.approvals.len() >= usize::from(needed) {
            return Ok(Counted::Apply(terms.approvals.clone()));
        }
        // Short of the quorum: the decision keeps waiting, with this approval on it.
        Ok(Counted::Waits(match &*pending {
            PendingDecision::Plan(p) => Next::SuspendedOnPlan {
                run_id,
                tool_call_id: p.tool_call_id.clone(),
                payload: Box::new(p.payload.clone()),
            },
            _ => Next::WaitsOnToolCalls(run_id),
        }))
    }
}

/// Whether what waits needs approvals by more than one identity (`approvers` above 1): then
/// only people's approvals count, never a hook's allow or a reviewer's approval.
pub(crate) fn under_quorum(pending: &PendingDecision) -> bool {
    let terms = match pending {
        PendingDecision::Plan(p) => &p.payload.terms,
        PendingDecision::ToolCall(c) => &c.payload.terms,
        PendingDecision::Suspension(_) => return false,
    };
    terms.approvers_needed.is_some_and(|n| n > 1)
}

/// The terms of a plan or a tool call waiting for approval, to record an approval on (`None`
/// for a call its tool suspended: it is answered).
fn terms_mut(pending: &mut PendingDecision) -> Option<&mut WaitTerms> {
    match pending {
        PendingDecision::Plan(p) => Some(&mut p.payload.terms),
        PendingDecision::ToolCall(c) => Some(&mut c.payload.terms),
        PendingDecision::Suspension(_) => None,
    }
}
