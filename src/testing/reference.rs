//! The reference model: a small, pure session that follows the rules of the mode state machine
//! (the current mode, the pending decision, the run state) and says, for every operation, what
//! the real session must do: its outcome and the exact order of what it emits.
//!
//! # An independent oracle, on purpose
//!
//! This model does not call the session's rules (`src/machine/`, the crate's core without I/O):
//! it restates them in another form, for each host operation the expected outcome, refusal and
//! trace of events over a few plans and tool calls. The property tests and the explorer
//! ([`crate::testing`]) drive the real [`crate::Session`], whose every change runs the core, and
//! compare each step with this model. A model that called the core would agree with every bug in
//! it; a rule written twice, in two different shapes, checks itself. So it stays small and of
//! another kind: outcomes and traces, never records, leases or saves; when a rule changes, it is
//! changed here by hand.

use std::fmt;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::ask::{AnswerChoice, Ask};
use super::facts::{ConfigFacts, WorkspaceStore};
use super::hooks::{HookAnswer, HookScript};
use super::quorum::{QuorumStep, approver};
use super::subagents::{CHILD_ANSWER, ChildOrigin, ChildStep, SubagentCall};
use crate::allowance::{AllowancePattern, AllowanceScope, EVERY_WRITING_TOOL};
use crate::event::{CancelReason, ModeChangeReason, RunState, SubagentOutcome};
use crate::plan::PlanScopePolicy;
use crate::run::{Decision, DecisionAction};
use crate::subagent::SUBAGENT;
use crate::tool::tasks::{TASK_CHECK, TASK_COMPLETE, TASK_UPDATE, TASK_WRITE, TaskStatus};
use crate::tool::{ASK_USER, SUBMIT_PLAN};

/// How many distinct ordinary valid plan files a harness provides ([`PlanFile::Valid`]
/// `0..PLAN_COUNT`), none declaring its files; [`super::SCOPED_PLAN`] comes after them.
pub const PLAN_COUNT: u8 = 4;

/// The time a [`ReferenceSession`] starts at, and the kit's clock with it
/// (2027-01-15T08:00:00Z), in milliseconds since the Unix epoch: deadlines are counted from it.
pub const CLOCK_START_MS: u64 = 1_800_000_000_000;

/// An hour in milliseconds ([`Until::AnHour`]).
const HOUR_MS: u64 = 3_600_000;

/// How far the clock moves in an [`Op::Wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Until {
    /// To one millisecond before the earliest deadline of what waits: still in time.
    JustBefore,
    /// To that deadline exactly: what waits on it has expired (whoever looks next applies it).
    Deadline,
    /// One hour on, whatever waits.
    AnHour,
}

/// The text of valid plan file `k`; the files differ, so their SHA-256 differ. The one
/// [`plan_declares_files`] says so of ([`super::SCOPED_PLAN`]) ends with a `## Files` section
/// naming [`super::PLAN_FILES`] (with prose after its code span, which binds nothing).
///
/// # Examples
/// ```
/// use agent_controller::testing::plan_text;
/// assert!(plan_text(0).starts_with("# Plan 0"));
/// assert_ne!(plan_text(0), plan_text(1));
/// ```
pub fn plan_text(k: u8) -> String {
    let files = files_section(k);
    format!("# Plan {k}\n\n1. Do step {k}.\n2. Test it.\n{files}")
}

/// Lower-case hex SHA-256 of valid plan file `k`, computed here rather than by the tool.
///
/// # Examples
/// ```
/// use agent_controller::testing::{plan_sha256, plan_text};
/// assert_eq!(plan_sha256(1), agent_controller::tool::submit_plan::sha256_hex(plan_text(1).as_bytes()));
/// ```
pub fn plan_sha256(k: u8) -> String {
    hex(&Sha256::digest(plan_text(k).as_bytes()))
}

/// The text of the user's edit of valid plan file `k`, approved instead of it
/// ([`Decision::with_plan`]); it differs from every plan file.
///
/// # Examples
/// ```
/// use agent_controller::testing::{edited_plan_text, plan_text};
/// assert_ne!(edited_plan_text(0), plan_text(0));
/// ```
pub fn edited_plan_text(k: u8) -> String {
    format!("# Plan {k}, edited\n\n1. Do step {k} with care.\n2. Test it twice.\n")
}

/// Lower-case hex SHA-256 of [`edited_plan_text`] `k`.
///
/// # Examples
/// ```
/// use agent_controller::testing::{edited_plan_sha256, edited_plan_text};
/// assert_eq!(edited_plan_sha256(0), agent_controller::tool::submit_plan::sha256_hex(edited_plan_text(0).as_bytes()));
/// ```
pub fn edited_plan_sha256(k: u8) -> String {
    hex(&Sha256::digest(edited_plan_text(k).as_bytes()))
}

/// A plan text as an approval result hands it to the next mode, between its markers: the
/// `# title` line, a blank line and the body, without the final line break.
fn handed(text: &str) -> String {
    text.trim_end().to_owned()
}

/// Lower-case hex SHA-256 of the arguments the kit's tool calls carry (`{}`), in RFC 8785
/// canonical JSON: the `argsSha256` of every tool call that waits for approval.
///
/// # Examples
/// ```
/// use agent_controller::testing::tool_args_sha256;
/// assert_eq!(tool_args_sha256(), agent_controller::jcs::sha256(&serde_json::json!({})));
/// ```
pub fn tool_args_sha256() -> String {
    hex(&Sha256::digest(b"{}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The path glob a narrowed "always allow" of the kit carries ([`Subject::ToolCall`]'s
/// `narrowed`, [`Decision::allow_only`] with [`AllowancePattern::path`]): it covers
/// [`CallPath::Src`] and neither of the other paths.
pub const NARROWING: &str = "src/**";

/// The `path` argument a tool call of the kit may carry ([`Call::ToolAt`]), for a tool that
/// takes one ([`ConfigFacts::takes_path`]): one inside `src/`, which [`NARROWING`] covers, and
/// two outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallPath {
    /// `src/a.txt`, inside `src/`.
    Src,
    /// `.env`, outside `src/`.
    Outside,
    /// `src/../.env`: written under `src/`, it leads outside (a pattern matches where a path
    /// leads, as the workspace jail resolves it, never the text as sent).
    WalksOut,
}

impl CallPath {
    /// Every path, in order.
    pub const ALL: [CallPath; 3] = [CallPath::Src, CallPath::Outside, CallPath::WalksOut];

    /// The argument's value.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::CallPath;
    /// assert_eq!(CallPath::WalksOut.as_str(), "src/../.env");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            CallPath::Src => "src/a.txt",
            CallPath::Outside => ".env",
            CallPath::WalksOut => "src/../.env",
        }
    }

    /// Whether [`NARROWING`] covers where the path leads: only [`CallPath::Src`] lies in `src/`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::CallPath;
    /// assert!(CallPath::Src.in_src());
    /// assert!(!CallPath::WalksOut.in_src(), "it leads to .env");
    /// ```
    pub fn in_src(self) -> bool {
        matches!(self, CallPath::Src)
    }

    /// Whether the path leads to [`super::PLAN_FILES`], the file the plans that declare their files
    /// declare: only [`CallPath::Src`] does (paths compare where they lead).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::CallPath;
    /// assert!(CallPath::Src.in_plan_files());
    /// assert!(!CallPath::WalksOut.in_plan_files(), "it leads to .env");
    /// ```
    pub fn in_plan_files(self) -> bool {
        matches!(self, CallPath::Src)
    }

    /// Lower-case hex SHA-256 of the call's arguments `{"path": ...}` in RFC 8785 canonical
    /// JSON: the `argsSha256` of such a call when it waits for approval.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::CallPath;
    /// let args = serde_json::json!({ "path": CallPath::Src.as_str() });
    /// assert_eq!(CallPath::Src.args_sha256(), agent_controller::jcs::sha256(&args));
    /// ```
    pub fn args_sha256(self) -> String {
        let args = format!("{{\"path\":\"{}\"}}", self.as_str());
        hex(&Sha256::digest(args.as_bytes()))
    }
}

/// A call of a task tool the kit makes ([`Call::Task`]), with arguments of its own: a valid
/// list, lists the rules refuse, a known and an unknown id. The tasks carry the ids an
/// approved plan's steps get (`step_1`, `step_2`), so the calls act on a seeded list too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskCall {
    /// `task_write` of `step_1` (in progress) and `step_2` (pending): the list it replaces
    /// goes.
    Write,
    /// `task_write` of two tasks in progress: refused; nothing changes.
    WriteTwoInProgress,
    /// `task_write` giving two tasks the id `step_1`: refused; nothing changes.
    WriteRepeatedIds,
    /// `task_update` of `step_2` to `in_progress`: the task in progress before it goes back to
    /// pending; refused (unknown id) when the list has no `step_2`.
    Start,
    /// `task_complete` of `step_1`; refused (unknown id) when the list has no `step_1`.
    Complete,
    /// `task_update` of an id no list has: refused.
    UpdateUnknown,
    /// `task_check`: reads the list, changes nothing.
    Check,
}

impl TaskCall {
    /// Every call, in order.
    pub const ALL: [TaskCall; 7] = [
        TaskCall::Write,
        TaskCall::WriteTwoInProgress,
        TaskCall::WriteRepeatedIds,
        TaskCall::Start,
        TaskCall::Complete,
        TaskCall::UpdateUnknown,
        TaskCall::Check,
    ];

    /// The task tool it calls.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::TaskCall;
    /// assert_eq!(TaskCall::Start.tool(), "task_update");
    /// ```
    pub fn tool(self) -> &'static str {
        match self {
            TaskCall::Write | TaskCall::WriteTwoInProgress | TaskCall::WriteRepeatedIds => {
                TASK_WRITE
            }
            TaskCall::Start | TaskCall::UpdateUnknown => TASK_UPDATE,
            TaskCall::Complete => TASK_COMPLETE,
            TaskCall::Check => TASK_CHECK,
        }
    }

    /// The call's arguments.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::TaskCall;
    /// assert_eq!(TaskCall::Write.args()["tasks"][0]["id"], "step_1");
    /// assert_eq!(TaskCall::Check.args(), serde_json::json!({}));
    /// ```
    pub fn args(self) -> Value {
        let task = |id: &str, content: &str, status: &str| json!({ "id": id, "content": content, "status": status });
        match self {
            TaskCall::Write => json!({ "tasks": [
                task("step_1", "Write the code.", "in_progress"),
                task("step_2", "Test it.", "pending"),
            ] }),
            TaskCall::WriteTwoInProgress => json!({ "tasks": [
                task("step_1", "Write the code.", "in_progress"),
                task("step_2", "Test it.", "in_progress"),
            ] }),
            TaskCall::WriteRepeatedIds => json!({ "tasks": [
                task("step_1", "Write the code.", "pending"),
                task("step_1", "Test it.", "pending"),
            ] }),
            TaskCall::Start => json!({ "id": "step_2", "status": "in_progress" }),
            TaskCall::Complete => json!({ "id": "step_1" }),
            TaskCall::UpdateUnknown => json!({ "id": "no_such_task", "status": "completed" }),
            TaskCall::Check => json!({}),
        }
    }
}

/// A task of the session's list, as the reference holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelTask {
    /// Its id.
    pub id: String,
    /// What to do.
    pub content: String,
    /// How far it is.
    pub status: TaskStatus,
}

impl ModelTask {
    fn new(id: &str, content: &str, status: TaskStatus) -> Self {
        Self {
            id: id.to_owned(),
            content: content.to_owned(),
            status,
        }
    }
}

/// Whether a kit call of task tool `tool` runs at once in `mode`: the mode offers it, and
/// neither `requireApproval` nor a rule holds its calls. The kit calls the task tools only
/// there ([`Call::Task`]).
pub(crate) fn runs_task_tool(facts: &ConfigFacts, mode: usize, tool: &str) -> bool {
    facts.offers(mode, tool) == Some(true)
        && !facts.requires_approval(mode, tool)
        && facts.rule_for(mode, tool).is_none()
}

/// The numbered steps of a kit plan text (`1. Do step 0.`), as an approval seeds the task list
/// with them: each id the plan's own number (`2. X` is `step_2`), all pending. The kit's plans
/// have no code blocks, no other numbered lines and no number twice, so this reads only
/// `N. text` lines.
fn numbered_steps(text: &str) -> Vec<ModelTask> {
    text.lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". ")?;
            if !number.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let number: u64 = number.parse().ok()?;
            let content = rest.trim();
            (!content.is_empty()).then(|| ModelTask {
                id: format!("step_{number}"),
                content: content.to_owned(),
                status: TaskStatus::Pending,
            })
        })
        .collect()
}

/// A plan file the model may submit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlanFile {
    /// A valid plan inside the plans directory ([`plan_text`]).
    Valid(u8),
    /// A path inside the plans directory where no file is.
    Missing,
    /// An empty `.md` file inside the plans directory.
    Empty,
    /// A valid plan whose name does not end in `.md`.
    NotMarkdown,
    /// A valid `.md` plan outside the plans directory.
    Outside,
}

impl PlanFile {
    /// Whether `submit_plan` accepts the file and suspends.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::PlanFile;
    /// assert!(PlanFile::Valid(0).is_valid());
    /// assert!(!PlanFile::Outside.is_valid());
    /// ```
    pub fn is_valid(self) -> bool {
        matches!(self, PlanFile::Valid(_))
    }
}

/// One tool call the model makes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Call {
    /// `submit_plan` on a plan file.
    SubmitPlan(PlanFile),
    /// A call to the tool with this name and `{}` as arguments, offered in the current mode or
    /// not (see [`ConfigFacts::tool_names`]): an offered registered tool runs, anything else is
    /// refused with an error result and never executed. A call of `ask_user` carries the kit's
    /// select question, one of [`crate::testing::CONFIRM_TOOL`] its arguments
    /// ([`Ask::of_tool`]): offered, each suspends and waits for the user's answer.
    Tool(String),
    /// A call of a tool that suspends, asking what [`Ask`] says: `ask_user` with the kit's
    /// question in one of its shapes, or the kit's own [`crate::testing::ConfirmTool`].
    /// Offered, it suspends and waits for the user's answer; else it is refused as
    /// [`Call::Tool`] is.
    Ask(Ask),
    /// A call to the tool with this name and `{"path": ...}` as arguments: made only where
    /// the tool takes a path ([`ConfigFacts::takes_path`]), so that a narrowed allowance covers
    /// some of its calls and not others.
    ToolAt(String, CallPath),
    /// A call of a task tool with the kit's arguments ([`TaskCall`]): made only where the mode
    /// offers the tool and nothing holds its calls (no `requireApproval` and no rule on it), so
    /// that it runs at once, by the session's task rules.
    Task(TaskCall),
    /// A call of `subagent` ([`SubagentCall`]): where the mode offers it and may start the
    /// type, a child runs (the kit's model answers it too) and its final text is the call's
    /// result, or its call that waits for the user suspends the parent's run as a pending
    /// decision naming the subagent; an unknown or forbidden type or an empty task is refused
    /// with an error result. The kit makes at most one such call per reply.
    Subagent(SubagentCall),
}

/// What the model does last in a turn, once its tool calls (if any) are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Then {
    /// It replies with text: the run completes.
    Text,
    /// The model call fails: the run fails.
    ModelFails,
}

/// Which `sha256` a decision carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShaChoice {
    /// None.
    Omitted,
    /// The captured plan's hash.
    Matching,
    /// The captured plan's hash in upper case (hex is case-insensitive).
    MatchingUppercase,
    /// The hash of another plan: the decision must be refused.
    Stale,
}

/// The feedback a rejection carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Feedback {
    /// None.
    Omitted,
    /// Only white space: counts as none.
    Blank,
    /// Feedback text: the model revises.
    Text(String),
}

/// The user's edit of the plan, approved instead of the submitted one ([`Decision::with_plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EditedPlan {
    /// [`edited_plan_text`] `k`: the next mode receives it, and the record keeps its SHA-256
    /// beside the submitted plan's.
    Text(u8),
    /// Only white space: refused ([`Refusal::EditedPlan`]); nothing changes.
    Blank,
}

impl EditedPlan {
    /// The edited text the decision carries.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::{EditedPlan, edited_plan_text};
    /// assert_eq!(EditedPlan::Text(1).text(), edited_plan_text(1));
    /// assert!(EditedPlan::Blank.text().trim().is_empty());
    /// ```
    pub fn text(self) -> String {
        match self {
            EditedPlan::Text(k) => edited_plan_text(k),
            EditedPlan::Blank => " \n\n".to_owned(),
        }
    }
}

/// What the model does after a rejection with feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Revision {
    /// It answers with text: the run completes.
    Text,
    /// It submits valid plan `k` again: the run suspends again.
    Resubmit(u8),
}

/// An operation on a session: what the host does, and what the model answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// The user sends a message (cancelling a pending plan first); the model makes `calls` in
    /// one step (parallel calls), then does `then`. No calls: the model just replies.
    Message {
        /// The model's tool calls in its first reply.
        calls: Vec<Call>,
        /// What the model does last.
        then: Then,
    },
    /// The host decides what waits: the pending plan, or a tool call waiting for approval.
    Decide {
        /// What the decision is on, with the parts only that kind takes.
        on: Subject,
        /// Approve or reject.
        action: DecisionAction,
        /// Feedback (a rejection hands it to the model).
        feedback: Feedback,
        /// The `sha256` the decision carries (matched against the plan's, or against the
        /// call's `argsSha256`).
        sha256: ShaChoice,
    },
    /// A person answers the approval prompt (the grammar of `terminal::read_answer`); `None` is
    /// end of input, which decides nothing.
    Answer(Option<String>),
    /// The host aborts.
    Abort,
    /// The host decides, again, the tool call decided (or cancelled) last.
    DecideAgain,
    /// The host decides a tool call id that was never made.
    DecideUnknownCall,
    /// The host decides a run id that was never started.
    DecideUnknownRun,
    /// The host resumes with data that is not a decision.
    Malformed(Value),
    /// The host switches by hand to the mode with this id (the current mode: a no-op; an id no
    /// mode has: refused).
    Switch(String),
    /// The host process restarts: the session is restored from the controller's store
    /// ([`crate::AgentController::restore_session`]). Nothing may change: a session is saved
    /// when it starts, so even one with no state change since is restored (but what waits past
    /// its deadline expires as it is restored). Generated only for a reference built
    /// [`ReferenceSession::with_restarts`].
    Restart,
    /// The host starts another session on the same controller, in the default mode, and
    /// drives it from now on: nothing of the session before carries over but the workspace
    /// allowances the store keeps (the same workspace, the same config). Generated only for a
    /// reference built [`ReferenceSession::with_restarts`] (a controller with a store).
    NewSession,
    /// Time passes (the kit's clock moves, nothing is called). What waits past its deadline
    /// (`approvalTimeout`) has expired; the next host call that looks applies the expiry first.
    /// Generated for configs with an `approvalTimeout`.
    Wait(Until),
    /// The host applies what expired ([`crate::Session::expire_if_due`]).
    ExpireIfDue,
    /// The host revokes an allowance ([`crate::Session::revoke_allowance`]): it no longer
    /// applies, and a workspace one is gone from the store, so a restart or a new session no
    /// longer has it. An id nobody gave changes nothing. Generated where allowances are in force.
    Revoke(RevokeChoice),
}

/// Which allowance an [`Op::Revoke`] revokes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RevokeChoice {
    /// The first the session lists ([`crate::Session::allowances`]: its own, oldest first, then
    /// the workspace ones).
    First,
    /// The last it lists.
    Last,
    /// An id no allowance has: the call returns `false` and nothing changes.
    Unknown,
}

/// What an [`Op::Decide`] decides, with the parts of the decision only that kind takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// The pending plan.
    Plan {
        /// Send it as JSON resume data instead of a [`Decision`].
        json: bool,
        /// What the model does after a rejection with feedback.
        revision: Revision,
        /// The mode the approval names ([`Decision::to`]): `None` for a plain approval. A mode
        /// the plan does not list, or any target on a rejection, is refused.
        to: Option<String>,
        /// The user's edit approved instead of the submitted plan ([`Decision::with_plan`]):
        /// `None` for none. A blank edit, or any edit with a rejection, is refused.
        plan: Option<EditedPlan>,
    },
    /// The tool call waiting for approval at position `call` among the reply's waiting calls
    /// (in the model's order, those decided already included: deciding one again is refused).
    ToolCall {
        /// The waiting call's position.
        call: usize,
        /// "Always allow this tool" ([`Decision::always_allow`]): refused with a rejection.
        always_allow: bool,
        /// The allowance's scope ([`Decision::scope`]); `None` for the default, `mode`.
        /// Generated only with `always_allow`.
        scope: Option<AllowanceScope>,
        /// Narrow the allowance to the paths [`NARROWING`] covers ([`Decision::allow_only`]):
        /// it then approves no other waiting call, and covers a later call only when its
        /// `path` leads into `src/`. Generated only with `always_allow`, of scope `mode` or
        /// `session`, on a tool that takes a path ([`ConfigFacts::takes_path`]).
        narrowed: bool,
        /// Decide by the call's decision id ([`crate::Session::decide`]) instead of its run and
        /// tool-call ids ([`crate::Session::resume`]).
        by_id: bool,
    },
    /// The question waiting at position `call` among the reply's waiting calls (a call its
    /// tool suspended: `ask_user`): answered ([`Decision::answer`], with
    /// [`DecisionAction::Answered`]) or declined (a rejection). An answer that does not fit is
    /// refused; so is an answer to a call waiting for approval, and an approval of a question.
    Question {
        /// The waiting call's position.
        call: usize,
        /// The answer the decision carries (`None`: none, as a rejection has).
        answer: Option<AnswerChoice>,
        /// Decide by the call's decision id instead of its run and tool-call ids.
        by_id: bool,
    },
}

impl Subject {
    /// The pending plan, decided as the host's resume data says, the model answering with text
    /// after a rejection with feedback.
    fn plan() -> Self {
        Subject::Plan {
            json: false,
            revision: Revision::Text,
            to: None,
            plan: None,
        }
    }
}

impl Op {
    /// A user message the model answers with text.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::message());
    /// assert_eq!(session.mode(), plan, "a message changes no mode");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn message() -> Self {
        Op::Message {
            calls: Vec::new(),
            then: Then::Text,
        }
    }

    /// A user message after which the model call fails.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// use agent_controller::event::RunState;
    /// session.apply(&Op::model_fails());
    /// assert_eq!(session.run().map(|(_, state)| state), Some(RunState::Failed));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn model_fails() -> Self {
        Op::Message {
            calls: Vec::new(),
            then: Then::ModelFails,
        }
    }

    /// A user message on which the model submits valid plan file `k` (`0..PLAN_COUNT`).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::submit(0));
    /// assert!(session.pending().is_some());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn submit(k: u8) -> Self {
        Self::submit_file(PlanFile::Valid(k))
    }

    /// A user message on which the model submits `plan` (valid or not).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// use agent_controller::testing::PlanFile;
    /// session.apply(&Op::submit_file(PlanFile::Outside));
    /// assert!(session.pending().is_none(), "refused: nothing waits");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn submit_file(plan: PlanFile) -> Self {
        Op::Message {
            calls: vec![Call::SubmitPlan(plan)],
            then: Then::Text,
        }
    }

    /// A user message on which the model calls tool `name` with `{}` and then answers.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"]),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// session.apply(&Op::call("write_file"));
    /// assert_eq!(session.waiting().len(), 1, "write_file waits for approval in build");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn call(name: impl Into<String>) -> Self {
        Op::Message {
            calls: vec![Call::Tool(name.into())],
            then: Then::Text,
        }
    }

    /// Approve the pending plan (no `sha256`, as [`crate::Decision::approve`]).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// assert!(!session.can_apply(&Op::approve()), "nothing pending yet");
    /// session.apply(&Op::submit(0));
    /// session.apply(&Op::approve());
    /// assert_eq!(session.mode(), build);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn approve() -> Self {
        Self::decide(Subject::plan(), DecisionAction::Approved, Feedback::Omitted)
    }

    /// Reject the pending plan without feedback: the run ends.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::submit(0));
    /// session.apply(&Op::reject());
    /// assert!(session.pending().is_none());
    /// assert_eq!(session.mode(), plan, "the mode stays");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn reject() -> Self {
        Self::decide(Subject::plan(), DecisionAction::Rejected, Feedback::Omitted)
    }

    /// Reject the pending plan with `feedback`: the model answers in the same mode.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::submit(0));
    /// session.apply(&Op::reject_with("smaller steps"));
    /// assert_eq!(session.mode(), plan);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn reject_with(feedback: impl Into<String>) -> Self {
        let feedback = Feedback::Text(feedback.into());
        Self::decide(Subject::plan(), DecisionAction::Rejected, feedback)
    }

    /// Approve the pending plan to the mode with `id` ([`Decision::to`]).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::submit(0));
    /// session.apply(&Op::approve_to("build"));
    /// assert_eq!(session.mode(), build);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn approve_to(id: impl Into<String>) -> Self {
        let on = Subject::Plan {
            json: false,
            revision: Revision::Text,
            to: Some(id.into()),
            plan: None,
        };
        Self::decide(on, DecisionAction::Approved, Feedback::Omitted)
    }

    /// Approve the user's edit [`edited_plan_text`] `k` instead of the pending plan, pinned to
    /// the pending plan's SHA-256 (the plan shown), as the terminal prompt's `e` does.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::submit(0));
    /// session.apply(&Op::approve_edited(0));
    /// assert_eq!(session.mode(), build);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn approve_edited(k: u8) -> Self {
        let on = Subject::Plan {
            json: false,
            revision: Revision::Text,
            to: None,
            plan: Some(EditedPlan::Text(k)),
        };
        Op::Decide {
            on,
            action: DecisionAction::Approved,
            feedback: Feedback::Omitted,
            sha256: ShaChoice::Matching,
        }
    }

    /// A decision on `on`, with no `sha256`.
    fn decide(on: Subject, action: DecisionAction, feedback: Feedback) -> Self {
        Op::Decide {
            on,
            action,
            feedback,
            sha256: ShaChoice::Omitted,
        }
    }

    /// A user message on which the model calls each tool of `names` with `{}` in one reply
    /// (parallel calls), then answers.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"]),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// session.apply(&Op::calls(["write_file", "write_file"]));
    /// assert_eq!(session.waiting().len(), 2);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn calls(names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Op::Message {
            calls: names.into_iter().map(|n| Call::Tool(n.into())).collect(),
            then: Then::Text,
        }
    }

    /// Approve the waiting tool call at position `call` (by its run and tool-call ids).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"]),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// session.apply(&Op::call("write_file"));
    /// session.apply(&Op::approve_tool(0));
    /// assert!(session.waiting().is_empty());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn approve_tool(call: usize) -> Self {
        Self::decide(
            Self::tool(call, false),
            DecisionAction::Approved,
            Feedback::Omitted,
        )
    }

    /// Approve the waiting tool call at position `call` and always allow its tool for the
    /// session, until the mode changes (by hand or by an approved plan); the other calls of
    /// that tool waiting in the same reply are approved with it.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"]),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// session.apply(&Op::call("write_file"));
    /// session.apply(&Op::always_allow_tool(0));
    /// assert_eq!(session.always_allowed(), ["write_file"]);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn always_allow_tool(call: usize) -> Self {
        Self::decide(
            Self::tool(call, true),
            DecisionAction::Approved,
            Feedback::Omitted,
        )
    }

    /// Reject the waiting tool call at position `call`; with `feedback`, the model gets it.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"]),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// session.apply(&Op::call("write_file"));
    /// session.apply(&Op::reject_tool(0, Some("not now")));
    /// assert!(session.waiting().is_empty());
    /// assert!(session.always_allowed().is_empty());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn reject_tool(call: usize, feedback: Option<&str>) -> Self {
        let feedback = feedback.map_or(Feedback::Omitted, |f| Feedback::Text(f.to_owned()));
        Self::decide(Self::tool(call, false), DecisionAction::Rejected, feedback)
    }

    /// Approve the waiting tool call at position `call` and always allow its tool with
    /// allowance scope `scope`: `mode` until the mode changes, `session` for the rest of the
    /// session in this mode only, `workspace` for every later session in this workspace, under
    /// this config, in this mode ([`crate::allowance`]).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::allowance::AllowanceScope;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"]),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// session.apply(&Op::call("write_file"));
    /// session.apply(&Op::always_allow_tool_for(0, AllowanceScope::Session));
    /// session.apply(&Op::switch("plan"));
    /// assert!(session.always_allowed().is_empty(), "not in another mode");
    /// assert_eq!(session.allowances().len(), 1, "but kept");
    /// session.apply(&Op::switch("build"));
    /// assert_eq!(session.always_allowed(), ["write_file"]);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn always_allow_tool_for(call: usize, scope: AllowanceScope) -> Self {
        Self::decide(
            Subject::ToolCall {
                call,
                always_allow: true,
                scope: Some(scope),
                narrowed: false,
                by_id: false,
            },
            DecisionAction::Approved,
            Feedback::Omitted,
        )
    }

    /// The waiting tool call at position `call`, addressed by its run and tool-call ids.
    fn tool(call: usize, always_allow: bool) -> Subject {
        Subject::ToolCall {
            call,
            always_allow,
            scope: None,
            narrowed: false,
            by_id: false,
        }
    }

    /// Approve the waiting tool call at position `call` and always allow, for the mode, the
    /// calls of its tool whose `path` leads into `src/` ([`NARROWING`]); the other calls of
    /// the tool waiting in the reply still wait.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{CallPath, Call, ConfigFacts, Op, ReferenceSession, Then};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"])
    ///         .with_path_tools(["write_file"]),
    /// );
    /// let at = |path| Op::Message { calls: vec![Call::ToolAt("write_file".into(), path)], then: Then::Text };
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// session.apply(&Op::call("write_file"));
    /// session.apply(&Op::always_allow_narrowed(0));
    /// assert!(session.always_allowed().is_empty(), "narrowed: not the whole tool");
    /// session.apply(&at(CallPath::Src));
    /// assert!(session.waiting().is_empty(), "src/a.txt runs unasked");
    /// session.apply(&at(CallPath::WalksOut));
    /// assert_eq!(session.waiting().len(), 1, "src/../.env leads outside src/: it waits");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn always_allow_narrowed(call: usize) -> Self {
        Self::decide(
            Subject::ToolCall {
                call,
                always_allow: true,
                scope: None,
                narrowed: true,
                by_id: false,
            },
            DecisionAction::Approved,
            Feedback::Omitted,
        )
    }

    /// A user message the model answers with a call of `ask_user` (the kit's select question,
    /// [`Ask::Select`]): where the mode offers it, the run waits for the answer.
    pub fn ask() -> Self {
        Op::calls([ASK_USER])
    }

    /// A user message the model answers with a call that asks `ask` ([`Call::Ask`]): where the
    /// mode offers its tool, the run waits for the answer.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{AnswerChoice, Ask, ConfigFacts, Op, ReferenceSession, ShaChoice};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"build\"\navailableTools = [\"ask_user\"]\n")?.with_tools(Vec::<String>::new()));
    /// let mut session = ReferenceSession::new(facts, None);
    /// session.apply(&Op::ask_with(Ask::FreeText));
    /// assert_eq!(session.waiting()[0].asks, Some(Ask::FreeText));
    /// session.apply(&Op::answer_question_with(0, AnswerChoice::NotAnOption, ShaChoice::Matching));
    /// assert!(session.waiting().is_empty(), "any text answers a free-text question");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn ask_with(ask: Ask) -> Self {
        Op::Message {
            calls: vec![Call::Ask(ask)],
            then: Then::Text,
        }
    }

    /// The answer [`AnswerChoice::Fits`] to the question waiting at position `call`, pinned to
    /// its `payloadSha256`.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"build\"\navailableTools = [\"ask_user\"]\n")?.with_tools(Vec::<String>::new()));
    /// let mut session = ReferenceSession::new(facts, None);
    /// session.apply(&Op::ask());
    /// assert_eq!(session.waiting().len(), 1);
    /// session.apply(&Op::answer_question(0));
    /// assert!(session.waiting().is_empty(), "answered: the run carried on");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn answer_question(call: usize) -> Self {
        Op::answer_question_with(call, AnswerChoice::Fits, ShaChoice::Matching)
    }

    /// The answer `answer` to the question waiting at position `call`, with the pin `sha256`.
    pub fn answer_question_with(call: usize, answer: AnswerChoice, sha256: ShaChoice) -> Self {
        Op::Decide {
            on: Subject::Question {
                call,
                answer: Some(answer),
                by_id: true,
            },
            action: DecisionAction::Answered,
            feedback: Feedback::Omitted,
            sha256,
        }
    }

    /// The user declines to answer the question waiting at position `call` (a rejection,
    /// with `feedback` if given): the model is told the user did not answer.
    pub fn decline_question(call: usize, feedback: Option<&str>) -> Self {
        Op::Decide {
            on: Subject::Question {
                call,
                answer: None,
                by_id: false,
            },
            action: DecisionAction::Rejected,
            feedback: feedback.map_or(Feedback::Omitted, |f| Feedback::Text(f.to_owned())),
            sha256: ShaChoice::Matching,
        }
    }

    /// Switch by hand to the mode with `id`.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::switch("build"));
    /// assert_eq!(session.mode(), build);
    /// session.apply(&Op::switch("no-such-mode"));
    /// assert_eq!(session.mode(), build, "refused: nothing changes");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn switch(id: impl Into<String>) -> Self {
        Op::Switch(id.into())
    }
}

/// A run, as the reference names it: its ordinal (the first run is 1) or an id never issued.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RunRef {
    /// The n-th run started in the session (1-based).
    Run(usize),
    /// An id no run has.
    Unknown(String),
}

/// The concrete host call an [`Op`] becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// [`crate::Session::send_message`].
    Send(String),
    /// [`crate::Session::resume`].
    Resume {
        /// The run addressed.
        run: RunRef,
        /// The tool call addressed.
        tool_call_id: String,
        /// The decision.
        decision: Decision,
    },
    /// [`crate::Session::decide`].
    Decide {
        /// The decision id addressed.
        decision_id: String,
        /// The decision.
        decision: Decision,
    },
    /// [`crate::Session::resume_json`].
    ResumeJson {
        /// The run addressed.
        run: RunRef,
        /// The tool call addressed.
        tool_call_id: String,
        /// The resume data.
        data: Value,
    },
    /// [`crate::Session::abort`].
    Abort,
    /// [`crate::Session::switch_mode`].
    Switch(String),
    /// [`crate::AgentController::restore_session`] by the session's id.
    Restore,
    /// [`crate::AgentController::start_session`] in the default mode: the harness drives the
    /// new session from now on.
    NewSession,
    /// [`crate::Session::expire_if_due`].
    ExpireIfDue,
    /// [`crate::Session::revoke_allowance`] of the allowance with this id, as the reference
    /// names it ([`ModelAllowance::id`]: the harness revokes a workspace one by its real id).
    Revoke(String),
    /// Nothing (a blank answer: the prompt asks again; time passing).
    Nothing,
}

/// One tool call in a scripted model reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedCall {
    /// The tool call id.
    pub id: String,
    /// The tool name.
    pub tool: String,
    /// The plan file, for `submit_plan` calls (the harness turns it into a `path`).
    pub plan: Option<PlanFile>,
    /// The `path` argument of a call of another tool ([`Call::ToolAt`]); `None`: `{}`.
    pub path: Option<CallPath>,
    /// The arguments of a task tool's call ([`Call::Task`]).
    pub task: Option<TaskCall>,
    /// What it asks, for a call of a tool that suspends ([`Call::Ask`], or a [`Call::Tool`] of
    /// one: [`Ask::of_tool`]); its arguments are then [`Ask::args`].
    pub ask: Option<Ask>,
    /// What a `subagent` call starts ([`Call::Subagent`]); its arguments are then
    /// [`SubagentCall::args`].
    pub subagent: Option<SubagentCall>,
}

impl ScriptedCall {
    /// The `argsSha256` of a call of a tool other than `submit_plan` (that of its `path`, else
    /// of `{}`).
    fn args_sha256(&self) -> String {
        if let Some(subagent) = &self.subagent {
            return crate::jcs::sha256(&subagent.args());
        }
        match self.path {
            Some(path) => path.args_sha256(),
            None if self.task.is_some() => {
                crate::jcs::sha256(&self.task.map(TaskCall::args).unwrap_or_default())
            }
            None => self.ask.map_or_else(tool_args_sha256, Ask::args_sha256),
        }
    }
}

/// One scripted model reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Tool calls (several are parallel calls of one step).
    Calls(Vec<ScriptedCall>),
    /// Text: the model is done.
    Text(String),
    /// The model call fails.
    Fail,
}

/// How a host call returned, reduced to what the rules decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// A run was driven and stopped in this state (completed, suspended or failed).
    Run(RunState),
    /// `switch_mode` returned whether the mode changed.
    Switched(bool),
    /// `abort` returned whether a plan was pending.
    Aborted(bool),
    /// No call was made.
    NoDecision,
    /// The session was restored from the store.
    Restored,
    /// A new session was started.
    Started,
    /// `expire_if_due` returned this many records of expired decisions.
    Expired(usize),
    /// `revoke_allowance` returned whether the session kept the allowance.
    Revoked(bool),
    /// The call was refused with this error; nothing changed.
    Refused(Refusal),
}

/// The kind of a refused session call ([`crate::SessionError`] without its data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// [`crate::SessionError::UnknownMode`].
    UnknownMode,
    /// [`crate::SessionError::UnknownRun`].
    UnknownRun,
    /// [`crate::SessionError::NotSuspended`].
    NotSuspended,
    /// [`crate::SessionError::UnknownToolCall`].
    UnknownToolCall,
    /// [`crate::SessionError::AlreadyDecided`].
    AlreadyDecided,
    /// [`crate::SessionError::Sha256Mismatch`].
    Sha256Mismatch,
    /// [`crate::SessionError::MalformedDecision`].
    MalformedDecision,
    /// [`crate::SessionError::ConfigChanged`].
    ConfigChanged,
    /// [`crate::SessionError::TargetNotAllowed`].
    TargetNotAllowed,
    /// [`crate::SessionError::EditedPlan`].
    EditedPlan,
    /// [`crate::SessionError::UnknownSession`].
    UnknownSession,
    /// A store error ([`crate::SessionError::Store`], [`crate::SessionError::NoStore`]).
    Store,
    /// [`crate::SessionError::Expired`]: what the decision names expired.
    Expired,
    /// [`crate::SessionError::InvalidAnswer`]: the answer does not fit the question.
    InvalidAnswer,
    /// [`crate::SessionError::Quorum`]: an always-allow or an edited plan under a quorum
    /// ([`super::QuorumStep`]).
    Quorum,
    /// A variant this version of the reference does not know.
    Other,
}

/// What a `submit_plan` or other tool result told the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultKind {
    /// The approval text.
    Approved,
    /// A rejection with the user's feedback.
    RejectedWithFeedback,
    /// A rejection without feedback: stop and wait.
    Rejected,
    /// A tool call the user rejected, without feedback: it was not executed.
    ToolRejected,
    /// A tool call the user rejected with feedback, which the result carries.
    ToolRejectedWithFeedback,
    /// A tool call a mode's `deny` rule refused (`Not executed: rule N of mode …`): it never
    /// ran.
    Denied,
    /// Not approved in time: the plan, or the tool call, expired
    /// ([`crate::deadline::expired_result`], [`crate::deadline::expired_tool_result`]).
    Expired,
    /// A tool call approved while others of its reply waited, which expired: it never ran
    /// ([`crate::deadline::APPROVED_NOT_RUN_RESULT`]).
    ApprovedNotRun,
    /// A question the user declined to answer, without feedback: there is no answer.
    Declined,
    /// A question the user declined to answer with feedback, which the result carries.
    DeclinedWithFeedback,
    /// A question answered while other calls of its reply waited, which expired: the answer
    /// never reached the tool ([`crate::deadline::ANSWERED_NOT_RESUMED_RESULT`]).
    AnsweredNotResumed,
    /// A `subagent` call's result: its child's final text ([`CHILD_ANSWER`]).
    SubagentAnswer,
    /// A tool call the kit's hook denied (`Not executed: hook `kit-hook` denied it: …`): it
    /// never ran.
    HookDenied,
    /// A write refused, unasked, because it lies outside the files of the approved plan and
    /// the planning mode's `planScope` is `enforce`: it never ran.
    OutsidePlan,
    /// Anything else (tool errors, refusals).
    Other,
}

/// What the model was offered in one call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Offered {
    /// Whether `submit_plan` was among the tools.
    pub submit_plan: bool,
    /// For a mode with `availableTools`: the names offered, sorted (repeats kept); `None` for a
    /// mode without a list (its tools depend on the registry).
    pub listed: Option<Vec<String>>,
}

/// One thing the session did, in order: the significant events plus every model call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Trace {
    /// `agent_start`: run n (1-based) started in `mode`.
    RunStarted {
        /// The run ordinal.
        run: usize,
        /// The mode id.
        mode: String,
    },
    /// The model was called in `mode`.
    ModelCalled {
        /// The mode id of the request.
        mode: String,
        /// The tools offered.
        offered: Offered,
        /// Whether, among the messages added since the model's previous call in this session,
        /// the last mode-change notice names `mode`; expected exactly when the mode changed
        /// since that call (by approval or by hand).
        told_mode_change: bool,
        /// The approved plan handed over, when among those messages there is an approval
        /// result: its text between the result's markers (the submitted plan, or the user's
        /// edit of it).
        handed_plan: Option<String>,
    },
    /// A registered tool ran (its `execute` was called, seen by the kit's spy) in `mode`, and
    /// its `tool_end` followed; what it returned is the tool's business and not compared.
    ToolRan {
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool: String,
        /// The mode it ran in.
        mode: String,
        /// For a later call an allowance ran without waiting: that allowance's id, the decision
        /// id that gave it (`allowedBy`). (An "always allow" approves no other call waiting in
        /// its reply: each is asked about.)
        allowed_by: Option<String>,
        /// The number of the mode's rule that decided the call (an `allow` rule that ran it
        /// without asking, or the `ask` rule whose call the user approved): the `rule` of its
        /// `tool_end`'s audit record.
        rule: Option<usize>,
        /// Whether the kit's hook let it run, a call that would have waited: its record's
        /// `decidedBy` names the hook.
        hooked: bool,
    },
    /// `tool_end` of a call that did not run a registered tool (`submit_plan`, or a refusal).
    ToolEnded {
        /// The tool call id.
        tool_call_id: String,
        /// Whether the result is an error.
        is_error: bool,
        /// What the result says.
        result: ResultKind,
        /// The audit record of the decision that ended the call (`decision` of the event);
        /// `None` for a call no decision ended.
        decided: Option<Decided>,
    },
    /// `tool_suspended` on `submit_plan`.
    Suspended {
        /// The tool call id.
        tool_call_id: String,
        /// The hand-over target's id in the payload.
        target: String,
        /// The targets the payload lists (the plain approval's first).
        targets: Vec<String>,
        /// The captured plan's SHA-256.
        sha256: String,
    },
    /// `tool_suspended` on a tool call that waits for approval (the mode's `requireApproval`,
    /// an `ask` rule, or a write outside the approved plan's files: drift).
    ToolCallSuspended {
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool: String,
        /// The decision id in the payload.
        decision_id: String,
        /// The `argsSha256` in the payload.
        args_sha256: String,
        /// The number of the `ask` rule that made it wait (the payload's `rule`); `None` when
        /// `requireApproval` did.
        rule: Option<usize>,
        /// Whether it waits as drift, a write outside the approved plan's files (the payload
        /// says why: `drift`).
        drift: bool,
    },
    /// A registered tool's `execute` ran in `mode` and ended its call by suspending
    /// ([`crate::ToolOutput::suspend`]: `ask_user` asking its question): no `tool_end` follows
    /// until it is answered.
    CallSuspended {
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool: String,
        /// The mode it ran in.
        mode: String,
    },
    /// `tool_suspended` on a call its tool suspended: it waits for the user's answer.
    AnswerAwaited {
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool: String,
        /// The decision id in the payload.
        decision_id: String,
        /// The `payloadSha256` in the payload.
        payload_sha256: String,
        /// Whether its kind is `question` (a question of `ask_user`).
        question: bool,
    },
    /// A registered tool's `resume` step ran in `mode` with the user's answer (seen by the
    /// kit's spy), and its `tool_end` followed.
    ToolResumed {
        /// The tool call id.
        tool_call_id: String,
        /// The tool name.
        tool: String,
        /// The mode it ran in.
        mode: String,
    },
    /// A child (a subagent's run) called the model in `mode`, its parent's, offered `tools`
    /// (sorted): what its type lists and the parent's mode offers.
    ChildModelCalled {
        /// The mode id of the request.
        mode: String,
        /// The tools offered, sorted.
        tools: Vec<String>,
    },
    /// A registered tool's `execute` (or, `resumed`, its `resume` step with the user's answer)
    /// ran in a child, in `mode` (seen by the kit's spy).
    ChildToolRan {
        /// The tool name.
        tool: String,
        /// The mode it ran in.
        mode: String,
        /// Whether its `resume` step ran rather than its `execute`.
        resumed: bool,
    },
    /// `tool_suspended` on a child's call that waits for the user (for approval, or for an
    /// answer, `question`): a decision of the parent's session naming the subagent.
    ChildWaits {
        /// The child's tool call id.
        tool_call_id: String,
        /// The tool name.
        tool: String,
        /// The decision id in the parent's session.
        decision_id: String,
        /// The `argsSha256` (a question's `payloadSha256`).
        sha256: String,
        /// The number of the child's `ask` rule that made it wait.
        rule: Option<usize>,
        /// Whether it waits for an answer rather than an approval.
        question: bool,
        /// The subagent it comes from.
        origin: ChildOrigin,
    },
    /// `subagent_ended` of the parent's `subagent` call `tool_call_id`.
    SubagentEnded {
        /// The parent's call id.
        tool_call_id: String,
        /// The child's type.
        agent_type: String,
        /// How the child ended.
        outcome: SubagentOutcome,
    },
    /// `tool_suspension_cancelled`.
    Cancelled {
        /// The tool call id.
        tool_call_id: String,
        /// Why.
        reason: CancelReason,
    },
    /// `mode_changed`.
    ModeChanged {
        /// The new mode id.
        mode: String,
        /// The `previousModeId`.
        previous: String,
        /// The reason.
        reason: ModeChangeReason,
    },
    /// `agent_end`.
    RunEnded {
        /// The run ordinal.
        run: usize,
        /// How it ended.
        reason: RunState,
    },
}

/// The hashes of a decision's audit record ([`crate::event::DecidedRecord`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Decided {
    /// `sha256`: the submitted plan, the one shown.
    pub sha256: String,
    /// `approvedSha256`: the user's edit approved instead of it; `None` when nothing was
    /// edited.
    pub approved_sha256: Option<String>,
    /// The number of the mode's rule named in the record (`rule`): the `deny` rule that
    /// refused the call, or the `ask` rule that made it wait; `None` when no rule decided.
    pub rule: Option<usize>,
}

/// What one operation must do.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// The host call's outcome.
    pub outcome: Outcome,
    /// Everything it emits and every model call, in order.
    pub trace: Vec<Trace>,
}

/// One operation made concrete: the host call, the model's script, and what must happen.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The operation.
    pub op: Op,
    /// The host call.
    pub action: Action,
    /// The model's replies, in order (replies the session does not ask for are dropped).
    pub replies: Vec<Reply>,
    /// What must happen.
    pub expected: Expected,
    /// An approval under a quorum ([`super::QuorumStep`]): the approvals the harness gives
    /// before the step's own host call, which carries the last; `None` without one.
    pub quorum: Option<QuorumStep>,
}

/// The plan waiting for a decision, as the reference holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PendingPlan {
    /// The suspended run's ordinal.
    pub run: usize,
    /// The `submit_plan` call id.
    pub tool_call_id: String,
    /// The plain approval's hand-over target, fixed at submit time (a mode index).
    pub target: usize,
    /// Every target the plan may be approved to, fixed at submit time (`target` first).
    pub targets: Vec<usize>,
    /// The captured plan's SHA-256.
    pub sha256: String,
    /// The valid plan file submitted ([`plan_text`] `plan`).
    pub plan: u8,
    /// Its decision id (`decision_N`): the id of the allowance of scope `plan` its approval
    /// gives, when it declares its files.
    pub decision_id: String,
    /// When it expires (milliseconds since the Unix epoch on the kit's clock): submitted at
    /// plus its mode's `approvalTimeout`; `None` without one.
    pub deadline: Option<u64>,
}

/// A tool call waiting for the user's approval, as the reference holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WaitingCall {
    /// The suspended run's ordinal.
    pub run: usize,
    /// The tool call id.
    pub tool_call_id: String,
    /// The tool name.
    pub tool: String,
    /// Its decision id (`decision_N`, counted with the plans').
    pub decision_id: String,
    /// `argsSha256` ([`tool_args_sha256`], or [`CallPath::args_sha256`] for a call with a path).
    pub args_sha256: String,
    /// The decision taken while other calls of the reply still wait: approved or not, and
    /// whether it carried feedback.
    pub decided: Option<(DecisionAction, bool)>,
    /// The id of the allowance that approved this call while it waited
    /// ([`crate::event::DecidedRecord::allowed_by`]); always `None` now that an "always allow"
    /// approves only the call it is given at (trust round 4, M2: the other calls of the reply
    /// are asked about), kept so that a waiting call's shape stays as hosts and traces read it.
    pub allowed_by: Option<String>,
    /// The `ask` rule that made it wait (its number); `None` when `requireApproval` did.
    pub rule: Option<usize>,
    /// Whether it waits as drift: a write outside the approved plan's files, under
    /// `planScope = "ask"` (no rule then: the plan's files made it wait).
    pub drift: bool,
    /// When it expires (milliseconds since the Unix epoch on the kit's clock): made at plus
    /// its mode's `approvalTimeout`; `None` without one.
    pub deadline: Option<u64>,
    /// What it asks, when its tool suspended it (a question of `ask_user`, or the kit's own
    /// suspending tool) and it waits for the user's answer rather than for approval: then
    /// `args_sha256` holds its `payloadSha256` ([`Ask::payload_sha256`]), the pin its answer
    /// carries, and `decided` is [`DecisionAction::Answered`] or a rejection (declined).
    pub asks: Option<Ask>,
    /// The subagent the call comes from: a child's call, waiting as a decision of the
    /// parent's session ([`crate::session::PendingDecision::subagent`]); `None` for the
    /// parent's own.
    pub child: Option<ChildOrigin>,
    /// For a parent's `subagent` call waiting for approval: what it starts once approved.
    /// Not compared (the session's pending decision shows its arguments' hash only).
    pub starts: Option<SubagentCall>,
}

impl WaitingCall {
    /// The host's action that takes `decision` on this call: by its decision id (`by_id`), or
    /// by its run and tool call id.
    fn host_action(&self, by_id: bool, decision: Decision) -> Action {
        if by_id {
            Action::Decide {
                decision_id: self.decision_id.clone(),
                decision,
            }
        } else {
            Action::Resume {
                run: RunRef::Run(self.run),
                tool_call_id: self.tool_call_id.clone(),
                decision,
            }
        }
    }
}

/// A call that is about to wait for the user, before it gets its decision id
/// ([`ReferenceSession::wait_on`]).
#[derive(Debug, Clone)]
struct Waits {
    tool_call_id: String,
    tool: String,
    /// `argsSha256`, or a question's `payloadSha256`.
    args_sha256: String,
    rule: Option<usize>,
    drift: bool,
    asks: Option<Ask>,
    child: Option<ChildOrigin>,
    starts: Option<SubagentCall>,
}

/// An allowance in force, as the reference holds it: what [`crate::Session::allowances`] lists,
/// by scope, mode, tool and pattern (the kit's narrowing pattern is [`NARROWING`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelAllowance {
    /// Its scope.
    pub scope: AllowanceScope,
    /// The mode it was given in (by id), the only one whose calls it runs.
    pub mode: String,
    /// The tool it allows.
    pub tool: String,
    /// The path glob that narrows it ([`NARROWING`]); `None`: every call of the tool. (A
    /// pattern the kit never gives is shown as [`AllowancePattern`] displays it.)
    pub pattern: Option<String>,
    /// Its id as the audit record of a call it runs names it (`allowedBy`): the decision id
    /// that gave it for the scopes `mode` and `session`; for `workspace`, the session's id is a
    /// hash of the workspace and config the reference does not know, so it names it
    /// [`ModelAllowance::workspace_id`] and the harness reads the real id that way.
    pub id: String,
}

impl ModelAllowance {
    /// The name the reference gives the workspace allowance of `tool` in `mode`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ModelAllowance;
    /// assert_eq!(ModelAllowance::workspace_id("build", "write_file"), "workspace:build:write_file");
    /// ```
    pub fn workspace_id(mode: &str, tool: &str) -> String {
        format!("workspace:{mode}:{tool}")
    }

    /// The name the reference gives the workspace allowance of `tool` in `mode` narrowed by
    /// the path glob `pattern` (`None`: [`ModelAllowance::workspace_id`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ModelAllowance;
    /// assert_eq!(ModelAllowance::narrowed_workspace_id("build", "write_file", Some("src/**")), "workspace:build:write_file:src/**");
    /// assert_eq!(ModelAllowance::narrowed_workspace_id("build", "write_file", None), "workspace:build:write_file");
    /// ```
    pub fn narrowed_workspace_id(mode: &str, tool: &str, pattern: Option<&str>) -> String {
        match pattern {
            Some(glob) => format!("workspace:{mode}:{tool}:{glob}"),
            None => Self::workspace_id(mode, tool),
        }
    }

    /// Whether it runs a call of `tool` in `mode` with `path` unasked: its mode, its tool, and
    /// where the path leads if it is narrowed (a call without one is never covered then).
    fn covers(&self, mode: &str, tool: &str, path: Option<CallPath>) -> bool {
        self.mode == mode
            && self.tool == tool
            && match &self.pattern {
                None => true,
                Some(glob) => glob == NARROWING && path.is_some_and(CallPath::in_src),
            }
    }
}

/// The reference model of a session: current mode, pending decision and run state, moved by
/// [`Op`]s under the rules of the mode state machine.
///
/// [`ReferenceSession::apply`] records a [`Step`] saying what the real session must do; a
/// [`super::Harness`] performs it on a real session and compares.
#[derive(Clone)]
pub struct ReferenceSession {
    facts: Arc<ConfigFacts>,
    start: Option<usize>,
    mode: usize,
    pending: Option<PendingPlan>,
    run: Option<(usize, RunState)>,
    runs: usize,
    /// The plan revisions the current run was asked for (rejections with feedback).
    revisions: usize,
    /// Set when the kit's hook rejected the plan just submitted and the run goes on: that
    /// rejection is a decision, so the model's next call starts a drive of its own (a fresh
    /// step limit), as a person's rejection would. Read and cleared where the drive goes on.
    hook_decided: bool,
    tool_calls: usize,
    /// The replies the children of the step being applied were scripted with, in order: they
    /// come before the parent's last reply ([`ReferenceSession::apply`]).
    script: Vec<Reply>,
    /// The run and call decided (or cancelled, or expired) last, and whether it expired.
    decided: Option<(usize, String, bool)>,
    /// The kit's clock (milliseconds since the Unix epoch).
    now: u64,
    /// Decision ids given out (plans and tool calls).
    decisions: usize,
    /// The tool calls waiting for approval, in the model's order.
    waiting: Vec<WaitingCall>,
    /// The tools an allowance in force lets run in the current mode, each once, in the order
    /// of `allowances` then `workspace_allowances` (derived from them).
    always_allowed: Vec<String>,
    /// The allowances the session's decisions gave, of scope `mode` (dropped at any change of
    /// mode) and `session` (kept, applying in their own mode only), oldest first.
    allowances: Vec<ModelAllowance>,
    /// The workspace allowances of the store for this workspace and config, oldest first:
    /// kept across restarts and into new sessions ([`Op::NewSession`]).
    workspace_allowances: Vec<ModelAllowance>,
    restarts: bool,
    /// The mode changed since the model's last call: its next call must carry a notice.
    notice_due: bool,
    /// A plan was approved since the model's last call: its next call must receive this text.
    handed_due: Option<String>,
    /// The session's task list.
    tasks: Vec<ModelTask>,
    /// Whether the approved plan's allowance in force (scope `plan`, in `allowances`) refuses
    /// writes outside its files (`planScope = "enforce"`) rather than asking (`"ask"`).
    plan_enforces: bool,
    last: Option<Step>,
    /// The kit's hook's verdicts, an input of the case ([`ReferenceSession::with_hooks`]).
    hooks: HookScript,
}

/// Short, with modes by id: the config is not repeated in every failure report.
impl fmt::Debug for ReferenceSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pending = self.pending.as_ref().map(|p| {
            format!(
                "{} of run {} -> {}",
                p.tool_call_id,
                p.run,
                self.facts.id(p.target)
            )
        });
        f.debug_struct("ReferenceSession")
            .field("start", &self.start.map(|m| self.facts.id(m)))
            .field("mode", &self.facts.id(self.mode))
            .field("pending", &pending)
            .field(
                "waiting",
                &self
                    .waiting
                    .iter()
                    .map(|w| format!("{} {} {:?}", w.decision_id, w.tool, w.decided))
                    .collect::<Vec<_>>(),
            )
            .field(
                "allowances",
                &self
                    .all_allowances()
                    .map(|a| match &a.pattern {
                        Some(p) => format!("{} {} `{p}` in {}", a.scope, a.tool, a.mode),
                        None => format!("{} {} in {}", a.scope, a.tool, a.mode),
                    })
                    .collect::<Vec<_>>(),
            )
            .field("run", &self.run)
            .field("hooks", &self.hooks)
            .field("now", &self.now.saturating_sub(CLOCK_START_MS))
            .finish_non_exhaustive()
    }
}

impl ReferenceSession {
    /// A new session in mode `start`, or in the default mode for `None` (rule 1).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// let default = ReferenceSession::new(facts.clone(), None);
    /// assert_eq!(default.mode(), build, "the default mode");
    /// assert_eq!(session.mode(), plan);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn new(facts: Arc<ConfigFacts>, start: Option<usize>) -> Self {
        let start = start.filter(|m| *m < facts.len());
        let mode = start.unwrap_or_else(|| facts.default_mode());
        Self {
            facts,
            start,
            mode,
            pending: None,
            run: None,
            runs: 0,
            revisions: 0,
            hook_decided: false,
            tool_calls: 0,
            script: Vec::new(),
            decided: None,
            now: CLOCK_START_MS,
            decisions: 0,
            waiting: Vec::new(),
            always_allowed: Vec::new(),
            allowances: Vec::new(),
            workspace_allowances: Vec::new(),
            restarts: false,
            notice_due: false,
            handed_due: None,
            tasks: Vec::new(),
            plan_enforces: false,
            last: None,
            hooks: HookScript::default(),
        }
    }

    /// The same session, whose controller's hook (the kit's, [`crate::testing::KIT_HOOK`])
    /// answers what `script` says on each tool call and each submitted plan.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, HookAnswer, HookScript, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let script = HookScript::default().tool("read_file", HookAnswer::Deny);
    /// let session = ReferenceSession::new(facts, None).with_hooks(script.clone());
    /// assert_eq!(session.hooks(), &script);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_hooks(mut self, script: HookScript) -> Self {
        self.hooks = script;
        self
    }

    /// What the kit's hook answers in this session ([`ReferenceSession::with_hooks`]).
    pub fn hooks(&self) -> &HookScript {
        &self.hooks
    }

    /// The same session, with [`Op::Restart`] among its operations when `restarts` is true (for
    /// a controller with a session store).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// let session = session.with_restarts(true);
    /// assert!(session.can_apply(&Op::Restart));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_restarts(mut self, restarts: bool) -> Self {
        self.restarts = restarts;
        self
    }

    /// The config facts.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// assert_eq!(session.facts().len(), 2);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn facts(&self) -> &Arc<ConfigFacts> {
        &self.facts
    }

    /// The mode the session was started in by name; `None` when it started in the default.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// assert_eq!(session.start(), Some(plan));
    /// assert_eq!(ReferenceSession::new(facts, None).start(), None);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn start(&self) -> Option<usize> {
        self.start
    }

    /// The current mode's index.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// assert_eq!(facts.id(session.mode()), "plan");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn mode(&self) -> usize {
        self.mode
    }

    /// The plan waiting for a decision, if any.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// assert!(session.pending().is_none());
    /// session.apply(&Op::submit(2));
    /// assert!(session.pending().is_some());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn pending(&self) -> Option<&PendingPlan> {
        self.pending.as_ref()
    }

    /// The tool calls waiting for approval (those decided while others wait included), in the
    /// model's order; empty when none waits.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"]),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// assert!(session.waiting().is_empty());
    /// session.apply(&Op::call("write_file"));
    /// assert_eq!(session.waiting().len(), 1);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn waiting(&self) -> &[WaitingCall] {
        &self.waiting
    }

    /// The tools a decision always allowed for the session, in the order allowed.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"]),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None);
    /// assert!(session.always_allowed().is_empty());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn always_allowed(&self) -> &[String] {
        &self.always_allowed
    }

    /// Every allowance in force, as [`crate::Session::allowances`] lists them: the session's
    /// own (scopes `mode` and `session`), oldest first, then the workspace ones.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::allowance::AllowanceScope;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession, WorkspaceStore};
    /// let facts = Arc::new(
    ///     ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n")?
    ///         .with_tools(["write_file"])
    ///         .with_writing_tools(["write_file"])
    ///         .with_workspace_store(WorkspaceStore::Keeps),
    /// );
    /// let mut session = ReferenceSession::new(facts.clone(), None).with_restarts(true);
    /// session.apply(&Op::call("write_file"));
    /// session.apply(&Op::always_allow_tool_for(0, AllowanceScope::Workspace));
    /// session.apply(&Op::NewSession);
    /// let kept = session.allowances();
    /// assert_eq!(kept.len(), 1);
    /// assert_eq!((kept[0].scope, kept[0].tool.as_str()), (AllowanceScope::Workspace, "write_file"));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn allowances(&self) -> Vec<ModelAllowance> {
        self.all_allowances().cloned().collect()
    }

    fn all_allowances(&self) -> impl Iterator<Item = &ModelAllowance> {
        self.allowances.iter().chain(&self.workspace_allowances)
    }

    /// The allowance that runs a call of `tool` with `path` in the current mode unasked, if
    /// any: the first in force given in this mode that covers it.
    fn allowance_for(&self, tool: &str, path: Option<CallPath>) -> Option<&ModelAllowance> {
        let mode = self.facts.id(self.mode);
        self.all_allowances().find(|a| a.covers(mode, tool, path))
    }

    /// How the files of the plan approved for the current mode bind a call of `tool` with
    /// `path`: `None` when no plan's allowance is in force here or the tool writes nothing.
    /// A write lies inside them when its tool writes the file at its `path`
    /// ([`ConfigFacts::path_writers`]) and that path leads to [`super::PLAN_FILES`]; any other write
    /// (no `path`, a tool that says nothing of where it writes) is outside.
    fn plan_bound(&self, tool: &str, path: Option<CallPath>) -> Option<Bound> {
        let mode = self.facts.id(self.mode);
        let grant = self
            .allowances
            .iter()
            .find(|a| a.scope == AllowanceScope::Plan && a.mode == mode);
        let bound = bound(
            &self.facts,
            grant.map(|a| a.id.as_str()),
            self.plan_enforces,
            tool,
            path,
        );
        match bound {
            // Under a quorum no allowance stands in for the people, the plan's neither: the
            // write waits as `requireApproval` makes it, for its approvals.
            Some(Bound::Inside(_)) if self.facts.plan_quorum(self.mode) > 1 => None,
            bound => bound,
        }
    }

    /// Whether the approved plan's allowance in force refuses writes outside its files
    /// (`planScope = "enforce"`) rather than asking.
    pub(crate) fn plan_enforces(&self) -> bool {
        self.plan_enforces
    }

    /// Recomputes `always_allowed` for the current mode: the tools of the allowances in force
    /// there without a pattern, each once (an approved plan's allows files, not a tool).
    fn refresh_allowed(&mut self) {
        let mode = self.facts.id(self.mode).to_owned();
        let mut tools: Vec<String> = Vec::new();
        for a in self.all_allowances() {
            if a.mode == mode
                && a.pattern.is_none()
                && a.scope != AllowanceScope::Plan
                && !tools.contains(&a.tool)
            {
                tools.push(a.tool.clone());
            }
        }
        self.always_allowed = tools;
    }

    /// The latest run's ordinal and state, if a run was started.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// use agent_controller::event::RunState;
    /// assert_eq!(session.run(), None);
    /// session.apply(&Op::message());
    /// assert_eq!(session.run(), Some((1, RunState::Completed)));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn run(&self) -> Option<(usize, RunState)> {
        self.run
    }

    /// The step the last [`ReferenceSession::apply`] recorded.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// assert!(session.last_step().is_none());
    /// session.apply(&Op::message());
    /// assert!(session.last_step().is_some());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn last_step(&self) -> Option<&Step> {
        self.last.as_ref()
    }

    /// The session's task list: written by the kit's task calls ([`Call::Task`]), seeded by
    /// an approved plan's numbered steps in a mode that offers the task tools, kept across a
    /// restart, empty in a new session.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"build\"\n")?);
    /// assert!(ReferenceSession::new(facts, None).tasks().is_empty());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn tasks(&self) -> &[ModelTask] {
        &self.tasks
    }

    /// Whether a kit call of task tool `tool` runs at once in the current mode: the mode
    /// offers it, and neither `requireApproval` nor a rule holds its calls.
    fn runs_task_tool(&self, tool: &str) -> bool {
        runs_task_tool(&self.facts, self.mode, tool)
    }

    /// The task rules, restated for the kit's calls: applies `call` to the list; `false` when
    /// it is refused (the list is then unchanged).
    fn apply_task(&mut self, call: TaskCall) -> bool {
        let has = |tasks: &[ModelTask], id: &str| tasks.iter().any(|t| t.id == id);
        match call {
            TaskCall::Write => {
                self.tasks = vec![
                    ModelTask::new("step_1", "Write the code.", TaskStatus::InProgress),
                    ModelTask::new("step_2", "Test it.", TaskStatus::Pending),
                ];
                true
            }
            // Two tasks in progress, or one id twice: refused.
            TaskCall::WriteTwoInProgress | TaskCall::WriteRepeatedIds => false,
            TaskCall::Start if has(&self.tasks, "step_2") => {
                for task in &mut self.tasks {
                    if task.id == "step_2" {
                        task.status = TaskStatus::InProgress;
                    } else if task.status == TaskStatus::InProgress {
                        task.status = TaskStatus::Pending;
                    }
                }
                true
            }
            TaskCall::Complete if has(&self.tasks, "step_1") => {
                for task in self.tasks.iter_mut().filter(|t| t.id == "step_1") {
                    task.status = TaskStatus::Completed;
                }
                true
            }
            // An id the list lacks.
            TaskCall::Start | TaskCall::Complete | TaskCall::UpdateUnknown => false,
            TaskCall::Check => true,
        }
    }

    /// Whether `op` makes sense now: decisions need a pending plan, `DecideAgain` a decided
    /// tool call, and `Tool` calls a tool whose offer the facts decide (a mode without
    /// `availableTools` needs [`ConfigFacts::with_tools`]).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// assert!(session.can_apply(&Op::message()));
    /// assert!(!session.can_apply(&Op::approve()), "no plan waits");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn can_apply(&self, op: &Op) -> bool {
        match op {
            // At most one `subagent` call a reply: the children of one reply run at once.
            Op::Message { calls, .. }
                if calls
                    .iter()
                    .filter(|c| matches!(c, Call::Subagent(_)))
                    .count()
                    > 1 =>
            {
                false
            }
            Op::Message { calls, .. } => calls.iter().all(|call| match call {
                Call::SubmitPlan(PlanFile::Valid(k)) => is_plan_file(*k),
                Call::SubmitPlan(_) => true,
                Call::Tool(name) => {
                    self.facts.offers(self.mode, name).is_some() && !unmodelled_call(self, name)
                }
                Call::Ask(ask) => {
                    self.facts.offers(self.mode, ask.tool()).is_some()
                        && !unmodelled_call(self, ask.tool())
                }
                Call::ToolAt(name, _) => self.facts.takes_path(self.mode, name),
                Call::Task(call) => self.runs_task_tool(call.tool()),
                Call::Subagent(_) => self.facts.offers(self.mode, SUBAGENT).is_some(),
            }),
            Op::Decide {
                on: Subject::Plan { revision, .. },
                ..
            } => {
                self.pending.is_some()
                    && !matches!(revision, Revision::Resubmit(k) if *k >= PLAN_COUNT)
            }
            Op::Decide {
                on: Subject::ToolCall { call, narrowed, .. },
                ..
            } => self
                .waiting
                .get(*call)
                .is_some_and(|w| !narrowed || self.facts.takes_path(self.mode, &w.tool)),
            Op::Decide {
                on: Subject::Question { call, .. },
                ..
            } => self.waiting.get(*call).is_some(),
            Op::Revoke(_) => self.all_allowances().next().is_some(),
            Op::Answer(_) => self.pending.is_some(),
            Op::DecideAgain => self.decided.is_some(),
            Op::Restart | Op::NewSession => self.restarts,
            Op::Wait(Until::JustBefore) => self
                .next_deadline()
                .is_some_and(|at| self.now.saturating_add(1) < at),
            Op::Wait(Until::Deadline) => self.next_deadline().is_some_and(|at| self.now < at),
            Op::Wait(Until::AnHour) | Op::ExpireIfDue => self.facts.has_deadlines(),
            Op::Abort
            | Op::DecideUnknownCall
            | Op::DecideUnknownRun
            | Op::Malformed(_)
            | Op::Switch(_) => true,
        }
    }

    /// Applies `op` and returns the recorded [`Step`]. An op that [`ReferenceSession::can_apply`]
    /// refuses becomes a step that does nothing.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let build = facts.index_of("build").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::submit(1));
    /// session.apply(&Op::approve());
    /// assert_eq!(session.mode(), build);
    /// assert!(session.pending().is_none());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn apply(&mut self, op: &Op) -> &Step {
        let mut trace = Vec::new();
        // Under a quorum, the session before the step: a refused decision changes nothing.
        let before = self.facts.has_quorum().then(|| self.clone());
        let (mut action, mut replies, mut outcome) = if self.can_apply(op) {
            self.step(op, &mut trace)
        } else {
            (Action::Nothing, Vec::new(), Outcome::NoDecision)
        };
        let mut quorum = None;
        if let Some(before) = before {
            match quorum_ruled(&before, &action, &outcome) {
                None => {}
                Some(Ok((step, named))) => {
                    quorum = Some(step);
                    action = named;
                }
                Some(Err(refusal)) => {
                    *self = before;
                    self.script.clear();
                    replies = Vec::new();
                    trace.clear();
                    outcome = Outcome::Refused(refusal);
                }
            }
        }
        // A child is answered by the same model, while its parent's call runs: before the
        // parent's last reply.
        let children = std::mem::take(&mut self.script);
        let at = replies.len().saturating_sub(1);
        replies.splice(at..at, children);
        self.last.insert(Step {
            op: op.clone(),
            action,
            replies,
            expected: Expected { outcome, trace },
            quorum,
        })
    }

    /// Deadlines: every host call that looks at the session first applies what
    /// expired ([`ReferenceSession::expire`]); a decision on what just expired is refused, as
    /// it would be after the expiry.
    fn step(&mut self, op: &Op, trace: &mut Vec<Trace>) -> (Action, Vec<Reply>, Outcome) {
        if !(self.settles(op) && self.is_due()) {
            return self.perform(op, trace);
        }
        let refusal = match op {
            Op::Decide {
                on: Subject::ToolCall { call, .. } | Subject::Question { call, .. },
                ..
            } if self.waiting.get(*call).is_some_and(|w| w.decided.is_some()) => {
                Some(Refusal::AlreadyDecided)
            }
            Op::Decide { .. } | Op::Answer(_) => Some(Refusal::Expired),
            Op::DecideAgain => Some(match self.decided {
                Some((_, _, true)) => Refusal::Expired,
                _ => Refusal::AlreadyDecided,
            }),
            _ => None,
        };
        let Some(refusal) = refusal else {
            self.expire(trace);
            return self.perform(op, trace);
        };
        // The host call is the one made on what waited; the session applies the expiry, then
        // finds the decision settled.
        let (action, _, _) = self.clone().perform(op, &mut Vec::new());
        self.expire(trace);
        (action, Vec::new(), Outcome::Refused(refusal))
    }

    /// Whether the host call `op` becomes applies what expired before anything else: every
    /// session call but a resume with malformed data (refused before the session is looked at),
    /// a switch to the current mode or an unknown id, an answer that decides nothing, time
    /// passing, and `expire_if_due` (which is the expiry).
    fn settles(&self, op: &Op) -> bool {
        match op {
            // `expire_if_due` is the expiry itself.
            // A new session leaves the old one as it is.
            Op::Malformed(_) | Op::Wait(_) | Op::ExpireIfDue | Op::NewSession => false,
            Op::Switch(id) => self.facts.index_of(id).is_some_and(|m| m != self.mode),
            Op::Answer(answer) => parse_answer(answer.as_deref()).is_some(),
            _ => true,
        }
    }

    /// The earliest deadline of what waits undecided: the pending plan's, or that of the tool
    /// calls waiting for approval (those decided while others wait have none any more).
    pub fn next_deadline(&self) -> Option<u64> {
        let plan = self.pending.iter().filter_map(|p| p.deadline);
        let calls = self
            .waiting
            .iter()
            .filter(|w| w.decided.is_none())
            .filter_map(|w| w.deadline);
        plan.chain(calls).min()
    }

    /// Whether what waits is past its deadline now, its expiry not applied yet.
    pub fn is_due(&self) -> bool {
        self.next_deadline().is_some_and(|at| at <= self.now)
    }

    /// Whether the decision settled last expired (deciding it again is refused as expired).
    pub fn last_settled_expired(&self) -> bool {
        matches!(self.decided, Some((_, _, true)))
    }

    /// The kit's clock: milliseconds since the Unix epoch ([`CLOCK_START_MS`] at the start).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The deadline of a plan submitted, or a tool call made, now in the current mode.
    fn deadline_from_now(&self) -> Option<u64> {
        self.facts
            .approval_timeout_ms(self.mode)
            .map(|timeout| self.now.saturating_add(timeout))
    }

    fn wait(&mut self, until: Until) {
        let next = self.next_deadline();
        self.now = match (until, next) {
            (Until::JustBefore, Some(at)) => self.now.max(at.saturating_sub(1)),
            (Until::Deadline, Some(at)) => self.now.max(at),
            (Until::AnHour, _) => self.now.saturating_add(HOUR_MS),
            (_, None) => self.now,
        };
    }

    /// Deadlines: what waits past its deadline expires and counts as not approved; the mode
    /// stays, no model call follows. A plan expires alone: its `submit_plan` call gets the
    /// expired result (not an error) and an audit record. Tool calls expire as their reply:
    /// every call of it is answered in the model's order, an undecided one as expired, one
    /// approved while others waited as never run, one rejected with its rejection. The run ends
    /// `completed` (`onTimeout = "reject"`) or `aborted` (`"abort"`). Returns how many
    /// decisions expired (0 when nothing was due).
    fn expire(&mut self, trace: &mut Vec<Trace>) -> usize {
        if !self.is_due() {
            return 0;
        }
        let mode = self.facts.id(self.mode).to_owned();
        let end = match self.facts.on_timeout(self.mode) {
            super::facts::TimeoutRule::Abort => RunState::Aborted,
            _ => RunState::Completed,
        };
        if let Some(plan) = self.pending.take() {
            trace.push(Trace::RunStarted {
                run: plan.run,
                mode,
            });
            trace.push(Trace::ToolEnded {
                tool_call_id: plan.tool_call_id.clone(),
                is_error: false,
                result: ResultKind::Expired,
                decided: Some(Decided {
                    sha256: plan.sha256.clone(),
                    approved_sha256: None,
                    rule: None,
                }),
            });
            trace.push(Trace::RunEnded {
                run: plan.run,
                reason: end,
            });
            self.run = Some((plan.run, end));
            self.decided = Some((plan.run, plan.tool_call_id, true));
            return 1;
        }
        let waiting = std::mem::take(&mut self.waiting);
        let Some(last) = waiting.last() else {
            return 0;
        };
        let run = last.run;
        trace.push(Trace::RunStarted { run, mode });
        // A child's call is not in the parent's conversation: its record is kept, its child
        // ended (the parent's `subagent` call told so, with no `tool_end`).
        for w in waiting.iter().filter(|w| w.child.is_none()) {
            trace.push(Trace::ToolEnded {
                tool_call_id: w.tool_call_id.clone(),
                is_error: true,
                result: match w.decided {
                    None => ResultKind::Expired,
                    Some((DecisionAction::Approved, _)) => ResultKind::ApprovedNotRun,
                    Some((DecisionAction::Rejected, false)) if w.asks.is_some() => {
                        ResultKind::Declined
                    }
                    Some((DecisionAction::Rejected, true)) if w.asks.is_some() => {
                        ResultKind::DeclinedWithFeedback
                    }
                    Some((DecisionAction::Rejected, false)) => ResultKind::ToolRejected,
                    Some((DecisionAction::Rejected, true)) => ResultKind::ToolRejectedWithFeedback,
                    Some((DecisionAction::Answered, _)) => ResultKind::AnsweredNotResumed,
                },
                decided: Some(Decided {
                    sha256: w.args_sha256.clone(),
                    approved_sha256: None,
                    rule: w.rule,
                }),
            });
        }
        trace.push(Trace::RunEnded { run, reason: end });
        self.run = Some((run, end));
        self.decided = Some((run, last.tool_call_id.clone(), last.decided.is_none()));
        waiting.iter().filter(|w| w.decided.is_none()).count()
    }

    fn perform(&mut self, op: &Op, trace: &mut Vec<Trace>) -> (Action, Vec<Reply>, Outcome) {
        match op {
            Op::Message { calls, then } => self.message(calls, *then, trace),
            Op::Decide {
                on,
                action,
                feedback,
                sha256,
            } => self.decide(on, *action, feedback, *sha256, trace),
            Op::Answer(answer) => self.answer(answer.as_deref(), trace),
            Op::Abort => {
                let aborted = self.cancel(CancelReason::Aborted, trace);
                (Action::Abort, Vec::new(), Outcome::Aborted(aborted))
            }
            // A restored session is the session: same mode, pending plan, runs and decisions
            // (saved since it started).
            Op::Restart => (Action::Restore, Vec::new(), Outcome::Restored),
            Op::NewSession => {
                // A session of its own: only the store's workspace allowances carry over.
                // The controller's hook is the same: it answers the same verdicts.
                let mut fresh = ReferenceSession::new(self.facts.clone(), None)
                    .with_restarts(self.restarts)
                    .with_hooks(self.hooks.clone());
                fresh.now = self.now;
                fresh.tool_calls = self.tool_calls;
                fresh.workspace_allowances = std::mem::take(&mut self.workspace_allowances);
                fresh.refresh_allowed();
                *self = fresh;
                (Action::NewSession, Vec::new(), Outcome::Started)
            }
            Op::DecideAgain => {
                let (run, call, expired) = self.decided.clone().unwrap_or_default();
                let action = Action::Resume {
                    run: RunRef::Run(run),
                    tool_call_id: call,
                    decision: Decision::approve(),
                };
                // A call that expired is refused as expired (the history says so).
                let refusal = if expired {
                    Refusal::Expired
                } else {
                    Refusal::AlreadyDecided
                };
                (action, Vec::new(), Outcome::Refused(refusal))
            }
            Op::Wait(until) => {
                self.wait(*until);
                (Action::Nothing, Vec::new(), Outcome::NoDecision)
            }
            Op::ExpireIfDue => {
                let expired = self.expire(trace);
                (Action::ExpireIfDue, Vec::new(), Outcome::Expired(expired))
            }
            Op::Revoke(choice) => self.revoke(*choice),
            Op::DecideUnknownCall => {
                let (run, refusal) = match (&self.pending, self.run) {
                    (Some(p), _) => (RunRef::Run(p.run), Refusal::UnknownToolCall),
                    // The run is suspended on tool calls, none of them with this id.
                    (None, _) if let Some(w) = self.waiting.first() => {
                        (RunRef::Run(w.run), Refusal::UnknownToolCall)
                    }
                    (None, Some((run, _))) => (RunRef::Run(run), Refusal::NotSuspended),
                    (None, None) => (RunRef::Unknown(UNKNOWN_RUN.into()), Refusal::UnknownRun),
                };
                let action = Action::Resume {
                    run,
                    tool_call_id: UNKNOWN_CALL.into(),
                    decision: Decision::approve(),
                };
                (action, Vec::new(), Outcome::Refused(refusal))
            }
            Op::DecideUnknownRun => {
                let action = Action::Resume {
                    run: RunRef::Unknown(UNKNOWN_RUN.into()),
                    tool_call_id: self.addressed_call(),
                    decision: Decision::approve(),
                };
                (action, Vec::new(), Outcome::Refused(Refusal::UnknownRun))
            }
            Op::Malformed(data) => {
                let action = Action::ResumeJson {
                    run: self.addressed_run(),
                    tool_call_id: self.addressed_call(),
                    data: data.clone(),
                };
                (
                    action,
                    Vec::new(),
                    Outcome::Refused(Refusal::MalformedDecision),
                )
            }
            Op::Switch(id) => {
                let action = Action::Switch(id.clone());
                let Some(target) = self.facts.index_of(id) else {
                    return (action, Vec::new(), Outcome::Refused(Refusal::UnknownMode));
                };
                if target == self.mode {
                    // Rule 2: switching to the current mode is a no-op; a pending plan stays.
                    return (action, Vec::new(), Outcome::Switched(false));
                }
                self.cancel(CancelReason::ModeSwitch, trace);
                self.change_mode(target, ModeChangeReason::Manual, trace);
                (action, Vec::new(), Outcome::Switched(true))
            }
        }
    }

    /// Revokes the allowance `choice` names: it is no longer in force, and a workspace one is
    /// gone from the store too (restarts and new sessions no longer have it). An id nobody gave
    /// changes nothing; the call says whether the session kept it.
    fn revoke(&mut self, choice: RevokeChoice) -> (Action, Vec<Reply>, Outcome) {
        let named = match choice {
            RevokeChoice::First => self.all_allowances().next(),
            RevokeChoice::Last => self.all_allowances().last(),
            RevokeChoice::Unknown => None,
        };
        let id = named.map_or_else(|| UNKNOWN_ALLOWANCE.to_owned(), |a| a.id.clone());
        let kept = self.all_allowances().count();
        self.allowances.retain(|a| a.id != id);
        self.workspace_allowances.retain(|a| a.id != id);
        let revoked = self.all_allowances().count() != kept;
        self.refresh_allowed();
        self.withdraw_unkept_approvals();
        (Action::Revoke(id), Vec::new(), Outcome::Revoked(revoked))
    }

    /// A call of the waiting reply that an allowance approved unseen waits again when that
    /// allowance is no longer kept (revoked, or never kept: a store that drops workspace
    /// allowances): what it approved had not run, and nobody saw it.
    fn withdraw_unkept_approvals(&mut self) {
        let kept: Vec<String> = self.all_allowances().map(|a| a.id.clone()).collect();
        for call in &mut self.waiting {
            if call
                .allowed_by
                .as_ref()
                .is_some_and(|id| !kept.contains(id))
            {
                call.decided = None;
                call.allowed_by = None;
            }
        }
    }

    /// The run a decision addresses when the op does not care: the pending one, else the latest.
    fn addressed_run(&self) -> RunRef {
        match (&self.pending, self.run) {
            (Some(p), _) => RunRef::Run(p.run),
            (None, Some((run, _))) => RunRef::Run(run),
            (None, None) => RunRef::Unknown(UNKNOWN_RUN.into()),
        }
    }

    fn addressed_call(&self) -> String {
        self.pending
            .as_ref()
            .map_or_else(|| UNKNOWN_CALL.to_owned(), |p| p.tool_call_id.clone())
    }

    fn next_call_id(&mut self) -> String {
        self.tool_calls += 1;
        format!("call_{}", self.tool_calls)
    }

    /// One model call of the current drive (the message or decision being handled), unless the
    /// drive already made as many as the step limit allows: then the run fails and this
    /// returns `false`.
    fn call_model(&mut self, run: usize, steps: &mut usize, trace: &mut Vec<Trace>) -> bool {
        if *steps >= self.facts.max_steps() {
            trace.push(Trace::RunEnded {
                run,
                reason: RunState::Failed,
            });
            self.run = Some((run, RunState::Failed));
            return false;
        }
        *steps += 1;
        trace.push(self.model_called());
        self.notice_due = false;
        self.handed_due = None;
        true
    }

    fn model_called(&self) -> Trace {
        let mode = &self.facts.modes()[self.mode];
        let listed = self.facts.listed_offer(self.mode).map(|mut names| {
            names.sort();
            names
        });
        Trace::ModelCalled {
            mode: mode.id.clone(),
            offered: Offered {
                submit_plan: mode.is_planning(),
                listed,
            },
            told_mode_change: self.notice_due,
            handed_plan: self.handed_due.clone(),
        }
    }

    /// Rule 6: a pending plan is cancelled as not approved; the mode stays.
    fn cancel(&mut self, reason: CancelReason, trace: &mut Vec<Trace>) -> bool {
        if !self.waiting.is_empty() {
            // Every waiting tool call, decided already or not, is not approved: none runs.
            let waiting = std::mem::take(&mut self.waiting);
            let run = waiting[0].run;
            trace.push(Trace::RunStarted {
                run,
                mode: self.facts.id(self.mode).to_owned(),
            });
            for call in &waiting {
                trace.push(Trace::Cancelled {
                    tool_call_id: call.tool_call_id.clone(),
                    reason,
                });
            }
            trace.push(Trace::RunEnded {
                run,
                reason: RunState::Aborted,
            });
            self.run = Some((run, RunState::Aborted));
            self.decided = waiting.last().map(|w| (run, w.tool_call_id.clone(), false));
            return true;
        }
        let Some(pending) = self.pending.take() else {
            return false;
        };
        // The suspended run resumes to end (`agent_start` again, same run).
        trace.push(Trace::RunStarted {
            run: pending.run,
            mode: self.facts.id(self.mode).to_owned(),
        });
        trace.push(Trace::Cancelled {
            tool_call_id: pending.tool_call_id.clone(),
            reason,
        });
        trace.push(Trace::RunEnded {
            run: pending.run,
            reason: RunState::Aborted,
        });
        self.run = Some((pending.run, RunState::Aborted));
        self.decided = Some((pending.run, pending.tool_call_id, false));
        true
    }

    fn change_mode(&mut self, target: usize, reason: ModeChangeReason, trace: &mut Vec<Trace>) {
        if target == self.mode {
            return;
        }
        trace.push(Trace::ModeChanged {
            mode: self.facts.id(target).to_owned(),
            previous: self.facts.id(self.mode).to_owned(),
            reason,
        });
        self.mode = target;
        self.notice_due = true;
        // Every mode change, an approved plan's included, ends the allowances of scope
        // `mode` and the approved plan's (`plan`); the others stay, applying in the mode they
        // were given in only.
        self.allowances
            .retain(|a| !matches!(a.scope, AllowanceScope::Mode | AllowanceScope::Plan));
        self.refresh_allowed();
    }

    fn end_run(&mut self, run: usize, then: Then, trace: &mut Vec<Trace>) -> Outcome {
        let state = match then {
            Then::Text => RunState::Completed,
            Then::ModelFails => RunState::Failed,
        };
        trace.push(Trace::RunEnded { run, reason: state });
        self.run = Some((run, state));
        Outcome::Run(state)
    }

    fn message(
        &mut self,
        calls: &[Call],
        then: Then,
        trace: &mut Vec<Trace>,
    ) -> (Action, Vec<Reply>, Outcome) {
        self.cancel(CancelReason::UserMessage, trace);
        self.runs += 1;
        self.revisions = 0;
        let run = self.runs;
        self.run = Some((run, RunState::Running));
        trace.push(Trace::RunStarted {
            run,
            mode: self.facts.id(self.mode).to_owned(),
        });
        let action = Action::Send(format!("message {run}"));
        let last = match then {
            Then::Text => Reply::Text(format!("done with message {run}")),
            Then::ModelFails => Reply::Fail,
        };
        let mut steps = 0;
        self.call_model(run, &mut steps, trace);
        if calls.is_empty() {
            let outcome = self.end_run(run, then, trace);
            return (action, vec![last], outcome);
        }
        let scripted: Vec<ScriptedCall> = calls
            .iter()
            .map(|call| {
                let id = self.next_call_id();
                match call {
                    Call::SubmitPlan(plan) => ScriptedCall {
                        id,
                        tool: SUBMIT_PLAN.to_owned(),
                        plan: Some(*plan),
                        path: None,
                        task: None,
                        ask: None,
                        subagent: None,
                    },
                    Call::Tool(name) => ScriptedCall {
                        id,
                        tool: name.clone(),
                        plan: None,
                        path: None,
                        task: None,
                        ask: Ask::of_tool(name),
                        subagent: None,
                    },
                    Call::Ask(ask) => ScriptedCall {
                        id,
                        tool: ask.tool().to_owned(),
                        plan: None,
                        path: None,
                        task: None,
                        ask: Some(*ask),
                        subagent: None,
                    },
                    Call::ToolAt(name, path) => ScriptedCall {
                        id,
                        tool: name.clone(),
                        plan: None,
                        path: Some(*path),
                        task: None,
                        ask: None,
                        subagent: None,
                    },
                    Call::Task(call) => ScriptedCall {
                        id,
                        tool: call.tool().to_owned(),
                        plan: None,
                        path: None,
                        task: Some(*call),
                        ask: None,
                        subagent: None,
                    },
                    Call::Subagent(call) => ScriptedCall {
                        id,
                        tool: SUBAGENT.to_owned(),
                        plan: None,
                        path: None,
                        task: None,
                        ask: None,
                        subagent: Some(call.clone()),
                    },
                }
            })
            .collect();
        let replies = vec![Reply::Calls(scripted.clone()), last];
        let outcome = match self.tool_calls_then(run, &scripted, trace) {
            Some(outcome) => outcome,
            None => {
                if std::mem::take(&mut self.hook_decided) {
                    steps = 0;
                }
                self.call_model_then(run, &mut steps, then, trace)
            }
        };
        (action, replies, outcome)
    }

    /// The model's last call of a drive and how it ends the run (or the step limit fails it).
    fn call_model_then(
        &mut self,
        run: usize,
        steps: &mut usize,
        then: Then,
        trace: &mut Vec<Trace>,
    ) -> Outcome {
        if self.call_model(run, steps, trace) {
            self.end_run(run, then, trace)
        } else {
            Outcome::Run(RunState::Failed)
        }
    }

    /// Rules 3, 8, 9, 12 and 13: runs one step's calls in order; returns `Some` when the run
    /// suspends.
    ///
    /// Rule 13 (a mode's rules, [`ConfigFacts::rule_for`]): a call of an offered tool that a
    /// `deny` rule decides never runs (its result names the rule; its audit record gets a
    /// decision id); one an `allow` rule decides runs without asking (with a record and a
    /// decision id of its own); one an `ask` rule decides waits, "always allow" or not.
    ///
    /// A call to a tool the mode offers and its `requireApproval` covers (not always allowed,
    /// no rule deciding) does not run: once the other calls have run, the run suspends on
    /// every such call at once, each its own decision. A `submit_plan` in such a reply is not
    /// executed.
    fn tool_calls_then(
        &mut self,
        run: usize,
        calls: &[ScriptedCall],
        trace: &mut Vec<Trace>,
    ) -> Option<Outcome> {
        // `ask_user` asks the user already: an `ask` rule never makes it wait (a `deny` rule
        // still refuses it).
        let rule_of = |this: &Self, call: &ScriptedCall| {
            this.facts
                .rule_for(this.mode, &call.tool)
                .filter(|(_, action)| !(call.tool == ASK_USER && *action == "ask"))
                .map(|(n, action)| (n, action.to_owned()))
        };
        // The approved plan's files bind a write of a tool the mode offers that no `deny` rule
        // refuses: a call the mode does not offer is refused as such, and holds nothing back.
        let bound_of = |this: &Self, call: &ScriptedCall| {
            let offered = this.facts.offers(this.mode, &call.tool) == Some(true);
            let denied = rule_of(this, call).is_some_and(|(_, action)| action == "deny");
            this.plan_bound(&call.tool, call.path)
                .filter(|_| offered && !denied)
        };
        let waits_by_rules =
            |this: &Self, call: &ScriptedCall| match (bound_of(this, call), rule_of(this, call)) {
                (Some(Bound::Drift), _) => true,
                (Some(Bound::Refused), _) => false,
                (_, Some((_, action))) => action == "ask",
                // Inside the plan's files, its allowance stands in for `requireApproval`.
                (Some(Bound::Inside(_)), None) => false,
                (None, None) => {
                    this.facts.requires_approval(this.mode, &call.tool)
                        && this.allowance_for(&call.tool, call.path).is_none()
                }
            };
        // The kit's hook is asked about an offered call that neither a `deny` rule nor the
        // approved plan's files refuse: its verdict, or ask when it has no say.
        let hook_of = |this: &Self, call: &ScriptedCall| {
            let offered = this.facts.offers(this.mode, &call.tool) == Some(true);
            let denied = rule_of(this, call).is_some_and(|(_, action)| action == "deny");
            let refused = bound_of(this, call) == Some(Bound::Refused);
            // A hook's allow never counts toward a quorum: the call waits for the people.
            let held = super::quorum::quorum_holds_hook_allow(&this.facts, this.mode, &call.tool);
            match this.hooks.on_tool(&call.tool) {
                Some(HookAnswer::Allow) if held => HookAnswer::Ask,
                Some(answer) if offered && !denied && !refused => answer,
                _ => HookAnswer::Ask,
            }
        };
        // A hook's deny refuses the call; its allow runs one that would wait.
        let waits_for = |this: &Self, call: &ScriptedCall| {
            let hook = hook_of(this, call);
            waits_by_rules(this, call) && !hook.allows() && !hook.denies()
        };
        let waits = calls.iter().any(|c| waits_for(self, c));
        // The calls that wait, in the model's order: each with the `ask` rule that made it
        // wait, and what it asks when its tool suspended it instead.
        let mut waiting = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let offered = self.facts.offers(self.mode, &call.tool) == Some(true);
            let rule = if offered { rule_of(self, call) } else { None };
            let bound = if offered { bound_of(self, call) } else { None };
            let hook = hook_of(self, call);
            if hook.denies() {
                // Never run: the result names the hook, the record is the hook's own.
                self.decisions += 1;
                trace.push(Trace::ToolEnded {
                    tool_call_id: call.id.clone(),
                    is_error: true,
                    result: ResultKind::HookDenied,
                    decided: Some(Decided {
                        sha256: call.args_sha256(),
                        approved_sha256: None,
                        rule: None,
                    }),
                });
                continue;
            }
            if hook.allows() && waits_by_rules(self, call) {
                // It would have waited (`requireApproval`, an `ask` rule, drift): it runs, and
                // its record names the hook, no rule.
                self.decisions += 1;
                trace.push(Trace::ToolRan {
                    tool_call_id: call.id.clone(),
                    tool: call.tool.clone(),
                    mode: self.facts.id(self.mode).to_owned(),
                    allowed_by: None,
                    rule: None,
                    hooked: true,
                });
                continue;
            }
            if offered && waits_for(self, call) {
                // Drift waits by the plan's files, not by a rule.
                let drift = bound == Some(Bound::Drift);
                waiting.push(Waits {
                    tool_call_id: call.id.clone(),
                    tool: call.tool.clone(),
                    args_sha256: call.args_sha256(),
                    rule: rule.filter(|_| !drift).map(|(n, _)| n),
                    drift,
                    asks: None,
                    child: None,
                    starts: call.subagent.clone(),
                });
                continue;
            }
            if let Some((n, action)) = &rule
                && action == "deny"
            {
                self.decisions += 1;
                trace.push(Trace::ToolEnded {
                    tool_call_id: call.id.clone(),
                    is_error: true,
                    result: ResultKind::Denied,
                    decided: Some(Decided {
                        sha256: call.args_sha256(),
                        approved_sha256: None,
                        rule: Some(*n),
                    }),
                });
                continue;
            }
            if bound == Some(Bound::Refused) {
                // Outside the approved plan's files under `enforce`: refused unasked, no record.
                trace.push(Trace::ToolEnded {
                    tool_call_id: call.id.clone(),
                    is_error: true,
                    result: ResultKind::OutsidePlan,
                    decided: None,
                });
                continue;
            }
            if offered && let Some(task) = call.task {
                // The session applies it to its list by the task rules, in its turn; no tool
                // executes it.
                let refused = !self.apply_task(task);
                trace.push(Trace::ToolEnded {
                    tool_call_id: call.id.clone(),
                    is_error: refused,
                    result: ResultKind::Other,
                    decided: None,
                });
                continue;
            }
            if let Some(ask) = call.ask.filter(|_| offered) {
                // It runs in its turn and suspends: it waits for the answer beside the calls
                // that wait for approval.
                trace.push(Trace::CallSuspended {
                    tool_call_id: call.id.clone(),
                    tool: call.tool.clone(),
                    mode: self.facts.id(self.mode).to_owned(),
                });
                waiting.push(Waits {
                    tool_call_id: call.id.clone(),
                    tool: call.tool.clone(),
                    args_sha256: ask.payload_sha256(),
                    rule: None,
                    drift: false,
                    asks: Some(ask),
                    child: None,
                    starts: None,
                });
                continue;
            }
            if offered && let Some(subagent) = &call.subagent {
                // The session runs it itself: a child, or an error result when it may not
                // start. Run by a rule or an allowance, its record says which.
                let rule = rule.map(|(n, _)| n);
                let allowed_by = rule.is_none()
                    && self.facts.requires_approval(self.mode, &call.tool)
                    && self.allowance_for(&call.tool, None).is_some();
                let decided = (rule.is_some() || allowed_by).then(|| {
                    self.decisions += 1;
                    Decided {
                        sha256: call.args_sha256(),
                        approved_sha256: None,
                        rule,
                    }
                });
                waiting.extend(self.start_child(&call.id, subagent, decided, trace));
                continue;
            }
            if offered && call.tool != SUBMIT_PLAN {
                let rule = rule.map(|(n, _)| n);
                // A call `requireApproval` would hold that an allowance ran: a record of its
                // own, naming the allowance.
                let allowed_by = match rule {
                    None if self.facts.requires_approval(self.mode, &call.tool) => self
                        .allowance_for(&call.tool, call.path)
                        .map(|a| a.id.clone())
                        .or(match bound {
                            // Else the approved plan's allowance, inside its files.
                            Some(Bound::Inside(id)) => Some(id),
                            _ => None,
                        }),
                    _ => None,
                };
                if rule.is_some() || allowed_by.is_some() {
                    self.decisions += 1;
                }
                trace.push(Trace::ToolRan {
                    tool_call_id: call.id.clone(),
                    tool: call.tool.clone(),
                    mode: self.facts.id(self.mode).to_owned(),
                    allowed_by,
                    rule,
                    hooked: false,
                });
                continue;
            }
            // A plan beside calls that wait (for approval, or a question asked before it) is
            // refused.
            // So is one beside a child that waits.
            let asked = waiting
                .iter()
                .any(|w| w.asks.is_some() || w.child.is_some());
            match call.plan {
                Some(PlanFile::Valid(k)) if offered && !waits && !asked => {
                    for rest in &calls[i + 1..] {
                        trace.push(Trace::ToolEnded {
                            tool_call_id: rest.id.clone(),
                            is_error: true,
                            result: ResultKind::Other,
                            decided: None,
                        });
                    }
                    let outcome = self.suspend(run, call.id.clone(), k, trace);
                    if self.hooks.on_plan().is_some_and(HookAnswer::denies) {
                        return self.hook_rejects_plan(trace);
                    }
                    return Some(outcome);
                }
                _ => trace.push(Trace::ToolEnded {
                    tool_call_id: call.id.clone(),
                    is_error: true,
                    result: ResultKind::Other,
                    decided: None,
                }),
            }
        }
        if waiting.is_empty() {
            return None;
        }
        Some(self.wait_on(run, waiting, trace))
    }

    /// The plan just submitted, which the kit's hook denied: rejected at once with the hook's
    /// reason as its feedback, as a person's rejection with feedback would be, and the model
    /// revises in the same drive (`None`: the run goes on), unless that exceeds the run's
    /// limit of revisions.
    fn hook_rejects_plan(&mut self, trace: &mut Vec<Trace>) -> Option<Outcome> {
        let pending = self.pending.take()?;
        let run = pending.run;
        self.decided = Some((run, pending.tool_call_id.clone(), false));
        // Its feedback: "Rejected by hook `kit-hook`: …", the hook's reason.
        trace.push(Trace::RunStarted {
            run,
            mode: self.facts.id(self.mode).to_owned(),
        });
        trace.push(Trace::ToolEnded {
            tool_call_id: pending.tool_call_id,
            is_error: false,
            result: ResultKind::RejectedWithFeedback,
            decided: Some(Decided {
                sha256: pending.sha256,
                approved_sha256: None,
                rule: None,
            }),
        });
        if self.revisions >= self.facts.max_revisions() {
            trace.push(Trace::RunEnded {
                run,
                reason: RunState::Failed,
            });
            self.run = Some((run, RunState::Failed));
            return Some(Outcome::Run(RunState::Failed));
        }
        self.revisions += 1;
        self.run = Some((run, RunState::Running));
        self.hook_decided = true;
        None
    }

    /// The run suspends on the calls `waiting` (in the model's order), each a decision of its
    /// own (`decision_N`, counted with the plans'), announced by `tool_suspended`.
    fn wait_on(&mut self, run: usize, waiting: Vec<Waits>, trace: &mut Vec<Trace>) -> Outcome {
        for w in waiting {
            self.decisions += 1;
            let waiting = WaitingCall {
                run,
                tool_call_id: w.tool_call_id,
                tool: w.tool,
                decision_id: format!("decision_{}", self.decisions),
                args_sha256: w.args_sha256,
                decided: None,
                allowed_by: None,
                rule: w.rule,
                drift: w.drift,
                deadline: self.deadline_from_now(),
                asks: w.asks,
                child: w.child,
                starts: w.starts,
            };
            trace.push(match (&waiting.child, waiting.asks) {
                (Some(origin), asks) => Trace::ChildWaits {
                    tool_call_id: waiting.tool_call_id.clone(),
                    tool: waiting.tool.clone(),
                    decision_id: waiting.decision_id.clone(),
                    sha256: waiting.args_sha256.clone(),
                    rule: waiting.rule,
                    question: asks.is_some(),
                    origin: origin.clone(),
                },
                (None, Some(ask)) => Trace::AnswerAwaited {
                    tool_call_id: waiting.tool_call_id.clone(),
                    tool: waiting.tool.clone(),
                    decision_id: waiting.decision_id.clone(),
                    payload_sha256: waiting.args_sha256.clone(),
                    question: ask.is_question(),
                },
                (None, None) => Trace::ToolCallSuspended {
                    tool_call_id: waiting.tool_call_id.clone(),
                    tool: waiting.tool.clone(),
                    decision_id: waiting.decision_id.clone(),
                    args_sha256: waiting.args_sha256.clone(),
                    rule: waiting.rule,
                    drift: waiting.drift,
                },
            });
            self.waiting.push(waiting);
        }
        trace.push(Trace::RunEnded {
            run,
            reason: RunState::Suspended,
        });
        self.run = Some((run, RunState::Suspended));
        Outcome::Run(RunState::Suspended)
    }

    /// The child the parent's `subagent` call `call_id` starts with `call` in the current mode
    /// (its record `decided`, when a rule or an allowance let it run). Refused (an unknown
    /// type, one the mode may not start, an empty task): an error result, and no child. Else
    /// the child calls the model (offered what its type lists and the mode offers), makes its
    /// call, if it has one, by its rules (the mode's, with its type's on top: a refusal, a
    /// run, or a wait for the user), and answers: its answer is the call's result. Returns what
    /// waits when its call waits for the user: the parent's run suspends on it.
    fn start_child(
        &mut self,
        call_id: &str,
        call: &SubagentCall,
        decided: Option<Decided>,
        trace: &mut Vec<Trace>,
    ) -> Option<Waits> {
        let (agent_type, child) = match call {
            SubagentCall::Start { agent_type, child }
                if self.facts.may_start(self.mode, agent_type) =>
            {
                (agent_type, child)
            }
            _ => {
                trace.push(Trace::ToolEnded {
                    tool_call_id: call_id.to_owned(),
                    is_error: true,
                    result: ResultKind::Other,
                    decided,
                });
                return None;
            }
        };
        let mode = self.facts.id(self.mode).to_owned();
        let mut tools = self.facts.child_tools(self.mode, agent_type);
        tools.sort();
        trace.push(Trace::ChildModelCalled {
            mode: mode.clone(),
            tools: tools.clone(),
        });
        if let ChildStep::Calls(tool) = child {
            let scripted = ScriptedCall {
                id: self.next_call_id(),
                tool: tool.clone(),
                plan: None,
                path: None,
                task: None,
                ask: Ask::of_tool(tool),
                subagent: None,
            };
            self.script.push(Reply::Calls(vec![scripted.clone()]));
            let offered = tools.contains(tool);
            // `ask_user` asks the user already: an `ask` rule never makes it wait.
            let rule = self
                .facts
                .child_rule_for(self.mode, agent_type, tool)
                .filter(|(_, action)| !(tool == ASK_USER && action == "ask"));
            // The child has its parent's allowances, the approved plan's among them: its write
            // (no `path`: outside the plan's files) is bound as the parent's would be.
            let denied = rule.as_ref().is_some_and(|(_, action)| action == "deny");
            let bound = self.plan_bound(tool, None).filter(|_| !denied);
            let waits = match (&bound, &rule) {
                (Some(Bound::Drift), _) => true,
                (Some(Bound::Refused), _) => false,
                (_, Some((_, action))) => action == "ask",
                (Some(Bound::Inside(_)), None) => false,
                (None, None) => {
                    self.facts
                        .child_requires_approval(self.mode, agent_type, tool)
                        && self.allowance_for(tool, None).is_none()
                }
            };
            let drift = bound == Some(Bound::Drift);
            let origin = ChildOrigin {
                agent_type: agent_type.clone(),
                parent_call_id: call_id.to_owned(),
            };
            if offered && waits {
                return Some(Waits {
                    tool_call_id: scripted.id.clone(),
                    tool: tool.clone(),
                    args_sha256: scripted.args_sha256(),
                    rule: rule.filter(|_| !drift).map(|(n, _)| n),
                    drift,
                    asks: None,
                    child: Some(origin),
                    starts: None,
                });
            }
            let denied = denied || bound == Some(Bound::Refused);
            if offered && !denied {
                trace.push(Trace::ChildToolRan {
                    tool: tool.clone(),
                    mode: mode.clone(),
                    resumed: false,
                });
                if let Some(ask) = scripted.ask {
                    return Some(Waits {
                        tool_call_id: scripted.id.clone(),
                        tool: tool.clone(),
                        args_sha256: ask.payload_sha256(),
                        rule: None,
                        drift: false,
                        asks: Some(ask),
                        child: Some(origin),
                        starts: None,
                    });
                }
            }
            // Refused, denied or run: the child reads the result and answers.
            trace.push(Trace::ChildModelCalled { mode, tools });
        }
        self.child_answers(call_id, agent_type, decided, trace);
        None
    }

    /// The child of the parent's call `call_id` answers: its final text is the call's result.
    fn child_answers(
        &mut self,
        call_id: &str,
        agent_type: &str,
        decided: Option<Decided>,
        trace: &mut Vec<Trace>,
    ) {
        self.script.push(Reply::Text(CHILD_ANSWER.to_owned()));
        trace.push(Trace::SubagentEnded {
            tool_call_id: call_id.to_owned(),
            agent_type: agent_type.to_owned(),
            outcome: SubagentOutcome::Completed,
        });
        trace.push(Trace::ToolEnded {
            tool_call_id: call_id.to_owned(),
            is_error: false,
            result: ResultKind::SubagentAnswer,
            decided,
        });
    }

    fn suspend(
        &mut self,
        run: usize,
        tool_call_id: String,
        k: u8,
        trace: &mut Vec<Trace>,
    ) -> Outcome {
        self.decisions += 1;
        // Rule 3: the hand-over targets are fixed now, at submit time.
        let target = self.facts.transition_target(self.mode);
        let targets = self.facts.transition_targets(self.mode);
        let sha256 = plan_sha256(k);
        trace.push(Trace::Suspended {
            tool_call_id: tool_call_id.clone(),
            target: self.facts.id(target).to_owned(),
            targets: targets
                .iter()
                .map(|t| self.facts.id(*t).to_owned())
                .collect(),
            sha256: sha256.clone(),
        });
        trace.push(Trace::RunEnded {
            run,
            reason: RunState::Suspended,
        });
        self.pending = Some(PendingPlan {
            run,
            tool_call_id,
            target,
            targets,
            sha256,
            plan: k,
            decision_id: format!("decision_{}", self.decisions),
            deadline: self.deadline_from_now(),
        });
        self.run = Some((run, RunState::Suspended));
        Outcome::Run(RunState::Suspended)
    }

    /// Rules 7, 10, 11 and 12: a decision on what waits, the pending plan or the waiting tool
    /// call at a position. It is refused, and changes nothing, when its `sha256` is not what
    /// was shown (the plan's, or the call's `argsSha256`); for a plan, when it names a target
    /// the plan does not list or names one with a rejection, or carries an edit with a
    /// rejection or a blank one; for a tool call, when the call was decided already or it
    /// always allows on a rejection. Applied, a plan's decision goes on as
    /// [`ReferenceSession::decided_plan`] says, a tool call's as
    /// [`ReferenceSession::decided_call`] says.
    fn decide(
        &mut self,
        on: &Subject,
        action: DecisionAction,
        feedback: &Feedback,
        sha256: ShaChoice,
        trace: &mut Vec<Trace>,
    ) -> (Action, Vec<Reply>, Outcome) {
        // What the user was shown, and something else a stale pin names.
        let (shown, other): (String, &[u8]) = match on {
            Subject::Plan { .. } => match &self.pending {
                Some(pending) => (pending.sha256.clone(), b"a plan the user never saw"),
                None => return (Action::Nothing, Vec::new(), Outcome::NoDecision),
            },
            Subject::ToolCall { call, .. } | Subject::Question { call, .. } => {
                match self.waiting.get(*call) {
                    Some(waiting) => (waiting.args_sha256.clone(), b"{\"path\":\"other\"}"),
                    None => return (Action::Nothing, Vec::new(), Outcome::NoDecision),
                }
            }
        };
        let sha = match sha256 {
            ShaChoice::Omitted => None,
            ShaChoice::Matching => Some(shown.clone()),
            ShaChoice::MatchingUppercase => Some(shown.to_ascii_uppercase()),
            ShaChoice::Stale => Some(hex(&Sha256::digest(other))),
        };
        let feedback_text = match feedback {
            Feedback::Omitted => None,
            Feedback::Blank => Some("   ".to_owned()),
            Feedback::Text(text) => Some(text.clone()),
        };
        let stale = sha256 == ShaChoice::Stale;
        match on {
            Subject::Plan {
                json,
                revision,
                to,
                plan,
            } => {
                let Some(mut pending) = self.pending.clone() else {
                    return (Action::Nothing, Vec::new(), Outcome::NoDecision);
                };
                let to = to.as_deref();
                let host_action = if *json {
                    let mut data = json!({ "action": action.to_string() });
                    if let Some(f) = &feedback_text {
                        data["feedback"] = json!(f);
                    }
                    if let Some(s) = &sha {
                        data["sha256"] = json!(s);
                    }
                    if let Some(to) = to {
                        data["targetModeId"] = json!(to);
                    }
                    if let Some(plan) = plan {
                        data["plan"] = json!(plan.text());
                    }
                    Action::ResumeJson {
                        run: RunRef::Run(pending.run),
                        tool_call_id: pending.tool_call_id.clone(),
                        data,
                    }
                } else {
                    Action::Resume {
                        run: RunRef::Run(pending.run),
                        tool_call_id: pending.tool_call_id.clone(),
                        decision: Decision {
                            feedback: feedback_text,
                            sha256: sha,
                            to: to.map(str::to_owned),
                            plan: plan.map(EditedPlan::text),
                            ..Decision::new(action)
                        },
                    }
                };
                let refused = |r| (host_action.clone(), Vec::new(), Outcome::Refused(r));
                if stale {
                    // Rule 7: a different sha256 is refused and changes nothing.
                    return refused(Refusal::Sha256Mismatch);
                }
                if let Some(to) = to {
                    // Rule 10: an approval goes to a listed target only; a rejection names none.
                    let listed = pending.targets.iter().find(|t| self.facts.id(**t) == to);
                    match (action, listed) {
                        (DecisionAction::Approved, Some(t)) => pending.target = *t,
                        (DecisionAction::Approved, None) => {
                            return refused(Refusal::TargetNotAllowed);
                        }
                        (DecisionAction::Rejected | DecisionAction::Answered, _) => {
                            return refused(Refusal::MalformedDecision);
                        }
                    }
                }
                // Rule 11: an edit goes with an approval only, and obeys the limits of a plan.
                match (action, plan) {
                    (_, None) => {}
                    (DecisionAction::Rejected | DecisionAction::Answered, Some(_)) => {
                        return refused(Refusal::MalformedDecision);
                    }
                    (DecisionAction::Approved, Some(EditedPlan::Blank)) => {
                        return refused(Refusal::EditedPlan);
                    }
                    (DecisionAction::Approved, Some(EditedPlan::Text(_))) => {}
                }
                let edit = match plan {
                    Some(EditedPlan::Text(k)) => Some(*k),
                    _ => None,
                };
                let (replies, outcome) =
                    self.decided_plan(pending, action, feedback, *revision, edit, trace);
                (host_action, replies, outcome)
            }
            Subject::ToolCall {
                call,
                always_allow,
                scope,
                narrowed,
                by_id,
            } => {
                let Some(waiting) = self.waiting.get(*call).cloned() else {
                    return (Action::Nothing, Vec::new(), Outcome::NoDecision);
                };
                let decision = Decision {
                    action,
                    feedback: feedback_text,
                    sha256: sha,
                    decided_by: None,
                    to: None,
                    plan: None,
                    always_allow: *always_allow,
                    scope: *scope,
                    allow: narrowed.then(|| Box::new(AllowancePattern::path(NARROWING))),
                    comments: Vec::new(),
                    model: None,
                    answer: None,
                    steps: None,
                    via: None,
                };
                let host_action = waiting.host_action(*by_id, decision);
                let refused = |r| (host_action.clone(), Vec::new(), Outcome::Refused(r));
                if waiting.decided.is_some() {
                    return refused(Refusal::AlreadyDecided);
                }
                if waiting.asks.is_some() {
                    // A question is answered or declined (a plain rejection): never approved,
                    // and it gives no allowance.
                    if action != DecisionAction::Rejected
                        || *always_allow
                        || scope.is_some()
                        || *narrowed
                    {
                        return refused(Refusal::MalformedDecision);
                    }
                    if stale {
                        return refused(Refusal::Sha256Mismatch);
                    }
                    let (replies, outcome) =
                        self.decided_call(*call, action, feedback, None, trace);
                    return (host_action, replies, outcome);
                }
                // A scope and a pattern go with an "always allow" only.
                if !*always_allow && (scope.is_some() || *narrowed) {
                    return refused(Refusal::MalformedDecision);
                }
                if *always_allow && action == DecisionAction::Rejected {
                    return refused(Refusal::MalformedDecision);
                }
                // Rule 13: an allowance never covers what an `ask` rule asks about.
                if *always_allow && waiting.rule.is_some() {
                    return refused(Refusal::MalformedDecision);
                }
                if stale {
                    return refused(Refusal::Sha256Mismatch);
                }
                // Without a store nothing can keep a workspace allowance: the change is not
                // saved, so nothing changes.
                let scope = always_allow.then(|| scope.unwrap_or_default());
                if scope == Some(AllowanceScope::Workspace)
                    && self.facts.workspace_store() == WorkspaceStore::None
                {
                    return refused(Refusal::Store);
                }
                let pattern = narrowed.then(|| NARROWING.to_owned());
                let allowance = scope.map(|scope| (scope, pattern));
                let (replies, outcome) =
                    self.decided_call(*call, action, feedback, allowance, trace);
                (host_action, replies, outcome)
            }
            Subject::Question {
                call,
                answer,
                by_id,
            } => {
                let Some(waiting) = self.waiting.get(*call).cloned() else {
                    return (Action::Nothing, Vec::new(), Outcome::NoDecision);
                };
                if waiting.asks.is_none() && answer.is_none() && action != DecisionAction::Answered
                {
                    // No answer: a plain decision on a call waiting for approval.
                    let on = Subject::ToolCall {
                        call: *call,
                        always_allow: false,
                        scope: None,
                        narrowed: false,
                        by_id: *by_id,
                    };
                    return self.decide(&on, action, feedback, sha256, trace);
                }
                let decision = Decision {
                    feedback: feedback_text,
                    sha256: sha,
                    // An answer to a call that waits for approval is refused whatever it is.
                    answer: answer.map(|a| Box::new(a.value(waiting.asks.unwrap_or(Ask::Select)))),
                    ..Decision::new(action)
                };
                let host_action = waiting.host_action(*by_id, decision);
                let refused = |r| (host_action.clone(), Vec::new(), Outcome::Refused(r));
                if waiting.decided.is_some() {
                    return refused(Refusal::AlreadyDecided);
                }
                // An answer goes to a question only, with the answered action; a question is
                // answered (with an answer) or declined (a rejection without one).
                let well_formed = waiting.asks.is_some()
                    && matches!(
                        (action, answer),
                        (DecisionAction::Answered, Some(_)) | (DecisionAction::Rejected, None)
                    );
                if !well_formed {
                    return refused(Refusal::MalformedDecision);
                }
                if stale {
                    return refused(Refusal::Sha256Mismatch);
                }
                if let (Some(answer), Some(ask)) = (answer, waiting.asks)
                    && !answer.fits(ask)
                {
                    // It does not fit the answer schema: refused, the question still waits.
                    return refused(Refusal::InvalidAnswer);
                }
                let (replies, outcome) = self.decided_call(*call, action, feedback, None, trace);
                (host_action, replies, outcome)
            }
        }
    }

    /// Rule 12: the decision on the waiting tool call at position `index`, giving `allowance`
    /// (its scope and the path glob narrowing it) with an "always allow". While other calls
    /// wait, it is recorded and the run stays suspended; the last one carries the run on: the
    /// rejected calls' results (with their feedback), then the approved calls run in the
    /// model's order, then the model is called.
    fn decided_call(
        &mut self,
        index: usize,
        action: DecisionAction,
        feedback: &Feedback,
        allowance: Option<(AllowanceScope, Option<String>)>,
        trace: &mut Vec<Trace>,
    ) -> (Vec<Reply>, Outcome) {
        let Some(call) = self.waiting.get(index).cloned() else {
            return (Vec::new(), Outcome::NoDecision);
        };
        let has_feedback = matches!(feedback, Feedback::Text(t) if !t.trim().is_empty());
        // What an allowance no longer kept approved waits again (one revoked in the store before
        // a restart, one the store dropped after the decision that gave it).
        self.withdraw_unkept_approvals();
        self.waiting[index].decided = Some((action, has_feedback));
        if let Some((scope, pattern)) = allowance {
            let mode = self.facts.id(self.mode).to_owned();
            let id = match scope {
                // A decision never gives scope `plan` (`check` refuses it).
                AllowanceScope::Mode | AllowanceScope::Session | AllowanceScope::Plan => {
                    call.decision_id.clone()
                }
                AllowanceScope::Workspace => {
                    ModelAllowance::narrowed_workspace_id(&mode, &call.tool, pattern.as_deref())
                }
            };
            // The allowance approves the call it is given at, the one shown, and none of the
            // other calls that wait in the reply: each is asked about (trust round 4, M2). The
            // calls of later replies it covers run unasked.
            let kept = match scope {
                AllowanceScope::Mode | AllowanceScope::Session | AllowanceScope::Plan => {
                    Some(&mut self.allowances)
                }
                // A store that keeps none: the decision stands, the allowance allows nothing.
                AllowanceScope::Workspace => (self.facts.workspace_store()
                    == WorkspaceStore::Keeps)
                    .then_some(&mut self.workspace_allowances),
            };
            // One that allows what one of its scope allows already (the same mode, tool and
            // pattern) is not kept twice.
            if let Some(kept) = kept
                && !kept.iter().any(|a| {
                    a.scope == scope
                        && a.mode == mode
                        && a.tool == call.tool
                        && a.pattern == pattern
                })
            {
                kept.push(ModelAllowance {
                    scope,
                    mode,
                    tool: call.tool.clone(),
                    pattern,
                    id,
                });
            }
            self.refresh_allowed();
        }
        self.decided = Some((call.run, call.tool_call_id.clone(), false));
        if self.waiting.iter().any(|w| w.decided.is_none()) {
            return (Vec::new(), Outcome::Run(RunState::Suspended));
        }
        // Every call is decided: the run resumes (`agent_start` again, same run).
        let run = call.run;
        let waiting = std::mem::take(&mut self.waiting);
        let mode = self.facts.id(self.mode).to_owned();
        trace.push(Trace::RunStarted {
            run,
            mode: mode.clone(),
        });
        let decided = |w: &WaitingCall| {
            Some(Decided {
                sha256: w.args_sha256.clone(),
                approved_sha256: None,
                rule: w.rule,
            })
        };
        // The rejected calls and the declined questions get their results, in the model's
        // order; then each answer goes to its tool's `resume` step; then the approved calls run.
        // A child's decisions go back to the child, which carries on after the parent's calls.
        for w in waiting.iter().filter(|w| w.child.is_none()) {
            if let Some((DecisionAction::Rejected, with_feedback)) = w.decided {
                trace.push(Trace::ToolEnded {
                    tool_call_id: w.tool_call_id.clone(),
                    is_error: true,
                    result: match (w.asks.is_some(), with_feedback) {
                        (false, true) => ResultKind::ToolRejectedWithFeedback,
                        (false, false) => ResultKind::ToolRejected,
                        (true, true) => ResultKind::DeclinedWithFeedback,
                        (true, false) => ResultKind::Declined,
                    },
                    decided: decided(w),
                });
            }
        }
        for w in waiting.iter().filter(|w| w.child.is_none()) {
            if let Some((DecisionAction::Answered, _)) = w.decided {
                trace.push(Trace::ToolResumed {
                    tool_call_id: w.tool_call_id.clone(),
                    tool: w.tool.clone(),
                    mode: mode.clone(),
                });
            }
        }
        // The calls that wait again: a child an approved `subagent` call starts, or one that
        // carries on, whose call waits for the user.
        let mut again = Vec::new();
        for w in waiting.iter().filter(|w| w.child.is_none()) {
            if let Some((DecisionAction::Approved, _)) = w.decided {
                if let Some(starts) = &w.starts {
                    again.extend(self.start_child(&w.tool_call_id, starts, decided(w), trace));
                    continue;
                }
                trace.push(Trace::ToolRan {
                    tool_call_id: w.tool_call_id.clone(),
                    tool: w.tool.clone(),
                    mode: mode.clone(),
                    allowed_by: w.allowed_by.clone(),
                    rule: w.rule,
                    hooked: false,
                });
            }
        }
        // Each waiting child carries on with its decisions, in the model's order: its approved
        // call runs, its answered one resumes, a rejected one has its result; then it answers.
        let mut origins: Vec<&ChildOrigin> = Vec::new();
        for origin in waiting.iter().filter_map(|w| w.child.as_ref()) {
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        for origin in origins {
            for w in waiting.iter().filter(|w| w.child.as_ref() == Some(origin)) {
                let resumed = match w.decided {
                    Some((DecisionAction::Approved, _)) => false,
                    Some((DecisionAction::Answered, _)) => true,
                    _ => continue,
                };
                trace.push(Trace::ChildToolRan {
                    tool: w.tool.clone(),
                    mode: mode.clone(),
                    resumed,
                });
            }
            let mut tools = self.facts.child_tools(self.mode, &origin.agent_type);
            tools.sort();
            trace.push(Trace::ChildModelCalled {
                mode: mode.clone(),
                tools,
            });
            self.child_answers(&origin.parent_call_id, &origin.agent_type, None, trace);
        }
        if !again.is_empty() {
            let outcome = self.wait_on(run, again, trace);
            return (vec![Reply::Text(format!("done with run {run}"))], outcome);
        }
        // The decision starts a new drive: the step limit counts from zero again.
        let mut steps = 0;
        let outcome = self.call_model_then(run, &mut steps, Then::Text, trace);
        (vec![Reply::Text(format!("done with run {run}"))], outcome)
    }

    /// Rules 4, 5 and 11: the decision on the pending plan (approving the user's edit
    /// [`edited_plan_text`] `edit` instead, when there is one) and what the run does next.
    fn decided_plan(
        &mut self,
        pending: PendingPlan,
        action: DecisionAction,
        feedback: &Feedback,
        revision: Revision,
        edit: Option<u8>,
        trace: &mut Vec<Trace>,
    ) -> (Vec<Reply>, Outcome) {
        self.pending = None;
        self.decided = Some((pending.run, pending.tool_call_id.clone(), false));
        let run = pending.run;
        let has_feedback = matches!(feedback, Feedback::Text(t) if !t.trim().is_empty());
        let result = match (action, has_feedback) {
            (DecisionAction::Approved, _) => ResultKind::Approved,
            (DecisionAction::Rejected, true) => ResultKind::RejectedWithFeedback,
            (DecisionAction::Rejected, false) => ResultKind::Rejected,
            // A plan is never answered (the kit answers no suspension).
            (DecisionAction::Answered, _) => ResultKind::Rejected,
        };
        // The run resumes: `agent_start` again (same run), as Mastra's AgentController does.
        trace.push(Trace::RunStarted {
            run,
            mode: self.facts.id(self.mode).to_owned(),
        });
        // The record names the plan shown, and the edit approved instead of it.
        trace.push(Trace::ToolEnded {
            tool_call_id: pending.tool_call_id,
            is_error: false,
            result,
            decided: Some(Decided {
                sha256: pending.sha256.clone(),
                approved_sha256: edit.map(edited_plan_sha256),
                rule: None,
            }),
        });
        let text = Reply::Text(format!("done with run {run}"));
        // The decision starts a new drive: the step limit counts from zero again.
        let mut steps = 0;
        match result {
            ResultKind::Approved => {
                // The next mode receives the edit when there is one, else the plan shown.
                self.handed_due = Some(handed(&match edit {
                    Some(k) => edited_plan_text(k),
                    None => plan_text(pending.plan),
                }));
                // Into a mode that offers the task tools, the approved plan's numbered steps
                // become the list: a plan without any empties it.
                let offers_tasks = [TASK_WRITE, TASK_UPDATE, TASK_COMPLETE, TASK_CHECK]
                    .iter()
                    .any(|t| self.facts.offers(pending.target, t) == Some(true));
                let seeded = numbered_steps(&match edit {
                    Some(k) => edited_plan_text(k),
                    None => plan_text(pending.plan),
                });
                if offers_tasks {
                    self.tasks = seeded;
                }
                // The planning mode's `planScope` (the plan was submitted in the current mode).
                let policy = self.facts.plan_scope(self.mode);
                self.change_mode(pending.target, ModeChangeReason::PlanApproved, trace);
                // The approved text's files (the user's edit, which declares none, has its
                // own) become an allowance of scope `plan` for the target, in place of an
                // earlier plan's, by the planning mode's `planScope`: none under `off`.
                self.allowances.retain(|a| a.scope != AllowanceScope::Plan);
                if edit.is_none()
                    && plan_declares_files(pending.plan)
                    && policy != PlanScopePolicy::Off
                {
                    self.allowances.push(ModelAllowance {
                        scope: AllowanceScope::Plan,
                        mode: self.facts.id(pending.target).to_owned(),
                        tool: EVERY_WRITING_TOOL.to_owned(),
                        pattern: None,
                        id: pending.decision_id.clone(),
                    });
                    self.plan_enforces = policy == PlanScopePolicy::Enforce;
                }
                let outcome = self.call_model_then(run, &mut steps, Then::Text, trace);
                (vec![text], outcome)
            }
            ResultKind::RejectedWithFeedback if self.revisions >= self.facts.max_revisions() => {
                // One revision more than the run's limit: the run ends, without a model call.
                trace.push(Trace::RunEnded {
                    run,
                    reason: RunState::Failed,
                });
                self.run = Some((run, RunState::Failed));
                (Vec::new(), Outcome::Run(RunState::Failed))
            }
            ResultKind::RejectedWithFeedback => {
                self.revisions += 1;
                self.call_model(run, &mut steps, trace);
                match revision {
                    Revision::Text => (vec![text], self.end_run(run, Then::Text, trace)),
                    Revision::Resubmit(k) => {
                        let call = ScriptedCall {
                            id: self.next_call_id(),
                            tool: SUBMIT_PLAN.to_owned(),
                            plan: Some(PlanFile::Valid(k)),
                            path: None,
                            task: None,
                            ask: None,
                            subagent: None,
                        };
                        let replies = vec![Reply::Calls(vec![call.clone()]), text];
                        let outcome = match self.tool_calls_then(run, &[call], trace) {
                            Some(outcome) => outcome,
                            None => {
                                if std::mem::take(&mut self.hook_decided) {
                                    steps = 0;
                                }
                                self.call_model_then(run, &mut steps, Then::Text, trace)
                            }
                        };
                        (replies, outcome)
                    }
                }
            }
            ResultKind::Rejected
            | ResultKind::Other
            | ResultKind::ToolRejected
            | ResultKind::Denied
            | ResultKind::ToolRejectedWithFeedback
            | ResultKind::Expired
            | ResultKind::ApprovedNotRun
            | ResultKind::Declined
            | ResultKind::DeclinedWithFeedback
            | ResultKind::AnsweredNotResumed
            | ResultKind::SubagentAnswer
            | ResultKind::HookDenied
            | ResultKind::OutsidePlan => {
                trace.push(Trace::RunEnded {
                    run,
                    reason: RunState::Completed,
                });
                self.run = Some((run, RunState::Completed));
                (vec![text], Outcome::Run(RunState::Completed))
            }
        }
    }

    /// The approval prompt's rules: `y`/`yes` approves, `n`/`no` rejects, other text rejects
    /// with it as feedback; end of input, a blank line and a single word that only looks like a
    /// decision (`ok`, `approve`) decide nothing.
    fn answer(
        &mut self,
        answer: Option<&str>,
        trace: &mut Vec<Trace>,
    ) -> (Action, Vec<Reply>, Outcome) {
        let Some(pending) = self.pending.clone() else {
            return (Action::Nothing, Vec::new(), Outcome::NoDecision);
        };
        let Some((action, feedback)) = parse_answer(answer) else {
            return (Action::Nothing, Vec::new(), Outcome::NoDecision);
        };
        let decision = Decision {
            feedback: match &feedback {
                Feedback::Text(t) => Some(t.clone()),
                _ => None,
            },
            ..Decision::new(action)
        };
        let host_action = Action::Resume {
            run: RunRef::Run(pending.run),
            tool_call_id: pending.tool_call_id.clone(),
            decision,
        };
        let (replies, outcome) =
            self.decided_plan(pending, action, &feedback, Revision::Text, None, trace);
        (host_action, replies, outcome)
    }

    /// A strategy for the operations that make sense now, weighted towards the plan cycle.
    pub fn ops(&self) -> BoxedStrategy<Op> {
        // Every tool in every mode: offered or not, registered or not.
        let tools: Vec<String> = self
            .facts
            .tool_names()
            .into_iter()
            .filter(|t| self.facts.offers(self.mode, t).is_some())
            .collect();
        let ids: Vec<String> = self.facts.modes().iter().map(|m| m.id.clone()).collect();
        let plan_file = prop_oneof![
            6 => (0..PLAN_COUNT).prop_map(PlanFile::Valid),
            // Now and then the plan that declares its files.
            2 => Just(PlanFile::Valid(super::SCOPED_PLAN)),
            1 => Just(PlanFile::Missing),
            1 => Just(PlanFile::Empty),
            1 => Just(PlanFile::NotMarkdown),
            1 => Just(PlanFile::Outside),
        ];
        // A call of a tool that takes a path carries one (inside `src/` or not) three times in
        // four, else `{}`.
        let tool_call = |tools: Vec<String>| {
            let facts = self.facts.clone();
            let mode = self.mode;
            (proptest::sample::select(tools), 0..4usize).prop_map(move |(tool, k)| {
                match CallPath::ALL.get(k) {
                    Some(path) if facts.takes_path(mode, &tool) => Call::ToolAt(tool, *path),
                    _ => Call::Tool(tool),
                }
            })
        };
        // Where calls wait for approval, as often again a tool whose calls wait: the
        // allowances need waiting calls to be given on.
        let waiting_tools = self.facts.approval_tools(self.mode);
        let mut calls: Vec<(u32, BoxedStrategy<Call>)> = vec![
            (3, plan_file.prop_map(Call::SubmitPlan).boxed()),
            (2, tool_call(tools).boxed()),
        ];
        if !waiting_tools.is_empty() {
            calls.push((4, tool_call(waiting_tools).boxed()));
        }
        // Where the mode runs the task tools at once, a task call now and then.
        let task_calls: Vec<Call> = TaskCall::ALL
            .into_iter()
            .filter(|call| self.runs_task_tool(call.tool()))
            .map(Call::Task)
            .collect();
        if !task_calls.is_empty() {
            calls.push((2, proptest::sample::select(task_calls).boxed()));
        }
        // Where the mode offers `ask_user` or the kit's own suspending tool, a question now and
        // then (beside the other calls), in each of its shapes.
        let asks: Vec<Ask> = Ask::ALL
            .into_iter()
            .filter(|ask| self.facts.offers(self.mode, ask.tool()) == Some(true))
            .collect();
        if !asks.is_empty() {
            calls.push((
                2 + asks.len() as u32,
                proptest::sample::select(asks).prop_map(Call::Ask).boxed(),
            ));
        }
        let call = proptest::strategy::Union::new_weighted(calls).boxed();
        let then = prop_oneof![8 => Just(Then::Text), 1 => Just(Then::ModelFails)];
        // Where the mode offers `subagent`, one such call now and then, alone or before another
        // call (never two in a reply: the children of one reply run at once, and the kit's
        // one model would answer them in an order of the runtime's choosing).
        let subagent_calls = subagent_calls(&self.facts, self.mode);
        let subagent_message = (!subagent_calls.is_empty()).then(|| {
            (
                proptest::sample::select(subagent_calls),
                proptest::option::weighted(0.3, call.clone()),
                then.clone(),
            )
                .prop_map(|(subagent, other, then)| Op::Message {
                    calls: std::iter::once(Call::Subagent(subagent))
                        .chain(other)
                        .collect(),
                    then,
                })
        });
        let message = (
            prop_oneof![
                2 => Just(Vec::new()),
                5 => proptest::collection::vec(call.clone(), 1..=1),
                2 => proptest::collection::vec(call, 2..=3),
            ],
            then,
        )
            .prop_map(|(calls, then)| Op::Message { calls, then });
        let unknown_ids: Vec<String> = [
            "no-such-mode".to_owned(),
            String::new(),
            "plan mode".to_owned(),
            self.facts.id(self.mode).to_ascii_uppercase(),
            format!("{} ", self.facts.id(self.mode)),
        ]
        .into_iter()
        .filter(|id| self.facts.index_of(id).is_none())
        .collect();
        let mut choices: Vec<(u32, BoxedStrategy<Op>)> = vec![
            (6, message.boxed()),
            (
                3,
                proptest::sample::select(ids).prop_map(Op::Switch).boxed(),
            ),
            (
                1,
                Just(Op::Switch(self.facts.id(self.mode).to_owned())).boxed(),
            ),
            (1, Just(Op::Abort).boxed()),
            (1, Just(Op::DecideUnknownCall).boxed()),
            (1, Just(Op::DecideUnknownRun).boxed()),
            (1, malformed_data().prop_map(Op::Malformed).boxed()),
        ];
        if let Some(subagent_message) = subagent_message {
            choices.push((4, subagent_message.boxed()));
        }
        if !unknown_ids.is_empty() {
            choices.push((
                1,
                proptest::sample::select(unknown_ids)
                    .prop_map(Op::Switch)
                    .boxed(),
            ));
        }
        if let Some(pending) = &self.pending {
            let listed: Vec<String> = pending
                .targets
                .iter()
                .map(|t| self.facts.id(*t).to_owned())
                .collect();
            let mut any: Vec<String> = self.facts.modes().iter().map(|m| m.id.clone()).collect();
            any.push("no-such-mode".to_owned());
            choices.push((16, plan_decision_op(listed, any).boxed()));
            choices.push((4, answer_op().boxed()));
            choices.push((2, Just(Op::Abort).boxed()));
        }
        if !self.waiting.is_empty() {
            let narrowable = self
                .waiting
                .iter()
                .any(|w| self.facts.takes_path(self.mode, &w.tool));
            let kept = self.facts.workspace_store() == WorkspaceStore::Keeps;
            choices.push((
                16,
                tool_call_decision_op(self.waiting.len(), narrowable, kept).boxed(),
            ));
            choices.push((2, Just(Op::Abort).boxed()));
            if self.waiting.iter().any(|w| w.asks.is_some()) {
                choices.push((12, question_decision_op(self.waiting.len()).boxed()));
            }
        }
        if self.all_allowances().next().is_some() {
            let revoke = proptest::sample::select(vec![
                RevokeChoice::First,
                RevokeChoice::Last,
                RevokeChoice::Unknown,
            ]);
            choices.push((1, revoke.prop_map(Op::Revoke).boxed()));
        }
        if self.decided.is_some() {
            choices.push((1, Just(Op::DecideAgain).boxed()));
        }
        if self.restarts {
            choices.push((2, Just(Op::Restart).boxed()));
            choices.push((1, Just(Op::NewSession).boxed()));
        }
        if self.facts.has_deadlines() {
            // Time passing: to just before and to the deadline of what waits, or an hour.
            for (weight, op) in [
                (3, Op::Wait(Until::JustBefore)),
                (5, Op::Wait(Until::Deadline)),
                (1, Op::Wait(Until::AnHour)),
                (1, Op::ExpireIfDue),
            ] {
                if self.can_apply(&op) {
                    choices.push((weight, Just(op).boxed()));
                }
            }
        }
        proptest::strategy::Union::new_weighted(choices).boxed()
    }
}

/// The `subagent` calls the kit's model makes in `mode` where it offers the tool: for each
/// type, one whose child answers at once and one whose child calls each tool the kit calls
/// (`ask_user` among them); one naming no type; one with an empty task. A type the mode may
/// not start is refused.
pub(crate) fn subagent_calls(facts: &ConfigFacts, mode: usize) -> Vec<SubagentCall> {
    if facts.offers(mode, SUBAGENT) != Some(true) {
        return Vec::new();
    }
    let mut tools = facts.tool_names();
    if !tools.iter().any(|t| t == ASK_USER) {
        tools.push(ASK_USER.to_owned());
    }
    let mut calls = Vec::new();
    for kind in facts.subagent_types() {
        calls.push(SubagentCall::Start {
            agent_type: kind.id.clone(),
            child: ChildStep::Answers,
        });
        calls.extend(tools.iter().map(|tool| SubagentCall::Start {
            agent_type: kind.id.clone(),
            child: ChildStep::Calls(tool.clone()),
        }));
    }
    calls.push(SubagentCall::UnknownType);
    if let Some(kind) = facts.subagent_types().first() {
        calls.push(SubagentCall::EmptyTask(kind.id.clone()));
    }
    calls
}

/// What a typed answer decides: `y`/`yes` approves, `n`/`no` rejects, other text rejects with
/// it as feedback; `None` for end of input, a blank line and a single word that only looks like
/// a decision.
fn parse_answer(answer: Option<&str>) -> Option<(DecisionAction, Feedback)> {
    let trimmed = answer?.trim();
    match trimmed.to_ascii_lowercase().as_str() {
        "" | "ok" | "approve" | "lgtm" | "reject" => None,
        "y" | "yes" => Some((DecisionAction::Approved, Feedback::Omitted)),
        "n" | "no" => Some((DecisionAction::Rejected, Feedback::Omitted)),
        _ => Some((DecisionAction::Rejected, Feedback::Text(trimmed.to_owned()))),
    }
}

const UNKNOWN_RUN: &str = "no-such-run";
const UNKNOWN_CALL: &str = "no-such-call";
/// The id an [`RevokeChoice::Unknown`] revokes: no allowance has it.
const UNKNOWN_ALLOWANCE: &str = "no-such-allowance";

/// A decision's action: approve more often than reject.
fn action_choice() -> impl Strategy<Value = DecisionAction> {
    prop_oneof![
        3 => Just(DecisionAction::Approved),
        2 => Just(DecisionAction::Rejected),
    ]
}

/// A decision's feedback: omitted, blank, or one of `texts`.
fn feedback_choice(texts: Vec<&'static str>) -> impl Strategy<Value = Feedback> {
    prop_oneof![
        2 => Just(Feedback::Omitted),
        1 => Just(Feedback::Blank),
        2 => proptest::sample::select(texts).prop_map(|f| Feedback::Text(f.to_owned())),
    ]
}

/// A decision's `sha256`: omitted (weighted `omitted` against 4 for the others), matching (in
/// lower or upper case), or stale.
fn sha256_choice(omitted: u32) -> impl Strategy<Value = ShaChoice> {
    prop_oneof![
        omitted => Just(ShaChoice::Omitted),
        2 => Just(ShaChoice::Matching),
        1 => Just(ShaChoice::MatchingUppercase),
        1 => Just(ShaChoice::Stale),
    ]
}

/// A decision; its target (`to`) is mostly none, else one the plan lists (`listed`), else any
/// mode id or one no mode has (`all`).
fn plan_decision_op(listed: Vec<String>, all: Vec<String>) -> impl Strategy<Value = Op> {
    let feedback = feedback_choice(vec!["add tests", "split step 2", "  more detail \n"]);
    let sha256 = sha256_choice(3);
    let revision = prop_oneof![
        1 => Just(Revision::Text),
        1 => (0..PLAN_COUNT).prop_map(Revision::Resubmit),
    ];
    let to = prop_oneof![
        4 => Just(None),
        2 => proptest::sample::select(listed).prop_map(Some),
        1 => proptest::sample::select(all).prop_map(Some),
    ];
    let plan = prop_oneof![
        5 => Just(None),
        2 => (0..PLAN_COUNT).prop_map(|k| Some(EditedPlan::Text(k))),
        1 => Just(Some(EditedPlan::Blank)),
    ];
    (
        action_choice(),
        feedback,
        sha256,
        any::<bool>(),
        revision,
        to,
        plan,
    )
        .prop_map(
            |(action, feedback, sha256, json, revision, to, plan)| Op::Decide {
                on: Subject::Plan {
                    json,
                    revision,
                    to,
                    plan,
                },
                action,
                feedback,
                sha256,
            },
        )
}

/// A decision on one of `waiting` tool calls: mostly a plain approval or rejection, sometimes
/// "always allow", a pinned hash (stale at times), by decision id or by run and tool-call ids;
/// with `narrowable` (a waiting call's tool takes a path), an "always allow" narrowed to
/// [`NARROWING`] at times; with `kept` (a store that keeps workspace allowances), scope
/// `workspace` more often, as what it gives reaches restarts, new sessions and revocations.
fn tool_call_decision_op(
    waiting: usize,
    narrowable: bool,
    kept: bool,
) -> impl Strategy<Value = Op> {
    let feedback = feedback_choice(vec!["use another path", "not now"]);
    let sha256 = sha256_choice(4);
    // The scope, with "always allow" only: the default, or each scope named; narrowed or not.
    let mut allows = vec![
        (7, (false, None, false)),
        (1, (true, None, false)),
        (1, (true, Some(AllowanceScope::Mode), false)),
        (2, (true, Some(AllowanceScope::Session), false)),
        (
            if kept { 4 } else { 2 },
            (true, Some(AllowanceScope::Workspace), false),
        ),
    ];
    if narrowable {
        // Not of scope `workspace`: a store lists those in an order of its own, which decides
        // which of two allowances covering a call it names.
        allows.push((1, (true, Some(AllowanceScope::Session), true)));
    }
    let allow = proptest::strategy::Union::new_weighted(
        allows
            .into_iter()
            .map(|(weight, allow)| (weight, Just(allow).boxed()))
            .collect(),
    );
    (
        0..waiting.max(1),
        action_choice(),
        feedback,
        allow,
        sha256,
        any::<bool>(),
    )
        .prop_map(
            |(call, action, feedback, (always_allow, scope, narrowed), sha256, by_id)| Op::Decide {
                on: Subject::ToolCall {
                    call,
                    always_allow,
                    scope,
                    narrowed,
                    by_id,
                },
                action,
                feedback,
                sha256,
            },
        )
}

/// A decision on the waiting call at a position below `waiting`, as on a question: mostly an
/// answer that fits or a refusal to answer, sometimes an answer that does not fit, one of the
/// wrong type, an approval or an answer without its `answer`; pinned or not.
fn question_decision_op(waiting: usize) -> impl Strategy<Value = Op> {
    let feedback = feedback_choice(vec!["ask me later"]);
    let kind = prop_oneof![
        8 => Just((DecisionAction::Answered, Some(AnswerChoice::Fits))),
        1 => Just((DecisionAction::Answered, Some(AnswerChoice::NotAnOption))),
        1 => Just((DecisionAction::Answered, Some(AnswerChoice::WrongType))),
        3 => Just((DecisionAction::Rejected, None)),
        1 => Just((DecisionAction::Approved, None)),
        1 => Just((DecisionAction::Answered, None)),
    ];
    (
        0..waiting.max(1),
        kind,
        feedback,
        sha256_choice(4),
        any::<bool>(),
    )
        .prop_map(
            |(call, (action, answer), feedback, sha256, by_id)| Op::Decide {
                on: Subject::Question {
                    call,
                    answer,
                    by_id,
                },
                action,
                // Feedback goes with a refusal to answer.
                feedback: if action == DecisionAction::Rejected {
                    feedback
                } else {
                    Feedback::Omitted
                },
                sha256,
            },
        )
}

fn answer_op() -> impl Strategy<Value = Op> {
    let answers = vec![
        None,
        Some("y"),
        Some(" Yes\n"),
        Some("no"),
        Some("N"),
        Some(""),
        Some("  \n"),
        Some("add tests"),
        Some(" yes please "),
        Some("OK"),
        Some("approve"),
    ];
    proptest::sample::select(answers).prop_map(|a| Op::Answer(a.map(str::to_owned)))
}

fn malformed_data() -> impl Strategy<Value = Value> {
    proptest::sample::select(vec![
        json!({ "action": "approve" }),
        json!({ "action": "yes" }),
        json!({ "action": "Approved" }),
        json!({ "action": "approved", "extra": true }),
        json!({}),
        json!("approved"),
        json!(null),
        json!({ "action": "rejected", "feedback": 3 }),
        json!({ "action": "approved", "sha256": 5 }),
    ])
}

// Quorum ([`super::quorum`]): the reference's statement of the rule on one step.

/// `action` decided as identity `by` (`decidedBy`; in JSON resume data, its `decidedBy` key).
pub(crate) fn as_identity(action: &Action, by: &str) -> Action {
    let named = |decision: &Decision| Decision {
        decided_by: Some(by.to_owned()),
        ..decision.clone()
    };
    match action {
        Action::Resume {
            run,
            tool_call_id,
            decision,
        } => Action::Resume {
            run: run.clone(),
            tool_call_id: tool_call_id.clone(),
            decision: named(decision),
        },
        Action::Decide {
            decision_id,
            decision,
        } => Action::Decide {
            decision_id: decision_id.clone(),
            decision: named(decision),
        },
        Action::ResumeJson {
            run,
            tool_call_id,
            data,
        } => {
            let mut data = data.clone();
            if let Value::Object(map) = &mut data {
                map.insert("decidedBy".to_owned(), Value::String(by.to_owned()));
            }
            Action::ResumeJson {
                run: run.clone(),
                tool_call_id: tool_call_id.clone(),
                data,
            }
        }
        other => other.clone(),
    }
}

/// The decision `action` carries, when it decides (from JSON resume data, when that reads as
/// one).
fn decision_of(action: &Action) -> Option<Decision> {
    match action {
        Action::Resume { decision, .. } | Action::Decide { decision, .. } => Some(decision.clone()),
        Action::ResumeJson { data, .. } => serde_json::from_value(data.clone()).ok(),
        _ => None,
    }
}

/// How many approvals by distinct identities what `action` addresses needs, in `before` (the
/// session before the action): the pending plan's, or the waiting call's; 1 for anything else
/// (a question, a child's call, an unknown id).
fn quorum_needed(before: &ReferenceSession, action: &Action) -> u8 {
    let facts = before.facts();
    let mode = before.mode();
    let (run, id) = match action {
        Action::Resume {
            run, tool_call_id, ..
        }
        | Action::ResumeJson {
            run, tool_call_id, ..
        } => (Some(run), tool_call_id.as_str()),
        Action::Decide { decision_id, .. } => (None, decision_id.as_str()),
        _ => return 1,
    };
    let same_run = |ordinal: usize| run.is_none_or(|r| *r == RunRef::Run(ordinal));
    if let Some(plan) = before.pending()
        && run.is_some()
        && plan.tool_call_id == id
        && same_run(plan.run)
    {
        return facts.plan_quorum(mode);
    }
    before
        .waiting()
        .iter()
        .find(|w| {
            let by_id = if run.is_some() {
                w.tool_call_id == id
            } else {
                w.decision_id == id
            };
            by_id && same_run(w.run)
        })
        .filter(|w| w.asks.is_none() && w.child.is_none() && w.decided.is_none())
        .map_or(1, |w| facts.call_quorum(mode, &w.tool))
}

/// The quorum's say on one step, the reference's `before` it and what it predicts without a
/// quorum (`action`, `outcome`): `None` when no quorum applies (no approval, a quorum of 1, or
/// the decision refused anyway); else the refusal of an always-allow or an edited plan
/// (`Err`: nothing changes), or the approval's [`QuorumStep`] with `action` carrying approver
/// N (`Ok`).
pub(crate) fn quorum_ruled(
    before: &ReferenceSession,
    action: &Action,
    outcome: &Outcome,
) -> Option<Result<(QuorumStep, Action), Refusal>> {
    // The decision's own checks (its ids, its sha256, its target, its edit's text) come
    // first; a store that cannot keep a workspace allowance comes after the quorum.
    let store = *outcome == Outcome::Refused(Refusal::Store);
    if matches!(outcome, Outcome::Refused(_) | Outcome::NoDecision) && !store {
        return None;
    }
    let decision = decision_of(action)?;
    if decision.action != DecisionAction::Approved {
        // A rejection by any one rejects: as without a quorum.
        return None;
    }
    let needed = quorum_needed(before, action);
    if needed <= 1 {
        return None;
    }
    if decision.always_allow || decision.plan.is_some() {
        return Some(Err(Refusal::Quorum));
    }
    if store {
        return None;
    }
    Some(Ok((
        QuorumStep { needed },
        as_identity(action, &approver(needed)),
    )))
}

// An approved plan's files (issue 40): the one plan that declares them, and how they bind a
// write in the mode the plan hands over to.

/// The one file the plan that declares its files declares ([`SCOPED_PLAN`]): where
/// [`CallPath::Src`] leads, so a kit write there lies inside them and every other one outside.
pub const PLAN_FILES: &str = "src/a.txt";

/// The number of the kit's one valid plan file that declares its files: a `## Files` section
/// naming [`PLAN_FILES`]. It comes after the ordinary plans (`0..PLAN_COUNT`), which declare
/// none; [`Op::submit_scoped`] submits it.
pub const SCOPED_PLAN: u8 = PLAN_COUNT;

/// Whether valid plan file `k` declares its files: only [`SCOPED_PLAN`] does; the others have
/// no `## Files` section and bind nothing once approved.
///
/// # Examples
/// ```
/// use agent_controller::testing::{SCOPED_PLAN, plan_declares_files, plan_text};
/// assert!(plan_declares_files(SCOPED_PLAN) && plan_text(SCOPED_PLAN).contains("## Files"));
/// assert!(!plan_declares_files(1) && !plan_text(1).contains("## Files"));
/// ```
pub fn plan_declares_files(k: u8) -> bool {
    k == SCOPED_PLAN
}

/// The `## Files` section that ends plan file `k` (empty where it declares none): its one item
/// names [`PLAN_FILES`] in a code span, with prose after it, which binds nothing.
pub(super) fn files_section(k: u8) -> String {
    if plan_declares_files(k) {
        format!("\n## Files\n\n- `{PLAN_FILES}` — the file the kit writes\n")
    } else {
        String::new()
    }
}

/// Whether plan file `k` is one a harness provides: an ordinary one or [`SCOPED_PLAN`].
pub(super) fn is_plan_file(k: u8) -> bool {
    k < PLAN_COUNT || plan_declares_files(k)
}

/// How the files of the plan approved for the current mode bind one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Bound {
    /// Every path it writes lies inside the files: the plan's allowance (this id) stands in
    /// for `requireApproval`, as any allowance does.
    Inside(String),
    /// Outside them, under `planScope = "ask"`: it waits for approval as drift, whatever else
    /// would let it run.
    Drift,
    /// Outside them, under `planScope = "enforce"`: refused unasked.
    Refused,
}

/// How the plan's allowance `grant` (its id; `None`: no plan binds the current mode) binds a
/// call of `tool` with `path`, `enforces` under `planScope = "enforce"`: `None` where nothing
/// binds it or the tool writes nothing. A write lies inside the files when its tool writes the
/// file at its `path` ([`ConfigFacts::path_writers`]) and that path leads to [`PLAN_FILES`];
/// any other write (no `path`, a tool that says nothing of where it writes) is outside.
pub(super) fn bound(
    facts: &ConfigFacts,
    grant: Option<&str>,
    enforces: bool,
    tool: &str,
    path: Option<CallPath>,
) -> Option<Bound> {
    let grant = grant?;
    if !facts.writing_tools().iter().any(|t| t == tool) {
        return None;
    }
    let inside =
        facts.path_writers().iter().any(|t| t == tool) && path.is_some_and(CallPath::in_plan_files);
    Some(match (inside, enforces) {
        (true, _) => Bound::Inside(grant.to_owned()),
        (false, false) => Bound::Drift,
        (false, true) => Bound::Refused,
    })
}

/// Whether an approved plan's files bind the current mode of `reference` (an allowance of
/// scope `plan` in force there).
pub(super) fn scoped(reference: &ReferenceSession) -> bool {
    let mode = reference.facts().id(reference.mode());
    reference
        .allowances()
        .iter()
        .any(|a| a.scope == AllowanceScope::Plan && a.mode == mode)
}

/// Whether a call of `tool` in `at` is one the reference model leaves out: a tool that
/// suspends to ask ([`super::Ask::of_tool`]: the kit's confirmation tool) and writes, while an
/// approved plan's files bind the mode. It would wait as drift, and once approved run and
/// suspend again, which the reference does not follow; neither the walk nor the random cases
/// make such a call.
pub(super) fn unmodelled_call(at: &ReferenceSession, tool: &str) -> bool {
    super::Ask::of_tool(tool).is_some()
        && at.facts().writing_tools().iter().any(|t| t == tool)
        && scoped(at)
}
