//! The errors of the session's operations ([`SessionError`]): what the rules refuse (a decision
//! that names nothing pending, a stale pin, a target the plan does not list) and what the
//! driver meets (a store that fails, a lease another process holds, a workspace that moved).
//! Each leaves the session as it was.

use std::path::PathBuf;

use crate::event::{DecidedRecord, DecisionOutcome};
use crate::store_error::StoreError;

/// Errors from session operations. Each leaves the session exactly as it was: a suspended run
/// stays suspended and can still be decided. (A plan past its deadline expires as the operation
/// starts, before any error: see [`crate::deadline`].)
///
/// `#[non_exhaustive]`: match the variants a host handles on its own, or the
/// [`kind`](SessionError::kind), and keep a last arm for the rest.
///
/// # Examples
/// A host that answers each error the way its user can act on it:
/// ```
/// use agent_controller::{SessionError, session::SessionErrorKind};
///
/// fn advice(error: &SessionError) -> String {
///     match error {
///         SessionError::Sha256Mismatch { .. } => "the plan changed since you saw it: review it again".into(),
///         error => match error.kind() {
///             SessionErrorKind::NotFound => format!("nothing to decide: {error}"),
///             SessionErrorKind::Conflict => "someone else decided first: reload".into(),
///             SessionErrorKind::Store => "the session store failed: try again".into(),
///             _ => error.to_string(),
///         },
///     }
/// }
///
/// assert_eq!(advice(&SessionError::UnknownDecision("decision_9".into())), "nothing to decide: unknown decision `decision_9`");
/// assert_eq!(advice(&SessionError::NoStore), "the session store failed: try again");
/// let malformed = SessionError::MalformedDecision("unknown variant `approve`".into());
/// assert_eq!(advice(&malformed), malformed.to_string());
/// ```
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// No mode has this id (ids are case-sensitive). The message hints at the mode meant: one
    /// that differs only in case, or one within two edits ("did you mean"), else it lists the
    /// modes. Make it with [`SessionError::unknown_mode`].
    #[error("unknown mode `{id}`{}", mode_hint(id, known))]
    UnknownMode {
        /// The mode id given.
        id: String,
        /// The config's mode ids, in its order.
        known: Vec<String>,
    },
    /// No run with this id exists in the session.
    #[error("unknown run `{0}`")]
    UnknownRun(String),
    /// The run exists but is not waiting for a decision.
    #[error("run `{0}` is not suspended: there is no plan to decide")]
    NotSuspended(String),
    /// The suspended run has no pending tool call with this id.
    #[error("run `{run_id}` has no suspended tool call `{tool_call_id}`")]
    UnknownToolCall {
        /// The run id given.
        run_id: String,
        /// The tool call id given.
        tool_call_id: String,
    },
    /// This decision (named by its decision id, or by a run and tool-call id that no longer
    /// name the pending plan) was already decided or cancelled; a decision applies once.
    #[error("`{0}` was already decided: a decision applies once")]
    AlreadyDecided(String),
    /// No decision of the session has this decision id.
    #[error("unknown decision `{0}`")]
    UnknownDecision(String),
    /// The plan, the tool call, or the call its tool suspended (a question) expired before this
    /// decision: no decision was taken by its deadline (its mode's `approvalTimeout`), so a plan
    /// or a tool call counts as rejected and a question was not answered (see
    /// [`crate::deadline`]). The expiry is in the decision history (outcome `expired`); this
    /// decision changed nothing.
    #[error(
        "decision `{decision_id}` expired at {deadline_at}: no decision was taken by its deadline (approvalTimeout), so {}; this decision was not applied",
        super::expiry::expired_outcome(.tool_name.as_deref(), *.suspension_kind, false)
    )]
    Expired {
        /// The decision id of the expired plan or tool call.
        decision_id: String,
        /// Its deadline, as RFC 3339 in UTC.
        deadline_at: String,
        /// The tool of an expired tool call or suspended call; `None` for a plan.
        tool_name: Option<String>,
        /// For a call its tool suspended: its kind (`question` or `suspension`); `None` for a
        /// plan and a tool call that waited for approval.
        suspension_kind: Option<crate::event::SuspensionKind>,
    },
    /// The decision names a different plan than the one captured at submit time.
    #[error(
        "the decision is for plan sha256 {given}, but the submitted plan has sha256 {expected}"
    )]
    Sha256Mismatch {
        /// The captured plan's hash.
        expected: String,
        /// The hash in the decision.
        given: String,
    },
    /// The decision for a tool call that waits for approval names other arguments than the
    /// call's (its `sha256` is not the call's `argsSha256`); nothing changed.
    #[error(
        "the decision is for tool call arguments with argsSha256 {given}, but tool call {decision_id} has argsSha256 {expected}: it is not the call you meant; nothing was decided"
    )]
    ArgsSha256Mismatch {
        /// The decision id of the waiting tool call.
        decision_id: String,
        /// The call's `argsSha256`.
        expected: String,
        /// The hash in the decision.
        given: String,
    },
    /// The decision is pinned ([`Decision::with_sha256`](crate::Decision::with_sha256)) to
    /// another payload than the suspended call's (its `sha256` is not the payload's
    /// `payloadSha256`); nothing changed.
    #[error(
        "the answer is for a payload with sha256 {given}, but {decision_id} waits on a payload with payloadSha256 {expected}: it is not the question you meant; nothing was answered"
    )]
    PayloadSha256Mismatch {
        /// The decision id of the suspended call.
        decision_id: String,
        /// The payload's `payloadSha256`.
        expected: String,
        /// The hash in the decision.
        given: String,
    },
    /// An answer ([`Decision::answer`](crate::Decision::answer)) that does not fit the schema
    /// the call suspended with; nothing changed, the call still waits.
    #[error(
        "the answer to {decision_id} is refused: {reason}; nothing was answered, it still waits"
    )]
    InvalidAnswer {
        /// The decision id of the suspended call.
        decision_id: String,
        /// What does not fit, as the input checker says it.
        reason: String,
    },
    /// The resume data is not `{ action: "approved" | "rejected", feedback?, sha256? }`.
    #[error("malformed resume data: {0}")]
    MalformedDecision(String),
    /// The decision names a target mode ([`Decision::to`](crate::Decision::to)) the pending plan does not list;
    /// nothing changed.
    #[error(
        "mode `{given}` is not a target of the pending plan: approve to one of {}{}",
        allowed.join(", "),
        target_hint(given, allowed)
    )]
    TargetNotAllowed {
        /// The mode id the decision named.
        given: String,
        /// The targets the plan lists (`targetModeIds`), the plain approval's first.
        allowed: Vec<String>,
    },
    /// The edited plan of an approval ([`Decision::with_plan`](crate::Decision::with_plan)) breaks the limits of a plan
    /// (blank, or larger than 1 MiB); nothing changed.
    #[error("the edited plan cannot be approved: {0}")]
    EditedPlan(#[source] crate::plan::PlanError),
    /// A decision the quorum's rule refuses (`approvers = N` on the mode,
    /// [`crate::quorum::QuorumError`]): an approval without an identity, a second approval by
    /// the same identity, an always-allow or an edited plan under a quorum; nothing changed.
    #[error(transparent)]
    Quorum(#[from] crate::quorum::QuorumError),
    /// A comment on a plan line ([`Decision::comment`](crate::Decision::comment)) cannot be
    /// kept: its line is not one of the plan shown (0, or past the end), its text is blank,
    /// or there are too many; nothing changed.
    #[error("the plan comment is refused: {0}")]
    PlanComment(String),
    /// The steps an approval names ([`Decision::steps`](crate::Decision::steps),
    /// [`Decision::parse_steps`](crate::Decision::parse_steps)) cannot be approved: a number
    /// that names no step of the plan (or more than one), a number named twice, an empty list,
    /// a list that does not read; nothing changed.
    #[error("the steps cannot be approved: {0}")]
    PlanSteps(String),
    /// The approval names a model for the next mode ([`Decision::model`](crate::Decision::model))
    /// that the host cannot build; nothing changed.
    #[error("the model `{model}` cannot be used: {reason}")]
    UnknownModel {
        /// The model id the decision named.
        model: String,
        /// Why the host cannot build it.
        reason: String,
    },
    /// The plan cannot be approved: the config changed since it was submitted so that its
    /// hand-over target is gone or different. It can still be rejected.
    #[error("the plan cannot be approved: {0}")]
    ConfigChanged(String),
    /// The config a host would act on the session under lets its modes do more than the one
    /// it ran under, or cannot be compared with it ([`crate::store::ConfigCheck::widens`]);
    /// nothing was done.
    #[error(
        "this config lets the modes of session `{session_id}` do more than the one it ran under ({was}): {wider}; nothing was done"
    )]
    ConfigWidened {
        /// The session id.
        session_id: String,
        /// The file of the config it ran under, as its record names it.
        was: String,
        /// What the modes may do now that they could not ([`crate::store::ConfigCheck::wider`]).
        wider: String,
    },
    /// The session store failed or another writer changed the session first
    /// ([`StoreError::Conflict`]); nothing changed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The controller has no session store, so sessions cannot be restored.
    #[error("the controller has no session store")]
    NoStore,
    /// The store has no session with this id.
    #[error("unknown session `{0}`")]
    UnknownSession(String),
    /// A session id given to [`crate::AgentController::start_session`] that cannot be stored:
    /// empty, longer than 128 bytes, or with characters other than ASCII letters, digits, `-`
    /// and `_` (see [`crate::store::check_session_id`]).
    #[error("invalid session id `{0}`: use 1 to 128 ASCII letters, digits, `-` and `_`")]
    InvalidSessionId(String),
    /// [`crate::AgentController::start_session`] was given an id the store already has; the
    /// stored session is left untouched (restore it with
    /// [`crate::AgentController::restore_session`] instead).
    #[error("session `{0}` already exists in the store")]
    SessionExists(String),
    /// [`Session::continue_run`](crate::Session::continue_run) found no run to carry on: the session's latest run is not
    /// `running` (it is suspended, ended, or there is none).
    #[error(
        "session `{session_id}` has no interrupted run to continue (its latest run is {state})"
    )]
    NotInterrupted {
        /// The session id.
        session_id: String,
        /// The latest run's state, as text (`suspended`, `completed`, ..., or `none`).
        state: String,
    },
    /// The session's run is being carried on by a live owner: its lease has not ended, so it is
    /// not interrupted and is never taken over (nor ended by another operation). If that host
    /// stopped, try again once the lease ends.
    #[error(
        "run `{run_id}` of session `{session_id}` is carried on by `{owner}`, whose lease ends in {remaining_ms} ms: it is not interrupted"
    )]
    LeaseHeld {
        /// The session id.
        session_id: String,
        /// The running run.
        run_id: String,
        /// The lease's owner.
        owner: String,
        /// How long the lease still runs, in milliseconds, when it was checked.
        remaining_ms: u64,
    },
    /// A run of the session is in progress in this process ([`crate::session::SessionHandle`]: another
    /// task carries it on), so the operation was not started; nothing changed. Try again once
    /// the run ends (its `agent_end`), or cancel it.
    #[error(
        "session `{session_id}` is busy: its run `{run_id}` is in progress here; nothing was done (try again when it ends, or cancel it)"
    )]
    Busy {
        /// The session id.
        session_id: String,
        /// The run in progress.
        run_id: String,
    },
    /// This process lost the lease of the run it was carrying on: another process changed the
    /// session (for example `continue` took the run over after the lease ran out), so the run
    /// stopped before its next step. Restore the session to see where it is.
    #[error("run `{run_id}` of session `{session_id}` lost its lease: {source}")]
    LeaseLost {
        /// The session id.
        session_id: String,
        /// The run that stopped.
        run_id: String,
        /// The save that found the session changed ([`StoreError::Conflict`]).
        source: StoreError,
    },
    /// The session works in another workspace than this controller's: it is never run, decided
    /// or carried on elsewhere ([`crate::workspace`]); nothing changed. Use a controller of the
    /// recorded workspace.
    #[error(
        "session `{session_id}` works in {}, but this controller's workspace is {}: it acts only where it started; nothing was done",
        recorded.display(),
        actual.display()
    )]
    WrongWorkspace {
        /// The session id.
        session_id: String,
        /// The session's recorded workspace (canonical).
        recorded: PathBuf,
        /// This controller's workspace (canonical).
        actual: PathBuf,
    },
    /// The session's workspace cannot be opened (deleted, not a directory, unreadable); nothing
    /// changed.
    #[error(
        "the workspace {} of session `{session_id}` cannot be opened: {reason}; nothing was done",
        path.display()
    )]
    WorkspaceGone {
        /// The session id.
        session_id: String,
        /// The workspace.
        path: PathBuf,
        /// Why it cannot be opened.
        reason: String,
    },
    /// Another directory is at the session's workspace path now (deleted and made again, or
    /// replaced: its identity differs, see [`crate::workspace::DirectoryIdentity`]); nothing
    /// changed.
    #[error(
        "{} is another directory now than the workspace session `{session_id}` started in (deleted and made again, or replaced); nothing was done",
        path.display()
    )]
    WorkspaceReplaced {
        /// The session id.
        session_id: String,
        /// The workspace path.
        path: PathBuf,
    },
    /// The session was saved before workspaces were recorded, and this controller's workspace
    /// was not named ([`crate::controller::AgentControllerBuilder::workspace`]): the session would run in
    /// whatever the current directory is. Name the workspace it works in; it is recorded from
    /// then on.
    #[error(
        "session `{session_id}` was saved by an older release and records no workspace: name the directory it works in (it is recorded from then on); nothing was done"
    )]
    NoWorkspaceRecorded {
        /// The session id.
        session_id: String,
    },
}

impl SessionError {
    /// [`SessionError::UnknownMode`] for `id`, which no mode of `graph` has: its message hints
    /// at the mode meant, as the config loader does.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::SessionError;
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n[[modes]]\nid = \"build\"\n",
    ///     "modes.toml",
    /// )?;
    /// assert_eq!(
    ///     SessionError::unknown_mode("Plan", &graph).to_string(),
    ///     "unknown mode `Plan`: did you mean `plan`? (mode ids are case-sensitive)"
    /// );
    /// assert_eq!(
    ///     SessionError::unknown_mode("buidl", &graph).to_string(),
    ///     "unknown mode `buidl`: did you mean `build`?"
    /// );
    /// assert_eq!(
    ///     SessionError::unknown_mode("review", &graph).to_string(),
    ///     "unknown mode `review` (modes: plan, build)"
    /// );
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn unknown_mode(id: &str, graph: &crate::mode::ModeGraph) -> Self {
        SessionError::UnknownMode {
            id: id.to_owned(),
            known: graph.modes().iter().map(|m| m.id().to_owned()).collect(),
        }
    }

    /// Whether another writer decided or changed the session first (a lost race).
    pub fn is_conflict(&self) -> bool {
        matches!(self, SessionError::Store(StoreError::Conflict { .. }))
    }
}

/// Most mode ids [`SessionError::UnknownMode`] lists when it has no hint.
const MAX_LISTED_MODES: usize = 8;

/// What follows "unknown mode `id`": the hint at the mode meant, else the modes (at most
/// [`MAX_LISTED_MODES`], then how many more).
fn mode_hint(id: &str, known: &[String]) -> String {
    if let Some(hint) = crate::hint::hint(id, known.iter().map(String::as_str), "mode ids") {
        return format!(": {hint}");
    }
    if known.is_empty() {
        return String::new();
    }
    let mut shown = known
        .iter()
        .take(MAX_LISTED_MODES)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if known.len() > MAX_LISTED_MODES {
        shown.push_str(&format!(" and {} more", known.len() - MAX_LISTED_MODES));
    }
    format!(" (modes: {shown})")
}

/// What follows the targets of [`SessionError::TargetNotAllowed`]: the hint at the target
/// meant, if one is near.
fn target_hint(given: &str, allowed: &[String]) -> String {
    crate::hint::hint(given, allowed.iter().map(String::as_str), "mode ids")
        .map(|hint| format!(": {hint}"))
        .unwrap_or_default()
}

/// The error for a decision of `decision_id` that names a plan which expired (its history
/// record), or `None` when that record is not an expiry.
pub(crate) fn expired_error(record: &DecidedRecord) -> Option<SessionError> {
    (record.outcome == Some(DecisionOutcome::Expired)).then(|| SessionError::Expired {
        decision_id: record.decision_id.clone(),
        deadline_at: record.decided_at.clone().unwrap_or_default(),
        tool_name: record.tool_name.clone(),
        suspension_kind: record.suspension_kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(outcome: DecisionOutcome, tool_name: Option<&str>) -> DecidedRecord {
        DecidedRecord {
            decided_at: Some("2026-12-01T19:00:00Z".to_owned()),
            tool_name: tool_name.map(str::to_owned),
            ..DecidedRecord::new("run_1", "c1", "decision_3", outcome)
        }
    }

    #[test]
    fn only_an_expiry_refuses_as_expired_and_names_what_expired() {
        assert_eq!(
            expired_error(&record(DecisionOutcome::Rejected, None)),
            None
        );
        let plan = expired_error(&record(DecisionOutcome::Expired, None)).expect("expired");
        assert_eq!(
            plan,
            SessionError::Expired {
                decision_id: "decision_3".to_owned(),
                deadline_at: "2026-12-01T19:00:00Z".to_owned(),
                tool_name: None,
                suspension_kind: None,
            }
        );
        assert!(
            plan.to_string().contains("so the plan counts as rejected"),
            "{plan}"
        );
        // Trial 5 L8: a question was not answered; it is not rejected.
        let question = DecidedRecord {
            suspension_kind: Some(crate::event::SuspensionKind::Question),
            ..record(DecisionOutcome::Expired, Some("ask_user"))
        };
        let question = expired_error(&question).expect("expired").to_string();
        assert!(
            question.contains("so the question of `ask_user` was not answered;"),
            "{question}"
        );
        assert!(!question.contains("rejected"), "{question}");
        let call = expired_error(&record(DecisionOutcome::Expired, Some("write_file")));
        let call = call.expect("expired").to_string();
        assert!(
            call.contains("so the `write_file` tool call counts"),
            "{call}"
        );
    }

    #[test]
    fn an_unknown_mode_hints_at_the_one_meant_else_lists_at_most_eight() {
        let ids = |n: usize| (0..n).map(|i| format!("mode{i:02}")).collect::<Vec<_>>();
        let known = vec!["plan".to_owned(), "build".to_owned()];
        let near = mode_hint("Build", &known);
        assert!(near.starts_with(": ") && near.contains("`build`"), "{near}");
        assert_eq!(mode_hint("zzzzzzzz", &[]), "");
        assert_eq!(mode_hint("zzzzzzzz", &known), " (modes: plan, build)");
        let eight = mode_hint("zzzzzzzz", &ids(8));
        assert!(
            eight.ends_with("mode07)") && !eight.contains("more"),
            "{eight}"
        );
        let nine = mode_hint("zzzzzzzz", &ids(9));
        assert!(
            nine.ends_with("mode07 and 1 more)") && !nine.contains("mode08"),
            "{nine}"
        );
    }

    #[test]
    fn a_target_outside_the_list_hints_at_the_one_meant_only_when_near() {
        let allowed = vec!["build".to_owned(), "build-auto".to_owned()];
        let near = target_hint("Build-auto", &allowed);
        assert!(
            near.starts_with(": ") && near.contains("`build-auto`"),
            "{near}"
        );
        assert_eq!(target_hint("zzzzzzzz", &allowed), "");
    }

    #[test]
    fn a_conflict_is_a_lost_race_and_nothing_else_is() {
        let conflict = SessionError::Store(StoreError::Conflict {
            session_id: "s1".to_owned(),
            expected: Some(1),
            found: Some(2),
        });
        assert!(conflict.is_conflict());
        assert!(!SessionError::NotSuspended("run_1".to_owned()).is_conflict());
    }
}
