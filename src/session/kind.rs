//! [`SessionErrorKind`]: what kind of refusal a [`SessionError`] is.

use super::SessionError;
use crate::store::StoreError;

/// What kind of refusal a [`SessionError`] is, for a host that reacts to each kind rather
/// than to each of the error's variants (there are many, and more may come): ask again on
/// [`SessionErrorKind::NotFound`], reload on [`SessionErrorKind::Conflict`], ...
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::{AgentController, session::SessionErrorKind, SessionOptions};
/// use agent_controller::model::scripted::ScriptedModel;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"", "modes.toml")?;
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
/// let err = controller.start_session(SessionOptions::new().mode("Build")).await.unwrap_err();
/// let advice = match err.kind() {
///     SessionErrorKind::NotFound => "check the id",
///     SessionErrorKind::Conflict => "reload the session and try again",
///     SessionErrorKind::InvalidInput => "fix the request",
///     // The enum is non-exhaustive: a kind added later lands here.
///     _ => "give up",
/// };
/// assert_eq!(advice, "check the id");
/// assert_eq!(err.kind().to_string(), "not_found");
/// # Ok::<(), agent_controller::Error>(())
/// # }).unwrap();
/// ```
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[strum(
    parse_err_ty = crate::names::UnknownName,
    parse_err_fn = crate::names::UnknownName::of::<Self>
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(inline, schema_with = "crate::names::schema::<SessionErrorKind>")
)]
#[non_exhaustive]
pub enum SessionErrorKind {
    /// No mode, run, tool call, decision or session has the id given
    /// ([`SessionError::UnknownMode`], [`SessionError::UnknownRun`],
    /// [`SessionError::UnknownToolCall`], [`SessionError::UnknownDecision`],
    /// [`SessionError::UnknownSession`]).
    NotFound,
    /// The decision was already taken or cancelled ([`SessionError::AlreadyDecided`]).
    AlreadyDecided,
    /// The plan expired before the decision ([`SessionError::Expired`]).
    Expired,
    /// The decision names other content than what waits (a plan's or a tool call's sha256:
    /// [`SessionError::Sha256Mismatch`], [`SessionError::ArgsSha256Mismatch`]).
    Mismatch,
    /// The input cannot be used: a malformed decision, a target the plan does not list, an
    /// edited plan past the limits, a session id that cannot be stored
    /// ([`SessionError::MalformedDecision`], [`SessionError::TargetNotAllowed`],
    /// [`SessionError::EditedPlan`], [`SessionError::PlanComment`], [`SessionError::PlanSteps`],
    /// [`SessionError::Quorum`],
    /// [`SessionError::InvalidSessionId`], and [`SessionError::Store`] with the store's
    /// [`StoreError::InvalidId`]).
    InvalidInput,
    /// The session is not in a state the operation needs: no suspended run, no interrupted
    /// run, an id already stored, a config changed under a pending plan
    /// ([`SessionError::NotSuspended`], [`SessionError::NotInterrupted`],
    /// [`SessionError::SessionExists`], [`SessionError::ConfigChanged`]).
    WrongState,
    /// Another writer or process got there first, or holds the run: a store conflict
    /// ([`SessionError::is_conflict`]), [`SessionError::LeaseHeld`],
    /// [`SessionError::LeaseLost`], [`SessionError::Busy`].
    Conflict,
    /// The session store failed, or there is none ([`SessionError::Store`] but a conflict or
    /// an id it cannot hold, [`SessionError::NoStore`]).
    Store,
    /// The session's workspace is not this controller's, is gone, replaced or not recorded
    /// ([`SessionError::WrongWorkspace`], [`SessionError::WorkspaceGone`],
    /// [`SessionError::WorkspaceReplaced`], [`SessionError::NoWorkspaceRecorded`]).
    Workspace,
}

impl SessionErrorKind {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl SessionError {
    /// What kind of refusal this is ([`SessionErrorKind`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{SessionError, session::SessionErrorKind};
    /// assert_eq!(SessionError::UnknownRun("r9".into()).kind(), SessionErrorKind::NotFound);
    /// assert_eq!(SessionError::NoStore.kind(), SessionErrorKind::Store);
    /// ```
    pub fn kind(&self) -> SessionErrorKind {
        use SessionError as E;
        use SessionErrorKind as K;
        match self {
            E::UnknownMode { .. }
            | E::UnknownRun(_)
            | E::UnknownToolCall { .. }
            | E::UnknownDecision(_)
            | E::UnknownSession(_) => K::NotFound,
            E::AlreadyDecided(_) => K::AlreadyDecided,
            E::Expired { .. } => K::Expired,
            E::Sha256Mismatch { .. }
            | E::ArgsSha256Mismatch { .. }
            | E::PayloadSha256Mismatch { .. } => K::Mismatch,
            E::MalformedDecision(_)
            | E::InvalidAnswer { .. }
            | E::TargetNotAllowed { .. }
            | E::EditedPlan(_)
            | E::PlanComment(_)
            | E::PlanSteps(_)
            | E::Quorum(_)
            | E::UnknownModel { .. }
            | E::InvalidSessionId(_) => K::InvalidInput,
            E::NotSuspended(_)
            | E::NotInterrupted { .. }
            | E::SessionExists(_)
            | E::ConfigChanged(_)
            | E::ConfigWidened { .. } => K::WrongState,
            // The caller named a session no store could hold: its input, not the store's fault.
            E::Store(StoreError::InvalidId(_)) => K::InvalidInput,
            E::Store(StoreError::Conflict { .. })
            | E::LeaseHeld { .. }
            | E::LeaseLost { .. }
            | E::Busy { .. } => K::Conflict,
            E::Store(_) | E::NoStore => K::Store,
            E::WrongWorkspace { .. }
            | E::WorkspaceGone { .. }
            | E::WorkspaceReplaced { .. }
            | E::NoWorkspaceRecorded { .. } => K::Workspace,
        }
    }
}

/// A [`SessionError`] as a host sends it on (an HTTP answer, a JSON line): its `kind`
/// ([`SessionErrorKind`], snake_case) and its `message` (the error's text).
///
/// # Examples
/// ```
/// use agent_controller::SessionError;
/// let error = SessionError::UnknownDecision("decision_9".into());
/// let json = serde_json::to_value(&error)?;
/// assert_eq!(json, serde_json::json!({
///     "kind": "not_found",
///     "message": "unknown decision `decision_9`",
/// }));
/// # Ok::<(), serde_json::Error>(())
/// ```
impl serde::Serialize for SessionError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("SessionError", 2)?;
        out.serialize_field("kind", &self.kind())?;
        out.serialize_field("message", &self.to_string())?;
        out.end()
    }
}
