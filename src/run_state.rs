//! Where a run stands ([`RunState`]): running, or how it ended. Its own file so that the
//! events and the plan's report both name it without naming each other.

/// Where a run stands: running, or how it ended. The one name for it everywhere: the
/// `agent_end` event's `reason`, the session record's `run.state`, [`crate::Session::run_state`]
/// and [`crate::RunOutcome::state`].
///
/// A suspended run has ended for now (`agent_end` with reason `suspended`); a decision or a
/// cancellation of its suspension starts it again with the same run id.
///
/// # Examples
/// ```
/// use agent_controller::event::RunState;
/// assert_eq!(RunState::Completed.to_string(), "completed");
/// assert_eq!("failed".parse::<RunState>(), Ok(RunState::Failed));
/// assert!(RunState::Aborted.is_ended() && !RunState::Running.is_ended());
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
#[strum(parse_err_ty = crate::names::UnknownName, parse_err_fn = crate::names::UnknownName::of::<Self>)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(inline, schema_with = "crate::names::schema::<RunState>")
)]
pub enum RunState {
    /// The run loop is calling the model or executing tools. Never the reason of an `agent_end`.
    Running,
    /// The run waits for a decision on a submitted plan.
    Suspended,
    /// The model finished, or a plan was rejected without feedback.
    Completed,
    /// The run was aborted (cancelled by the host, its future dropped, or its suspension
    /// cancelled by an abort, a user message or a manual switch).
    Aborted,
    /// The model failed or the run exceeded its step limit.
    Failed,
}

impl RunState {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl RunState {
    /// Whether the run has ended (for now, when suspended): every state but
    /// [`RunState::Running`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::RunState;
    /// assert!(!RunState::Running.is_ended());
    /// assert!(RunState::Suspended.is_ended());
    /// assert!(RunState::Completed.is_ended());
    /// ```
    pub fn is_ended(self) -> bool {
        self != RunState::Running
    }
}
