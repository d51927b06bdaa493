//! The host's decision ([`Decision`]): what [`crate::Session::resume`] and
//! [`crate::Session::decide`] take. It is checked against what waits
//! ([`super::pending::PendingDecision`]) in one place, [`super::check::check`], and applied in
//! one place, the `Decide` input ([`super::decide`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::SessionError;
use crate::allowance::{AllowancePattern, AllowanceScope};
use crate::comment::PlanComment;
// For the docs' links: the docs are also the JSON Schema's descriptions, so they keep their text.
#[cfg(doc)]
use crate::event::SuspendPayload;

/// The host's answer to a submitted plan.
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
    schemars(inline, schema_with = "crate::names::schema::<DecisionAction>")
)]
#[non_exhaustive]
pub enum DecisionAction {
    /// The plan (or tool call) is approved: hand over to the target mode (or run the call).
    Approved,
    /// The plan (or tool call) is rejected: stay in the mode (or do not run it); a call its
    /// tool suspended is declined (the model is told the user did not answer).
    Rejected,
    /// A call its tool suspended is answered ([`Decision::answer`]): the answer, checked
    /// against the schema it suspended with, goes to the tool's resume step.
    Answered,
}

impl DecisionAction {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Resume data for a suspended `submit_plan` or a tool call waiting for approval:
/// `{ "action": "approved" | "rejected", "feedback"?, "sha256"?, "decidedBy"?, "targetModeId"?,
/// "plan"?, "alwaysAllow"? }`. When `sha256` is given it must equal the captured plan's hash (for
/// a tool call, its `argsSha256`), so a host never approves a plan other than the one it showed.
/// `targetModeId` chooses where an approval hands over to, among the targets the plan lists
/// ([`SuspendPayload::target_mode_ids`]). `plan` is the user's edited text of the plan, approved
/// instead of the submitted one ([`Decision::with_plan`]). `alwaysAllow` with the approval of a
/// tool call allows its tool until the mode changes ([`Decision::always_allow`]), or for the
/// `scope` it names (`"session"`, `"workspace"`), narrowed by `allow` to the calls a pattern
/// matches ([`Decision::allow_only`]). The guide's
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
        `feedback`, `sha256` and `decidedBy` apply to any decision; `targetModeId`, `plan`, \
        `model` and `steps` to the approval of a plan, `comments` to its rejection; `alwaysAllow` (with its \
        `scope` and its narrowing pattern `allow`) to the approval of a tool call; `answer` to \
        `\"action\": \"answered\"`, the answer to a call its tool suspended. Anything else \
        is refused with `MalformedDecision` and changes nothing."
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Decision {
    /// Approved, rejected, or (a call its tool suspended) answered.
    pub action: DecisionAction,
    /// Feedback for the model: with a rejection, what to revise (a plan) or why not (a tool
    /// call); with a plan's approval, a note the next mode receives together with the approved
    /// plan; with a tool call's approval, a note the model receives with the tool's result (and
    /// the decision's record keeps, [`crate::event::DecidedRecord::feedback`]). Blank feedback
    /// counts as none.
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
    /// With the approval of a tool call: allow its tool's later calls without asking
    /// (`alwaysAllow`, [`Decision::always_allow`]), until the mode changes unless `scope` says
    /// otherwise. Refused on a rejection and on a plan.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always_allow: bool,
    /// With `alwaysAllow`: how long the allowance lasts and where it applies (`scope`:
    /// `mode`, the default when left out; `session`; `workspace`: [`AllowanceScope`],
    /// [`Decision::scope`]). Refused without `alwaysAllow`, and `plan` (given only by approving
    /// a plan's declared files) always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", extend("enum" = ["mode", "session", "workspace", null]))
    )]
    pub scope: Option<AllowanceScope>,
    /// With `alwaysAllow`: the pattern, written as a rule's (`{"path": "src/**"}`, `{"arg":
    /// "command", "glob": "git *"}`), that narrows the allowance to the calls it matches
    /// (`allow`, [`Decision::allow_only`]); left out, every call of the tool. Refused without
    /// `alwaysAllow`, and when the pattern does not compile.
    #[serde(default, rename = "allow", skip_serializing_if = "Option::is_none")]
    pub allow: Option<Box<AllowancePattern>>,
    /// With the rejection of a plan: comments on lines of the plan shown
    /// ([`Decision::comment`]). Each names a line of the plan (from 1) and must not be blank;
    /// the model receives each with the line it quotes. Refused on an approval and on a tool
    /// call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<PlanComment>,
    /// With the approval of a plan: the model the next mode runs with (`model`,
    /// [`Decision::model`]), by an id the host's model chooser builds, until the next change of
    /// mode. Refused on a rejection and on a tool call, and when the host cannot build it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// With the approval of a plan: the numbers of the steps approved (`steps`,
    /// [`Decision::steps`]), as the plan numbers them (`1. ...`, `2. ...`; its
    /// [`SuspendPayload::steps`]); the others are not approved. The next mode gets the plan
    /// with the other steps marked as not approved, and the task list holds only these. Left
    /// out, the whole plan is approved. Each number must name exactly one of the plan's steps,
    /// once; an empty list, a rejection or an edited plan with `steps`, and a tool call are
    /// refused ([`SessionError::PlanSteps`], [`SessionError::MalformedDecision`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<u64>>,
    /// With `"action": "answered"`: the answer to a call its tool suspended (a question of
    /// `ask_user`, or a tool's own form), any JSON that fits the schema the call suspended with
    /// ([`Decision::answer`]). Refused with any other action and on a plan or a tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Box<Value>>,
    /// The channel the decision came through ([`crate::quorum::Via`]), set by the host
    /// ([`Decision::via`]), never read from resume data: a client cannot say it decided at
    /// the terminal. Kept in the audit record (`via`).
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub via: Option<crate::quorum::Via>,
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
        Self::new(DecisionAction::Approved)
    }

    /// Approve with a note (`"also update the docs page"`): for a plan, the model receives it in
    /// the approval result, beside the approved plan; for a tool call, with the tool's result
    /// (after it, in a paragraph of its own).
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

    /// Answer a call its tool suspended with `answer` (`{"action": "answered", "answer": "staging"}`):
    /// for a question of `ask_user`, the text (no options), one option's label
    /// (`single_select`) or an array of labels (`multi_select`); for a tool of your own, what
    /// its answer schema takes (as JSON: `{"action": "answered", "answer": "staging"}`). An answer that does not fit is refused
    /// ([`SessionError::InvalidAnswer`]) and changes nothing; pin it to what the user saw with
    /// [`Decision::with_sha256`] and the payload's `payloadSha256`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{Decision, session::DecisionAction};
    /// let decision = Decision::answer(serde_json::json!("staging"));
    /// assert_eq!(decision.action, DecisionAction::Answered);
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({ "action": "answered", "answer": "staging" }),
    /// );
    /// ```
    pub fn answer(answer: Value) -> Self {
        Self {
            answer: Some(Box::new(answer)),
            ..Self::new(DecisionAction::Answered)
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
        Self::new(DecisionAction::Rejected)
    }

    /// A plain decision of `action`: no feedback, no pin, no decider, no target, no edit.
    pub(crate) fn new(action: DecisionAction) -> Self {
        Self {
            action,
            feedback: None,
            sha256: None,
            decided_by: None,
            to: None,
            plan: None,
            always_allow: false,
            scope: None,
            allow: None,
            comments: Vec::new(),
            model: None,
            answer: None,
            steps: None,
            via: None,
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

    /// The same decision, taken through `via` (the terminal, `decide`, ACP, HTTP, ...): each
    /// host says which, and the audit record keeps it (`via`, [`crate::quorum::Via`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{Decision, quorum::Via};
    /// let decision = Decision::approve().decided_by("alice").via(Via::Decide);
    /// assert_eq!(decision.via, Some(Via::Decide));
    /// // Not part of the resume data a client sends.
    /// assert_eq!(serde_json::to_value(&decision)?, serde_json::json!({ "action": "approved", "decidedBy": "alice" }));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn via(mut self, via: crate::quorum::Via) -> Self {
        self.via = Some(via);
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
    /// allowance given in a planning mode never runs the next mode's calls. It approves this
    /// call, the one whose arguments the user saw, and no other: the other calls waiting in the
    /// same reply are each decided on their own (asked about by the hosts); the tool's calls in
    /// later replies run without waiting, each with an audit record whose
    /// [`crate::event::DecidedRecord::allowed_by`] names the allowance. Kept in the session record and shown by
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

    /// The same "always allow", for `scope` ([`AllowanceScope`]): `Mode` (the default: until
    /// the mode changes), `Session` (for the rest of the session, while it is in this mode) or
    /// `Workspace` (kept in the session store for every session in this workspace under this
    /// config, in this mode; refused without a store that keeps them). Also sets
    /// `alwaysAllow`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{Decision, allowance::AllowanceScope};
    /// let decision = Decision::approve().always_allow().scope(AllowanceScope::Workspace);
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({ "action": "approved", "alwaysAllow": true, "scope": "workspace" }),
    /// );
    /// ```
    pub fn scope(mut self, scope: AllowanceScope) -> Self {
        self.always_allow = true;
        self.scope = Some(scope);
        self
    }

    /// The same "always allow", narrowed to the calls `pattern` matches (a rule's pattern:
    /// [`AllowancePattern::path`], [`AllowancePattern::glob`]), matched as an `allow` rule is.
    /// A narrowed allowance does not approve the other calls waiting in the same reply: each is
    /// asked about, and it covers the calls that come after. Also sets `alwaysAllow`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{Decision, allowance::{AllowancePattern, AllowanceScope}};
    /// let decision = Decision::approve()
    ///     .always_allow()
    ///     .scope(AllowanceScope::Workspace)
    ///     .allow_only(AllowancePattern::path("src/**"));
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({
    ///         "action": "approved",
    ///         "alwaysAllow": true,
    ///         "scope": "workspace",
    ///         "allow": { "path": "src/**" },
    ///     }),
    /// );
    /// ```
    pub fn allow_only(mut self, pattern: AllowancePattern) -> Self {
        self.always_allow = true;
        self.allow = Some(Box::new(pattern));
        self
    }

    /// The scope of the allowance this decision gives: `None` without `alwaysAllow`.
    pub(crate) fn allowance_scope(&self) -> Option<AllowanceScope> {
        self.always_allow.then(|| self.scope.unwrap_or_default())
    }

    /// The same rejection, with a comment on line `line` of the plan shown (from 1, the `# title`
    /// line first, as [`crate::comment::plan_lines`] numbers them): the model receives `text`
    /// with the line it quotes (neutralized and bounded), the audit record keeps both
    /// ([`crate::event::DecidedRecord::comments`]), and the next revision shows them again beside its
    /// diff ([`crate::event::SuspendPayload::comments`]). Repeat it for more lines. A rejection with
    /// comments asks for a revision, as one with feedback does. A line outside the plan, a blank
    /// text ([`SessionError::PlanComment`]), a comment with an approval or on a tool call
    /// ([`SessionError::MalformedDecision`]) are refused and change nothing.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// let decision = Decision::reject().comment(4, "staging first").with_sha256("53fa");
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({
    ///         "action": "rejected",
    ///         "comments": [{ "line": 4, "text": "staging first" }],
    ///         "sha256": "53fa",
    ///     }),
    /// );
    /// ```
    pub fn comment(mut self, line: u64, text: impl Into<String>) -> Self {
        self.comments.push(PlanComment {
            line,
            text: text.into(),
        });
        self
    }

    /// The same approval, running the next mode with the model `id`, as the host's model
    /// chooser builds it ([`crate::controller::AgentControllerBuilder::model_chooser`]; the
    /// CLI's are its `--model` specs, `openai/gpt-4o-mini`). The chosen model runs the mode the
    /// plan hands over to until the session's next change of mode (a manual switch or the next
    /// approved plan), then the session's own model runs again ([`crate::Session::chosen_model`]);
    /// the audit record keeps it ([`crate::event::DecidedRecord::model`]). A model the host
    /// cannot build, or any model when it has no chooser, is refused
    /// ([`SessionError::UnknownModel`]) before anything changes; so is a model with a rejection
    /// or on a tool call ([`SessionError::MalformedDecision`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// let decision = Decision::approve().model("openai/gpt-4o-mini");
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({ "action": "approved", "model": "openai/gpt-4o-mini" }),
    /// );
    /// ```
    pub fn model(mut self, id: impl Into<String>) -> Self {
        self.model = Some(id.into());
        self
    }

    /// The same approval, of only the plan's steps numbered `steps` (as the plan numbers them:
    /// `1. ...`, `2. ...`): the next mode gets the plan with its other steps marked as not
    /// approved and told which ("Approved steps: 1, 2, 3, 5; not approved: 4"), the task list
    /// (where the mode has the task tools) holds only these, the decision's record keeps them
    /// ([`crate::event::DecidedRecord::steps`]), and a [`Decision::with_sha256`] pin still names
    /// the plan shown. A number that names no step of the plan (or two: a plan that numbers two
    /// steps alike), a number named twice and an empty list are refused
    /// ([`SessionError::PlanSteps`]); steps with a rejection, with an edited plan or on a tool
    /// call ([`SessionError::MalformedDecision`]). Each changes nothing.
    /// [`Decision::parse_steps`] reads the list as a person types it (`1-3,5`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// let decision = Decision::approve().steps([1, 2, 3, 5]);
    /// assert_eq!(
    ///     serde_json::to_value(&decision).unwrap(),
    ///     serde_json::json!({ "action": "approved", "steps": [1, 2, 3, 5] }),
    /// );
    /// ```
    pub fn steps(mut self, steps: impl IntoIterator<Item = u64>) -> Self {
        self.steps = Some(steps.into_iter().collect());
        self
    }

    /// Reads a list of step numbers as a person types it: numbers and ranges separated by
    /// commas (`1-3,5` is 1, 2, 3 and 5; spaces around the parts are ignored), for
    /// [`Decision::steps`]. Whether the plan has those steps is checked when the decision is
    /// (by [`crate::session::PendingDecision::check`] and every way to decide).
    ///
    /// # Errors
    /// [`SessionError::PlanSteps`], saying which part, for an empty list or part, anything
    /// but digits and `-`, 0, a number of more than nine digits, a range backwards (`5-3`), and
    /// more than [`MAX_TASKS`](crate::tool::tasks::MAX_TASKS) numbers in all.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// assert_eq!(Decision::parse_steps("1-3, 5").unwrap(), [1, 2, 3, 5]);
    /// assert!(Decision::parse_steps("3-1").is_err());
    /// assert!(Decision::parse_steps("1-99999").is_err());
    /// ```
    pub fn parse_steps(text: &str) -> Result<Vec<u64>, SessionError> {
        super::steps::parse(text).map_err(SessionError::PlanSteps)
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

    /// Whether this decision names what it approves: `Ok` for an approval pinned to a
    /// `sha256` ([`Decision::with_sha256`]: a plan's `sha256`, a tool call's `argsSha256`, as
    /// `pending --json` lists them) and for every decision that is no approval. A host whose
    /// person approves what was shown to them, not whatever waits now, requires it: `serve`
    /// does, so an approval sent from a page cannot approve a plan revised after the person
    /// read it. Without a pin, [`Session::decide`](crate::Session::decide) approves what waits.
    ///
    /// # Errors
    /// [`SessionError::MalformedDecision`] for an approval without a `sha256` (or a blank
    /// one), naming the field.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Decision;
    /// assert!(Decision::approve().with_sha256("53fa").check_pinned().is_ok());
    /// assert!(Decision::reject().check_pinned().is_ok());
    /// let unpinned = Decision::approve().check_pinned().unwrap_err();
    /// assert!(unpinned.to_string().contains("`sha256` is missing"));
    /// ```
    pub fn check_pinned(&self) -> Result<(), SessionError> {
        let pinned = self.sha256.as_deref().is_some_and(|s| !s.trim().is_empty());
        if self.action != DecisionAction::Approved || pinned {
            return Ok(());
        }
        Err(SessionError::MalformedDecision(
            "`sha256` is missing: an approval must name what it approves (the plan's `sha256`, or the tool call's `argsSha256`, as `pending --json` lists them)".to_owned(),
        ))
    }

    /// Mastra's bare resume data for a suspended call, as an answer: a string, or an array of
    /// strings (`["a", "b"]`); `None` for anything else. An action's name alone (`"approved"`,
    /// `["approved"]`: serde's array form of a decision) is never read as an answer.
    pub(crate) fn bare_answer(value: &Value) -> Option<Self> {
        let bare = match value {
            Value::String(_) => true,
            Value::Array(items) => !items.is_empty() && items.iter().all(Value::is_string),
            _ => false,
        };
        let first = match value {
            Value::Array(items) => items.first(),
            other => Some(other),
        };
        let action_name = matches!(
            first.and_then(Value::as_str),
            Some("approved" | "rejected" | "answered")
        );
        (bare && !action_name).then(|| Self::answer(value.clone()))
    }

    /// The feedback, trimmed; `None` when there is none or it is blank.
    pub(crate) fn feedback(&self) -> Option<&str> {
        self.feedback
            .as_deref()
            .map(str::trim)
            .filter(|f| !f.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_bare_string_or_string_array_is_an_answer_and_an_action_name_alone_is_refused() {
        for bare in [json!("staging"), json!(["a", "b"])] {
            assert_eq!(
                Decision::bare_answer(&bare),
                Some(Decision::answer(bare.clone())),
                "{bare}"
            );
            // Not a decision object: the schema's parser refuses it.
            assert!(Decision::from_json(&bare).is_err());
        }
        for refused in [
            json!("approved"),
            json!("rejected"),
            json!(["approved"]),
            json!([]),
            json!([1]),
            json!(3),
        ] {
            assert_eq!(Decision::bare_answer(&refused), None, "{refused}");
        }
        let answered = json!({ "action": "answered", "answer": { "confirm": true } });
        assert_eq!(
            Decision::from_json(&answered),
            Ok(Decision::answer(json!({ "confirm": true })))
        );
    }

    #[test]
    fn each_builder_sets_its_part_alone() {
        let plain = Decision::approve();
        assert_eq!(plain.action, DecisionAction::Approved);
        assert_eq!(
            serde_json::to_value(&plain).expect("json"),
            json!({"action": "approved"})
        );
        assert_eq!(
            serde_json::to_value(Decision::reject()).expect("json"),
            json!({"action": "rejected"})
        );
        let noted = Decision::approve_with("docs too");
        assert_eq!(noted.action, DecisionAction::Approved);
        assert_eq!(noted.feedback.as_deref(), Some("docs too"));
        let revise = Decision::reject_with("tests");
        assert_eq!(revise.action, DecisionAction::Rejected);
        assert_eq!(revise.feedback.as_deref(), Some("tests"));
        let all = Decision::reject()
            .with_sha256("ab")
            .decided_by("alice")
            .to("build")
            .with_plan("# P")
            .always_allow();
        assert_eq!(
            serde_json::to_value(&all).expect("json"),
            json!({
                "action": "rejected",
                "sha256": "ab",
                "decidedBy": "alice",
                "targetModeId": "build",
                "plan": "# P",
                "alwaysAllow": true,
            })
        );
    }

    #[test]
    fn a_decision_is_read_from_an_object_only() {
        let read = Decision::from_json(&json!({"action": "rejected", "feedback": "x"}));
        assert_eq!(read, Ok(Decision::reject_with("x")));
        assert!(matches!(
            Decision::from_json(&json!(["approved"])),
            Err(SessionError::MalformedDecision(_))
        ));
        assert!(matches!(
            Decision::from_json(&json!({"action": "approve"})),
            Err(SessionError::MalformedDecision(_))
        ));
    }

    #[test]
    fn blank_feedback_counts_as_none_and_feedback_is_trimmed() {
        assert_eq!(
            Decision::reject_with("  fix it \n").feedback(),
            Some("fix it")
        );
        assert_eq!(Decision::reject_with(" \n\t").feedback(), None);
        assert_eq!(Decision::reject().feedback(), None);
    }
}
