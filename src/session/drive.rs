//! Driving a run (the I/O half of the session, [`Session`]): model call -> tool calls -> model
//! call ..., until the model is done, a plan suspends the run, or the run fails; and the
//! decision that resumes a suspended run. The rules a decision obeys are in
//! [`crate::machine::decision`]; this file performs them (saves, events, tool and model calls).

use std::sync::Arc;

use tracing::Instrument;

use super::{
    Decision, Operation, PendingDecision, PendingPlan, PendingToolCall, RunOutcome, Session,
    SessionError, decision_id_for,
};
use crate::event::{
    CancelReason, DecisionOutcome, Event, RunState, SuspendPayload, Suspension, ToolCallPayload,
};
use crate::machine::change::Change;
use crate::machine::decision::{self as rules, Checked};
use crate::machine::decision::{Decided, tool_call_record};
use crate::model::{Message, ModelError, ModelErrorKind, ModelRequest, TextSink};
use crate::store::SessionStore;
use crate::tool::submit_plan::{self, PlanSubmission, SUBMIT_PLAN};
use crate::tool::{PendingPlans, ToolCall, ToolContext, ToolOutput};

/// The id of the `n`-th run of a session: `run_<n>`.
fn run_id_for(n: u64) -> Arc<str> {
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

/// The not-approved tool result for a suspension cancelled for `reason`.
fn cancelled_result(reason: CancelReason) -> &'static str {
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
fn tool_cancelled_result(reason: CancelReason) -> &'static str {
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

/// The result of a `submit_plan` call in a reply whose other calls wait for approval.
const PLAN_BESIDE_APPROVALS: &str = "Not executed: other tool calls of this reply wait for the user's approval. Submit the plan again after they are decided.";

impl Session {
    /// Starts a run: appends the user message and drives the loop.
    pub(crate) async fn start_run(&mut self, text: String) -> Result<RunOutcome, SessionError> {
        let run_id = self.live(|c| c.start_run(text));
        self.drive_traced(run_id).await
    }
}

impl Change<'_> {
    /// Starts run `run_<n>`: the user message, `agent_start`; returns the run id.
    fn start_run(&mut self, text: String) -> Arc<str> {
        self.state.counter += 1;
        let run_id = run_id_for(self.state.counter);
        self.state.run = Some((run_id.clone(), RunState::Running));
        // A run started by a message is saved when it suspends or ends, and has no lease.
        self.drop_lease();
        self.state.messages.push(Message::User { content: text });
        let mode_id = self.mode_arc();
        self.emit(Event::AgentStart {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            mode_id,
        });
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
        let mode_id = self.mode_arc();
        self.emit(Event::AgentStart {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            mode_id,
        });
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
            };
            let (tool_call_id, tool_name) = (
                waiting.tool_call_id().to_owned(),
                waiting.tool_name().to_owned(),
            );
            self.state.messages.push(Message::Tool {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                content: content.to_owned(),
                is_error,
            });
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
        self.emit(Event::AgentEnd {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            reason: RunState::Aborted,
        });
        self.state.run = Some((run_id, RunState::Aborted));
        true
    }
}

impl Session {
    /// Whether a decision is waiting: a plan, or tool calls.
    pub(crate) fn has_pending(&self) -> bool {
        !self.state.pending.is_empty()
    }

    /// The position in [`Session::pending`] of what `run_id` / `tool_call_id` name
    /// ([`rules::named`]).
    pub(crate) fn pending_named(
        &self,
        run_id: &str,
        tool_call_id: &str,
    ) -> Result<usize, SessionError> {
        rules::named(
            &self.state.pending,
            &self.state.history,
            self.state.counter,
            run_id,
            tool_call_id,
        )
    }

    /// The position in [`Session::pending`] of the decision with id `decision_id`
    /// ([`rules::with_id`]).
    pub(crate) fn pending_with_id(&self, decision_id: &str) -> Result<usize, SessionError> {
        rules::with_id(&self.state.pending, &self.state.history, decision_id)
    }

    /// Checks `decision` against what waits at `index` ([`rules::check`]) and
    /// applies it: the one place a decision of any kind is taken. The operation's run starts
    /// when the decision carries the run on (a plan's always does; a tool call's only when it
    /// is the last of its reply to be decided): until then no run is in progress to cancel.
    pub(crate) async fn decide_at(
        &mut self,
        index: usize,
        decision: Decision,
    ) -> Result<RunOutcome, SessionError> {
        let Some(pending) = self.state.pending.get(index) else {
            return Err(SessionError::NotSuspended(String::new()));
        };
        let checked = rules::check(pending, &decision)?;
        let span = tracing::info_span!(
            "decision",
            session_id = %self.id,
            run_id = %pending.run_id(),
            tool_call_id = %pending.tool_call_id(),
            action = %decision.action,
        );
        if matches!(pending, PendingDecision::Plan(_)) {
            self.start_operation();
        }
        let operation = Operation::new(self);
        let outcome = operation
            .session
            .apply_decision(index, decision, checked)
            .instrument(span)
            .await;
        operation.finish(outcome)
    }

    /// Applies a checked decision, persists it (compare-and-swap), then carries the run on.
    /// When the save fails nothing has changed: the run is still suspended.
    ///
    /// A plan: approved, the session switches to the chosen target before the next model
    /// call; rejected with feedback, the model revises; rejected without, the run ends.
    /// A tool call: the decision is recorded, and while other calls of the reply wait the run
    /// stays suspended; the last decision carries the run on (rejected calls get their results
    /// in the same save, then the approved ones run in the model's order).
    async fn apply_decision(
        &mut self,
        index: usize,
        decision: Decision,
        checked: Checked,
    ) -> Result<RunOutcome, SessionError> {
        let tool_call = matches!(
            self.state.pending.get(index),
            Some(PendingDecision::ToolCall(_))
        );
        let decided = self
            .try_change(|c| c.decide(index, decision, checked))
            .await?;
        let (run_id, run_tools) = match decided {
            Decided::Waiting { run_id } => {
                return Ok(RunOutcome::ToolCallsSuspended {
                    run_id,
                    tool_calls: self.state.undecided_calls(),
                });
            }
            Decided::Ended {
                run_id,
                error: Some(error),
            } => return Ok(RunOutcome::Failed { run_id, error }),
            Decided::Ended {
                run_id,
                error: None,
            } => {
                return Ok(RunOutcome::Completed {
                    run_id,
                    text: String::new(),
                });
            }
            Decided::Resumed { run_id, run_tools } => (run_id, run_tools),
        };
        // A tool-call decision carries the run on only now, once every call is decided (a
        // plan's run started before its change: `decide_at`).
        if tool_call {
            self.start_operation();
        }
        for (call, record) in run_tools {
            if self.run_token.is_cancelled() {
                // No approved call is running: this one and the rest never start.
                return self.abort_unstarted(run_id).await;
            }
            let name = &call.payload.tool_name;
            let output = if self.shared.runtime(self.state.mode).allows(name) {
                self.execute_tool(&run_id, &call.tool_call_id, name, &call.payload.args)
                    .await
            } else {
                // The config changed since the call was suspended (a restore under another one).
                Some(ToolOutput::error(format!(
                    "Tool `{name}` is not available in mode `{}` any more; it was not executed.",
                    self.shared.graph.mode(self.state.mode).id()
                )))
            };
            let Some(output) = output else {
                return self.abort_run(run_id).await;
            };
            self.live(|c| c.finish_decided_tool(&run_id, &call, output, record));
        }
        self.drive_traced(run_id).await
    }
}

impl Session {
    /// [`Session::drive`] inside a `run` span (session, run and mode ids).
    async fn drive_traced(&mut self, run_id: Arc<str>) -> Result<RunOutcome, SessionError> {
        let span = tracing::info_span!(
            "run",
            session_id = %self.id,
            run_id = %run_id,
            mode_id = %self.mode_arc(),
        );
        self.drive(run_id).instrument(span).await
    }
}

impl Session {
    /// Ends a run the host cancelled: see [`Change::close_interrupted`]; persists the session.
    async fn abort_run(&mut self, run_id: Arc<str>) -> Result<RunOutcome, SessionError> {
        self.change(|c| c.close_interrupted(&run_id)).await?;
        Ok(RunOutcome::Aborted { run_id })
    }

    /// Ends a run the host cancelled between tool calls: each call of the last assistant
    /// message without a result never started (`tool_start` and `tool_end` with
    /// [`NOT_STARTED_RESULT`]); persists the session.
    async fn abort_unstarted(&mut self, run_id: Arc<str>) -> Result<RunOutcome, SessionError> {
        self.change(|c| {
            c.answer_unanswered(&run_id, NOT_STARTED_RESULT, NOT_STARTED_RESULT, false);
            c.close_run(&run_id, RunState::Aborted, None);
        })
        .await?;
        Ok(RunOutcome::Aborted { run_id })
    }
}

impl Change<'_> {
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
    fn answer_unanswered(
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
                    self.start_tool(run_id, at, index);
                }
                self.finish_tool(run_id, &id, &name, ToolOutput::error(running_text));
            } else {
                self.start_tool(run_id, at, index);
                self.finish_tool(run_id, &id, &name, ToolOutput::error(not_started));
            }
            index += 1;
        }
    }
}

impl Session {
    /// Takes over the interrupted run `run_id` (see [`Session::continue_run`]): the lease, an
    /// `agent_start`, an "interrupted" result for each tool call that was cut off, all saved in
    /// one compare-and-swap; then the model's next step.
    pub(crate) async fn take_over(&mut self, run_id: Arc<str>) -> Result<RunOutcome, SessionError> {
        self.change(|c| {
            c.take_lease();
            let mode_id = c.mode_arc();
            c.emit(Event::AgentStart {
                session_id: c.id.clone(),
                run_id: run_id.clone(),
                mode_id,
            });
            // Each step was saved before its tool calls ran: any call without a saved result
            // may have run, so none is run again.
            c.answer_unanswered(&run_id, INTERRUPTED_RESULT, INTERRUPTED_RESULT, false);
        })
        .await?;
        self.drive_traced(run_id).await
    }

    /// Ends the run and persists the session: completed with the model's last text, or failed
    /// with the error.
    async fn end_run(
        &mut self,
        run_id: Arc<str>,
        end: Result<String, ModelError>,
    ) -> Result<RunOutcome, SessionError> {
        self.change(|c| match &end {
            Ok(_) => c.close_run(&run_id, RunState::Completed, None),
            Err(error) => c.close_run(&run_id, RunState::Failed, Some(&error.to_string())),
        })
        .await?;
        Ok(match end {
            Ok(text) => RunOutcome::Completed { run_id, text },
            Err(error) => RunOutcome::Failed { run_id, error },
        })
    }
}

impl Session {
    /// The loop: call the model in the current mode, run its tool calls, repeat.
    async fn drive(&mut self, run_id: Arc<str>) -> Result<RunOutcome, SessionError> {
        let shared = self.shared.clone();
        let token = self.run_token.clone();
        let model = self.model.clone().unwrap_or_else(|| shared.model.clone());
        let max_steps = self.max_steps.unwrap_or(shared.max_steps);
        let mut steps = 0usize;
        loop {
            if token.is_cancelled() {
                return self.abort_run(run_id).await;
            }
            // Results may have come in another order than the calls (a suspension, decisions,
            // an expiry, a restore): the model gets them in the order of its calls.
            self.state.order_results();
            self.keep_lease(&run_id, false).await?;
            if steps >= max_steps {
                let error = ModelError::new(format!(
                    "the run exceeded its limit of {max_steps} model calls"
                ))
                .with_kind(ModelErrorKind::StepLimit);
                return self.end_run(run_id, Err(error)).await;
            }
            steps += 1;
            let mode = self.state.mode;
            let runtime = shared.runtime(mode);
            let (session_id, delta_run) = (self.id.clone(), run_id.clone());
            let this = &*self;
            let deliver = move |text: &str| {
                this.deliver_shared(&Event::TextDelta {
                    session_id: session_id.clone(),
                    run_id: delta_run.clone(),
                    text: text.to_owned(),
                });
            };
            let request = ModelRequest {
                session_id: &self.id,
                run_id: &run_id,
                mode_id: shared.graph.mode(mode).id(),
                model_id: shared.graph.mode(mode).default_model_id(),
                system_prompt: &runtime.system_prompt,
                tools: &runtime.specs,
                messages: &self.state.messages,
                cancel: token.clone(),
                extensions: &self.extensions,
                text: TextSink::new(&deliver),
            };
            let span = tracing::info_span!(
                "model_call",
                step = steps,
                mode_id = %shared.graph.mode(mode).id(),
            );
            let response = token
                .run_until_cancelled(model.generate(request).instrument(span))
                .await;
            let response = match response {
                // Once the handle fired the run ends aborted, whatever the model returned (a
                // model that watches its token may return an error, or a reply, as it stops).
                None => return self.abort_run(run_id).await,
                Some(_) if token.is_cancelled() => return self.abort_run(run_id).await,
                Some(Ok(r)) => r,
                Some(Err(error)) => {
                    tracing::debug!(%error, kind = %error.kind(), "model call failed");
                    return self.end_run(run_id, Err(error)).await;
                }
            };
            tracing::debug!(
                tool_calls = response.tool_calls.len(),
                finish_reason = response.finish_reason.as_deref(),
                "model replied"
            );
            if response.finish_reason.is_some() || response.usage.is_some() {
                self.emit(Event::ModelEnd {
                    session_id: self.id.clone(),
                    run_id: run_id.clone(),
                    finish_reason: response.finish_reason.clone(),
                    usage: response.usage,
                });
            }
            if !response.text.is_empty() {
                self.emit(Event::AssistantMessage {
                    session_id: self.id.clone(),
                    run_id: run_id.clone(),
                    text: response.text.clone(),
                });
            }
            let mut calls = response.tool_calls;
            calls.iter_mut().for_each(|call| take_args(&mut call.args));
            unique_call_ids(&mut calls);
            if calls.is_empty() {
                self.state.messages.push(Message::Assistant {
                    content: response.text.clone(),
                    tool_calls: Vec::new(),
                });
                return self.end_run(run_id, Ok(response.text)).await;
            }
            // The conversation keeps the calls; the loop reads them from there (no copy).
            self.state.messages.push(Message::Assistant {
                content: response.text,
                tool_calls: calls,
            });
            let at = self.state.messages.len() - 1;
            self.keep_lease(&run_id, true).await?;
            if let Some(outcome) = self.run_tool_calls(&run_id, at).await {
                return outcome;
            }
        }
    }

    /// Runs one step's tool calls in order; returns `Some` when the run suspends (or its
    /// suspension could not be saved).
    ///
    /// A call that needs approval in the current mode (`requireApproval`, and its tool not
    /// always allowed) does not run: once the other calls have run, the run suspends on every
    /// such call of the reply at once ([`Session::suspend_tool_calls`]). A `submit_plan` beside
    /// them is not executed.
    async fn run_tool_calls(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
    ) -> Option<Result<RunOutcome, SessionError>> {
        let shared = self.shared.clone();
        let waits = (0..)
            .map_while(|i| self.state.tool_call(at, i))
            .any(|call| {
                self.refusal(&call.name, &call.args).is_none()
                    && self.needs_approval(&call.name, &call.args)
            });
        let mut waiting = Vec::new();
        let mut next = 0;
        loop {
            // Once the handle fired no call starts, and none waits: the run ends aborted.
            if self.run_token.is_cancelled() {
                return Some(
                    self.abort_tool_calls(run_id, at, next, &waiting, None)
                        .await,
                );
            }
            let Some((id, name)) = self.live(|c| c.start_tool(run_id, at, next)) else {
                break;
            };
            next += 1;
            let mode = self.state.mode;
            if !shared.runtime(mode).allows(&name) {
                let output = ToolOutput::error(format!(
                    "Tool `{name}` is not available in mode `{}`; it was not executed. Available tools: {}.",
                    shared.graph.mode(mode).id(),
                    shared.runtime(mode).tool_list
                ));
                self.live(|c| c.finish_tool(run_id, &id, &name, output));
                continue;
            }
            let args = self.state.tool_call(at, next - 1).map(|call| &call.args);
            if let Some(reason) = args.and_then(|args| self.refusal(&name, args)) {
                let output = ToolOutput::error(format!("Not executed: {reason}."));
                self.live(|c| c.finish_tool(run_id, &id, &name, output));
                continue;
            }
            if args.is_some_and(|args| self.needs_approval(&name, args)) {
                waiting.push(next - 1);
                continue;
            }
            if name == SUBMIT_PLAN && waits {
                let output = ToolOutput::error(PLAN_BESIDE_APPROVALS);
                self.live(|c| c.finish_tool(run_id, &id, &name, output));
                continue;
            }
            if name == SUBMIT_PLAN {
                let captured = args
                    .ok_or(submit_plan::PlanError::MissingPath)
                    .and_then(submit_plan::path_arg)
                    .and_then(|path| {
                        submit_plan::read_plan_protecting(
                            &shared.workspace,
                            &shared.plans_dir,
                            path,
                            &shared.protected_paths,
                        )
                    });
                match captured {
                    Ok(submission) => {
                        self.live(|c| {
                            while let Some((rest_id, rest_name)) = c.start_tool(run_id, at, next) {
                                next += 1;
                                let output = ToolOutput::error(
                                    "Not executed: the run suspended for plan approval first. Call it again after the decision.",
                                );
                                c.finish_tool(run_id, &rest_id, &rest_name, output);
                            }
                        });
                        return Some(self.suspend(run_id.clone(), id, submission).await);
                    }
                    Err(e) => {
                        let output = ToolOutput::error(e.to_string());
                        self.live(|c| c.finish_tool(run_id, &id, &name, output));
                        continue;
                    }
                }
            }
            let output = match args {
                Some(args) => self.execute_tool(run_id, &id, &name, args).await,
                None => Some(ToolOutput::error(format!(
                    "Tool `{name}` has no implementation."
                ))),
            };
            let Some(output) = output else {
                let running = Some(next - 1);
                return Some(
                    self.abort_tool_calls(run_id, at, next, &waiting, running)
                        .await,
                );
            };
            tracing::debug!(tool_call_id = %id, tool_name = %name, is_error = output.is_error, "tool call finished");
            self.live(|c| c.finish_tool(run_id, &id, &name, output));
        }
        if waiting.is_empty() {
            return None;
        }
        Some(self.suspend_tool_calls(run_id.clone(), at, waiting).await)
    }

    /// Ends the run as aborted while it runs the calls of the assistant message at `at`, the
    /// calls before `next` started (the one at `running` cut off, if any): each call without
    /// a result gets one, in the order of the calls. One that waited for approval is not
    /// approved; the cut-off one is cancelled; those from `next` on never started (with their
    /// `tool_start`, as calls skipped by a suspension are reported). Saved.
    async fn abort_tool_calls(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
        next: usize,
        waiting: &[usize],
        running: Option<usize>,
    ) -> Result<RunOutcome, SessionError> {
        self.change(|c| {
            let mut index = 0;
            while let Some(call) = c.state.tool_call(at, index) {
                let (id, name) = (call.id.clone(), call.name.clone());
                let result = if waiting.contains(&index) {
                    Some(tool_cancelled_result(CancelReason::Aborted))
                } else if running == Some(index) {
                    Some(CANCELLED_RESULT)
                } else if index >= next {
                    c.start_tool(run_id, at, index);
                    Some(NOT_STARTED_RESULT)
                } else {
                    None
                };
                if let Some(text) = result {
                    c.finish_tool(run_id, &id, &name, ToolOutput::error(text));
                }
                index += 1;
            }
            c.close_run(run_id, RunState::Aborted, None);
        })
        .await?;
        Ok(RunOutcome::Aborted {
            run_id: run_id.clone(),
        })
    }

    /// Whether a call of `name` with `args` waits for approval in the current mode: the mode
    /// offers the tool and lists it in `requireApproval`, the arguments are an object (else the
    /// call is refused, never suspended), and no decision allowed the tool for the session.
    /// Why the arguments of a call of `name` are refused before it runs or waits (the rules of
    /// [`crate::tool::args`], then the tool's input schema: [`crate::tool::input`]), if they are.
    fn refusal(&self, name: &str, args: &serde_json::Value) -> Option<String> {
        crate::tool::args::refusal(args).or_else(|| {
            let runtime = self.shared.runtime(self.state.mode);
            let spec = runtime.specs.iter().find(|s| &*s.name == name)?;
            crate::tool::input::mismatch(args, &spec.input_schema)
        })
    }

    fn needs_approval(&self, name: &str, args: &serde_json::Value) -> bool {
        let mode = self.shared.graph.mode(self.state.mode);
        args.is_object()
            && mode.requires_approval(name)
            && self.shared.runtime(self.state.mode).allows(name)
            && !self.state.always_allowed.iter().any(|t| t == name)
    }

    /// Runs tool `name` with `args` in the current mode; `None` when the run was cancelled
    /// while it ran (the call then has no result: [`Session::abort_run`] gives it one).
    async fn execute_tool(
        &self,
        run_id: &Arc<str>,
        id: &str,
        name: &str,
        args: &serde_json::Value,
    ) -> Option<ToolOutput> {
        let shared = &self.shared;
        let mode = self.state.mode;
        let Some(tool) = shared.tools.get(name) else {
            return Some(ToolOutput::error(format!(
                "Tool `{name}` has no implementation."
            )));
        };
        let pending_plans = StorePending(shared.store.as_ref());
        let token = self.run_token.clone();
        let ctx = ToolContext {
            workspace: &shared.workspace,
            plans_dir: &shared.plans_dir,
            mode_id: shared.graph.mode(mode).id(),
            session_id: &self.id,
            run_id,
            tool_call_id: id,
            cancel: token.clone(),
            extensions: &self.extensions,
            pending_plans: &pending_plans,
            protected_paths: &shared.protected_paths,
        };
        let span = tracing::info_span!("tool_call", tool_call_id = %id, tool_name = %name);
        let execute = tool.execute(args, &ctx).instrument(span);
        token.run_until_cancelled(execute).await
    }

    /// Suspends the run on the calls at `indexes` of the assistant message at `at`, which wait
    /// for approval: each gets its decision id, `argsSha256` and a `tool_suspended` event, and
    /// the suspension is saved. If it cannot be saved, each gets an error result and the run
    /// fails, as for a plan ([`Session::suspend`]).
    async fn suspend_tool_calls(
        &mut self,
        run_id: Arc<str>,
        at: usize,
        indexes: Vec<usize>,
    ) -> Result<RunOutcome, SessionError> {
        let suspended = self
            .change(|c| c.suspend_tool_calls(&run_id, at, &indexes))
            .await;
        if let Err(err) = suspended {
            self.live(|c| {
                for &index in &indexes {
                    let Some(call) = c.state.tool_call(at, index) else {
                        continue;
                    };
                    let (id, name) = (call.id.clone(), call.name.clone());
                    let output = ToolOutput::error(format!(
                        "Not executed: the tool call could not be saved for approval: {err}"
                    ));
                    c.finish_tool(&run_id, &id, &name, output);
                }
            });
            let failed = self
                .change(|c| c.close_run(&run_id, RunState::Failed, Some(&err.to_string())))
                .await;
            return Err(failed.err().unwrap_or(err));
        }
        Ok(RunOutcome::ToolCallsSuspended {
            run_id,
            tool_calls: self.state.undecided_calls(),
        })
    }

    /// Suspends the run on `submit_plan` and persists the pending decision. If it cannot be
    /// saved, the plan is refused to the model and the run fails: a suspension that a restart
    /// would lose is never reported as pending.
    async fn suspend(
        &mut self,
        run_id: Arc<str>,
        tool_call_id: String,
        submission: PlanSubmission,
    ) -> Result<RunOutcome, SessionError> {
        let suspended = self
            .change(|c| c.suspend_plan(&run_id, &tool_call_id, submission))
            .await;
        match suspended {
            Ok(payload) => Ok(RunOutcome::Suspended {
                run_id,
                tool_call_id,
                payload,
            }),
            Err(err) => {
                let output =
                    ToolOutput::error(format!("The plan could not be saved for review: {err}"));
                self.live(|c| c.finish_tool(&run_id, &tool_call_id, SUBMIT_PLAN, output));
                let failed = self
                    .change(|c| c.close_run(&run_id, RunState::Failed, Some(&err.to_string())))
                    .await;
                Err(failed.err().unwrap_or(err))
            }
        }
    }
}

impl Change<'_> {
    /// The suspension of the calls at `indexes` of the assistant message at `at`: each waits
    /// for approval with its decision id, `argsSha256` and deadline (`tool_suspended`), and the
    /// run ends `suspended`.
    fn suspend_tool_calls(&mut self, run_id: &Arc<str>, at: usize, indexes: &[usize]) {
        for &index in indexes {
            let Some(call) = self.state.tool_call(at, index) else {
                continue;
            };
            let (tool_call_id, tool_name) = (call.id.clone(), call.name.clone());
            let args = call.args.clone();
            self.state.decisions += 1;
            // The deadline is the mode's the call was requested in, fixed now.
            let timeout = self.config.graph.mode(self.state.mode).approval_timeout();
            let payload = ToolCallPayload {
                decision_id: decision_id_for(self.state.decisions),
                tool_name: tool_name.clone(),
                args_sha256: crate::jcs::sha256(&args),
                args,
                approval_timeout: timeout.map(|t| t.as_str().to_owned()),
                deadline_at_ms: timeout.map(|t| t.deadline_after(self.now_ms)),
                workspace: Some(self.workspace.path.clone()),
            };
            self.state
                .pending
                .push(PendingDecision::ToolCall(PendingToolCall {
                    run_id: run_id.clone(),
                    tool_call_id: tool_call_id.clone(),
                    payload: payload.clone(),
                    decided: None,
                    feedback: None,
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

    /// The suspension on a plan submitted with `submit_plan`: its hand-over targets, revision,
    /// diff and deadline fixed now, its decision id given out (`tool_suspended`); the run ends
    /// `suspended`. Returns the plan's payload.
    fn suspend_plan(
        &mut self,
        run_id: &Arc<str>,
        tool_call_id: &str,
        submission: PlanSubmission,
    ) -> SuspendPayload {
        // The hand-over targets are fixed now, at submit time.
        let graph = self.config.graph;
        let mode = self.state.mode;
        let target = graph.transition_target(mode);
        let targets = graph.transition_targets(mode);
        self.state.decisions += 1;
        // Each plan submitted in the session is its next revision, compared with the last one.
        let text = submit_plan::revision_text(&submission);
        let previous = self.state.last_plan.take();
        let revision = previous.as_ref().map_or(1, |p| p.revision + 1);
        let diff = previous
            .as_ref()
            .and_then(|p| submit_plan::revision_diff(&p.text, &text, p.revision));
        self.state.last_plan = Some(crate::store::PlanRevision {
            revision,
            sha256: submission.sha256.clone(),
            text,
        });
        // The deadline is fixed now too: submit time plus the mode's approvalTimeout.
        let timeout = graph.mode(mode).approval_timeout();
        let approval_timeout = timeout.map(|t| t.as_str().to_owned());
        let deadline_at_ms = timeout.map(|t| t.deadline_after(self.now_ms));
        let payload = SuspendPayload {
            approval_timeout,
            deadline_at_ms,
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
            workspace: Some(self.workspace.path.clone()),
        };
        // Nothing else waits (a run suspends on one plan); `push` keeps the list's buffer.
        self.state.pending.clear();
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

/// The plan files pending in the controller's store, read only when a tool asks (a tool that is
/// about to change a file).
struct StorePending<'a>(Option<&'a Arc<dyn SessionStore>>);

#[async_trait::async_trait]
impl PendingPlans for StorePending<'_> {
    async fn pending_plan_paths(&self) -> Result<Vec<String>, String> {
        let Some(store) = self.0 else {
            return Ok(Vec::new());
        };
        // An unreadable record's plan cannot be decided (loading it fails), so there is
        // nothing of it to protect. Only the pending decisions are read: no time is needed.
        let listing = store.list_pending(0).await.map_err(|e| e.to_string())?;
        Ok(listing
            .pending
            .into_iter()
            .filter(|p| p.kind == crate::store::PendingKind::Plan)
            .map(|p| p.plan_path)
            .collect())
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
    *args = match crate::tool::args::check(&value) {
        Ok(()) => crate::tool::args::normalize(value).unwrap_or_default(),
        Err(_) => serde_json::Value::String(value.to_string()),
    };
}
