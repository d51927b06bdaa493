//! Durable sessions: the [`SessionStore`] trait, the persisted [`SessionRecord`], and backends
//! ([`MemoryStore`], [`FileStore`], `SqliteStore` behind the `sqlite` feature, and
//! `PostgresStore` behind the `postgres` feature, shared by several hosts).
//!
//! Every save is a compare-and-swap on the record's `version`: a save names the version it read,
//! and fails with [`StoreError::Conflict`] if another writer saved in between. Two deciders racing
//! on one pending plan therefore cannot both win, and no lock is held across an `await`.

pub mod file;
pub(crate) mod kept;
pub mod listing;
pub mod memory;
pub mod pending_page;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod recorded_config;
mod shown;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use self::file::FileStore;
pub use self::listing::{InvalidCursor, SessionListing, SessionPage, SessionSummary, TITLE_CHARS};
pub use self::memory::MemoryStore;
pub use self::pending_page::{InvalidPendingCursor, PendingCursor, PendingPage};
#[cfg(feature = "postgres")]
pub use self::postgres::PostgresStore;
pub use self::recorded_config::{ConfigChange, ConfigCheck, ModePowers, RecordedConfig};
pub use self::shown::{ShownOption, ShownPending};
#[cfg(feature = "sqlite")]
pub use self::sqlite::SqliteStore;
pub use self::watch::{ChangeNotices, PendingChange, PendingWatch};

pub use crate::event::DecidedRecord;
use crate::event::RunState;
use crate::event::{SuspendPayload, ToolCallPayload};
use crate::model::Message;
pub use crate::plan::PlanRevision;
pub use crate::store_error::StoreError;
use crate::workspace::WorkspaceRecord;

/// The record layout version this release writes: one version per release that changes the
/// layout (0.1.0 wrote 1, 0.2.0 wrote 2; the next release writes 5: 3 and 4 were written by
/// this crate's development builds, before tool-call approvals and before recorded workspaces).
///
/// Loading migrates a record of an older version (fields added since take their defaults; it is
/// saved in this version the next time the session changes), and refuses a record of a newer
/// version with [`StoreError::NewerSchema`], leaving it untouched: hosts sharing a store can be
/// upgraded one at a time, and an old host never overwrites what a newer one wrote.
pub const SCHEMA_VERSION: u32 = 11;

/// Everything a session needs to continue in another process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionRecord {
    /// Layout version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The session id.
    pub session_id: String,
    /// Compare-and-swap version: 1 for the first save, +1 for each later save.
    pub version: u64,
    /// Fingerprint of the mode config the session ran under (see
    /// [`crate::ModeGraph::fingerprint`]).
    pub config_fingerprint: String,
    /// The current mode id.
    pub mode_id: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// How many runs were started (run ids are `run_1`, `run_2`, ...).
    pub run_counter: u64,
    /// The latest run and its state.
    pub run: Option<RunRecord>,
    /// The plan waiting for a decision.
    pub pending: Option<PendingRecord>,
    /// The tool calls waiting for approval (the mode's `requireApproval`), in the model's order,
    /// those decided while others wait included; absent when none waits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_tool_calls: Vec<PendingToolCallRecord>,
    /// The calls of that reply their tools suspended, each waiting for the user's answer (a
    /// question of `ask_user`, or a tool's own suspension), beside the calls that wait for
    /// approval (`pendingSuspensions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_suspensions: Vec<PendingSuspensionRecord>,
    /// The tools an allowance lets run whole in the current mode (`alwaysAllow`, no pattern):
    /// derived from `allowances` on save, for readers that list it; absent when there are none.
    /// A record from before `allowances` keeps its "always allow"s here alone (scope `mode`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub always_allowed: Vec<String>,
    /// The allowances the session's decisions gave, of scope `mode` (until the mode changes)
    /// and `session` (for the rest of the session, in their own mode):
    /// [`crate::allowance::Allowance`]. Workspace allowances are kept apart
    /// ([`SessionStore::save_workspace_allowance`]). Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowances: Vec<crate::allowance::Allowance>,
    /// The last decided (or cancelled) plan, so a second decision is recognised.
    pub last_decided: Option<DecidedRecord>,
    /// Every decided (or cancelled) plan of the session, oldest first: the audit trail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<DecidedRecord>,
    /// How many decision ids were given out (ids are `decision_1`, `decision_2`, ...).
    #[serde(default)]
    pub decision_counter: u64,
    /// When the record was saved, in seconds since the Unix epoch.
    pub updated_at: u64,
    /// The workspace the session works in, recorded when it started
    /// ([`crate::workspace`]): every later act of the session is refused in another directory.
    /// Absent in records written before schema 5; such a session adopts the workspace of the
    /// first controller that restores it and names one explicitly
    /// ([`crate::controller::AgentControllerBuilder::workspace`]), and is refused by one that does not
    /// ([`crate::SessionError::NoWorkspaceRecorded`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceRecord>,
    /// The host's free-form metadata ([`crate::SessionOptions::metadata`]); absent in records
    /// written before it existed.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The latest plan submitted in the session, so the next one is its next revision (with a
    /// diff against it); absent before the first plan and in records written before revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_plan: Option<PlanRevision>,
    /// The model an approval chose for the current mode ([`crate::Decision::model`]), by the id
    /// the host's model chooser builds it by; `None` when the session's own model runs. Every
    /// change of mode clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// The session's task list, in order ([`crate::tool::tasks`]: what the task tools wrote,
    /// or the steps of the plan approved last); absent when it is empty and in records written
    /// before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<crate::tool::tasks::Task>,
    /// The config the session ran under when this record was saved: the file it was read from
    /// and what each mode may do ([`RecordedConfig`]), so a host that decides or carries the
    /// session on later loads that file and can tell what a different config would let the
    /// modes do more ([`RecordedConfig::change_to`]). Absent in records written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<RecordedConfig>,
    /// The subagents of the suspended run whose calls wait in `pendingToolCalls` and
    /// `pendingSuspensions` (each naming its child in `subagent`): each child's own record, so
    /// it carries on once its calls are decided, here or in another process. Absent in
    /// records written before a child's call could wait (schema version 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<ChildRecord>,
    /// The ledger of the plan approved for the current mode, for its report at the end of
    /// its run ([`crate::plan_report::PlanLedger`]); absent without one and in records written
    /// before it (schema version 11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_ledger: Option<crate::plan_report::PlanLedger>,
    /// The report of the session's last run of an approved plan
    /// ([`crate::plan_report::PlanReport`], `agent-controller report`); absent before the
    /// first and in records written before it (schema version 11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_report: Option<crate::plan_report::PlanReport>,
}

/// A subagent whose calls wait for the user, kept in its parent's record
/// ([`SessionRecord::children`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChildRecord {
    /// The id of the parent's `subagent` call that started the child.
    pub tool_call_id: String,
    /// The subagent's type.
    pub agent_type: String,
    /// The child run's id.
    pub child_id: String,
    /// The child's own record (its conversation and its pending decisions, under its ids).
    pub record: Box<SessionRecord>,
}

/// The latest run of a [`SessionRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRecord {
    /// The run id.
    pub run_id: String,
    /// Its state.
    pub state: RunState,
    /// Who carries a `running` run on: the owner of its lease
    /// ([`crate::controller::AgentControllerBuilder::lease_owner`], by default `HOST:PID`). Only a running
    /// run saved after a decision, or carried on with [`crate::Session::continue_run`], has
    /// one; absent in records written before leases existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When the owner's lease ends, in milliseconds since the Unix epoch: a `running` run whose
    /// lease has ended (or that has none) is *interrupted* ([`RunRecord::is_interrupted`]) and
    /// may be carried on by another process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at_ms: Option<u64>,
}

impl RunRecord {
    /// Whether this run is *interrupted* at `now_ms` (milliseconds since the Unix epoch): it is
    /// `running`, and its lease has ended or it has none (a record from before leases). Such a
    /// run can be carried on with [`crate::Session::continue_run`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::event::RunState;
    /// use agent_controller::store::RunRecord;
    ///
    /// let run = RunRecord {
    ///     run_id: "run_1".into(),
    ///     state: RunState::Running,
    ///     owner: Some("web-1:4242".into()),
    ///     lease_expires_at_ms: Some(1_000),
    /// };
    /// assert!(!run.is_interrupted(999));
    /// assert!(run.is_interrupted(1_000));
    /// ```
    pub fn is_interrupted(&self, now_ms: u64) -> bool {
        self.state == RunState::Running && self.lease_expires_at_ms.is_none_or(|end| end <= now_ms)
    }
}

/// A run that was cut off: `running` in the store, with a lease that has ended. Listed by
/// [`SessionStore::list_pending`]; carry it on with [`crate::Session::continue_run`]
/// (`agent-controller continue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterruptedRun {
    /// The session id.
    pub session_id: String,
    /// The run id.
    pub run_id: String,
    /// The mode the run is in: the one its next model call uses.
    pub mode_id: String,
    /// The owner of the lease that ended (absent for a record from before leases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When that lease ended, in milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at_ms: Option<u64>,
    /// The workspace the run is carried on in: the session's recorded one (canonical path);
    /// absent for a record written before workspaces were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// When the session was last saved (seconds since the Unix epoch).
    pub updated_at: u64,
}

/// A suspended `submit_plan` call of a [`SessionRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingRecord {
    /// The suspended run.
    pub run_id: String,
    /// The suspended tool call.
    pub tool_call_id: String,
    /// The tool name (`submit_plan`).
    pub tool_name: String,
    /// The captured plan (path, title, plan, sha256) and the hand-over target fixed at submit time.
    pub suspend_payload: SuspendPayload,
}

/// A tool call of a [`SessionRecord`] that waits for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingToolCallRecord {
    /// The suspended run.
    pub run_id: String,
    /// The model's tool-call id.
    pub tool_call_id: String,
    /// The decision id, tool name, arguments and `argsSha256`, as `tool_suspended` carried them.
    pub suspend_payload: ToolCallPayload,
    /// The audit record of the decision taken while other calls of the reply still wait (it
    /// joins `history` when the run carries on); `None` while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<DecidedRecord>,
    /// The feedback of that decision (trimmed), as its record `decided` keeps it too (a record
    /// saved before `decided` kept it has it here only; it is read from here then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

/// A call its tool suspended, waiting for the user's answer, as the record saves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingSuspensionRecord {
    /// The suspended run.
    pub run_id: String,
    /// The suspended call.
    pub tool_call_id: String,
    /// What `tool_suspended` carried: the payload, the answer's schema, the payload's SHA-256.
    pub suspend_payload: crate::event::ToolSuspendPayload,
    /// The audit record of the answer (or the refusal to answer) given while other calls of
    /// the reply still wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<DecidedRecord>,
    /// That answer, checked against the schema; the tool's `resume` step gets it once the run
    /// carries on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<serde_json::Value>,
    /// The feedback of a refusal to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

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
    schemars(inline, schema_with = "crate::names::schema::<PendingKind>")
)]
/// What a [`PendingSummary`] waits on.
#[non_exhaustive]
pub enum PendingKind {
    /// A submitted plan (`submit_plan`).
    #[default]
    Plan,
    /// A tool call that needs approval (the mode's `requireApproval`).
    ToolCall,
    /// A question of the built-in `ask_user` tool, waiting for the user's answer.
    Question,
    /// A call another tool suspended ([`crate::ToolOutput::suspend`]), waiting for the user's
    /// answer.
    Suspension,
}

impl PendingKind {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One pending decision, as [`SessionStore::list_pending`] lists it: a submitted plan, or one
/// tool call that waits for approval (each call its own entry, with its own decision id). The
/// plan's fields (`targetModeId`, `targetModeIds`, `title`, `planPath`) are empty for a tool
/// call.
///
#[cfg_attr(
    feature = "schema",
    doc = "With the `schema` feature, [`crate::schema::pending_summary`] is its JSON Schema."
)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingSummary {
    /// The session id.
    pub session_id: String,
    /// The suspended run.
    pub run_id: String,
    /// The suspended tool call (the model's id; not necessarily unique).
    pub tool_call_id: String,
    /// What waits (`kind`): a plan (`plan`), a tool call waiting for approval (`tool_call`), a
    /// question of `ask_user` (`question`) or another tool's suspension (`suspension`); `plan`
    /// in listings written before tool-call approvals.
    #[serde(default)]
    pub kind: PendingKind,
    /// The controller's decision id, unique in the session: what hosts address the decision by.
    #[serde(default)]
    pub decision_id: String,
    /// The mode the plan was submitted in.
    pub mode_id: String,
    /// The mode a plain approval hands over to.
    pub target_mode_id: String,
    /// Every mode an approval may hand over to (`decide --to`, [`crate::Decision::to`]), the
    /// plain approval's first.
    #[serde(default)]
    pub target_mode_ids: Vec<String>,
    /// The plan's title.
    pub title: String,
    /// For a plan: its text as captured and shown to the approver (what `sha256` pins, with
    /// the title as its own field), so a host lists what approval approves, not its title
    /// alone; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// For a plan: what changed since the previous revision, as a unified diff
    /// ([`crate::event::SuspendPayload::diff`]); absent for a first revision, for a tool call,
    /// and without the `diff` feature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The SHA-256 (hex) a decision pins (`decide --sha256`, [`crate::Decision::with_sha256`]):
    /// of the captured plan, or for a tool call its `argsSha256`.
    #[serde(default)]
    pub sha256: String,
    /// For a tool call: the tool the model called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For a tool call: its arguments (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// For a tool call: the SHA-256 of its arguments in RFC 8785 canonical JSON
    /// ([`crate::jcs::sha256`]), the same as `sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_sha256: Option<String>,
    /// For a tool call: where its path arguments lead in the workspace when elsewhere than they
    /// read, resolved when it began to wait ([`crate::event::ToolCallPayload::locations`]);
    /// `pending` shows them (`where it acts: path notes.md -> src/main.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<crate::rules::ResolvedLocation>,
    /// For a question or a suspension: what the tool shows the user (`payload`; untrusted
    /// text from the model, shown whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
    /// For a question or a suspension: the JSON Schema an answer must fit (`answerSchema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_schema: Option<serde_json::Value>,
    /// The tools the session allows without approval ([`crate::Session::always_allowed`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub always_allowed: Vec<String>,
    /// The plan file's path as submitted (relative to the workspace, unless absolute).
    #[serde(default)]
    pub plan_path: String,
    /// What the decision waits under: the `workspace` it acts in (the session's recorded one,
    /// absent for a record written before workspaces were recorded), the mode's
    /// `approvalTimeout`, the `deadlineAtMs` it expires at unless decided, and what the deadline
    /// does (`onTimeout`). Flattened: its fields are this entry's.
    #[serde(flatten)]
    pub terms: crate::event::WaitTerms,
    /// For a plan: the comments the rejection of the previous revision made on its lines, with
    /// the lines they quote ([`crate::event::SuspendPayload::comments`]); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<crate::comment::QuotedComment>,
    /// For a subagent's call that waits in its parent's session: the subagent
    /// ([`crate::subagent::SubagentOrigin`]: its type, child id, the parent's `subagent` call);
    /// absent for the session's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<Box<crate::subagent::SubagentOrigin>>,
    /// For a plan: the files it declares it writes, what an approval grants the mode it hands
    /// over to ([`crate::event::SuspendPayload::scope`]); absent for a plan without a
    /// `## Files` section and for a tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<crate::tool::submit_plan::PlanScope>,
    /// For a plan: what `scope` does once approved ([`crate::event::SuspendPayload::plan_scope`]);
    /// `ask` (the default) is left out.
    #[serde(
        default,
        skip_serializing_if = "crate::tool::submit_plan::PlanScopePolicy::is_ask"
    )]
    pub plan_scope: crate::tool::submit_plan::PlanScopePolicy,
    /// For a plan: its numbered steps, each `{number, text}`
    /// ([`crate::event::SuspendPayload::steps`]); empty otherwise.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::plan::step::deserialize_steps"
    )]
    pub steps: Vec<crate::plan::PlanStep>,
    /// For a tool call that waits as drift: why (it writes outside the approved plan's files,
    /// [`crate::event::ToolCallPayload::drift`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    /// For a plan or a tool call a reviewer saw: its verdict and reason
    /// ([`crate::review::ReviewRecord`]), shown beside what waits; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Box<crate::review::ReviewRecord>>,
    /// When the session was last saved (seconds since the Unix epoch).
    pub updated_at: u64,
}

/// One line of `agent-controller pending --json`: a pending decision ([`PendingSummary`], its
/// fields inline) and the allowances in force for its session (`allowancesInForce`): those that
/// let a call of its mode run unasked now, each as [`crate::allowance::Allowance`] writes it (a
/// workspace one only in the workspace it was given in). Left out when there are none.
///
#[cfg_attr(
    feature = "schema",
    doc = "With the `schema` feature, [`crate::schema::pending_entry`] is its JSON Schema \
           (`agent-controller schema pending`)."
)]
///
/// # Examples
/// ```
/// use agent_controller::store::{PendingEntry, PendingSummary};
///
/// let summary: PendingSummary = serde_json::from_value(serde_json::json!({
///     "sessionId": "s1", "runId": "run_1", "toolCallId": "call_1", "kind": "tool_call",
///     "modeId": "build", "targetModeId": "", "title": "", "updatedAt": 0
/// }))?;
/// let entry = PendingEntry { summary, allowances_in_force: Vec::new() };
/// let line = serde_json::to_value(&entry)?;
/// assert_eq!(line["kind"], "tool_call");
/// assert!(line.get("allowancesInForce").is_none(), "left out when there are none");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingEntry {
    /// The pending decision; its fields stand inline in the line.
    #[serde(flatten)]
    pub summary: PendingSummary,
    /// The allowances in force for the decision's session, in its mode now: its own (scopes
    /// `mode` and `session`) first, then the workspace ones it applies. Empty (and left out of
    /// the JSON) when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowances_in_force: Vec<crate::allowance::Allowance>,
}

/// What [`SessionStore::list_pending`] finds: every healthy pending decision, and apart from
/// them every record that cannot be read, so one corrupt record never hides the others.
///
/// More kinds of findings may be added (the struct is `#[non_exhaustive]`): build one with
/// [`PendingListing::default`] and push onto its fields.
///
/// # Examples
/// ```
/// use agent_controller::store::{PendingListing, UnreadableRecord};
///
/// let mut listing = PendingListing::default();
/// assert!(listing.is_healthy());
/// listing.unreadable.push(UnreadableRecord {
///     session_id: "s1".into(),
///     location: "sessions/s1.pending.json".into(),
///     reason: "expected value at line 1 column 1".into(),
/// });
/// assert!(!listing.is_healthy());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PendingListing {
    /// Every readable pending decision, oldest first (by `updatedAt`, then session id).
    pub pending: Vec<PendingSummary>,
    /// Every record that looked pending but cannot be read, by session id: garbage, a record of
    /// a newer schema, or a record whose `sessionId` is not the key it is stored under.
    pub unreadable: Vec<UnreadableRecord>,
    /// Every interrupted run, oldest first (by `updatedAt`, then session id): `running`, with a
    /// lease that had ended when the store was read ([`RunRecord::is_interrupted`]). Carry one
    /// on with [`crate::Session::continue_run`] (`agent-controller continue`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupted: Vec<InterruptedRun>,
}

impl PendingListing {
    /// Whether every record could be read (`unreadable` is empty).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::PendingListing;
    /// assert!(PendingListing::default().is_healthy());
    /// ```
    pub fn is_healthy(&self) -> bool {
        self.unreadable.is_empty()
    }

    /// Sorts `pending` and `interrupted` oldest first (by `updated_at`, then session id) and
    /// `unreadable` by session id: the order [`SessionStore::list_pending`] promises.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::PendingListing;
    /// let mut listing = PendingListing::default();
    /// listing.sort();
    /// assert!(listing.pending.is_empty());
    /// ```
    pub fn sort(&mut self) {
        self.pending
            .sort_by(|a, b| (a.updated_at, &a.session_id).cmp(&(b.updated_at, &b.session_id)));
        self.unreadable
            .sort_by(|a, b| (&a.session_id, &a.location).cmp(&(&b.session_id, &b.location)));
        self.interrupted
            .sort_by(|a, b| (a.updated_at, &a.session_id).cmp(&(b.updated_at, &b.session_id)));
    }
}

/// A stored record [`SessionStore::list_pending`] could not read, reported instead of listed.
/// Loading that session fails with the same reason ([`StoreError::Corrupt`] or
/// [`StoreError::NewerSchema`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnreadableRecord {
    /// The key the record is stored under: the session id of its file name or row, which is
    /// what [`SessionStore::load`] and [`SessionStore::delete`] take (the id inside a record may
    /// differ: that is one way to be unreadable).
    pub session_id: String,
    /// Where it is, for people: the file's path, or the table and row.
    pub location: String,
    /// Why it cannot be read.
    pub reason: String,
}

impl UnreadableRecord {
    /// The report for the record of `session_id` at `location` that failed with `error`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::{StoreError, UnreadableRecord};
    /// let error = StoreError::backend_message("not JSON");
    /// let report = UnreadableRecord::new("s1", "/var/sessions/s1.json", &error);
    /// assert_eq!(report.session_id, "s1");
    /// assert!(report.reason.contains("not JSON"));
    /// ```
    pub fn new(session_id: &str, location: impl Into<String>, error: &StoreError) -> Self {
        let reason = match error {
            StoreError::Corrupt { message, .. } => message.clone(),
            other => other.to_string(),
        };
        Self {
            session_id: session_id.to_owned(),
            location: location.into(),
            reason,
        }
    }
}

impl SessionRecord {
    /// How `graph` stands to the config this session ran under ([`ConfigCheck`]): what a host
    /// checks before it decides or carries the session on under `graph`.
    pub fn config_check(&self, graph: &crate::mode::ModeGraph) -> ConfigCheck {
        ConfigCheck::of(&self.config_fingerprint, self.config.as_ref(), graph)
    }

    /// When the lease of this record's running run ends (milliseconds since the Unix epoch; 0
    /// for a running run without a lease, which counts as ended), or `None` when the run is not
    /// running: what stores index to list interrupted runs without reading the others.
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
    /// # use agent_controller::SessionStore;
    /// # let store = Arc::new(agent_controller::MemoryStore::new());
    /// # let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .store(store.clone())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// # let record = store.load(session.id()).await?.expect("saved");
    /// assert_eq!(record.lease_until(), None, "the run is suspended, not running");
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease_until(&self) -> Option<u64> {
        self.run
            .as_ref()
            .filter(|r| r.state == RunState::Running)
            .map(|r| r.lease_expires_at_ms.unwrap_or(0))
    }

    /// This record's run as an [`InterruptedRun`], if it is interrupted at `now_ms`
    /// ([`RunRecord::is_interrupted`]).
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
    /// # use agent_controller::SessionStore;
    /// # let store = Arc::new(agent_controller::MemoryStore::new());
    /// # let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .store(store.clone())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// # let record = store.load(session.id()).await?.expect("saved");
    /// assert!(record.interrupted_run(agent_controller::store::now_millis()).is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn interrupted_run(&self, now_ms: u64) -> Option<InterruptedRun> {
        let run = self.run.as_ref().filter(|r| r.is_interrupted(now_ms))?;
        Some(InterruptedRun {
            session_id: self.session_id.clone(),
            run_id: run.run_id.clone(),
            mode_id: self.mode_id.clone(),
            owner: run.owner.clone(),
            lease_expires_at_ms: run.lease_expires_at_ms,
            workspace: self.workspace.as_ref().map(|w| w.path.clone()),
            updated_at: self.updated_at,
        })
    }

    /// Whether anything waits for a decision: a plan, or a tool call not decided yet.
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
    /// # use agent_controller::SessionStore;
    /// # let store = Arc::new(agent_controller::MemoryStore::new());
    /// # let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .store(store.clone())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// # let record = store.load(session.id()).await?.expect("saved");
    /// assert!(record.has_pending());
    /// # Ok(())
    /// # }
    /// ```
    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
            || self.pending_tool_calls.iter().any(|p| p.decided.is_none())
            || self.pending_suspensions.iter().any(|p| p.decided.is_none())
    }

    /// The first of [`SessionRecord::pending_summaries`] (the plan, or the first tool call that
    /// waits), if any.
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
    /// # use agent_controller::SessionStore;
    /// # let store = Arc::new(agent_controller::MemoryStore::new());
    /// # let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .store(store.clone())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// # let record = store.load(session.id()).await?.expect("saved");
    /// let summary = record.pending_summary().expect("a plan waits");
    /// assert_eq!(summary.decision_id, payload.decision_id);
    /// assert_eq!(summary.sha256, payload.submission.sha256);
    /// # Ok(())
    /// # }
    /// ```
    pub fn pending_summary(&self) -> Option<PendingSummary> {
        self.pending_summaries().into_iter().next()
    }

    /// Every decision this record waits for, as [`SessionStore::list_pending`] lists them: the
    /// pending plan, or each tool call that waits for approval and is not decided yet, in the
    /// model's order.
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
    /// # use agent_controller::SessionStore;
    /// # let store = Arc::new(agent_controller::MemoryStore::new());
    /// # let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .store(store.clone())
    /// #     .build()?;
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// # let record = store.load(session.id()).await?.expect("saved");
    /// let summaries = record.pending_summaries();
    /// assert_eq!(summaries.len(), 1);
    /// assert_eq!(summaries[0].title, "Add dark mode");
    /// # Ok(())
    /// # }
    /// ```
    pub fn pending_summaries(&self) -> Vec<PendingSummary> {
        let mut summaries: Vec<PendingSummary> = self.plan_summary().into_iter().collect();
        summaries.extend(
            self.pending_tool_calls
                .iter()
                .filter(|p| p.decided.is_none())
                .map(|p| PendingSummary {
                    session_id: self.session_id.clone(),
                    run_id: p.run_id.clone(),
                    tool_call_id: p.tool_call_id.clone(),
                    kind: PendingKind::ToolCall,
                    decision_id: p.suspend_payload.decision_id.clone(),
                    mode_id: self.mode_id.clone(),
                    target_mode_id: String::new(),
                    target_mode_ids: Vec::new(),
                    title: String::new(),
                    plan: None,
                    diff: None,
                    sha256: p.suspend_payload.args_sha256.clone(),
                    tool_name: Some(p.suspend_payload.tool_name.clone()),
                    args: Some(p.suspend_payload.args.clone()),
                    args_sha256: Some(p.suspend_payload.args_sha256.clone()),
                    locations: p.suspend_payload.locations.clone(),
                    payload: None,
                    answer_schema: None,
                    always_allowed: self.always_allowed.clone(),
                    plan_path: String::new(),
                    terms: self.listed_terms(&p.suspend_payload.terms),
                    comments: Vec::new(),
                    subagent: p.suspend_payload.subagent.clone(),
                    scope: None,
                    plan_scope: Default::default(),
                    steps: Vec::new(),
                    drift: p.suspend_payload.drift.clone(),
                    review: p.suspend_payload.review.clone(),
                    updated_at: self.updated_at,
                }),
        );
        summaries.extend(
            self.pending_suspensions
                .iter()
                .filter(|p| p.decided.is_none())
                .map(|p| {
                    let payload = &p.suspend_payload;
                    PendingSummary {
                        session_id: self.session_id.clone(),
                        run_id: p.run_id.clone(),
                        tool_call_id: p.tool_call_id.clone(),
                        kind: match payload.kind {
                            crate::event::SuspensionKind::Question => PendingKind::Question,
                            crate::event::SuspensionKind::Suspension => PendingKind::Suspension,
                        },
                        decision_id: payload.decision_id.clone(),
                        mode_id: self.mode_id.clone(),
                        target_mode_id: String::new(),
                        target_mode_ids: Vec::new(),
                        title: String::new(),
                        plan: None,
                        diff: None,
                        sha256: payload.payload_sha256.clone(),
                        tool_name: Some(payload.tool_name.clone()),
                        args: Some(payload.args.clone()),
                        args_sha256: None,
                        locations: Vec::new(),
                        payload: Some(payload.payload.clone()),
                        answer_schema: Some(payload.answer_schema.clone()),
                        always_allowed: Vec::new(),
                        plan_path: String::new(),
                        terms: self.listed_terms(&payload.terms),
                        comments: Vec::new(),
                        subagent: payload.subagent.clone(),
                        scope: None,
                        plan_scope: Default::default(),
                        steps: Vec::new(),
                        drift: None,
                        review: None,
                        updated_at: self.updated_at,
                    }
                }),
        );
        summaries
    }

    /// The terms a listed decision waits under: its payload's, in the session's recorded
    /// workspace.
    fn listed_terms(&self, terms: &crate::event::WaitTerms) -> crate::event::WaitTerms {
        crate::event::WaitTerms {
            workspace: self.workspace.as_ref().map(|w| w.path.clone()),
            ..terms.clone()
        }
    }

    /// The pending plan as a summary.
    fn plan_summary(&self) -> Option<PendingSummary> {
        self.pending.as_ref().map(|p| PendingSummary {
            session_id: self.session_id.clone(),
            run_id: p.run_id.clone(),
            tool_call_id: p.tool_call_id.clone(),
            kind: PendingKind::Plan,
            decision_id: p.suspend_payload.decision_id.clone(),
            mode_id: self.mode_id.clone(),
            target_mode_id: p.suspend_payload.target_mode_id.to_string(),
            target_mode_ids: match p.suspend_payload.target_mode_ids.as_slice() {
                // A record from before target lists: its one target.
                [] => vec![p.suspend_payload.target_mode_id.to_string()],
                ids => ids.iter().map(ToString::to_string).collect(),
            },
            title: p.suspend_payload.submission.title.clone(),
            plan: Some(p.suspend_payload.submission.plan.clone()),
            diff: p.suspend_payload.diff.clone(),
            sha256: p.suspend_payload.submission.sha256.clone(),
            tool_name: None,
            args: None,
            args_sha256: None,
            locations: Vec::new(),
            payload: None,
            answer_schema: None,
            always_allowed: self.always_allowed.clone(),
            plan_path: p.suspend_payload.submission.path.clone(),
            terms: self.listed_terms(&p.suspend_payload.terms),
            comments: p.suspend_payload.comments.clone(),
            subagent: None,
            scope: p.suspend_payload.scope.clone(),
            plan_scope: p.suspend_payload.plan_scope,
            steps: p.suspend_payload.steps.clone(),
            drift: None,
            review: p.suspend_payload.review.clone(),
            updated_at: self.updated_at,
        })
    }
}

/// Checks that `allowance` may be kept as a workspace allowance: scope `workspace`, a
/// workspace and a config fingerprint, and the id they give ([`crate::allowance::Allowance::workspace_id`]).
pub(crate) fn check_workspace_allowance(
    allowance: &crate::allowance::Allowance,
) -> Result<(), StoreError> {
    let keyed = allowance.scope == crate::allowance::AllowanceScope::Workspace
        && allowance.workspace.is_some()
        && allowance.config_fingerprint.is_some()
        && allowance.id == allowance.workspace_id();
    if keyed {
        Ok(())
    } else {
        Err(StoreError::Unsupported(format!(
            "keep allowance `{}` as a workspace allowance: it must be of scope `workspace`, name its workspace and config, and have the id they give",
            allowance.id
        )))
    }
}

/// What [`SessionStore::load`] answers for one id, as [`SessionStore::load_many`] answers it for
/// each: the record, `None` when the session does not exist, or why it cannot be read. The
/// record is shared, so a store that keeps the records it read (the file store) hands them out
/// without copying each; a caller that changes one takes its own copy
/// ([`Arc::unwrap_or_clone`]).
pub type Loaded = Result<Option<Arc<SessionRecord>>, StoreError>;

/// Where sessions are kept between processes.
///
/// Implementations must make [`SessionStore::save`] atomic (a reader sees the old or the new
/// record, never a mix) and a compare-and-swap on `version`. The testing kit's conformance
/// suite checks a store of yours against this contract (feature `testing`:
/// `testing::StoreConformance`); every backend of the crate passes it. The trait is async through
/// [`async_trait`](crate::async_trait): implement it with `#[agent_controller::async_trait]` on
/// the `impl` block.
///
/// # Examples
/// A store that counts saves and keeps the sessions in a [`MemoryStore`]:
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use agent_controller::store::{PendingListing, SessionRecord};
/// use agent_controller::{MemoryStore, SessionStore, store::StoreError};
///
/// #[derive(Default)]
/// struct Counting {
///     inner: MemoryStore,
///     saves: AtomicUsize,
/// }
///
/// #[agent_controller::async_trait]
/// impl SessionStore for Counting {
///     async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
///         self.inner.load(id).await
///     }
///     async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
///         self.saves.fetch_add(1, Ordering::Relaxed);
///         self.inner.save(record, expected).await
///     }
///     async fn delete(&self, id: &str) -> Result<bool, StoreError> {
///         self.inner.delete(id).await
///     }
///     async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
///         self.inner.list_pending(now_ms).await
///     }
///     async fn expire(&self, before: u64) -> Result<usize, StoreError> {
///         self.inner.expire(before).await
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = Counting::default();
/// assert_eq!(store.load("nobody").await?, None);
/// assert_eq!(store.saves.load(Ordering::Relaxed), 0);
/// # Ok::<(), StoreError>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Loads a session; `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for an unreadable record (garbage, or a record whose `sessionId`
    /// is not `session_id`), [`StoreError::NewerSchema`] for a record of a newer release,
    /// [`StoreError::Backend`] on I/O failure.
    async fn load(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError>;

    /// Loads several sessions at once: one answer per id of `session_ids`, in that order, each
    /// what [`SessionStore::load`] answers for that id (`Ok(None)` when it does not exist, an
    /// error for an unreadable record, which does not keep the others from being read). A host
    /// that lists a page of pending decisions reads their sessions with one call instead of
    /// one per session.
    ///
    /// By default each id is loaded in turn with [`SessionStore::load`]; the crate's SQLite and
    /// PostgreSQL stores read them in one query, the file store in one blocking task.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the store itself fails for the whole batch (the database);
    /// the error of one record is its own answer.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{MemoryStore, SessionStore};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let loaded = store.load_many(&["nobody", "nobody_else"]).await?;
    /// assert_eq!(loaded.len(), 2);
    /// assert!(loaded.iter().all(|each| matches!(each, Ok(None))));
    /// # Ok::<(), agent_controller::store::StoreError>(())
    /// # }).unwrap();
    /// ```
    async fn load_many(&self, session_ids: &[&str]) -> Result<Vec<Loaded>, StoreError> {
        let mut loaded = Vec::with_capacity(session_ids.len());
        for id in session_ids {
            loaded.push(self.load(id).await.map(|found| found.map(Arc::new)));
        }
        Ok(loaded)
    }

    /// Saves `record` if the stored version is `expected` (`None`: the session must not exist).
    /// `record.version` is the new version and must be `expected + 1` (or 1).
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when another writer saved first; [`StoreError::Backend`] on I/O
    /// failure, in which case the previous record is intact.
    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError>;

    /// Deletes a session; returns whether it existed.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on I/O failure.
    async fn delete(&self, session_id: &str) -> Result<bool, StoreError>;

    /// Every pending decision, oldest first, without reading sessions that have none, and every
    /// run interrupted at `now_ms` (milliseconds since the Unix epoch: a running run whose lease
    /// ended by then, [`PendingListing::interrupted`]); a record
    /// that cannot be read (garbage, a newer schema, a `sessionId` that is not its key) is
    /// reported in [`PendingListing::unreadable`] and the others are still listed (issue 10:
    /// one corrupt record must not hide every pending plan). A session's pending plan is one
    /// entry, and each of its waiting tool calls one of its own.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the store itself cannot be read (the directory, the
    /// database); never for one bad record.
    ///
    /// A store reads no clock: the caller says when, as for [`SessionStore::expire`] (a
    /// controller passes its own clock's now, [`crate::controller::AgentControllerBuilder::clock`]).
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError>;

    /// [`SessionStore::list_pending`] for a caller that reads the pending decisions (and the
    /// unreadable records) and has no clock: the listing at time 0, at which no lease has
    /// ended, so [`PendingListing::interrupted`] holds only the running runs without a lease.
    ///
    /// # Errors
    /// As for [`SessionStore::list_pending`].
    async fn list_pending_decisions(&self) -> Result<PendingListing, StoreError> {
        self.list_pending(0).await
    }

    /// One page of [`SessionStore::list_pending_decisions`]: at most `limit` pending decisions
    /// (at least one) after `after` (the [`PendingPage::next_cursor`] of the previous page;
    /// `None` for the first), in the listing's order (oldest first by `updatedAt`, then session
    /// id, then the session's own order), and the cursor of the next page while more follow.
    /// A host that shows what waits in a big store reads one bounded page instead of every
    /// pending decision ([`pending_page`]). Deadlines are not applied here: a host applies them
    /// first ([`crate::deadline::expire_due_then_page`], [`crate::AgentController::list_pending_page`]).
    ///
    /// By default the whole listing is read and one page of it kept
    /// ([`PendingListing::page`]), so a store of yours pages without more code; the crate's
    /// SQLite and PostgreSQL stores read only the page (`ORDER BY updated_at, id LIMIT` from the
    /// cursor on, through their pending index), the file store parses only the records of the
    /// page in full.
    ///
    /// # Errors
    /// As for [`SessionStore::list_pending`]. A cursor text that is no cursor never gets here:
    /// parsing it fails first ([`InvalidPendingCursor`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{MemoryStore, SessionStore};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let page = store.list_pending_page(None, 100).await?;
    /// assert!(page.pending.is_empty() && page.next_cursor.is_none());
    /// # Ok::<(), agent_controller::store::StoreError>(())
    /// # }).unwrap();
    /// ```
    async fn list_pending_page(
        &self,
        after: Option<&PendingCursor>,
        limit: usize,
    ) -> Result<PendingPage, StoreError> {
        Ok(self.list_pending_decisions().await?.page(after, limit))
    }

    /// Notices of what this store's other handles and other processes save, when the store
    /// pushes them: a stream of the ids of the sessions saved or deleted, each once its write is
    /// committed, subscribed before this returns (nothing committed afterwards is missed). It
    /// ends after an `Err` (the notices may have missed changes since: read the store again).
    /// [`PendingWatch`] listens to it instead of polling.
    ///
    /// `None` by default: the store pushes nothing, and watchers poll it. PostgreSQL pushes
    /// (`LISTEN`/`NOTIFY`).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the subscription fails.
    async fn change_notices(&self) -> Result<Option<ChangeNotices>, StoreError> {
        Ok(None)
    }

    /// Deletes sessions with nothing pending and no running run (an interrupted run can still
    /// be carried on) that were last saved before `before` (seconds since the Unix epoch);
    /// returns how many were deleted.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on I/O failure.
    async fn expire(&self, before: u64) -> Result<usize, StoreError>;

    /// Every session the store holds (those whose recorded workspace is `workspace`, a
    /// canonical path, when it is given), newest first, as [`SessionSummary`]s: what a host
    /// shows to let the user pick a session to load or resume (ACP's `session/list`, the CLI's
    /// `sessions`). A record that cannot be read (garbage, a newer schema, a `sessionId` that is
    /// not its key, a file that is not a regular file) is reported in
    /// [`SessionListing::unreadable`], whatever the workspace asked for, and the others are still
    /// listed. Page through it with [`SessionListing::page`].
    ///
    /// # Errors
    /// [`StoreError::Unsupported`] by default: a store that cannot list its sessions says so.
    /// [`StoreError::Backend`] when the store itself cannot be read (the directory, the
    /// database); never for one bad record.
    async fn list_sessions(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<SessionListing, StoreError> {
        let _ = workspace;
        Err(StoreError::Unsupported("list its sessions".to_owned()))
    }

    /// The files and directories that hold this store's data, which no workspace tool may
    /// read, list or write (a model could otherwise read other sessions or forge a record when
    /// the store sits in the workspace): a directory covers everything beneath it. The
    /// controller protects them ([`crate::controller::AgentControllerBuilder::protected_path`]). Empty by
    /// default, for stores outside the file system.
    fn protected_paths(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    /// Keeps a workspace allowance ([`crate::allowance::AllowanceScope::Workspace`]) for every
    /// session of the store in its workspace, under its config, in its mode. Saving one whose
    /// id the store holds replaces it (the same allowance given twice is kept once).
    ///
    /// # Errors
    /// [`StoreError::Unsupported`] by default: a store that keeps none refuses, and the
    /// decision that asked for it changes nothing. [`StoreError::Backend`] on I/O failure.
    async fn save_workspace_allowance(
        &self,
        allowance: &crate::allowance::Allowance,
    ) -> Result<(), StoreError> {
        let _ = allowance;
        Err(StoreError::Unsupported(
            "keep workspace allowances".to_owned(),
        ))
    }

    /// The workspace allowances the store keeps, oldest first: those of the workspace whose
    /// canonical root is `workspace`, or every one with `None`. A session asks for its own
    /// workspace's and keeps only those of its workspace and config
    /// ([`crate::allowance::Allowance::is_for`]).
    ///
    /// # Errors
    /// [`StoreError::Backend`] on I/O failure. By default there are none (`Ok(vec![])`).
    async fn list_workspace_allowances(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<Vec<crate::allowance::Allowance>, StoreError> {
        let _ = workspace;
        Ok(Vec::new())
    }

    /// Revokes the workspace allowance with id `id`: no session opened or restored afterwards
    /// applies it. Returns whether the store kept it.
    ///
    /// # Errors
    /// [`StoreError::Backend`] on I/O failure. By default the store keeps none (`Ok(false)`).
    async fn revoke_workspace_allowance(&self, id: &str) -> Result<bool, StoreError> {
        let _ = id;
        Ok(false)
    }
}

#[async_trait]
impl<S: SessionStore + ?Sized> SessionStore for Arc<S> {
    async fn load(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        (**self).load(session_id).await
    }
    async fn load_many(&self, session_ids: &[&str]) -> Result<Vec<Loaded>, StoreError> {
        (**self).load_many(session_ids).await
    }
    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        (**self).save(record, expected).await
    }
    async fn delete(&self, session_id: &str) -> Result<bool, StoreError> {
        (**self).delete(session_id).await
    }
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        (**self).list_pending(now_ms).await
    }
    async fn list_pending_decisions(&self) -> Result<PendingListing, StoreError> {
        (**self).list_pending_decisions().await
    }
    async fn list_pending_page(
        &self,
        after: Option<&PendingCursor>,
        limit: usize,
    ) -> Result<PendingPage, StoreError> {
        (**self).list_pending_page(after, limit).await
    }
    async fn change_notices(&self) -> Result<Option<ChangeNotices>, StoreError> {
        (**self).change_notices().await
    }
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        (**self).expire(before).await
    }
    async fn list_sessions(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<SessionListing, StoreError> {
        (**self).list_sessions(workspace).await
    }
    fn protected_paths(&self) -> Vec<PathBuf> {
        (**self).protected_paths()
    }
    async fn save_workspace_allowance(
        &self,
        allowance: &crate::allowance::Allowance,
    ) -> Result<(), StoreError> {
        (**self).save_workspace_allowance(allowance).await
    }
    async fn list_workspace_allowances(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<Vec<crate::allowance::Allowance>, StoreError> {
        (**self).list_workspace_allowances(workspace).await
    }
    async fn revoke_workspace_allowance(&self, id: &str) -> Result<bool, StoreError> {
        (**self).revoke_workspace_allowance(id).await
    }
}

/// Opens a store from a spec as the CLI takes it: `sqlite:FILE` for `SqliteStore` (with the
/// `sqlite` feature), `postgres://USER@HOST:PORT/DB` (or `postgresql://`) for `PostgresStore`
/// (with the `postgres` feature; it connects at its first use), anything else is a directory for
/// [`FileStore`]. The spec is checked first with [`check_spec`], so a spec that would lose
/// sessions opens nothing.
///
/// # Errors
/// [`StoreError::InvalidSpec`] for a spec [`check_spec`] refuses (`sqlite:` or `postgres://`
/// without their feature among them); [`StoreError::Backend`] when the store cannot be opened.
///
/// # Examples
/// ```
/// use agent_controller::store::open_store;
/// let dir = tempfile::tempdir()?;
/// let store = open_store(dir.path().join("sessions").to_str().unwrap())?;
/// assert!(dir.path().join("sessions").is_dir(), "a directory: a FileStore");
/// # let _ = store;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_store(spec: &str) -> Result<Arc<dyn SessionStore>, StoreError> {
    check_spec(spec)?;
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        return open_postgres(spec);
    }
    match spec.strip_prefix("sqlite:") {
        #[cfg(feature = "sqlite")]
        Some(file) => Ok(Arc::new(SqliteStore::open(file)?)),
        #[cfg(not(feature = "sqlite"))]
        Some(_) => Err(StoreError::backend_message(
            "this build has no SQLite support: rebuild with `--features sqlite`",
        )),
        None => Ok(Arc::new(FileStore::open(spec)?)),
    }
}

/// [`open_store`] for a store that must exist already (to list or decide what is in it): a
/// directory or an SQLite file that is not there is refused, and nothing is created (opening
/// would create an empty store, which hides a mistyped path). A `postgres://` spec is opened as
/// [`open_store`] opens it.
///
/// # Errors
/// [`StoreError::Missing`] when the directory or file does not exist (or is of the other
/// kind); otherwise as [`open_store`].
///
/// # Examples
/// ```
/// use agent_controller::store::{StoreError, open_existing_store};
/// let dir = tempfile::tempdir()?;
/// let missing = dir.path().join("sessions");
/// assert!(matches!(open_existing_store(missing.to_str().unwrap()), Err(StoreError::Missing { .. })));
/// assert!(!missing.exists(), "nothing was created");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_existing_store(spec: &str) -> Result<Arc<dyn SessionStore>, StoreError> {
    check_spec(spec)?;
    let exists = if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        true
    } else if let Some(file) = spec.strip_prefix("sqlite:") {
        std::path::Path::new(file).is_file()
    } else {
        std::path::Path::new(spec).is_dir()
    };
    if !exists {
        return Err(StoreError::Missing(display_spec(spec)));
    }
    open_store(spec)
}

#[cfg(feature = "postgres")]
fn open_postgres(spec: &str) -> Result<Arc<dyn SessionStore>, StoreError> {
    let config = postgres::PostgresConfig::from_url(spec)?;
    Ok(Arc::new(PostgresStore::open(config)?))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_: &str) -> Result<Arc<dyn SessionStore>, StoreError> {
    Err(StoreError::backend_message(
        "this build has no PostgreSQL support: rebuild with `--features postgres`".to_owned(),
    ))
}

/// Fewest characters of an id or hash that [`resolve_prefix`] and [`resolve_session_id`] take as
/// a prefix of it (`pending` shows 12 of a sha256).
pub const MIN_PREFIX_CHARS: usize = 8;

/// Why a prefix names no single id or hash ([`resolve_prefix`], [`resolve_session_id`]).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdPrefixError {
    /// Fewer than [`MIN_PREFIX_CHARS`] characters, and not a whole id.
    #[error(
        "`{prefix}` is too short for a {what} prefix: give at least {MIN_PREFIX_CHARS} characters, or the whole {}",
        if *what == "sha256" { "hash" } else { "id" }
    )]
    TooShort {
        /// What the prefix is of (`session id`, `sha256`).
        what: &'static str,
        /// The prefix given.
        prefix: String,
    },
    /// More than one candidate starts with the prefix.
    #[error("`{prefix}` is the start of more than one {what}: {}; give more of it", candidates.join(", "))]
    Ambiguous {
        /// What the prefix is of (`session id`, `sha256`).
        what: &'static str,
        /// The prefix given.
        prefix: String,
        /// Every candidate that starts with it, sorted.
        candidates: Vec<String>,
    },
    /// The store could not list its sessions.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The one of `candidates` that `prefix` names: the candidate equal to it, else the only one that
/// starts with it (`None` when none does). A sha256 is compared without regard to case.
///
/// # Errors
/// [`IdPrefixError::Ambiguous`] when several candidates start with it (naming them);
/// [`IdPrefixError::TooShort`] when it is shorter than [`MIN_PREFIX_CHARS`] and some candidate
/// starts with it.
///
/// # Examples
/// ```
/// use agent_controller::store::resolve_prefix;
/// let hashes = ["3f2a9c01d4e5aa", "3f2a9c01ffff00"];
/// assert_eq!(resolve_prefix("sha256", "3f2a9c01d4", hashes), Ok(Some("3f2a9c01d4e5aa")));
/// assert!(resolve_prefix("sha256", "3f2a9c01", hashes).is_err()); // both
/// assert!(resolve_prefix("sha256", "3f2a", hashes).is_err()); // too short
/// assert_eq!(resolve_prefix("sha256", "00000000", hashes), Ok(None));
/// ```
pub fn resolve_prefix<'a>(
    what: &'static str,
    prefix: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Result<Option<&'a str>, IdPrefixError> {
    let fold = what == "sha256";
    let starts = |candidate: &str| {
        candidate
            .get(..prefix.len())
            .is_some_and(|head| head == prefix || (fold && head.eq_ignore_ascii_case(prefix)))
    };
    let mut matches: Vec<&'a str> = Vec::new();
    for candidate in candidates {
        if candidate == prefix || (fold && candidate.eq_ignore_ascii_case(prefix)) {
            return Ok(Some(candidate));
        }
        if starts(candidate) && !matches.contains(&candidate) {
            matches.push(candidate);
        }
    }
    match matches.as_slice() {
        [] => Ok(None),
        _ if prefix.chars().count() < MIN_PREFIX_CHARS => Err(IdPrefixError::TooShort {
            what,
            prefix: prefix.to_owned(),
        }),
        [one] => Ok(Some(one)),
        _ => {
            matches.sort_unstable();
            Err(IdPrefixError::Ambiguous {
                what,
                prefix: prefix.to_owned(),
                candidates: matches.iter().map(|c| (*c).to_owned()).collect(),
            })
        }
    }
}

/// The session id `prefix` names in `store`: itself when the store has a session of that id,
/// else the one session with something to decide or carry on ([`SessionStore::list_pending`]:
/// a pending plan or tool call, a run that is still `running`, its lease ended or not, as
/// `continue` and `switch` of an interrupted run need it) whose id starts with it, as
/// [`resolve_prefix`] finds it; `prefix` itself when none does (restoring it then reports an
/// unknown session).
///
/// # Errors
/// [`IdPrefixError::Ambiguous`], [`IdPrefixError::TooShort`] as [`resolve_prefix`];
/// [`IdPrefixError::Store`] when the store cannot be read.
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
/// # use agent_controller::SessionStore;
/// # let store = Arc::new(agent_controller::MemoryStore::new());
/// # let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
/// #     .tools(ToolRegistry::with_workspace_tools())
/// #     .workspace(workspace.path())
/// #     .store(store.clone())
/// #     .build()?;
/// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
/// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
/// # let record = store.load(session.id()).await?.expect("saved");
/// use agent_controller::store::resolve_session_id;
/// let id = session.id().to_owned();
/// assert_eq!(resolve_session_id(&*store, &id[..8]).await?, id);
/// assert_eq!(resolve_session_id(&*store, &id).await?, id);
/// # Ok(())
/// # }
/// ```
pub async fn resolve_session_id(
    store: &dyn SessionStore,
    prefix: &str,
) -> Result<String, IdPrefixError> {
    if check_session_id(prefix).is_ok() && store.load(prefix).await?.is_some() {
        return Ok(prefix.to_owned());
    }
    // At the end of time every running run's lease has ended: a session whose run was cut
    // off is named by a prefix before its lease ends too (the command then says the lease
    // still runs, rather than "unknown session").
    let listing = store.list_pending(u64::MAX).await?;
    let ids = listing
        .pending
        .iter()
        .map(|p| p.session_id.as_str())
        .chain(listing.interrupted.iter().map(|r| r.session_id.as_str()));
    Ok(resolve_prefix("session id", prefix, ids)?
        .unwrap_or(prefix)
        .to_owned())
}

/// Checks a store spec as [`open_store`] takes it, without opening anything: a spec must name a
/// place where sessions outlive the process (issue 10: `sqlite:` and `sqlite::memory:` printed
/// "decide later with ..." for a session that went into a throw-away database).
///
/// Refused: an empty spec; `sqlite:` with an empty path (SQLite makes a temporary database,
/// deleted on close); `sqlite::memory:`; any SQLite URI filename (`sqlite:file:...`, which can
/// name in-memory or temporary databases: `file::memory:`, `?mode=memory`, `vfs=memdb`); a SQLite
/// path with `?` (URI parameters a plain path does not take). Give a plain file path instead.
/// Refused too: `sqlite:` and `postgres://` specs in a build without the `sqlite` or `postgres`
/// feature, which cannot open them (a usage error, not a store failure).
/// A library host that wants an in-memory SQLite store says so explicitly with
/// `SqliteStore::in_memory` (or uses [`MemoryStore`]).
///
/// # Errors
/// [`StoreError::InvalidSpec`] with the reason.
///
/// # Examples
/// ```
/// use agent_controller::store::{StoreError, check_spec};
///
/// assert!(check_spec(".agent/sessions").is_ok());
/// assert_eq!(check_spec("sqlite:sessions.db").is_ok(), cfg!(feature = "sqlite"));
/// for lost in ["", "sqlite:", "sqlite::memory:", "sqlite:file::memory:", "sqlite:file:s.db?mode=memory"] {
///     assert!(matches!(check_spec(lost), Err(StoreError::InvalidSpec { .. })), "{lost}");
/// }
/// ```
pub fn check_spec(spec: &str) -> Result<(), StoreError> {
    let refuse = |reason: &str| {
        Err(StoreError::InvalidSpec {
            spec: display_spec(spec),
            reason: reason.to_owned(),
        })
    };
    if spec.trim().is_empty() {
        return refuse("the spec is empty: give a directory, `sqlite:FILE` or a postgres:// URL");
    }
    if !cfg!(feature = "postgres")
        && (spec.starts_with("postgres://") || spec.starts_with("postgresql://"))
    {
        return refuse("this build has no PostgreSQL support: rebuild with `--features postgres`");
    }
    let Some(path) = spec.strip_prefix("sqlite:") else {
        return Ok(());
    };
    if !cfg!(feature = "sqlite") {
        return refuse("this build has no SQLite support: rebuild with `--features sqlite`");
    }
    if path.trim().is_empty() {
        refuse(
            "`sqlite:` needs a file path; an empty path is a temporary database, deleted when the process ends",
        )
    } else if path.eq_ignore_ascii_case(":memory:") {
        refuse("`:memory:` is an in-memory database, gone when the process ends: give a file path")
    } else if path
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("file:"))
    {
        refuse(
            "SQLite URI filenames are not taken (they can name in-memory or temporary databases: `file::memory:`, `mode=memory`, `vfs=memdb`): give a plain file path",
        )
    } else if path.contains('?') {
        refuse(
            "a SQLite path takes no `?` parameters (such as `mode=memory`): give a plain file path",
        )
    } else {
        Ok(())
    }
}

/// A store spec as it may be shown: a URL (`postgres://`, or any `SCHEME://`) loses its password
/// (the `:PASSWORD` of the user part and any `password=` parameter); other specs are unchanged.
///
/// # Examples
/// ```
/// use agent_controller::store::display_spec;
///
/// assert_eq!(display_spec("postgres://app:s3cret@db:5432/agents"), "postgres://app@db:5432/agents");
/// assert_eq!(display_spec("sqlite:sessions.db"), "sqlite:sessions.db");
/// ```
pub fn display_spec(spec: &str) -> String {
    if !spec.contains("://") {
        return spec.to_owned();
    }
    let (head, query) = match spec.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (spec, None),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let (scheme, rest) = head.split_at(scheme_end);
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user_info, hosts)) => {
            let user = user_info.split_once(':').map_or(user_info, |(u, _)| u);
            format!("{user}@{hosts}")
        }
        None => authority.to_owned(),
    };
    let mut shown = format!("{scheme}{authority}{path}");
    let kept: Vec<&str> = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter(|pair| !pair.is_empty() && pair.split('=').next() != Some("password"))
        .collect();
    if !kept.is_empty() {
        shown.push('?');
        shown.push_str(&kept.join("&"));
    }
    shown
}

/// Milliseconds since the Unix epoch, now: the clock of leases
/// ([`RunRecord::lease_expires_at_ms`]). Hosts that share a store must keep their clocks in
/// step (NTP) to well within a lease.
///
/// # Examples
/// ```
/// use agent_controller::store::{now_millis, now_secs};
/// assert!(now_millis() / 1000 >= now_secs() - 1);
/// ```
pub fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Seconds since the Unix epoch, now.
///
/// # Examples
/// ```
/// use agent_controller::store::now_secs;
/// assert!(now_secs() > 1_700_000_000, "after November 2023");
/// ```
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Checks a session id before it becomes a file name or key.
///
/// # Errors
/// [`StoreError::InvalidId`] for an empty id or one with characters other than ASCII letters,
/// digits, `-` and `_`, or longer than 128 bytes.
///
/// # Examples
/// ```
/// use agent_controller::store::check_session_id;
/// assert!(check_session_id("ticket-42_b").is_ok());
/// assert!(check_session_id("../etc/passwd").is_err());
/// assert!(check_session_id("").is_err());
/// assert!(check_session_id(&"a".repeat(129)).is_err());
/// ```
pub fn check_session_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidId(id.to_owned()))
    }
}

/// Parses the record stored under `session_id`: a record of an older schema version is
/// migrated, one of a newer version is refused ([`StoreError::NewerSchema`]), anything
/// unreadable, or a record naming another session, is [`StoreError::Corrupt`].
pub(crate) fn decode(session_id: &str, bytes: &[u8]) -> Result<SessionRecord, StoreError> {
    let corrupt = |message: String| corrupt(session_id, message);
    // A record of this version is read straight into its type, in one pass; anything else (an
    // older or newer version, or bytes that do not read as a record) takes the general path,
    // which migrates or says what is wrong.
    let record = match serde_json::from_slice::<SessionRecord>(bytes) {
        Ok(record) if record.schema_version == SCHEMA_VERSION => record,
        _ => decode_any_version(session_id, bytes)?,
    };
    if record.session_id != session_id {
        return Err(corrupt(format!(
            "the record is stored as session `{session_id}` but names session `{}`",
            record.session_id
        )));
    }
    check_plan_hashes(&record).map_err(|why| {
        corrupt(format!(
            "{why}: the record was changed outside agent-controller, so what an approval would pin is not what it would show; it is refused and left as it is"
        ))
    })?;
    Ok(record)
}

/// [`decode`]'s general path: the record read as JSON, its schema version checked, migrated
/// from an older one ([`migrate`]), then read into its type.
fn decode_any_version(session_id: &str, bytes: &[u8]) -> Result<SessionRecord, StoreError> {
    let corrupt = |message: String| corrupt(session_id, message);
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    let found = value
        .get("schemaVersion")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| corrupt("the record has no numeric schemaVersion".to_owned()))?;
    if found > u64::from(SCHEMA_VERSION) {
        return Err(StoreError::NewerSchema {
            session_id: session_id.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == 0 {
        return Err(corrupt("schema version 0 was never written".to_owned()));
    }
    migrate(&mut value, found);
    serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))
}

/// [`StoreError::Corrupt`]: the record of `session_id` cannot be read, and why.
fn corrupt(session_id: &str, message: String) -> StoreError {
    StoreError::Corrupt {
        session_id: session_id.to_owned(),
        message,
    }
}

/// Checks that each plan text the record holds is the text its sha256 pins: the pending plan
/// ([`crate::plan::PlanSubmission::check_sha256`]) and the last revision
/// ([`PlanRevision::check_sha256`]), so that an approval pinned to the sha256 shown approves
/// the text shown.
fn check_plan_hashes(record: &SessionRecord) -> Result<(), String> {
    if let Some(pending) = &record.pending {
        let payload = &pending.suspend_payload;
        payload.submission.check_sha256().map_err(|why| {
            format!(
                "pending plan {} ({}): {why}",
                payload.decision_id, payload.submission.path
            )
        })?;
    }
    match &record.last_plan {
        Some(last) => last.check_sha256().map_err(|why| why.to_string()),
        None => Ok(()),
    }
}

/// Brings a record of an older schema version to [`SCHEMA_VERSION`], one step per version.
///
/// 1 -> 2 (0.1.0 -> 0.2.0): every field added in 0.2.0 (such as `metadata`) is optional and
/// takes its default when absent, so only the version number changes.
///
/// 2 -> 3 (0.2.0 -> the next release): the same; the fields added since 0.2.0 (a run's `owner`
/// and `leaseExpiresAtMs`, a plan's `targetModeIds`, …) are optional. The version still goes up
/// so that a 0.2.0 host, whose records refuse unknown fields, refuses a record holding them as
/// [`StoreError::NewerSchema`] ("upgrade this host") instead of calling it corrupt.
///
/// 3 -> 4 (tool-call approvals): the same; `pendingToolCalls`, `alwaysAllowed` and a decision
/// record's `toolName`, `alwaysAllow` and `allowedBy` are optional, so a version-3 record means "no tool call
/// waits". A version-3 host refuses a version-4 record as newer instead of losing the waiting
/// tool calls it cannot read.
///
/// 4 -> 5 (recorded workspaces): `workspace` (and a payload's `workspace`) is optional, so a
/// version-4 record loads without one. Such a session is never run in a directory nobody named:
/// restored by a controller that names its workspace explicitly, it adopts that one (recorded
/// at its next save); by one that does not, it is refused
/// ([`crate::SessionError::NoWorkspaceRecorded`]; the CLI asks for `--workspace`). A version-4
/// host refuses a version-5 record as newer instead of deciding it in its current directory.
///
/// 5 -> 6 (tools that suspend): `pendingSuspensions` is optional, so a version-5 record means
/// "no call waits for an answer". A version-5 host refuses a version-6 record as newer instead
/// of losing the questions it cannot read.
///
/// 6 -> 7, two changes in one layout:
/// - the task list: `tasks` is optional, so a version-6 record means an empty list;
/// - a plan's sha256 pins the text shown ([`crate::plan::PlanSubmission::sha256`]): a
///   version-6 record's plan hashes are of the plan file's bytes, which it does not keep. The
///   pending plan's `sha256` and the last revision's are computed again from the texts the record
///   keeps (the texts a host shows), and a `previousSha256` that named the last revision names it
///   by its new hash. A pin taken from a version-6 listing no longer matches: such a decision is
///   refused as stale and changes nothing (list it again). Waiting tool calls gain an optional
///   `locations`.
///
/// 7 -> 8 (a subagent's calls reach the user): `children` is optional, and a waiting call's
/// payload and a decided record gain an optional `subagent`, so a version-7 record means "no
/// child waits". A version-7 host refuses a version-8 record as newer instead of losing the
/// waiting children it cannot read.
///
/// 8 -> 9 (the approved plan binds the build): an allowance may have scope `plan` (with its
/// `plan`: the approved plan's files), a pending plan's payload gains an optional `scope`,
/// `planScope` and `steps`, and a waiting call's an optional `drift`; all optional, so a
/// version-8 record means "no plan binds". A plan pending in a version-8 record shows no
/// scope, so approving it grants none (the approver was never shown one). A version-8 host
/// refuses a version-9 record as newer instead of calling it corrupt for a scope it does not
/// know.
///
/// 9 -> 10 (approving some steps): a decision record gains an optional `steps` (the steps
/// of the plan approved), so a version-9 record means "every approval was of a whole plan". A
/// version-9 host refuses a version-10 record as newer instead of calling it corrupt for a
/// record it does not know.
///
/// 10 -> 11 (the report at the end of an approved plan's run): `planLedger` and `planReport`
/// are optional, so a version-10 record means "nothing noted, no report". A version-10 host
/// refuses a version-11 record as newer instead of calling it corrupt for fields it does not
/// know.
///
/// A version-6 host refuses a version-7 record as newer ("upgrade this host") instead of calling
/// it corrupt for a field it does not know, or dropping one.
fn migrate(value: &mut serde_json::Value, found: u64) {
    if found < 7 {
        rehash_plans(value);
    }
    if let Some(record) = value.as_object_mut() {
        record.insert("schemaVersion".to_owned(), SCHEMA_VERSION.into());
    }
}

/// Version 6 -> 7: the plan hashes of `record` (JSON) computed from the texts it keeps.
fn rehash_plans(record: &mut serde_json::Value) {
    use crate::plan::sha256_hex;
    let mut renamed: Option<(String, String)> = None;
    if let Some(last) = record.get_mut("lastPlan").filter(|l| l.is_object())
        && let Some(text) = last.get("text").and_then(serde_json::Value::as_str)
    {
        let new = sha256_hex(text.as_bytes());
        if let Some(old) = last.get("sha256").and_then(serde_json::Value::as_str) {
            renamed = Some((old.to_owned(), new.clone()));
        }
        last["sha256"] = new.into();
    }
    let Some(payload) = record
        .get_mut("pending")
        .and_then(|p| p.get_mut("suspendPayload"))
        .filter(|p| p.is_object())
    else {
        return;
    };
    let text = |key: &str| payload.get(key).and_then(serde_json::Value::as_str);
    if let (Some(title), Some(plan)) = (text("title"), text("plan")) {
        let shown = crate::plan::PlanSubmission {
            path: String::new(),
            title: title.to_owned(),
            plan: plan.to_owned(),
            sha256: String::new(),
        };
        payload["sha256"] = shown.shown_sha256().into();
    }
    if let Some((old, new)) = renamed
        && payload
            .get("previousSha256")
            .and_then(serde_json::Value::as_str)
            == Some(old.as_str())
    {
        payload["previousSha256"] = new.into();
    }
}

/// Checks that a save's new version follows the expected one.
pub(crate) fn check_next_version(
    record: &SessionRecord,
    expected: Option<u64>,
) -> Result<(), StoreError> {
    if record.version == expected.map_or(1, |v| v + 1) {
        Ok(())
    } else {
        Err(StoreError::backend_message(format!(
            "record version {} does not follow expected version {expected:?}",
            record.version
        )))
    }
}

#[cfg(test)]
mod spec_tests {
    use super::{StoreError, check_spec, open_store};

    /// Issue 21: a spec for a store this build lacks is an invalid spec (the CLI's usage error,
    /// exit 2), not a store failure (exit 1).
    #[test]
    fn a_spec_for_a_store_the_build_lacks_is_invalid() {
        for (spec, built) in [
            (
                "postgres://root@127.0.0.1:5432/test",
                cfg!(feature = "postgres"),
            ),
            (
                "postgresql://root@127.0.0.1/test",
                cfg!(feature = "postgres"),
            ),
            ("sqlite:sessions.db", cfg!(feature = "sqlite")),
        ] {
            let refused = matches!(check_spec(spec), Err(StoreError::InvalidSpec { .. }));
            assert_eq!(refused, !built, "{spec}");
            if !built {
                let err = open_store(spec).err().expect("refused");
                assert!(matches!(err, StoreError::InvalidSpec { .. }), "{err}");
                assert!(
                    err.to_string().contains("rebuild with `--features"),
                    "{err}"
                );
            }
        }
    }
}

#[cfg(test)]
mod decode_tests {
    use super::{SCHEMA_VERSION, StoreError, decode, decode_any_version};

    const ID: &str = "98e9b0f7-8dbb-4cb8-a046-ec18f5977194";

    /// A record of this version, as a save writes it: the fixture (version 1) migrated.
    fn current() -> Vec<u8> {
        let old = include_bytes!("../tests/fixtures/records/pending.json");
        let record = decode_any_version(ID, old).expect("the fixture reads");
        assert_eq!(record.schema_version, SCHEMA_VERSION);
        serde_json::to_vec(&record).expect("JSON")
    }

    /// A record of this version is read straight into its type: what that reads is what the
    /// general path (JSON, version checked, migrated) reads, and a record the one-pass read
    /// refuses (here a key twice, which the general path takes the last of) still reads as
    /// it did.
    #[test]
    fn the_one_pass_read_of_this_version_reads_what_the_general_path_reads() {
        let bytes = current();
        let general = decode_any_version(ID, &bytes).expect("general");
        assert_eq!(decode(ID, &bytes).expect("one pass"), general);

        let text = String::from_utf8(bytes).expect("UTF-8");
        let twice = text.replacen('{', r#"{"modeId":"elsewhere","#, 1);
        assert!(serde_json::from_str::<super::SessionRecord>(&twice).is_err());
        assert_eq!(decode(ID, twice.as_bytes()).expect("read"), general);
    }

    /// What is not this version takes the general path, and says so as it did.
    #[test]
    fn other_versions_are_migrated_or_refused_as_before() {
        let text = String::from_utf8(current()).expect("UTF-8");
        let newer = text.replacen(
            &format!("\"schemaVersion\":{SCHEMA_VERSION}"),
            &format!("\"schemaVersion\":{}", SCHEMA_VERSION + 1),
            1,
        );
        assert!(matches!(
            decode(ID, newer.as_bytes()),
            Err(StoreError::NewerSchema { found, .. }) if found == u64::from(SCHEMA_VERSION) + 1
        ));
        let old = include_bytes!("../tests/fixtures/records/pending.json");
        assert_eq!(
            decode(ID, old).expect("migrated").schema_version,
            SCHEMA_VERSION
        );
        assert!(matches!(
            decode("another-id", text.as_bytes()),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
