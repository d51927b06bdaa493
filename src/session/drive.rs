//! Driving a run (the I/O half of the session, [`Session`]): model call -> tool calls -> model
//! call ..., until the model is done, a plan suspends the run, or the run fails; and the
//! decision that resumes a suspended run. The rules each step obeys are in [`crate::machine`]:
//! this file hands them each input ([`Input`], through [`Session::handle`]) and carries out the
//! next step they return ([`Next`], [`Session::carry_on`]): it calls the model and the tools.

use std::sync::Arc;

use tracing::Instrument;

use super::subagent::ChildEnd;
use super::{
    Decision, DecisionAction, Operation, PendingDecision, PendingToolCall, RunOutcome, Session,
    SessionError,
};
use crate::event::{DecidedRecord, Event};
use crate::hook::{HookDecision, HookRecord, HookSubject};
use crate::machine::call::CallRef;
use crate::machine::check::{self as rules, Checked};
use crate::machine::input::{Abort, Asked, Input, RanTogether, Suspend};
use crate::machine::ledger::WriteRuled;
use crate::machine::next::{Answered, Approved, Next, ResumedChild};
use crate::machine::ruling::{Ruling, denied_result, hook_denied_result, hooked, refused_result};
use crate::machine::state::WaitingChild;
use crate::model::{LanguageModel, ModelError, ModelErrorKind, ModelRequest, TextSink};
use crate::rules::RuleRecord;
use crate::store::SessionStore;
use crate::subagent::SUBAGENT;
use crate::tool::submit_plan::{self, PlanSubmission, SUBMIT_PLAN};
use crate::tool::{PendingPlans, ToolCall, ToolContext, ToolOutput, ToolSuspension};

/// The result of a `submit_plan` call in a reply whose other calls wait for approval.
const PLAN_BESIDE_APPROVALS: &str = "Not executed: other tool calls of this reply wait for the user (an approval, or an answer to a question). Submit the plan again after they are decided.";

impl Session {
    /// Starts a run: appends the user message and drives the loop.
    pub(crate) async fn start_run(&mut self, text: String) -> Result<RunOutcome, SessionError> {
        let Next::CallModel(run_id) = self.handle(Input::UserMessage(text)).await? else {
            unreachable!("a user message starts a run")
        };
        // With a store, the run holds the session from its start: saved `running` with this
        // process's lease, so another process's switch or decision is refused while it works
        // (`LeaseHeld`) instead of being lost to its end's save, or losing the turn to it.
        if self.shared.store.is_some() {
            self.handle(Input::LeaseTick).await?;
        }
        self.drive_traced(run_id).await
    }
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
        taken: &mut Option<super::handle::TakenNotice>,
    ) -> Result<RunOutcome, SessionError> {
        let Some(pending) = self.state.pending.get(index) else {
            return Err(SessionError::NotSuspended(String::new()));
        };
        let decision_id = pending.decision_id().to_owned();
        let checked = rules::check(pending, &decision)?;
        if let (PendingDecision::ToolCall(call), true) = (pending, decision.always_allow) {
            let name = call.payload.tool_name.as_str();
            if self.shared.tools.get(name).is_none() {
                // Nothing here can run the call, so nothing here can say what an allowance of it
                // would cover (another server may reuse the name): none is given.
                return Err(SessionError::MalformedDecision(format!(
                    "`{name}` cannot be always allowed here: this host has no tool `{name}` (an MCP server of another host, such as an editor's, runs it), so the call would not run; approve it without always allowing it, or decide it where it runs"
                )));
            }
        }
        if let (PendingDecision::ToolCall(call), true, Some(pattern)) =
            (pending, decision.always_allow, &decision.allow)
        {
            let name = call.payload.tool_name.as_str();
            let runtime = self.shared.runtime(self.state.mode);
            let schema = runtime.specs.iter().find(|s| &*s.name == name);
            if let Some(why) = crate::allowance::undeclared_pattern_arg(
                pattern,
                name,
                schema.map(|s| &s.input_schema),
            ) {
                return Err(SessionError::MalformedDecision(why));
            }
        }
        // The host must build the chosen model before anything changes; the session keeps it
        // for the next mode only once the approval is saved (`apply_decision`).
        let model = match (decision.action, &decision.model) {
            (DecisionAction::Approved, Some(id)) => Some((id.clone(), self.build_model(id)?)),
            _ => None,
        };
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
            .apply_decision(index, decision, checked, model, (decision_id, taken))
            .instrument(span)
            .await;
        operation.finish(outcome)
    }

    /// Applies a checked decision, persists it (compare-and-swap), then carries the run on.
    /// When the save fails nothing has changed: the run is still suspended, and the mode runs
    /// with the model it ran with. `model` is the one the approval chose, built already: kept
    /// for the next mode once the approval is saved.
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
        model: Option<(String, Arc<dyn LanguageModel>)>,
        (decision_id, taken): (String, &mut Option<super::handle::TakenNotice>),
    ) -> Result<RunOutcome, SessionError> {
        let decide = Input::Decide {
            index,
            decision,
            checked,
            lacking: self.lacking_tools(),
        };
        let next = self.handle(decide).await?;
        if model.is_some() {
            self.chosen_model = model;
        }
        // Saved: a host that carries the run on in the background answers now.
        if let Some(taken) = taken.take() {
            let _ = taken.send(self.decision_taken(&decision_id));
        }
        self.carry_on(next).await
    }

    /// Carries out the next step the rules gave ([`Next`]) to its end: calls the model, runs
    /// the approved tool calls, or returns how the run stands. Given what a decision, a
    /// take-over, a suspension or a model reply without tool calls leads to: never
    /// [`Next::Nothing`] (the steps of a running run, the host's aborts and switches, the
    /// ticks, whose callers carry nothing on) nor [`Next::RunToolCalls`] (a model reply with
    /// calls, which the loop of [`Session::drive`] runs itself, within its step limit).
    async fn carry_on(&mut self, next: Next) -> Result<RunOutcome, SessionError> {
        match next {
            Next::CallModel(run_id) => self.drive_traced(run_id).await,
            // Boxed: running approved tool calls is a loop of its own as large as the run's,
            // and `carry_on` is awaited inside every run (`suspend`): inline, it would double
            // the future boxed at each run's start (`drive_traced`).
            Next::RunApproved {
                run_id,
                calls,
                answered,
                children,
            } => Box::pin(self.run_approved(run_id, calls, answered, children)).await,
            Next::Complete { run_id, text } => self.end_run(run_id, Ok(text)).await,
            Next::SuspendedOnPlan {
                run_id,
                tool_call_id,
                payload,
            } => Ok(RunOutcome::Suspended {
                run_id,
                tool_call_id,
                payload: *payload,
            }),
            Next::WaitsOnToolCalls(run_id) if self.state.awaits_answer() => {
                Ok(RunOutcome::AwaitingAnswer {
                    run_id,
                    pending: self.state.undecided(),
                })
            }
            // Answered here, carried on by the host that has the tool: the decided calls wait.
            Next::WaitsForHost(run_id) => Ok(RunOutcome::AwaitingAnswer {
                run_id,
                pending: self.state.pending.clone(),
            }),
            Next::WaitsOnToolCalls(run_id) => Ok(RunOutcome::ToolCallsSuspended {
                run_id,
                tool_calls: self.state.undecided_calls(),
            }),
            Next::Ended {
                run_id,
                error: Some(error),
            } => Ok(RunOutcome::Failed { run_id, error }),
            Next::Ended {
                run_id,
                error: None,
            } => Ok(RunOutcome::Completed {
                run_id,
                text: String::new(),
            }),
            Next::Nothing | Next::RunToolCalls { .. } => {
                unreachable!("no input that carries a run on leads to {next:?}")
            }
        }
    }

    /// Whether the session's mode puts its waiting calls to a quorum (`approvers` above 1,
    /// [`crate::quorum`]): then a hook's allow does not run a call that would have waited.
    fn under_quorum(&self) -> bool {
        self.shared.graph.mode(self.state.mode).approvers() > 1
    }

    /// The tools of the suspended calls waiting in this session that this host does not have
    /// (a user's own tool, restored by the CLI): an answer to one of them is recorded here and
    /// carried on by a host that has it.
    pub(crate) fn lacking_tools(&self) -> Vec<String> {
        self.state
            .pending
            .iter()
            .filter_map(PendingDecision::as_suspension)
            .map(|s| s.tool_name())
            .filter(|name| self.shared.tools.get(name).is_none())
            .map(str::to_owned)
            .collect()
    }

    /// Carries on a suspended run whose calls are all decided, an answer recorded by a host
    /// without its tool among them ([`Input::CarryOn`]): the approved calls run, the answers go
    /// to their tools, then the model is called.
    ///
    /// # Errors
    /// [`SessionError::NotInterrupted`] when there is nothing to carry on here (a call still
    /// waits, or this host lacks an answered call's tool too); nothing changes.
    pub(crate) async fn carry_on_answered(&mut self) -> Result<RunOutcome, SessionError> {
        let lacking = self.lacking_tools();
        match self
            .handle(Input::CarryOn {
                lacking: lacking.clone(),
            })
            .await?
        {
            Next::Nothing => Err(SessionError::NotInterrupted {
                session_id: self.id.to_string(),
                state: format!(
                    "suspended, its answered calls waiting for a host that has their tools ({})",
                    lacking.join(", ")
                ),
            }),
            next => self.carry_on(next).await,
        }
    }

    /// Runs the approved tool calls of a reply whose last call was just decided, in the
    /// model's order, then calls the model. A tool-call decision carries the run on only now,
    /// once every call is decided (a plan's run started before its change: `decide_at`).
    async fn run_approved(
        &mut self,
        run_id: Arc<str>,
        calls: Vec<Approved>,
        answered: Vec<Answered>,
        children: Vec<ResumedChild>,
    ) -> Result<RunOutcome, SessionError> {
        self.start_operation();
        let mut suspended: Vec<(usize, usize, Box<ToolSuspension>)> = Vec::new();
        // The `subagent` calls whose children wait (again) for the user.
        let mut waiting_children: Vec<(usize, usize, WaitingChild)> = Vec::new();
        for (mut answered_call, record) in answered {
            if self.run_token.is_cancelled() {
                return self.abort_run(Abort::BeforeApproved(run_id)).await;
            }
            let answer = answered_call.answer.take().unwrap_or_default();
            let name = answered_call.payload.tool_name.as_str();
            let Some(output) = self
                .resume_tool(
                    &run_id,
                    &answered_call.tool_call_id,
                    name,
                    &answered_call.payload.args,
                    &answer,
                )
                .await
            else {
                return self.abort_run(Abort::Run(run_id)).await;
            };
            let result = Input::ToolResult {
                call: CallRef::new(
                    run_id.clone(),
                    answered_call.tool_call_id,
                    answered_call.payload.tool_name.clone(),
                ),
                output: ToolOutput {
                    suspension: None,
                    ..output
                },
                decision: Some(record),
            };
            self.handle(result).await?;
        }
        for (call, record) in calls {
            if self.run_token.is_cancelled() {
                // No approved call is running: this one and the rest never start.
                return self.abort_run(Abort::BeforeApproved(run_id)).await;
            }
            let name = &call.payload.tool_name;
            // Every check a call that never waited gets is made again: the config, the tools,
            // the rules or the workspace the paths resolve in may have changed since the call
            // was suspended (a restore under another config or other tools among them), and a
            // refusal wins over the user's approval.
            let now = ToolCall::new(
                call.tool_call_id.clone(),
                name.clone(),
                call.payload.args.clone(),
            );
            // Approved where its paths led when it was shown: a symlink changed since (another
            // call of the reply, a restore, anything in the workspace) takes the approval
            // nowhere new. Not run, the model told which path moved and where it leads now.
            let moved = self.moved_since_shown(&now, &call.payload.locations);
            let output = match self.ruling_of(&now) {
                Some(Ruling::Deny(rule)) => {
                    self.refuse_approved(&run_id, call, record, rule).await?;
                    continue;
                }
                // Approved only by an allowance given at another call of the reply (nobody saw
                // this one), and an `ask` rule now holds it: that approval does not stand in for
                // the user's. It is refused, never run (not asked about again: the reply's other
                // calls may have run already), the model told why, the refusal's record naming
                // the rule.
                Some(Ruling::Ask(Some(mut rule))) if record.allowed_by.is_some() => {
                    rule.reason = format!(
                        "{}; it was approved only by an allowance given at another call, \
                         and a rule that asks the user holds it now",
                        rule.reason
                    );
                    self.refuse_approved(&run_id, call, record, rule).await?;
                    continue;
                }
                None => Some(ToolOutput::error(format!(
                    "Tool `{name}` is not available in mode `{}` any more; it was not executed.",
                    self.shared.graph.mode(self.state.mode).id()
                ))),
                Some(Ruling::Refused(reason)) => Some(ToolOutput::error(refused_result(&reason))),
                // Ruled by the rules alone (the hooks were asked before it waited): never
                // hooked here, refused all the same if it were.
                Some(Ruling::HookDenied(hook)) => {
                    Some(ToolOutput::error(hook_denied_result(&hook)))
                }
                Some(_) if moved.is_some() => {
                    moved.as_deref().map(refused_result).map(ToolOutput::error)
                }
                // Approved: an `ask` rule (or the mode's `requireApproval`) asked the user, who
                // said yes; an allowance given since would have run it too.
                Some(
                    Ruling::Run(_)
                    | Ruling::Ask(_)
                    | Ruling::Drift(_)
                    | Ruling::Allowed(_)
                    | Ruling::HookAllowed(_),
                ) if self.shared.task_tools.contains(&name.as_str()) => {
                    let (output, tasks) = self.task_outcome(name, &call.payload.args);
                    if let Some(tasks) = tasks {
                        let changed = Input::TasksChanged {
                            run_id: run_id.clone(),
                            tasks,
                        };
                        self.handle(changed).await?;
                    }
                    Some(output)
                }
                Some(
                    Ruling::Run(_)
                    | Ruling::Ask(_)
                    | Ruling::Drift(_)
                    | Ruling::Allowed(_)
                    | Ruling::HookAllowed(_),
                ) if self.shared.runs_subagent(name) => {
                    let index = self.call_position(&call.tool_call_id);
                    match index {
                        Some((at, index)) => {
                            // Cancelled meanwhile, the child's result is kept all the same (what
                            // it did, or that it was stopped); no further call starts.
                            let mut outputs = self.run_subagents(&run_id, at, &[index]).await;
                            self.note_child_plan_writes().await?;
                            outputs.pop().map(|(_, o)| o)
                        }
                        None => Some(ToolOutput::error(
                            "Not executed: the subagent call is not in the last reply.",
                        )),
                    }
                }
                Some(
                    Ruling::Run(_)
                    | Ruling::Ask(_)
                    | Ruling::Drift(_)
                    | Ruling::Allowed(_)
                    | Ruling::HookAllowed(_),
                ) => {
                    self.execute_tool(&run_id, &call.tool_call_id, name, &call.payload.args)
                        .await
                }
            };
            let Some(mut output) = output else {
                return self.abort_run(Abort::Run(run_id)).await;
            };
            if let Some((at, index)) = self.call_position(&call.tool_call_id)
                && let Some(child) = self.take_waiting_child(index)
            {
                // Approved, its child started and waits for the user.
                waiting_children.push((at, index, child));
                continue;
            }
            if let Some(suspension) = output.suspension.take()
                && let Some((at, index)) = self.call_position(&call.tool_call_id)
            {
                // Approved, it ran and suspended: now it waits for the user's answer.
                suspended.push((at, index, suspension));
                continue;
            }
            let result = Input::ToolResult {
                call: CallRef::new(run_id.clone(), call.tool_call_id, call.payload.tool_name),
                output,
                decision: Some(record),
            };
            self.handle(result).await?;
        }
        // The children whose calls were decided carry on, one after the other; each that
        // ends hands its call its result, each that waits again suspends the run once more.
        for (child, decided) in children {
            if self.run_token.is_cancelled() {
                return self.abort_run(Abort::BeforeApproved(run_id)).await;
            }
            let Some((at, index)) = self.call_position(&child.tool_call_id) else {
                continue;
            };
            let tool_call_id = child.tool_call_id.clone();
            let end = self.resume_child(&run_id, child, decided).await;
            self.note_child_plan_writes().await?;
            match end {
                ChildEnd::Waits(child) => waiting_children.push((at, index, *child)),
                ChildEnd::Done(output) => {
                    let result = Input::ToolResult {
                        call: CallRef::new(run_id.clone(), tool_call_id, SUBAGENT),
                        output,
                        decision: None,
                    };
                    self.handle(result).await?;
                }
            }
        }
        let at = suspended
            .first()
            .map(|(at, _, _)| *at)
            .or(waiting_children.first().map(|(at, _, _)| *at));
        if let Some(at) = at {
            let suspended = suspended.into_iter().map(|(_, i, s)| (i, s)).collect();
            let children = waiting_children
                .into_iter()
                .map(|(_, i, c)| (i, c))
                .collect();
            return self
                .suspend_tool_calls(run_id, at, Vec::new(), suspended, children)
                .await;
        }
        self.drive_traced(run_id).await
    }

    /// The `subagent` calls of the reply at `at` that start together with the one at `index`:
    /// each `subagent` call right after it that would run now, with its ruling (ruled again
    /// here: one that waits or is refused is not started, and ends the batch).
    fn subagent_batch(&self, at: usize, index: usize) -> Vec<(usize, Ruling)> {
        let mut batch = Vec::new();
        for i in index + 1.. {
            let Some(call) = self.state.tool_call(at, i) else {
                break;
            };
            if !self.shared.runs_subagent(&call.name) {
                break;
            }
            // A call a hook decided is not started with others: it is ruled, and recorded,
            // on its own.
            if self.reply_hooks.get(i).is_some_and(|h| {
                h.as_ref()
                    .is_some_and(|h| h.decision != crate::hook::HookDecision::Ask)
            }) {
                break;
            }
            match self.ruling_of(call) {
                Some(ruling @ (Ruling::Run(_) | Ruling::Allowed(_))) => batch.push((i, ruling)),
                _ => break,
            }
        }
        batch
    }

    /// Runs the `subagent` call at `index` of the reply at `at` (let run by the `allow` rule or
    /// the allowance of `run_by`, if one did) together with the `subagent` calls right after it
    /// that would run now ([`Session::subagent_batch`]): each gets its `tool_start` before any
    /// child starts, so a host can nest a child's events under its call. Returns the call's
    /// result, and the others' (with their rulings), for the loop to hand over in the model's
    /// order. While they run, a dropped run's future ends the run with the results of the
    /// children that finished kept, and the others cancelled (`waiting` and `suspended`: the
    /// reply's calls that wait, as [`Abort::ToolCalls`] takes them).
    async fn run_together(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
        index: usize,
        run_by: (
            Option<Box<RuleRecord>>,
            Option<Box<crate::allowance::Allowance>>,
        ),
        waiting: &[usize],
        suspended: &[(usize, Box<ToolSuspension>)],
    ) -> Result<(Option<ToolOutput>, Vec<(usize, Ruling, ToolOutput)>), SessionError> {
        let others = self.subagent_batch(at, index);
        for (i, _) in &others {
            let start = Input::ToolStart {
                run_id: run_id.clone(),
                at,
                index: *i,
                waits_for_approval: false,
            };
            self.handle(start).await?;
        }
        let sha256 = |i: usize| {
            self.state
                .tool_call(at, i)
                .map(|call| crate::jcs::sha256(&call.args))
                .unwrap_or_default()
        };
        let ran = |i: usize, rule, allowance| RanTogether {
            index: i,
            output: None,
            rule,
            allowance,
            args_sha256: sha256(i),
        };
        let mut together = vec![ran(index, run_by.0, run_by.1)];
        for (i, ruling) in &others {
            together.push(match ruling {
                Ruling::Run(rule) => ran(*i, rule.clone(), None),
                Ruling::Allowed(by) => ran(*i, None, Some(by.clone())),
                _ => ran(*i, None, None),
            });
        }
        let members: Vec<usize> = together.iter().map(|t| t.index).collect();
        self.abort_while_running = Some(Abort::ToolCalls {
            run_id: run_id.clone(),
            at,
            next: members.last().map_or(index, |last| last + 1),
            waiting: waiting.to_vec(),
            suspended: suspended.iter().map(|(i, _)| *i).collect(),
            running: None,
            allowed: None,
            together,
        });
        let mut outputs = self.run_subagents(run_id, at, &members).await;
        self.note_child_plan_writes().await?;
        let mine = outputs
            .iter()
            .position(|(i, _)| *i == index)
            .map(|m| outputs.remove(m).1);
        let mut rest = Vec::new();
        for (i, ruling) in others {
            if let Some(m) = outputs.iter().position(|(o, _)| *o == i) {
                rest.push((i, ruling, outputs.remove(m).1));
            }
        }
        Ok((mine, rest))
    }

    /// Where the call `tool_call_id` of the last reply is: the reply's position in the
    /// conversation and the call's in the reply.
    fn call_position(&self, tool_call_id: &str) -> Option<(usize, usize)> {
        let at = self
            .state
            .messages
            .iter()
            .rposition(|m| matches!(m, crate::model::Message::Assistant { .. }))?;
        let crate::model::Message::Assistant { tool_calls, .. } = &self.state.messages[at] else {
            return None;
        };
        let index = tool_calls.iter().position(|c| c.id == tool_call_id)?;
        Some((at, index))
    }
    /// Refuses an approved call of [`Session::run_approved`] that `rule` holds now: it never
    /// runs, the model is told why, and the refusal gets a record of its own
    /// ([`Input::RefusedApproved`]).
    async fn refuse_approved(
        &mut self,
        run_id: &Arc<str>,
        call: PendingToolCall,
        record: DecidedRecord,
        rule: Box<RuleRecord>,
    ) -> Result<(), SessionError> {
        let refused = Input::RefusedApproved {
            call: CallRef::new(run_id.clone(), call.tool_call_id, call.payload.tool_name),
            record,
            rule,
        };
        self.handle(refused).await?;
        Ok(())
    }
    /// [`Session::drive`] inside a `run` span (session, run and mode ids).
    async fn drive_traced(&mut self, run_id: Arc<str>) -> Result<RunOutcome, SessionError> {
        let span = tracing::info_span!(
            "run",
            session_id = %self.id,
            run_id = %run_id,
            mode_id = %self.mode_arc(),
        );
        Box::pin(self.drive(run_id).instrument(span)).await
    }
    /// Ends a run the host cancelled ([`Abort`]); persists the session.
    async fn abort_run(&mut self, abort: Abort) -> Result<RunOutcome, SessionError> {
        let run_id = match &abort {
            Abort::Run(run_id) | Abort::BeforeApproved(run_id) => run_id.clone(),
            Abort::ToolCalls { run_id, .. } => run_id.clone(),
            Abort::Pending(_) => self
                .state
                .run
                .as_ref()
                .map(|(id, _)| id.clone())
                .unwrap_or_default(),
        };
        self.handle(Input::Abort(abort)).await?;
        Ok(RunOutcome::Aborted { run_id })
    }

    /// Takes over the interrupted run `run_id` (see [`Session::continue_run`]): the lease, an
    /// `agent_start`, an "interrupted" result for each tool call that was cut off, all saved in
    /// one compare-and-swap; then the model's next step.
    pub(crate) async fn take_over(&mut self, run_id: Arc<str>) -> Result<RunOutcome, SessionError> {
        let next = self.handle(Input::TakeOver(run_id)).await?;
        self.carry_on(next).await
    }

    /// Ends the run and persists the session: completed with the model's last text, or failed
    /// with the error.
    async fn end_run(
        &mut self,
        run_id: Arc<str>,
        end: Result<String, ModelError>,
    ) -> Result<RunOutcome, SessionError> {
        let error = end.as_ref().err().map(ToString::to_string);
        let run_id = run_id.clone();
        self.handle(Input::End {
            run_id: run_id.clone(),
            error,
        })
        .await?;
        Ok(match end {
            Ok(text) => RunOutcome::Completed { run_id, text },
            Err(error) => RunOutcome::Failed { run_id, error },
        })
    }
    /// The loop: call the model in the current mode, run its tool calls, repeat.
    async fn drive(&mut self, run_id: Arc<str>) -> Result<RunOutcome, SessionError> {
        let shared = self.shared.clone();
        let token = self.run_token.clone();
        let (model, chosen) = match self.mode_model() {
            Ok(found) => found,
            Err(error) => return self.end_run(run_id, Err(error)).await,
        };
        let max_steps = self.max_steps.unwrap_or(shared.max_steps);
        let mut steps = 0usize;
        loop {
            if token.is_cancelled() {
                return self.abort_run(Abort::Run(run_id)).await;
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
            // A change to the managed config reaches the session here, before the step.
            if let Some(watch) = &shared.managed_watch
                && let Err(error) = watch.refresh(&shared.graph)
            {
                let error = ModelError::new(format!(
                    "the managed config changed and cannot be used, so the run stops: {error}"
                ));
                return self.end_run(run_id, Err(error)).await;
            }
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
                // A model chosen at approval is the user's choice: no mode default overrides it.
                model_id: if chosen {
                    None
                } else {
                    shared.graph.mode(mode).default_model_id()
                },
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
                None => return self.abort_run(Abort::Run(run_id)).await,
                Some(_) if token.is_cancelled() => return self.abort_run(Abort::Run(run_id)).await,
                Some(Ok(r)) => r,
                Some(Err(error)) => {
                    self.last_finish = None;
                    tracing::debug!(%error, kind = %error.kind(), "model call failed");
                    return self.end_run(run_id, Err(error)).await;
                }
            };
            self.last_finish = response.finish();
            tracing::debug!(
                tool_calls = response.tool_calls.len(),
                finish_reason = response.finish_reason.as_deref(),
                "model replied"
            );
            let reply = Input::ModelReply {
                run_id: run_id.clone(),
                reply: response,
            };
            let next = self.handle(reply).await?;
            let Next::RunToolCalls { at, .. } = next else {
                // The model is done.
                return self.carry_on(next).await;
            };
            self.keep_lease(&run_id, true).await?;
            if let Some(outcome) = self.run_tool_calls(&run_id, at).await? {
                return Ok(outcome);
            }
        }
    }

    /// Runs one step's tool calls in order; returns how the run stands when it suspends (or
    /// its suspension could not be saved), or is aborted, and `None` when the model is next.
    ///
    /// Each call is ruled first ([`Ruling`]: the mode's rules, its `requireApproval`, the
    /// tools always allowed), and a call that would run is ruled again just before it runs,
    /// its paths resolved anew, so what an earlier call of the reply did (a symlink it made)
    /// cannot take it past a deny or ask rule. A call a `deny` rule refuses never runs: its
    /// result names the rule.
    /// A call that waits (an `ask` rule, or `requireApproval` and its tool not always allowed)
    /// does not run: once the other calls have run, the run suspends on every such call of the
    /// reply at once ([`Session::suspend_tool_calls`]). A `submit_plan` beside them is not
    /// executed.
    async fn run_tool_calls(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
    ) -> Result<Option<RunOutcome>, SessionError> {
        let shared = self.shared.clone();
        // Each call's outcome is ruled before any runs (all of the reply's calls are judged in
        // the mode, the rules and the allowances it was made under), and once more just before
        // it runs.
        let rulings: Vec<Option<Ruling>> = (0..)
            .map_while(|i| self.state.tool_call(at, i))
            .map(|call| self.ruling_of(call))
            .collect();
        // The hooks are asked about each call the rules do not refuse, before any runs or
        // waits; their verdicts narrow each ruling, now and each time the call is ruled again.
        let rulings = self.hook_rulings(run_id, at, rulings).await;
        let waits = rulings
            .iter()
            .any(|r| matches!(r, Some(Ruling::Ask(_) | Ruling::Drift(_))));
        let mut waiting: Vec<Asked> = Vec::new();
        // The calls their tools suspended ([`ToolOutput::suspend`]): they wait for an answer.
        let mut suspended: Vec<(usize, Box<ToolSuspension>)> = Vec::new();
        // The `subagent` calls whose children wait for the user.
        let mut children: Vec<(usize, WaitingChild)> = Vec::new();
        // The `subagent` calls that ran together with an earlier one of the reply (started, and
        // ruled, with it), with what let them run and their results: each is handed over when
        // the loop reaches it, cancelled or not (its child ran).
        let mut ran_together: Vec<(usize, Ruling, ToolOutput)> = Vec::new();
        let mut next = 0;
        loop {
            let together = ran_together
                .iter()
                .position(|(i, ..)| *i == next)
                .map(|p| ran_together.remove(p));
            // Once the handle fired no call starts, and none waits: the run ends aborted.
            if self.run_token.is_cancelled() && together.is_none() {
                let abort = Abort::ToolCalls {
                    run_id: run_id.clone(),
                    at,
                    next,
                    // A `subagent` call whose child waits is not approved either.
                    waiting: held_indexes(&waiting, &children),
                    suspended: suspended.iter().map(|(i, _)| *i).collect(),
                    running: None,
                    allowed: None,
                    together: Vec::new(),
                };
                return self.abort_run(abort).await.map(Some);
            }
            let Some(call) = self.state.tool_call(at, next) else {
                break;
            };
            let (id, name) = (call.id.clone(), call.name.clone());
            let (ruled_together, mut together_output) = match together {
                Some((_, ruling, output)) => (Some(ruling), Some(output)),
                None => (None, None),
            };
            if ruled_together.is_none() {
                let start = Input::ToolStart {
                    run_id: run_id.clone(),
                    at,
                    index: next,
                    waits_for_approval: matches!(
                        rulings.get(next),
                        Some(Some(Ruling::Ask(_) | Ruling::Drift(_)))
                    ),
                };
                self.handle(start).await?;
            }
            next += 1;
            // Ruled again just before it runs: an earlier call of the reply may have changed
            // where its paths lead (a symlink it made). A call that would run is refused or
            // waits if it now matches a deny or ask rule; one that waits, or was refused, stays so.
            // A call that ran together with an earlier one was ruled as it started.
            let ruling = match ruled_together {
                Some(ruling) => Some(ruling),
                None => match rulings.get(next - 1).cloned().flatten() {
                    Some(
                        ruled @ (Ruling::Run(_) | Ruling::Allowed(_) | Ruling::HookAllowed(_)),
                    ) => {
                        if matches!(ruled, Ruling::Allowed(_)) {
                            // An allowance lets it run: as the store has them now, so one
                            // another process revoked since the run started no longer does.
                            self.load_workspace_allowances().await;
                        }
                        let hook = self.reply_hooks.get(next - 1).cloned().flatten();
                        let quorum = self.under_quorum();
                        self.state
                            .tool_call(at, next - 1)
                            .and_then(|call| self.ruling_again(call))
                            .map(|ruling| {
                                hooked(ruling, hook.as_ref(), quorum, Some(&self.managed_mode()))
                            })
                    }
                    other => other,
                },
            };
            if self.state.plan_ledger.is_some() {
                self.note_plan_write(at, next - 1, ruling.as_ref()).await?;
            }
            let args = self.state.tool_call(at, next - 1).map(|call| &call.args);
            let mut allowance = None;
            let mut hook_allowed = None;
            let allowed_by = match ruling {
                None => {
                    let mode = self.state.mode;
                    let output = ToolOutput::error(format!(
                        "Tool `{name}` is not available in mode `{}`; it was not executed. Available tools: {}.",
                        shared.graph.mode(mode).id(),
                        shared.runtime(mode).tool_list
                    ));
                    self.tool_result(run_id, id, name, output, None).await?;
                    continue;
                }
                Some(Ruling::Refused(reason)) => {
                    let output = ToolOutput::error(refused_result(&reason));
                    self.tool_result(run_id, id, name, output, None).await?;
                    continue;
                }
                Some(Ruling::Deny(rule)) => {
                    let output = ToolOutput::error(denied_result(&rule));
                    let sha256 = args.map(crate::jcs::sha256).unwrap_or_default();
                    self.tool_result(run_id, id, name, output, Some((sha256, rule)))
                        .await?;
                    continue;
                }
                Some(Ruling::HookDenied(hook)) => {
                    let output = ToolOutput::error(hook_denied_result(&hook));
                    let result = Input::HookedToolResult {
                        call: CallRef::new(run_id.clone(), id, name),
                        args_sha256: args.map(crate::jcs::sha256).unwrap_or_default(),
                        output,
                        hook,
                    };
                    self.handle(result).await?;
                    continue;
                }
                Some(Ruling::HookAllowed(hook)) => {
                    hook_allowed = Some(hook);
                    None
                }
                Some(Ruling::Ask(rule)) => {
                    // Where its paths lead, resolved now for the approver to see.
                    let locations = self
                        .state
                        .tool_call(at, next - 1)
                        .map(|call| self.locations_of(call))
                        .unwrap_or_default();
                    let review = self.review_call(run_id, at, next - 1).await;
                    waiting.push(Asked {
                        locations,
                        review,
                        ..Asked::at(next - 1, rule)
                    });
                    continue;
                }
                Some(Ruling::Drift(why)) => {
                    // Outside the approved plan's files: it waits, saying which file.
                    let locations = self
                        .state
                        .tool_call(at, next - 1)
                        .map(|call| self.locations_of(call))
                        .unwrap_or_default();
                    let review = self.review_call(run_id, at, next - 1).await;
                    waiting.push(Asked {
                        locations,
                        drift: Some(why),
                        review,
                        ..Asked::at(next - 1, None)
                    });
                    continue;
                }
                Some(Ruling::Run(rule)) => rule,
                Some(Ruling::Allowed(by)) => {
                    allowance = Some(by);
                    None
                }
            };
            let held =
                waits || !waiting.is_empty() || !suspended.is_empty() || !children.is_empty();
            if name == SUBMIT_PLAN && held {
                let output = ToolOutput::error(PLAN_BESIDE_APPROVALS);
                self.tool_result(run_id, id, name, output, None).await?;
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
                        let subject = HookSubject::Plan {
                            tool_call_id: id.clone(),
                            path: submission.path.clone(),
                            title: submission.title.clone(),
                            plan: submission.plan.clone(),
                            sha256: submission.sha256.clone(),
                        };
                        let hook = self.consult_hooks(run_id, subject.clone()).await;
                        // A plan a hook denied is rejected before any reviewer sees it.
                        let review = match &hook {
                            Some(h) if h.decision == HookDecision::Deny => None,
                            _ => self.consult_reviewer(run_id, subject).await,
                        };
                        let skip = Input::SkipRest {
                            run_id: run_id.clone(),
                            at,
                            from: next,
                        };
                        self.handle(skip).await?;
                        return self
                            .suspend(run_id.clone(), id, submission, hook, review)
                            .await
                            .map(Some);
                    }
                    Err(e) => {
                        let output = ToolOutput::error(e.to_string());
                        self.tool_result(run_id, id, name, output, None).await?;
                        continue;
                    }
                }
            }
            // Dropped while it runs, the run ends at once (`abandon`) with this abort: the calls
            // that wait keep their own texts (not approved, not answered), and the call an
            // allowance let run keeps the allowance's record.
            self.abort_while_running = Some(Abort::ToolCalls {
                run_id: run_id.clone(),
                at,
                next,
                waiting: held_indexes(&waiting, &children),
                suspended: suspended.iter().map(|(i, _)| *i).collect(),
                running: Some(next - 1),
                allowed: allowance
                    .as_ref()
                    .map(|a| (a.clone(), args.map(crate::jcs::sha256).unwrap_or_default())),
                together: Vec::new(),
            });
            // A built-in task tool's call is applied to the session's list by the core's rules;
            // the new list is handed over just before the call's result.
            let mut new_tasks = None;
            let output = match args {
                Some(_) if shared.runs_subagent(&name) => match together_output.take() {
                    Some(output) => Some(output),
                    None => {
                        // The reply's `subagent` calls from here on that would run now start
                        // together, up to the controller's bound at once.
                        let index = next - 1;
                        let run_by = (allowed_by.clone(), allowance.clone());
                        let (output, together) = self
                            .run_together(
                                run_id,
                                at,
                                index,
                                run_by,
                                &held_indexes(&waiting, &children),
                                &suspended,
                            )
                            .await?;
                        ran_together = together;
                        output
                    }
                },
                Some(args) if self.shared.task_tools.contains(&name.as_str()) => {
                    let (output, tasks) = self.task_outcome(&name, args);
                    new_tasks = tasks;
                    Some(output)
                }
                Some(args) => self.execute_tool(run_id, &id, &name, args).await,
                None => Some(ToolOutput::error(format!(
                    "Tool `{name}` has no implementation."
                ))),
            };
            self.abort_while_running = None;
            // Borrowed again: running `subagent` calls together borrows the session mutably.
            let args = self.state.tool_call(at, next - 1).map(|call| &call.args);
            let Some(output) = output else {
                let abort = Abort::ToolCalls {
                    run_id: run_id.clone(),
                    at,
                    next,
                    // A `subagent` call whose child waits is not approved either.
                    waiting: held_indexes(&waiting, &children),
                    suspended: suspended.iter().map(|(i, _)| *i).collect(),
                    running: Some(next - 1),
                    // Cancelled while it ran: the record of the allowance that let it run.
                    allowed: allowance
                        .map(|a| (a, args.map(crate::jcs::sha256).unwrap_or_default())),
                    together: Vec::new(),
                };
                return self.abort_run(abort).await.map(Some);
            };
            if let Some(child) = self.take_waiting_child(next - 1) {
                // Its child waits for the user: its calls wait beside the reply's own.
                tracing::debug!(tool_call_id = %id, "subagent waits for the user");
                children.push((next - 1, child));
                continue;
            }
            if let Some(suspension) = output.suspension {
                // The tool suspended its call: it waits for the user's answer, beside the
                // reply's calls that wait for approval.
                tracing::debug!(tool_call_id = %id, tool_name = %name, "tool call suspended");
                suspended.push((next - 1, suspension));
                continue;
            }
            tracing::debug!(tool_call_id = %id, tool_name = %name, is_error = output.is_error, "tool call finished");
            // Hashed only for a call a rule or an allowance let run, whose record names it.
            let sha256 = if allowed_by.is_some() || allowance.is_some() || hook_allowed.is_some() {
                args.map(crate::jcs::sha256).unwrap_or_default()
            } else {
                String::new()
            };
            if let Some(tasks) = new_tasks {
                let changed = Input::TasksChanged {
                    run_id: run_id.clone(),
                    tasks,
                };
                self.handle(changed).await?;
            }
            if let Some(hook) = hook_allowed {
                let result = Input::HookedToolResult {
                    call: CallRef::new(run_id.clone(), id, name),
                    args_sha256: sha256,
                    output,
                    hook,
                };
                self.handle(result).await?;
                continue;
            }
            match (allowed_by, allowance) {
                (Some(rule), _) => {
                    self.tool_result(run_id, id, name, output, Some((sha256, rule)))
                        .await?
                }
                (None, Some(allowance)) => {
                    let result = Input::AllowedToolResult {
                        call: CallRef::new(run_id.clone(), id, name),
                        args_sha256: sha256,
                        output,
                        allowance,
                    };
                    self.handle(result).await?;
                }
                (None, None) => self.tool_result(run_id, id, name, output, None).await?,
            }
        }
        if waiting.is_empty() && suspended.is_empty() && children.is_empty() {
            return Ok(None);
        }
        self.suspend_tool_calls(run_id.clone(), at, waiting, suspended, children)
            .await
            .map(Some)
    }

    /// Hands the result of tool call `id` (`name`) to the rules: [`Input::ToolResult`], or
    /// [`Input::RuledToolResult`] when a rule decided the call's outcome on its own (`ruled`:
    /// the sha256 of the call's canonical arguments, and the rule).
    async fn tool_result(
        &mut self,
        run_id: &Arc<str>,
        id: String,
        name: String,
        output: ToolOutput,
        ruled: Option<(String, Box<RuleRecord>)>,
    ) -> Result<(), SessionError> {
        let call = CallRef::new(run_id.clone(), id, name);
        let result = match ruled {
            None => Input::ToolResult {
                call,
                output,
                decision: None,
            },
            Some((args_sha256, rule)) => Input::RuledToolResult {
                call,
                args_sha256,
                output,
                rule,
            },
        };
        self.handle(result).await.map(drop)
    }

    /// `rulings` of the calls of the reply at `at`, each narrowed by the hooks' verdict on it
    /// ([`hooked`]); the verdicts kept in `reply_hooks` for the rulings made again. A call the
    /// mode does not offer or the rules refuse is not shown to the hooks.
    async fn hook_rulings(
        &mut self,
        run_id: &Arc<str>,
        at: usize,
        rulings: Vec<Option<Ruling>>,
    ) -> Vec<Option<Ruling>> {
        self.reply_hooks = vec![None; rulings.len()];
        if self.shared.hooks.is_empty() {
            return rulings;
        }
        let mut hooked_rulings = Vec::with_capacity(rulings.len());
        for (index, ruling) in rulings.into_iter().enumerate() {
            let subject = match (&ruling, self.state.tool_call(at, index)) {
                (
                    Some(Ruling::Run(_) | Ruling::Allowed(_) | Ruling::Ask(_) | Ruling::Drift(_)),
                    Some(call),
                ) if call.name != SUBMIT_PLAN => Some(HookSubject::ToolCall {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    args: call.args.clone(),
                    args_sha256: crate::jcs::sha256(&call.args),
                }),
                _ => None,
            };
            let hook = match subject {
                Some(subject) => self.consult_hooks(run_id, subject).await,
                None => None,
            };
            let quorum = self.under_quorum();
            let mode = self.managed_mode();
            hooked_rulings.push(ruling.map(|r| hooked(r, hook.as_ref(), quorum, Some(&mode))));
            self.reply_hooks[index] = hook;
        }
        hooked_rulings
    }

    /// Notes the call at `index` of the reply at `at`, ruled `ruling`, in the ledger of the
    /// approved plan ([`Input::PlanWrite`]) when its tool writes: where its paths lie (the I/O
    /// the pure ledger needs) and whether it runs, waits or is refused.
    async fn note_plan_write(
        &mut self,
        at: usize,
        index: usize,
        ruling: Option<&Ruling>,
    ) -> Result<(), SessionError> {
        let ruled = match ruling {
            Some(Ruling::Run(_) | Ruling::Allowed(_) | Ruling::HookAllowed(_)) => WriteRuled::Runs,
            Some(Ruling::Ask(_) | Ruling::Drift(_)) => WriteRuled::Waits,
            Some(Ruling::Refused(_)) => WriteRuled::Refused,
            // A rule's or a hook's deny: the call never ran, and no plan let it through.
            Some(Ruling::Deny(_) | Ruling::HookDenied(_)) | None => return Ok(()),
        };
        let Some(call) = self.state.tool_call(at, index) else {
            return Ok(());
        };
        let mode_id = self.shared.graph.mode(self.state.mode).id().to_owned();
        let Some(written) = self.written_by(call, &mode_id) else {
            return Ok(());
        };
        let input = Input::PlanWrite {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            written,
            ruled,
        };
        self.handle(input).await.map(drop)
    }

    /// How `call` is handled in the current mode ([`Ruling`]: run, wait for approval, refused
    /// by a rule, or refused for its arguments before any rule applies: [`Session::refusal`]);
    /// `None` for a tool the mode does not offer (`availableTools`, which outranks every rule).
    /// Its path arguments are resolved here, in the workspace (the I/O the pure ruling needs).
    fn ruling_of(&self, call: &ToolCall) -> Option<Ruling> {
        self.ruling_explained(call, &mut Vec::new())
    }

    /// [`Session::ruling_of`], each step of its reasoning added to `steps`
    /// ([`crate::explain`], [`Session::explain`]).
    pub(crate) fn ruling_explained(
        &self,
        call: &ToolCall,
        steps: &mut Vec<crate::explain::Step>,
    ) -> Option<Ruling> {
        use crate::explain::{Check, Step};
        let mode_id = self.shared.graph.mode(self.state.mode).id();
        if !self.shared.runtime(self.state.mode).allows(&call.name) {
            steps.push(Step::new(
                Check::AvailableTools,
                format!("mode `{mode_id}` does not offer `{}`: the call is refused whatever a rule says", call.name),
            ));
            return None;
        }
        steps.push(Step::new(
            Check::AvailableTools,
            format!("mode `{mode_id}` offers `{}`", call.name),
        ));
        if let Some(reason) = self.refusal(&call.name, &call.args) {
            steps.push(Step::new(Check::Arguments, reason.clone()));
            return Some(Ruling::Refused(reason));
        }
        steps.push(Step::new(
            Check::Arguments,
            "they fit the tool's input schema",
        ));
        self.ruling_by_rules(call, steps)
    }

    /// `call`, ruled by [`Session::ruling_of`] before the reply's calls ran, ruled again just
    /// before it runs: the rules read anew, its paths resolved anew. Its arguments are not
    /// checked again: neither they, the mode nor its tools' schemas can have changed since.
    fn ruling_again(&self, call: &ToolCall) -> Option<Ruling> {
        if !self.shared.runtime(self.state.mode).allows(&call.name) {
            return None;
        }
        self.ruling_by_rules(call, &mut Vec::new())
    }

    /// The current mode as the rulings see it: of the graph merged again after the managed
    /// config changed, if it did ([`crate::config::ManagedWatch`]).
    fn managed_mode(&self) -> crate::mode::Mode {
        match self.shared.managed_watch.as_ref().and_then(|w| w.current()) {
            Some(graph) => graph.mode(self.state.mode).clone(),
            None => self.shared.graph.mode(self.state.mode).clone(),
        }
    }

    /// How the mode's rules, its `requireApproval` and the allowances in force handle `call`,
    /// whose arguments were found fit ([`Session::ruling_of`]).
    fn ruling_by_rules(
        &self,
        call: &ToolCall,
        steps: &mut Vec<crate::explain::Step>,
    ) -> Option<Ruling> {
        // The graph merged again after the managed config changed, if it did.
        let now = self.shared.managed_watch.as_ref().and_then(|w| w.current());
        let graph = now.as_deref().unwrap_or(&self.shared.graph);
        let mode = graph.mode(self.state.mode);
        // The paths the mode's rules read, and those the patterns of its allowances read.
        let narrowing = crate::allowance::pattern_rules(self.state.allowances_in(mode.id()));
        let joined;
        let rules = if narrowing.is_empty() {
            mode.rules()
        } else {
            let mut all = mode.rules().as_slice().to_vec();
            all.extend(narrowing);
            joined = crate::rules::Rules::new(all);
            &joined
        };
        // Where the tool itself takes each path (`write_plan`'s bare name, `list_files`'s
        // default), so the rules match the path it opens.
        let paths = match self.shared.tools.get(&call.name) {
            Some(tool) => {
                let ctx =
                    ToolContext::new(&self.shared.workspace, &self.shared.plans_dir, mode.id());
                crate::rules::resolve_paths_for(rules, call, tool.as_ref(), &ctx)
            }
            None => crate::rules::resolve_paths(rules, call, &self.shared.workspace),
        };
        // Where the paths it writes lie, when an approved plan's files bind the mode (the I/O
        // the pure binding needs).
        let written = self
            .state
            .plan_grant_in(mode.id())
            .and_then(|_| self.written_by(call, mode.id()));
        let ruling = self
            .state
            .ruling(graph, call, &paths, written.as_ref(), steps);
        // An allowance covers the tool it was given for: one of another origin (another MCP
        // server that reuses the name) does not stand in for the user.
        use crate::explain::{Check, Step};
        Some(match ruling {
            // `ask_user` asks the user already: `requireApproval` never makes it wait first.
            Ruling::Ask(_) if call.name == crate::tool::ASK_USER => {
                steps.push(Step::new(
                    Check::Tool,
                    "`ask_user` asks the user itself: it runs without waiting first",
                ));
                Ruling::Run(None)
            }
            Ruling::Allowed(by) if !by.covers_origin(self.origin_of(&call.name).as_deref()) => {
                steps.push(Step::new(
                    Check::Allowance,
                    format!(
                        "allowance {} was given for a tool of another origin: it does not stand in, the call waits",
                        by.id
                    ),
                ));
                Ruling::Ask(None)
            }
            other => other,
        })
    }

    /// Where the paths `call` writes lie, resolved as the rules resolve paths: `None` for a
    /// tool that writes nothing (read-only, or one of the controller's own: `submit_plan`,
    /// `ask_user`, the task tools, `subagent`, whose child's writes are bound on their own),
    /// else each argument its tool names as a path it writes
    /// ([`crate::tool::Tool::written_path_args`]); a tool the registry lacks writes, at no
    /// located path.
    fn written_by(&self, call: &ToolCall, mode_id: &str) -> Option<crate::machine::scope::Written> {
        let name = call.name.as_str();
        if name == SUBMIT_PLAN
            || name == crate::tool::ASK_USER
            || self.shared.task_tools.contains(&name)
            || self.shared.runs_subagent(name)
        {
            return None;
        }
        let Some(tool) = self.shared.tools.get(&call.name) else {
            return Some(Vec::new());
        };
        if tool.access() != crate::tool::ToolAccess::Writes {
            return None;
        }
        let ctx = ToolContext::new(&self.shared.workspace, &self.shared.plans_dir, mode_id);
        Some(crate::rules::resolve_written(call, tool.as_ref(), &ctx))
    }

    /// Where the path arguments of `call`, which waits for approval, lead in the workspace, as
    /// the current mode's rules resolve them ([`crate::rules::locate_path_args`]): those that
    /// lead elsewhere than they read (or are in doubt), which the approver is shown; a call
    /// whose paths lead where they read keeps none.
    fn locations_of(&self, call: &ToolCall) -> Vec<crate::rules::ResolvedLocation> {
        let mut located = self.located(call);
        located.retain(crate::rules::ResolvedLocation::differs);
        located
    }

    /// Where each path argument of `call` leads now, as the current mode's rules resolve it
    /// ([`crate::rules::locate_path_args`]).
    fn located(&self, call: &ToolCall) -> Vec<crate::rules::ResolvedLocation> {
        let mode = self.shared.graph.mode(self.state.mode);
        let ctx = ToolContext::new(&self.shared.workspace, &self.shared.plans_dir, mode.id());
        let tool = self.shared.tools.get(&call.name);
        crate::rules::locate_path_args(mode.rules(), call, tool.map(|t| &**t), &ctx)
    }

    /// Why `call`, approved where `shown` said its paths lead ([`Session::locations_of`] when it
    /// began to wait), must not run now, if its paths lead elsewhere
    /// ([`crate::rules::moved_since_shown`]).
    fn moved_since_shown(
        &self,
        call: &ToolCall,
        shown: &[crate::rules::ResolvedLocation],
    ) -> Option<String> {
        crate::rules::moved_since_shown(shown, &self.located(call))
    }

    /// What runs calls of tool `name` when not this process ([`crate::tool::Tool::origin`]).
    pub(crate) fn origin_of(&self, name: &str) -> Option<String> {
        self.shared.tools.get(name).and_then(|tool| tool.origin())
    }

    /// Why the arguments of a call of `name` are refused before it runs or waits (the rules of
    /// [`crate::tool::args`], then the tool's input schema: [`crate::tool::input`]), if they are.
    fn refusal(&self, name: &str, args: &serde_json::Value) -> Option<String> {
        crate::tool::args::refusal(args).or_else(|| {
            let runtime = self.shared.runtime(self.state.mode);
            let spec = runtime.specs.iter().find(|s| &*s.name == name)?;
            crate::tool::input::mismatch(args, &spec.input_schema)
        })
    }

    /// Runs tool `name` with `args` in the current mode; `None` when the run was cancelled
    /// while it ran (the call then has no result: [`Session::abort_run`] gives it one).
    /// Hands a suspended call's validated answer to its tool's `resume` step; `None` when the
    /// run was cancelled meanwhile.
    async fn resume_tool(
        &self,
        run_id: &Arc<str>,
        id: &str,
        name: &str,
        args: &serde_json::Value,
        answer: &serde_json::Value,
    ) -> Option<ToolOutput> {
        let shared = &self.shared;
        let Some(tool) = shared.tools.get(name) else {
            return Some(ToolOutput::error(format!(
                "Tool `{name}` has no implementation here, so the user's answer could not be handed to it."
            )));
        };
        let pending_plans = StorePending(shared.store.as_ref());
        let token = self.run_token.clone();
        let ctx = ToolContext {
            workspace: &shared.workspace,
            plans_dir: &shared.plans_dir,
            mode_id: shared.graph.mode(self.state.mode).id(),
            session_id: &self.id,
            run_id,
            tool_call_id: id,
            cancel: token.clone(),
            extensions: &self.extensions,
            pending_plans: &pending_plans,
            protected_paths: &shared.protected_paths,
        };
        let span = tracing::info_span!("tool_resume", tool_call_id = %id, tool_name = %name);
        let resume = tool.resume(args, answer, &ctx).instrument(span);
        token.run_until_cancelled(resume).await
    }

    /// A call of the built-in task tool `name` with `args`, applied to the session's task list
    /// by the core's rules ([`crate::machine::tasks::apply`]): the result for the model, and the
    /// new list when the call changed it. A refused call changes nothing.
    fn task_outcome(
        &self,
        name: &str,
        args: &serde_json::Value,
    ) -> (ToolOutput, Option<Vec<crate::tool::tasks::Task>>) {
        match crate::machine::tasks::apply(name, args, &self.state.tasks) {
            Ok(outcome) => (ToolOutput::ok(outcome.result), outcome.tasks),
            Err(why) => (
                ToolOutput::error(format!(
                    "{name} refused: {why}. The task list is unchanged."
                )),
                None,
            ),
        }
    }

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

    /// Suspends the run on the calls `asked` of the assistant message at `at`, which wait
    /// for approval: each gets its decision id, `argsSha256` and a `tool_suspended` event, and
    /// the suspension is saved. If it cannot be saved, each gets an error result and the run
    /// fails, as for a plan ([`Session::suspend`]).
    async fn suspend_tool_calls(
        &mut self,
        run_id: Arc<str>,
        at: usize,
        asked: Vec<Asked>,
        suspended: Vec<(usize, Box<ToolSuspension>)>,
        children: Vec<(usize, WaitingChild)>,
    ) -> Result<RunOutcome, SessionError> {
        let mut all = waiting_indexes(&asked, &suspended);
        all.extend(children.iter().map(|(i, _)| *i));
        let answering: Vec<usize> = suspended.iter().map(|(i, _)| *i).collect();
        let suspend = Suspend::ToolCalls {
            run_id: run_id.clone(),
            at,
            asked,
            suspended,
            children,
        };
        match self.handle(Input::Suspend(suspend)).await {
            Ok(next) => {
                // The calls a reviewer saw: its verdict is the decision on each if the rules
                // say so (`reviewerMay = "decide"`), else the call waits with it shown.
                let reviewed: Vec<String> = self
                    .state
                    .pending
                    .iter()
                    .filter_map(|p| match p {
                        PendingDecision::ToolCall(c) if c.payload.review.is_some() => {
                            Some(c.payload.decision_id.clone())
                        }
                        _ => None,
                    })
                    .collect();
                let next = if reviewed.is_empty() {
                    next
                } else {
                    self.apply_reviews(reviewed, next).await?
                };
                self.carry_on(next).await
            }
            Err(err) => {
                for index in all {
                    let Some(call) = self.state.tool_call(at, index) else {
                        continue;
                    };
                    let (id, name) = (call.id.clone(), call.name.clone());
                    let output = ToolOutput::error(if answering.contains(&index) {
                        format!(
                            "Not answered: the tool call could not be saved to wait for the user's answer: {err}"
                        )
                    } else {
                        format!(
                            "Not executed: the tool call could not be saved for approval: {err}"
                        )
                    });
                    self.tool_result(&run_id, id, name, output, None).await?;
                }
                Err(self.fail_unsaved(run_id, err).await)
            }
        }
    }

    /// Suspends the run on `submit_plan` and persists the pending decision. If it cannot be
    /// saved, the plan is refused to the model and the run fails: a suspension that a restart
    /// would lose is never reported as pending.
    async fn suspend(
        &mut self,
        run_id: Arc<str>,
        tool_call_id: String,
        submission: PlanSubmission,
        hook: Option<HookRecord>,
        review: Option<Box<crate::review::ReviewRecord>>,
    ) -> Result<RunOutcome, SessionError> {
        let reviewed = review.is_some();
        let input = match hook {
            // A hook denied the plan: suspended on and rejected with its reason as the
            // feedback, through the one decision path, before anyone is asked, in one change
            // saved once: a future dropped at the save leaves the run as it was or the plan
            // rejected, never the plan waiting with the deny lost. An allow is no objection:
            // the plan waits for a person like any other.
            Some(hook) if hook.decision == HookDecision::Deny => Input::HookDeniedPlan {
                run_id: run_id.clone(),
                tool_call_id: tool_call_id.clone(),
                submission,
                hook: Box::new(hook),
                lacking: self.lacking_tools(),
            },
            _ => Input::Suspend(Suspend::Plan {
                run_id: run_id.clone(),
                tool_call_id: tool_call_id.clone(),
                submission,
                review,
            }),
        };
        match self.handle(input).await {
            // A reviewer saw it: its verdict is the decision if the rules say so
            // (`reviewerMay = "decide"`), else the plan waits with it shown.
            Ok(next) if reviewed => {
                let ids = self
                    .state
                    .pending
                    .iter()
                    .map(|p| p.decision_id().to_owned())
                    .collect();
                let next = self.apply_reviews(ids, next).await?;
                self.carry_on(next).await
            }
            Ok(next) => self.carry_on(next).await,
            Err(err) => {
                let output =
                    ToolOutput::error(format!("The plan could not be saved for review: {err}"));
                self.tool_result(&run_id, tool_call_id, SUBMIT_PLAN.to_owned(), output, None)
                    .await?;
                Err(self.fail_unsaved(run_id, err).await)
            }
        }
    }

    /// Fails the run whose suspension could not be saved (`err`), and returns the error to
    /// report: the failure's own save error if that fails too.
    async fn fail_unsaved(&mut self, run_id: Arc<str>, err: SessionError) -> SessionError {
        let end = Input::End {
            run_id,
            error: Some(err.to_string()),
        };
        self.handle(end).await.err().unwrap_or(err)
    }
}

/// The indexes of the calls of a reply that an abort answers as not approved: those that wait
/// for approval, and the `subagent` calls whose children wait.
fn held_indexes(waiting: &[Asked], children: &[(usize, WaitingChild)]) -> Vec<usize> {
    let mut held: Vec<usize> = waiting.iter().map(|a| a.index).collect();
    held.extend(children.iter().map(|(i, _)| *i));
    held
}

/// The indexes of the calls of a reply that wait, for approval or for an answer, in order.
fn waiting_indexes(waiting: &[Asked], suspended: &[(usize, Box<ToolSuspension>)]) -> Vec<usize> {
    let mut all: Vec<usize> = waiting.iter().map(|a| a.index).collect();
    all.extend(suspended.iter().map(|(i, _)| *i));
    all.sort_unstable();
    all
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
        // nothing of it to protect.
        let listing = store
            .list_pending_decisions()
            .await
            .map_err(|e| e.to_string())?;
        Ok(listing
            .pending
            .into_iter()
            .filter(|p| p.kind == crate::store::PendingKind::Plan)
            .map(|p| p.plan_path)
            .collect())
    }
}
