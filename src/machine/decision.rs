//! The host's decision ([`Decision`]) and what waits for one ([`PendingDecision`]: a plan or a
//! tool call): what [`crate::Session::resume`] and [`crate::Session::decide`] take, and what
//! [`crate::Session::pending`] shows. A decision is checked against what waits in one place,
//! [`PendingDecision::check`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::change::Change;
use super::error::{SessionError, expired_error};
use super::state::State;
use crate::event::{DecidedRecord, SuspendPayload, ToolCallPayload};
use crate::event::{DecisionOutcome, Event, ModeChangeReason, RunState};
use crate::mode::ModeId;
use crate::model::{Message, ModelError, ModelErrorKind};
use crate::tool::SUBMIT_PLAN;
use crate::tool::ToolOutput;
use crate::tool::submit_plan::REJECTED_RESULT;
use crate::tool::submit_plan::{self, PlanSubmission};

named_enum! {
    /// The host's answer to a submitted plan.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DecisionAction {
        /// The plan is approved: hand over to the target mode.
        Approved = "approved",
        /// The plan is rejected: stay in the mode.
        Rejected = "rejected",
    }
}

/// Resume data for a suspended `submit_plan` or a tool call waiting for approval:
/// `{ "action": "approved" | "rejected", "feedback"?, "sha256"?, "decidedBy"?, "targetModeId"?,
/// "plan"?, "alwaysAllow"? }`. When `sha256` is given it must equal the captured plan's hash (for
/// a tool call, its `argsSha256`), so a host never approves a plan other than the one it showed.
/// `targetModeId` chooses where an approval hands over to, among the targets the plan lists
/// ([`SuspendPayload::target_mode_ids`]). `plan` is the user's edited text of the plan, approved
/// instead of the submitted one ([`Decision::with_plan`]). `alwaysAllow` with the approval of a
/// tool call allows its tool for the rest of the session ([`Decision::always_allow`]). The guide's
/// [Decision JSON](crate::guide::contract#decision-json) has the table of fields.
///
/// # Examples
/// ```
/// use agent_controller::Decision;
/// let decision = Decision::from_json(&serde_json::json!({
///     "action": "approved",
///     "targetModeId": "build-auto",
/// }))?;
/// assert_eq!(decision, Decision::approve().to("build-auto"));
/// # Ok::<(), agent_controller::SessionError>(())
/// ```
///
#[cfg_attr(
    feature = "schema",
    doc = "With the `schema` feature, [`crate::schema::decision`] is the JSON Schema of this shape,",
    doc = "derived from this type (shipped as `config/decision.schema.json`)."
)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(
        description = "A host's decision on a pending plan (`submit_plan`) or on a tool \
        call waiting for approval (`requireApproval`), as `Session::resume_json` and \
        `Session::decide_json` take it. Only `action` is required; unknown fields are refused. \
        `targetModeId` and `plan` apply to the approval of a plan, `alwaysAllow` to the \
        approval of a tool call; anything else is refused with `MalformedDecision` and \
        changes nothing."
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Decision {
    /// Approved or rejected.
    pub action: DecisionAction,
    /// Feedback for the model: with a rejection, what to revise; with an approval, a note the
    /// next mode receives together with the approved plan. Blank feedback counts as none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// The SHA-256 (hex) of what the user saw: the plan's `sha256`, or a tool call's
    /// `argsSha256`. When given, the decision is refused unless it equals the pending one's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Who decided, as the host names them (a user name, an email, `ci`): kept in the audit
    /// record (`decidedBy`) of the session and of the decision's events. Free text; the crate
    /// never interprets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The mode an approval hands over to (`targetModeId`): one of the targets the plan lists
    /// ([`SuspendPayload::target_mode_ids`], from the planning mode's `transitionsTo`); left
    /// out (`None`) for the first of them. Any other mode, or a target on a rejection or a tool
    /// call, is refused.
    #[serde(
        default,
        rename = "targetModeId",
        skip_serializing_if = "Option::is_none"
    )]
    pub to: Option<String>,
    /// The plan text the user edited before approving (`plan`): handed to the next mode instead
    /// of the submitted plan ([`Decision::with_plan`]). Only with an approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// With the approval of a tool call: allow its tool for the rest of the session
    /// (`alwaysAllow`, [`Decision::always_allow`]). Refused on a rejection and on a plan.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always_allow: bool,
}

impl Decision {
    /// Approve.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{Decision, session::DecisionAction};
    /// let decision = Decision::approve();
    /// assert_eq!(decision.action, DecisionAction::Approved);
    /// assert_eq!(serde_json::to_value(&decision).unwrap(), serde_json::json!({ "action": "approved" }));
    /// ```
    pub fn approve() -> Self {
        Self {
            action: DecisionAction::Approved,
            feedback: None,
            sha256: None,
            decided_by: None,
            to: None,
            plan: None,
            always_allow: false,
        }
    }

    /// Approve with a note for the next mode (`"also update the docs page"`): the model
    /// receives it in the approval result, beside the approved plan.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// let decision = Decision::approve_with("also update the docs page");
    /// assert_eq!(decision.feedback.as_deref(), Some("also update the docs page"));
    /// ```
    pub fn approve_with(feedback: impl Into<String>) -> Self {
        Self {
            feedback: Some(feedback.into()),
            ..Self::approve()
        }
    }

    /// Reject without feedback: the run ends and the model waits for the next message.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{Decision, session::DecisionAction};
    /// let decision = Decision::reject();
    /// assert_eq!(decision.action, DecisionAction::Rejected);
    /// assert_eq!(decision.feedback, None);
    /// ```
    pub fn reject() -> Self {
        Self {
            action: DecisionAction::Rejected,
            feedback: None,
            sha256: None,
            decided_by: None,
            to: None,
            plan: None,
            always_allow: false,
        }
    }

    /// Reject with feedback: the model revises and submits again.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let outcome = session.decide(&payload.decision_id, Decision::reject_with("Cover the settings page too.")).await?;
    /// // The model revised in the same mode and submitted again.
    /// let RunOutcome::Suspended { payload: revised, .. } = outcome else { unreachable!() };
    /// assert_ne!(revised.decision_id, payload.decision_id);
    /// assert_eq!(session.mode().id(), "plan");
    /// # Ok(())
    /// # }
    /// ```
    pub fn reject_with(feedback: impl Into<String>) -> Self {
        Self {
            feedback: Some(feedback.into()),
            ..Self::reject()
        }
    }

    /// The same decision, bound to the plan with this SHA-256: it is refused
    /// ([`crate::session::SessionError::Sha256Mismatch`]) and changes nothing unless the pending plan has exactly
    /// this hash, so an approval can never land on a plan nobody saw (a revision submitted
    /// after a racing rejection, for example).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// use agent_controller::SessionError;
    /// let stale = Decision::approve().with_sha256("0".repeat(64));
    /// let error = session.decide(&payload.decision_id, stale).await.unwrap_err();
    /// assert!(matches!(error, SessionError::Sha256Mismatch { .. }));
    /// assert_eq!(session.mode().id(), "plan", "refused: nothing changed");
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_sha256(mut self, sha256: impl Into<String>) -> Self {
        self.sha256 = Some(sha256.into());
        self
    }

    /// The same decision, made by `name` (free text from the host: a user name, an email,
    /// `ci`). Recorded for audit as `decidedBy`, with `decidedAt`, in the session record
    /// (`lastDecided`, `history`) and in the decision's `tool_end` event.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// let decision = Decision::approve().decided_by("alice");
    /// assert_eq!(decision.decided_by.as_deref(), Some("alice"));
    /// ```
    pub fn decided_by(mut self, name: impl Into<String>) -> Self {
        self.decided_by = Some(name.into());
        self
    }

    /// The same approval, handing over to the mode with id `mode` instead of the first target:
    /// one of the modes the planning mode's `transitionsTo` lists (`transitionsTo = ["build",
    /// "build-auto"]`), as [`SuspendPayload::target_mode_ids`] shows them. A mode the plan does
    /// not list is refused ([`crate::session::SessionError::TargetNotAllowed`]) and changes nothing; so is a
    /// rejection with a target ([`crate::session::SessionError::MalformedDecision`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// let decision = Decision::approve().to("build-auto");
    /// assert_eq!(decision.to.as_deref(), Some("build-auto"));
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({ "action": "approved", "targetModeId": "build-auto" }),
    /// );
    /// ```
    pub fn to(mut self, mode: impl Into<String>) -> Self {
        self.to = Some(mode.into());
        self
    }

    /// The same approval, of the plan as the user edited it (`text`, the whole plan file: a
    /// `# title` line and the body). The next mode receives `text` in the approval result
    /// instead of the submitted plan; a [`Decision::with_sha256`] pin still names the plan that
    /// was *shown* (the submitted one); the audit record keeps both hashes (`sha256` and
    /// `approvedSha256`). The text obeys the limits of a submitted plan
    /// ([`crate::tool::submit_plan::capture_plan`]: at most 1 MiB, not blank), else the decision is
    /// refused ([`SessionError::EditedPlan`]); an edit with a rejection is refused
    /// ([`SessionError::MalformedDecision`]). Both change nothing.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// let decision = Decision::approve().with_plan("# Add dark mode\n\n1. Also the docs.\n");
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({ "action": "approved", "plan": "# Add dark mode\n\n1. Also the docs.\n" }),
    /// );
    /// ```
    pub fn with_plan(mut self, text: impl Into<String>) -> Self {
        self.plan = Some(text.into());
        self
    }

    /// The same approval of a tool call, also allowing its tool (`"alwaysAllow": true`) until
    /// the mode changes: every mode change ends it, a manual switch
    /// ([`crate::Session::switch_mode`]) and the switch of an approved plan alike, so an
    /// allowance given in a planning mode never runs the next mode's calls. The other calls of
    /// the tool waiting in the same reply are approved with it in the same save, each with its
    /// own audit record whose [`crate::event::DecidedRecord::allowed_by`] names this decision; later
    /// calls of the tool run without waiting. Kept in the session record and shown by
    /// [`crate::Session::always_allowed`]. Refused ([`SessionError::MalformedDecision`],
    /// nothing changes) with a rejection, on a plan, and on a call an `ask` rule made wait.
    ///
    /// Next to a mode's rules ([`crate::rules`]) an allowance lets through only what would wait
    /// by `requireApproval`: a call a `deny` rule refuses is refused, and one an `ask` rule
    /// asks about is asked about, whatever the allowance (a rule written for some calls of a
    /// tool is not undone by allowing the whole tool).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// let decision = Decision::approve().always_allow();
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({ "action": "approved", "alwaysAllow": true }),
    /// );
    /// ```
    pub fn always_allow(mut self) -> Self {
        self.always_allow = true;
        self
    }

    /// Parses resume data as a host sends it.
    ///
    /// # Errors
    /// [`crate::session::SessionError::MalformedDecision`] for anything but the shape above (for example
    /// `{"action": "approve"}`, or anything but a JSON object), naming the problem.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{Decision, SessionError};
    /// let decision = Decision::from_json(&serde_json::json!({ "action": "rejected", "feedback": "smaller steps" }))?;
    /// assert_eq!(decision, Decision::reject_with("smaller steps"));
    /// let typo = Decision::from_json(&serde_json::json!({ "action": "approve" }));
    /// assert!(matches!(typo, Err(SessionError::MalformedDecision(_))));
    /// # Ok::<(), SessionError>(())
    /// ```
    pub fn from_json(value: &Value) -> Result<Self, SessionError> {
        // serde's derive also reads a struct from an array of its fields in order
        // (`["approved"]`); a decision is an object with named fields and nothing else, as its
        // schema says.
        if !value.is_object() {
            return Err(SessionError::MalformedDecision(
                "a decision must be a JSON object with an `action`".to_owned(),
            ));
        }
        Self::deserialize(value).map_err(|e| SessionError::MalformedDecision(e.to_string()))
    }

    /// The feedback, trimmed; `None` when there is none or it is blank.
    pub(crate) fn feedback(&self) -> Option<&str> {
        self.feedback
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
    }
}

/// What waits for the host's decision: a plan submitted with `submit_plan`, or a tool call that
/// needs approval (its mode's `requireApproval`). A suspended run waits on one plan, or on the
/// tool calls of one model reply, never both; [`crate::Session::pending`] lists them, and a
/// host loops over that list once, whatever the kind.
///
/// # Examples
/// ```
/// use agent_controller::PendingDecision;
/// fn describe(pending: &PendingDecision) -> String {
///     match pending {
///         PendingDecision::Plan(plan) => format!("plan {}", plan.payload().submission.title),
///         PendingDecision::ToolCall(call) => format!("tool call {}", call.tool_name()),
///         // A kind added later lands here.
///         _ => format!("decision {}", pending.decision_id()),
///     }
/// }
/// # let _ = describe;
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PendingDecision {
    /// A plan waiting for approval.
    Plan(PendingPlan),
    /// A tool call waiting for approval.
    ToolCall(PendingToolCall),
}

impl PendingDecision {
    /// The suspended run.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// assert_eq!(session.pending()[0].run_id(), "run_1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_id(&self) -> &str {
        match self {
            PendingDecision::Plan(p) => &p.run_id,
            PendingDecision::ToolCall(c) => &c.run_id,
        }
    }

    pub(crate) fn run_arc(&self) -> &Arc<str> {
        match self {
            PendingDecision::Plan(p) => &p.run_id,
            PendingDecision::ToolCall(c) => &c.run_id,
        }
    }

    /// The model's id of the call that waits (`submit_plan` or the tool call): a model may
    /// reuse it, so address the decision by [`PendingDecision::decision_id`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// assert_eq!(session.pending()[0].tool_call_id(), "call_1", "the model's id");
    /// assert_ne!(session.pending()[0].decision_id(), "call_1", "the controller's id");
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_call_id(&self) -> &str {
        match self {
            PendingDecision::Plan(p) => &p.tool_call_id,
            PendingDecision::ToolCall(c) => &c.tool_call_id,
        }
    }

    /// The controller's id of this decision (`decision_N`), unique in the session and kept
    /// across restores: decide by it with [`crate::Session::decide`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let id = session.pending()[0].decision_id().to_owned();
    /// assert_eq!(id, payload.decision_id);
    /// session.decide(&id, Decision::approve()).await?;
    /// assert!(session.pending().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision_id(&self) -> &str {
        match self {
            PendingDecision::Plan(p) => p.decision_id(),
            PendingDecision::ToolCall(c) => c.decision_id(),
        }
    }

    /// The tool the model called: `submit_plan` for a plan.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// assert_eq!(session.pending()[0].tool_name(), "submit_plan");
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_name(&self) -> &str {
        match self {
            PendingDecision::Plan(_) => SUBMIT_PLAN,
            PendingDecision::ToolCall(c) => c.tool_name(),
        }
    }

    /// The SHA-256 a [`Decision::with_sha256`] pin must equal: the plan's `sha256`, or the
    /// tool call's `argsSha256`.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let pending = &session.pending()[0];
    /// assert_eq!(pending.sha256(), payload.submission.sha256);
    /// assert_eq!(pending.sha256().len(), 64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn sha256(&self) -> &str {
        match self {
            PendingDecision::Plan(p) => &p.payload.submission.sha256,
            PendingDecision::ToolCall(c) => c.args_sha256(),
        }
    }

    /// When it expires, in milliseconds since the Unix epoch (its mode's `approvalTimeout`),
    /// or `None` when it waits for ever.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// assert_eq!(session.pending()[0].deadline_at_ms(), None, "the mode has no approvalTimeout");
    /// # Ok(())
    /// # }
    /// ```
    pub fn deadline_at_ms(&self) -> Option<u64> {
        match self {
            PendingDecision::Plan(p) => p.payload.deadline_at_ms,
            PendingDecision::ToolCall(c) => c.payload.deadline_at_ms,
        }
    }

    /// The audit record of a decision taken on it already while other calls of the same reply
    /// still wait (only tool calls are decided that way); `None` while it waits.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// assert!(session.pending()[0].decision().is_none(), "nothing decided yet");
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision(&self) -> Option<&DecidedRecord> {
        match self {
            PendingDecision::Plan(_) => None,
            PendingDecision::ToolCall(c) => c.decision(),
        }
    }

    /// Whether it still waits for a decision (not decided while others wait).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// assert!(session.pending()[0].is_waiting());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_waiting(&self) -> bool {
        self.decision().is_none()
    }

    /// The plan, when this is one.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let plan = session.pending()[0].as_plan().expect("a plan");
    /// assert_eq!(plan.decision_id(), payload.decision_id);
    /// assert!(session.pending()[0].as_tool_call().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn as_plan(&self) -> Option<&PendingPlan> {
        match self {
            PendingDecision::Plan(p) => Some(p),
            PendingDecision::ToolCall(_) => None,
        }
    }

    /// The tool call, when this is one.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// let call = session.pending()[0].as_tool_call().expect("a tool call");
    /// assert_eq!(call.args()["path"], "a.txt");
    /// assert!(session.pending()[0].as_plan().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn as_tool_call(&self) -> Option<&PendingToolCall> {
        match self {
            PendingDecision::ToolCall(c) => Some(c),
            PendingDecision::Plan(_) => None,
        }
    }

    /// Checks a `sha256` pin (what the user saw) against [`PendingDecision::sha256`], ignoring
    /// ASCII case; changes nothing. A host can call it before it shows anything.
    ///
    /// # Errors
    /// [`SessionError::Sha256Mismatch`] for a plan, [`SessionError::ArgsSha256Mismatch`] for a
    /// tool call.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let pending = &session.pending()[0];
    /// assert!(pending.check_sha256(&payload.submission.sha256.to_uppercase()).is_ok());
    /// assert!(pending.check_sha256(&"0".repeat(64)).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn check_sha256(&self, given: &str) -> Result<(), SessionError> {
        check_pin(self, given)
    }

    /// Checks that `decision` may be applied to what waits; changes nothing. This is the one
    /// place a decision is checked: [`crate::Session::decide`] and [`crate::Session::resume`]
    /// call it, and a host may call it first (to refuse a flag before it shows a prompt).
    ///
    /// - Any: a pinned `sha256` must be [`PendingDecision::sha256`].
    /// - A plan: no `alwaysAllow`; a `targetModeId` (with an approval only) must be one the plan
    ///   lists; an edited plan (with an approval only) obeys the plan limits; an approval must
    ///   still be possible under the current config.
    /// - A tool call: no `targetModeId`, no edited plan, no `alwaysAllow` with a rejection,
    ///   nor on a call an `ask` rule made wait ([`crate::event::ToolCallPayload::rule`]).
    ///
    /// # Errors
    /// [`SessionError::MalformedDecision`], [`SessionError::Sha256Mismatch`],
    /// [`SessionError::ArgsSha256Mismatch`], [`SessionError::TargetNotAllowed`],
    /// [`SessionError::EditedPlan`], [`SessionError::ConfigChanged`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let pending = &session.pending()[0];
    /// assert!(pending.check(&Decision::approve()).is_ok());
    /// assert!(pending.check(&Decision::approve().to("review")).is_err(), "not a target of the plan");
    /// assert!(pending.check(&Decision::reject().with_plan("# edited")).is_err(), "an edit with a rejection");
    /// # Ok(())
    /// # }
    /// ```
    pub fn check(&self, decision: &Decision) -> Result<(), SessionError> {
        check(self, decision).map(drop)
    }
}

/// A plan waiting for a decision: which run and tool call, the captured plan, and the targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPlan {
    pub(crate) run_id: Arc<str>,
    pub(crate) tool_call_id: String,
    pub(crate) target: ModeId,
    /// Every target, in the order of the payload's `targetModeIds` (`target` first).
    pub(crate) targets: Vec<ModeId>,
    pub(crate) payload: SuspendPayload,
    /// Why approval is impossible after a restore under a changed config (`None`: it is fine).
    pub(crate) stale: Option<String>,
}

impl PendingPlan {
    /// The suspended run.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// assert_eq!(session.pending_plan().unwrap().run_id(), "run_1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The `submit_plan` call awaiting the decision: the model's id, which a model may reuse
    /// (many servers number calls per response); address the decision by
    /// [`PendingPlan::decision_id`] instead.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let plan = session.pending_plan().unwrap();
    /// assert_eq!(plan.tool_call_id(), session.pending()[0].tool_call_id());
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The id the controller gave this decision (`decision_N`), unique in the session and kept
    /// across restores: decide by it with [`crate::Session::decide`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let id = session.pending_plan().unwrap().decision_id().to_owned();
    /// session.decide(&id, Decision::reject()).await?;
    /// assert_eq!(session.mode().id(), "plan");
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision_id(&self) -> &str {
        &self.payload.decision_id
    }

    /// The mode a plain approval hands over to, fixed at submit time.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let plan = session.pending_plan().unwrap();
    /// assert_eq!(controller.modes().mode(plan.target()).id(), "build");
    /// # Ok(())
    /// # }
    /// ```
    pub fn target(&self) -> ModeId {
        self.target
    }

    /// Every mode an approval may hand over to ([`Decision::to`]), fixed at submit time:
    /// [`PendingPlan::target`] first, as the payload's `targetModeIds` lists them.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let plan = session.pending_plan().unwrap();
    /// assert_eq!(plan.targets(), [plan.target()]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn targets(&self) -> &[ModeId] {
        &self.targets
    }

    /// The mode an approval naming `to` hands over to: the listed target with that id, the
    /// first for `None`; `None` when the plan does not list `to`.
    pub(crate) fn chosen_target(&self, to: Option<&str>) -> Option<ModeId> {
        let Some(to) = to else {
            return Some(self.target);
        };
        let at = self
            .payload
            .target_mode_ids
            .iter()
            .position(|t| &**t == to)?;
        self.targets.get(at).copied()
    }

    /// The captured plan and the target mode id.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let plan = session.pending_plan().unwrap();
    /// assert_eq!(plan.payload(), &payload);
    /// # Ok(())
    /// # }
    /// ```
    pub fn payload(&self) -> &SuspendPayload {
        &self.payload
    }

    /// Why this plan can no longer be approved (the config changed since it was submitted so
    /// that its hand-over target is gone or different), or `None`. It can still be rejected.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// assert_eq!(session.pending_plan().unwrap().stale_reason(), None, "the config did not change");
    /// # Ok(())
    /// # }
    /// ```
    pub fn stale_reason(&self) -> Option<&str> {
        self.stale.as_deref()
    }
}

/// A tool call waiting for approval (its mode's `requireApproval`): which run and call, the
/// tool, its arguments and their hash, and whether it was decided already while other calls of
/// the same model reply still wait ([`crate::Session::pending`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingToolCall {
    pub(crate) run_id: Arc<str>,
    pub(crate) tool_call_id: String,
    pub(crate) payload: ToolCallPayload,
    /// The audit record of the decision taken while others wait (in the history once the run
    /// carries on).
    pub(crate) decided: Option<DecidedRecord>,
    /// That decision's feedback, trimmed.
    pub(crate) feedback: Option<String>,
}

impl PendingToolCall {
    /// The suspended run.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// assert_eq!(tool_calls[0].run_id(), "run_1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The model's id of the call (a model may reuse it: decide by
    /// [`PendingToolCall::decision_id`]).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// assert_eq!(tool_calls[0].tool_call_id(), "call_1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The controller's id of this decision (`decision_N`): decide with
    /// [`crate::Session::decide`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// let outcome = session.decide(tool_calls[0].decision_id(), Decision::approve()).await?;
    /// assert!(matches!(outcome, RunOutcome::Completed { .. }));
    /// assert_eq!(std::fs::read_to_string(workspace.path().join("a.txt"))?, "hi");
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision_id(&self) -> &str {
        &self.payload.decision_id
    }

    /// The tool the model called.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// assert_eq!(tool_calls[0].tool_name(), "write_file");
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_name(&self) -> &str {
        &self.payload.tool_name
    }

    /// The call's arguments (a JSON object).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// let call = session.pending()[0].as_tool_call().unwrap();
    /// assert_eq!(call.args(), &serde_json::json!({ "path": "a.txt", "content": "hi" }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn args(&self) -> &Value {
        &self.payload.args
    }

    /// The SHA-256 of the arguments in RFC 8785 canonical JSON ([`crate::jcs::sha256`]), which a
    /// [`Decision::with_sha256`] pin must equal.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// let call = &tool_calls[0];
    /// assert_eq!(call.args_sha256(), agent_controller::jcs::sha256(call.args()));
    /// // Pin the approval to the arguments that were shown.
    /// session.decide(call.decision_id(), Decision::approve().with_sha256(call.args_sha256())).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn args_sha256(&self) -> &str {
        &self.payload.args_sha256
    }

    /// What `tool_suspended` carried for it.
    pub fn payload(&self) -> &ToolCallPayload {
        &self.payload
    }

    /// The audit record of the decision taken on it while other calls of the reply still wait
    /// (outcome, `decidedAt`, `decidedBy`, `alwaysAllow`; the run carries on once every one is
    /// decided); `None` while it waits.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// assert!(tool_calls[0].decision().is_none(), "nothing decided yet");
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision(&self) -> Option<&DecidedRecord> {
        self.decided.as_ref()
    }

    /// The feedback of that decision, if it gave one.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ReplayModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let model = ReplayModel::new([
    /// #     ReplayModel::call("call_1", "write_file", serde_json::json!({ "path": "a.txt", "content": "hi" })),
    /// #     ReplayModel::text("Wrote a.txt."),
    /// # ]);
    /// # let controller = AgentController::builder(graph, Arc::new(model))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new()).await?;
    /// # let RunOutcome::ToolCallsSuspended { tool_calls, .. } = session.send_message("Write a.txt").await? else { unreachable!() };
    /// assert_eq!(tool_calls[0].feedback(), None, "not decided yet");
    /// # Ok(())
    /// # }
    /// ```
    pub fn feedback(&self) -> Option<&str> {
        self.feedback.as_deref()
    }
}

// The rules of deciding: the one place a decision is checked against what it decides
// ([`check`], [`check_pin`]) and where the ids a host gives are resolved to it ([`named`],
// [`with_id`]). Pure: no I/O, no clock.

/// What a decision checked by [`check`] resolves to, so that nothing is
/// validated twice: the mode an approved plan hands over to and the user's edit, captured.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The plan's hand-over target an approval names (the first target when it names none).
    pub(crate) target: Option<ModeId>,
    /// The edited plan, captured under the plan limits.
    pub(crate) edited: Option<PlanSubmission>,
}

/// Checks that `decision` may be applied to `pending`, and resolves what it names; changes
/// nothing. The rules, in the order they apply:
///
/// - A plan takes no `alwaysAllow`; a tool call no `targetModeId`, no edited plan, and no
///   `alwaysAllow` with a rejection ([`SessionError::MalformedDecision`]).
/// - A pinned `sha256` must be what was shown ([`check_pin`]).
/// - A plan: a `targetModeId` or an edit goes with an approval only
///   ([`SessionError::MalformedDecision`]); the target must be one the plan lists
///   ([`SessionError::TargetNotAllowed`]); the edit obeys the plan limits
///   ([`SessionError::EditedPlan`]: validated here, once); an approval must still be possible
///   under the current config ([`SessionError::ConfigChanged`]).
///
/// # Errors
/// As above.
pub(crate) fn check(
    pending: &PendingDecision,
    decision: &Decision,
) -> Result<Checked, SessionError> {
    let malformed = |what: &str| Err(SessionError::MalformedDecision(what.to_owned()));
    let rejected = decision.action == DecisionAction::Rejected;
    match pending {
        PendingDecision::Plan(_) if decision.always_allow => {
            return malformed(
                "a plan decision takes no `alwaysAllow`: it goes with the approval of a tool call",
            );
        }
        PendingDecision::ToolCall(_) if decision.to.is_some() => {
            return malformed(
                "a tool-call decision names no target mode: `targetModeId` goes with a plan",
            );
        }
        PendingDecision::ToolCall(_) if decision.plan.is_some() => {
            return malformed(
                "a tool-call decision carries no edited plan: `plan` goes with a plan",
            );
        }
        PendingDecision::ToolCall(_) if decision.always_allow && rejected => {
            return malformed(
                "a rejection cannot always allow the tool: `alwaysAllow` goes with an approval",
            );
        }
        PendingDecision::ToolCall(call) if decision.always_allow => {
            if let Some(rule) = &call.payload.rule {
                return Err(SessionError::MalformedDecision(format!(
                    "this call waits because rule {} of mode `{}` ({}) asks about every call it matches, which an \"always allow\" does not override: approve it without `alwaysAllow`, or change the rule",
                    rule.number, rule.mode_id, rule.rule
                )));
            }
        }
        _ => {}
    }
    if let Some(given) = &decision.sha256 {
        check_pin(pending, given)?;
    }
    let PendingDecision::Plan(plan) = pending else {
        return Ok(Checked {
            target: None,
            edited: None,
        });
    };
    if rejected && decision.to.is_some() {
        return malformed("a rejection names no target mode: `targetModeId` goes with an approval");
    }
    if rejected && decision.plan.is_some() {
        return malformed("a rejection carries no edited plan: `plan` goes with an approval");
    }
    let Some(target) = plan.chosen_target(decision.to.as_deref()) else {
        return Err(SessionError::TargetNotAllowed {
            given: decision.to.clone().unwrap_or_default(),
            allowed: plan
                .payload
                .target_mode_ids
                .iter()
                .map(ToString::to_string)
                .collect(),
        });
    };
    let edited = match &decision.plan {
        Some(text) => Some(
            submit_plan::capture_plan(&plan.payload.submission.path, text.as_bytes())
                .map_err(SessionError::EditedPlan)?,
        ),
        None => None,
    };
    if let (false, Some(reason)) = (rejected, &plan.stale) {
        return Err(SessionError::ConfigChanged(reason.clone()));
    }
    Ok(Checked {
        target: Some(target),
        edited,
    })
}

/// Checks a `sha256` pin (what the user saw) against [`PendingDecision::sha256`], ignoring ASCII
/// case: the one place a pin is compared.
///
/// # Errors
/// [`SessionError::Sha256Mismatch`] for a plan, [`SessionError::ArgsSha256Mismatch`] for a tool
/// call.
pub(crate) fn check_pin(pending: &PendingDecision, given: &str) -> Result<(), SessionError> {
    if given.eq_ignore_ascii_case(pending.sha256()) {
        return Ok(());
    }
    let (expected, given) = (pending.sha256().to_owned(), given.to_owned());
    Err(match pending {
        PendingDecision::ToolCall(c) => SessionError::ArgsSha256Mismatch {
            decision_id: c.payload.decision_id.clone(),
            expected,
            given,
        },
        PendingDecision::Plan(_) => SessionError::Sha256Mismatch { expected, given },
    })
}

/// The position in `pending` of what `run_id` / `tool_call_id` name: the first one not decided
/// yet where a model reused the ids (so the current plan can always be decided). `history` is
/// the session's settled decisions, `runs` how many runs it started.
///
/// # Errors
/// [`SessionError::AlreadyDecided`] (or [`SessionError::Expired`]) when what they name was
/// decided, [`SessionError::UnknownToolCall`] when the run waits on something else,
/// [`SessionError::NotSuspended`] for a run that waits on nothing, [`SessionError::UnknownRun`]
/// for a run never started.
pub(crate) fn named(
    pending: &[PendingDecision],
    history: &[DecidedRecord],
    runs: u64,
    run_id: &str,
    tool_call_id: &str,
) -> Result<usize, SessionError> {
    let names = |p: &PendingDecision| p.run_id() == run_id && p.tool_call_id() == tool_call_id;
    if let Some(index) = pending.iter().position(|p| names(p) && p.is_waiting()) {
        return Ok(index);
    }
    if pending.iter().any(names) {
        return Err(SessionError::AlreadyDecided(tool_call_id.to_owned()));
    }
    let decided = history
        .iter()
        .rfind(|d| d.run_id == run_id && d.tool_call_id == tool_call_id);
    let started = run_id
        .strip_prefix("run_")
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| n >= 1 && n <= runs);
    Err(match decided {
        Some(decided) => expired_error(decided)
            .unwrap_or_else(|| SessionError::AlreadyDecided(tool_call_id.to_owned())),
        None if pending.iter().any(|p| p.run_id() == run_id) => SessionError::UnknownToolCall {
            run_id: run_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        },
        None if started => SessionError::NotSuspended(run_id.to_owned()),
        None => SessionError::UnknownRun(run_id.to_owned()),
    })
}

/// The position in `pending` of the decision with id `decision_id`.
///
/// # Errors
/// [`SessionError::AlreadyDecided`] (or [`SessionError::Expired`]) for a decision settled
/// before (in `history`) or decided while others wait, [`SessionError::UnknownDecision`] for
/// one the session never gave out.
pub(crate) fn with_id(
    pending: &[PendingDecision],
    history: &[DecidedRecord],
    decision_id: &str,
) -> Result<usize, SessionError> {
    if let Some(index) = pending.iter().position(|p| p.decision_id() == decision_id) {
        if !pending[index].is_waiting() {
            return Err(SessionError::AlreadyDecided(decision_id.to_owned()));
        }
        return Ok(index);
    }
    match history.iter().find(|d| d.decision_id == decision_id) {
        Some(decided) => Err(expired_error(decided)
            .unwrap_or_else(|| SessionError::AlreadyDecided(decision_id.to_owned()))),
        None => Err(SessionError::UnknownDecision(decision_id.to_owned())),
    }
}

/// `decision_<n>`: the controller's id of the session's `n`-th submitted plan.
pub(crate) fn decision_id_for(n: u64) -> String {
    format!("decision_{n}")
}

// Applying a checked decision: the next state, its events, and what the driver does next
// ([`Decided`]).

/// What a decision's change leaves the driver to do once it is saved (and its events
/// delivered): the effects of the `Decide` input.
#[derive(Debug)]
pub(crate) enum Decided {
    /// Other tool calls of the reply still wait: the run stays suspended.
    Waiting {
        /// The suspended run.
        run_id: Arc<str>,
    },
    /// The decision ended the run: completed (a plan rejected without feedback), or failed
    /// with this error (past the run's revision limit).
    Ended {
        /// The run that ended.
        run_id: Arc<str>,
        /// The revision limit's error, when it failed the run.
        error: Option<ModelError>,
    },
    /// The run resumes: run these approved tool calls in the model's order, then call the
    /// model.
    Resumed {
        /// The resumed run.
        run_id: Arc<str>,
        /// The approved tool calls with their audit records.
        run_tools: Vec<Approved>,
    },
}

/// An approved tool call with its audit record, to run once every call of its reply is decided.
type Approved = (PendingToolCall, DecidedRecord);

/// What the decision of a plan did, for the driver to carry on: the run it resumed, whether
/// it ended the run (a rejection without feedback), or the revision limit that failed it.
struct PlanDecided {
    run_id: Arc<str>,
    ends_run: bool,
    limit: Option<ModelError>,
}

impl Change<'_> {
    /// The `Decide` input: applies `decision`, checked by [`check`] into `checked`, to what waits
    /// at `index`, the one place a decision of any kind is applied.
    ///
    /// # Errors
    /// [`SessionError::NotSuspended`] when nothing waits at `index`; nothing changes.
    pub(crate) fn decide(
        &mut self,
        index: usize,
        decision: Decision,
        checked: Checked,
    ) -> Result<Decided, SessionError> {
        match self.state.pending.get(index) {
            Some(PendingDecision::ToolCall(_)) => {
                let (run_id, approved) = self.decide_tool_call(index, decision)?;
                Ok(match approved {
                    Some(run_tools) => Decided::Resumed { run_id, run_tools },
                    None => Decided::Waiting { run_id },
                })
            }
            Some(PendingDecision::Plan(_)) => {
                let decided = self.decide_plan(index, decision, checked)?;
                let run_id = decided.run_id;
                Ok(match decided.limit {
                    Some(error) => Decided::Ended {
                        run_id,
                        error: Some(error),
                    },
                    None if decided.ends_run => Decided::Ended {
                        run_id,
                        error: None,
                    },
                    None => Decided::Resumed {
                        run_id,
                        run_tools: Vec::new(),
                    },
                })
            }
            None => Err(SessionError::NotSuspended(String::new())),
        }
    }

    /// Applies the checked decision of the plan at `index`: the result for the model, the audit
    /// record, the switch of mode of an approval (before any model call in the new mode), the
    /// end of the run for a rejection without feedback or past the revision limit.
    fn decide_plan(
        &mut self,
        index: usize,
        decision: Decision,
        checked: Checked,
    ) -> Result<PlanDecided, SessionError> {
        let pending = (index < self.state.pending.len()).then(|| self.state.pending.remove(index));
        let Some(PendingDecision::Plan(pending)) = pending else {
            return Err(SessionError::NotSuspended(String::new()));
        };
        let run_id = pending.run_id.clone();
        self.resume_run(&run_id);
        let feedback = decision.feedback();
        let target = checked.target.unwrap_or(pending.target);
        // The mode-change notice travels in the approval result, not as a later system message
        // (many chat templates refuse a system message anywhere but first).
        let notice = match decision.action {
            DecisionAction::Approved => self.mode_notice(target, ModeChangeReason::PlanApproved),
            DecisionAction::Rejected => None,
        };
        let edited = checked.edited;
        let max_revisions = self.config.max_revisions;
        // A rejection with feedback asks for a revision: beyond the run's limit it ends the run.
        let at_limit = decision.action == DecisionAction::Rejected
            && feedback.is_some()
            && self.state.revisions(&run_id) >= max_revisions;
        let (result, outcome) = match (decision.action, feedback) {
            (DecisionAction::Approved, _) => (
                match &edited {
                    Some(edited) => submit_plan::edited_approved_result(
                        &pending.payload.submission,
                        edited,
                        feedback,
                        notice.as_deref(),
                    ),
                    None => submit_plan::approved_result(
                        &pending.payload.submission,
                        feedback,
                        notice.as_deref(),
                    ),
                },
                DecisionOutcome::Approved,
            ),
            (DecisionAction::Rejected, Some(feedback)) if at_limit => (
                submit_plan::rejected_at_revision_limit(feedback, max_revisions),
                DecisionOutcome::Rejected,
            ),
            (DecisionAction::Rejected, Some(feedback)) => (
                submit_plan::rejected_with_feedback(feedback),
                DecisionOutcome::Rejected,
            ),
            (DecisionAction::Rejected, None) => {
                (REJECTED_RESULT.to_owned(), DecisionOutcome::Rejected)
            }
        };
        let ends_run = decision.action == DecisionAction::Rejected && feedback.is_none();
        let approved_to = (decision.action == DecisionAction::Approved).then_some(target);
        let approved_sha256 = edited.map(|e| e.sha256);
        let record = self.plan_record(
            &pending,
            outcome,
            decision.decided_by,
            approved_to,
            approved_sha256,
        );
        self.state.history.push(record.clone());
        self.finish_decision(&run_id, &pending.tool_call_id, result, record);
        if notice.is_some() {
            // The switch happens before any model call in the new mode.
            self.enter_mode(target, ModeChangeReason::PlanApproved);
        }
        if ends_run {
            self.close_run(&run_id, RunState::Completed, None);
        }
        let limit = at_limit.then(|| {
            ModelError::new(format!(
                "the run reached its limit of {max_revisions} plan revisions (rejections with feedback)"
            ))
            .with_kind(ModelErrorKind::RevisionLimit)
        });
        if let Some(error) = &limit {
            self.close_run(&run_id, RunState::Failed, Some(&error.to_string()));
        }
        Ok(PlanDecided {
            run_id,
            ends_run,
            limit,
        })
    }

    /// Records the decision on the tool call at `index` (and, with "always allow", on the
    /// other calls of its tool waiting in the reply). Returns the run, and once every call of
    /// the reply is decided, the approved calls to run in the model's order: the run resumes,
    /// the rejected calls get their results and every record goes to the history.
    fn decide_tool_call(
        &mut self,
        index: usize,
        decision: Decision,
    ) -> Result<(Arc<str>, Option<Vec<Approved>>), SessionError> {
        let decided_at = self.now_rfc3339();
        let Some(PendingDecision::ToolCall(call)) = self.state.pending.get_mut(index) else {
            return Err(SessionError::NotSuspended(String::new()));
        };
        let outcome = match decision.action {
            DecisionAction::Approved => DecisionOutcome::Approved,
            DecisionAction::Rejected => DecisionOutcome::Rejected,
        };
        let record = tool_call_record(
            call,
            outcome,
            decision.decided_by.clone(),
            decision.always_allow,
            decided_at,
        );
        let tool_name = call.payload.tool_name.clone();
        let run_id = call.run_id.clone();
        let allowance = decision.always_allow.then(|| record.clone());
        call.decided = Some(record);
        call.feedback = decision.feedback().map(str::to_owned);
        if let Some(allowance) = allowance {
            self.state.allow_waiting(&tool_name, &allowance);
            if !self.state.always_allowed.contains(&tool_name) {
                self.state.always_allowed.push(tool_name);
            }
        }
        if self.state.pending.iter().any(PendingDecision::is_waiting) {
            return Ok((run_id, None));
        }
        // Every call is decided: the run resumes (same run id), saved with this process's lease.
        let calls = std::mem::take(&mut self.state.pending);
        self.resume_run(&run_id);
        let mut approved = Vec::new();
        for call in calls {
            let PendingDecision::ToolCall(call) = call else {
                continue;
            };
            let Some(record) = call.decided.clone() else {
                continue;
            };
            self.state.history.push(record.clone());
            if record.outcome == Some(DecisionOutcome::Approved) {
                approved.push((call, record));
            } else {
                let output =
                    ToolOutput::error(crate::tool::rejected_result(call.feedback.as_deref()));
                self.finish_decided_tool(&run_id, &call, output, record);
            }
        }
        Ok((run_id, Some(approved)))
    }

    /// A decision carries suspended run `run_id` on: it runs again, saved with this process's
    /// lease (if the process stops before the run's next save, the run is interrupted once the
    /// lease ends, and `continue_run` carries it on), and `agent_start` goes out again (same run
    /// id) before its next events, as Mastra's AgentController does, so every `agent_end` pairs
    /// with an `agent_start`.
    fn resume_run(&mut self, run_id: &Arc<str>) {
        self.state.run = Some((run_id.clone(), RunState::Running));
        self.take_lease();
        let mode_id = self.mode_arc();
        self.emit(Event::AgentStart {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            mode_id,
        });
    }

    /// The audit record of the decision on `pending` (`outcome`, now, by `decided_by`, handed
    /// over to `target` when approved).
    pub(crate) fn plan_record(
        &self,
        pending: &PendingPlan,
        outcome: DecisionOutcome,
        decided_by: Option<String>,
        target: Option<ModeId>,
        approved_sha256: Option<String>,
    ) -> DecidedRecord {
        DecidedRecord {
            run_id: pending.run_id.to_string(),
            tool_call_id: pending.tool_call_id.clone(),
            decision_id: pending.payload.decision_id.clone(),
            outcome: Some(outcome),
            sha256: Some(pending.payload.submission.sha256.clone()),
            approved_sha256,
            decided_at: Some(self.now_rfc3339()),
            decided_by,
            target_mode_id: target.map(|t| self.config.graph.mode(t).id().to_owned()),
            tool_name: None,
            always_allow: false,
            allowed_by: None,
            rule: None,
        }
    }
    /// Ends the decided `submit_plan` call: `tool_end` with the audit record, and the result in
    /// the conversation.
    fn finish_decision(
        &mut self,
        run_id: &Arc<str>,
        call_id: &str,
        result: String,
        record: DecidedRecord,
    ) {
        self.emit(Event::ToolEnd {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            tool_call_id: call_id.to_owned(),
            tool_name: SUBMIT_PLAN.to_owned(),
            result: result.clone(),
            is_error: false,
            decision: Some(record),
        });
        self.state.messages.push(Message::Tool {
            tool_call_id: call_id.to_owned(),
            tool_name: SUBMIT_PLAN.to_owned(),
            content: result,
            is_error: false,
        });
    }
    /// Ends a decided tool call: `tool_end` with the result and the decision's audit record,
    /// and the result in the conversation.
    pub(crate) fn finish_decided_tool(
        &mut self,
        run_id: &Arc<str>,
        call: &PendingToolCall,
        output: ToolOutput,
        record: DecidedRecord,
    ) {
        self.emit(Event::ToolEnd {
            session_id: self.id.clone(),
            run_id: run_id.clone(),
            tool_call_id: call.tool_call_id.clone(),
            tool_name: call.payload.tool_name.clone(),
            result: output.content.clone(),
            is_error: output.is_error,
            decision: Some(record),
        });
        self.state.messages.push(Message::Tool {
            tool_call_id: call.tool_call_id.clone(),
            tool_name: call.payload.tool_name.clone(),
            content: output.content,
            is_error: output.is_error,
        });
    }
}

impl State {
    /// How many revisions run `run_id` was asked for so far: its plans rejected (a rejection
    /// without feedback ends the run, so every earlier one carried feedback), from the history
    /// the session record keeps.
    fn revisions(&self, run_id: &str) -> usize {
        self.history
            .iter()
            .filter(|d| {
                d.run_id == run_id
                    && d.tool_name.is_none()
                    && d.outcome == Some(DecisionOutcome::Rejected)
            })
            .count()
    }

    /// Approves every other call of `tool` that waits in the same reply, by the "always allow"
    /// whose record is `allowance`: each gets its own record, approved, with the allowance's
    /// time and decider and its decision id as `allowedBy`; none is asked about.
    fn allow_waiting(&mut self, tool: &str, allowance: &DecidedRecord) {
        let calls = self.pending.iter_mut().filter_map(|p| match p {
            PendingDecision::ToolCall(call) => Some(call),
            _ => None,
        });
        for call in calls {
            // A call an `ask` rule made wait is asked about, whatever the allowance.
            if call.decided.is_none()
                && call.payload.tool_name == tool
                && call.payload.rule.is_none()
            {
                let mut record = tool_call_record(
                    call,
                    DecisionOutcome::Approved,
                    allowance.decided_by.clone(),
                    false,
                    allowance.decided_at.clone().unwrap_or_default(),
                );
                record.allowed_by = Some(allowance.decision_id.clone());
                call.decided = Some(record);
            }
        }
    }
}

/// The audit record of a decision on the tool call `call`.
pub(crate) fn tool_call_record(
    call: &PendingToolCall,
    outcome: DecisionOutcome,
    decided_by: Option<String>,
    always_allow: bool,
    decided_at: String,
) -> DecidedRecord {
    DecidedRecord {
        run_id: call.run_id.to_string(),
        tool_call_id: call.tool_call_id.clone(),
        decision_id: call.payload.decision_id.clone(),
        outcome: Some(outcome),
        sha256: Some(call.payload.args_sha256.clone()),
        approved_sha256: None,
        decided_at: Some(decided_at),
        decided_by,
        target_mode_id: None,
        tool_name: Some(call.payload.tool_name.clone()),
        always_allow,
        allowed_by: None,
        rule: call.payload.rule.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn plan(stale: Option<&str>) -> PendingDecision {
        PendingDecision::Plan(PendingPlan {
            run_id: Arc::from("run_1"),
            tool_call_id: "c1".to_owned(),
            target: ModeId::from_index(1),
            targets: vec![ModeId::from_index(1), ModeId::from_index(2)],
            payload: SuspendPayload {
                submission: PlanSubmission {
                    path: "plans/a.md".to_owned(),
                    title: "A".to_owned(),
                    plan: "1. Step.".to_owned(),
                    sha256: "ab12".to_owned(),
                },
                target_mode_id: "build".into(),
                target_mode_ids: vec!["build".into(), "build-auto".into()],
                decision_id: "decision_1".to_owned(),
                revision: 1,
                previous_sha256: None,
                diff: None,
                approval_timeout: None,
                deadline_at_ms: None,
                workspace: None,
            },
            stale: stale.map(str::to_owned),
        })
    }

    fn call(n: u64, decided: Option<DecidedRecord>) -> PendingDecision {
        PendingDecision::ToolCall(PendingToolCall {
            run_id: Arc::from("run_2"),
            tool_call_id: format!("c{n}"),
            payload: ToolCallPayload {
                decision_id: format!("decision_{n}"),
                tool_name: "write_file".to_owned(),
                args: serde_json::json!({}),
                args_sha256: "cd34".to_owned(),
                approval_timeout: None,
                deadline_at_ms: None,
                workspace: None,
                rule: None,
            },
            decided,
            feedback: None,
        })
    }

    fn record(run_id: &str, tool_call_id: &str, decision_id: &str) -> DecidedRecord {
        DecidedRecord {
            run_id: run_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            decision_id: decision_id.to_owned(),
            outcome: Some(crate::event::DecisionOutcome::Rejected),
            sha256: None,
            approved_sha256: None,
            decided_at: None,
            decided_by: None,
            target_mode_id: None,
            tool_name: None,
            always_allow: false,
            allowed_by: None,
            rule: None,
        }
    }

    #[test]
    fn a_pin_is_compared_ignoring_case_and_names_what_was_shown() {
        assert_eq!(check_pin(&plan(None), "AB12"), Ok(()));
        assert_eq!(
            check_pin(&plan(None), "ffff"),
            Err(SessionError::Sha256Mismatch {
                expected: "ab12".to_owned(),
                given: "ffff".to_owned(),
            })
        );
        assert_eq!(
            check_pin(&call(1, None), "ab12"),
            Err(SessionError::ArgsSha256Mismatch {
                decision_id: "decision_1".to_owned(),
                expected: "cd34".to_owned(),
                given: "ab12".to_owned(),
            })
        );
    }

    #[test]
    fn a_plan_approval_resolves_its_target_and_its_edit_once() {
        let checked = check(&plan(None), &Decision::approve().to("build-auto")).expect("ok");
        assert_eq!(checked.target, Some(ModeId::from_index(2)));
        let edit = Decision::approve().with_plan("# B\n\n1. Other.\n");
        let checked = check(&plan(None), &edit).expect("ok");
        assert_eq!(checked.edited.map(|e| e.title), Some("B".to_owned()));
        assert!(matches!(
            check(&plan(None), &Decision::approve().to("review")),
            Err(SessionError::TargetNotAllowed { .. })
        ));
        assert!(matches!(
            check(&plan(None), &Decision::approve().with_plan("  \n")),
            Err(SessionError::EditedPlan(_))
        ));
    }

    #[test]
    fn each_kind_refuses_the_parts_of_the_other() {
        let malformed =
            |r: Result<Checked, SessionError>| matches!(r, Err(SessionError::MalformedDecision(_)));
        assert!(malformed(check(
            &plan(None),
            &Decision::approve().always_allow()
        )));
        assert!(malformed(check(
            &plan(None),
            &Decision::reject().to("build")
        )));
        assert!(malformed(check(
            &call(1, None),
            &Decision::approve().to("build")
        )));
        assert!(malformed(check(
            &call(1, None),
            &Decision::approve().with_plan("# A")
        )));
        assert!(malformed(check(
            &call(1, None),
            &Decision::reject().always_allow()
        )));
        assert!(check(&call(1, None), &Decision::approve().always_allow()).is_ok());
    }

    #[test]
    fn a_stale_plan_can_be_rejected_not_approved() {
        let stale = plan(Some("its target is gone"));
        assert_eq!(
            check(&stale, &Decision::approve()).map(drop),
            Err(SessionError::ConfigChanged("its target is gone".to_owned()))
        );
        assert!(check(&stale, &Decision::reject()).is_ok());
    }

    #[test]
    fn ids_resolve_to_what_waits_first_then_to_the_history() {
        let decided = record("run_2", "c1", "decision_1");
        let pending = [call(1, Some(decided.clone())), call(2, None)];
        assert_eq!(named(&pending, &[], 2, "run_2", "c2"), Ok(1));
        assert_eq!(
            named(&pending, &[], 2, "run_2", "c1"),
            Err(SessionError::AlreadyDecided("c1".to_owned()))
        );
        assert!(matches!(
            named(&pending, &[], 2, "run_2", "c9"),
            Err(SessionError::UnknownToolCall { .. })
        ));
        assert_eq!(
            named(&[], &[], 2, "run_1", "c1"),
            Err(SessionError::NotSuspended("run_1".to_owned()))
        );
        assert_eq!(
            named(&[], &[], 2, "run_3", "c1"),
            Err(SessionError::UnknownRun("run_3".to_owned()))
        );
        let history = [record("run_1", "c1", "decision_0")];
        assert_eq!(
            named(&[], &history, 2, "run_1", "c1"),
            Err(SessionError::AlreadyDecided("c1".to_owned()))
        );
        assert_eq!(with_id(&pending, &[], "decision_2"), Ok(1));
        assert_eq!(
            with_id(&pending, &[], "decision_1"),
            Err(SessionError::AlreadyDecided("decision_1".to_owned()))
        );
        assert_eq!(
            with_id(&pending, &history, "decision_0"),
            Err(SessionError::AlreadyDecided("decision_0".to_owned()))
        );
        assert_eq!(
            with_id(&pending, &[], "decision_9"),
            Err(SessionError::UnknownDecision("decision_9".to_owned()))
        );
    }
}
