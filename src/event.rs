//! Events a session emits, in order, to its subscribers.
//!
//! Serialized with `type` in snake_case and fields in camelCase, as Mastra's `AgentController`
//! events are, so hosts written against either read the same shapes.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::submit_plan::PlanSubmission;

/// Why the mode changed.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ModeChangeReason {
    /// The host switched mode ([`crate::Session::switch_mode`]).
    Manual,
    /// A plan was approved and the session handed over to the planning mode's target.
    PlanApproved,
}

/// How a run ended (or paused).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EndReason {
    /// The model finished (or a plan was rejected without feedback).
    Complete,
    /// The run is suspended on `submit_plan`, awaiting a decision.
    Suspended,
    /// The run was aborted (abort, a user message or a mode switch while suspended).
    Aborted,
    /// The model failed or the run exceeded its step limit.
    Error,
}

/// Why a suspension was cancelled without a decision (each counts as *not approved*).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CancelReason {
    /// The host aborted the run.
    Aborted,
    /// The user sent a new message instead of deciding.
    UserMessage,
    /// The host switched mode by hand.
    ModeSwitch,
}

/// What `tool_suspended` carries for `submit_plan`: the captured plan, where approval leads, and
/// the decision id hosts address the decision by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuspendPayload {
    /// The plan as captured at submit time (`path`, `title`, `plan`, `sha256`).
    #[serde(flatten)]
    pub submission: PlanSubmission,
    /// The mode approval hands over to, fixed at submit time.
    pub target_mode_id: Arc<str>,
    /// The id the controller gave this decision (`decision_1`, `decision_2`, ...), unique in the
    /// session. Unlike the model's tool-call id, which a model may reuse, it names exactly one
    /// submitted plan: decide by it with [`crate::Session::decide`]. Empty only in records
    /// written before decision ids existed (restoring such a record assigns one).
    #[serde(default)]
    pub decision_id: String,
}

/// How a submitted plan was settled.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum DecisionOutcome {
    /// The host approved it.
    Approved,
    /// The host rejected it (with or without feedback).
    Rejected,
    /// It was cancelled without a decision (abort, a new user message, a manual switch): not
    /// approved.
    Cancelled,
}

/// The audit record of one settled plan decision: which decision, how, when and by whom. The
/// session record keeps the latest (`lastDecided`) and all of them (`history`); the events that
/// settle a decision (`tool_end` of `submit_plan`, `tool_suspension_cancelled`) carry it as
/// `decision`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecidedRecord {
    /// The run the plan suspended.
    pub run_id: String,
    /// The model's `submit_plan` tool-call id (not necessarily unique).
    pub tool_call_id: String,
    /// The controller's decision id, unique in the session (empty in records written before
    /// decision ids existed).
    #[serde(default)]
    pub decision_id: String,
    /// Approved, rejected or cancelled (`None` in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<DecisionOutcome>,
    /// The SHA-256 of the plan that was decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// When, as RFC 3339 in UTC with seconds (`2026-11-30T12:35:43Z`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// Who, as the host named them ([`crate::Decision::decided_by`]); `None` when the host did
    /// not say (and for cancellations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

/// Now, as RFC 3339 in UTC with whole seconds.
pub(crate) fn rfc3339_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// One thing that happened in a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum Event {
    /// A session was created (or restored) in `modeId`.
    SessionStarted {
        /// The session id.
        session_id: Arc<str>,
        /// The mode it starts in.
        mode_id: Arc<str>,
    },
    /// A run started.
    AgentStart {
        /// The run id.
        run_id: Arc<str>,
        /// The mode it starts in.
        mode_id: Arc<str>,
    },
    /// The model replied with text.
    AssistantMessage {
        /// The run id.
        run_id: Arc<str>,
        /// The text.
        text: String,
    },
    /// A tool call starts.
    ToolStart {
        /// The run id.
        run_id: Arc<str>,
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool_name: String,
        /// The call's arguments.
        args: Value,
    },
    /// A tool call suspended the run; the host must decide.
    ToolSuspended {
        /// The run id.
        run_id: Arc<str>,
        /// The tool call id.
        tool_call_id: String,
        /// The tool name (`submit_plan`).
        tool_name: String,
        /// The captured plan.
        suspend_payload: SuspendPayload,
    },
    /// A tool call finished with a result for the model.
    ToolEnd {
        /// The run id.
        run_id: Arc<str>,
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool_name: String,
        /// The result text the model receives.
        result: String,
        /// Whether the result reports an error.
        is_error: bool,
        /// For the `submit_plan` call a decision settled: the audit record (decision id,
        /// outcome, `decidedAt`, `decidedBy`); absent for every other tool call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<DecidedRecord>,
    },
    /// The session's mode changed.
    ModeChanged {
        /// The new mode.
        mode_id: Arc<str>,
        /// The mode before.
        previous_mode_id: Arc<str>,
        /// Why.
        reason: ModeChangeReason,
    },
    /// A suspended tool call was cancelled without a decision (not approved).
    ToolSuspensionCancelled {
        /// The run id.
        run_id: Arc<str>,
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool_name: String,
        /// Why.
        reason: CancelReason,
        /// The audit record (decision id, outcome `cancelled`, `decidedAt`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<DecidedRecord>,
    },
    /// A run ended or paused.
    AgentEnd {
        /// The run id.
        run_id: Arc<str>,
        /// How.
        reason: EndReason,
    },
    /// Something went wrong in a run (a model error, the step limit).
    Error {
        /// What went wrong.
        message: String,
    },
}

impl Event {
    /// The `type` tag of the event as serialized (`mode_changed`, `tool_suspended`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionStarted { .. } => "session_started",
            Event::AgentStart { .. } => "agent_start",
            Event::AssistantMessage { .. } => "assistant_message",
            Event::ToolStart { .. } => "tool_start",
            Event::ToolSuspended { .. } => "tool_suspended",
            Event::ToolEnd { .. } => "tool_end",
            Event::ModeChanged { .. } => "mode_changed",
            Event::ToolSuspensionCancelled { .. } => "tool_suspension_cancelled",
            Event::AgentEnd { .. } => "agent_end",
            Event::Error { .. } => "error",
        }
    }
}

/// A callback that receives every event of a session, in order.
pub type Subscriber = Box<dyn FnMut(&Event) + Send>;
