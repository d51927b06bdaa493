//! How a turn ends, in the terms editors show ([`StopReason`]): the one place a run's outcome
//! and the model's last finish become a stop reason, for every host.

use crate::model::{Finish, ModelErrorKind};
use crate::session::RunOutcome;

/// Why a turn (the run a user's message started, carried on through its decisions) stopped:
/// the stop reasons of the Agent Client Protocol, which editors show.
///
/// | the run | stop reason |
/// |---|---|
/// | completed; the model's last reply was done | [`StopReason::EndTurn`] |
/// | completed; the last reply was cut at the token limit | [`StopReason::MaxTokens`] |
/// | completed; the provider or the model refused | [`StopReason::Refusal`] |
/// | failed at its step or plan-revision limit | [`StopReason::MaxTurnRequests`] |
/// | aborted (the host cancelled it) | [`StopReason::Cancelled`] |
/// | suspended, or failed with another error | none ([`StopReason::of`]) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::Display, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum StopReason {
    /// The model is done.
    EndTurn,
    /// The model's reply was cut at its token limit.
    MaxTokens,
    /// The run reached its limit of model calls or of plan revisions.
    MaxTurnRequests,
    /// The provider or the model refused to go on.
    Refusal,
    /// The run was cancelled.
    Cancelled,
}

impl StopReason {
    /// The stop reason of a run that returned `outcome`, the model's last reply having
    /// finished as `last_finish` ([`crate::Session::last_finish`]). `None` when the run has not
    /// ended (suspended on a decision) or failed with an error that is not a limit (the host
    /// reports the error itself).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::RunOutcome;
    /// use agent_controller::model::Finish;
    /// use agent_controller::session::StopReason;
    /// let done = RunOutcome::Completed { run_id: "run_1".into(), text: "The answer is".into() };
    /// assert_eq!(StopReason::of(&done, Some(Finish::MaxTokens)), Some(StopReason::MaxTokens));
    /// assert_eq!(StopReason::of(&done, Some(Finish::Stop)), Some(StopReason::EndTurn));
    /// let aborted = RunOutcome::Aborted { run_id: "run_1".into() };
    /// assert_eq!(StopReason::of(&aborted, None), Some(StopReason::Cancelled));
    /// ```
    pub fn of(outcome: &RunOutcome, last_finish: Option<Finish>) -> Option<Self> {
        match outcome {
            RunOutcome::Completed { .. } => Some(match last_finish {
                Some(Finish::MaxTokens) => StopReason::MaxTokens,
                Some(Finish::Refusal) => StopReason::Refusal,
                _ => StopReason::EndTurn,
            }),
            RunOutcome::Aborted { .. } => Some(StopReason::Cancelled),
            RunOutcome::Failed { error, .. } => match error.kind() {
                ModelErrorKind::StepLimit | ModelErrorKind::RevisionLimit => {
                    Some(StopReason::MaxTurnRequests)
                }
                _ => None,
            },
            RunOutcome::Suspended { .. }
            | RunOutcome::ToolCallsSuspended { .. }
            | RunOutcome::AwaitingAnswer { .. } => None,
        }
    }

    /// The name, as ACP writes it (`end_turn`, `max_tokens`, ...).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
