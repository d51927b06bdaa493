//! Events a session emits, in order, to its subscribers: callbacks
//! ([`crate::SessionOptions::on_event`], [`crate::Session::subscribe`]) and async streams
//! ([`crate::Session::events`], [`EventStream`]).
//!
//! Serialized with `type` in snake_case and fields in camelCase, as Mastra's `AgentController`
//! events are, so hosts written against either read the same shapes.
//!
//! Every event names its session (`sessionId`): two sessions both number their runs `run_1`,
//! `run_2`, ..., so a host that multiplexes sessions tells their events apart by it.
//!
//! Every event that names a run (`runId`) lies between that run's `agent_start` and its
//! `agent_end`: a run that suspends ends (`agent_end`, reason `suspended`) and starts again
//! with the same id when it is resumed or its suspension is cancelled.

/// A numbered step of a plan, as the suspend payload's `steps` lists them.
pub use crate::plan::PlanStep;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::tool::submit_plan::PlanSubmission;

/// Why the mode changed.
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
    schemars(inline, schema_with = "crate::names::schema::<ModeChangeReason>")
)]
pub enum ModeChangeReason {
    /// The host switched mode ([`crate::Session::switch_mode`]).
    Manual,
    /// A plan was approved and the session handed over to the planning mode's target.
    PlanApproved,
}

impl ModeChangeReason {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

pub use crate::run_state::RunState;

/// Why a suspension was cancelled without a decision (each counts as *not approved*).
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
    schemars(inline, schema_with = "crate::names::schema::<CancelReason>")
)]
pub enum CancelReason {
    /// The host aborted the run.
    Aborted,
    /// The user sent a new message instead of deciding.
    UserMessage,
    /// The host switched mode by hand.
    ModeSwitch,
}

impl CancelReason {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The terms a pending decision waits under, whichever its kind (a plan or a tool call), fixed
/// when it began to wait from the mode it waits in: how long it may wait, when it expires,
/// what its deadline does, and the workspace an approval acts in. A payload flattens them into
/// its JSON (`approvalTimeout`, `deadlineAtMs`, `workspace`, `onTimeout`).
///
/// # Examples
/// ```
/// use agent_controller::event::{OnTimeout, WaitTerms};
/// let terms: WaitTerms = serde_json::from_value(serde_json::json!({
///     "approvalTimeout": "1h", "deadlineAtMs": 3_600_000_u64,
/// }))?;
/// assert_eq!(terms.deadline_at_ms, Some(3_600_000));
/// assert_eq!(terms.on_timeout, OnTimeout::Reject, "the default, left out of the JSON");
/// assert_eq!(WaitTerms::default().approval_timeout, None, "no timeout: it waits for ever");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WaitTerms {
    /// The mode's `approvalTimeout` as configured (`"24h"`); `None` when the mode sets none
    /// (the decision waits for ever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout: Option<String>,
    /// When the decision expires, in milliseconds since the Unix epoch (`deadlineAtMs`): the
    /// time it began to wait plus `approvalTimeout`. Not decided by then, a plan counts as
    /// rejected and a tool call too (the run ends), with the outcome `expired`
    /// ([`crate::deadline`]). `None` without a timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at_ms: Option<u64>,
    /// The workspace an approval acts in (a plan's next mode, a tool call's run): the
    /// session's recorded one, as a canonical path ([`crate::workspace`]). `None` only in
    /// records written before workspaces were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<std::path::PathBuf>,
    /// What the deadline does when nobody decided in time (the mode's `onTimeout`): `reject`
    /// (the default, left out of the JSON) or `abort` ([`crate::deadline`]). A deadline never
    /// approves.
    #[serde(default, skip_serializing_if = "OnTimeout::is_reject")]
    pub on_timeout: OnTimeout,
    /// How many approvals by distinct identities the decision needs (`approversNeeded`, the
    /// mode's `approvers`, [`crate::quorum`]); `None` when one is enough. A rejection by any
    /// one of them rejects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers_needed: Option<u8>,
    /// The approvals given so far toward `approversNeeded`, oldest first: who, when, through
    /// which channel ([`crate::quorum::Approval`]). Empty without a quorum. Unlike the other
    /// terms, it grows while the decision waits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<crate::quorum::Approval>,
}

/// What `tool_suspended` carries for `submit_plan`: the captured plan, where approval leads, and
/// the decision id hosts address the decision by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuspendPayload {
    /// The plan as captured at submit time (`path`, `title`, `plan`, `sha256`).
    #[serde(flatten)]
    pub submission: PlanSubmission,
    /// The mode a plain approval hands over to, fixed at submit time.
    pub target_mode_id: Arc<str>,
    /// Every mode an approval may hand over to, fixed at submit time: `targetModeId` first,
    /// then the others the planning mode's `transitionsTo` lists. Choose one with
    /// [`crate::Decision::to`] (`targetModeId` in resume data). Empty only in records written
    /// before target lists existed (restoring such a record lists `targetModeId`).
    #[serde(default)]
    pub target_mode_ids: Vec<Arc<str>>,
    /// The id the controller gave this decision (`decision_1`, `decision_2`, ...), unique in the
    /// session. Unlike the model's tool-call id, which a model may reuse, it names exactly one
    /// submitted plan: decide by it with [`crate::Session::decide`]. Empty only in records
    /// written before decision ids existed (restoring such a record assigns one).
    #[serde(default)]
    pub decision_id: String,
    /// The plan's revision in the session: 1 for the first plan submitted, +1 for each later one
    /// (a resubmission after feedback, or a new plan); 0 only in records written before
    /// revisions existed.
    #[serde(default)]
    pub revision: u64,
    /// The SHA-256 of the previous revision; `None` for the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_sha256: Option<String>,
    /// What changed since the previous revision, as a unified diff of the plan texts (title as a
    /// `# ` heading, then the body; `--- revision N` / `+++ revision N+1` headers, three lines
    /// of context); empty when the text is unchanged, `None` for the first revision and
    /// without the `diff` feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// How long the plan may wait, when it expires, what its deadline does, and the workspace
    /// an approval acts in: fixed at submit time, from the planning mode.
    #[serde(flatten)]
    pub terms: WaitTerms,
    /// The comments the user made on lines of the previous revision (`previousSha256`) when
    /// rejecting it ([`crate::Decision::comment`]), each with the line it quotes (line numbers
    /// of that revision): shown again beside `diff`. Empty for a first revision and when the
    /// rejection made none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<crate::comment::QuotedComment>,
    /// The files the plan declares it writes (its `## Files` section,
    /// [`crate::tool::submit_plan::PlanScope`]): what an approval grants the mode it hands over
    /// to, by the planning mode's `planScope` (`grants` says how). `None` when the plan has no
    /// such section (an approval grants and binds nothing) and in records written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<crate::tool::submit_plan::PlanScope>,
    /// What `scope` does in the mode an approval hands over to: the planning mode's
    /// `planScope`, fixed at submit time; `ask` (the default) is left out of the JSON.
    #[serde(
        default,
        skip_serializing_if = "crate::tool::submit_plan::PlanScopePolicy::is_ask"
    )]
    pub plan_scope: crate::tool::submit_plan::PlanScopePolicy,
    /// The plan's numbered steps, in order, each with its number in the plan (what approving
    /// some steps names) and its text, as an approval seeds the task list with them; empty
    /// when it numbers none.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::plan::step::deserialize_steps"
    )]
    pub steps: Vec<crate::plan::PlanStep>,
    /// What the planning mode's reviewer (`reviewBy`, [`crate::review`]) said about the plan
    /// before a person was asked: its verdict and reason, shown beside the plan; `None` when the
    /// mode has no reviewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Box<crate::review::ReviewRecord>>,
}

/// What `tool_suspended` carries for a tool call that waits for the user's approval (the
/// mode's `requireApproval`): `{ decisionId, toolName, args, argsSha256 }` and its
/// [`WaitTerms`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallPayload {
    /// The id the controller gave this decision (`decision_N`, counted with the plans'), unique
    /// in the session: decide by it with [`crate::Session::decide`].
    pub decision_id: String,
    /// The tool the model called.
    pub tool_name: String,
    /// The call's arguments as the model gave them (a JSON object).
    pub args: Value,
    /// The SHA-256 (lowercase hex) of `args` in RFC 8785 canonical JSON ([`crate::jcs::sha256`]):
    /// pin a decision to it with [`crate::Decision::with_sha256`], computed with any JCS library.
    pub args_sha256: String,
    /// How long the call may wait, when it expires, what its deadline does, and the workspace
    /// it runs in when approved: fixed when it was made, from the mode it was made in.
    #[serde(flatten)]
    pub terms: WaitTerms,
    /// The `ask` rule that made the call wait ([`crate::rules::RuleRecord`]); `None` when it
    /// waits because the mode's `requireApproval` covers its tool. An "always allow" never
    /// lets through a call a rule asks about ([`crate::Decision::always_allow`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Box<crate::rules::RuleRecord>>,
    /// Where the call's path arguments lead in the workspace when elsewhere than they read (or
    /// in doubt), resolved when it began to wait ([`crate::rules::locate_path_args`]: the
    /// tool's own reading of the path, then the symlinks in it): every host shows the approver
    /// these (`path notes.md -> src/main.rs`, [`crate::rules::ResolvedLocation::shown`]).
    /// Empty when every path leads where it reads, for a call without a path argument, and in
    /// records written before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<crate::rules::ResolvedLocation>,
    /// Why the call waits as drift: it writes outside the files of the plan approved for its
    /// mode (`planScope = "ask"`), and which file (``"`src/main.rs` is outside the approved
    /// plan (...)"``). `None` for any other wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    /// The subagent whose call this is, when a child's call waits in its parent's session
    /// ([`crate::subagent::SubagentOrigin`]); `None` for the session's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<Box<crate::subagent::SubagentOrigin>>,
    /// What the mode's reviewer (`reviewBy` with `reviewToolCalls`, [`crate::review`]) said
    /// about the call before a person was asked: its verdict and reason, shown beside the
    /// call; `None` when no reviewer saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Box<crate::review::ReviewRecord>>,
}

impl ToolCallPayload {
    /// What the approver must be told of where the call's paths lead: one line per path
    /// argument that leads elsewhere than it reads, or whose place is in doubt
    /// ([`crate::rules::ResolvedLocation::shown`], neutralized); empty when every path leads
    /// where it reads. The terminal prompt, `pending` and the ACP permission request show these.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::ResolvedLocation;
    /// # let mut payload: agent_controller::event::ToolCallPayload = serde_json::from_value(serde_json::json!({
    /// #     "decisionId": "decision_1", "toolName": "write_file", "args": {"path": "notes.md"}, "argsSha256": "ab",
    /// # })).unwrap();
    /// payload.locations = vec![ResolvedLocation {
    ///     arg: "path".into(), given: "notes.md".into(), path: Some("src/main.rs".into()), doubt: None,
    /// }];
    /// assert_eq!(payload.where_paths_lead(), ["path notes.md -> src/main.rs"]);
    /// ```
    pub fn where_paths_lead(&self) -> Vec<String> {
        crate::rules::where_paths_lead(&self.locations)
    }

    /// Why an "always allow" ([`crate::Decision::always_allow`]) cannot be given at this
    /// call, if it cannot: the call waits because a mode's `ask` rule asks about every call it
    /// matches, which an allowance never overrides. The one predicate every host asks before it
    /// offers "always allow" (the terminal prompt, the ACP agent, the CLI), and the library's
    /// check of a decision ([`crate::Session::decide`]) refuses by it.
    ///
    /// # Examples
    /// ```
    /// # let payload: agent_controller::event::ToolCallPayload = serde_json::from_value(serde_json::json!({
    /// #     "decisionId": "decision_1", "toolName": "write_file", "args": {}, "argsSha256": "ab",
    /// # })).unwrap();
    /// assert_eq!(payload.allowance_refusal(), None, "requireApproval: an allowance may cover it");
    /// assert!(payload.may_always_allow());
    /// ```
    pub fn allowance_refusal(&self) -> Option<String> {
        let rule = self.rule.as_ref()?;
        Some(format!(
            "this call waits because {} ({}) asks about every call it matches, which an \"always allow\" does not override: approve it without `alwaysAllow`, or change the rule",
            rule.owner(),
            rule.rule
        ))
    }

    /// Whether an "always allow" may be given at this call ([`ToolCallPayload::allowance_refusal`]
    /// says why not).
    ///
    /// # Examples
    /// ```
    /// # let payload: agent_controller::event::ToolCallPayload = serde_json::from_value(serde_json::json!({
    /// #     "decisionId": "decision_1", "toolName": "write_file", "args": {}, "argsSha256": "ab",
    /// # })).unwrap();
    /// assert!(payload.may_always_allow());
    /// ```
    pub fn may_always_allow(&self) -> bool {
        self.allowance_refusal().is_none()
    }
}

/// What a mode's deadline does to a plan nobody decided in time (`onTimeout`): a deadline
/// never approves.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
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
    schemars(inline, schema_with = "crate::names::schema::<OnTimeout>")
)]
pub enum OnTimeout {
    /// The plan counts as rejected: the model is told, the run ends, the mode stays (the
    /// default).
    #[default]
    Reject,
    /// The run is aborted: what waits counts as not approved (the model is told, every tool
    /// call of the reply has its result), the run ends `aborted`, the mode stays.
    Abort,
}

impl OnTimeout {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl OnTimeout {
    /// Whether this is `reject`, the default (left out of a payload's JSON).
    pub fn is_reject(&self) -> bool {
        *self == OnTimeout::Reject
    }
}

/// What a suspended tool call waits on, as `tool_suspended` carries it (`suspendPayload`): a
/// submitted plan, a tool call that needs approval, or a tool's own suspension (a question of
/// `ask_user`, or any tool that ended its call with [`crate::ToolOutput::suspend`]). Tagged by
/// `kind`, so a payload is never read as another kind: `"plan"` (with `path`, `title`, `plan`,
/// `sha256`, ...), `"tool_call"` (with `toolName`, `args`, `argsSha256`), `"question"` or
/// `"suspension"` (with `toolName`, `payload`, `answerSchema`, `payloadSha256`).
///
/// `#[non_exhaustive]`: match the kinds you show and keep a last arm for the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Suspension {
    /// A `submit_plan` call: the captured plan and its hand-over targets.
    Plan(SuspendPayload),
    /// A tool call that waits for approval.
    ToolCall(ToolCallPayload),
    /// A call its tool suspended, waiting for the user's answer: its `kind` (the payload's own
    /// field) is `question` for `ask_user`, `suspension` for any other tool. Shared
    /// (`Arc`): the event, the session's pending decision and the run's outcome hold the one
    /// payload, which is not copied for each.
    #[serde(untagged)]
    Tool(Arc<ToolSuspendPayload>),
}

/// Which kind of tool suspension waits: a question of the built-in `ask_user`, or the
/// suspension of any other tool.
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
    schemars(inline, schema_with = "crate::names::schema::<SuspensionKind>")
)]
#[non_exhaustive]
pub enum SuspensionKind {
    /// A question of the built-in `ask_user` tool.
    Question,
    /// The suspension of any other tool (the payload is the tool's own).
    Suspension,
}

impl SuspensionKind {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kind of a suspension of the tool named `tool_name`: `question` for `ask_user`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::SuspensionKind;
    /// assert_eq!(SuspensionKind::of("ask_user"), SuspensionKind::Question);
    /// assert_eq!(SuspensionKind::of("confirm_deploy"), SuspensionKind::Suspension);
    /// ```
    pub fn of(tool_name: &str) -> Self {
        if tool_name == crate::exchange::ASK_USER {
            SuspensionKind::Question
        } else {
            SuspensionKind::Suspension
        }
    }
}

/// A call its tool suspended ([`crate::ToolOutput::suspend`]), as `tool_suspended` carries it
/// and the session saves it: the decision id, the tool, its `kind`, the payload the user is
/// shown, the schema an answer must fit, and the payload's SHA-256 an answer is pinned to.
///
/// In JSON, a question (kind `question`) also carries the payload's `question`, and its
/// `options` and `selectionMode` when it has options, beside `kind` (as Mastra's question
/// event does): copies of the payload's fields for a host that shows them, written out only.
/// `payload` stays whole, and it is what `payloadSha256` pins.
///
/// # Examples
/// ```
/// use agent_controller::event::{SuspensionKind, ToolSuspendPayload, WaitTerms};
/// use serde_json::json;
/// let payload = ToolSuspendPayload {
///     kind: SuspensionKind::Question,
///     decision_id: "decision_1".into(),
///     tool_name: "ask_user".into(),
///     args: json!({}),
///     payload: json!({ "question": "Which?", "options": [{ "label": "a" }], "selectionMode": "single_select" }),
///     answer_schema: json!({ "type": "string", "enum": ["a"] }),
///     payload_sha256: "53fa".into(),
///     terms: WaitTerms::default(),
///     subagent: None,
/// };
/// let shown = serde_json::to_value(&payload)?;
/// assert_eq!(shown["question"], "Which?");
/// assert_eq!(shown["options"], json!([{ "label": "a" }]));
/// assert_eq!(shown["selectionMode"], "single_select");
/// assert_eq!(shown["payload"], payload.payload);
/// assert_eq!(serde_json::from_value::<ToolSuspendPayload>(shown)?, payload);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSuspendPayload {
    /// `question` (for `ask_user`) or `suspension`.
    pub kind: SuspensionKind,
    /// The controller's id of the decision (`decision_N`): answer it by this id.
    pub decision_id: String,
    /// The tool that suspended its call.
    pub tool_name: String,
    /// The call's arguments (as the model sent them).
    pub args: Value,
    /// What the tool shows the user: untrusted text from the model, shown whole.
    pub payload: Value,
    /// The JSON Schema an answer must fit.
    pub answer_schema: Value,
    /// The SHA-256 of `payload` in RFC 8785 canonical JSON ([`crate::jcs::sha256`]): an answer
    /// pinned to another is refused.
    pub payload_sha256: String,
    /// The terms it waits under.
    #[serde(flatten)]
    pub terms: WaitTerms,
    /// The subagent whose call this is, when a child's call waits in its parent's session
    /// ([`crate::subagent::SubagentOrigin`]); `None` for the session's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<Box<crate::subagent::SubagentOrigin>>,
}

/// [`ToolSuspendPayload`] as it is written: its fields, and for a question the payload's
/// `question`, `options` and `selectionMode` beside `kind`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolSuspendShown<'a> {
    kind: SuspensionKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    question: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    selection_mode: Option<&'a Value>,
    decision_id: &'a str,
    tool_name: &'a str,
    args: &'a Value,
    payload: &'a Value,
    answer_schema: &'a Value,
    payload_sha256: &'a str,
    #[serde(flatten)]
    terms: &'a WaitTerms,
    #[serde(skip_serializing_if = "Option::is_none")]
    subagent: Option<&'a crate::subagent::SubagentOrigin>,
}

impl Serialize for ToolSuspendPayload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let question = |field: &str| {
            (self.kind == SuspensionKind::Question)
                .then(|| self.payload.get(field))
                .flatten()
        };
        ToolSuspendShown {
            kind: self.kind,
            question: question("question"),
            options: question("options"),
            selection_mode: question("selectionMode"),
            decision_id: &self.decision_id,
            tool_name: &self.tool_name,
            args: &self.args,
            payload: &self.payload,
            answer_schema: &self.answer_schema,
            payload_sha256: &self.payload_sha256,
            terms: &self.terms,
            subagent: self.subagent.as_deref(),
        }
        .serialize(serializer)
    }
}

impl ToolSuspendPayload {
    /// What keeps `answer` from fitting [`ToolSuspendPayload::answer_schema`], in the words of
    /// the input checker the crate uses for tool arguments ([`crate::tool::input::mismatch`]);
    /// `None` when it fits. The one check of an answer: [`crate::Session::decide`] refuses an
    /// answer it finds fault with, and a host may ask again before deciding (the terminal does).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::{SuspensionKind, ToolSuspendPayload, WaitTerms};
    /// use serde_json::json;
    /// let payload = ToolSuspendPayload {
    ///     kind: SuspensionKind::Suspension,
    ///     decision_id: "decision_1".into(),
    ///     tool_name: "confirm_deploy".into(),
    ///     args: json!({}),
    ///     payload: json!({ "target": "staging" }),
    ///     answer_schema: json!({ "type": "object", "properties": { "confirm": { "type": "boolean" } }, "required": ["confirm"] }),
    ///     payload_sha256: "53fa".into(),
    ///     terms: WaitTerms::default(),
    ///     subagent: None,
    /// };
    /// assert_eq!(payload.answer_mismatch(&json!({ "confirm": true })), None);
    /// assert_eq!(
    ///     payload.answer_mismatch(&json!({})).as_deref(),
    ///     Some("the answer lacks the required property `confirm`"),
    /// );
    /// ```
    ///
    /// A question's choices (kind `question`, an array answer) are each picked once: a repeated
    /// choice is a mismatch, also for a question stored before its schema said `uniqueItems`.
    pub fn answer_mismatch(&self, answer: &Value) -> Option<String> {
        let mut schema = std::borrow::Cow::Borrowed(&self.answer_schema);
        if self.kind == SuspensionKind::Question && self.answer_schema["type"] == "array" {
            schema.to_mut()["uniqueItems"] = Value::Bool(true);
        }
        crate::exchange::input::mismatch(answer, &schema).map(|why| {
            why.replace("the arguments lack", "the answer lacks")
                .replace("the arguments have", "the answer has")
                .replace("the arguments", "the answer")
                .replace("the tool's input schema", "the answer schema")
        })
    }

    /// The answer a line of text typed by the user gives, when it fits
    /// [`ToolSuspendPayload::answer_schema`]: the text itself when the schema takes it as a
    /// string (a free-text question takes any text; a select question the exact label of an
    /// option), else the text read as JSON. `None` when neither fits: the text is no answer
    /// (a host then takes it for what it is, a new message). The check is
    /// [`ToolSuspendPayload::answer_mismatch`], the one check of an answer; nothing is trimmed
    /// or guessed.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::{SuspensionKind, ToolSuspendPayload, WaitTerms};
    /// use serde_json::json;
    /// let mut payload = ToolSuspendPayload {
    ///     kind: SuspensionKind::Question,
    ///     decision_id: "decision_1".into(),
    ///     tool_name: "ask_user".into(),
    ///     args: json!({}),
    ///     payload: json!({ "question": "Which colour?" }),
    ///     answer_schema: json!({ "type": "string" }),
    ///     payload_sha256: "53fa".into(),
    ///     terms: WaitTerms::default(),
    ///     subagent: None,
    /// };
    /// assert_eq!(payload.answer_from_text("42"), Some(json!("42")));
    /// payload.answer_schema = json!({ "type": "object", "properties": { "confirm": { "type": "boolean" } }, "required": ["confirm"] });
    /// assert_eq!(payload.answer_from_text(r#"{"confirm": true}"#), Some(json!({ "confirm": true })));
    /// assert_eq!(payload.answer_from_text("yes, go on"), None);
    /// ```
    pub fn answer_from_text(&self, text: &str) -> Option<Value> {
        let as_text = Value::String(text.to_owned());
        if self.answer_mismatch(&as_text).is_none() {
            return Some(as_text);
        }
        let as_json: Value = serde_json::from_str(text).ok()?;
        self.answer_mismatch(&as_json).is_none().then_some(as_json)
    }
}

impl Suspension {
    /// The decision id (`decision_N`) to decide it by.
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
    /// use agent_controller::event::Suspension;
    /// let suspension = Suspension::Plan(payload.clone());
    /// assert_eq!(suspension.decision_id(), payload.decision_id);
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision_id(&self) -> &str {
        match self {
            Suspension::Plan(p) => &p.decision_id,
            Suspension::ToolCall(t) => &t.decision_id,
            Suspension::Tool(t) => &t.decision_id,
        }
    }

    /// The plan's payload, for a plan.
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
    /// use agent_controller::event::Suspension;
    /// let suspension = Suspension::Plan(payload.clone());
    /// assert_eq!(suspension.as_plan(), Some(&payload));
    /// assert!(suspension.as_tool_call().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn as_plan(&self) -> Option<&SuspendPayload> {
        match self {
            Suspension::Plan(p) => Some(p),
            Suspension::ToolCall(_) | Suspension::Tool(_) => None,
        }
    }

    /// The tool call's payload, for a tool call that waits for approval.
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
    /// use agent_controller::event::Suspension;
    /// let suspension = Suspension::ToolCall(tool_calls[0].payload().clone());
    /// assert_eq!(suspension.as_tool_call().map(|t| t.tool_name.as_str()), Some("write_file"));
    /// assert!(suspension.as_plan().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn as_tool_call(&self) -> Option<&ToolCallPayload> {
        match self {
            Suspension::Plan(_) | Suspension::Tool(_) => None,
            Suspension::ToolCall(t) => Some(t),
        }
    }

    /// The tool's own suspension (a question of `ask_user`, or another tool's), if it is one.
    pub fn as_tool(&self) -> Option<&ToolSuspendPayload> {
        match self {
            Suspension::Tool(t) => Some(t.as_ref()),
            Suspension::Plan(_) | Suspension::ToolCall(_) => None,
        }
    }
}

/// How a submitted plan was settled.
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
    schemars(inline, schema_with = "crate::names::schema::<DecisionOutcome>")
)]
pub enum DecisionOutcome {
    /// The host approved it.
    Approved,
    /// The host rejected it (with or without feedback).
    Rejected,
    /// It was cancelled without a decision (abort, a new user message, a manual switch): not
    /// approved.
    Cancelled,
    /// No decision was taken by its deadline (the planning mode's `approvalTimeout`): it
    /// counts as rejected ([`crate::deadline`]).
    Expired,
    /// A call its tool suspended was answered (`answered`): the answer went to the tool's
    /// resume step.
    Answered,
}

impl DecisionOutcome {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The audit record of one settled plan decision: which decision, how, when and by whom. The
/// session record keeps the latest (`lastDecided`) and all of them (`history`); the events that
/// settle a decision (`tool_end` of `submit_plan`, `tool_suspension_cancelled`) carry it as
/// `decision`.
///
#[cfg_attr(
    feature = "schema",
    doc = "With the `schema` feature, [`crate::schema::decided_record`] is its JSON Schema."
)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// The SHA-256 of the plan that was decided: the submitted plan, the one shown to the user
    /// (and the one a `sha256` pin names), also when the approval edited it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The SHA-256 of the text approved and handed to the next mode when the user edited the
    /// plan before approving ([`crate::Decision::with_plan`]); `None` when nothing was edited
    /// (the approved text is then the submitted plan, `sha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_sha256: Option<String>,
    /// When, as RFC 3339 in UTC with seconds (`2026-11-30T12:35:43Z`); for an expired plan,
    /// its deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// Who, as the host named them ([`crate::Decision::decided_by`]); `None` when the host did
    /// not say (and for cancellations and expiries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The mode an approval handed over to (the first target, or the one the decision chose
    /// with [`crate::Decision::to`]); `None` for rejections and cancellations, and for tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_mode_id: Option<String>,
    /// For a tool call that waited for approval (`requireApproval`): its tool; `None` for a
    /// plan (`submit_plan`). Its `sha256` is then the call's `argsSha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For a call its tool suspended (a question of `ask_user`, or another tool's suspension):
    /// which kind it was (`question` or `suspension`), so an expiry or a cancellation speaks
    /// of a call that was not answered, not of one that was rejected. `None` for a plan and for
    /// a tool call that waited for approval (and in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension_kind: Option<SuspensionKind>,
    /// Whether the approval also allowed the tool for the rest of the session
    /// ([`crate::Decision::always_allow`]); only on tool-call approvals.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always_allow: bool,
    /// For a tool call an allowance approved without asking: the allowance's id
    /// ([`crate::allowance::Allowance::id`]: the id of the decision that gave it for scopes
    /// `mode` and `session`, `ws_…` for a workspace one), and `decidedBy` is then
    /// `allowance ID (SCOPE)`. The same for a call the allowance ran later (and, in a record
    /// saved by an earlier version, for another call of the same reply that the "always allow"
    /// approved with it). `None` for every other decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_by: Option<String>,
    /// For the approval of a tool call that gave an allowance (`alwaysAllow`): what it gave,
    /// its `id` (what `allowedBy` names in the records of the calls it approves), `scope` and
    /// narrowing pattern `allow` ([`crate::allowance::GivenAllowance`]). Where the session
    /// kept the same allowance already, the one kept. `None` for every other decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowance: Option<Box<crate::allowance::GivenAllowance>>,
    /// The comments a plan's rejection made on lines of the plan with this record's `sha256`
    /// ([`crate::Decision::comment`]), each with the line it quotes; empty for every other
    /// decision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<crate::comment::QuotedComment>,
    /// The model an approval chose for the next mode ([`crate::Decision::model`]), by the id
    /// the host builds it by; `None` when the approval kept the session's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// For a tool call a mode's rule decided ([`crate::rules`]): which rule, and why
    /// ([`crate::rules::RuleRecord`]: `modeId`, `number`, `action`, `rule`, `reason`). A call
    /// an `allow` rule ran without asking and one a `deny` rule refused get a record of their
    /// own (outcome `approved` or `rejected`, no `decidedBy`: no person decided); a call an
    /// `ask` rule made wait keeps the rule in the record of the user's decision. A call the
    /// user approved that a `deny` rule refused as it was about to run (the rules, or where its
    /// paths lead, changed while it waited) keeps the approval's record as it was, and the
    /// refusal gets a record of its own after it (outcome `rejected`, that rule, no
    /// `decidedBy`). A subagent's call an `ask` rule holds is not refused: it waits for the
    /// user in the parent's session, naming the child, as any call that waits ([`crate::subagent`]).
    /// `None` when no rule decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Box<crate::rules::RuleRecord>>,
    /// For a tool call: the feedback the user gave with the decision
    /// ([`crate::Decision`]'s `feedback`, trimmed). With an approval the model receives it with the
    /// tool's result (after it, in a paragraph of its own); with a rejection, in the result that
    /// says the call did not run. Kept in the record, so it reaches the model after a store round
    /// trip and a resume in another process (issue 36, item 11: with an approval it was dropped).
    /// `None` when none was given, and for a plan's decision (its feedback is in the result the
    /// model receives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// The subagent whose call was decided, when a child's call waits in its parent's session
    /// ([`crate::subagent::SubagentOrigin`]); `None` for the session's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<Box<crate::subagent::SubagentOrigin>>,
    /// For the approval of some of a plan's steps ([`crate::Decision::steps`]): the steps
    /// approved, by the plan's numbers, in its order; the plan's other steps were not. Empty
    /// for the approval of a whole plan and every other decision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<u64>,
    /// For a tool call a hook decided ([`crate::hook`]): which hook, its decision and reason
    /// (`allow`: the call ran without asking, outcome `approved`; `deny`: it never ran, outcome
    /// `rejected`); `decidedBy` is then `hook NAME`. `None` when no hook decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<Box<crate::hook::HookRecord>>,
    /// The channel the decision came through ([`crate::quorum::Via`]: `terminal`, `decide`,
    /// `acp`, `http`, `hook`, `reviewer`, `timeout`), as the host set it
    /// ([`crate::Decision::via`]) or the controller (a hook, a deadline); `None` when no host
    /// said (and in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<crate::quorum::Via>,
    /// Under a quorum (`approvers = N`): every approval given, oldest first, the one that
    /// completed the quorum last (or those given before a rejection). Empty without a quorum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<crate::quorum::Approval>,
    /// For a call its tool suspended that was answered (a question of `ask_user`, another
    /// tool's form): the answer given ([`crate::Decision::answer`]); `None` for every other
    /// decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Box<serde_json::Value>>,
    /// For a plan or a tool call a reviewer saw ([`crate::review`]): which reviewer, its
    /// verdict and reason, the sha256 it was given; `decided` when its verdict is the decision
    /// (`reviewerMay = "decide"`; `decidedBy` is then `reviewer ID`), else the advice the person
    /// who decided saw. `None` when no reviewer saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Box<crate::review::ReviewRecord>>,
}

/// How a decision was taken, as its audit record tells it ([`DecidedRecord::how`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::Display)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum DecidedHow {
    /// A person decided, through a host (`decidedBy` names them as the host did).
    Person,
    /// A mode's rule decided on its own (`rule`).
    Rule,
    /// An allowance a person gave earlier ran the call (`allowedBy`).
    Allowance,
    /// A hook decided ([`crate::hook`]; `hook`).
    Hook,
    /// A reviewer decided ([`crate::review`]; `review`, with `decided`).
    Reviewer,
    /// The deadline passed (`approvalTimeout`): expired.
    Timeout,
    /// Nobody decided: the wait was cancelled (an abort, a new message, a manual switch).
    Cancelled,
}

impl DecidedRecord {
    /// How the decision was taken: by a hook, a reviewer, a rule (`allow` or `deny`: an `ask`
    /// rule only made the call wait), an allowance, a deadline, a cancellation, or else a person.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::{DecidedHow, DecidedRecord, DecisionOutcome};
    /// let record: DecidedRecord = serde_json::from_value(serde_json::json!({
    ///     "runId": "run_1", "toolCallId": "p1", "decisionId": "decision_1",
    ///     "outcome": "approved", "decidedBy": "alice"
    /// }))?;
    /// assert_eq!(record.how(), DecidedHow::Person);
    /// let expired = DecidedRecord { outcome: Some(DecisionOutcome::Expired), ..record };
    /// assert_eq!(expired.how(), DecidedHow::Timeout);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn how(&self) -> DecidedHow {
        if self.hook.is_some() {
            DecidedHow::Hook
        } else if self.review.as_ref().is_some_and(|r| r.decided) {
            DecidedHow::Reviewer
        } else if self
            .rule
            .as_ref()
            .is_some_and(|r| r.action != crate::rules::RuleAction::Ask)
        {
            // An `ask` rule decides nothing: the call waited for the person whose record it is.
            DecidedHow::Rule
        } else if self.allowed_by.is_some() {
            DecidedHow::Allowance
        } else {
            match self.outcome {
                Some(DecisionOutcome::Expired) => DecidedHow::Timeout,
                Some(DecisionOutcome::Cancelled) => DecidedHow::Cancelled,
                _ => DecidedHow::Person,
            }
        }
    }

    /// Why, as the record keeps it: the hook's, the deciding reviewer's or the rule's reason,
    /// else the feedback given.
    pub fn why(&self) -> Option<&str> {
        self.hook
            .as_ref()
            .and_then(|h| h.reason.as_deref().or(h.error.as_deref()))
            .or(self
                .review
                .as_ref()
                .filter(|r| r.decided)
                .and_then(|r| r.reason.as_deref()))
            .or(self.rule.as_ref().map(|r| r.reason.as_str()))
            .or(self.feedback.as_deref())
    }

    /// The record of decision `decision_id` on the call `tool_call_id` of run `run_id`, with
    /// `outcome` and nothing else yet (no hash, time, decider, target, tool, allowance,
    /// comments, model or rule): what each kind of record fills in.
    pub(crate) fn new(
        run_id: impl Into<String>,
        tool_call_id: impl Into<String>,
        decision_id: impl Into<String>,
        outcome: DecisionOutcome,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            tool_call_id: tool_call_id.into(),
            decision_id: decision_id.into(),
            outcome: Some(outcome),
            sha256: None,
            approved_sha256: None,
            decided_at: None,
            decided_by: None,
            target_mode_id: None,
            tool_name: None,
            suspension_kind: None,
            always_allow: false,
            allowed_by: None,
            allowance: None,
            comments: Vec::new(),
            model: None,
            rule: None,
            feedback: None,
            subagent: None,
            steps: Vec::new(),
            hook: None,
            via: None,
            approvals: Vec::new(),
            answer: None,
            review: None,
        }
    }
}

/// Seconds since the Unix epoch as RFC 3339 in UTC (civil date from days: H. Hinnant's algorithm).
pub(crate) fn rfc3339(secs: u64) -> String {
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_formats_utc_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}

/// One thing that happened in a session.
///
/// `#[non_exhaustive]`: a host matches the events it shows and keeps a last arm for the rest
/// (events may be added); [`Event::kind`] names each (`"mode_changed"`), as its JSON `type`.
///
/// # Examples
/// A host that turns the events it cares about into lines for its user:
/// ```
/// use std::sync::Arc;
/// use agent_controller::{AgentController, Event, SessionOptions, ToolRegistry, config};
/// use agent_controller::model::scripted::ScriptedModel;
///
/// fn line(event: &Event) -> Option<String> {
///     match event {
///         Event::ToolSuspended { suspend_payload, .. } => match suspend_payload.as_plan() {
///             Some(plan) => Some(format!("plan to approve: {}", plan.submission.title)),
///             None => Some("a tool call waits for approval".into()),
///         },
///         Event::ModeChanged { mode_id, reason, .. } => Some(format!("now in {mode_id} ({reason})")),
///         Event::AgentEnd { reason, .. } => Some(format!("run ended: {reason}")),
///         _ => None,
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let workspace = tempfile::tempdir()?;
/// let graph = config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
///     "modes.toml",
/// )?;
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
///     .tools(ToolRegistry::with_workspace_tools())
///     .workspace(workspace.path())
///     .build()?;
/// let (options, mut events) = SessionOptions::new().mode("plan").event_stream();
/// let mut session = controller.start_session(options).await?;
/// session.send_message("Add dark mode").await?;
/// let lines: Vec<String> = std::iter::from_fn(|| events.try_next()).filter_map(|e| line(&e)).collect();
/// assert_eq!(lines, ["plan to approve: Add dark mode", "run ended: suspended"]);
/// # Ok(())
/// # }
/// ```
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
        /// The session it happened in.
        session_id: Arc<str>,
        /// The run id.
        run_id: Arc<str>,
        /// The mode it starts in.
        mode_id: Arc<str>,
    },
    /// A piece of the model's reply text as it streams in (from models that stream, such as
    /// the OpenAI provider); the whole text follows in `assistant_message`.
    TextDelta {
        /// The session id, so a server can route the delta to the right client.
        session_id: Arc<str>,
        /// The run id.
        run_id: Arc<str>,
        /// The new text.
        text: String,
    },
    /// A model call finished: why the model stopped and the tokens it used, as far as the
    /// provider says. Emitted only when the provider gave one of them (the scripted models
    /// give neither).
    ModelEnd {
        /// The session it happened in.
        session_id: Arc<str>,
        /// The run id.
        run_id: Arc<str>,
        /// The provider's finish reason (`stop`, `tool_calls`, `length`, ...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish_reason: Option<String>,
        /// Token usage of the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<TokenUsage>,
    },
    /// The model replied with text.
    AssistantMessage {
        /// The session it happened in.
        session_id: Arc<str>,
        /// The run id.
        run_id: Arc<str>,
        /// The text.
        text: String,
    },
    /// A tool call starts.
    ToolStart {
        /// The session it happened in.
        session_id: Arc<str>,
        /// The run id.
        run_id: Arc<str>,
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool_name: String,
        /// The call's arguments.
        args: Value,
        /// The call was ruled to wait for the user's approval (the mode's `requireApproval`, an
        /// `ask` rule): it does not run now, and its `tool_suspended` follows once the reply's
        /// other calls are through. An editor shows it as awaiting approval (ACP `pending`)
        /// from the start. A call an earlier call of the reply made wait (ruled again just
        /// before it would run) starts without it and is suspended all the same.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        waits_for_approval: bool,
    },
    /// A tool call suspended the run; the host must decide: a submitted plan, or a tool call
    /// that needs approval (one event for each such call of the model's reply). For tool calls
    /// the order is: `tool_start` of every call of the reply in the model's order (with the
    /// `tool_end` of each call that ran without approval), then `tool_suspended` for each call
    /// that waits, then `agent_end` (reason `suspended`).
    ToolSuspended {
        /// The session it happened in.
        session_id: Arc<str>,
        /// The run id.
        run_id: Arc<str>,
        /// The tool call id.
        tool_call_id: String,
        /// The tool name (`submit_plan` for a plan).
        tool_name: String,
        /// The captured plan, or the tool call's name, arguments and `argsSha256`.
        suspend_payload: Suspension,
    },
    /// A tool call finished with a result for the model.
    ToolEnd {
        /// The session it happened in.
        session_id: Arc<str>,
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
        /// For a call a decision settled (`submit_plan`, or a tool call that waited for
        /// approval): the audit record (decision id, outcome, `decidedAt`, `decidedBy`,
        /// `alwaysAllow`); absent for every other tool call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<DecidedRecord>,
    },
    /// The session's mode changed.
    ModeChanged {
        /// The session it happened in.
        session_id: Arc<str>,
        /// The new mode.
        mode_id: Arc<str>,
        /// The mode before.
        previous_mode_id: Arc<str>,
        /// Why.
        reason: ModeChangeReason,
    },
    /// A suspended tool call was cancelled without a decision (not approved).
    ToolSuspensionCancelled {
        /// The session it happened in.
        session_id: Arc<str>,
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
        /// The session it happened in.
        session_id: Arc<str>,
        /// The run id.
        run_id: Arc<str>,
        /// How: suspended, completed, aborted or failed (never running).
        reason: RunState,
    },
    /// A run of the mode an approved plan handed over to ended (completed, failed or
    /// aborted), after the approval of a plan that declares its files or numbers its steps:
    /// what became of the plan ([`crate::plan_report::PlanReport`]). Comes just before that
    /// run's `agent_end`; the session keeps the last ([`crate::Session::plan_report`]).
    PlanReport {
        /// The session it happened in.
        session_id: Arc<str>,
        /// The report.
        report: Box<crate::plan_report::PlanReport>,
    },
    /// The session's task list changed: a task tool changed it, or an approved plan's
    /// numbered steps seeded it ([`crate::tool::tasks`]). Carries the whole list, in order.
    TasksUpdated {
        /// The session it happened in.
        session_id: Arc<str>,
        /// The run that changed it.
        run_id: Arc<str>,
        /// The whole list after the change.
        tasks: Vec<crate::tool::tasks::Task>,
    },
    /// A hook answered on a tool call or a plan ([`crate::hook`]), before it ran or waited:
    /// its decision (`ask` when it failed, with the error), and its reason. A verdict that
    /// decided (a call allowed or denied, a plan rejected) also leaves the decision's audit
    /// record; this event is sent for every hook consulted, so a failure is never silent.
    HookDecided {
        /// The session it happened in.
        session_id: Arc<str>,
        /// The run.
        run_id: Arc<str>,
        /// The call (or the plan's `submit_plan` call).
        tool_call_id: String,
        /// The tool (`submit_plan` for a plan).
        tool_name: String,
        /// What the hook answered.
        hook: crate::hook::HookRecord,
    },
    /// A `subagent` call started a child run ([`crate::subagent`]); its events follow wrapped
    /// in `subagent_event`, then `subagent_ended`.
    SubagentStarted {
        /// The session it happened in (the parent's).
        session_id: Arc<str>,
        /// The parent's run.
        run_id: Arc<str>,
        /// The parent's `subagent` call.
        tool_call_id: String,
        /// The subagent type.
        agent_type: String,
        /// The child's id: every event of the child is wrapped with it.
        child_id: Arc<str>,
    },
    /// A child run ended: its final text (or why it has none) is the parent's call's result.
    SubagentEnded {
        /// The session it happened in (the parent's).
        session_id: Arc<str>,
        /// The parent's run.
        run_id: Arc<str>,
        /// The parent's `subagent` call.
        tool_call_id: String,
        /// The subagent type.
        agent_type: String,
        /// The child's id.
        child_id: Arc<str>,
        /// How it ended.
        outcome: SubagentOutcome,
    },
    /// An event of a child run, as the child emitted it, wrapped with the child's id and the
    /// parent's call, so a host can show it nested under that call.
    SubagentEvent {
        /// The session it happened in (the parent's).
        session_id: Arc<str>,
        /// The parent's `subagent` call.
        tool_call_id: String,
        /// The child's id.
        child_id: Arc<str>,
        /// The child's own event (its `sessionId` is the child's id).
        event: Box<Event>,
    },
    /// Something went wrong in a run (a model error, the step limit).
    Error {
        /// The session it happened in.
        session_id: Arc<str>,
        /// What went wrong.
        message: String,
    },
}

impl Event {
    /// The `type` tag of the event as serialized (`mode_changed`, `tool_suspended`, ...).
    ///
    /// # Examples
    /// `Event` is `#[non_exhaustive]`: a host matches the variants it handles and lets the rest
    /// (those added later too) through by kind.
    /// ```
    /// use agent_controller::{Event, event::ModeChangeReason};
    ///
    /// fn describe(event: &Event) -> String {
    ///     match event {
    ///         Event::ModeChanged { mode_id, previous_mode_id, .. } => {
    ///             format!("{previous_mode_id} -> {mode_id}")
    ///         }
    ///         Event::TextDelta { text, .. } => text.clone(),
    ///         other => format!("({})", other.kind()),
    ///     }
    /// }
    ///
    /// let changed = Event::ModeChanged {
    ///     session_id: "s1".into(),
    ///     mode_id: "build".into(),
    ///     previous_mode_id: "plan".into(),
    ///     reason: ModeChangeReason::PlanApproved,
    /// };
    /// assert_eq!(describe(&changed), "plan -> build");
    /// assert_eq!(changed.kind(), "mode_changed");
    /// let started = Event::SessionStarted { session_id: "s1".into(), mode_id: "plan".into() };
    /// assert_eq!(describe(&started), "(session_started)");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionStarted { .. } => "session_started",
            Event::AgentStart { .. } => "agent_start",
            Event::TextDelta { .. } => "text_delta",
            Event::ModelEnd { .. } => "model_end",
            Event::AssistantMessage { .. } => "assistant_message",
            Event::ToolStart { .. } => "tool_start",
            Event::ToolSuspended { .. } => "tool_suspended",
            Event::ToolEnd { .. } => "tool_end",
            Event::ModeChanged { .. } => "mode_changed",
            Event::ToolSuspensionCancelled { .. } => "tool_suspension_cancelled",
            Event::AgentEnd { .. } => "agent_end",
            Event::PlanReport { .. } => "plan_report",
            Event::TasksUpdated { .. } => "tasks_updated",
            Event::HookDecided { .. } => "hook_decided",
            Event::SubagentStarted { .. } => "subagent_started",
            Event::SubagentEnded { .. } => "subagent_ended",
            Event::SubagentEvent { .. } => "subagent_event",
            Event::Error { .. } => "error",
        }
    }

    /// The id of the session the event happened in (`sessionId`): every event carries it,
    /// so a host that multiplexes sessions (an editor agent, a server) tells apart two
    /// sessions' `run_1`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::Event;
    ///
    /// let error = Event::Error { session_id: "s1".into(), message: "boom".into() };
    /// assert_eq!(error.session_id(), "s1");
    /// let json = serde_json::to_value(&error).unwrap();
    /// assert_eq!(json["sessionId"], "s1");
    /// ```
    pub fn session_id(&self) -> &str {
        match self {
            Event::SessionStarted { session_id, .. }
            | Event::AgentStart { session_id, .. }
            | Event::TextDelta { session_id, .. }
            | Event::ModelEnd { session_id, .. }
            | Event::AssistantMessage { session_id, .. }
            | Event::ToolStart { session_id, .. }
            | Event::ToolSuspended { session_id, .. }
            | Event::ToolEnd { session_id, .. }
            | Event::ModeChanged { session_id, .. }
            | Event::ToolSuspensionCancelled { session_id, .. }
            | Event::AgentEnd { session_id, .. }
            | Event::PlanReport { session_id, .. }
            | Event::TasksUpdated { session_id, .. }
            | Event::HookDecided { session_id, .. }
            | Event::SubagentStarted { session_id, .. }
            | Event::SubagentEnded { session_id, .. }
            | Event::SubagentEvent { session_id, .. }
            | Event::Error { session_id, .. } => session_id,
        }
    }
}

/// Tokens one model call used, as the provider reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Tokens of the request (prompt).
    pub prompt_tokens: u64,
    /// Tokens of the reply (completion).
    pub completion_tokens: u64,
    /// Both together, as the provider counts them.
    pub total_tokens: u64,
}

/// A callback that receives every event of a session, in order.
pub type Subscriber = Box<dyn FnMut(&Event) + Send>;

/// A session's subscribers: callbacks and streams. Delivery is synchronous and in order; a
/// callback whose [`Subscription`] was dropped, or a stream that was dropped, is removed at
/// the next event.
#[derive(Default)]
pub(crate) struct Subscribers {
    entries: Vec<Entry>,
}

enum Entry {
    /// A callback; `alive` is `None` for one that lives as long as the session.
    Callback {
        callback: Subscriber,
        alive: Option<Arc<AtomicBool>>,
    },
    Stream(mpsc::UnboundedSender<Event>),
}

impl Subscribers {
    /// Adds a callback for the session's lifetime.
    pub(crate) fn add_permanent(&mut self, callback: Subscriber) {
        self.entries.push(Entry::Callback {
            callback,
            alive: None,
        });
    }

    /// Delivers `event` to every subscriber, in subscription order, dropping those that left.
    pub(crate) fn deliver(&mut self, event: &Event) {
        self.entries.retain_mut(|entry| match entry {
            Entry::Callback {
                alive: Some(alive), ..
            } if !alive.load(Ordering::Acquire) => false,
            Entry::Callback { callback, .. } => {
                callback(event);
                true
            }
            Entry::Stream(sender) => sender.send(event.clone()).is_ok(),
        });
    }

    pub(crate) fn add_callback(&mut self, callback: Subscriber) -> Subscription {
        let alive = Arc::new(AtomicBool::new(true));
        self.entries.push(Entry::Callback {
            callback,
            alive: Some(alive.clone()),
        });
        Subscription { alive: Some(alive) }
    }

    pub(crate) fn add_stream(&mut self) -> EventStream {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.entries.push(Entry::Stream(sender));
        EventStream { receiver }
    }

    /// Every entry for `Debug` output.
    pub(crate) fn count_all(&self) -> usize {
        self.entries.len()
    }

    /// How many subscribers are still listening (callbacks and streams).
    pub(crate) fn len(&self) -> usize {
        self.entries
            .iter()
            .filter(|entry| match entry {
                Entry::Callback { alive, .. } => {
                    alive.as_ref().is_none_or(|a| a.load(Ordering::Acquire))
                }
                Entry::Stream(sender) => !sender.is_closed(),
            })
            .count()
    }
}

/// A callback subscription ([`crate::Session::subscribe`]): dropping it unsubscribes the
/// callback; [`Subscription::detach`] keeps it for the session's lifetime.
#[must_use = "dropping a Subscription unsubscribes its callback at once; call .detach() to keep it"]
#[derive(Debug)]
pub struct Subscription {
    alive: Option<Arc<AtomicBool>>,
}

impl Subscription {
    /// Keeps the callback subscribed for as long as the session lives.
    pub fn detach(mut self) {
        self.alive = None;
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(alive) = &self.alive {
            alive.store(false, Ordering::Release);
        }
    }
}

/// A session's events as an async stream ([`crate::Session::events`],
/// [`crate::SessionOptions::event_stream`]): every event from the moment it was made, in order,
/// the same ones callbacks get. It ends (`None`) when the session is dropped; dropping the
/// stream unsubscribes it.
///
/// Implements [`futures_core::Stream`] (for `StreamExt` combinators and `select!`), and has
/// [`EventStream::next`] so no extra trait is needed.
///
/// # Backpressure
/// Unbounded: the run loop never waits for a reader and never drops an event. Events are
/// produced inside the session's state changes, which must not stop half-way at an `await`
/// for a slow consumer (that would make them cancel-unsafe), and a lost `agent_end` or
/// `tool_suspended` would leave a host's view wrong. A run produces a bounded number of events
/// (a few per model call and tool call, plus one `text_delta` per streamed fragment), so a
/// reader that keeps up holds little; a host that stops reading should drop the stream, which
/// frees what it held.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::{AgentController, SessionOptions, config, model::scripted::ScriptedModel};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
/// let (options, mut events) = SessionOptions::new().event_stream();
/// let mut session = controller.start_session(options).await?;
/// session.send_message("Hello").await?;
/// drop(session);
/// let mut kinds = Vec::new();
/// while let Some(event) = events.next().await {
///     kinds.push(event.kind());
/// }
/// assert_eq!(kinds.first(), Some(&"session_started"));
/// assert_eq!(kinds.last(), Some(&"agent_end"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct EventStream {
    receiver: mpsc::UnboundedReceiver<Event>,
}

impl EventStream {
    /// The next event; `None` once the session is dropped and every event was read.
    pub async fn next(&mut self) -> Option<Event> {
        self.receiver.recv().await
    }

    /// The next event if one is waiting, without waiting.
    pub fn try_next(&mut self) -> Option<Event> {
        self.receiver.try_recv().ok()
    }
}

impl futures_core::Stream for EventStream {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.receiver.poll_recv(cx)
    }
}

/// How a child run ended, as `subagent_ended` reports it.
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
    strum::AsRefStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum SubagentOutcome {
    /// The child's model gave its final text.
    Completed,
    /// The child's run failed (a model error, its step limit).
    Failed,
    /// The parent's run was cancelled while the child ran.
    Aborted,
    /// The child stopped at a call that needs the user (an approval or an answer), which a
    /// child cannot get yet.
    Refused,
}
