//! Where a tool call stands, as an editor draws it ([`CallStatus`]): the one rule for the
//! events of a live run and for a stored conversation replayed ([`result_statuses`]), so a
//! plan that was not approved is never drawn as done.

use crate::event::{DecidedRecord, DecisionOutcome};
use crate::model::Message;
use crate::tool::SUBMIT_PLAN;

/// A tool call's status: the Agent Client Protocol's `pending`, `completed` and `failed`.
///
/// | the call | status |
/// |---|---|
/// | waits for a decision (a plan, or a call the mode's `requireApproval` holds back) | [`CallStatus::Pending`] |
/// | ran, and its result is no error; a plan that was approved; a question answered | [`CallStatus::Completed`] |
/// | its result is an error; a plan or call rejected, set aside (a manual switch, a new message), cancelled, expired | [`CallStatus::Failed`] |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::Display, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum CallStatus {
    /// It waits for a decision.
    Pending,
    /// It ran and succeeded, or (a plan) was approved.
    Completed,
    /// It failed, or was not approved.
    Failed,
}

impl CallStatus {
    /// The status of a call that has its result: [`CallStatus::Failed`] when the result is an
    /// error or the decision that settled the call (`decision`, as
    /// [`crate::Event::ToolEnd`] and [`crate::Event::ToolSuspensionCancelled`] carry it)
    /// neither approved nor answered it; else [`CallStatus::Completed`] (a question answered
    /// is completed, one declined or cancelled failed).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::DecidedRecord;
    /// use agent_controller::session::CallStatus;
    /// let rejected: DecidedRecord = serde_json::from_value(serde_json::json!({
    ///     "runId": "run_1", "toolCallId": "call_2", "outcome": "rejected",
    /// }))?;
    /// // A rejected plan's result is no error (the model is told to stop), but it was not approved.
    /// assert_eq!(CallStatus::of_result(false, Some(&rejected)), CallStatus::Failed);
    /// let answered: DecidedRecord = serde_json::from_value(serde_json::json!({
    ///     "runId": "run_1", "toolCallId": "call_3", "outcome": "answered",
    /// }))?;
    /// assert_eq!(CallStatus::of_result(false, Some(&answered)), CallStatus::Completed);
    /// assert_eq!(CallStatus::of_result(false, None), CallStatus::Completed);
    /// assert_eq!(CallStatus::of_result(true, None), CallStatus::Failed);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn of_result(is_error: bool, decision: Option<&DecidedRecord>) -> Self {
        // An answered question went ahead as an approved call does: its tool ran with the answer.
        let not_approved = decision.and_then(|d| d.outcome).is_some_and(|outcome| {
            !matches!(
                outcome,
                DecisionOutcome::Approved | DecisionOutcome::Answered
            )
        });
        if is_error || not_approved {
            CallStatus::Failed
        } else {
            CallStatus::Completed
        }
    }

    /// The name, as ACP writes it (`pending`, `completed`, `failed`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The status of each tool result in a stored conversation (`messages`, with the session's
/// decision `history`, [`crate::Session::decision_history`]): `Some` for each
/// [`Message::Tool`], `None` for every other message, in the order of `messages`.
///
/// A `submit_plan` result is paired with the plan's decision (plans are decided one after
/// another, so the k-th plan decision settles the k-th decided `submit_plan` call: one whose
/// result is no error, as a refused submission's is); every other result goes by its error
/// flag alone (a call that waited and was not approved has an error result).
pub fn result_statuses(messages: &[Message], history: &[DecidedRecord]) -> Vec<Option<CallStatus>> {
    let mut plans = history.iter().filter(|d| d.tool_name.is_none()).peekable();
    messages
        .iter()
        .map(|message| {
            let Message::Tool {
                tool_call_id,
                tool_name,
                is_error,
                ..
            } = message
            else {
                return None;
            };
            let decision = if tool_name == SUBMIT_PLAN && !is_error {
                plans.next_if(|d| &d.tool_call_id == tool_call_id)
            } else {
                None
            };
            Some(CallStatus::of_result(*is_error, decision))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(id: &str, name: &str, is_error: bool) -> Message {
        Message::Tool {
            tool_call_id: id.to_owned(),
            tool_name: name.to_owned(),
            content: String::new(),
            is_error,
        }
    }

    fn plan(id: &str, outcome: &str) -> DecidedRecord {
        serde_json::from_value(json!({ "runId": "run_1", "toolCallId": id, "outcome": outcome }))
            .expect("a record")
    }

    #[test]
    fn each_plan_result_takes_its_decision_and_a_refused_submission_takes_none() {
        let messages = [
            Message::User {
                content: "hi".to_owned(),
            },
            // Refused before it waited (no decision), with the id a later plan reuses.
            tool("call_1", SUBMIT_PLAN, true),
            tool("call_1", SUBMIT_PLAN, false),
            tool("call_2", "read_file", false),
            tool("call_1", SUBMIT_PLAN, false),
            tool("call_3", "write_file", true),
        ];
        let history = [plan("call_1", "rejected"), plan("call_1", "approved")];
        assert_eq!(
            result_statuses(&messages, &history),
            [
                None,
                Some(CallStatus::Failed),
                Some(CallStatus::Failed),
                Some(CallStatus::Completed),
                Some(CallStatus::Completed),
                Some(CallStatus::Failed),
            ]
        );
    }
}
