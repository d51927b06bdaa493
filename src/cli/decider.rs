//! Deciding what a run suspends on until it ends: with the decision flags, else the prompt.

use agent_controller::display::{neutralize, neutralize_line};
use agent_controller::store::display_spec;
use agent_controller::terminal::Style;
use agent_controller::{
    Decision, DecisionAction, PendingToolCall, RunOutcome, Session, SessionError, SuspendPayload,
};

use crate::cli::args::DecisionArgs;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::prompt::Prompt;

/// Decides suspended plans until the run ends: with the decision flags, else with the prompt.
pub(crate) struct Decider<'a> {
    pub(crate) flags: &'a DecisionArgs,
    pub(crate) prompt: Option<&'a mut Prompt>,
    /// Whether the verdict flags decide tool calls too (`decide`, which names the call), or only
    /// plans (`run`, `continue`: the user never saw the calls the run goes on to make, so each is
    /// asked about at the prompt, or left pending).
    pub(crate) flags_decide_tool_calls: bool,
    pub(crate) json: bool,
    /// The store spec, when the session is stored.
    pub(crate) store: Option<&'a str>,
    /// Stop at the first suspension (the plan stays pending in the store).
    pub(crate) detach: bool,
    /// The last decision taken in this process.
    pub(crate) last: Option<DecisionAction>,
}

impl Decider<'_> {
    /// Answers suspended plans and tool calls waiting for approval until the run ends and tells
    /// how it ended. What waits stays pending (exit 4) when detaching, when there is neither a
    /// prompt nor a flag decision (a revision after `decide`), or when the prompt is dismissed
    /// (or `q` at a tool call) with a store; a prompt dismissed without a store aborts the run,
    /// not approved (exit 3). Ctrl-C while the model works stops the run.
    pub(crate) async fn until_done(
        &mut self,
        session: &mut Session,
        mut outcome: RunOutcome,
    ) -> Outcome {
        let out_style = Style::for_stdout();
        loop {
            let next = match &outcome {
                RunOutcome::Suspended {
                    run_id, payload, ..
                } => {
                    if self.detach {
                        return Ok(self.leave_pending(session, run_id, payload));
                    }
                    self.flags.check_pinned(payload)?;
                    let decision = match self.flags.fixed() {
                        Some(decision) => decision,
                        None => {
                            let Some(prompt) = self.prompt.as_deref_mut() else {
                                return Ok(self.leave_pending(session, run_id, payload));
                            };
                            match prompt.ask(session, payload).await {
                                Some(decision) => self.flags.signed(decision),
                                None if self.store.is_some() => {
                                    return Ok(self.leave_pending(session, run_id, payload));
                                }
                                None => {
                                    session.abort().await?;
                                    finish(session, self.json, &out_style);
                                    return Ok(Exit::NotApproved);
                                }
                            }
                        }
                    };
                    self.last = Some(decision.action);
                    let decision_id = payload.decision_id.clone();
                    self.apply(session, &decision_id, decision).await?
                }
                RunOutcome::ToolCallsSuspended { .. } => {
                    if self.detach {
                        return Ok(self.leave_tool_calls_pending(session));
                    }
                    let waiting = waiting_tool_calls(session);
                    self.decide_tool_calls(session, &waiting).await?
                }
                _ => break,
            };
            outcome = match next {
                Ok(next) => next,
                Err(exit) => return Ok(exit),
            };
        }
        finish(session, self.json, &out_style);
        Ok(match outcome {
            RunOutcome::Failed { error, .. } => {
                note!("error: {}", neutralize(error.message()));
                Exit::RuntimeError
            }
            _ if self.last == Some(DecisionAction::Rejected) => Exit::NotApproved,
            _ => Exit::Done,
        })
    }

    /// Applies one decision and returns the run's next outcome, or `Err(exit)` when Ctrl-C
    /// interrupted the run it carried on.
    pub(crate) async fn apply(
        &mut self,
        session: &mut Session,
        decision_id: &str,
        decision: Decision,
    ) -> Result<Result<RunOutcome, Exit>, Failure> {
        let tool_call = session
            .pending_tool_calls()
            .iter()
            .any(|c| c.decision_id() == decision_id);
        let next = tokio::select! {
            next = session.decide(decision_id, decision) => Some(next),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(next) = next else {
            return Ok(Err(interrupted(session).await));
        };
        next.map(Ok).map_err(|e| match self.store {
            Some(store) => lost_race(e, store, tool_call),
            None => e.into(),
        })
    }

    /// Decides `calls` (tool calls waiting for approval) one by one, in the model's order: with
    /// the flags, else at the prompt. Returns the outcome after the last decision (the run
    /// carries on once all of its waiting calls are decided), or `Err(exit)` when a call was
    /// left undecided (pending with a store, exit 4; without one the run is aborted, exit 3) or
    /// Ctrl-C interrupted the run.
    pub(crate) async fn decide_tool_calls(
        &mut self,
        session: &mut Session,
        calls: &[PendingToolCall],
    ) -> Result<Result<RunOutcome, Exit>, Failure> {
        let out_style = Style::for_stdout();
        let mut outcome = None;
        for (at, call) in calls.iter().enumerate() {
            // An "always allow" on an earlier call of this tool decided it: not asked again.
            if let Some(allowance) = allowed_by(session, call.decision_id()) {
                note!(
                    "tool call {} of {} ({}, decision {}) runs: always allowed by decision {}",
                    at + 1,
                    calls.len(),
                    neutralize_line(call.tool_name()),
                    neutralize_line(call.decision_id()),
                    neutralize_line(&allowance)
                );
                continue;
            }
            let fixed = if self.flags_decide_tool_calls {
                self.flags.fixed_for_tool_call(call)?
            } else {
                None
            };
            let decision = match fixed {
                Some(decision) => decision,
                None => {
                    let Some(prompt) = self.prompt.as_deref_mut() else {
                        return Ok(Err(self.leave_tool_calls_pending(session)));
                    };
                    match prompt
                        .ask_tool_call(session, call, at + 1, calls.len())
                        .await
                    {
                        Some(decision) => self.flags.signed(decision),
                        None if self.store.is_some() => {
                            return Ok(Err(self.leave_tool_calls_pending(session)));
                        }
                        None => {
                            session.abort().await?;
                            finish(session, self.json, &out_style);
                            return Ok(Err(Exit::NotApproved));
                        }
                    }
                }
            };
            self.last = Some(decision.action);
            match self.apply(session, call.decision_id(), decision).await? {
                Ok(next) => outcome = Some(next),
                Err(exit) => return Ok(Err(exit)),
            }
        }
        match outcome {
            Some(next) => Ok(Ok(next)),
            // Nothing waited (another process decided them): say what is left.
            None => Ok(Err(self.leave_tool_calls_pending(session))),
        }
    }

    /// Says how to decide the plan later; it stays pending in the store.
    pub(crate) fn leave_pending(
        &self,
        session: &Session,
        run_id: &str,
        payload: &SuspendPayload,
    ) -> Exit {
        let store = self.store.unwrap_or("STORE");
        let decision = neutralize_line(&payload.decision_id);
        if !self.json {
            say!(
                "suspended: session {} run {} decision {decision}",
                session.id(),
                neutralize_line(run_id),
            );
        }
        note!(
            "the plan stays pending; decide later with: agent-controller decide --store {} {} --decision {decision} (--approve [--to MODE] | --reject) [--feedback TEXT]",
            neutralize_line(&display_spec(store)),
            session.id()
        );
        Exit::Pending
    }

    /// Says which tool calls wait and how to decide them later; they stay pending in the store.
    pub(crate) fn leave_tool_calls_pending(&self, session: &Session) -> Exit {
        let store = self.store.unwrap_or("STORE");
        let waiting = waiting_tool_calls(session);
        let listed: Vec<String> = waiting
            .iter()
            .map(|c| {
                format!(
                    "{} ({})",
                    neutralize_line(c.decision_id()),
                    neutralize_line(c.tool_name())
                )
            })
            .collect();
        let run_id = waiting
            .first()
            .map_or_else(String::new, |c| neutralize_line(c.run_id()).into_owned());
        if !self.json {
            say!(
                "suspended: session {} run {run_id} tool calls wait for approval: {}",
                session.id(),
                listed.join(", ")
            );
        }
        let (what, id) = match waiting.as_slice() {
            [one] => (
                "the tool call stays pending; decide it later",
                neutralize_line(one.decision_id()).into_owned(),
            ),
            _ => (
                "the tool calls stay pending; decide each later",
                "ID".to_owned(),
            ),
        };
        note!(
            "{what} with: agent-controller decide --store {} {} --decision {id} (--approve [--always] | --reject) [--feedback TEXT]",
            neutralize_line(&display_spec(store)),
            session.id()
        );
        Exit::Pending
    }
}

/// The decision id of the "always allow" that decided tool call `decision_id` with another call
/// of its reply ([`agent_controller::DecidedRecord::allowed_by`]), while the run still waits or
/// once it carried on; `None` when no allowance decided it.
pub(crate) fn allowed_by(session: &Session, decision_id: &str) -> Option<String> {
    let waiting = session
        .pending_tool_calls()
        .iter()
        .filter(|c| c.decision_id() == decision_id)
        .filter_map(|c| c.decision());
    let settled = session
        .decision_history()
        .iter()
        .filter(|d| d.decision_id == decision_id);
    waiting.chain(settled).find_map(|d| d.allowed_by.clone())
}

/// The tool calls of `session` that wait for approval and are not decided yet, in the model's
/// order.
pub(crate) fn waiting_tool_calls(session: &Session) -> Vec<PendingToolCall> {
    session
        .pending_tool_calls()
        .iter()
        .filter(|c| c.decision().is_none())
        .cloned()
        .collect()
}

/// Ends what a Ctrl-C outside the prompt interrupted and says where it left the session. The
/// run's future was dropped, so [`Session::settle`] records the run as aborted (a result for
/// each open tool call, `agent_end`) and saves it: a stored session is left consistent, not as
/// it was before the run.
pub(crate) async fn interrupted(session: &mut Session) -> Exit {
    if let Err(error) = session.settle().await {
        note!("\ninterrupted: the aborted run could not be saved: {error}");
    }
    note!("\ninterrupted: the mode stays `{}`", session.mode().id());
    Exit::Interrupted
}

/// A decision that lost to another writer (a decision or revision saved after this process
/// loaded the session) says so and what to do; nothing was decided.
/// `tool_call` tells which kind of decision it was: a plan's, or a tool call's.
pub(crate) fn lost_race(error: SessionError, store: &str, tool_call: bool) -> Failure {
    if !error.is_conflict() {
        return error.into();
    }
    let what = if tool_call {
        "the tool call was decided by someone else"
    } else {
        "the plan was decided or revised by someone else"
    };
    Failure::refused(format!(
        "{error}: {what} after it was loaded here, so this decision was not applied; see what is pending now with: agent-controller pending --store {}",
        neutralize_line(&display_spec(store))
    ))
}

/// The closing line: the mode the session ends in.
pub(crate) fn finish(session: &Session, json: bool, style: &Style) {
    if !json {
        if style.is_colored() {
            say!("mode: {}", style.mode_label(session.mode()));
        } else {
            say!("mode: {}", session.mode().id());
        }
    }
}
