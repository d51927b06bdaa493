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

use crate::event::{CancelReason, DecidedRecord, ModeChangeReason, SuspendPayload};
use crate::mode::ModeId;
use crate::model::{ModelError, ModelResponse};
use crate::rules::RuleRecord;
use crate::tool::ToolOutput;
use crate::tool::submit_plan::PlanSubmission;

use super::change::Change;
use super::check::Checked;
use super::decide::Approved;
use super::decision::Decision;
use super::error::SessionError;
use super::expiry::Expiry;

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
    },
    /// A tool call's result (from the tool, or the driver's refusal to run it): `tool_end`, and
    /// the result in the conversation.
    ToolResult {
        /// The running run.
        run_id: Arc<str>,
        /// The model's id of the call.
        call_id: String,
        /// The tool called.
        name: String,
        /// What the call returned.
        output: ToolOutput,
        /// The audit record of the decision that let it run, for a call that waited.
        decision: Option<DecidedRecord>,
    },
    /// The result of a tool call whose outcome a mode's rule decided on its own (`deny`: the
    /// driver's refusal; `allow`: what the tool returned): `tool_end` with the rule's audit
    /// record, the record in the history, and the result in the conversation.
    RuledToolResult {
        /// The running run.
        run_id: Arc<str>,
        /// The model's id of the call.
        call_id: String,
        /// The tool called.
        name: String,
        /// The sha256 of the call's canonical arguments.
        args_sha256: String,
        /// What the call returned, or why it was not executed.
        output: ToolOutput,
        /// The rule that decided.
        rule: Box<RuleRecord>,
    },
    /// An approved call that a `deny` rule refuses as it is about to run: never run, the model
    /// told why, and its audit record `record` (in the history since the decision) rejected,
    /// with the rule ([`Change::refuse_approved_tool`]).
    RefusedApproved {
        /// The running run.
        run_id: Arc<str>,
        /// The model's id of the call.
        call_id: String,
        /// The tool called.
        name: String,
        /// The audit record of the approval.
        record: DecidedRecord,
        /// The deny rule that refused it.
        rule: Box<RuleRecord>,
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
    },
    /// The run, or what waits for a decision, is aborted.
    Abort(Abort),
    /// A manual switch to mode `target` (a different mode): what waits is cancelled, then
    /// `mode_changed` with reason `manual` and a notice for the model.
    ManualSwitch(ModeId),
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
    },
    /// On the calls at `indexes` of the assistant message at `at`, which wait for approval.
    ToolCalls {
        /// The running run.
        run_id: Arc<str>,
        /// The assistant message's position in the conversation.
        at: usize,
        /// The positions of the calls that wait, in the model's order, each with the `ask` rule
        /// that made it wait, if one did.
        indexes: Vec<(usize, Option<Box<RuleRecord>>)>,
    },
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
        /// The call cut off while it ran, if any.
        running: Option<usize>,
    },
}

/// What the driver does once an input's change is saved and its events delivered.
#[derive(Debug)]
pub(crate) enum Next {
    /// Nothing more: the change is all.
    Nothing,
    /// Call the model for run `run_id`, in the current mode.
    CallModel(Arc<str>),
    /// Run the tool calls of the assistant message at `at`, in order ([`Input::ModelReply`]).
    RunToolCalls {
        /// The running run.
        run_id: Arc<str>,
        /// The assistant message's position in the conversation.
        at: usize,
    },
    /// Run these approved tool calls in the model's order, then call the model
    /// ([`Input::Decide`], once every call of the reply is decided).
    RunApproved {
        /// The resumed run.
        run_id: Arc<str>,
        /// The approved calls with their audit records.
        calls: Vec<Approved>,
    },
    /// The model is done: end the run with its text ([`Input::ModelReply`] without tool calls).
    Complete {
        /// The running run.
        run_id: Arc<str>,
        /// The model's last text.
        text: String,
    },
    /// The run waits for a decision on the plan of `submit_plan` call `tool_call_id`
    /// ([`Suspend::Plan`]).
    SuspendedOnPlan {
        /// The suspended run.
        run_id: Arc<str>,
        /// The `submit_plan` call.
        tool_call_id: String,
        /// The captured plan, as `tool_suspended` carried it (boxed: the other steps are small).
        payload: Box<SuspendPayload>,
    },
    /// The run waits for decisions on tool calls ([`Suspend::ToolCalls`], or a decision while
    /// other calls of the reply wait).
    WaitsOnToolCalls(Arc<str>),
    /// A decision ended the run: completed (a plan rejected without feedback), or failed with
    /// this error (past the run's revision limit).
    Ended {
        /// The run that ended.
        run_id: Arc<str>,
        /// The revision limit's error, when it failed the run.
        error: Option<ModelError>,
    },
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
                | Input::RefusedApproved { .. }
                | Input::SkipRest { .. }
        )
    }

    /// Whether the rules may refuse the input: then its change is computed on a copy even with
    /// nothing to save, so a refusal leaves the state untouched.
    pub(crate) fn may_refuse(&self) -> bool {
        matches!(self, Input::Decide { .. })
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
            Input::ToolStart { run_id, at, index } => {
                self.start_tool(&run_id, at, index);
                Next::Nothing
            }
            Input::ToolResult {
                run_id,
                call_id,
                name,
                output,
                decision,
            } => {
                self.finish_tool(&run_id, &call_id, &name, output, decision);
                Next::Nothing
            }
            Input::RuledToolResult {
                run_id,
                call_id,
                name,
                args_sha256,
                output,
                rule,
            } => {
                self.finish_ruled_tool(&run_id, &call_id, &name, args_sha256, output, rule);
                Next::Nothing
            }
            Input::RefusedApproved {
                run_id,
                call_id,
                name,
                record,
                rule,
            } => {
                self.refuse_approved_tool(&run_id, &call_id, &name, record, rule);
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
            }) => {
                let payload = Box::new(self.suspend_plan(&run_id, &tool_call_id, submission));
                Next::SuspendedOnPlan {
                    run_id,
                    tool_call_id,
                    payload,
                }
            }
            Input::Suspend(Suspend::ToolCalls {
                run_id,
                at,
                indexes,
            }) => {
                self.suspend_tool_calls(&run_id, at, &indexes);
                Next::WaitsOnToolCalls(run_id)
            }
            Input::Decide {
                index,
                decision,
                checked,
            } => self.decide(index, decision, checked)?,
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
