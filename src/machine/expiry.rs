//! Deadlines: when what waits for a decision expires, and what its expiry answers. Written once
//! here, and applied by a live session ([`crate::Session::expire_if_due`]) and to a stored record
//! by a host without a controller ([`crate::deadline::expire_due`]) alike.
//!
//! A plan past its deadline expires alone: its `submit_plan` call gets
//! [`crate::deadline::expired_result`] and an `expired` audit record. Tool calls waiting for
//! approval expire as a reply: once one undecided call is past its deadline, every call of the
//! reply is answered, an undecided one as expired, one approved while others waited as never run
//! ([`crate::deadline::APPROVED_NOT_RUN_RESULT`]), one rejected with its rejection. Either way no
//! model call follows, and the run ends as what expired says (`onTimeout`, fixed in its payload
//! when it was suspended): `completed` for `reject`, `aborted` for `abort`. A deadline never
//! approves.

use std::sync::Arc;

use crate::event::{
    DecidedRecord, DecisionOutcome, Event, RunState, SuspendPayload, SuspensionKind,
    ToolCallPayload, ToolSuspendPayload, rfc3339,
};
use crate::exchange::Message;
use crate::exchange::SUBMIT_PLAN;
use crate::mode::timeout::OnTimeout;

use super::pending::PendingDecision;

/// A deadline (milliseconds since the Unix epoch) as RFC 3339 in UTC, to the second.
pub fn deadline_text(deadline_at_ms: u64) -> String {
    rfc3339(deadline_at_ms / 1000)
}

/// The `submit_plan` result the model gets for a plan that expired: not approved, why, and that
/// it stays in its mode (`Not approved: no decision was taken within 24h (approvalTimeout); the
/// plan expired at 2026-12-01T18:30:00Z. Stay in this mode.`).
pub fn expired_result(payload: &SuspendPayload) -> String {
    let at = payload.terms.deadline_at_ms.map_or(String::new(), |ms| {
        format!("; the plan expired at {}", deadline_text(ms))
    });
    let start = no_decision(payload.terms.approval_timeout.as_deref());
    match payload.terms.on_timeout {
        OnTimeout::Reject => {
            format!("{start}{at}. Stay in this mode; the user may ask for the plan again.")
        }
        OnTimeout::Abort => format!(
            "{start}{at}, and the run was aborted (onTimeout = \"abort\"). Stay in this mode; the user may ask for the plan again."
        ),
    }
}

/// How an expiry's result starts: not approved, and within what (`Not approved: no decision was
/// taken within 24h (approvalTimeout)`), for a plan and a tool call alike.
fn no_decision(approval_timeout: Option<&str>) -> String {
    let within =
        approval_timeout.map_or(String::new(), |t| format!(" within {t} (approvalTimeout)"));
    format!("Not approved: no decision was taken{within}")
}

/// The result the model gets for a tool call that waited for approval and expired undecided:
/// not approved, why, and that it did not run (`Not approved: no decision was taken within 24h
/// (approvalTimeout); this tool call expired at 2026-12-01T18:30:00Z and was not executed.`).
pub fn expired_tool_result(payload: &ToolCallPayload) -> String {
    let at = payload.terms.deadline_at_ms.map_or(String::new(), |ms| {
        format!(" expired at {} and", deadline_text(ms))
    });
    let aborted = match payload.terms.on_timeout {
        OnTimeout::Reject => "",
        OnTimeout::Abort => " The run was aborted (onTimeout = \"abort\").",
    };
    format!(
        "{}; this tool call{at} was not executed.{aborted}",
        no_decision(payload.terms.approval_timeout.as_deref())
    )
}

/// The result of a tool call that was approved while others of its reply waited, when those
/// expired: the run ended before it ran, so it never ran.
pub const APPROVED_NOT_RUN_RESULT: &str = "Not executed: approved, but other tool calls of this reply expired undecided (approvalTimeout), so the run ended before it ran. Call it again if it is still needed.";

/// What an expired decision came to, for people: `the plan counts as rejected`, `the
/// `write_file` tool call counts as rejected`, and for a call its tool suspended (`kind`), `the
/// question of `ask_user` was not answered` (a question is not rejected: nobody answered it).
/// With `aborted` (`onTimeout = "abort"`) it adds that the run was aborted. `tool_name` is
/// `None` for a plan; the caller makes it safe to show.
///
/// # Examples
/// ```
/// use agent_controller::deadline::expired_outcome;
/// use agent_controller::event::SuspensionKind;
/// assert_eq!(expired_outcome(None, None, false), "the plan counts as rejected");
/// assert_eq!(
///     expired_outcome(Some("ask_user"), Some(SuspensionKind::Question), false),
///     "the question of `ask_user` was not answered"
/// );
/// ```
pub fn expired_outcome(
    tool_name: Option<&str>,
    kind: Option<SuspensionKind>,
    aborted: bool,
) -> String {
    let subject = match (tool_name, kind) {
        (None, _) => "the plan".to_owned(),
        (Some(name), Some(SuspensionKind::Question)) => format!("the question of `{name}`"),
        (Some(name), _) => format!("the `{name}` tool call"),
    };
    let came_to = match (kind.is_some(), aborted) {
        (true, false) => "was not answered",
        (true, true) => "was not answered and its run was aborted (onTimeout = \"abort\")",
        (false, false) => "counts as rejected",
        (false, true) => "counts as not approved and its run was aborted (onTimeout = \"abort\")",
    };
    format!("{subject} {came_to}")
}

/// What waits for a decision, as the expiry reads it: a view of a live session's
/// pending decision or of a stored record's pending entries.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Waiting<'a> {
    /// A plan.
    Plan {
        run_id: &'a str,
        tool_call_id: &'a str,
        payload: &'a SuspendPayload,
    },
    /// A tool call waiting for approval; `decided` is its decision taken while others wait.
    ToolCall {
        run_id: &'a str,
        tool_call_id: &'a str,
        payload: &'a ToolCallPayload,
        decided: Option<&'a DecidedRecord>,
        feedback: Option<&'a str>,
    },
    /// A call its tool suspended, waiting for the user's answer (or answered while others of
    /// its reply wait).
    Suspended {
        run_id: &'a str,
        tool_call_id: &'a str,
        payload: &'a ToolSuspendPayload,
        decided: Option<&'a DecidedRecord>,
        feedback: Option<&'a str>,
    },
}

impl Waiting<'_> {
    /// Whether its deadline has passed at `now_ms` (a tool call decided while others wait no
    /// longer has one).
    fn is_due(&self, now_ms: u64) -> bool {
        let (terms, decided) = match self {
            Waiting::Plan { payload, .. } => (&payload.terms, false),
            Waiting::ToolCall {
                payload, decided, ..
            } => (&payload.terms, decided.is_some()),
            Waiting::Suspended {
                payload, decided, ..
            } => (&payload.terms, decided.is_some()),
        };
        !decided && terms.deadline_at_ms.is_some_and(|at| at <= now_ms)
    }
}

/// What the expiry reads of `pending`.
pub(crate) fn waiting(pending: &PendingDecision) -> Waiting<'_> {
    match pending {
        PendingDecision::ToolCall(c) => Waiting::ToolCall {
            run_id: &c.run_id,
            tool_call_id: &c.tool_call_id,
            payload: &c.payload,
            decided: c.decided.as_ref(),
            feedback: c.feedback(),
        },
        PendingDecision::Plan(p) => Waiting::Plan {
            run_id: &p.run_id,
            tool_call_id: &p.tool_call_id,
            payload: &p.payload,
        },
        PendingDecision::Suspension(s) => Waiting::Suspended {
            run_id: &s.run_id,
            tool_call_id: &s.tool_call_id,
            payload: &s.payload,
            decided: s.decided.as_ref(),
            feedback: s.feedback.as_deref(),
        },
    }
}

/// The answer an expiry gives one call: its result for the model and its audit record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) tool_call_id: String,
    pub(crate) tool_name: String,
    pub(crate) result: String,
    pub(crate) is_error: bool,
    pub(crate) record: DecidedRecord,
}

impl Answer {
    /// The result as the conversation keeps it, and the audit record.
    pub(crate) fn into_parts(self) -> (Message, DecidedRecord) {
        let message = Message::Tool {
            tool_call_id: self.tool_call_id,
            tool_name: self.tool_name,
            content: self.result,
            is_error: self.is_error,
        };
        (message, self.record)
    }
}

/// How the run ends when a deadline with `on_timeout` passes: `completed` for `reject` (as
/// after a rejection without feedback), `aborted` for `abort`.
fn run_end(on_timeout: OnTimeout) -> RunState {
    match on_timeout {
        OnTimeout::Reject => RunState::Completed,
        OnTimeout::Abort => RunState::Aborted,
    }
}

/// What an expiry does: it answers these calls of run `run_id`, in the model's order, and ends
/// the run `ends` (`completed` for `onTimeout = "reject"`, `aborted` for `"abort"`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expiry {
    pub(crate) run_id: String,
    pub(crate) answers: Vec<Answer>,
    pub(crate) ends: RunState,
}

impl Expiry {
    /// The audit records of what expired (not those of calls decided before).
    pub(crate) fn expired(&self) -> Vec<DecidedRecord> {
        self.answers
            .iter()
            .filter(|a| a.record.outcome == Some(DecisionOutcome::Expired))
            .map(|a| a.record.clone())
            .collect()
    }
}

/// The expiry of `waiting` (what a suspended run waits on, in order) at `now_ms`, or `None`
/// when no deadline has passed.
pub(crate) fn expire<'a, I>(waiting: I, now_ms: u64) -> Option<Expiry>
where
    I: IntoIterator<Item = Waiting<'a>>,
    I::IntoIter: Clone,
{
    let waiting = waiting.into_iter();
    let plan_due = waiting
        .clone()
        .any(|w| matches!(w, Waiting::Plan { .. }) && w.is_due(now_ms));
    let calls_due = waiting
        .clone()
        .any(|w| !matches!(w, Waiting::Plan { .. }) && w.is_due(now_ms));
    if plan_due {
        let (run_id, tool_call_id, payload) = waiting.clone().find_map(|w| match w {
            Waiting::Plan {
                run_id,
                tool_call_id,
                payload,
            } => Some((run_id, tool_call_id, payload)),
            Waiting::ToolCall { .. } | Waiting::Suspended { .. } => None,
        })?;
        let answer = Answer {
            tool_call_id: tool_call_id.to_owned(),
            tool_name: SUBMIT_PLAN.to_owned(),
            result: expired_result(payload),
            is_error: false,
            record: plan_record(run_id, tool_call_id, payload),
        };
        return Some(Expiry {
            run_id: run_id.to_owned(),
            answers: vec![answer],
            ends: run_end(payload.terms.on_timeout),
        });
    }
    if !calls_due {
        return None;
    }
    // The calls of one reply share their mode's onTimeout; should they differ (a record
    // written by hand), the one that ends the run harder wins.
    let abort = waiting.clone().any(|w| match w {
        Waiting::ToolCall { payload, .. } => payload.terms.on_timeout == OnTimeout::Abort,
        Waiting::Suspended { payload, .. } => payload.terms.on_timeout == OnTimeout::Abort,
        Waiting::Plan { .. } => false,
    });
    let mut run = None;
    let answers = waiting
        .filter_map(|w| match w {
            Waiting::ToolCall {
                run_id,
                tool_call_id,
                payload,
                decided,
                feedback,
            } => {
                run.get_or_insert(run_id);
                Some(call_answer(
                    run_id,
                    tool_call_id,
                    payload,
                    decided,
                    feedback,
                ))
            }
            Waiting::Suspended {
                run_id,
                tool_call_id,
                payload,
                decided,
                feedback,
            } => {
                run.get_or_insert(run_id);
                Some(suspension_answer(
                    run_id,
                    tool_call_id,
                    payload,
                    decided,
                    feedback,
                ))
            }
            Waiting::Plan { .. } => None,
        })
        .collect();
    Some(Expiry {
        run_id: run?.to_owned(),
        answers,
        ends: run_end(if abort {
            OnTimeout::Abort
        } else {
            OnTimeout::Reject
        }),
    })
}

/// What an expiry answers a call its tool suspended: unanswered, it expired (nothing is made
/// up); answered or declined while another call of its reply waited, the run ends before the
/// answer reaches the tool.
fn suspension_answer(
    run_id: &str,
    tool_call_id: &str,
    payload: &ToolSuspendPayload,
    decided: Option<&DecidedRecord>,
    feedback: Option<&str>,
) -> Answer {
    let (result, record) = match decided {
        None => (
            expired_suspension_result(payload),
            DecidedRecord {
                sha256: Some(payload.payload_sha256.clone()),
                decided_at: payload.terms.deadline_at_ms.map(deadline_text),
                via: Some(crate::quorum::Via::Timeout),
                approvals: payload.terms.approvals.clone(),
                tool_name: Some(payload.tool_name.clone()),
                suspension_kind: Some(payload.kind),
                subagent: payload.subagent.clone(),
                ..DecidedRecord::new(
                    run_id,
                    tool_call_id,
                    &payload.decision_id,
                    DecisionOutcome::Expired,
                )
            },
        ),
        Some(record) if record.outcome == Some(DecisionOutcome::Rejected) => {
            (super::rejection::declined_result(feedback), record.clone())
        }
        Some(record) => (ANSWERED_NOT_RESUMED_RESULT.to_owned(), record.clone()),
    };
    Answer {
        tool_call_id: tool_call_id.to_owned(),
        tool_name: payload.tool_name.clone(),
        result,
        is_error: true,
        record,
    }
}

/// The result of a call its tool suspended when no answer came before its deadline.
pub fn expired_suspension_result(payload: &ToolSuspendPayload) -> String {
    let within = payload
        .terms
        .approval_timeout
        .as_deref()
        .map_or(String::new(), |t| format!(" within {t} (approvalTimeout)"));
    let at = payload.terms.deadline_at_ms.map_or(String::new(), |ms| {
        format!("; it expired at {}", deadline_text(ms))
    });
    let aborted = match payload.terms.on_timeout {
        OnTimeout::Reject => "",
        OnTimeout::Abort => " The run was aborted (onTimeout = \"abort\").",
    };
    format!("Not answered: the user gave no answer{within}{at}; there is no answer.{aborted}")
}

/// The result of a call whose answer came while another call of its reply waited, when that
/// other call expired: the run ended before the answer reached the tool.
pub const ANSWERED_NOT_RESUMED_RESULT: &str = "Not completed: the user answered, but other tool calls of this reply expired undecided (approvalTimeout), so the run ended before the answer reached the tool. Ask again if it is still needed.";

/// The audit record of the expiry of the plan of `payload`: outcome `expired`, `decidedAt` the
/// deadline, nobody as `decidedBy`. The same on every host that applies it.
fn plan_record(run_id: &str, tool_call_id: &str, payload: &SuspendPayload) -> DecidedRecord {
    DecidedRecord {
        sha256: Some(payload.submission.sha256.clone()),
        decided_at: payload.terms.deadline_at_ms.map(deadline_text),
        via: Some(crate::quorum::Via::Timeout),
        approvals: payload.terms.approvals.clone(),
        ..DecidedRecord::new(
            run_id,
            tool_call_id,
            &payload.decision_id,
            DecisionOutcome::Expired,
        )
    }
}

/// What the expiry of its reply's waiting calls answers a tool call: an undecided one expires
/// (outcome `expired`, `decidedAt` its deadline); one approved while the others waited keeps
/// its record but never runs; one rejected gets its rejection.
fn call_answer(
    run_id: &str,
    tool_call_id: &str,
    payload: &ToolCallPayload,
    decided: Option<&DecidedRecord>,
    feedback: Option<&str>,
) -> Answer {
    let (result, record) = match decided {
        None => (
            expired_tool_result(payload),
            DecidedRecord {
                sha256: Some(payload.args_sha256.clone()),
                decided_at: payload.terms.deadline_at_ms.map(deadline_text),
                via: Some(crate::quorum::Via::Timeout),
                approvals: payload.terms.approvals.clone(),
                tool_name: Some(payload.tool_name.clone()),
                rule: payload.rule.clone(),
                subagent: payload.subagent.clone(),
                ..DecidedRecord::new(
                    run_id,
                    tool_call_id,
                    &payload.decision_id,
                    DecisionOutcome::Expired,
                )
            },
        ),
        Some(record) if record.outcome == Some(DecisionOutcome::Approved) => {
            (APPROVED_NOT_RUN_RESULT.to_owned(), record.clone())
        }
        Some(record) => (super::rejection::rejected_result(feedback), record.clone()),
    };
    Answer {
        tool_call_id: tool_call_id.to_owned(),
        tool_name: payload.tool_name.clone(),
        result,
        is_error: true,
        record,
    }
}

impl super::change::Change<'_> {
    /// Applies `expiry` to suspended run `run_id`: every call it answers gets its result and
    /// audit record, and the run ends as the expiry says (`completed`, or `aborted` for
    /// `onTimeout = "abort"`).
    pub(crate) fn apply_expiry(&mut self, run_id: &Arc<str>, expiry: Expiry) {
        self.state.pending.clear();
        // The suspended run resumes to end: its events lie between `agent_start` and `agent_end`.
        let mode_id = self.mode_arc();
        self.emit(Event::AgentStart {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            mode_id,
        });
        for answer in expiry.answers {
            if answer.record.subagent.is_some() {
                // A child's call is not in this conversation: its record is kept, and its
                // child's `subagent` call is answered below.
                self.state.history.push(answer.record);
                continue;
            }
            self.emit(Event::ToolEnd {
                session_id: self.id.clone(),
                run_id: run_id.clone(),
                tool_call_id: answer.tool_call_id.clone(),
                tool_name: answer.tool_name.clone(),
                result: answer.result.clone(),
                is_error: answer.is_error,
                decision: Some(answer.record.clone()),
            });
            let (message, decided) = answer.into_parts();
            self.state.push_message(message);
            self.state.history.push(decided);
        }
        self.end_waiting_children("was ended as the decisions it waited on expired");
        self.close_run(run_id, expiry.ends, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::WaitTerms;
    use crate::plan::PlanSubmission;

    fn plan(deadline_at_ms: Option<u64>) -> SuspendPayload {
        SuspendPayload {
            submission: PlanSubmission {
                path: "plans/a.md".to_owned(),
                title: "A".to_owned(),
                plan: "1. Step.".to_owned(),
                sha256: "aa".to_owned(),
            },
            target_mode_id: "build".into(),
            target_mode_ids: vec!["build".into()],
            decision_id: "decision_1".to_owned(),
            revision: 1,
            previous_sha256: None,
            comments: Vec::new(),
            scope: None,
            plan_scope: Default::default(),
            steps: Vec::new(),
            review: None,
            diff: None,
            terms: an_hour_until(deadline_at_ms),
        }
    }

    /// The terms of a decision whose `approvalTimeout` of an hour ends at `deadline_at_ms`.
    fn an_hour_until(deadline_at_ms: Option<u64>) -> WaitTerms {
        WaitTerms {
            approval_timeout: Some("1h".to_owned()),
            deadline_at_ms,
            ..WaitTerms::default()
        }
    }

    fn call(n: u64, deadline_at_ms: Option<u64>) -> ToolCallPayload {
        ToolCallPayload {
            decision_id: format!("decision_{n}"),
            tool_name: "write_file".to_owned(),
            args: serde_json::json!({}),
            args_sha256: "bb".to_owned(),
            terms: an_hour_until(deadline_at_ms),
            rule: None,
            locations: Vec::new(),
            drift: None,
            subagent: None,
            review: None,
        }
    }

    fn waiting_plan(payload: &SuspendPayload) -> Waiting<'_> {
        Waiting::Plan {
            run_id: "run_1",
            tool_call_id: "c1",
            payload,
        }
    }

    #[test]
    fn on_timeout_says_how_the_run_ends_and_never_approves() {
        let reject = plan(Some(1_000));
        let mut abort = plan(Some(1_000));
        abort.terms.on_timeout = OnTimeout::Abort;
        let ended = |p: &SuspendPayload| expire([waiting_plan(p)], 1_000).expect("due");
        assert_eq!(ended(&reject).ends, RunState::Completed);
        assert_eq!(ended(&abort).ends, RunState::Aborted);
        for expiry in [ended(&reject), ended(&abort)] {
            assert_eq!(
                expiry.answers[0].record.outcome,
                Some(DecisionOutcome::Expired)
            );
        }
        assert!(expired_result(&abort).contains("the run was aborted"));
        assert!(!expired_result(&reject).contains("aborted"));
        // A reply's calls: one that aborts makes the expiry abort the run.
        let calls = [call(1, Some(1_000)), {
            let mut aborting = call(2, Some(1_000));
            aborting.terms.on_timeout = OnTimeout::Abort;
            aborting
        }];
        let waiting = calls.iter().map(|payload| Waiting::ToolCall {
            run_id: "run_1",
            tool_call_id: "c1",
            payload,
            decided: None,
            feedback: None,
        });
        let expiry = expire(waiting, 1_000).expect("due");
        assert_eq!(expiry.ends, RunState::Aborted);
        assert!(
            expiry
                .answers
                .iter()
                .all(|a| a.record.outcome == Some(DecisionOutcome::Expired))
        );
        assert!(
            expiry.answers[1]
                .result
                .ends_with("The run was aborted (onTimeout = \"abort\").")
        );
    }

    #[test]
    fn a_plan_expires_at_its_deadline_not_before() {
        let payload = plan(Some(1_000));
        assert_eq!(expire([waiting_plan(&payload)], 999), None);
        let expiry = expire([waiting_plan(&payload)], 1_000).expect("due");
        assert_eq!(expiry.run_id, "run_1");
        let [answer] = expiry.answers.as_slice() else {
            panic!("one answer: {expiry:?}");
        };
        assert_eq!(answer.tool_name, SUBMIT_PLAN);
        assert!(!answer.is_error);
        assert_eq!(answer.result, expired_result(&payload));
        assert_eq!(answer.record.outcome, Some(DecisionOutcome::Expired));
        assert_eq!(
            answer.record.decided_at.as_deref(),
            Some("1970-01-01T00:00:01Z")
        );
        assert_eq!(expiry.expired(), vec![answer.record.clone()]);
        assert_eq!(answer.record.sha256.as_deref(), Some("aa"), "what expired");
    }

    /// The expired record of an undecided call says what expired, when, of which tool, and the
    /// `ask` rule that made it wait: the audit of an expiry is as full as that of a decision.
    #[test]
    fn an_expired_calls_record_names_its_hash_deadline_tool_and_rule() {
        let mut payload = call(1, Some(1_000));
        payload.rule = Some(Box::new(crate::rules::RuleRecord {
            mode_id: "build".to_owned(),
            number: 1,
            action: crate::rules::RuleAction::Ask,
            rule: "ask write_file".to_owned(),
            reason: "rule 1 of mode `build`".to_owned(),
            approvers: None,
            agent_type: None,
        }));
        let waiting = [Waiting::ToolCall {
            run_id: "run_1",
            tool_call_id: "c1",
            payload: &payload,
            decided: None,
            feedback: None,
        }];
        let expiry = expire(waiting, 1_000).expect("due");
        let [answer] = expiry.answers.as_slice() else {
            panic!("one answer: {expiry:?}");
        };
        let record = &answer.record;
        assert_eq!(record.outcome, Some(DecisionOutcome::Expired));
        assert_eq!(record.sha256.as_deref(), Some("bb"));
        assert_eq!(record.decided_at.as_deref(), Some("1970-01-01T00:00:01Z"));
        assert_eq!(record.tool_name.as_deref(), Some("write_file"));
        assert_eq!(record.rule, payload.rule);
    }

    #[test]
    fn a_plan_without_a_deadline_never_expires() {
        let payload = plan(None);
        assert_eq!(expire([waiting_plan(&payload)], u64::MAX), None);
    }

    #[test]
    fn one_due_call_expires_its_whole_reply_keeping_earlier_decisions() {
        let (first, second, third) = (call(1, Some(500)), call(2, Some(500)), call(3, Some(500)));
        let approved = DecidedRecord {
            tool_name: Some("write_file".to_owned()),
            ..DecidedRecord::new("run_1", "c2", "decision_2", DecisionOutcome::Approved)
        };
        let rejected = DecidedRecord {
            outcome: Some(DecisionOutcome::Rejected),
            tool_call_id: "c3".to_owned(),
            decision_id: "decision_3".to_owned(),
            ..approved.clone()
        };
        let waiting = [
            (&first, None, "c1"),
            (&second, Some(&approved), "c2"),
            (&third, Some(&rejected), "c3"),
        ]
        .map(|(payload, decided, id)| Waiting::ToolCall {
            run_id: "run_1",
            tool_call_id: id,
            payload,
            decided,
            feedback: Some("not now"),
        });
        assert_eq!(expire(waiting, 499), None);
        let expiry = expire(waiting, 500).expect("due");
        let results: Vec<&str> = expiry.answers.iter().map(|a| a.result.as_str()).collect();
        assert_eq!(
            results,
            [
                expired_tool_result(&first).as_str(),
                APPROVED_NOT_RUN_RESULT,
                crate::machine::rejection::rejected_result(Some("not now")).as_str(),
            ]
        );
        assert!(expiry.answers.iter().all(|a| a.is_error));
        assert_eq!(expiry.answers[1].record, approved);
        assert_eq!(expiry.expired().len(), 1, "only the undecided call expired");
    }

    #[test]
    fn decided_calls_alone_never_expire() {
        let payload = call(1, Some(0));
        let decided = expire(
            [Waiting::ToolCall {
                run_id: "run_1",
                tool_call_id: "c1",
                payload: &payload,
                decided: Some(&plan_record("run_1", "c1", &plan(None))),
                feedback: None,
            }],
            u64::MAX,
        );
        assert_eq!(decided, None);
    }

    #[test]
    fn an_expiry_says_when_and_within_what() {
        assert_eq!(deadline_text(1_796_148_000_999), "2026-12-01T18:00:00Z");
        let text = expired_result(&plan(Some(1_796_148_000_000)));
        assert_eq!(
            text,
            "Not approved: no decision was taken within 1h (approvalTimeout); the plan expired at 2026-12-01T18:00:00Z. Stay in this mode; the user may ask for the plan again."
        );
        let text = expired_tool_result(&call(1, Some(1_796_148_000_000)));
        assert_eq!(
            text,
            "Not approved: no decision was taken within 1h (approvalTimeout); this tool call expired at 2026-12-01T18:00:00Z and was not executed."
        );
        let mut open = call(1, None);
        open.terms.approval_timeout = None;
        assert_eq!(
            expired_tool_result(&open),
            "Not approved: no decision was taken; this tool call was not executed."
        );
    }

    #[test]
    fn the_expired_records_are_those_of_what_expired_undecided() {
        let (a, b, c) = (call(1, Some(10)), call(2, Some(10)), call(3, Some(10)));
        let approved = DecidedRecord {
            outcome: Some(DecisionOutcome::Approved),
            ..plan_record("run_1", "c1", &plan(None))
        };
        let rejected = DecidedRecord {
            outcome: Some(DecisionOutcome::Rejected),
            ..approved.clone()
        };
        let waiting = [
            Waiting::ToolCall {
                run_id: "run_1",
                tool_call_id: "c1",
                payload: &a,
                decided: Some(&approved),
                feedback: None,
            },
            Waiting::ToolCall {
                run_id: "run_1",
                tool_call_id: "c2",
                payload: &b,
                decided: None,
                feedback: None,
            },
            Waiting::ToolCall {
                run_id: "run_1",
                tool_call_id: "c3",
                payload: &c,
                decided: Some(&rejected),
                feedback: Some("not c"),
            },
        ];
        assert_eq!(expire(waiting, 9), None);
        let expiry = expire(waiting, 10).expect("due");
        let results: Vec<&str> = expiry.answers.iter().map(|a| a.result.as_str()).collect();
        assert_eq!(results[0], APPROVED_NOT_RUN_RESULT);
        assert_eq!(results[1], expired_tool_result(&b));
        assert!(results[2].contains("not c"), "{}", results[2]);
        assert!(expiry.answers.iter().all(|a| a.is_error));
        let expired: Vec<String> = expiry
            .expired()
            .into_iter()
            .map(|r| r.decision_id)
            .collect();
        assert_eq!(expired, ["decision_2"]);
        let (message, record) = expiry.answers[1].clone().into_parts();
        assert_eq!(record.decision_id, "decision_2");
        assert_eq!(
            message,
            crate::model::Message::Tool {
                tool_call_id: "c2".to_owned(),
                tool_name: "write_file".to_owned(),
                content: expired_tool_result(&b),
                is_error: true,
            }
        );
    }
}
