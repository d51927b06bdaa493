//! The `Decide` input: a checked decision applied to what waits ([`Change::decide`]), the one
//! place a decision of any kind is applied: the next state, its events, and what the driver
//! does next ([`Next`]).

use std::sync::Arc;

use super::call::CallRef;
use super::change::Change;
use super::check::Checked;
use super::decision::{Decision, DecisionAction};
use super::error::SessionError;
use super::next::{Answered, Approved, Next, ResumedChild};
use super::pending::{PendingDecision, PendingPlan, PendingSuspension, PendingToolCall};
use super::quorum::Counted;
use super::state::State;
use crate::comment::{self, QuotedComment};
use crate::event::{DecidedRecord, DecisionOutcome, ModeChangeReason, RunState};
use crate::exchange::{SUBMIT_PLAN, ToolOutput};
use crate::mode::ModeId;
use crate::model::{ModelError, ModelErrorKind};
use crate::plan::{self, REJECTED_RESULT};

/// What the last decision of a reply's calls resumes: the approved calls, the answered
/// suspensions, and the children whose calls were decided ([`Next::RunApproved`]).
struct Resumed {
    calls: Vec<Approved>,
    answered: Vec<Answered>,
    children: Vec<ResumedChild>,
}

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
    /// approved calls, then call the model). `reviewer`: the reviewer whose verdict is the
    /// decision; `hook`: the hook that denied a plan (a tool call's hook decides it elsewhere,
    /// [`Change::finish_hooked_tool`]), each kept on the audit record.
    ///
    /// # Errors
    /// [`SessionError::NotSuspended`] when nothing waits at `index`; nothing changes.
    pub(crate) fn decide(
        &mut self,
        index: usize,
        decision: Decision,
        checked: Checked,
        lacking: &[String],
        reviewer: Option<Box<crate::review::ReviewRecord>>,
        hook: Option<Box<crate::hook::HookRecord>>,
    ) -> Result<Next, SessionError> {
        let approvals = match self.count_approval(index, &decision)? {
            Counted::Apply(approvals) => approvals,
            Counted::Waits(next) => return Ok(next),
        };
        match self.state.pending.get(index) {
            Some(PendingDecision::ToolCall(_) | PendingDecision::Suspension(_)) => {
                let (run_id, approved) =
                    self.decide_tool_call(index, decision, lacking, approvals, reviewer)?;
                Ok(match approved {
                    Some(Resumed {
                        calls,
                        answered,
                        children,
                    }) => Next::RunApproved {
                        run_id,
                        calls,
                        answered,
                        children,
                    },
                    None if self.state.pending.iter().any(PendingDecision::is_waiting) => {
                        Next::WaitsOnToolCalls(run_id)
                    }
                    None => Next::WaitsForHost(run_id),
                })
            }
            Some(PendingDecision::Plan(_)) => {
                let decided =
                    self.decide_plan(index, decision, checked, approvals, reviewer, hook)?;
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
        approvals: Vec<crate::quorum::Approval>,
        reviewer: Option<Box<crate::review::ReviewRecord>>,
        hook: Option<Box<crate::hook::HookRecord>>,
    ) -> Result<PlanDecided, SessionError> {
        if decision.action == DecisionAction::Answered {
            return Err(SessionError::MalformedDecision(
                "a plan is approved or rejected, not answered".to_owned(),
            ));
        }
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
            // An answer never reaches a plan (`check` refuses it, and so does the start here).
            DecisionAction::Rejected | DecisionAction::Answered => None,
        };
        let edited = checked.edited;
        let comments = checked.comments;
        // An approval of some steps: the next mode gets the plan shown with the others marked,
        // and its task list only the approved ones (an approval of all of them is of the plan).
        let chosen = checked
            .steps
            .filter(|_| decision.action == DecisionAction::Approved);
        let partial = chosen.as_ref().filter(|c| c.is_partial());
        // Comments on plan lines reach the model after the feedback, each with its line; a
        // rejection with comments asks for a revision as one with feedback does.
        let revise_with = match (feedback, comments.is_empty()) {
            (feedback, true) => feedback.map(str::to_owned),
            (feedback, false) => Some(format!(
                "{}\n\n{}",
                feedback.unwrap_or("see the comments on lines of the plan below."),
                comment::for_model(&comments)
            )),
        };
        let feedback = match decision.action {
            DecisionAction::Approved => feedback,
            DecisionAction::Rejected | DecisionAction::Answered => revise_with.as_deref(),
        };
        let max_revisions = self.config.max_revisions;
        // A rejection with feedback asks for a revision: beyond the run's limit it ends the run.
        let at_limit = decision.action == DecisionAction::Rejected
            && feedback.is_some()
            && self.state.revisions(&run_id) >= max_revisions;
        let (result, outcome) = match (decision.action, feedback) {
            (DecisionAction::Approved, _) => (
                match (&edited, partial) {
                    (Some(edited), _) => plan::edited_approved_result(
                        &pending.payload.submission,
                        edited,
                        feedback,
                        notice.as_deref(),
                    ),
                    (None, Some(choice)) => plan::steps_approved_result(
                        &pending.payload.submission,
                        &choice.mark(&pending.payload.submission.plan),
                        &choice.told(),
                        feedback,
                        notice.as_deref(),
                    ),
                    (None, None) => plan::approved_result(
                        &pending.payload.submission,
                        feedback,
                        notice.as_deref(),
                    ),
                },
                DecisionOutcome::Approved,
            ),
            (DecisionAction::Rejected, Some(feedback)) if at_limit => (
                plan::rejected_at_revision_limit(feedback, max_revisions),
                DecisionOutcome::Rejected,
            ),
            (DecisionAction::Rejected | DecisionAction::Answered, Some(feedback)) => (
                plan::rejected_with_feedback(feedback),
                DecisionOutcome::Rejected,
            ),
            (DecisionAction::Rejected | DecisionAction::Answered, None) => {
                (REJECTED_RESULT.to_owned(), DecisionOutcome::Rejected)
            }
        };
        let ends_run = decision.action == DecisionAction::Rejected && feedback.is_none();
        let approved_to = (decision.action == DecisionAction::Approved).then_some(target);
        // The plan as approved (the user's edit, if any): its numbered steps replace the task
        // list of a mode that offers the task tools (a plan without any empties it: the list of
        // an earlier plan is not this one's).
        let steps = approved_to
            .filter(|&to| {
                let runtime = self.config.runtime(to);
                crate::exchange::tasks::TASK_TOOLS
                    .iter()
                    .any(|t| runtime.allows(t))
            })
            .map(|_| {
                let approved = edited.as_ref().unwrap_or(&pending.payload.submission);
                let steps = super::tasks::plan_steps(&approved.plan);
                match partial {
                    Some(choice) => steps.only(&choice.approved, &choice.not_approved),
                    None => steps,
                }
            })
            .filter(|steps| !steps.tasks.is_empty() || !self.state.tasks.is_empty());
        // The files the approved text declares (the user's edit declares its own), which the
        // approval grants the target mode by the planning mode's `planScope`.
        let granted = approved_to.map(|to| {
            let (files, sha256) = match &edited {
                Some(edited) => (edited.scope(), edited.sha256.clone()),
                None => (
                    pending.payload.scope.clone(),
                    pending.payload.submission.sha256.clone(),
                ),
            };
            (to, files, sha256)
        });
        // The ledger of the approved plan's run, for its report at the end: its steps (those
        // approved, else every step it numbers) and its files.
        let ledger = granted.as_ref().map(|(to, files, sha256)| {
            let approved = edited.as_ref().unwrap_or(&pending.payload.submission);
            let runtime = self.config.runtime(*to);
            crate::plan_report::PlanLedger {
                decision_id: String::new(),
                mode_id: self.config.graph.mode(*to).id().to_owned(),
                path: approved.path.clone(),
                sha256: sha256.clone(),
                files: files.clone(),
                steps: match &chosen {
                    Some(c) => c.approved.clone(),
                    None => super::tasks::plan_steps(&approved.plan).numbers,
                },
                tasks: crate::exchange::tasks::TASK_TOOLS
                    .iter()
                    .any(|t| runtime.allows(t)),
                writes: Vec::new(),
            }
        });
        let approved_sha256 = edited.map(|e| e.sha256);
        let mut record = self.plan_record(
            &pending,
            outcome,
            decision.decided_by,
            approved_to,
            approved_sha256,
        );
        record.comments = comments;
        record.model = decision.model.clone();
        record.via = decision.via;
        record.approvals = approvals;
        record.steps = chosen.map(|c| c.approved).unwrap_or_default();
        // The reviewer that decided, or the advice the person who decided saw.
        record.review = reviewer.or_else(|| pending.payload.review.clone());
        // The hook that denied it, as a tool call's record names it.
        record.hook = hook;
        let (record_id, record_by, record_at) = (
            record.decision_id.clone(),
            record.decided_by.clone(),
            record.decided_at.clone(),
        );
        self.state.history.push(record.clone());
        let result = match &steps {
            Some(steps) => format!("{result}\n\n{}", steps.told()),
            None => result,
        };
        let output = ToolOutput::ok(result);
        let call = CallRef::new(run_id.clone(), pending.tool_call_id.as_str(), SUBMIT_PLAN);
        self.finish_tool(call, output, Some(record));
        if notice.is_some() {
            // The switch happens before any model call in the new mode.
            self.enter_mode(target, ModeChangeReason::PlanApproved);
        }
        if let Some(mut ledger) = ledger {
            ledger.decision_id.clone_from(&record_id);
            self.state.start_plan_ledger(ledger);
        }
        if let Some((to, files, sha256)) = granted {
            let mode_id = self.config.graph.mode(to).id().to_owned();
            self.state.grant_plan_scope(
                &mode_id,
                &record_id,
                &sha256,
                files,
                pending.payload.plan_scope,
                (record_by, record_at),
            );
        }
        if let Some(steps) = steps {
            self.set_tasks(run_id.clone(), steps.tasks);
        }
        if let (DecisionAction::Approved, Some(model)) = (decision.action, decision.model) {
            // After the switch, which ends any model chosen before: this one runs the mode.
            self.state.model_id = Some(model);
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

    /// Records the decision on the tool call at `index`. Returns the run, and once every call
    /// of the reply is decided, the approved calls to run in the model's order: the run
    /// resumes, the rejected calls get their results and every record goes to the history.
    ///
    /// An "always allow" approves this call, the one shown, and keeps its allowance for the
    /// calls of later replies; it decides no other call waiting in this reply (trust round 4,
    /// M2: the user saw none of their arguments), so each is asked about on its own.
    ///
    /// A call its tool suspended is decided the same way, as one of the reply's calls: its
    /// answer (or the user's refusal to answer) is recorded on it. `lacking`: the tools of the
    /// reply's suspended calls this host does not have ([`Change::resume_if_all_decided`]).
    #[allow(clippy::type_complexity)]
    fn decide_tool_call(
        &mut self,
        index: usize,
        decision: Decision,
        lacking: &[String],
        approvals: Vec<crate::quorum::Approval>,
        reviewer: Option<Box<crate::review::ReviewRecord>>,
    ) -> Result<(Arc<str>, Option<Resumed>), SessionError> {
        let decided_at = self.now_rfc3339();
        if let Some(PendingDecision::Suspension(suspended)) = self.state.pending.get_mut(index) {
            let outcome = match (decision.action, &decision.answer) {
                (DecisionAction::Answered, Some(_)) => DecisionOutcome::Answered,
                (DecisionAction::Rejected, None) => DecisionOutcome::Rejected,
                // `check` refuses the others before they get here.
                _ => {
                    return Err(SessionError::MalformedDecision(format!(
                        "`{}` is answered or declined, not {}",
                        suspended.tool_name(),
                        decision.action
                    )));
                }
            };
            let mut record =
                suspension_record(suspended, outcome, decision.decided_by.clone(), decided_at);
            record.via = decision.via;
            record.answer.clone_from(&decision.answer);
            suspended.decided = Some(record);
            suspended.feedback = decision.feedback().map(str::to_owned);
            suspended.answer = decision.answer.map(|a| *a);
            let run_id = suspended.run_id.clone();
            let resumed = self.resume_if_all_decided(&run_id, lacking);
            return Ok((run_id, resumed));
        }
        let Some(PendingDecision::ToolCall(call)) = self.state.pending.get(index) else {
            return Err(SessionError::NotSuspended(String::new()));
        };
        let outcome = match decision.action {
            DecisionAction::Approved => DecisionOutcome::Approved,
            DecisionAction::Rejected => DecisionOutcome::Rejected,
            // `check` refuses an answer to a tool call waiting for approval.
            DecisionAction::Answered => {
                return Err(SessionError::MalformedDecision(
                    "a tool call waiting for approval is approved or rejected, not answered"
                        .to_owned(),
                ));
            }
        };
        let mut record = tool_call_record(
            call,
            outcome,
            decision.decided_by.clone(),
            decision.always_allow,
            decided_at.clone(),
        );
        let shown_review = call.payload.review.clone();
        let tool_name = call.payload.tool_name.clone();
        let run_id = call.run_id.clone();
        // The allowance in force once this one is kept: the one given, or the same one kept
        // earlier. The approval's record says what it gave; the calls it approves name it.
        let given = decision.allowance_scope().map(|scope| {
            let allowance = self.allowance(scope, &tool_name, &decision, &record);
            let mode_id = self.mode_arc();
            self.state.keep_allowance(allowance.clone(), &mode_id);
            let in_force = self
                .state
                .all_allowances()
                .find(|a| a.allows_as(&allowance));
            in_force.cloned().unwrap_or(allowance)
        });
        record.allowance = given
            .as_ref()
            .map(|a| Box::new(crate::allowance::GivenAllowance::of(a)));
        // The feedback goes with the record: with an approval, the model receives it with the
        // tool's result, wherever and whenever the run carries on.
        record.feedback = decision.feedback().map(str::to_owned);
        record.via = decision.via;
        record.approvals = approvals;
        // The reviewer that decided, or the advice the person who decided saw.
        record.review = reviewer.or(shown_review);
        let approved = outcome == DecisionOutcome::Approved;
        if let Some(PendingDecision::ToolCall(call)) = self.state.pending.get_mut(index) {
            call.decided = Some(record);
            // A write of the approved plan's mode that waited: the ledger learns its fate.
            let id = call.tool_call_id.clone();
            self.state.settle_plan_write(&id, approved);
        }
        // An approval by an allowance revoked since (in the store, before this session was
        // restored) is taken back before the run can resume: such a call is asked about.
        self.state.withdraw_approvals_of_revoked();
        let resumed = self.resume_if_all_decided(&run_id, lacking);
        Ok((run_id, resumed))
    }

    /// The `CarryOn` input: a host carries on a suspended run whose calls are all decided, an
    /// answer recorded by a host that lacks its tool among them. `lacking`: the tools of the
    /// reply's suspended calls this host does not have. Next: run the approved calls and hand
    /// the answers over ([`Next::RunApproved`]), or [`Next::Nothing`] when a call still waits,
    /// nothing is decided, or this host lacks an answered call's tool (nothing changes).
    pub(crate) fn carry_on_answered(&mut self, lacking: &[String]) -> Next {
        let Some((run_id, RunState::Suspended)) = self.state.run.clone() else {
            return Next::Nothing;
        };
        if self.state.pending.is_empty() {
            return Next::Nothing;
        }
        match self.resume_if_all_decided(&run_id, lacking) {
            Some(Resumed {
                calls,
                answered,
                children,
            }) => Next::RunApproved {
                run_id,
                calls,
                answered,
                children,
            },
            None => Next::Nothing,
        }
    }

    /// Once every waiting call of the reply is decided, the run resumes (same run id), saved
    /// with this process's lease: the approved calls and the answered suspensions go to the
    /// driver, in the model's order; the rejected and declined ones get their results here, and
    /// every record goes to the history. `None` while one still waits.
    ///
    /// Also `None` when a call answered is of a tool in `lacking` (the tools this host does not
    /// have): the answer stays recorded on it, the run suspended, and the host that has the
    /// tool carries the run on ([`Change::carry_on_answered`]). The rule for every host: the
    /// run resumes only where each answer can be handed to its tool.
    fn resume_if_all_decided(&mut self, run_id: &Arc<str>, lacking: &[String]) -> Option<Resumed> {
        if self.state.pending.iter().any(PendingDecision::is_waiting) {
            return None;
        }
        let held = self.state.pending.iter().any(|p| {
            p.as_suspension()
                .is_some_and(|s| s.answer.is_some() && lacking.iter().any(|t| t == s.tool_name()))
        });
        if held {
            return None;
        }
        let run_id = run_id.clone();
        let calls = std::mem::take(&mut self.state.pending);
        self.resume_run(&run_id);
        let mut approved = Vec::new();
        let mut answered: Vec<Answered> = Vec::new();
        // A child's decisions go back to the child that waits on them, which carries on with
        // them (the driver's part): here each record goes to the history, naming the child.
        let mut children: Vec<ResumedChild> = std::mem::take(&mut self.state.children)
            .into_iter()
            .map(|child| (child, Vec::new()))
            .collect();
        for call in calls {
            if let Some(origin) = call.subagent() {
                let of = children
                    .iter_mut()
                    .find(|(c, _)| c.tool_call_id == origin.tool_call_id);
                if let (Some(record), Some((_, decided))) = (call.decision(), of) {
                    self.state.history.push(record.clone());
                    decided.push(call);
                }
                continue;
            }
            let call = match call {
                PendingDecision::ToolCall(call) => call,
                PendingDecision::Suspension(mut suspended) => {
                    // Taken, not copied: the record goes on with the answer (or the result).
                    let Some(record) = suspended.decided.take() else {
                        continue;
                    };
                    self.state.history.push(record.clone());
                    if record.outcome == Some(DecisionOutcome::Answered) {
                        answered.push((suspended, record));
                        continue;
                    }
                    let output = ToolOutput::error(super::rejection::declined_result(
                        suspended.feedback.as_deref(),
                    ));
                    let declined = CallRef::new(
                        run_id.clone(),
                        suspended.tool_call_id.as_str(),
                        suspended.payload.tool_name.as_str(),
                    );
                    self.finish_tool(declined, output, Some(record));
                    continue;
                }
                PendingDecision::Plan(_) => continue,
            };
            let Some(record) = call.decided.clone() else {
                continue;
            };
            self.state.history.push(record.clone());
            if record.outcome == Some(DecisionOutcome::Approved) {
                approved.push((call, record));
            } else {
                let output = ToolOutput::error(super::rejection::rejected_result(call.feedback()));
                let answered = CallRef::new(
                    run_id.clone(),
                    call.tool_call_id.as_str(),
                    call.payload.tool_name.as_str(),
                );
                self.finish_tool(answered, output, Some(record));
            }
        }
        Some(Resumed {
            calls: approved,
            answered,
            children,
        })
    }

    /// The allowance of `scope` an approval of a call of `tool` gives (`granted`: the
    /// approval's record), in the current mode: its id the decision id, or for a workspace
    /// one the id of its workspace, config, mode, tool and pattern (and it keeps the identity of
    /// the workspace directory).
    fn allowance(
        &self,
        scope: crate::allowance::AllowanceScope,
        tool: &str,
        decision: &Decision,
        granted: &DecidedRecord,
    ) -> crate::allowance::Allowance {
        let mut allowance =
            crate::allowance::Allowance::new(scope, &granted.decision_id, &*self.mode_arc(), tool);
        allowance.pattern = decision.allow.as_deref().cloned();
        allowance.session_id = self.id.to_string();
        allowance.decision_id = granted.decision_id.clone();
        allowance.decided_by = granted.decided_by.clone();
        allowance.decided_at = granted.decided_at.clone();
        if scope == crate::allowance::AllowanceScope::Workspace {
            allowance = self.workspace.stamp(allowance);
        }
        allowance
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
            sha256: Some(pending.payload.submission.sha256.clone()),
            approved_sha256,
            decided_at: Some(self.now_rfc3339()),
            decided_by,
            target_mode_id: target.map(|t| self.config.graph.mode(t).id().to_owned()),
            ..DecidedRecord::new(
                &*pending.run_id,
                &pending.tool_call_id,
                &pending.payload.decision_id,
                outcome,
            )
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

    /// The comments of the last rejection of the plan with this `sha256`, if it made any.
    pub(crate) fn comments_on(&self, sha256: &str) -> Option<Vec<QuotedComment>> {
        self.history
            .iter()
            .rev()
            .find(|d| {
                d.tool_name.is_none()
                    && d.outcome == Some(DecisionOutcome::Rejected)
                    && d.sha256.as_deref() == Some(sha256)
            })
            .map(|d| d.comments.clone())
    }
}

/// The audit record of a decision on a call its tool suspended.
pub(crate) fn suspension_record(
    suspended: &PendingSuspension,
    outcome: DecisionOutcome,
    decided_by: Option<String>,
    decided_at: String,
) -> DecidedRecord {
    DecidedRecord {
        sha256: Some(suspended.payload.payload_sha256.clone()),
        decided_at: Some(decided_at),
        decided_by,
        tool_name: Some(suspended.payload.tool_name.clone()),
        suspension_kind: Some(suspended.payload.kind),
        subagent: suspended.payload.subagent.clone(),
        ..DecidedRecord::new(
            &*suspended.run_id,
            &suspended.tool_call_id,
            &suspended.payload.decision_id,
            outcome,
        )
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
        sha256: Some(call.payload.args_sha256.clone()),
        decided_at: Some(decided_at),
        decided_by,
        tool_name: Some(call.payload.tool_name.clone()),
        always_allow,
        rule: call.payload.rule.clone(),
        subagent: call.payload.subagent.clone(),
        ..DecidedRecord::new(
            &*call.run_id,
            &call.tool_call_id,
            &call.payload.decision_id,
            outcome,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machine::check::check;
    use crate::machine::input::{Asked, Input, Suspend};
    use crate::machine::rig::{Rig, call};
    use crate::plan::PlanSubmission;

    fn decide(rig: &mut Rig, index: usize, decision: Decision) -> Next {
        let checked = check(&rig.state.pending[index], &decision).expect("checks");
        rig.handle(Input::Decide {
            index,
            decision,
            checked,
            lacking: Vec::new(),
        })
        .expect("applies")
    }

    fn suspend_plan(rig: &mut Rig, run: &Arc<str>, id: &str) {
        let suspend = Suspend::Plan {
            run_id: run.clone(),
            tool_call_id: id.to_owned(),
            submission: PlanSubmission {
                path: "a.md".to_owned(),
                title: "A".to_owned(),
                plan: "1. Step.".to_owned(),
                sha256: "s1".to_owned(),
            },
            review: None,
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
    }

    /// Calls of `tools` in mode `build`, all waiting; returns the run.
    fn waiting(rig: &mut Rig, tools: &[&str]) -> Arc<str> {
        rig.state.mode = rig.mode("build");
        let run = rig.start("go");
        let calls = tools
            .iter()
            .enumerate()
            .map(|(k, t)| call(&format!("c{k}"), t, json!({ "k": k })))
            .collect();
        rig.reply(&run, "", calls);
        let suspend = Suspend::ToolCalls {
            run_id: run.clone(),
            at: 1,
            asked: (0..tools.len()).map(|k| Asked::at(k, None)).collect(),
            suspended: Vec::new(),
            children: Vec::new(),
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        rig.take_kinds();
        run
    }

    /// A reply whose call `c0` of `confirm_deploy` suspended and whose call `c1` of
    /// `write_file` waits for approval.
    fn asking_beside_a_write(rig: &mut Rig) -> Arc<str> {
        rig.state.mode = rig.mode("build");
        let run = rig.start("go");
        let calls = vec![
            call("c0", "confirm_deploy", json!({ "target": "staging" })),
            call("c1", "write_file", json!({ "path": "a", "content": "" })),
        ];
        rig.reply(&run, "", calls);
        let suspension = crate::exchange::ToolOutput::suspend(
            "Deploy?",
            json!({ "target": "staging" }),
            json!({ "type": "object", "properties": { "confirm": { "type": "boolean" } } }),
        )
        .suspension
        .expect("a suspension");
        let suspend = Suspend::ToolCalls {
            run_id: run.clone(),
            at: 1,
            asked: vec![Asked::at(1, None)],
            suspended: vec![(0, suspension)],
            children: Vec::new(),
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        rig.take_kinds();
        run
    }

    fn decide_lacking(rig: &mut Rig, index: usize, decision: Decision, lacking: &[&str]) -> Next {
        let checked = check(&rig.state.pending[index], &decision).expect("checks");
        rig.handle(Input::Decide {
            index,
            decision,
            checked,
            lacking: lacking.iter().map(|t| (*t).to_owned()).collect(),
        })
        .expect("applies")
    }

    /// Issue 37: an answer given in a host without the call's tool (the CLI, for a tool of the
    /// user's own) is recorded and the run does not resume there, whichever call is decided
    /// last; a host with the tool carries it on (`CarryOn`), one without it cannot.
    #[test]
    fn a_run_resumes_only_in_a_host_that_has_the_tool_of_every_answer() {
        for answer_last in [true, false] {
            let mut rig = Rig::new();
            let run = asking_beside_a_write(&mut rig);
            let answer = Decision::answer(json!({ "confirm": true }));
            let order = if answer_last { [1, 0] } else { [0, 1] };
            let mut next = Next::Nothing;
            for index in order {
                let decision = if index == 0 {
                    answer.clone()
                } else {
                    Decision::approve()
                };
                next = decide_lacking(&mut rig, index, decision, &["confirm_deploy"]);
            }
            assert!(
                matches!(&next, Next::WaitsForHost(r) if *r == run),
                "answer last {answer_last}: {next:?}"
            );
            assert_eq!(rig.state.run, Some((run.clone(), RunState::Suspended)));
            assert_eq!(rig.state.pending.len(), 2, "both kept, decided");
            assert!(
                rig.state.history.is_empty(),
                "nothing ran or was recorded yet"
            );
            let held = rig.handle(Input::CarryOn {
                lacking: vec!["confirm_deploy".to_owned()],
            });
            assert!(matches!(held, Ok(Next::Nothing)), "{held:?}");
            assert_eq!(rig.state.pending.len(), 2);
            let carried = rig.handle(Input::CarryOn {
                lacking: Vec::new(),
            });
            let Ok(Next::RunApproved {
                calls, answered, ..
            }) = carried
            else {
                panic!("carried on: {carried:?}");
            };
            assert_eq!(calls.len(), 1);
            assert_eq!(answered[0].0.answer, Some(json!({ "confirm": true })));
            assert!(rig.state.pending.is_empty());
        }
    }

    /// A declined call needs no tool: its result is the library's, so the run resumes anywhere.
    #[test]
    fn a_declined_call_of_a_tool_the_host_lacks_does_not_hold_the_run() {
        let mut rig = Rig::new();
        asking_beside_a_write(&mut rig);
        decide_lacking(&mut rig, 0, Decision::reject(), &["confirm_deploy"]);
        let next = decide_lacking(&mut rig, 1, Decision::approve(), &["confirm_deploy"]);
        assert!(matches!(next, Next::RunApproved { .. }), "{next:?}");
    }

    #[test]
    fn only_this_runs_rejected_plans_count_as_revisions() {
        let mut rig = Rig::new();
        rig.max_revisions = 1;
        let run = rig.start("plan");
        // Records that are not this run's plan rejections.
        let mut other = tool_call_record(
            &crate::machine::pending::PendingToolCall {
                run_id: run.clone(),
                tool_call_id: "t".to_owned(),
                payload: crate::event::ToolCallPayload {
                    decision_id: "decision_0".to_owned(),
                    tool_name: "write_file".to_owned(),
                    args: json!({}),
                    args_sha256: String::new(),
                    rule: None,
                    terms: Default::default(),
                    locations: Vec::new(),
                    drift: None,
                    subagent: None,
                    review: None,
                },
                decided: None,
            },
            DecisionOutcome::Rejected,
            None,
            false,
            String::new(),
        );
        rig.state.history.push(other.clone());
        other.tool_name = None;
        other.run_id = "run_9".to_owned();
        rig.state.history.push(other.clone());
        other.run_id = run.to_string();
        other.outcome = Some(DecisionOutcome::Approved);
        rig.state.history.push(other);
        assert_eq!(rig.state.revisions(&run), 0);
        suspend_plan(&mut rig, &run, "p1");
        let next = decide(&mut rig, 0, Decision::reject_with("again"));
        assert!(matches!(next, Next::CallModel(_)), "{next:?}");
        let (_, result) = rig.results().pop().expect("a result");
        assert_eq!(result, plan::rejected_with_feedback("again"));
        assert_eq!(rig.state.revisions(&run), 1);
        suspend_plan(&mut rig, &run, "p2");
        let next = decide(&mut rig, 0, Decision::reject_with("again"));
        assert!(
            matches!(next, Next::Ended { error: Some(_), .. }),
            "{next:?}"
        );
        let (_, result) = rig.results().pop().expect("a result");
        assert!(result.contains("limit of 1 plan revisions"), "{result}");
    }

    #[test]
    fn an_edited_plan_is_approved_with_both_hashes_in_its_record() {
        let mut rig = Rig::new();
        let run = rig.start("plan");
        suspend_plan(&mut rig, &run, "p1");
        let edit = Decision::approve_with("and docs").with_plan("# B\n\n1. Other.\n");
        decide(&mut rig, 0, edit);
        let record = rig.state.history.last().expect("a record");
        assert_eq!(record.sha256.as_deref(), Some("s1"));
        let edited = crate::plan::capture_plan("a.md", b"# B\n\n1. Other.\n").expect("captures");
        assert_eq!(
            record.approved_sha256.as_deref(),
            Some(edited.sha256.as_str())
        );
        assert_eq!(record.decision_id, "decision_1");
        assert_eq!(record.tool_call_id, "p1");
        assert_eq!(record.run_id, "run_1");
        let (_, result) = rig.results().pop().expect("a result");
        assert!(result.contains("1. Other."), "{result}");
        assert!(result.contains("and docs"), "{result}");
        assert!(rig.state.lease.is_none(), "no store, no lease");
        assert_eq!(rig.mode_id(), "build");
    }

    /// Trust round 4, M2: an "always allow" approves the call it is given at, the one shown,
    /// and no other call waiting in the reply, of its tool or not: each is asked about.
    #[test]
    fn always_allow_approves_the_call_shown_and_no_other_waiting_call() {
        let mut rig = Rig::new();
        let run = waiting(&mut rig, &["write_file", "read_file", "write_file"]);
        rig.now_ms += 1_000;
        let next = decide(
            &mut rig,
            0,
            Decision::approve().always_allow().decided_by("al"),
        );
        assert!(
            matches!(&next, Next::WaitsOnToolCalls(r) if *r == run),
            "{next:?}"
        );
        let decided: Vec<bool> = rig.state.pending.iter().map(|p| !p.is_waiting()).collect();
        assert_eq!(decided, [true, false, false], "each other call waits");
        let granting = rig.state.pending[0].decision().expect("decided");
        assert_eq!(granting.decided_by.as_deref(), Some("al"));
        assert_eq!(
            granting.allowance,
            Some(Box::new(GivenAllowance {
                id: "decision_1".to_owned(),
                scope: AllowanceScope::Mode,
                allow: None,
            }))
        );
        assert_eq!(rig.state.always_allowed, ["write_file"]);
        decide(&mut rig, 2, Decision::approve());
        // A second "always allow" does not list the tool twice.
        let next = decide(&mut rig, 1, Decision::reject_with("no reads"));
        let Next::RunApproved { calls, .. } = next else {
            panic!("every call is decided: {next:?}");
        };
        let ids: Vec<&str> = calls.iter().map(|(c, _)| c.tool_call_id()).collect();
        assert_eq!(ids, ["c0", "c2"]);
        let by_hand = calls[1].1.clone();
        assert_eq!(
            by_hand.allowed_by, None,
            "approved by the user, not the allowance"
        );
        assert_eq!(rig.state.always_allowed, ["write_file"]);
        assert_eq!(rig.state.history.len(), 3);
        let (id, result) = rig.results().pop().expect("the rejection");
        assert_eq!(id, "c1");
        assert!(result.contains("no reads"), "{result}");
        assert_eq!(rig.take_kinds(), ["agent_start", "tool_end"]);
    }

    #[test]
    fn a_decision_taken_while_others_wait_keeps_its_feedback_and_decider() {
        let mut rig = Rig::new();
        rig.lease = Some(std::time::Duration::from_secs(60));
        waiting(&mut rig, &["write_file", "write_file"]);
        decide(
            &mut rig,
            1,
            Decision::reject_with("  not this  ").decided_by("bo"),
        );
        let call = rig.state.pending[1].as_tool_call().expect("a call");
        assert_eq!(call.feedback(), Some("not this"));
        let record = call.decision().expect("decided");
        assert_eq!(record.outcome, Some(DecisionOutcome::Rejected));
        assert_eq!(record.decided_by.as_deref(), Some("bo"));
        assert!(!record.always_allow);
        assert!(rig.state.always_allowed.is_empty());
        assert!(rig.state.lease.is_none(), "still suspended: no lease yet");
        decide(&mut rig, 0, Decision::approve());
        assert!(rig.state.holds_lease, "the resumed run is carried on here");
    }

    fn ruling_of_write(rig: &Rig, path: &str) -> crate::machine::ruling::Ruling {
        let call = call("c9", "write_file", json!({ "path": path, "content": "" }));
        let paths = crate::rules::ResolvedPaths::new().with("path", path);
        rig.state
            .ruling(&rig.graph, &call, &paths, None, &mut Vec::new())
    }

    fn allowed_by(ruling: &crate::machine::ruling::Ruling) -> Option<(&str, AllowanceScope)> {
        match ruling {
            crate::machine::ruling::Ruling::Allowed(a) => Some((a.id.as_str(), a.scope)),
            _ => None,
        }
    }

    use crate::allowance::{AllowancePattern, AllowanceScope, GivenAllowance};

    /// A rig whose `write_file` call waited in `build` and was approved with an "always allow"
    /// of `scope`.
    fn allowed_write(scope: AllowanceScope) -> Rig {
        let mut rig = Rig::new();
        waiting(&mut rig, &["write_file"]);
        decide(&mut rig, 0, Decision::approve().scope(scope));
        rig
    }

    #[test]
    fn a_mode_allowance_ends_with_the_mode_and_a_session_one_comes_back_with_it() {
        for (scope, back) in [
            (AllowanceScope::Mode, false),
            (AllowanceScope::Session, true),
        ] {
            let mut rig = allowed_write(scope);
            let ruling = ruling_of_write(&rig, "a.txt");
            assert_eq!(allowed_by(&ruling), Some(("decision_1", scope)));
            assert_eq!(rig.state.always_allowed, ["write_file"]);
            rig.handle(Input::ManualSwitch(rig.mode("build-auto")))
                .expect("switch");
            // Never another mode's calls: build-auto runs write_file anyway, but by its default.
            assert_eq!(allowed_by(&ruling_of_write(&rig, "a.txt")), None);
            assert!(rig.state.always_allowed.is_empty());
            rig.handle(Input::ManualSwitch(rig.mode("build")))
                .expect("switch back");
            let again = allowed_by(&ruling_of_write(&rig, "a.txt")).is_some();
            assert_eq!(again, back, "{scope}");
            assert_eq!(rig.state.allowances.len(), usize::from(back));
        }
    }

    #[test]
    fn a_narrowed_allowance_covers_only_what_its_pattern_matches_and_no_waiting_call() {
        let mut rig = Rig::new();
        waiting(&mut rig, &["write_file", "write_file"]);
        let narrowed = Decision::approve()
            .scope(AllowanceScope::Session)
            .allow_only(AllowancePattern::path("src/**"));
        let next = decide(&mut rig, 0, narrowed);
        assert!(
            matches!(next, Next::WaitsOnToolCalls(_)),
            "the other call is asked about"
        );
        assert!(rig.state.pending[1].is_waiting());
        assert!(allowed_by(&ruling_of_write(&rig, "src/a.rs")).is_some());
        assert!(allowed_by(&ruling_of_write(&rig, ".env")).is_none());
        // The approval's record keeps the scope and the pattern it gave.
        let granting = rig.state.pending[0].decision().expect("decided");
        assert_eq!(
            granting.allowance,
            Some(Box::new(GivenAllowance {
                id: "decision_1".to_owned(),
                scope: AllowanceScope::Session,
                allow: Some(AllowancePattern::path("src/**")),
            }))
        );
        assert!(
            rig.state.always_allowed.is_empty(),
            "not the whole tool: {:?}",
            rig.state.always_allowed
        );
    }

    #[test]
    fn a_workspace_allowance_is_keyed_by_workspace_config_and_mode() {
        let mut rig = allowed_write(AllowanceScope::Workspace);
        assert!(rig.state.allowances.is_empty(), "not the session's own");
        let [kept] = rig.state.workspace_allowances.as_slice() else {
            panic!(
                "one workspace allowance: {:?}",
                rig.state.workspace_allowances
            );
        };
        assert!(kept.id.starts_with("ws_"));
        assert_eq!(
            kept.workspace.as_deref(),
            Some(rig.workspace.path.as_path())
        );
        assert_eq!(kept.config_fingerprint.as_deref(), Some("rig-fingerprint"));
        assert_eq!(kept.mode_id, "build");
        assert!(allowed_by(&ruling_of_write(&rig, "a.txt")).is_some());
        // Giving it again keeps it once.
        let again = kept.clone();
        assert!(!rig.state.keep_allowance(again, "build"));
        assert_eq!(rig.state.workspace_allowances.len(), 1);
    }

    /// Review findings 4, 9 and 10: a workspace allowance keeps the identity of the workspace
    /// directory; the approval's record says what it gave (its `ws_` id and scope); a call it
    /// runs later names it by that id, not by the decision's id.
    #[test]
    fn a_workspace_allowance_keeps_its_directory_and_is_named_by_its_own_id() {
        let mut rig = Rig::new();
        rig.workspace.identity.inode = Some(7);
        waiting(&mut rig, &["write_file"]);
        let workspace = Decision::approve().scope(AllowanceScope::Workspace);
        decide(&mut rig, 0, workspace.decided_by("al"));
        let [kept] = rig.state.workspace_allowances.as_slice() else {
            panic!("one: {:?}", rig.state.workspace_allowances);
        };
        assert_eq!(
            kept.workspace_identity.as_ref(),
            Some(&rig.workspace.identity)
        );
        assert!(kept.id.starts_with("ws_"), "{}", kept.id);
        let granting = rig.state.history[0].clone();
        assert_eq!(granting.decision_id, "decision_1");
        assert_eq!(granting.decided_by.as_deref(), Some("al"));
        assert_eq!(
            granting.allowance,
            Some(Box::new(GivenAllowance {
                id: kept.id.clone(),
                scope: AllowanceScope::Workspace,
                allow: None,
            }))
        );
        let crate::machine::ruling::Ruling::Allowed(later) = ruling_of_write(&rig, "b.txt") else {
            panic!("a later call is allowed");
        };
        assert_eq!(later.id, kept.id);
        assert_eq!(
            later.decider(),
            format!("allowance {} (workspace)", kept.id)
        );
    }

    /// The same allowance given twice is kept once, and the second approval's record names the
    /// one in force (the first decision's), not an allowance that was never kept.
    #[test]
    fn an_allowance_given_again_names_the_one_kept() {
        let mut rig = Rig::new();
        waiting(&mut rig, &["write_file", "write_file"]);
        let narrowed = || {
            Decision::approve()
                .scope(AllowanceScope::Session)
                .allow_only(AllowancePattern::path("src/**"))
        };
        decide(&mut rig, 0, narrowed());
        rig.now_ms += 1_000;
        decide(&mut rig, 1, narrowed());
        assert_eq!(rig.state.allowances.len(), 1);
        let second = rig.state.history[1].clone();
        assert_eq!(second.decision_id, "decision_2");
        assert_eq!(
            second.allowance.map(|a| a.id),
            Some("decision_1".to_owned())
        );
    }

    #[test]
    fn an_allowance_never_stands_in_for_a_rule_and_is_revoked_by_its_id() {
        let mut rig = allowed_write(AllowanceScope::Session);
        rig.handle(Input::RevokeAllowance("decision_1".to_owned()))
            .expect("revoke");
        assert!(rig.state.allowances.is_empty());
        assert!(matches!(
            ruling_of_write(&rig, "a.txt"),
            crate::machine::ruling::Ruling::Ask(None)
        ));
    }

    /// The hostile review's finding 1: an "always allow" approved the other waiting calls of
    /// its tool in the reply, unseen (as a record saved by an earlier version still holds them).
    /// Revoked before the run resumes, it takes those approvals back: each such call waits
    /// again, to be asked about, and the run does not resume when the last other call is
    /// decided. The call the user approved by hand stays approved.
    #[test]
    fn a_revoked_allowance_takes_back_the_approvals_it_gave_to_waiting_calls() {
        let mut rig = Rig::new();
        waiting(&mut rig, &["write_file", "write_file", "read_file"]);
        decide(
            &mut rig,
            0,
            Decision::approve().scope(AllowanceScope::Session),
        );
        // The sibling approved by the allowance, as an earlier version recorded it.
        let Some(PendingDecision::ToolCall(sibling)) = rig.state.pending.get_mut(1) else {
            panic!("a waiting call");
        };
        let mut record = tool_call_record(
            sibling,
            DecisionOutcome::Approved,
            Some("allowance decision_1 (session)".to_owned()),
            false,
            "2026-12-01T18:00:00Z".to_owned(),
        );
        record.allowed_by = Some("decision_1".to_owned());
        sibling.decided = Some(record);
        let waiting_ids = |rig: &Rig| -> Vec<String> {
            rig.state
                .undecided_calls()
                .iter()
                .map(|c| c.tool_call_id.clone())
                .collect()
        };
        assert_eq!(
            waiting_ids(&rig),
            ["c2"],
            "the sibling was approved by the allowance"
        );
        rig.handle(Input::RevokeAllowance("decision_1".to_owned()))
            .expect("revoke");
        assert_eq!(waiting_ids(&rig), ["c1", "c2"], "the sibling waits again");
        let by_hand = rig.state.pending[0].as_tool_call().expect("a call");
        assert_eq!(
            by_hand.decided.as_ref().and_then(|d| d.outcome),
            Some(DecisionOutcome::Approved),
            "the call the user approved stays approved"
        );
        let next = decide(&mut rig, 2, Decision::approve());
        assert!(matches!(next, Next::WaitsOnToolCalls(_)), "{next:?}");
        assert_eq!(
            waiting_ids(&rig),
            ["c1"],
            "the run waits for the sibling's decision"
        );
        assert!(
            rig.state.history.is_empty(),
            "nothing ran or was recorded yet"
        );
    }

    #[test]
    fn scope_and_allow_go_with_always_allow_on_a_tool_call_only() {
        let mut rig = Rig::new();
        waiting(&mut rig, &["write_file"]);
        let pending = &rig.state.pending[0];
        let mut bare = Decision::approve();
        bare.scope = Some(AllowanceScope::Session);
        assert!(matches!(
            check(pending, &bare),
            Err(SessionError::MalformedDecision(_))
        ));
        let bad = Decision::approve().allow_only(AllowancePattern::path("src/["));
        assert!(matches!(
            check(pending, &bad),
            Err(SessionError::MalformedDecision(m)) if m.contains("pattern")
        ));
        let mut rejected = Decision::reject();
        rejected.allow = Some(Box::new(AllowancePattern::path("src/**")));
        assert!(check(pending, &rejected).is_err());
    }

    /// A decision at an index past what waits is refused and changes nothing (the index is
    /// the host's: never a panic). `Change::decide` refuses it before `decide_plan`, whose own
    /// bounds check is therefore never the one that decides (the `<` to `<=` mutant there is
    /// equivalent: src/guide/testing.md).
    #[test]
    fn a_decision_past_what_waits_is_refused() {
        let mut rig = Rig::new();
        let run = rig.start("plan");
        suspend_plan(&mut rig, &run, "p1");
        let decision = Decision::approve();
        let checked = check(&rig.state.pending[0], &decision).expect("checks");
        let refused = rig.handle(Input::Decide {
            index: 1,
            decision,
            checked,
            lacking: Vec::new(),
        });
        assert!(
            matches!(refused, Err(SessionError::NotSuspended(_))),
            "{refused:?}"
        );
        assert_eq!(rig.state.pending.len(), 1, "the plan still waits");
    }

    /// The comments that come back with a revision are those of the rejection of the revision
    /// before it: the last rejected plan record with its `sha256`, not a later record of
    /// another kind, outcome or plan.
    #[test]
    fn a_revision_carries_the_comments_of_the_rejection_of_the_one_before() {
        let mut rig = Rig::new();
        let run = rig.start("plan");
        let submit = |rig: &mut Rig, n: usize| {
            let suspend = Suspend::Plan {
                run_id: run.clone(),
                tool_call_id: format!("p{n}"),
                submission: PlanSubmission {
                    path: "a.md".to_owned(),
                    title: "A".to_owned(),
                    plan: format!("{n}. Step."),
                    sha256: format!("s{n}"),
                },
                review: None,
            };
            match rig.handle(Input::Suspend(suspend)) {
                Ok(Next::SuspendedOnPlan { payload, .. }) => payload,
                other => panic!("suspends: {other:?}"),
            }
        };
        let texts = |comments: &[QuotedComment]| -> Vec<String> {
            comments.iter().map(|c| c.text.clone()).collect()
        };
        assert_eq!(texts(&submit(&mut rig, 1).comments), Vec::<String>::new());
        decide(&mut rig, 0, Decision::reject().comment(3, "one"));
        assert_eq!(texts(&submit(&mut rig, 2).comments), ["one"]);
        decide(&mut rig, 0, Decision::reject().comment(3, "two"));
        // Later records that are not that rejection: a plan record approved, and a call's
        // record with the plan's hash.
        let rejection = rig.state.history.last().expect("the rejection").clone();
        assert_eq!(rejection.sha256.as_deref(), Some("s2"));
        let mut other = rejection.clone();
        other.outcome = Some(DecisionOutcome::Approved);
        other.sha256 = Some("s9".to_owned());
        other.comments[0].text = "approved".to_owned();
        rig.state.history.push(other.clone());
        other.outcome = Some(DecisionOutcome::Rejected);
        other.sha256 = Some("s2".to_owned());
        other.tool_name = Some("write_file".to_owned());
        other.comments[0].text = "a call's".to_owned();
        rig.state.history.push(other);
        assert_eq!(texts(&submit(&mut rig, 3).comments), ["two"]);
    }
}
