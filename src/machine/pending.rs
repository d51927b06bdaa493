//! What waits for the host's decision ([`PendingDecision`]: a plan, [`PendingPlan`], or a tool
//! call, [`PendingToolCall`]): what [`crate::Session::pending`] shows and a host loops over once,
//! whatever the kind.

use std::sync::Arc;

use serde_json::Value;

use crate::event::{DecidedRecord, SuspendPayload, ToolCallPayload, ToolSuspendPayload, WaitTerms};
use crate::exchange::SUBMIT_PLAN;
use crate::mode::ModeId;

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
// A session holds a few of them (one reply's calls at most): boxing each kind would only cost
// every host a deref.
#[allow(clippy::large_enum_variant)]
pub enum PendingDecision {
    /// A plan waiting for approval.
    Plan(PendingPlan),
    /// A tool call waiting for approval.
    ToolCall(PendingToolCall),
    /// A call its tool suspended ([`crate::ToolOutput::suspend`]), waiting for the user's
    /// answer: a question of `ask_user`, or another tool's own suspension.
    Suspension(PendingSuspension),
}

impl PendingDecision {
    /// What waits, as `tool_suspended` showed it ([`crate::event::Suspension`], tagged by
    /// `kind`): the captured plan, the tool call's name and arguments, or what its tool showed
    /// the user. What [`crate::RunOutcome`]'s JSON lists for each pending decision.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, RunOutcome, SessionOptions, ToolRegistry};
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
    /// session.send_message("Add dark mode").await?;
    /// let shown = serde_json::to_value(session.pending()[0].suspension())?;
    /// assert_eq!(shown["kind"], "plan");
    /// assert_eq!(shown["decisionId"], session.pending()[0].decision_id());
    /// # Ok(())
    /// # }
    /// ```
    pub fn suspension(&self) -> crate::event::Suspension {
        use crate::event::Suspension;
        match self {
            PendingDecision::Plan(plan) => Suspension::Plan(plan.payload.clone()),
            PendingDecision::ToolCall(call) => Suspension::ToolCall(call.payload.clone()),
            PendingDecision::Suspension(suspension) => Suspension::Tool(suspension.payload.clone()),
        }
    }

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
        self.run_arc()
    }

    /// The suspended run's id, shared.
    pub(crate) fn run_arc(&self) -> &Arc<str> {
        match self {
            PendingDecision::Plan(p) => &p.run_id,
            PendingDecision::ToolCall(c) => &c.run_id,
            PendingDecision::Suspension(s) => &s.run_id,
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
            PendingDecision::Suspension(s) => &s.tool_call_id,
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
            PendingDecision::Suspension(s) => s.decision_id(),
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
            PendingDecision::Suspension(s) => s.tool_name(),
        }
    }

    /// The SHA-256 a [`Decision::with_sha256`](crate::Decision::with_sha256) pin must equal: the plan's `sha256`, the
    /// tool call's `argsSha256`, or a suspension's `payloadSha256`.
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
            PendingDecision::Suspension(s) => &s.payload.payload_sha256,
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
        self.terms().deadline_at_ms
    }

    /// The terms it waits under, fixed when it began to wait: its `approvalTimeout`, deadline,
    /// `onTimeout` and the workspace an approval acts in ([`WaitTerms`]).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\napprovalTimeout = \"1h\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    ///     "modes.toml",
    /// )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let terms = session.pending()[0].terms();
    /// assert_eq!(terms.approval_timeout.as_deref(), Some("1h"));
    /// assert!(terms.deadline_at_ms.is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn terms(&self) -> &WaitTerms {
        match self {
            PendingDecision::Plan(p) => &p.payload.terms,
            PendingDecision::ToolCall(c) => &c.payload.terms,
            PendingDecision::Suspension(s) => &s.payload.terms,
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
            PendingDecision::Suspension(s) => s.decision(),
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
            PendingDecision::ToolCall(_) | PendingDecision::Suspension(_) => None,
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
            PendingDecision::Plan(_) | PendingDecision::Suspension(_) => None,
        }
    }

    /// The subagent this decision comes from, when a child's call waits in its parent's
    /// session ([`crate::subagent::SubagentOrigin`]: its type, child id, the parent's
    /// `subagent` call and the decision's id in the child); `None` for the session's own. It
    /// is decided like any other, by its [`PendingDecision::decision_id`]; the child then
    /// carries on.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::PendingDecision;
    /// fn whose(pending: &PendingDecision) -> String {
    ///     match pending.subagent() {
    ///         Some(origin) => format!("subagent {} ({})", origin.agent_type, origin.child_id),
    ///         None => "this session".to_owned(),
    ///     }
    /// }
    /// # let _ = whose;
    /// ```
    pub fn subagent(&self) -> Option<&crate::subagent::SubagentOrigin> {
        match self {
            PendingDecision::Plan(_) => None,
            PendingDecision::ToolCall(c) => c.payload.subagent.as_deref(),
            PendingDecision::Suspension(s) => s.payload.subagent.as_deref(),
        }
    }

    /// The tool's own suspension (a question, or another tool's), if this is one.
    pub fn as_suspension(&self) -> Option<&PendingSuspension> {
        match self {
            PendingDecision::Suspension(s) => Some(s),
            PendingDecision::Plan(_) | PendingDecision::ToolCall(_) => None,
        }
    }
}

/// A call its tool suspended ([`crate::ToolOutput::suspend`]), waiting for the user's answer:
/// which run and call, what the tool showed ([`ToolSuspendPayload`]: the payload, the schema an
/// answer must fit, the payload's SHA-256), and, while other calls of the same reply still
/// wait, the answer given to it already.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingSuspension {
    pub(crate) run_id: Arc<str>,
    pub(crate) tool_call_id: String,
    /// Shared with the `tool_suspended` event and the run's outcome: never copied.
    pub(crate) payload: Arc<ToolSuspendPayload>,
    pub(crate) decided: Option<DecidedRecord>,
    pub(crate) answer: Option<Value>,
    pub(crate) feedback: Option<String>,
}

impl PendingSuspension {
    /// The suspended run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The model's id of the call.
    pub fn tool_call_id(&self) -> &str {
        &self.tool_call_id
    }

    /// The controller's id of the decision (`decision_N`).
    pub fn decision_id(&self) -> &str {
        &self.payload.decision_id
    }

    /// The tool that suspended its call (`ask_user` for a question).
    pub fn tool_name(&self) -> &str {
        &self.payload.tool_name
    }

    /// `question` (for `ask_user`) or `suspension`.
    pub fn kind(&self) -> crate::event::SuspensionKind {
        self.payload.kind
    }

    /// What `tool_suspended` carried for it: the payload shown to the user, the answer's
    /// schema, the payload's SHA-256.
    pub fn payload(&self) -> &ToolSuspendPayload {
        &self.payload
    }

    /// The audit record of the answer given while other calls of the reply still wait; `None`
    /// while it waits.
    pub fn decision(&self) -> Option<&DecidedRecord> {
        self.decided.as_ref()
    }

    /// The answer given while other calls of the reply still wait, checked against the schema.
    pub fn answer(&self) -> Option<&Value> {
        self.answer.as_ref()
    }

    /// The feedback the user gave when declining to answer while other calls of the reply still
    /// wait (the model receives it with the "not answered" result); `None` otherwise.
    pub fn feedback(&self) -> Option<&str> {
        self.decided.as_ref()?;
        self.feedback.as_deref()
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

    /// Every mode an approval may hand over to ([`Decision::to`](crate::Decision::to)), fixed at submit time:
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
    /// [`Decision::with_sha256`](crate::Decision::with_sha256) pin must equal.
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
        self.decided.as_ref()?.feedback.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machine::decision::Decision;
    use crate::machine::input::{Input, Suspend};
    use crate::machine::next::Next;
    use crate::machine::rig::{Rig, T0, call};
    use crate::plan::PlanSubmission;

    fn suspended_plan(rig: &mut Rig) -> PendingDecision {
        let run = rig.start("plan");
        let suspend = Suspend::Plan {
            run_id: run,
            tool_call_id: "p1".to_owned(),
            submission: PlanSubmission {
                path: "a.md".to_owned(),
                title: "A".to_owned(),
                plan: "1. Step.".to_owned(),
                sha256: "ab12".to_owned(),
            },
            review: None,
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        rig.state.pending[0].clone()
    }

    fn suspended_call(rig: &mut Rig) -> PendingDecision {
        rig.state.mode = rig.mode("build");
        let run = rig.start("write");
        let args = json!({"path": "a.txt"});
        let Next::RunToolCalls { at, .. } =
            rig.reply(&run, "", vec![call("w1", "write_file", args)])
        else {
            panic!("runs the call");
        };
        let suspend = Suspend::ToolCalls {
            run_id: run,
            at,
            asked: vec![crate::machine::input::Asked::at(0, None)],
            suspended: Vec::new(),
            children: Vec::new(),
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        rig.state.pending[0].clone()
    }

    #[test]
    fn a_pending_plan_shows_what_was_submitted() {
        let mut rig = Rig::new();
        let pending = suspended_plan(&mut rig);
        assert_eq!(pending.run_id(), "run_1");
        assert_eq!(&**pending.run_arc(), "run_1");
        assert_eq!(pending.tool_call_id(), "p1");
        assert_eq!(pending.decision_id(), "decision_1");
        assert_eq!(pending.tool_name(), SUBMIT_PLAN);
        assert_eq!(pending.sha256(), "ab12");
        assert_eq!(pending.deadline_at_ms(), Some(T0 + 3_600_000));
        assert_eq!(pending.decision(), None);
        assert!(pending.is_waiting());
        assert!(pending.as_tool_call().is_none());
        let plan = pending.as_plan().expect("a plan");
        assert_eq!(plan.run_id(), "run_1");
        assert_eq!(plan.tool_call_id(), "p1");
        assert_eq!(plan.decision_id(), "decision_1");
        assert_eq!(plan.target(), rig.mode("build"));
        assert_eq!(plan.targets(), [rig.mode("build"), rig.mode("build-auto")]);
        assert_eq!(plan.payload().submission.title, "A");
        assert_eq!(plan.stale_reason(), None);
        assert_eq!(plan.chosen_target(None), Some(rig.mode("build")));
        assert_eq!(
            plan.chosen_target(Some("build-auto")),
            Some(rig.mode("build-auto"))
        );
        assert_eq!(plan.chosen_target(Some("plan")), None);
        assert_eq!(pending.check_sha256("AB12"), Ok(()));
        assert!(pending.check_sha256("ab13").is_err());
        assert_eq!(pending.check(&Decision::approve().to("build-auto")), Ok(()));
        assert!(pending.check(&Decision::approve().to("plan")).is_err());
        let mut stale = plan.clone();
        stale.stale = Some("gone".to_owned());
        assert_eq!(stale.stale_reason(), Some("gone"));
    }

    #[test]
    fn a_pending_tool_call_shows_its_call_and_its_decision_while_others_wait() {
        let mut rig = Rig::new();
        let pending = suspended_call(&mut rig);
        assert_eq!(pending.run_id(), "run_1");
        assert_eq!(&**pending.run_arc(), "run_1");
        assert_eq!(pending.tool_call_id(), "w1");
        assert_eq!(pending.decision_id(), "decision_1");
        assert_eq!(pending.tool_name(), "write_file");
        let sha = crate::jcs::sha256(&json!({"path": "a.txt"}));
        assert_eq!(pending.sha256(), sha);
        assert_eq!(pending.deadline_at_ms(), Some(T0 + 1_800_000));
        assert!(pending.is_waiting());
        assert!(pending.as_plan().is_none());
        let waiting = pending.as_tool_call().expect("a tool call");
        assert_eq!(waiting.run_id(), "run_1");
        assert_eq!(waiting.tool_call_id(), "w1");
        assert_eq!(waiting.decision_id(), "decision_1");
        assert_eq!(waiting.tool_name(), "write_file");
        assert_eq!(waiting.args(), &json!({"path": "a.txt"}));
        assert_eq!(waiting.args_sha256(), sha);
        assert_eq!(waiting.payload().tool_name, "write_file");
        assert_eq!(waiting.decision(), None);
        assert_eq!(waiting.feedback(), None);
        assert!(pending.check(&Decision::approve().to("build")).is_err());
        assert_eq!(pending.check(&Decision::approve().always_allow()), Ok(()));
        // Decided while another call waits.
        let mut decided = waiting.clone();
        let record = crate::machine::decide::tool_call_record(
            waiting,
            crate::event::DecisionOutcome::Rejected,
            None,
            false,
            "2026-12-01T18:00:00Z".to_owned(),
        );
        let record = DecidedRecord {
            feedback: Some("no".to_owned()),
            ..record
        };
        decided.decided = Some(record.clone());
        assert_eq!(decided.decision(), Some(&record));
        assert_eq!(decided.feedback(), Some("no"));
        let decided = PendingDecision::ToolCall(decided);
        assert_eq!(decided.decision(), Some(&record));
        assert!(!decided.is_waiting());
    }
}
