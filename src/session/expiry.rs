//! Applying a plan's deadline to a live session ([`Session::expire_if_due`]): the session side
//! of [`crate::deadline`].

use crate::deadline::{
    expired_record, expired_result, is_due, settle_expired_calls, tool_call_is_due,
};
use crate::event::{DecidedRecord, DecisionOutcome, Event, RunState};
use crate::model::Message;
use crate::tool::SUBMIT_PLAN;

use super::{PendingDecision, Session, SessionError};

/// The error for a decision of `decision_id` that names a plan which expired (its history
/// record), or `None` when that record is not an expiry.
pub(crate) fn expired_error(record: &DecidedRecord) -> Option<SessionError> {
    (record.outcome == Some(DecisionOutcome::Expired)).then(|| SessionError::Expired {
        decision_id: record.decision_id.clone(),
        deadline_at: record.decided_at.clone().unwrap_or_default(),
        tool_name: record.tool_name.clone(),
    })
}

impl Session {
    /// Applies the deadline of what the session waits for: if the pending plan's deadline, or
    /// that of a tool call waiting for approval, has passed (by the controller's clock,
    /// [`crate::AgentControllerBuilder::clock`]), it expires and counts as rejected (see
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
    /// [`crate::StoreError::Conflict`] when another host changed the session first (it may have
    /// applied the expiry: restore the session to see); nothing changes.
    pub async fn expire_if_due(&mut self) -> Result<Vec<DecidedRecord>, SessionError> {
        let before = self.history.len();
        // Settling applies the deadline (after what a dropped operation left behind).
        self.settle().await?;
        Ok(self
            .history
            .get(before..)
            .unwrap_or_default()
            .iter()
            .filter(|r| r.outcome == Some(DecisionOutcome::Expired))
            .cloned()
            .collect())
    }

    /// [`Session::expire_if_due`] without settling a dropped operation first.
    pub(crate) async fn apply_expiry(&mut self) -> Result<Vec<DecidedRecord>, SessionError> {
        let now = self.shared.now_ms();
        let plan_due = self.pending.iter().any(|p| match p {
            PendingDecision::Plan(plan) => is_due(&plan.payload, now),
            PendingDecision::ToolCall(_) => false,
        });
        let calls_due = self.pending.iter().any(|p| match p {
            PendingDecision::ToolCall(c) => tool_call_is_due(&c.payload, c.decided.as_ref(), now),
            PendingDecision::Plan(_) => false,
        });
        if !plan_due && !calls_due {
            return Ok(Vec::new());
        }
        // The checkpoint must hold what is pending.
        self.begin();
        let expired = if plan_due {
            self.expire_plan()
        } else {
            self.expire_tool_calls()
        };
        tracing::info!(session_id = %self.id, expired = expired.len(), "no decision by the deadline: expired");
        self.commit().await?;
        Ok(expired)
    }

    /// Expires the pending plan; the caller saves the change.
    fn expire_plan(&mut self) -> Vec<DecidedRecord> {
        let Some(PendingDecision::Plan(pending)) = self.pending.pop() else {
            return Vec::new();
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
        self.close_run(&run_id, RunState::Completed, None);
        vec![record]
    }

    /// Expires the tool calls waiting for approval (each undecided one; none of the reply's
    /// calls runs); the caller saves the change.
    fn expire_tool_calls(&mut self) -> Vec<DecidedRecord> {
        let calls: Vec<_> = std::mem::take(&mut self.pending)
            .into_iter()
            .filter_map(|p| match p {
                PendingDecision::ToolCall(call) => Some(call),
                PendingDecision::Plan(_) => None,
            })
            .collect();
        let Some(run_id) = calls.first().map(|c| c.run_id.clone()) else {
            return Vec::new();
        };
        let mode_id = self.mode_arc();
        self.emit(Event::AgentStart {
            run_id: run_id.clone(),
            mode_id,
        });
        let settled = settle_expired_calls(calls.iter().map(|c| {
            (
                &*c.run_id,
                c.tool_call_id.as_str(),
                &c.payload,
                c.decided.as_ref(),
                c.feedback.as_deref(),
            )
        }));
        let mut expired = Vec::new();
        for call in settled {
            self.emit(Event::ToolEnd {
                run_id: run_id.clone(),
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                result: call.result.clone(),
                is_error: true,
                decision: Some(call.record.clone()),
            });
            self.messages.push(Message::Tool {
                tool_call_id: call.tool_call_id,
                tool_name: call.tool_name,
                content: call.result,
                is_error: true,
            });
            if call.record.outcome == Some(DecisionOutcome::Expired) {
                expired.push(call.record.clone());
            }
            self.history.push(call.record);
        }
        self.close_run(&run_id, RunState::Completed, None);
        expired
    }
}
