//! The core's one entry point, in the shape of `quinn-proto`'s `Connection::handle_event`: an
//! [`Input`] goes in with `now` ([`Change::handle`]), and out come the next state (written on
//! the change's state) and the effects, as data, for the driver (`Session`, `src/session/`) to
//! perform in this order:
//!
//! 1. *save this record at version N*: [`Input::saves`], known before the input is handled so
//!    that the driver computes a saved change on a copy of the state and swaps it in only once
//!    it is saved (`src/session/save.rs`); an input that does not save changes the state in
//!    place and is saved with the run's next saved change;
//! 2. *emit these events*: the change's events, in order, delivered once the change is saved
//!    (at once when it is not);
//! 3. *call the model*, *run these tools*, or nothing more: the [`Next`] step.

use std::sync::Arc;

use crate::event::{CancelReason, DecidedRecord, ModeChangeReason};
use crate::exchange::ToolOutput;
use crate::mode::ModeId;
use crate::model::ModelResponse;
use crate::plan::PlanSubmission;
use crate::rules::RuleRecord;

use super::call::CallRef;
use super::change::Change;
use super::check::Checked;
use super::decision::Decision;
use super::error::SessionError;
use super::expiry::Expiry;
use super::next::Next;

/// What happens to a session, as the driver tells the rules: the host's calls (a message, a
/// decision, an abort, a switch), what the model and the tools returned, and the ticks of time
/// (a deadline passed, a lease to renew).
#[derive(Debug)]
pub(crate) enum Input {
    /// The session was created: `session_started`.
    Opened,
    /// A user message: it starts the next run (`agent_start`). Next: call the model. (What
    /// waits for a decision is cancelled first: [`Abort::Pending`].)
    UserMessage(String),
    /// The model's reply in run `run_id`: `model_end` (when the provider said why it stopped or
    /// what it used), `assistant_message` (when it has text), and the reply in the conversation,
    /// its tool calls' arguments as the record keeps them and their ids made unique. Next: run
    /// its tool calls, or, with none, end the run with its text.
    ModelReply {
        /// The run the model was called for.
        run_id: Arc<str>,
        /// What the model returned.
        reply: ModelResponse,
    },
    /// The driver is about to run the `index`-th tool call of the assistant message at `at`:
    /// `tool_start` (nothing when the reply has no such call).
    ToolStart {
        /// The running run.
        run_id: Arc<str>,
        /// The assistant message's position in the conversation.
        at: usize,
        /// The call's position in the message.
        index: usize,
        /// The call was ruled to wait for approval.
        waits_for_approval: bool,
    },
    /// A tool call's result (from the tool, or the driver's refusal to run it): `tool_end`, and
    /// the result in the conversation.
    ToolResult {
        /// The call the result answers.
        call: CallRef,
        /// What the call returned.
        output: ToolOutput,
        /// The audit record of the decision that let it run, for a call that waited.
        decision: Option<DecidedRecord>,
    },
    /// The result of a tool call whose outcome a mode's rule decided on its own (`deny`: the
    /// driver's refusal; `allow`: what the tool returned): `tool_end` with the rule's audit
    /// record, the record in the history, and the result in the conversation.
    RuledToolResult {
        /// The call the result answers.
        call: CallRef,
        /// The sha256 of the call's canonical arguments.
        args_sha256: String,
        /// What the call returned, or why it was not executed.
        output: ToolOutput,
        /// The rule that decided.
        rule: Box<RuleRecord>,
    },
    /// The result of a tool call an allowance ran without asking ([`Ruling::Allowed`]):
    /// `tool_end` with an audit record naming the allowance, the record in the history.
    ///
    /// [`Ruling::Allowed`]: super::ruling::Ruling::Allowed
    AllowedToolResult {
        /// The call the result answers.
        call: CallRef,
        /// The sha256 of the call's canonical arguments.
        args_sha256: String,
        /// What the call returned.
        output: ToolOutput,
        /// The allowance that ran it.
        allowance: Box<crate::allowance::Allowance>,
    },
    /// The result of a tool call whose outcome a hook decided ([`crate::hook`]: `deny`, the
    /// driver's refusal; `allow`, what the tool returned): `tool_end` with an audit record
    /// naming the hook, the record in the history.
    HookedToolResult {
        /// The call the result answers.
        call: CallRef,
        /// The sha256 of the call's canonical arguments.
        args_sha256: String,
        /// What the call returned, or why it was not executed.
        output: ToolOutput,
        /// What the hook decided.
        hook: Box<crate::hook::HookRecord>,
    },
    /// A task tool's call changed the session's task list ([`super::tasks::apply`], which the
    /// driver ran on the list as the state has it): the new list, and `tasks_updated`. Saved
    /// with the run's next saved change, as the call's result is. Next: nothing.
    TasksChanged {
        /// The running run.
        run_id: Arc<str>,
        /// The whole list after the call.
        tasks: Vec<crate::exchange::tasks::Task>,
    },
    /// The host revokes the allowance with this id ([`crate::Session::revoke_allowance`]):
    /// it no longer applies (a workspace one the driver revoked in the store first). Next:
    /// nothing.
    RevokeAllowance(String),
    /// An approved call that a rule refuses as it is about to run (a `deny` rule, or an `ask`
    /// rule over a call only an allowance approved): never run, the model
    /// told why, and the refusal's own audit record appended, rejected with the rule; the
    /// approval's record `record` stays as it was saved ([`Change::refuse_approved_tool`]).
    RefusedApproved {
        /// The call the result answers.
        call: CallRef,
        /// The audit record of the approval.
        record: DecidedRecord,
        /// The deny rule that refused it.
        rule: Box<RuleRecord>,
    },
    /// A write of the mode an approved plan binds was ruled ([`super::ledger`]): the call
    /// `tool_call_id` of tool `tool_name` writes `written`, and runs, waits or is refused
    /// (`ruled`). Noted in the plan's ledger for its report; saved with the run's next saved
    /// change. Next: nothing.
    PlanWrite {
        /// The call's id.
        tool_call_id: String,
        /// Its tool.
        tool_name: String,
        /// Where the paths it writes lie.
        written: super::scope::Written,
        /// How it was ruled.
        ruled: super::ledger::WriteRuled,
    },
    /// The child `child_id` of a `subagent` call ended having noted `writes` in its copy of
    /// the approved plan's ledger ([`super::state::State::child_plan_ledger`]): they go to
    /// this session's ledger, for its report. Next: nothing.
    ChildPlanWrites {
        /// The child's id.
        child_id: Arc<str>,
        /// The writes it noted, each as it was ruled and settled.
        writes: Vec<crate::plan_report::PlanWrite>,
    },
    /// The calls of the assistant message at `at` from `from` on are not executed: the run
    /// suspends on a plan first (`tool_start` and `tool_end` for each, saying so).
    SkipRest {
        /// The running run.
        run_id: Arc<str>,
        /// The assistant message's position in the conversation.
        at: usize,
        /// The first call not executed.
        from: usize,
    },
    /// The run suspends: on a plan, or on the tool calls that wait for approval. Next: wait.
    Suspend(Suspend),
    /// The reviewer's verdict shown on the pending decision `decision_id` (its payload's
    /// `review`) is applied by the rule of [`super::review`]: under `reviewerMay = "decide"`
    /// an approval (pinned to the sha256 the reviewer was given) or a rejection is taken as
    /// the decision; anything else leaves it waiting for a person ([`Next::Nothing`]).
    Review {
        /// The pending decision the reviewer saw.
        decision_id: String,
        /// As for [`Input::Decide`].
        lacking: Vec<String>,
    },
    /// The run suspends on the plan the `submit_plan` call `tool_call_id` submitted, which a
    /// hook denied ([`crate::hook`]): in the same change, one save, it is suspended on as for
    /// [`Suspend::Plan`] and rejected with the hook's reason as the feedback, before anyone is
    /// asked, its audit record naming the hook (`hook`; `via` hook), as a tool call's does. So
    /// no saved state has the plan waiting for a person with the hook's deny lost. Events: the
    /// suspension's, then the rejection's. Next: as for [`Input::Decide`] of that rejection.
    HookDeniedPlan {
        /// The running run.
        run_id: Arc<str>,
        /// The `submit_plan` call.
        tool_call_id: String,
        /// The captured plan.
        submission: PlanSubmission,
        /// What the hooks answered (a deny).
        hook: Box<crate::hook::HookRecord>,
        /// As for [`Input::Decide`].
        lacking: Vec<String>,
    },
    /// The host's decision on what waits at `index`, checked already
    /// ([`super::check::check`]). Next: wait for the other calls of the reply, the run ended, or
    /// it resumes: run the approved tools, then call the model.
    Decide {
        /// The position in the session's pending decisions.
        index: usize,
        /// The host's decision.
        decision: Decision,
        /// What [`super::check::check`] resolved it to.
        checked: Checked,
        /// The tools of the reply's suspended calls this host does not have: a run whose
        /// answered call is of one of them is carried on by a host that has it.
        lacking: Vec<String>,
    },
    /// A host carries on a suspended run whose calls are all decided (an answer recorded by a
    /// host that lacked its tool); `lacking` as for [`Input::Decide`].
    CarryOn {
        /// The tools of the reply's suspended calls this host does not have.
        lacking: Vec<String>,
    },
    /// The run, or what waits for a decision, is aborted.
    Abort(Abort),
    /// A manual switch to mode `target` (a different mode): what waits is cancelled, then
    /// `mode_changed` with reason `manual` and a notice for the model.
    ManualSwitch(ModeId),
    /// The host chooses the model with this id for the current mode
    /// ([`crate::Session::choose_model`]): kept until the mode changes, or, for the mode's own
    /// model, the choice ends; refused when it is not offered. Next: nothing.
    ChooseModel(String),
    /// The deadline tick: what the expiry found due at `now` ([`super::expiry::expire`]) is
    /// answered, and the suspended run ends.
    Deadline {
        /// The suspended run.
        run_id: Arc<str>,
        /// What expired, and how each call is answered.
        expiry: Expiry,
    },
    /// The lease tick: this process takes (or renews) the running run's lease.
    LeaseTick,
    /// This process carries on interrupted run `run_id`: the lease, `agent_start`, and an
    /// "interrupted" result for each call that was cut off. Next: call the model.
    TakeOver(Arc<str>),
    /// The run ends: completed (the model is done), or failed with `error`.
    End {
        /// The running run.
        run_id: Arc<str>,
        /// Why it failed; `None` when it completed.
        error: Option<String>,
    },
}

/// The suspension of a run.
#[derive(Debug)]
pub(crate) enum Suspend {
    /// On the plan the `submit_plan` call `tool_call_id` submitted.
    Plan {
        /// The running run.
        run_id: Arc<str>,
        /// The `submit_plan` call.
        tool_call_id: String,
        /// The captured plan.
        submission: PlanSubmission,
        /// What the mode's reviewer said about it ([`crate::review`]), shown beside it.
        review: Option<Box<crate::review::ReviewRecord>>,
    },
    /// On the calls `asked` of the assistant message at `at`, which wait for approval.
    ToolCalls {
        /// The running run.
        run_id: Arc<str>,
        /// The assistant message's position in the conversation.
        at: usize,
        /// The calls that wait, in the model's order ([`Asked`]).
        asked: Vec<Asked>,
        /// The calls at these indexes, which their tools suspended: each waits for the user's
        /// answer ([`crate::ToolOutput::suspend`]).
        suspended: Vec<(usize, Box<crate::exchange::ToolSuspension>)>,
        /// The `subagent` calls at these indexes, whose children wait for the user: each
        /// child's waiting decisions wait in this session, under ids of its own.
        children: Vec<(usize, super::state::WaitingChild)>,
    },
}

/// A call of a reply that waits for approval, as the driver found it: its position in the
/// reply, the `ask` rule that made it wait (if one did), and where its path arguments lead
/// (resolved in the workspace by the driver, the I/O the core does not do).
#[derive(Debug)]
pub(crate) struct Asked {
    /// The call's position in the reply.
    pub(crate) index: usize,
    /// The `ask` rule that made it wait; `None` when `requireApproval` did.
    pub(crate) rule: Option<Box<RuleRecord>>,
    /// Where its path arguments lead ([`crate::rules::locate_path_args`]).
    pub(crate) locations: Vec<crate::rules::ResolvedLocation>,
    /// Why it waits as drift: it writes outside the approved plan's files
    /// ([`super::ruling::Ruling::Drift`]); `None` otherwise.
    pub(crate) drift: Option<String>,
    /// What the mode's reviewer said about it (`reviewToolCalls`, [`crate::review`]), shown
    /// beside it; `None` when no reviewer saw it.
    pub(crate) review: Option<Box<crate::review::ReviewRecord>>,
}

impl Asked {
    /// The call at `index`, made to wait by `rule` (`None`: by `requireApproval`), its path
    /// arguments not resolved.
    pub(crate) fn at(index: usize, rule: Option<Box<RuleRecord>>) -> Self {
        Self {
            index,
            rule,
            locations: Vec::new(),
            drift: None,
            review: None,
        }
    }
}

/// What an abort stops, and where the run was when it came.
#[derive(Debug)]
pub(crate) enum Abort {
    /// What waits for a decision is cancelled for `reason` (the host's abort, a new message):
    /// not approved, and the suspended run ends aborted.
    Pending(CancelReason),
    /// The running run `run_id` stops during a model call or a tool call (cancelled, its future
    /// dropped, or found running with no live lease): its open tool calls get their results.
    Run(Arc<str>),
    /// The running run `run_id` stops before the approved calls of its reply ran: none of them
    /// starts.
    BeforeApproved(Arc<str>),
    /// The running run stops while it runs the calls of the assistant message at `at`.
    ToolCalls {
        /// The running run.
        run_id: Arc<str>,
        /// The assistant message's position in the conversation.
        at: usize,
        /// The calls before `next` started.
        next: usize,
        /// The calls that were to wait for approval.
        waiting: Vec<usize>,
        /// The calls their tools suspended: each was to wait for the user's answer.
        suspended: Vec<usize>,
        /// The call cut off while it ran, if any.
        running: Option<usize>,
        /// When an allowance let the call at `running` run: the allowance, and the sha256 of
        /// the call's canonical arguments, for its audit record.
        allowed: Option<(Box<crate::allowance::Allowance>, String)>,
        /// The `subagent` calls that ran together ([`RanTogether`]), started before `next`:
        /// each keeps what it returned, if it finished; the others were cut off.
        together: Vec<RanTogether>,
    },
}

/// A `subagent` call of a reply that ran together with its siblings when the run stopped
/// ([`Abort::ToolCalls`]): what it returned if it finished (kept as its result: it ran), and
/// what let it run (for its audit record).
#[derive(Debug)]
pub(crate) struct RanTogether {
    /// The call's position in the reply.
    pub(crate) index: usize,
    /// What it returned; `None` when it was cut off.
    pub(crate) output: Option<ToolOutput>,
    /// The `allow` rule that let it run, if one did, for its audit record.
    pub(crate) rule: Option<Box<RuleRecord>>,
    /// The allowance that let it run, if one did, for its audit record.
    pub(crate) allowance: Option<Box<crate::allowance::Allowance>>,
    /// The sha256 of the call's canonical arguments (for a record).
    pub(crate) args_sha256: String,
}

impl Input {
    /// Whether the input's change is saved before it is swapped in (the *save* effect): every
    /// input but those a running run makes as it goes (its start, the model's reply, a tool call
    /// and its result), which are saved with the run's next saved change.
    pub(crate) fn saves(&self) -> bool {
        !matches!(
            self,
            Input::UserMessage(_)
                | Input::ModelReply { .. }
                | Input::ToolStart { .. }
                | Input::ToolResult { .. }
                | Input::RuledToolResult { .. }
                | Input::AllowedToolResult { .. }
                | Input::HookedToolResult { .. }
                | Input::TasksChanged { .. }
                | Input::RefusedApproved { .. }
                | Input::SkipRest { .. }
                | Input::PlanWrite { .. }
                | Input::ChildPlanWrites { .. }
        )
    }

    /// Whether the rules may refuse the input: then its change is computed on a copy even with
    /// nothing to save, so a refusal leaves the state untouched.
    pub(crate) fn may_refuse(&self) -> bool {
        matches!(
            self,
            Input::Decide { .. }
                | Input::Review { .. }
                | Input::HookDeniedPlan { .. }
                | Input::ChooseModel(_)
        )
    }
}

impl Change<'_> {
    /// The one entry point of the rules: `(state, input, now) -> (next state, effects)`. Writes
    /// the next state on the change's state and its events on the change's events, and returns
    /// the next step.
    ///
    /// # Errors
    /// [`SessionError::NotSuspended`] for a decision on nothing that waits; nothing changes.
    pub(crate) fn handle(&mut self, input: Input) -> Result<Next, SessionError> {
        Ok(match input {
            Input::Opened => {
                self.open();
                Next::Nothing
            }
            Input::UserMessage(text) => Next::CallModel(self.start_run(text)),
            Input::ModelReply { run_id, reply } => self.model_reply(run_id, reply),
            Input::ToolStart {
                run_id,
                at,
                index,
                waits_for_approval,
            } => {
                self.start_tool(&run_id, at, index, waits_for_approval);
                Next::Nothing
            }
            Input::ToolResult {
                call,
                output,
                decision,
            } => {
                self.finish_tool(call, output, decision);
                Next::Nothing
            }
            Input::RuledToolResult {
                call,
                args_sha256,
                output,
                rule,
            } => {
                self.finish_ruled_tool(call, args_sha256, output, rule);
                Next::Nothing
            }
            Input::AllowedToolResult {
                call,
                args_sha256,
                output,
                allowance,
            } => {
                self.finish_allowed_tool(call, args_sha256, output, &allowance);
                Next::Nothing
            }
            Input::HookedToolResult {
                call,
                args_sha256,
                output,
                hook,
            } => {
                self.finish_hooked_tool(call, args_sha256, output, hook);
                Next::Nothing
            }
            Input::TasksChanged { run_id, tasks } => {
                self.set_tasks(run_id, tasks);
                Next::Nothing
            }
            Input::RevokeAllowance(id) => {
                let mode_id = self.mode_arc();
                self.state.drop_allowance(&id, &mode_id);
                // What it approved unseen and has not run yet waits again.
                self.state.withdraw_approvals_of_revoked();
                Next::Nothing
            }
            Input::RefusedApproved { call, record, rule } => {
                self.refuse_approved_tool(call, &record, rule);
                Next::Nothing
            }
            Input::PlanWrite {
                tool_call_id,
                tool_name,
                written,
                ruled,
            } => {
                self.note_plan_write(tool_call_id, &tool_name, &written, ruled);
                Next::Nothing
            }
            Input::ChildPlanWrites { child_id, writes } => {
                self.note_child_plan_writes(&child_id, writes);
                Next::Nothing
            }
            Input::SkipRest { run_id, at, from } => {
                self.skip_rest(&run_id, at, from);
                Next::Nothing
            }
            Input::Suspend(Suspend::Plan {
                run_id,
                tool_call_id,
                submission,
                review,
            }) => {
                let payload =
                    Box::new(self.suspend_plan(&run_id, &tool_call_id, submission, review));
                Next::SuspendedOnPlan {
                    run_id,
                    tool_call_id,
                    payload,
                }
            }
            Input::Suspend(Suspend::ToolCalls {
                run_id,
                at,
                asked,
                suspended,
                children,
            }) => {
                self.suspend_tool_calls(&run_id, at, asked, suspended, children);
                Next::WaitsOnToolCalls(run_id)
            }
            Input::Decide {
                index,
                decision,
                checked,
                lacking,
            } => self.decide(index, decision, checked, &lacking, None, None)?,
            Input::HookDeniedPlan {
                run_id,
                tool_call_id,
                submission,
                hook,
                lacking,
            } => self.hook_denied_plan(run_id, tool_call_id, submission, hook, &lacking)?,
            Input::Review {
                decision_id,
                lacking,
            } => self.review(&decision_id, &lacking)?,
            Input::CarryOn { lacking } => self.carry_on_answered(&lacking),
            Input::Abort(abort) => {
                self.abort(abort);
                Next::Nothing
            }
            Input::ManualSwitch(target) => {
                self.cancel_pending(CancelReason::ModeSwitch);
                // The switch ends every "always allow" of the session (`enter_mode`).
                self.set_mode(target, ModeChangeReason::Manual);
                Next::Nothing
            }
            Input::ChooseModel(id) => {
                self.choose_model(&id)?;
                Next::Nothing
            }
            Input::Deadline { run_id, expiry } => {
                self.apply_expiry(&run_id, expiry);
                Next::Nothing
            }
            Input::LeaseTick => {
                self.take_lease();
                Next::Nothing
            }
            Input::TakeOver(run_id) => {
                self.take_over(&run_id);
                Next::CallModel(run_id)
            }
            Input::End { run_id, error } => {
                self.end_run(&run_id, error.as_deref());
                Next::Nothing
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::event::{DecisionOutcome, RunState};
    use crate::exchange::Message;
    use crate::machine::check::check;
    use crate::machine::rig::{Rig, T0, call, reads};
    use crate::machine::run::{CANCELLED_RESULT, NOT_STARTED_RESULT, SUSPENDED_FIRST_RESULT};
    use crate::plan::REJECTED_RESULT;

    fn plan(title: &str) -> PlanSubmission {
        PlanSubmission {
            path: "plans/a.md".to_owned(),
            title: title.to_owned(),
            plan: "1. Step.".to_owned(),
            sha256: format!("{:0>64}", title.len()),
        }
    }

    /// A run suspended on a plan in mode `plan`; returns its id.
    fn suspended_on_plan(rig: &mut Rig) -> Arc<str> {
        let run = rig.start("make a plan");
        rig.reply(
            &run,
            "",
            vec![call("c1", "submit_plan", json!({"path": "a.md"}))],
        );
        let suspend = Suspend::Plan {
            run_id: run.clone(),
            tool_call_id: "c1".to_owned(),
            submission: plan("A"),
            review: None,
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        rig.take_kinds();
        run
    }

    /// A run in mode `build` suspended on the `write_file` calls `w1` and `w2` (a `read_file`
    /// between them ran); returns its id.
    fn suspended_on_calls(rig: &mut Rig) -> Arc<str> {
        rig.state.mode = rig.mode("build");
        let run = rig.start("write");
        let calls = vec![
            call("w1", "write_file", json!({"path": "a"})),
            call("r1", "read_file", json!({"path": "b"})),
            call("w2", "write_file", json!({"path": "c"})),
        ];
        let Next::RunToolCalls { at, .. } = rig.reply(&run, "", calls) else {
            panic!("a reply with calls runs them");
        };
        rig.result(&run, "r1", "b's text");
        let suspend = Suspend::ToolCalls {
            run_id: run.clone(),
            at,
            asked: vec![Asked::at(0, None), Asked::at(2, None)],
            suspended: Vec::new(),
            children: Vec::new(),
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        rig.take_kinds();
        run
    }

    /// A run started in the rig's mode whose reply calls `calls`, the first of them (`c1`, a
    /// `read_file`) answered `one`, and the events so far taken; returns its id.
    fn past_the_first_call(rig: &mut Rig, calls: Vec<crate::tool::ToolCall>) -> Arc<str> {
        let run = rig.start("hi");
        rig.reply(&run, "", calls);
        rig.result(&run, "c1", "one");
        rig.take_kinds();
        run
    }

    /// The `read_file` call `c1`, the `write_file` call `w1`, then a `read_file` call for each
    /// of `more`.
    fn read_write_reads(more: &[&str]) -> Vec<crate::tool::ToolCall> {
        let mut calls = vec![
            call("c1", "read_file", json!({})),
            call("w1", "write_file", json!({})),
        ];
        calls.extend(reads(more));
        calls
    }

    /// A plain approval of what waits first, checked against nothing.
    fn plain_approval() -> Input {
        Input::Decide {
            index: 0,
            decision: Decision::approve(),
            checked: Checked {
                target: None,
                edited: None,
                comments: Vec::new(),
                steps: None,
            },
            lacking: Vec::new(),
        }
    }

    fn decide(rig: &mut Rig, index: usize, decision: Decision) -> Result<Next, SessionError> {
        let checked = check(&rig.state.pending[index], &decision)?;
        rig.handle(Input::Decide {
            index,
            decision,
            checked,
            lacking: Vec::new(),
        })
    }

    #[test]
    fn only_the_steps_of_a_running_run_go_unsaved_and_only_a_decision_is_refused() {
        let run: Arc<str> = Arc::from("run_1");
        let unsaved = [
            Input::UserMessage("hi".to_owned()),
            Input::ToolStart {
                run_id: run.clone(),
                at: 0,
                index: 0,
                waits_for_approval: false,
            },
            Input::SkipRest {
                run_id: run.clone(),
                at: 0,
                from: 0,
            },
        ];
        for input in &unsaved {
            assert!(!input.saves(), "{input:?}");
            assert!(!input.may_refuse(), "{input:?}");
        }
        let saved = [
            Input::Opened,
            Input::LeaseTick,
            Input::TakeOver(run.clone()),
            Input::Abort(Abort::Run(run.clone())),
            Input::End {
                run_id: run,
                error: None,
            },
        ];
        for input in &saved {
            assert!(input.saves(), "{input:?}");
            assert!(!input.may_refuse(), "{input:?}");
        }
        let decide = plain_approval();
        assert!(decide.saves() && decide.may_refuse());
    }

    #[test]
    fn a_run_starts_with_the_message_and_ends_with_the_models_text() {
        let mut rig = Rig::new();
        rig.handle(Input::Opened).expect("opens");
        assert_eq!(rig.take_kinds(), ["session_started"]);
        let run = rig.start("hello");
        assert_eq!(&*run, "run_1");
        assert_eq!(rig.state.counter, 1);
        assert_eq!(rig.state.run, Some((run.clone(), RunState::Running)));
        assert_eq!(rig.take_kinds(), ["agent_start"]);
        let next = rig.reply(&run, "done", Vec::new());
        assert!(
            matches!(&next, Next::Complete { run_id, text } if *run_id == run && text == "done"),
            "{next:?}"
        );
        assert_eq!(rig.take_kinds(), ["assistant_message"]);
        let end = Input::End {
            run_id: run.clone(),
            error: None,
        };
        assert!(matches!(rig.handle(end), Ok(Next::Nothing)));
        assert_eq!(rig.take_kinds(), ["agent_end"]);
        assert_eq!(rig.state.run, Some((run.clone(), RunState::Completed)));
        assert_eq!(
            *rig.state.messages,
            [
                Message::User {
                    content: "hello".to_owned()
                },
                Message::Assistant {
                    content: "done".to_owned(),
                    tool_calls: Vec::new()
                },
            ]
        );
        // The next run is the session's second.
        assert_eq!(&*rig.start("again"), "run_2");
    }

    #[test]
    fn a_failed_run_says_why_before_it_ends() {
        let mut rig = Rig::new();
        let run = rig.start("hello");
        rig.take_kinds();
        let end = Input::End {
            run_id: run.clone(),
            error: Some("rate limited".to_owned()),
        };
        rig.handle(end).expect("ends");
        assert_eq!(rig.take_kinds(), ["error", "agent_end"]);
        assert_eq!(rig.state.run, Some((run, RunState::Failed)));
    }

    #[test]
    fn a_reply_says_why_the_model_stopped_only_when_the_provider_did() {
        let mut rig = Rig::new();
        let run = rig.start("hello");
        rig.take_kinds();
        let reply = ModelResponse {
            text: String::new(),
            tool_calls: Vec::new(),
            finish_reason: Some("stop".to_owned()),
            usage: None,
        };
        rig.handle(Input::ModelReply {
            run_id: run.clone(),
            reply,
        })
        .expect("a reply");
        assert_eq!(rig.take_kinds(), ["model_end"]);
        rig.reply(&run, "", Vec::new());
        assert_eq!(rig.take_kinds(), Vec::<&str>::new());
    }

    #[test]
    fn a_reply_with_calls_keeps_them_with_ids_of_their_own() {
        let mut rig = Rig::new();
        let run = rig.start("hello");
        let calls = vec![
            call("c", "read_file", json!({"b": 1, "a": 2})),
            call("c", "read_file", json!({})),
            call("", "read_file", json!({})),
        ];
        let next = rig.reply(&run, "looking", calls);
        assert!(matches!(next, Next::RunToolCalls { at: 1, .. }), "{next:?}");
        let ids: Vec<&str> = (0..3)
            .map(|i| rig.state.tool_call(1, i).expect("a call").id.as_str())
            .collect();
        assert_eq!(ids, ["c", "c_1", "call_2"]);
    }

    #[test]
    fn tool_calls_start_and_end_in_the_conversation() {
        let mut rig = Rig::new();
        let run = rig.start("hello");
        rig.reply(&run, "", vec![call("c1", "read_file", json!({}))]);
        rig.take_kinds();
        let start = Input::ToolStart {
            run_id: run.clone(),
            at: 1,
            index: 0,
            waits_for_approval: false,
        };
        assert!(matches!(rig.handle(start), Ok(Next::Nothing)));
        // No such call: nothing happens.
        let beyond = Input::ToolStart {
            run_id: run.clone(),
            at: 1,
            index: 1,
            waits_for_approval: false,
        };
        rig.handle(beyond).expect("nothing");
        assert_eq!(rig.take_kinds(), ["tool_start"]);
        let result = Input::ToolResult {
            call: CallRef::new(run, "c1", "read_file"),
            output: ToolOutput::ok("text"),
            decision: None,
        };
        rig.handle(result).expect("a result");
        assert_eq!(rig.take_kinds(), ["tool_end"]);
        assert_eq!(rig.results(), [("c1".to_owned(), "text".to_owned())]);
    }

    #[test]
    fn a_plan_suspends_the_run_with_its_targets_deadline_and_decision_id() {
        let mut rig = Rig::new();
        let run = rig.start("make a plan");
        rig.reply(
            &run,
            "",
            vec![
                call("c1", "submit_plan", json!({"path": "a.md"})),
                call("c2", "read_file", json!({})),
            ],
        );
        rig.handle(Input::SkipRest {
            run_id: run.clone(),
            at: 1,
            from: 1,
        })
        .expect("skips");
        assert_eq!(
            rig.results(),
            [("c2".to_owned(), SUSPENDED_FIRST_RESULT.to_owned())]
        );
        rig.take_kinds();
        let suspend = Suspend::Plan {
            run_id: run.clone(),
            tool_call_id: "c1".to_owned(),
            submission: plan("A"),
            review: None,
        };
        let Ok(Next::SuspendedOnPlan {
            run_id,
            tool_call_id,
            payload,
        }) = rig.handle(Input::Suspend(suspend))
        else {
            panic!("a plan suspends the run");
        };
        assert_eq!((&*run_id, tool_call_id.as_str()), ("run_1", "c1"));
        assert_eq!(payload.decision_id, "decision_1");
        assert_eq!(&*payload.target_mode_id, "build");
        let targets: Vec<&str> = payload.target_mode_ids.iter().map(|t| &**t).collect();
        assert_eq!(targets, ["build", "build-auto"]);
        assert_eq!(payload.terms.deadline_at_ms, Some(T0 + 3_600_000));
        assert_eq!(payload.revision, 1);
        assert_eq!(rig.take_kinds(), ["tool_suspended", "agent_end"]);
        assert_eq!(rig.state.run, Some((run, RunState::Suspended)));
        assert_eq!(rig.state.pending.len(), 1);
    }

    #[test]
    fn an_approved_plan_hands_over_to_the_target_it_names() {
        for (to, expected) in [(None, "build"), (Some("build-auto"), "build-auto")] {
            let mut rig = Rig::new();
            let run = suspended_on_plan(&mut rig);
            let mut decision = Decision::approve().decided_by("alice");
            if let Some(to) = to {
                decision = decision.to(to);
            }
            let next = decide(&mut rig, 0, decision).expect("approved");
            assert!(matches!(&next, Next::CallModel(r) if *r == run), "{next:?}");
            assert_eq!(rig.mode_id(), expected);
            assert_eq!(
                rig.take_kinds(),
                ["agent_start", "tool_end", "mode_changed"]
            );
            assert!(rig.state.pending.is_empty());
            assert_eq!(rig.state.run, Some((run.clone(), RunState::Running)));
            let record = rig.state.history.last().expect("a record");
            assert_eq!(record.outcome, Some(DecisionOutcome::Approved));
            assert_eq!(record.target_mode_id.as_deref(), Some(expected));
            assert_eq!(record.decided_by.as_deref(), Some("alice"));
            assert_eq!(record.decided_at.as_deref(), Some("2026-12-01T18:00:00Z"));
            let (id, result) = rig.results().pop().expect("the plan's result");
            assert_eq!(id, "c1");
            assert!(result.contains(&format!("(`{expected}`)")), "{result}");
        }
    }

    #[test]
    fn a_rejected_plan_stays_in_the_mode_and_ends_the_run_without_feedback() {
        let mut rig = Rig::new();
        let run = suspended_on_plan(&mut rig);
        let next = decide(&mut rig, 0, Decision::reject()).expect("rejected");
        assert!(
            matches!(&next, Next::Ended { run_id, error: None } if *run_id == run),
            "{next:?}"
        );
        assert_eq!(rig.mode_id(), "plan");
        assert_eq!(rig.state.run, Some((run, RunState::Completed)));
        assert_eq!(rig.take_kinds(), ["agent_start", "tool_end", "agent_end"]);
        assert_eq!(
            rig.results().pop().map(|r| r.1).as_deref(),
            Some(REJECTED_RESULT)
        );
        let record = rig.state.history.last().expect("a record");
        assert_eq!(record.outcome, Some(DecisionOutcome::Rejected));
        assert_eq!(record.target_mode_id, None);
    }

    #[test]
    fn feedback_asks_for_revisions_until_the_runs_limit() {
        let mut rig = Rig::new();
        let run = suspended_on_plan(&mut rig);
        for revision in 1..=2 {
            let next = decide(&mut rig, 0, Decision::reject_with("more tests")).expect("ok");
            assert!(matches!(next, Next::CallModel(_)), "{revision}: {next:?}");
            assert_eq!(rig.state.run, Some((run.clone(), RunState::Running)));
            let suspend = Suspend::Plan {
                run_id: run.clone(),
                tool_call_id: format!("p{revision}"),
                submission: plan("AB"),
                review: None,
            };
            let Ok(Next::SuspendedOnPlan { payload, .. }) = rig.handle(Input::Suspend(suspend))
            else {
                panic!("suspends again");
            };
            assert_eq!(payload.revision, revision + 1);
        }
        let next = decide(&mut rig, 0, Decision::reject_with("still")).expect("ok");
        let Next::Ended {
            error: Some(error), ..
        } = next
        else {
            panic!("past the limit the run fails: {next:?}");
        };
        assert_eq!(error.kind(), crate::model::ModelErrorKind::RevisionLimit);
        assert_eq!(rig.state.run, Some((run, RunState::Failed)));
        assert_eq!(rig.mode_id(), "plan");
    }

    /// A plan a hook denied is suspended and rejected in one change (one save): after it no
    /// plan waits, the rejection is recorded as the hook's, and the events are those of the
    /// suspension then of the rejection, in order.
    #[test]
    fn a_plan_a_hook_denies_is_suspended_and_rejected_in_one_change() {
        let mut rig = Rig::new();
        let run = rig.start("make a plan");
        rig.reply(
            &run,
            "",
            vec![call("c1", "submit_plan", json!({"path": "a.md"}))],
        );
        rig.take_kinds();
        let hook = crate::hook::HookRecord {
            hook: "policy".to_owned(),
            decision: crate::hook::HookDecision::Deny,
            reason: Some("no step tests it".to_owned()),
            error: None,
        };
        let denied = Input::HookDeniedPlan {
            run_id: run.clone(),
            tool_call_id: "c1".to_owned(),
            submission: plan("A"),
            hook: Box::new(hook.clone()),
            lacking: Vec::new(),
        };
        assert!(denied.saves() && denied.may_refuse(), "one saved change");
        let next = rig.handle(denied).expect("rejected");
        assert!(matches!(&next, Next::CallModel(r) if *r == run), "{next:?}");
        assert!(rig.state.pending.is_empty(), "no plan waits for a person");
        assert_eq!(rig.state.run, Some((run, RunState::Running)));
        assert_eq!(
            rig.take_kinds(),
            ["tool_suspended", "agent_end", "agent_start", "tool_end"]
        );
        let record = rig.state.history.last().expect("the rejection");
        assert_eq!(record.outcome, Some(DecisionOutcome::Rejected));
        assert_eq!(record.decision_id, "decision_1");
        assert_eq!(record.decided_by.as_deref(), Some("hook policy"));
        assert_eq!(record.via, Some(crate::quorum::Via::Hook));
        assert_eq!(record.hook.as_deref(), Some(&hook));
        assert_eq!(record.how(), crate::event::DecidedHow::Hook);
        let (id, result) = rig.results().pop().expect("the plan's result");
        assert_eq!(id, "c1");
        assert!(result.contains("no step tests it"), "{result}");
    }

    #[test]
    fn a_decision_on_nothing_is_refused() {
        let mut rig = Rig::new();
        assert_eq!(
            rig.handle(plain_approval()).map(drop),
            Err(SessionError::NotSuspended(String::new()))
        );
        assert!(rig.events.is_empty());
    }

    #[test]
    fn tool_calls_wait_together_and_the_last_decision_resumes_the_run() {
        let mut rig = Rig::new();
        let run = suspended_on_calls(&mut rig);
        assert_eq!(rig.state.undecided_calls().len(), 2);
        assert_eq!(rig.state.run, Some((run.clone(), RunState::Suspended)));
        let first = rig.state.pending[0].deadline_at_ms();
        assert_eq!(first, Some(T0 + 1_800_000));
        let next = decide(&mut rig, 1, Decision::reject_with("not c")).expect("ok");
        assert!(
            matches!(&next, Next::WaitsOnToolCalls(r) if *r == run),
            "{next:?}"
        );
        assert_eq!(rig.take_kinds(), Vec::<&str>::new());
        assert_eq!(rig.state.undecided_calls().len(), 1);
        let next = decide(&mut rig, 0, Decision::approve()).expect("ok");
        let Next::RunApproved { run_id, calls, .. } = next else {
            panic!("the last decision resumes the run: {next:?}");
        };
        assert_eq!(run_id, run);
        let approved: Vec<&str> = calls.iter().map(|(c, _)| c.tool_call_id()).collect();
        assert_eq!(approved, ["w1"]);
        // The rejected call got its result in the same change.
        assert_eq!(rig.take_kinds(), ["agent_start", "tool_end"]);
        let (id, result) = rig.results().pop().expect("a result");
        assert_eq!(id, "w2");
        assert!(result.contains("not c"), "{result}");
        assert_eq!(rig.state.history.len(), 2);
        assert!(rig.state.pending.is_empty());
        assert_eq!(rig.state.run, Some((run, RunState::Running)));
    }

    /// Trust round 4, M2: an "always allow" approves the call it is given at, not the tool's
    /// other waiting call, which is asked about; it lasts until the mode changes.
    #[test]
    fn always_allow_approves_the_call_shown_until_the_mode_changes() {
        let mut rig = Rig::new();
        suspended_on_calls(&mut rig);
        let next = decide(&mut rig, 0, Decision::approve().always_allow()).expect("ok");
        assert!(matches!(next, Next::WaitsOnToolCalls(_)), "{next:?}");
        let next = decide(&mut rig, 1, Decision::approve()).expect("ok");
        let Next::RunApproved { calls, .. } = next else {
            panic!("every call is decided: {next:?}");
        };
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].1.allowed_by, None, "approved by the user");
        assert!(calls[0].1.always_allow && !calls[1].1.always_allow);
        assert_eq!(rig.state.always_allowed, ["write_file"]);
        rig.handle(Input::ManualSwitch(rig.mode("plan")))
            .expect("switch");
        assert!(rig.state.always_allowed.is_empty());
    }

    #[test]
    fn an_abort_answers_every_waiting_call_as_not_approved() {
        let mut rig = Rig::new();
        let run = suspended_on_calls(&mut rig);
        let abort = Abort::Pending(CancelReason::Aborted);
        rig.handle(Input::Abort(abort)).expect("aborts");
        assert_eq!(
            rig.take_kinds(),
            [
                "agent_start",
                "tool_suspension_cancelled",
                "tool_suspension_cancelled",
                "agent_end"
            ]
        );
        assert!(rig.state.pending.is_empty());
        assert_eq!(rig.state.run, Some((run, RunState::Aborted)));
        let outcomes: Vec<_> = rig.state.history.iter().map(|r| r.outcome).collect();
        assert_eq!(outcomes, [Some(DecisionOutcome::Cancelled); 2]);
        let ids: Vec<String> = rig.results().into_iter().map(|r| r.0).collect();
        assert_eq!(ids, ["r1", "w1", "w2"]);
        // Nothing waits any more: a second abort changes nothing.
        rig.handle(Input::Abort(Abort::Pending(CancelReason::Aborted)))
            .expect("nothing");
        assert!(rig.events.is_empty());
    }

    #[test]
    fn a_manual_switch_cancels_the_plan_and_tells_the_model() {
        let mut rig = Rig::new();
        suspended_on_plan(&mut rig);
        rig.handle(Input::ManualSwitch(rig.mode("build")))
            .expect("switch");
        assert_eq!(rig.mode_id(), "build");
        let kinds = rig.take_kinds();
        assert_eq!(
            kinds,
            [
                "agent_start",
                "tool_suspension_cancelled",
                "agent_end",
                "mode_changed"
            ]
        );
        assert!(matches!(
            rig.state.messages.last(),
            Some(Message::System { content }) if content.contains("(`build`)")
        ));
        // To the mode it is in: nothing.
        rig.handle(Input::ManualSwitch(rig.mode("build")))
            .expect("switch");
        assert!(rig.events.is_empty());
    }

    #[test]
    fn a_lease_tick_takes_the_lease_for_its_duration_only_with_a_store() {
        let mut rig = Rig::new();
        rig.handle(Input::LeaseTick).expect("tick");
        assert_eq!(rig.state.lease, None);
        assert!(!rig.state.holds_lease);
        rig.lease = Some(std::time::Duration::from_secs(30));
        rig.handle(Input::LeaseTick).expect("tick");
        let lease = rig.state.lease.clone().expect("a lease");
        assert_eq!(lease.owner, "rig-owner");
        assert_eq!(lease.expires_at_ms, T0 + 30_000);
        assert!(rig.state.holds_lease);
        // A run started by a message has no lease: it is saved when it suspends or ends.
        rig.start("hi");
        assert_eq!(rig.state.lease, None);
        assert!(!rig.state.holds_lease);
    }

    #[test]
    fn an_interrupted_run_is_taken_over_without_running_a_call_again() {
        let mut rig = Rig::new();
        rig.lease = Some(std::time::Duration::from_secs(30));
        let run = rig.start("hi");
        rig.reply(&run, "", reads(&["c1", "c2", "c3"]));
        rig.result(&run, "c2", "two");
        rig.take_kinds();
        let next = rig
            .handle(Input::TakeOver(run.clone()))
            .expect("takes over");
        assert!(matches!(&next, Next::CallModel(r) if *r == run), "{next:?}");
        assert!(rig.state.holds_lease);
        assert_eq!(
            rig.take_kinds(),
            [
                "agent_start",
                "tool_start",
                "tool_end",
                "tool_start",
                "tool_end"
            ]
        );
        // The result already given is not given again; c1 may have run, c3 never started: this
        // process started neither, so each gets its `tool_start` here.
        let results = rig.results();
        let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["c2", "c1", "c3"]);
        assert!(
            results[1..]
                .iter()
                .all(|(_, r)| r.starts_with("Interrupted"))
        );
    }

    #[test]
    fn a_cancelled_run_answers_the_running_call_and_the_unstarted_ones() {
        let mut rig = Rig::new();
        let run = past_the_first_call(&mut rig, reads(&["c1", "c2", "c3"]));
        rig.handle(Input::Abort(Abort::Run(run.clone())))
            .expect("aborts");
        // c2 was running (its `tool_start` went out when it started); c3 never started.
        assert_eq!(
            rig.take_kinds(),
            ["tool_end", "tool_start", "tool_end", "agent_end"]
        );
        let results: Vec<String> = rig.results().into_iter().map(|r| r.1).collect();
        assert_eq!(results, ["one", CANCELLED_RESULT, NOT_STARTED_RESULT]);
        assert_eq!(rig.state.run, Some((run, RunState::Aborted)));
    }

    #[test]
    fn a_run_cancelled_among_its_calls_answers_each_in_order() {
        let mut rig = Rig::new();
        rig.state.mode = rig.mode("build");
        let run = past_the_first_call(&mut rig, read_write_reads(&["c2", "c3"]));
        let abort = Abort::ToolCalls {
            run_id: run.clone(),
            at: 1,
            next: 3,
            waiting: vec![1],
            suspended: vec![],
            running: Some(2),
            allowed: None,
            together: Vec::new(),
        };
        rig.handle(Input::Abort(abort)).expect("aborts");
        assert_eq!(
            rig.take_kinds(),
            [
                "tool_end",
                "tool_end",
                "tool_start",
                "tool_end",
                "agent_end"
            ]
        );
        let results: Vec<String> = rig.results().into_iter().map(|r| r.1).collect();
        assert_eq!(
            results,
            [
                "one",
                crate::machine::run::tool_cancelled_result(CancelReason::Aborted),
                CANCELLED_RESULT,
                NOT_STARTED_RESULT
            ]
        );
        assert_eq!(rig.state.run, Some((run, RunState::Aborted)));
    }

    /// A call its tool suspended (a question) before the run was cancelled among its calls is
    /// not answered, never "not approved": nothing is made up for it.
    #[test]
    fn a_run_cancelled_among_its_calls_leaves_a_suspended_call_unanswered() {
        let mut rig = Rig::new();
        rig.state.mode = rig.mode("build");
        let run = past_the_first_call(&mut rig, read_write_reads(&["c2"]));
        let abort = Abort::ToolCalls {
            run_id: run.clone(),
            at: 1,
            next: 3,
            waiting: vec![],
            suspended: vec![1],
            running: Some(2),
            allowed: None,
            together: Vec::new(),
        };
        rig.handle(Input::Abort(abort)).expect("aborts");
        let results: Vec<String> = rig.results().into_iter().map(|r| r.1).collect();
        assert_eq!(
            results,
            [
                "one",
                crate::machine::run::unanswered_result(CancelReason::Aborted),
                CANCELLED_RESULT,
            ]
        );
        assert_eq!(rig.state.run, Some((run, RunState::Aborted)));
    }

    /// Review finding 11: a call an allowance let run, cancelled while it runs, gets the
    /// allowance's audit record (approved, `allowedBy`, `decidedBy`) with its cancelled result,
    /// as it would had it finished; the calls around it are answered as before.
    #[test]
    fn a_call_an_allowance_ran_keeps_its_record_when_the_run_is_cancelled() {
        use crate::allowance::{Allowance, AllowanceScope};
        let mut rig = Rig::new();
        rig.state.mode = rig.mode("build");
        let run = past_the_first_call(&mut rig, read_write_reads(&["c2"]));
        let allowance =
            Allowance::new(AllowanceScope::Session, "decision_7", "build", "write_file");
        let counted = rig.state.decisions;
        let before = rig.state.history.len();
        let abort = Abort::ToolCalls {
            run_id: run.clone(),
            at: 1,
            next: 2,
            waiting: vec![],
            suspended: vec![],
            running: Some(1),
            allowed: Some((Box::new(allowance), "sha".to_owned())),
            together: Vec::new(),
        };
        rig.handle(Input::Abort(abort)).expect("aborts");
        assert_eq!(
            rig.take_kinds(),
            ["tool_end", "tool_start", "tool_end", "agent_end"]
        );
        let results: Vec<String> = rig.results().into_iter().map(|r| r.1).collect();
        assert_eq!(results, ["one", CANCELLED_RESULT, NOT_STARTED_RESULT]);
        assert_eq!(
            rig.state.history.len(),
            before + 1,
            "one record: the allowed call's"
        );
        let record = rig.state.history.last().expect("a record");
        assert_eq!(record.tool_call_id, "w1");
        assert_eq!(record.outcome, Some(DecisionOutcome::Approved));
        assert_eq!(record.allowed_by.as_deref(), Some("decision_7"));
        assert_eq!(
            record.decided_by.as_deref(),
            Some("allowance decision_7 (session)")
        );
        assert_eq!(record.sha256.as_deref(), Some("sha"));
        assert_eq!(rig.state.decisions, counted + 1);
        assert_eq!(rig.state.run, Some((run, RunState::Aborted)));
    }

    #[test]
    fn a_run_cancelled_before_its_approved_calls_starts_none_of_them() {
        let mut rig = Rig::new();
        let run = suspended_on_calls(&mut rig);
        decide(&mut rig, 0, Decision::approve()).expect("ok");
        decide(&mut rig, 1, Decision::approve()).expect("ok");
        rig.take_kinds();
        rig.handle(Input::Abort(Abort::BeforeApproved(run.clone())))
            .expect("aborts");
        assert_eq!(
            rig.take_kinds(),
            [
                "tool_start",
                "tool_end",
                "tool_start",
                "tool_end",
                "agent_end"
            ]
        );
        let results = rig.results();
        let last: Vec<(&str, &str)> = results[results.len() - 2..]
            .iter()
            .map(|(id, r)| (id.as_str(), r.as_str()))
            .collect();
        assert_eq!(
            last,
            [("w1", NOT_STARTED_RESULT), ("w2", NOT_STARTED_RESULT)]
        );
        assert_eq!(rig.state.run, Some((run, RunState::Aborted)));
    }

    #[test]
    fn a_deadline_answers_what_expired_and_ends_the_run() {
        let mut rig = Rig::new();
        let run = suspended_on_plan(&mut rig);
        rig.now_ms = T0 + 3_600_000;
        let waiting = rig
            .state
            .pending
            .iter()
            .map(crate::machine::expiry::waiting);
        let expiry = crate::machine::expiry::expire(waiting, rig.now_ms).expect("due");
        rig.handle(Input::Deadline {
            run_id: run.clone(),
            expiry,
        })
        .expect("expires");
        assert_eq!(rig.take_kinds(), ["agent_start", "tool_end", "agent_end"]);
        assert!(rig.state.pending.is_empty());
        assert_eq!(rig.state.run, Some((run, RunState::Completed)));
        assert_eq!(
            rig.state.history.last().and_then(|r| r.outcome),
            Some(DecisionOutcome::Expired)
        );
    }
}
