//! Deciding what a run suspends on until it ends: with the decision flags, else the prompt.

use agent_controller::display::{neutralize, neutralize_line};
use agent_controller::model::ModelSpec;
use agent_controller::quorum::Via;
use agent_controller::store::display_spec;
use agent_controller::terminal::Style;
use agent_controller::{
    Decision, PendingDecision, RunOutcome, Session, SessionError, event::RunState,
    session::DecisionAction,
};

use crate::cli::args::DecisionArgs;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::prompt::{Prompt, Reply, waiting};
use crate::cli::switch::describe;

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
    /// The model `--model` named (or the stored session ran with): the commands a hint names
    /// name it too.
    pub(crate) model: Option<&'a ModelSpec>,
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
        while outcome.state() == RunState::Suspended {
            if waiting(session).is_empty() && !session.pending().is_empty() {
                // Every call is decided, and an answer goes to a tool this CLI does not have.
                return Ok(self.held(session));
            }
            if self.detach {
                return Ok(self.leave(session));
            }
            let waiting = waiting(session);
            outcome = match self.decide_each(session, &waiting).await? {
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
        let raced = raced(
            session
                .pending()
                .iter()
                .find(|p| p.decision_id() == decision_id),
        );
        let next = tokio::select! {
            next = session.decide(decision_id, decision) => Some(next),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(next) = next else {
            return Ok(Err(interrupted(session).await));
        };
        next.map(Ok).map_err(|e| match self.store {
            Some(store) => lost_race(e, store, raced),
            None => e.into(),
        })
    }

    /// Decides `pending` (a plan, tool calls waiting for approval, or calls their tool
    /// suspended, such as questions) one by one, in the model's order: with the flags (a plan's
    /// always; a tool call's only when `flags_decide_tool_calls`; a suspended call's when an
    /// answer flag is given), else at the prompt. Returns the outcome after the last
    /// decision (the run carries on once all of its waiting calls are decided), or `Err(exit)`
    /// when one was left undecided (pending with a store, exit 4; without one the run is
    /// aborted, exit 3) or Ctrl-C interrupted the run.
    pub(crate) async fn decide_each(
        &mut self,
        session: &mut Session,
        pending: &[PendingDecision],
    ) -> Result<Result<RunOutcome, Exit>, Failure> {
        let out_style = Style::for_stdout();
        let mut outcome = None;
        for (at, waiting) in pending.iter().enumerate() {
            // Decided already by an "always allow" on an earlier call of its tool: only in a
            // record saved by an earlier version (an allowance now approves the call it is
            // given at, and each other call is asked about).
            if let Some(allowance) = allowed_by(session, waiting.decision_id()) {
                note!(
                    "tool call {} of {} ({}, decision {}) runs: always allowed by decision {}",
                    at + 1,
                    pending.len(),
                    neutralize_line(waiting.tool_name()),
                    neutralize_line(waiting.decision_id()),
                    neutralize_line(&allowance)
                );
                continue;
            }
            let flags_decide = waiting.as_plan().is_some()
                || self.flags_decide_tool_calls
                || (waiting.as_suspension().is_some() && self.flags.answers());
            let fixed = if flags_decide {
                self.flags.check(waiting)?;
                self.flags.fixed(waiting)
            } else {
                None
            };
            // The channel, for the audit record: a verdict flag (`decide --approve`, `run
            // --approve`), else the terminal's prompt.
            let decision = match fixed {
                Some(decision) => decision.via(Via::Decide),
                None => {
                    let Some(prompt) = self.prompt.as_deref_mut() else {
                        return Ok(Err(self.leave(session)));
                    };
                    // A question (or another tool's suspension) is asked too: left unanswered it
                    // stays pending with a store, and without one the run ends and the model is
                    // told the user did not answer.
                    // The prompt starts from `--model-for-next`, so that `m` alone clears it.
                    prompt.model_for_next = self.flags.model_for_next.clone();
                    let mut reply = prompt.ask(session, waiting, at + 1, pending.len()).await;
                    // `a` on a call a mode's `ask` rule made wait is refused by the library (an
                    // allowance never covers what a rule asks about): say why and ask again,
                    // rather than end the run and lose the call.
                    while let Some(Reply::Decide(decision)) = &reply
                        && decision.always_allow
                        && let Some(refused) = waiting
                            .as_tool_call()
                            .and_then(|c| c.payload().allowance_refusal())
                    {
                        note!("not taken: {}", neutralize_line(&refused));
                        reply = prompt.ask(session, waiting, at + 1, pending.len()).await;
                    }
                    match reply {
                        Some(Reply::Decide(decision)) => {
                            self.flags.signed(decision).via(Via::Terminal)
                        }
                        Some(Reply::Switch(mode)) => {
                            return self.switch(session, &mode).await.map(Err);
                        }
                        None if self.store.is_some() => {
                            return Ok(Err(self.leave(session)));
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
            match self.apply(session, waiting.decision_id(), decision).await? {
                Ok(next) => outcome = Some(next),
                Err(exit) => return Ok(Err(exit)),
            }
        }
        match outcome {
            Some(next) => Ok(Ok(next)),
            // Nothing waited (another process decided them): say what is left.
            None => Ok(Err(self.leave(session))),
        }
    }

    /// `s MODE` at the prompt: switches `session` to `mode` by hand
    /// ([`Session::switch_mode`]), so what waits counts as not approved and the model is told
    /// when the session runs next; says so and ends not approved (exit 3), in the new mode.
    async fn switch(&mut self, session: &mut Session, mode: &str) -> Result<Exit, Failure> {
        let from = session.mode().id().to_owned();
        let left: Vec<String> = waiting(session).iter().map(describe).collect();
        let raced = raced(session.pending().first());
        session
            .switch_mode(mode)
            .await
            .map_err(|e| match self.store {
                Some(store) => lost_race(e, store, raced),
                None => e.into(),
            })?;
        note!(
            "mode {} -> {} (switched by hand at the prompt)",
            neutralize_line(&from),
            neutralize_line(session.mode().id())
        );
        for what in left {
            note!("  {what} counts as not approved; the model is told when the session runs next");
        }
        finish(session, self.json, &Style::for_stdout());
        Ok(Exit::NotApproved)
    }

    /// Says that the answers are recorded and that the host which has their tools carries the
    /// run on: every call of the reply is decided, and an answered one is of a tool this CLI
    /// does not have (a tool of the user's own). Exit 4: the run waits for that host.
    fn held(&self, session: &Session) -> Exit {
        let store = self.store.unwrap_or("STORE");
        for pending in session.pending() {
            if let Some(suspended) = pending.as_suspension()
                && suspended.answer().is_some()
            {
                note!(
                    "answer recorded for decision {} ({}): this CLI has no tool `{}`, so the host which has it carries the run on (the library's Session::continue_run, after restoring session {} from {})",
                    neutralize_line(suspended.decision_id()),
                    neutralize_line(suspended.tool_name()),
                    neutralize_line(suspended.tool_name()),
                    session.id(),
                    neutralize_line(&display_spec(store)),
                );
            }
        }
        Exit::Pending
    }

    /// Says what waits (the plan, or the tool calls) and how to decide it later; it stays
    /// pending in the store.
    pub(crate) fn leave(&self, session: &Session) -> Exit {
        let store = self.store.unwrap_or("STORE");
        let waiting = waiting(session);
        let run_id = waiting
            .first()
            .map_or_else(String::new, |c| neutralize_line(c.run_id()).into_owned());
        let plan = waiting.first().and_then(PendingDecision::as_plan);
        // Only calls their tool suspended (questions) wait: they are answered, not approved.
        let questions = !waiting.is_empty() && waiting.iter().all(|w| w.as_suspension().is_some());
        if !self.json {
            match plan {
                Some(plan) => say!(
                    "suspended: session {} run {run_id} decision {}",
                    session.id(),
                    neutralize_line(plan.decision_id())
                ),
                None => {
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
                    let wait = if questions {
                        "wait for an answer"
                    } else {
                        "tool calls wait for approval"
                    };
                    say!(
                        "suspended: session {} run {run_id} {wait}: {}",
                        session.id(),
                        listed.join(", ")
                    );
                }
            }
        }
        // Under a quorum: who has approved so far, and how many approvals it needs.
        for w in &waiting {
            let terms = w.terms();
            if let Some(needed) = terms.approvers_needed {
                let by: Vec<&str> = terms.approvals.iter().map(|a| a.by.as_str()).collect();
                note!(
                    "decision {} needs {needed} approvals by distinct people; {} so far{}",
                    neutralize_line(w.decision_id()),
                    by.len(),
                    if by.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", neutralize_line(&by.join(", ")))
                    }
                );
            }
        }
        let (what, flags) = match (plan, waiting.len()) {
            (None, 1) if questions => (
                "the question stays pending; answer it later",
                "--answer TEXT | --answer-json JSON | --reject",
            ),
            (None, _) if questions => (
                "the questions stay pending; answer each later",
                "--answer TEXT | --answer-json JSON | --reject",
            ),
            (Some(_), _) => (
                "the plan stays pending; decide later",
                "--approve [--to MODE] | --reject",
            ),
            (None, 1) => (
                "the tool call stays pending; decide it later",
                "--approve [--always] | --reject",
            ),
            (None, _) => (
                "the tool calls stay pending; decide each later",
                "--approve [--always] | --reject",
            ),
        };
        let id = match waiting.as_slice() {
            [one] => neutralize_line(one.decision_id()).into_owned(),
            _ => "ID".to_owned(),
        };
        let model = self.model.map_or(String::new(), |m| {
            format!(" --model {}", neutralize_line(&m.to_string()))
        });
        note!(
            "{what} with: agent-controller decide --store {} {}{model} --decision {id} ({flags}) [--feedback TEXT]",
            neutralize_line(&display_spec(store)),
            session.id()
        );
        Exit::Pending
    }
}

/// The decision id of the "always allow" that decided tool call `decision_id` with another call
/// of its reply ([`agent_controller::event::DecidedRecord::allowed_by`]), while the run still waits or
/// once it carried on; `None` when no allowance decided it.
pub(crate) fn allowed_by(session: &Session, decision_id: &str) -> Option<String> {
    let waiting = session
        .pending()
        .iter()
        .filter(|c| c.decision_id() == decision_id)
        .filter_map(PendingDecision::decision);
    let settled = session
        .decision_history()
        .iter()
        .filter(|d| d.decision_id == decision_id);
    waiting.chain(settled).find_map(|d| d.allowed_by.clone())
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

/// What another writer did to `pending`, the decision this process meant to take, in words
/// of its kind: a plan is decided or revised, a tool call decided, a question answered or
/// declined.
fn raced(pending: Option<&agent_controller::PendingDecision>) -> &'static str {
    use agent_controller::PendingDecision;
    match pending {
        Some(PendingDecision::ToolCall(_)) => "the tool call was decided by someone else",
        Some(PendingDecision::Suspension(s))
            if s.kind() == agent_controller::event::SuspensionKind::Question =>
        {
            "the question was answered or declined by someone else"
        }
        Some(PendingDecision::Suspension(_)) => {
            "the suspended call was answered or declined by someone else"
        }
        _ => "the plan was decided or revised by someone else",
    }
}

/// A decision that lost to another writer (a decision or revision saved after this process
/// loaded the session) says so and what to do; nothing was decided. `what`: what the other
/// writer did, in words of the decision's kind ([`raced`]).
pub(crate) fn lost_race(error: SessionError, store: &str, what: &str) -> Failure {
    if !error.is_conflict() {
        return error.into();
    }
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
