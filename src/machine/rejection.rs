//! What the model receives for a tool call the user rejected: it did not run, and the result
//! says so, with the user's feedback if any ([`rejected_result`]). The expiry of a decision
//! (`src/machine/expiry.rs`) and the decision itself (`src/machine/decide.rs`) give it alike.
//! For a call the user approved with feedback, the tool's result goes on with that feedback
//! ([`with_approval_feedback`]).

/// The result of a tool call the user rejected without feedback; with feedback, the result
/// goes on with [`TOOL_FEEDBACK_PREFIX`] and the feedback.
pub(crate) const TOOL_REJECTED_RESULT: &str =
    "Not approved: the user rejected this tool call; it was not executed.";

/// What comes between [`TOOL_REJECTED_RESULT`] and the user's feedback.
pub(crate) const TOOL_FEEDBACK_PREFIX: &str = " Their feedback:\n";

/// The result of a tool call the user rejected (it did not run), with their feedback if any.
pub(crate) fn rejected_result(feedback: Option<&str>) -> String {
    match feedback {
        Some(feedback) => format!("{TOOL_REJECTED_RESULT}{TOOL_FEEDBACK_PREFIX}{feedback}"),
        None => TOOL_REJECTED_RESULT.to_owned(),
    }
}

/// What comes between the result of a tool call the user approved and the feedback they gave
/// with the approval.
pub(crate) const APPROVAL_FEEDBACK_PREFIX: &str =
    "\n\nThe user approved this tool call with feedback:\n";

/// The result `content` of a tool call the user approved, followed by the feedback they gave
/// with the approval, if any: what the user typed is never dropped (issue 36, item 11).
pub(crate) fn with_approval_feedback(content: String, feedback: Option<&str>) -> String {
    match feedback {
        Some(feedback) => format!("{content}{APPROVAL_FEEDBACK_PREFIX}{feedback}"),
        None => content,
    }
}

/// What the model gets for a call that waited on the user's answer when the user declined to
/// answer (a rejection): nothing is made up.
pub(crate) fn declined_result(feedback: Option<&str>) -> String {
    match feedback {
        Some(feedback) => {
            format!("Not answered: the user declined to answer, and said: {feedback}")
        }
        None => "Not answered: the user declined to answer; there is no answer.".to_owned(),
    }
}
