//! Applying a plan's deadline to a live session ([`Session::expire_if_due`]): the session side
//! of [`crate::deadline`].

use crate::event::{DecidedRecord, DecisionOutcome};
use crate::machine::error::expired_error;
use crate::machine::expiry::{self, Waiting};
use crate::machine::input::Input;

use super::{PendingDecision, Session, SessionError};

/// What the expiry reads of `pending`.
fn waiting(pending: &PendingDecision) -> Waiting<'_> {
    match pending {
        PendingDecision::ToolCall(c) => Waiting::ToolCall {
            run_id: &c.run_id,
            tool_call_id: &c.tool_call_id,
            payload: &c.payload,
            decided: c.decided.as_ref(),
            feedback: c.feedback.as_deref(),
        },
        PendingDecision::Plan(p) => Waiting::Plan {
            run_id: &p.run_id,
            tool_call_id: &p.tool_call_id,
            payload: &p.payload,
        },
    }
}

impl Session {
    /// Applies the deadline of what the session waits for: if the pending plan's deadline, or
    /// that of a tool call waiting for approval, has passed (by the controller's clock,
    /// [`crate::controller::AgentControllerBuilder::clock`]), it expires and counts as rejected (see
    /// [`crate::deadline`]): `agent_start`; `tool_end` with the result for the model and the
    /// audit record (outcome `expired`) for the plan, or for each call of the reply (an expired
    /// call; one approved while it waited never runs, [`crate::deadline::APPROVED_NOT_RUN_RESULT`];
    /// one rejected gets its rejection); `agent_end` (`completed`). The mode stays, no model
    /// call is made. Returns the audit records of what this call expired (empty when nothing
    /// was due).
    ///
    /// Every operation of the session does this first, so a host needs it only to apply a
    /// deadline without doing anything else (from a timer, say, to show the expiry at once).
    ///
    /// # Errors
    /// [`SessionError::Store`] when the expiry cannot be saved, with
    /// [`crate::store::StoreError::Conflict`] when another host changed the session first (it may have
    /// applied the expiry: restore the session to see); nothing changes.
    pub async fn expire_if_due(&mut self) -> Result<Vec<DecidedRecord>, SessionError> {
        let before = self.state.history.len();
        // Settling applies the deadline (after what a dropped operation left behind).
        self.settle().await?;
        Ok(self
            .state
            .history
            .get(before..)
            .unwrap_or_default()
            .iter()
            .filter(|r| r.outcome == Some(DecisionOutcome::Expired))
            .cloned()
            .collect())
    }

    /// [`Session::expire_if_due`] without settling a dropped operation first: applies what
    /// [`crate::machine::expiry::expire`] says to the session and saves it.
    pub(crate) async fn apply_expiry(&mut self) -> Result<Vec<DecidedRecord>, SessionError> {
        let now = self.shared.now_ms();
        let Some(expiry) = expiry::expire(self.state.pending.iter().map(waiting), now) else {
            return Ok(Vec::new());
        };
        let Some(run_id) = self.state.pending.first().map(|p| p.run_arc().clone()) else {
            return Ok(Vec::new());
        };
        let expired = expiry.expired();
        tracing::info!(session_id = %self.id, expired = expired.len(), "no decision by the deadline: expired");
        self.handle(Input::Deadline { run_id, expiry }).await?;
        Ok(expired)
    }
}

impl Session {
    /// Whether the decision `decision_id` (else the latest settled one) expired: its deadline
    /// passed before anyone decided it, so it counts as rejected and deciding it is refused.
    /// Returns that refusal ([`SessionError::Expired`], as [`Session::decide`] gives it), or
    /// `None` when the decision did not expire (or was never settled). For a host that finds
    /// nothing pending and tells the user why (the CLI's `decide`).
    pub fn expired(&self, decision_id: Option<&str>) -> Option<SessionError> {
        let history = self.decision_history();
        let record = match decision_id {
            Some(id) => history.iter().rfind(|d| d.decision_id == id)?,
            None => history.last()?,
        };
        expired_error(record)
    }
}
