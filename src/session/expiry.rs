//! Applying a plan's deadline to a live session ([`Session::expire_if_due`]): the session side
//! of [`crate::deadline`].

use crate::deadline::{expired_record, expired_result, is_due};
use crate::event::{DecidedRecord, DecisionOutcome, Event, RunState};
use crate::model::Message;
use crate::tool::SUBMIT_PLAN;

use super::{Session, SessionError};

/// The error for a decision of `decision_id` that names a plan which expired (its history
/// record), or `None` when that record is not an expiry.
pub(crate) fn expired_error(record: &DecidedRecord) -> Option<SessionError> {
    (record.outcome == Some(DecisionOutcome::Expired)).then(|| SessionError::Expired {
        decision_id: record.decision_id.clone(),
        deadline_at: record.decided_at.clone().unwrap_or_default(),
    })
}

impl Session {
    /// Applies the deadline of the pending plan: if it has passed (by the controller's clock,
    /// [`crate::AgentControllerBuilder::clock`]), the plan expires and counts as rejected (see
    /// [`crate::deadline`]): `agent_start`, `tool_end` of `submit_plan` with the result
    /// [`expired_result`] and the audit record (outcome `expired`), `agent_end` (`completed`);
    /// the mode stays, no model call is made. Returns the audit record when this call expired
    /// the plan, `None` when nothing was due.
    ///
    /// Every operation of the session does this first, so a host needs it only to apply a
    /// deadline without doing anything else (from a timer, say, to show the expiry at once).
    ///
    /// # Errors
    /// [`SessionError::Store`] when the expiry cannot be saved, with
    /// [`crate::StoreError::Conflict`] when another host changed the session first (it may have
    /// applied the expiry: restore the session to see); nothing changes.
    pub async fn expire_if_due(&mut self) -> Result<Option<DecidedRecord>, SessionError> {
        let before = self.history.len();
        // Settling applies the deadline (after what a dropped operation left behind).
        self.settle().await?;
        Ok(self
            .history
            .get(before..)
            .and_then(|new| {
                new.iter()
                    .find(|r| r.outcome == Some(DecisionOutcome::Expired))
            })
            .cloned())
    }

    /// [`Session::expire_if_due`] without settling a dropped operation first.
    pub(crate) async fn apply_expiry(&mut self) -> Result<Option<DecidedRecord>, SessionError> {
        let now = self.shared.now_ms();
        if !self
            .pending
            .as_ref()
            .is_some_and(|p| is_due(&p.payload, now))
        {
            return Ok(None);
        }
        // The checkpoint must hold the pending plan.
        self.begin();
        let Some(pending) = self.pending.take() else {
            return Ok(None);
        };
        let run_id = pending.run_id.clone();
        let result = expired_result(&pending.payload);
        // The suspended run resumes to end: its events lie between `agent_start` and `agent_end`.
        let mode_id = self.mode_arc();
        self.emit(Event::AgentStart {
            run_id: run_id.clone(),
            mode_id,
        });
        let record = expired_record(&run_id, &pending.tool_call_id, &pending.payload);
        self.history.push(record.clone());
        self.emit(Event::ToolEnd {
            run_id: run_id.clone(),
            tool_call_id: pending.tool_call_id.clone(),
            tool_name: SUBMIT_PLAN.to_owned(),
            result: result.clone(),
            is_error: false,
            decision: Some(record.clone()),
        });
        self.messages.push(Message::Tool {
            tool_call_id: pending.tool_call_id,
            tool_name: SUBMIT_PLAN.to_owned(),
            content: result,
            is_error: false,
        });
        tracing::info!(session_id = %self.id, decision_id = %record.decision_id, "the plan expired: no decision by its deadline");
        self.close_run(&run_id, RunState::Completed, None);
        self.commit().await?;
        Ok(Some(record))
    }
}
