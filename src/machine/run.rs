//! The steps of a run, without I/O: a run started by a user message, a suspension on a plan or
//! on tool calls that wait for approval, a suspension cancelled (by an abort, a new message or
//! a manual switch), and the results a cancelled, dropped or interrupted run gives its open
//! tool calls. The driver (`src/session/drive.rs`) calls them between the model and tool calls
//! it makes.

use std::sync::Arc;

use crate::allowance::Allowance;
use crate::event::{
    CancelReason, DecisionOutcome, Event, RunState, SuspendPayload, Suspension, SuspensionKind,
    ToolCallPayload, ToolSuspendPayload, WaitTerms,
};
use crate::exchange::Message;
use crate::exchange::ToolSuspension;
use crate::exchange::{SUBMIT_PLAN, ToolCall, ToolOutput};
use crate::model::ModelResponse;
use crate::plan::{self, PlanRevision, PlanSubmission};

use super::call::CallRef;
use super::change::Change;
use super::check::decision_id_for;
use super::decide::{suspension_record, tool_call_record};
use super::input::{Abort, Asked, RanTogether};
use super::next::Next;
use super::pending::{PendingDecision, PendingPlan, PendingSuspension, PendingToolCall};
use super::state::WaitingChild;

/// The id of the `n`-th run of a session: `run_<n>`.
pub(crate) fn run_id_for(n: u64) -> Arc<str> {
    Arc::from(format!("run_{n}"))
}

/// The result of a tool call a cancelled (or dropped) run was waiting for.
pub(crate) const CANCELLED_RESULT: &str =
    "Cancelled: the run was cancelled before this tool call finished; it returned nothing.";

/// The result of a tool call a cancelled (or dropped) run never started.
pub(crate) const NOT_STARTED_RESULT: &str = "Not executed: the run was cancelled first.";

/// The result of a tool call that a stopped process may have run before the run was carried on
/// ([`Session::continue_run`]): never run again, so the model can check and decide.
pub(crate) const INTERRUPTED_RESULT: &str = "Interrupted: the process running this tool call stopped before its result was saved, so it may or may not have taken effect. It was not run again: check its effect before calling it again.";

/// The result of a tool call after a `submit_plan` that suspended the run: it never ran.
pub(crate) const SUSPENDED_FIRST_RESULT: &str =
    "Not executed: the run suspended for plan approval first. Call it again after the decision.";

/// The not-approved tool result for a suspension cancelled for `reason`.
pub(crate) fn cancelled_result(reason: CancelReason) -> &'static str {
    match reason {
        CancelReason::Aborted => "Plan not approved: the run was aborted. Stay in this mode.",
        CancelReason::UserMessage => {
            "Plan not approved: the user sent a new message instead of deciding. Read it and continue in this mode."
        }
        CancelReason::ModeSwitch => "Plan not approved: the user switched mode by hand.",
    }
}

/// The result of a tool call that waited for approval when its suspension was cancelled for
/// `reason`: it never ran.
pub(crate) fn tool_cancelled_result(reason: CancelReason) -> &'static str {
    match reason {
        CancelReason::Aborted => {
            "Not approved: the run was aborted before this tool call was decided; it was not executed."
        }
        CancelReason::UserMessage => {
            "Not approved: the user sent a new message instead of deciding; this tool call was not executed. Read the message and continue."
        }
        CancelReason::ModeSwitch => {
            "Not approved: the user switched mode by hand; this tool call was not executed."
        }
    }
}

/// What the model gets for a call that waited on the user's answer when the wait ends without
/// one (an abort, a new message, a manual switch): the user did not answer; nothing is made up.
pub(crate) fn unanswered_result(reason: CancelReason) -> &'static str {
    match reason {
        CancelReason::Aborted => {
            "Not answered: the run was aborted before the user answered; there is no answer."
        }
        CancelReason::UserMessage => {
            "Not answered: the user sent a new message instead of answering; there is no answer. Read the message and continue."
        }
        CancelReason::ModeSwitch => {
            "Not answered: the user switched mode by hand instead of answering; there is no answer."
        }
    }
}

/// Where an aborted run stood among the calls of its reply ([`Abort::ToolCalls`]).
struct OpenCalls<'a> {
    /// The calls before it started.
    next: usize,
    /// The calls that were to wait for approval.
    waiting: &'a [usize],
    /// The calls their tools suspended, to wait for the user's answer.
    suspended: &'a [usize],
    /// The call cut off while it ran, if any.
    running: Option<usize>,
}

impl Change<'_> {
    /// The session was created: `session_started`.
    pub(crate) fn open(&mut self) {
        let mode_id = self.mode_arc();
        self.emit(Event::SessionStarted {
            session_id: self.id.clone(),
            mode_id,
        });
    }

    /// `agent_start` of run `run_id` in the current mode: a run starts, or a suspended or
    /// interrupted one carries on (its events lie between an `agent_start` and an `agent_end`).
    pub(crate) fn agent_start(&mut self, run_id: &Arc<str>) {
        let mode_id = self.mode_arc();
        self.emit(Event::AgentStart {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            mode_id,
        });
    }

    /// The model's reply in run `run_id` ([`super::input::Input::ModelReply`]): `model_end` when
    /// the provider said why it stopped or what it used, `assistant_message` when it has text,
    /// then the reply in the conversation with its calls' arguments as the record keeps them
    /// ([`take_args`]) and ids of their own ([`unique_call_ids`]). Next: run its calls, or end
    /// the run with its text when it has none.
    pub(crate) fn model_reply(&mut self, run_id: Arc<str>, reply: ModelResponse) -> Next {
        if reply.finish_reason.is_some() || reply.usage.is_some() {
            self.emit(Event::ModelEnd {
                session_id: self.id.clone(),
                run_id: run_id.clone(),
                finish_reason: reply.finish_reason,
                usage: reply.usage,
            });
        }
        if !reply.text.is_empty() {
            self.emit(Event::AssistantMessage {
                session_id: self.id.clone(),
                run_id: run_id.clone(),
                text: reply.text.clone(),
            });
        }
        let mut calls = reply.tool_calls;
        calls.iter_mut().for_each(|call| take_args(&mut call.args));
        unique_call_ids(&mut calls);
        if calls.is_empty() {
            self.state.push_message(Message::Assistant {
                content: reply.text.clone(),
                tool_calls: Vec::new(),
            });
            return Next::Complete {
                run_id,
                text: reply.text,
            };
        }
        // The conversation keeps the calls; the driver reads them from there (no copy).
        self.state.push_message(Message::Assistant {
            content: reply.text,
            tool_calls: calls,
        });
        let at = self.state.messages.len() - 1;
        Next::RunToolCalls { at }
    }

    /// The run ends: completed, or failed with `error`.
    pub(crate) fn end_run(&mut self, run_id: &Arc<str>, error: Option<&str>) {
        match error {
            None => self.close_run(run_id, RunState::Completed, None),
            Some(error) => self.close_run(run_id, RunState::Failed, Some(error)),
        }
    }

    /// Gives the calls of the assistant message at `at` from `from` on their `tool_start` and a
    /// result saying they never ran: the run suspends on a plan first.
    pub(crate) fn skip_rest(&mut self, run_id: &Arc<str>, at: usize, from: usize) {
        let mut next = from;
        while let Some((id, name)) = self.start_tool(run_id, at, next, false) {
            next += 1;
            let output = ToolOutput::error(SUSPENDED_FIRST_RESULT);
            self.finish_tool(CallRef::new(run_id.clone(), id, name), output, None);
        }
    }

    /// Takes over interrupted run `run_id`: the lease, `agent_start`, and an "interrupted"
    /// result for each tool call that was cut off: each step was saved before its tool calls
    /// ran, so any call without a saved result may have run, and none is run again.
    pub(crate) fn take_over(&mut self, run_id: &Arc<str>) {
        self.take_lease();
        self.agent_start(run_id);
        self.answer_unanswered(run_id, INTERRUPTED_RESULT, INTERRUPTED_RESULT, false);
    }

    /// Applies `abort` ([`Abort`]): the run ends aborted, every open tool call answered.
    pub(crate) fn abort(&mut self, abort: Abort) {
        match abort {
            Abort::Pending(reason) => {
                self.cancel_pending(reason);
            }
            Abort::Run(run_id) => self.close_interrupted(&run_id),
            Abort::BeforeApproved(run_id) => {
                self.answer_unanswered(&run_id, NOT_STARTED_RESULT, NOT_STARTED_RESULT, false);
                self.close_run(&run_id, RunState::Aborted, None);
            }
            Abort::ToolCalls {
                run_id,
                at,
                next,
                waiting,
                suspended,
                running,
                allowed,
                together,
            } => {
                let open = OpenCalls {
                    next,
                    waiting: &waiting,
                    suspended: &suspended,
                    running,
                };
                self.abort_tool_calls(&run_id, at, open, allowed, together)
            }
        }
    }

    /// Ends the run as aborted while it runs the calls of the assistant message at `at`, the
    /// calls before `open.next` started (the one at `open.running` cut off, if any, with the
    /// allowance that let it run and its arguments' sha256): each call without a result gets
    /// one, in the order of the calls. One that waited for approval is not approved; one its
    /// tool suspended is not answered (no answer is made up); the cut-off one is
    /// cancelled (with the audit record of the allowance that approved it, if one did: every
    /// call an allowance let run has one); those from `next` on never started (with their
    /// `tool_start`, as calls skipped by a suspension are reported).
    fn abort_tool_calls(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
        open: OpenCalls<'_>,
        mut allowed: Option<(Box<Allowance>, String)>,
        mut together: Vec<RanTogether>,
    ) {
        let OpenCalls {
            next,
            waiting,
            suspended,
            running,
        } = open;
        let mut index = 0;
        while let Some(call) = self.state.tool_call(at, index) {
            let (id, name) = (call.id.clone(), call.name.clone());
            if let Some(at_index) = together.iter().position(|t| t.index == index) {
                let ran = together.swap_remove(at_index);
                self.end_ran_together(CallRef::new(run_id.clone(), id, name), ran);
                index += 1;
                continue;
            }
            let result = if waiting.contains(&index) {
                Some(tool_cancelled_result(CancelReason::Aborted))
            } else if suspended.contains(&index) {
                Some(unanswered_result(CancelReason::Aborted))
            } else if running == Some(index) {
                Some(CANCELLED_RESULT)
            } else if index >= next {
                self.start_tool(run_id, at, index, false);
                Some(NOT_STARTED_RESULT)
            } else {
                None
            };
            let output = result.map(ToolOutput::error);
            let call = CallRef::new(run_id.clone(), id, name);
            match (output, allowed.take_if(|_| running == Some(index))) {
                (Some(output), Some((allowance, args_sha256))) => {
                    self.finish_allowed_tool(call, args_sha256, output, &allowance);
                }
                (Some(output), None) => self.finish_tool(call, output, None),
                (None, _) => {}
            }
            index += 1;
        }
        self.close_run(run_id, RunState::Aborted, None);
    }

    /// Ends `call`, a `subagent` call that ran with its siblings when the run stopped: with
    /// what it returned if it finished (its child ran: nothing of it is lost), cancelled if it
    /// was cut off; with the audit record of the rule or allowance that let it run (a cut-off
    /// call only the allowance's, as for the one call that runs alone).
    fn end_ran_together(&mut self, call: CallRef, ran: RanTogether) {
        let RanTogether {
            output,
            rule,
            allowance,
            args_sha256,
            ..
        } = ran;
        let finished = output.is_some();
        let output = output.unwrap_or_else(|| ToolOutput::error(CANCELLED_RESULT));
        match (rule, allowance) {
            (Some(rule), _) if finished => {
                self.finish_ruled_tool(call, args_sha256, output, rule);
            }
            (_, Some(allowance)) => {
                self.finish_allowed_tool(call, args_sha256, output, &allowance);
            }
            _ => self.finish_tool(call, output, None),
        }
    }

    /// Starts run `run_<n>`: the user message, `agent_start`; returns the run id.
    pub(crate) fn start_run(&mut self, text: String) -> Arc<str> {
        self.state.counter += 1;
        let run_id = run_id_for(self.state.counter);
        self.state.run = Some((run_id.clone(), RunState::Running));
        // A run started by a message is saved when it suspends or ends, and has no lease.
        self.drop_lease();
        self.state.push_message(Message::User { content: text });
        self.agent_start(&run_id);
        run_id
    }

    /// Cancels what waits for a decision as *not approved*: the plan, or every tool call that
    /// waits for approval (those decided while others waited too: none of them ran). Each gets
    /// a result saying so and `tool_suspension_cancelled` with a `cancelled` audit record; the
    /// run ends aborted, the mode stays. Callers persist the change.
    pub(crate) fn cancel_pending(&mut self, reason: CancelReason) -> bool {
        let pending = std::mem::take(&mut self.state.pending);
        let Some(run_id) = pending.first().map(|p| p.run_arc().clone()) else {
            return false;
        };
        // The suspended run resumes to end: its events lie between `agent_start` and `agent_end`.
        self.agent_start(&run_id);
        for waiting in pending {
            let (content, is_error, record) = match &waiting {
                PendingDecision::Plan(plan) => (
                    cancelled_result(reason),
                    false,
                    self.plan_record(plan, DecisionOutcome::Cancelled, None, None, None),
                ),
                PendingDecision::ToolCall(call) => (
                    tool_cancelled_result(reason),
                    true,
                    tool_call_record(
                        call,
                        DecisionOutcome::Cancelled,
                        None,
                        false,
                        self.now_rfc3339(),
                    ),
                ),
                PendingDecision::Suspension(suspended) => (
                    unanswered_result(reason),
                    true,
                    suspension_record(
                        suspended,
                        DecisionOutcome::Cancelled,
                        None,
                        self.now_rfc3339(),
                    ),
                ),
            };
            let (tool_call_id, tool_name) = (
                waiting.tool_call_id().to_owned(),
                waiting.tool_name().to_owned(),
            );
            // A child's call is not in this session's conversation: its child's `subagent`
            // call gets the result below.
            if waiting.subagent().is_none() {
                self.state.push_message(Message::Tool {
                    tool_call_id: tool_call_id.clone(),
                    tool_name: tool_name.clone(),
                    content: content.to_owned(),
                    is_error,
                });
            }
            self.state.history.push(record.clone());
            self.emit(Event::ToolSuspensionCancelled {
                session_id: self.id.clone(),
                run_id: run_id.clone(),
                tool_call_id,
                tool_name,
                reason,
                decision: Some(record),
            });
        }
        self.end_waiting_children(&format!("was ended with the run ({reason})"));
        self.report_plan(&run_id, RunState::Aborted);
        self.emit(Event::AgentEnd {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            reason: RunState::Aborted,
        });
        self.state.run = Some((run_id, RunState::Aborted));
        true
    }
    /// Ends a run that was cancelled, or whose future was dropped, as `aborted`: every tool call
    /// of the last assistant message without a result gets one, so the conversation stays one
    /// a provider accepts (OpenAI refuses an assistant message whose calls lack results). The
    /// first such call was running (`tool_end` with [`CANCELLED_RESULT`]); the calls after it
    /// never started (`tool_start` and `tool_end` with [`NOT_STARTED_RESULT`]), as calls
    /// skipped by a suspension are reported. Callers persist the change.
    pub(crate) fn close_interrupted(&mut self, run_id: &Arc<str>) {
        self.answer_unanswered(run_id, CANCELLED_RESULT, NOT_STARTED_RESULT, true);
        self.close_run(run_id, RunState::Aborted, None);
    }

    /// Gives every tool call of the last assistant message that has no result one: `running`
    /// for the first such call (calls run in order: it was running), `not_started` for those
    /// after it (with their `tool_start`, as calls skipped by a suspension are reported). The
    /// first call gets its `tool_start` too unless `started_here` (this process started it).
    pub(crate) fn answer_unanswered(
        &mut self,
        run_id: &Arc<str>,
        running_text: &str,
        not_started: &str,
        started_here: bool,
    ) {
        let Some(at) = self
            .state
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
        else {
            return;
        };
        // Results, by id (one result answers one call: a model may repeat an id).
        let mut answered: Vec<String> = self.state.messages[at + 1..]
            .iter()
            .filter_map(|m| match m {
                Message::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
                _ => None,
            })
            .collect();
        let mut running = true;
        let mut index = 0;
        while let Some(call) = self.state.tool_call(at, index) {
            let (id, name) = (call.id.clone(), call.name.clone());
            if let Some(found) = answered.iter().position(|a| *a == id) {
                answered.swap_remove(found);
            } else if running {
                running = false;
                if !started_here {
                    self.start_tool(run_id, at, index, false);
                }
                let call = CallRef::new(run_id.clone(), id, name);
                self.finish_tool(call, ToolOutput::error(running_text), None);
            } else {
                self.start_tool(run_id, at, index, false);
                let call = CallRef::new(run_id.clone(), id, name);
                self.finish_tool(call, ToolOutput::error(not_started), None);
            }
            index += 1;
        }
    }
    /// The suspension of the calls `asked` of the assistant message at `at`: each waits for
    /// approval with its decision id, `argsSha256`, deadline, the `ask` rule that made it
    /// wait, if one did, and where its paths lead (`tool_suspended`), and the run ends
    /// `suspended`.
    pub(crate) fn suspend_tool_calls(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
        asked: Vec<Asked>,
        suspended: Vec<(usize, Box<ToolSuspension>)>,
        children: Vec<(usize, WaitingChild)>,
    ) {
        /// What one call of the reply waits for.
        enum Wait {
            /// The user's approval.
            Approval(Asked),
            /// The user's answer to what its tool suspended with.
            Answer(Box<ToolSuspension>),
            /// The decisions its child waits on (a `subagent` call).
            Child(Box<WaitingChild>),
        }
        // In the order of the reply's calls, whatever the kind.
        let mut waits: Vec<(usize, Wait)> = asked
            .into_iter()
            .map(|asked| (asked.index, Wait::Approval(asked)))
            .collect();
        waits.extend(suspended.into_iter().map(|(i, s)| (i, Wait::Answer(s))));
        waits.extend(
            children
                .into_iter()
                .map(|(i, c)| (i, Wait::Child(Box::new(c)))),
        );
        waits.sort_by_key(|(i, _)| *i);
        for (index, wait) in waits {
            let asked = match wait {
                Wait::Approval(asked) => asked,
                Wait::Answer(suspension) => {
                    self.suspend_tool(run_id, at, index, *suspension);
                    continue;
                }
                Wait::Child(child) => {
                    self.suspend_child(run_id, *child);
                    continue;
                }
            };
            let Some(call) = self.state.tool_call(at, index) else {
                continue;
            };
            let (tool_call_id, tool_name) = (call.id.clone(), call.name.clone());
            let args = call.args.clone();
            self.state.decisions += 1;
            let payload = ToolCallPayload {
                decision_id: decision_id_for(self.state.decisions),
                tool_name: tool_name.clone(),
                args_sha256: crate::jcs::sha256(&args),
                args,
                terms: self.quorum_terms(asked.rule.as_ref().and_then(|r| r.approvers)),
                rule: asked.rule,
                locations: asked.locations,
                drift: asked.drift,
                subagent: None,
                review: asked.review,
            };
            self.state
                .pending
                .push(PendingDecision::ToolCall(PendingToolCall {
                    run_id: run_id.clone(),
                    tool_call_id: tool_call_id.clone(),
                    payload: payload.clone(),
                    decided: None,
                }));
            self.emit(Event::ToolSuspended {
                session_id: self.id.clone(),
                run_id: run_id.clone(),
                tool_call_id,
                tool_name,
                suspend_payload: Suspension::ToolCall(payload),
            });
        }
        self.close_run(run_id, RunState::Suspended, None);
    }

    /// The terms a decision that begins to wait now waits under, fixed now from the mode it
    /// waits in: its `approvalTimeout`, the deadline that gives (now plus the timeout), its
    /// `onTimeout`, and the session's workspace.
    /// The call at `index` of the reply at `at`, which its tool suspended: it waits for the
    /// user's answer, as a decision of its own (`decision_N`), announced by `tool_suspended`.
    fn suspend_tool(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
        index: usize,
        suspension: ToolSuspension,
    ) {
        let Some(call) = self.state.tool_call(at, index) else {
            return;
        };
        let (tool_call_id, tool_name) = (call.id.clone(), call.name.clone());
        let args = call.args.clone();
        self.state.decisions += 1;
        let payload = Arc::new(ToolSuspendPayload {
            kind: SuspensionKind::of(&tool_name),
            decision_id: decision_id_for(self.state.decisions),
            tool_name: tool_name.clone(),
            args,
            payload_sha256: crate::jcs::sha256(&suspension.payload),
            payload: suspension.payload,
            answer_schema: suspension.answer_schema,
            terms: self.wait_terms(),
            subagent: None,
        });
        self.state
            .pending
            .push(PendingDecision::Suspension(PendingSuspension {
                run_id: run_id.clone(),
                tool_call_id: tool_call_id.clone(),
                payload: payload.clone(),
                decided: None,
                answer: None,
                feedback: None,
            }));
        self.emit(Event::ToolSuspended {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            tool_call_id,
            tool_name,
            suspend_payload: Suspension::Tool(payload),
        });
    }

    /// The decisions `child` waits on, as decisions of this session: each gets an id of this
    /// session's (`decision_N`, unique here) and names the child (`subagent`, with its id in
    /// the child), announced by `tool_suspended` in this run; the child is kept until they are
    /// decided.
    fn suspend_child(&mut self, run_id: &Arc<str>, child: WaitingChild) {
        for waiting in child.state.pending.iter().filter(|p| p.is_waiting()) {
            self.state.decisions += 1;
            let origin = Some(Box::new(crate::subagent::SubagentOrigin {
                agent_type: child.agent_type.to_string(),
                child_id: child.child_id.to_string(),
                tool_call_id: child.tool_call_id.clone(),
                decision_id: waiting.decision_id().to_owned(),
            }));
            let decision_id = decision_id_for(self.state.decisions);
            let (pending, shown) = match waiting {
                PendingDecision::ToolCall(call) => {
                    let mut payload = call.payload.clone();
                    payload.decision_id = decision_id;
                    payload.subagent = origin;
                    let shown = Suspension::ToolCall(payload.clone());
                    let call = PendingToolCall {
                        run_id: run_id.clone(),
                        tool_call_id: call.tool_call_id.clone(),
                        payload,
                        decided: None,
                    };
                    (PendingDecision::ToolCall(call), shown)
                }
                PendingDecision::Suspension(suspended) => {
                    let mut payload = (*suspended.payload).clone();
                    payload.decision_id = decision_id;
                    payload.subagent = origin;
                    let payload = Arc::new(payload);
                    let suspended = PendingSuspension {
                        run_id: run_id.clone(),
                        tool_call_id: suspended.tool_call_id.clone(),
                        payload: payload.clone(),
                        decided: None,
                        answer: None,
                        feedback: None,
                    };
                    (
                        PendingDecision::Suspension(suspended),
                        Suspension::Tool(payload),
                    )
                }
                // A child has no `submit_plan`: it never waits on a plan.
                PendingDecision::Plan(_) => continue,
            };
            self.emit(Event::ToolSuspended {
                session_id: self.id.clone(),
                run_id: run_id.clone(),
                tool_call_id: pending.tool_call_id().to_owned(),
                tool_name: pending.tool_name().to_owned(),
                suspend_payload: shown,
            });
            self.state.pending.push(pending);
        }
        self.state.children.push(child);
    }

    /// Ends each child whose calls waited in the session (they were answered as not approved,
    /// `why` the run ended): its `subagent` call gets a result that says so.
    pub(crate) fn end_waiting_children(&mut self, why: &str) {
        for child in std::mem::take(&mut self.state.children) {
            self.state.push_message(Message::Tool {
                tool_call_id: child.tool_call_id,
                tool_name: crate::subagent::SUBAGENT.to_owned(),
                content: format!(
                    "Cancelled: the subagent `{}` ({}) {why}; its calls that waited for the user were not approved.",
                    child.agent_type, child.child_id
                ),
                is_error: true,
            });
        }
    }

    /// The terms of a plan or a tool call waiting for approval: [`Self::wait_terms`] with the
    /// quorum (`approvers` above 1: `approversNeeded`, [`crate::quorum`]), the mode's or the
    /// `ask` rule's that held the call (`rule`), whichever is higher.
    fn quorum_terms(&self, rule: Option<u8>) -> WaitTerms {
        let mode = self.config.graph.mode(self.state.mode).approvers();
        let needed = mode.max(rule.unwrap_or(1));
        WaitTerms {
            approvers_needed: (needed > 1).then_some(needed),
            ..self.wait_terms()
        }
    }

    fn wait_terms(&self) -> WaitTerms {
        let mode = self.config.graph.mode(self.state.mode);
        let timeout = mode.approval_timeout();
        WaitTerms {
            approval_timeout: timeout.map(|t| t.as_str().to_owned()),
            deadline_at_ms: timeout.map(|t| t.deadline_after(self.now_ms)),
            workspace: Some(self.workspace.workspace.path.clone()),
            on_timeout: mode.on_timeout(),
            approvers_needed: None,
            approvals: Vec::new(),
        }
    }

    /// The suspension on a plan submitted with `submit_plan`: its hand-over targets, revision,
    /// diff and deadline fixed now, its decision id given out (`tool_suspended`); the run ends
    /// `suspended`. Returns the plan's payload.
    pub(crate) fn suspend_plan(
        &mut self,
        run_id: &Arc<str>,
        tool_call_id: &str,
        submission: PlanSubmission,
        review: Option<Box<crate::review::ReviewRecord>>,
    ) -> SuspendPayload {
        // The hand-over targets are fixed now, at submit time.
        let graph = self.config.graph;
        let mode = self.state.mode;
        let target = graph.transition_target(mode);
        let targets = graph.transition_targets(mode);
        self.state.decisions += 1;
        // Each plan submitted in the session is its next revision, compared with the last one.
        let text = plan::revision_text(&submission);
        let previous = self.state.last_plan.take();
        let revision = previous.as_ref().map_or(1, |p| p.revision + 1);
        let diff = previous
            .as_ref()
            .and_then(|p| plan::revision_diff(&p.text, &text, p.revision));
        self.state.last_plan = Some(PlanRevision {
            revision,
            sha256: submission.sha256.clone(),
            text,
        });
        // The comments the rejection of the previous revision made come back beside the diff.
        let comments = previous
            .as_ref()
            .and_then(|p| self.state.comments_on(&p.sha256))
            .unwrap_or_default();
        // What binds the next mode, read from the plan's text as shown.
        let scope = submission.scope();
        let listed = super::tasks::plan_steps(&submission.plan);
        let steps = listed
            .numbers
            .iter()
            .zip(listed.tasks)
            .map(|(number, task)| crate::plan::PlanStep::new(*number, task.content))
            .collect();
        let payload = SuspendPayload {
            scope,
            plan_scope: graph.mode(mode).plan_scope(),
            steps,
            terms: self.quorum_terms(None),
            revision,
            previous_sha256: previous.map(|p| p.sha256),
            diff,
            submission,
            target_mode_id: graph.mode(target).id_arc().clone(),
            target_mode_ids: targets
                .iter()
                .map(|t| graph.mode(*t).id_arc().clone())
                .collect(),
            decision_id: decision_id_for(self.state.decisions),
            comments,
            review,
        };
        // Nothing else waits (a run suspends on one plan): the list's buffer is kept, or made
        // for this one decision (a first `push` would make room for four, and a session held
        // waiting would carry three empty slots of a large type).
        self.state.pending.clear();
        self.state.pending.reserve_exact(1);
        self.state.pending.push(PendingDecision::Plan(PendingPlan {
            run_id: run_id.clone(),
            tool_call_id: tool_call_id.to_owned(),
            target,
            targets,
            payload: payload.clone(),
            stale: None,
        }));
        self.emit(Event::ToolSuspended {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            tool_call_id: tool_call_id.to_owned(),
            tool_name: SUBMIT_PLAN.to_owned(),
            suspend_payload: Suspension::Plan(payload.clone()),
        });
        self.close_run(run_id, RunState::Suspended, None);
        payload
    }
}

/// Gives every call of one reply an id of its own: a model may repeat an id or send none, and
/// a result names only the id of the call it answers, so results of such calls could not be
/// told apart (or put back in the order of the calls). The first call of an id keeps it; a
/// later one, or one without an id, gets `ID_K` (`call_K` for none), K its position in the
/// reply (counting on past any id the reply already uses).
fn unique_call_ids(calls: &mut [ToolCall]) {
    let given: std::collections::HashSet<String> = calls.iter().map(|c| c.id.clone()).collect();
    let mut seen = std::collections::HashSet::new();
    for (k, call) in calls.iter_mut().enumerate() {
        if call.id.is_empty() || seen.contains(&call.id) {
            let base = if call.id.is_empty() {
                "call".to_owned()
            } else {
                call.id.clone()
            };
            let mut n = k;
            call.id = loop {
                let id = format!("{base}_{n}");
                if !given.contains(&id) && !seen.contains(&id) {
                    break id;
                }
                n += 1;
            };
        }
        seen.insert(call.id.clone());
    }
}

/// Takes a model's tool-call arguments as the record keeps them ([`crate::tool::args`]): their
/// RFC 8785 round trip when they meet the rules, else their text (a string), which the call's
/// refusal then explains. Arguments that are text already (not JSON to the provider) stay.
fn take_args(args: &mut serde_json::Value) {
    if args.is_string() {
        return;
    }
    let value = std::mem::take(args);
    *args = match crate::exchange::args::check(&value) {
        Ok(()) => crate::exchange::args::normalize(value).unwrap_or_default(),
        Err(_) => serde_json::Value::String(value.to_string()),
    };
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::event::DecisionOutcome;
    use crate::machine::input::{Asked, Input, Suspend};
    use crate::machine::next::Next;
    use crate::machine::rig::{Rig, T0, call};

    fn plan(sha256: &str, body: &str) -> PlanSubmission {
        PlanSubmission {
            path: "a.md".to_owned(),
            title: "A".to_owned(),
            plan: body.to_owned(),
            sha256: sha256.to_owned(),
        }
    }

    #[test]
    fn runs_are_numbered_from_one() {
        assert_eq!(&*run_id_for(1), "run_1");
        assert_eq!(&*run_id_for(12), "run_12");
    }

    #[test]
    fn arguments_are_kept_as_the_record_keeps_them_or_as_their_text() {
        let mut normal = json!({"n": 1.0, "m": -0.0});
        take_args(&mut normal);
        assert_eq!(normal, json!({"n": 1, "m": 0}));
        let mut unsafe_integer = json!({"n": 9_007_199_254_740_993_u64});
        take_args(&mut unsafe_integer);
        assert_eq!(unsafe_integer, json!(r#"{"n":9007199254740993}"#));
        let mut text = json!("{not json");
        take_args(&mut text);
        assert_eq!(text, json!("{not json"));
    }

    #[test]
    fn a_repeated_or_missing_id_gets_one_no_other_call_uses() {
        let mut calls = vec![
            call("a", "read_file", json!({})),
            call("a", "read_file", json!({})),
            call("a_1", "read_file", json!({})),
            call("", "read_file", json!({})),
            call("", "read_file", json!({})),
        ];
        unique_call_ids(&mut calls);
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        // `a_1` is taken by the third call: the second counts on to `a_2`.
        assert_eq!(ids, ["a", "a_2", "a_1", "call_3", "call_4"]);
    }

    #[test]
    fn each_revision_counts_on_and_is_compared_with_the_last() {
        let mut rig = Rig::new();
        let run = rig.start("plan");
        for (n, sha) in [(1, "s1"), (2, "s2")] {
            let suspend = Suspend::Plan {
                run_id: run.clone(),
                tool_call_id: format!("p{n}"),
                submission: plan(sha, &format!("{n}. Step.")),
                review: None,
            };
            let Ok(Next::SuspendedOnPlan { payload, .. }) = rig.handle(Input::Suspend(suspend))
            else {
                panic!("suspends");
            };
            assert_eq!(payload.revision, n);
            assert_eq!(payload.decision_id, format!("decision_{n}"));
            let previous = (n > 1).then(|| "s1".to_owned());
            assert_eq!(payload.previous_sha256, previous);
            assert_eq!(
                rig.state.last_plan.as_ref().map(|p| p.sha256.as_str()),
                Some(sha)
            );
        }
        assert_eq!(rig.state.pending.len(), 1, "one plan waits at a time");
        assert_eq!(rig.state.decisions, 2);
    }

    #[test]
    fn each_waiting_call_gets_its_own_decision_id_hash_and_deadline() {
        let mut rig = Rig::new();
        rig.state.mode = rig.mode("build");
        rig.now_ms = T0 + 5;
        let run = rig.start("write");
        let calls = vec![
            call("w1", "write_file", json!({"p": 1})),
            call("w2", "write_file", json!({"p": 2})),
        ];
        rig.reply(&run, "", calls);
        let suspend = Suspend::ToolCalls {
            run_id: run.clone(),
            at: 1,
            asked: vec![Asked::at(0, None), Asked::at(1, None), Asked::at(7, None)],
            suspended: Vec::new(),
            children: Vec::new(),
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        let ids: Vec<&str> = rig.state.pending.iter().map(|p| p.decision_id()).collect();
        assert_eq!(ids, ["decision_1", "decision_2"]);
        let p = &rig.state.pending[1];
        assert_eq!(p.sha256(), crate::jcs::sha256(&json!({"p": 2})));
        assert_eq!(p.deadline_at_ms(), Some(T0 + 5 + 1_800_000));
        assert_eq!(
            rig.take_kinds(),
            [
                "agent_start",
                "tool_suspended",
                "tool_suspended",
                "agent_end"
            ]
        );
        assert_eq!(rig.state.run, Some((run, RunState::Suspended)));
    }

    /// A session held waiting on its plan keeps one slot for it, not the four a first `push`
    /// makes room for (issue 36 item 13: 1,680 of 5,236 bytes per suspended session).
    #[test]
    fn a_suspended_plan_takes_one_slot_of_the_pending_list() {
        let mut rig = Rig::new();
        let run = rig.start("plan");
        let suspend = Suspend::Plan {
            run_id: run,
            tool_call_id: "p1".to_owned(),
            submission: plan("s1", "1."),
            review: None,
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        assert_eq!(rig.state.pending.len(), 1);
        assert_eq!(rig.state.pending.capacity(), 1);
    }

    #[test]
    fn a_cancelled_plan_is_told_why_and_the_mode_stays() {
        let reasons = [
            (CancelReason::Aborted, "aborted"),
            (CancelReason::UserMessage, "new message"),
            (CancelReason::ModeSwitch, "switched mode"),
        ];
        for (reason, says) in reasons {
            let mut rig = Rig::new();
            let run = rig.start("plan");
            let suspend = Suspend::Plan {
                run_id: run.clone(),
                tool_call_id: "p1".to_owned(),
                submission: plan("s1", "1."),
                review: None,
            };
            rig.handle(Input::Suspend(suspend)).expect("suspends");
            rig.handle(Input::Abort(crate::machine::input::Abort::Pending(reason)))
                .expect("cancels");
            let (id, text) = rig.results().pop().expect("a result");
            assert_eq!(id, "p1");
            assert!(text.starts_with("Plan not approved"), "{text}");
            assert!(text.contains(says), "{reason:?}: {text}");
            assert!(!tool_cancelled_result(reason).is_empty());
            assert!(tool_cancelled_result(reason).contains(says));
            let record = rig.state.history.last().expect("a record");
            assert_eq!(record.outcome, Some(DecisionOutcome::Cancelled));
            assert_eq!(record.sha256.as_deref(), Some("s1"));
            assert_eq!(rig.mode_id(), "plan");
            assert_eq!(rig.state.run, Some((run, RunState::Aborted)));
        }
    }

    /// A model may repeat a call id from an earlier reply: only the results after the last
    /// reply answer its calls, so a cancelled run still answers the repeated call.
    #[test]
    fn a_cancelled_call_is_answered_though_an_earlier_reply_used_its_id() {
        let mut rig = Rig::new();
        let run = rig.start("hi");
        rig.reply(&run, "", vec![call("r1", "read_file", json!({}))]);
        rig.result(&run, "r1", "one");
        rig.reply(&run, "", vec![call("r1", "read_file", json!({}))]);
        rig.handle(Input::Abort(Abort::Run(run.clone())))
            .expect("aborts");
        assert_eq!(
            rig.results(),
            [
                ("r1".to_owned(), "one".to_owned()),
                ("r1".to_owned(), CANCELLED_RESULT.to_owned())
            ]
        );
    }

    /// A child (its own rig) suspended on one `write_file` call, as the parent keeps it.
    fn waiting_child() -> crate::machine::state::WaitingChild {
        let mut child = Rig::new();
        child.state.mode = child.mode("build");
        let run = child.start("write");
        let args = json!({"path": "a.txt"});
        let Next::RunToolCalls { at, .. } =
            child.reply(&run, "", vec![call("w1", "write_file", args)])
        else {
            panic!("runs the call");
        };
        let suspend = Suspend::ToolCalls {
            run_id: run,
            at,
            asked: vec![Asked::at(0, None)],
            suspended: Vec::new(),
            children: Vec::new(),
        };
        child.handle(Input::Suspend(suspend)).expect("suspends");
        crate::machine::state::WaitingChild {
            tool_call_id: "sub_1".to_owned(),
            agent_type: Arc::from("explore"),
            child_id: Arc::from("s1.run_1.sub1_1"),
            state: Box::new(child.state),
        }
    }

    /// A parent in `build` whose reply has a `write_file` call that waits and a `subagent`
    /// call whose child waits: suspended on both.
    fn parent_with_a_waiting_child() -> (Rig, Arc<str>) {
        let mut rig = Rig::new();
        rig.state.mode = rig.mode("build");
        let run = rig.start("go");
        let calls = vec![
            call("w0", "write_file", json!({"path": "b.txt"})),
            call(
                "sub_1",
                "subagent",
                json!({"agentType": "explore", "task": "t"}),
            ),
        ];
        let Next::RunToolCalls { at, .. } = rig.reply(&run, "", calls) else {
            panic!("runs the calls");
        };
        let suspend = Suspend::ToolCalls {
            run_id: run.clone(),
            at,
            asked: vec![Asked::at(0, None)],
            suspended: Vec::new(),
            children: vec![(1, waiting_child())],
        };
        let next = rig.handle(Input::Suspend(suspend)).expect("suspends");
        assert!(matches!(next, Next::WaitsOnToolCalls(_)), "{next:?}");
        (rig, run)
    }

    #[test]
    fn a_childs_waiting_call_waits_in_the_parent_under_an_id_of_the_parents_naming_the_child() {
        let (rig, run) = parent_with_a_waiting_child();
        let ids: Vec<&str> = rig.state.pending.iter().map(|p| p.decision_id()).collect();
        assert_eq!(ids, ["decision_1", "decision_2"], "unique in the parent");
        assert_eq!(rig.state.pending[0].subagent(), None, "the parent's own");
        let child = &rig.state.pending[1];
        assert_eq!(child.run_id(), &*run, "waits in the parent's run");
        assert_eq!(child.tool_call_id(), "w1");
        let origin = child.subagent().expect("names the child");
        assert_eq!(origin.agent_type, "explore");
        assert_eq!(origin.child_id, "s1.run_1.sub1_1");
        assert_eq!(origin.tool_call_id, "sub_1");
        assert_eq!(origin.decision_id, "decision_1", "its id in the child");
        assert_eq!(rig.state.children.len(), 1, "the child is kept");
        assert_eq!(rig.state.run, Some((run, RunState::Suspended)));
    }

    #[test]
    fn the_last_decision_hands_the_child_its_decisions_and_the_history_names_it() {
        let (mut rig, _) = parent_with_a_waiting_child();
        let decide = |rig: &mut Rig, index: usize, decision: crate::machine::decision::Decision| {
            let checked =
                crate::machine::check::check(&rig.state.pending[index], &decision).expect("ok");
            rig.handle(Input::Decide {
                index,
                decision,
                checked,
                lacking: Vec::new(),
            })
            .expect("decides")
        };
        let next = decide(
            &mut rig,
            1,
            crate::machine::decision::Decision::reject_with("no"),
        );
        assert!(matches!(next, Next::WaitsOnToolCalls(_)), "{next:?}");
        let next = decide(&mut rig, 0, crate::machine::decision::Decision::approve());
        let Next::RunApproved {
            calls, children, ..
        } = next
        else {
            panic!("resumes: {next:?}");
        };
        assert_eq!(calls.len(), 1, "the parent's own call runs");
        assert_eq!(children.len(), 1);
        let (child, decided) = &children[0];
        assert_eq!(child.tool_call_id, "sub_1");
        assert_eq!(decided.len(), 1);
        assert_eq!(
            decided[0].decision().and_then(|d| d.outcome),
            Some(DecisionOutcome::Rejected)
        );
        assert!(rig.state.children.is_empty(), "handed over");
        let named = rig
            .state
            .history
            .iter()
            .find(|r| r.decision_id == "decision_2")
            .and_then(|r| r.subagent.as_ref())
            .expect("the record names the child");
        assert_eq!(named.tool_call_id, "sub_1");
        assert!(
            !rig.results().iter().any(|(id, _)| id == "w1"),
            "the child's call is not in the parent's conversation"
        );
    }

    #[test]
    fn a_cancel_ends_the_waiting_child_not_approved_and_answers_its_subagent_call() {
        let (mut rig, _) = parent_with_a_waiting_child();
        rig.handle(Input::Abort(Abort::Pending(CancelReason::Aborted)))
            .expect("aborts");
        assert!(rig.state.children.is_empty());
        let results = rig.results();
        let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["w0", "sub_1"], "no result for the child's own call");
        assert!(results[1].1.contains("not approved"), "{results:?}");
        let record = rig.state.history.last().expect("a record");
        assert_eq!(record.outcome, Some(DecisionOutcome::Cancelled));
        assert!(record.subagent.is_some(), "{record:?}");
    }

    #[test]
    fn an_expiry_ends_the_waiting_child_and_answers_its_subagent_call() {
        let (mut rig, run) = parent_with_a_waiting_child();
        rig.now_ms = T0 + 1_800_000;
        let waiting = rig
            .state
            .pending
            .iter()
            .map(crate::machine::expiry::waiting);
        let expiry = crate::machine::expiry::expire(waiting, rig.now_ms).expect("due");
        rig.handle(Input::Deadline {
            run_id: run,
            expiry,
        })
        .expect("expires");
        assert!(rig.state.children.is_empty());
        let results = rig.results();
        let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["w0", "sub_1"], "no result for the child's own call");
        let record = rig.state.history.last().expect("a record");
        assert_eq!(record.outcome, Some(DecisionOutcome::Expired));
        assert!(record.subagent.is_some(), "{record:?}");
    }
}
