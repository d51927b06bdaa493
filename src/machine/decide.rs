//! The `Decide` input: a checked decision applied to what waits ([`Change::decide`]), the one
//! place a decision of any kind is applied: the next state, its events, and what the driver
//! does next ([`Next`]).

use std::sync::Arc;

use super::change::Change;
use super::check::Checked;
use super::decision::{Decision, DecisionAction};
use super::error::SessionError;
use super::input::Next;
use super::pending::{PendingDecision, PendingPlan, PendingToolCall};
use super::state::State;
use crate::event::{DecidedRecord, DecisionOutcome, ModeChangeReason, RunState};
use crate::mode::ModeId;
use crate::model::{ModelError, ModelErrorKind};
use crate::tool::SUBMIT_PLAN;
use crate::tool::ToolOutput;
use crate::tool::submit_plan::{self, REJECTED_RESULT};

/// An approved tool call with its audit record, to run once every call of its reply is decided.
pub(crate) type Approved = (PendingToolCall, DecidedRecord);

/// What the decision of a plan did, for the driver to carry on: the run it resumed, whether
/// it ended the run (a rejection without feedback), or the revision limit that failed it.
struct PlanDecided {
    run_id: Arc<str>,
    ends_run: bool,
    limit: Option<ModelError>,
}

impl Change<'_> {
    /// The `Decide` input: applies `decision`, checked by [`super::check::check`] into
    /// `checked`, to what waits at `index`, the one place a decision of any kind is applied.
    /// Next: wait for the other calls of the reply, the run ended, or it resumes (run the
    /// approved calls, then call the model).
    ///
    /// # Errors
    /// [`SessionError::NotSuspended`] when nothing waits at `index`; nothing changes.
    pub(crate) fn decide(
        &mut self,
        index: usize,
        decision: Decision,
        checked: Checked,
    ) -> Result<Next, SessionError> {
        match self.state.pending.get(index) {
            Some(PendingDecision::ToolCall(_)) => {
                let (run_id, approved) = self.decide_tool_call(index, decision)?;
                Ok(match approved {
                    Some(calls) => Next::RunApproved { run_id, calls },
                    None => Next::WaitsOnToolCalls(run_id),
                })
            }
            Some(PendingDecision::Plan(_)) => {
                let decided = self.decide_plan(index, decision, checked)?;
                let run_id = decided.run_id;
                Ok(match decided.limit {
                    Some(error) => Next::Ended {
                        run_id,
                        error: Some(error),
                    },
                    None if decided.ends_run => Next::Ended {
                        run_id,
                        error: None,
                    },
                    None => Next::CallModel(run_id),
                })
            }
            None => Err(SessionError::NotSuspended(String::new())),
        }
    }

    /// Applies the checked decision of the plan at `index`: the result for the model, the audit
    /// record, the switch of mode of an approval (before any model call in the new mode), the
    /// end of the run for a rejection without feedback or past the revision limit.
    fn decide_plan(
        &mut self,
        index: usize,
        decision: Decision,
        checked: Checked,
    ) -> Result<PlanDecided, SessionError> {
        let pending = (index < self.state.pending.len()).then(|| self.state.pending.remove(index));
        let Some(PendingDecision::Plan(pending)) = pending else {
            return Err(SessionError::NotSuspended(String::new()));
        };
        let run_id = pending.run_id.clone();
        self.resume_run(&run_id);
        let feedback = decision.feedback();
        let target = checked.target.unwrap_or(pending.target);
        // The mode-change notice travels in the approval result, not as a later system message
        // (many chat templates refuse a system message anywhere but first).
        let notice = match decision.action {
            DecisionAction::Approved => self.mode_notice(target, ModeChangeReason::PlanApproved),
            DecisionAction::Rejected => None,
        };
        let edited = checked.edited;
        let max_revisions = self.config.max_revisions;
        // A rejection with feedback asks for a revision: beyond the run's limit it ends the run.
        let at_limit = decision.action == DecisionAction::Rejected
            && feedback.is_some()
            && self.state.revisions(&run_id) >= max_revisions;
        let (result, outcome) = match (decision.action, feedback) {
            (DecisionAction::Approved, _) => (
                match &edited {
                    Some(edited) => submit_plan::edited_approved_result(
                        &pending.payload.submission,
                        edited,
                        feedback,
                        notice.as_deref(),
                    ),
                    None => submit_plan::approved_result(
                        &pending.payload.submission,
                        feedback,
                        notice.as_deref(),
                    ),
                },
                DecisionOutcome::Approved,
            ),
            (DecisionAction::Rejected, Some(feedback)) if at_limit => (
                submit_plan::rejected_at_revision_limit(feedback, max_revisions),
                DecisionOutcome::Rejected,
            ),
            (DecisionAction::Rejected, Some(feedback)) => (
                submit_plan::rejected_with_feedback(feedback),
                DecisionOutcome::Rejected,
            ),
            (DecisionAction::Rejected, None) => {
                (REJECTED_RESULT.to_owned(), DecisionOutcome::Rejected)
            }
        };
        let ends_run = decision.action == DecisionAction::Rejected && feedback.is_none();
        let approved_to = (decision.action == DecisionAction::Approved).then_some(target);
        let approved_sha256 = edited.map(|e| e.sha256);
        let record = self.plan_record(
            &pending,
            outcome,
            decision.decided_by,
            approved_to,
            approved_sha256,
        );
        self.state.history.push(record.clone());
        let output = ToolOutput::ok(result);
        self.finish_tool(
            &run_id,
            &pending.tool_call_id,
            SUBMIT_PLAN,
            output,
            Some(record),
        );
        if notice.is_some() {
            // The switch happens before any model call in the new mode.
            self.enter_mode(target, ModeChangeReason::PlanApproved);
        }
        if ends_run {
            self.close_run(&run_id, RunState::Completed, None);
        }
        let limit = at_limit.then(|| {
            ModelError::new(format!(
                "the run reached its limit of {max_revisions} plan revisions (rejections with feedback)"
            ))
            .with_kind(ModelErrorKind::RevisionLimit)
        });
        if let Some(error) = &limit {
            self.close_run(&run_id, RunState::Failed, Some(&error.to_string()));
        }
        Ok(PlanDecided {
            run_id,
            ends_run,
            limit,
        })
    }

    /// Records the decision on the tool call at `index` (and, with "always allow", on the
    /// other calls of its tool waiting in the reply). Returns the run, and once every call of
    /// the reply is decided, the approved calls to run in the model's order: the run resumes,
    /// the rejected calls get their results and every record goes to the history.
    fn decide_tool_call(
        &mut self,
        index: usize,
        decision: Decision,
    ) -> Result<(Arc<str>, Option<Vec<Approved>>), SessionError> {
        let decided_at = self.now_rfc3339();
        let Some(PendingDecision::ToolCall(call)) = self.state.pending.get_mut(index) else {
            return Err(SessionError::NotSuspended(String::new()));
        };
        let outcome = match decision.action {
            DecisionAction::Approved => DecisionOutcome::Approved,
            DecisionAction::Rejected => DecisionOutcome::Rejected,
        };
        let record = tool_call_record(
            call,
            outcome,
            decision.decided_by.clone(),
            decision.always_allow,
            decided_at,
        );
        let tool_name = call.payload.tool_name.clone();
        let run_id = call.run_id.clone();
        let allowance = decision.always_allow.then(|| record.clone());
        call.decided = Some(record);
        call.feedback = decision.feedback().map(str::to_owned);
        if let Some(allowance) = allowance {
            self.state.allow_waiting(&tool_name, &allowance);
            if !self.state.always_allowed.contains(&tool_name) {
                self.state.always_allowed.push(tool_name);
            }
        }
        if self.state.pending.iter().any(PendingDecision::is_waiting) {
            return Ok((run_id, None));
        }
        // Every call is decided: the run resumes (same run id), saved with this process's lease.
        let calls = std::mem::take(&mut self.state.pending);
        self.resume_run(&run_id);
        let mut approved = Vec::new();
        for call in calls {
            let PendingDecision::ToolCall(call) = call else {
                continue;
            };
            let Some(record) = call.decided.clone() else {
                continue;
            };
            self.state.history.push(record.clone());
            if record.outcome == Some(DecisionOutcome::Approved) {
                approved.push((call, record));
            } else {
                let output =
                    ToolOutput::error(crate::tool::rejected_result(call.feedback.as_deref()));
                self.finish_tool(
                    &run_id,
                    &call.tool_call_id,
                    &call.payload.tool_name,
                    output,
                    Some(record),
                );
            }
        }
        Ok((run_id, Some(approved)))
    }

    /// A decision carries suspended run `run_id` on: it runs again, saved with this process's
    /// lease (if the process stops before the run's next save, the run is interrupted once the
    /// lease ends, and `continue_run` carries it on), and `agent_start` goes out again (same run
    /// id) before its next events, as Mastra's AgentController does, so every `agent_end` pairs
    /// with an `agent_start`.
    fn resume_run(&mut self, run_id: &Arc<str>) {
        self.state.run = Some((run_id.clone(), RunState::Running));
        self.take_lease();
        self.agent_start(run_id);
    }

    /// The audit record of the decision on `pending` (`outcome`, now, by `decided_by`, handed
    /// over to `target` when approved).
    pub(crate) fn plan_record(
        &self,
        pending: &PendingPlan,
        outcome: DecisionOutcome,
        decided_by: Option<String>,
        target: Option<ModeId>,
        approved_sha256: Option<String>,
    ) -> DecidedRecord {
        DecidedRecord {
            run_id: pending.run_id.to_string(),
            tool_call_id: pending.tool_call_id.clone(),
            decision_id: pending.payload.decision_id.clone(),
            outcome: Some(outcome),
            sha256: Some(pending.payload.submission.sha256.clone()),
            approved_sha256,
            decided_at: Some(self.now_rfc3339()),
            decided_by,
            target_mode_id: target.map(|t| self.config.graph.mode(t).id().to_owned()),
            tool_name: None,
            always_allow: false,
            allowed_by: None,
            rule: None,
        }
    }
}

impl State {
    /// How many revisions run `run_id` was asked for so far: its plans rejected (a rejection
    /// without feedback ends the run, so every earlier one carried feedback), from the history
    /// the session record keeps.
    fn revisions(&self, run_id: &str) -> usize {
        self.history
            .iter()
            .filter(|d| {
                d.run_id == run_id
                    && d.tool_name.is_none()
                    && d.outcome == Some(DecisionOutcome::Rejected)
            })
            .count()
    }

    /// Approves every other call of `tool` that waits in the same reply, by the "always allow"
    /// whose record is `allowance`: each gets its own record, approved, with the allowance's
    /// time and decider and its decision id as `allowedBy`; none is asked about.
    fn allow_waiting(&mut self, tool: &str, allowance: &DecidedRecord) {
        let calls = self.pending.iter_mut().filter_map(|p| match p {
            PendingDecision::ToolCall(call) => Some(call),
            _ => None,
        });
        for call in calls {
            // A call an `ask` rule made wait is asked about, whatever the allowance.
            if call.decided.is_none()
                && call.payload.tool_name == tool
                && call.payload.rule.is_none()
            {
                let mut record = tool_call_record(
                    call,
                    DecisionOutcome::Approved,
                    allowance.decided_by.clone(),
                    false,
                    allowance.decided_at.clone().unwrap_or_default(),
                );
                record.allowed_by = Some(allowance.decision_id.clone());
                call.decided = Some(record);
            }
        }
    }
}

/// The audit record of a decision on the tool call `call`.
pub(crate) fn tool_call_record(
    call: &PendingToolCall,
    outcome: DecisionOutcome,
    decided_by: Option<String>,
    always_allow: bool,
    decided_at: String,
) -> DecidedRecord {
    DecidedRecord {
        run_id: call.run_id.to_string(),
        tool_call_id: call.tool_call_id.clone(),
        decision_id: call.payload.decision_id.clone(),
        outcome: Some(outcome),
        sha256: Some(call.payload.args_sha256.clone()),
        approved_sha256: None,
        decided_at: Some(decided_at),
        decided_by,
        target_mode_id: None,
        tool_name: Some(call.payload.tool_name.clone()),
        always_allow,
        allowed_by: None,
        rule: call.payload.rule.clone(),
    }
}
