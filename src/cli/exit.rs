//! How a command ends: its exit status and the failure it reports.

use std::fmt::Display;

use agent_controller::SessionError;
use agent_controller::store::StoreError;

/// How a command ended; the process exit status (`--help`, the guide `guide::cli`, "Exit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// The run completed (any plan in it approved), or the command succeeded.
    Done,
    /// The model, a tool or the store failed.
    RuntimeError,
    /// An invalid config, or a usage error (clap uses 2 as well).
    Invalid,
    /// A plan was rejected, or the prompt dismissed without a store: the mode is unchanged.
    NotApproved,
    /// The plan is still pending in the store: detached, or the prompt dismissed.
    Pending,
    /// A decision was refused: already decided, lost race, stale sha256, changed config, unknown
    /// session.
    Refused,
    /// `pending` listed what it could read, and some records could not be read.
    Unreadable,
    /// `verify`: the controller diverged from the reference model.
    Diverged,
    /// Ctrl-C while the model works.
    Interrupted,
    /// Stdout was closed by its reader, or a write to it failed; the command still did its work.
    StdoutClosed,
}

impl Exit {
    pub(crate) fn code(self) -> u8 {
        match self {
            Exit::Done => 0,
            Exit::RuntimeError => 1,
            Exit::Invalid => 2,
            Exit::NotApproved => 3,
            Exit::Pending => 4,
            Exit::Refused => 5,
            Exit::Unreadable => 6,
            Exit::Diverged => 7,
            Exit::Interrupted => 130,
            Exit::StdoutClosed => 141,
        }
    }

    /// What the status means, in a few words (as `--help` lists it).
    pub(crate) fn meaning(self) -> &'static str {
        match self {
            Exit::Done => "done",
            Exit::RuntimeError => "runtime error",
            Exit::Invalid => "invalid config or usage",
            Exit::NotApproved => "not approved",
            Exit::Pending => "still pending",
            Exit::Refused => "decision refused",
            Exit::Unreadable => "some records unreadable",
            Exit::Diverged => "diverged from the reference model",
            Exit::Interrupted => "interrupted",
            Exit::StdoutClosed => "stdout failed",
        }
    }
}

/// A command that could not do its job: the message for stderr and the exit status.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(exit: Exit, message: impl Display) -> Self {
        Self {
            exit,
            message: message.to_string(),
        }
    }
    pub(crate) fn runtime(message: impl Display) -> Self {
        Self::new(Exit::RuntimeError, message)
    }
    pub(crate) fn invalid(message: impl Display) -> Self {
        Self::new(Exit::Invalid, message)
    }
    pub(crate) fn refused(message: impl Display) -> Self {
        Self::new(Exit::Refused, message)
    }
}

impl From<SessionError> for Failure {
    fn from(error: SessionError) -> Self {
        let exit = match &error {
            SessionError::AlreadyDecided(_)
            | SessionError::Sha256Mismatch { .. }
            | SessionError::ArgsSha256Mismatch { .. }
            | SessionError::PayloadSha256Mismatch { .. }
            | SessionError::ConfigChanged(_)
            | SessionError::ConfigWidened { .. }
            | SessionError::UnknownSession(_)
            | SessionError::UnknownRun(_)
            | SessionError::UnknownToolCall { .. }
            | SessionError::UnknownDecision(_)
            | SessionError::NotSuspended(_)
            | SessionError::TargetNotAllowed { .. }
            | SessionError::SessionExists(_)
            | SessionError::NotInterrupted { .. }
            | SessionError::LeaseHeld { .. }
            | SessionError::Busy { .. }
            | SessionError::LeaseLost { .. }
            | SessionError::WorkspaceGone { .. }
            | SessionError::WorkspaceReplaced { .. }
            | SessionError::Quorum(_) => Exit::Refused,
            e if e.is_conflict() => Exit::Refused,
            // An expired plan counts as rejected: not approved, whatever the decision was.
            SessionError::Expired { .. } => Exit::NotApproved,
            SessionError::UnknownMode { .. }
            | SessionError::MalformedDecision(_)
            | SessionError::InvalidAnswer { .. }
            | SessionError::PlanComment(_)
            | SessionError::PlanSteps(_)
            | SessionError::UnknownModel { .. }
            | SessionError::InvalidSessionId(_)
            | SessionError::WrongWorkspace { .. }
            | SessionError::NoWorkspaceRecorded { .. }
            | SessionError::Store(StoreError::InvalidId(_)) => Exit::Invalid,
            _ => Exit::RuntimeError,
        };
        Self::new(exit, error)
    }
}

pub(crate) type Outcome = Result<Exit, Failure>;
