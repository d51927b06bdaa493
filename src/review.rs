//! Reviewers: a model or a command a mode sends its plans (and, with `reviewToolCalls`, its
//! waiting tool calls) to before a person is asked, the automatic first reviewer of a reviewer
//! chain (openai/codex#21975).
//!
//! A `[[reviewers]]` entry of the config has an `id` and either a `command` (an argv list, run
//! as a `[[hooks]]` command is: `command::CommandReviewer`, feature `command-hooks`) or a
//! `model` (`"anthropic/..."`, `"openai/..."`, built by the controller's model chooser, with
//! `instructions`: `crate::model::reviewer::ModelReviewer`). A mode's `reviewBy = "ID"` names
//! it. A host may register any [`Reviewer`] under an id with
//! [`crate::controller::AgentControllerBuilder::reviewer`] (it takes the place of a config
//! entry with the same id).
//!
//! The reviewer sees what the approver would see ([`ReviewRequest`]: the plan and its sha256,
//! or the tool call, its arguments and their sha256; with the session, run, mode and
//! workspace) and answers one JSON object, `{"decision": "approve" | "reject" | "escalate",
//! "reason": "..."}` ([`ReviewVerdict`]). What the verdict does is the core's rule
//! (`src/machine/review.rs`), by the mode's `reviewerMay`:
//!
//! - `"advise"` (the default): a person is always asked, and sees the verdict and its reason
//!   beside the plan or the call (the pending decision's `review`,
//!   [`crate::event::SuspendPayload::review`], [`crate::event::ToolCallPayload::review`]).
//! - `"decide"`: an `approve` or a `reject` stands; an approval is pinned to the sha256 the
//!   reviewer was given (a reviewer never approves text it was not given), a rejection's reason
//!   is the model's feedback. `escalate` asks a person.
//!
//! Anything that is not one well-formed answer (an error, a panic, a timeout, a crash,
//! malformed JSON, two objects, a model's tool call) counts as `escalate`, saying why: logged,
//! and kept in the review ([`ReviewRecord::error`]). Every review is bounded in time where the
//! session asks for it, whoever answers (a command, a model, a reviewer a host registered): by
//! the entry's `timeout` ([`ReviewerConfig::timeout`], default 2m for a model and 10s for a
//! command, at most 10m); past it the
//! review is stopped and escalates, saying it timed out. The audit record of a decision a
//! reviewer took says so ([`crate::event::DecidedHow::Reviewer`]).
//!
//! # Examples
//! ```
//! use agent_controller::review::{ReviewError, ReviewRequest, ReviewVerdict, Reviewer};
//! use agent_controller::hook::HookSubject;
//!
//! /// Approves plans that name a test; asks a person about everything else.
//! struct WantsTests;
//!
//! #[agent_controller::async_trait]
//! impl Reviewer for WantsTests {
//!     async fn review(&self, request: &ReviewRequest) -> Result<ReviewVerdict, ReviewError> {
//!         Ok(match &request.subject {
//!             HookSubject::Plan { plan, .. } if plan.contains("test") => {
//!                 ReviewVerdict::approve("it names its tests")
//!             }
//!             _ => ReviewVerdict::escalate("no tests named"),
//!         })
//!     }
//! }
//! # let _ = WantsTests;
//! ```

use serde::{Deserialize, Serialize};

#[cfg(feature = "command-hooks")]
pub mod command;

/// What a reviewer is given: the same object a hook is ([`crate::hook::HookRequest`]: `on`,
/// `sessionId`, `runId`, `modeId`, `workspace`, then the plan's `path`, `title`, `plan` and
/// `sha256`, or the call's `toolCallId`, `toolName`, `args` and `argsSha256`), what the approver
/// would see. A command reviewer gets it as one JSON object on stdin; a model reviewer in its
/// prompt.
pub type ReviewRequest = crate::hook::HookRequest;

/// A reviewer's decision, as it answers it and records keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::Display)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ReviewDecision {
    /// Approve (stands under `reviewerMay = "decide"`).
    Approve,
    /// Reject, the reason as the model's feedback (stands under `reviewerMay = "decide"`).
    Reject,
    /// No verdict: a person decides. Also what a reviewer that failed answered.
    Escalate,
}

/// A reviewer's answer: its decision and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewVerdict {
    /// Approve, reject or escalate.
    pub decision: ReviewDecision,
    /// Why (for a rejection, the feedback for the model); `None` when it gave none.
    pub reason: Option<String>,
}

impl ReviewVerdict {
    /// An approval, for `reason`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::review::{ReviewDecision, ReviewVerdict};
    /// assert_eq!(ReviewVerdict::approve("fine").decision, ReviewDecision::Approve);
    /// ```
    pub fn approve(reason: impl Into<String>) -> Self {
        Self::of(ReviewDecision::Approve, reason)
    }

    /// A rejection: `reason` is the model's feedback.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::review::{ReviewDecision, ReviewVerdict};
    /// let verdict = ReviewVerdict::reject("tests are missing");
    /// assert_eq!(verdict.decision, ReviewDecision::Reject);
    /// assert_eq!(verdict.reason.as_deref(), Some("tests are missing"));
    /// ```
    pub fn reject(reason: impl Into<String>) -> Self {
        Self::of(ReviewDecision::Reject, reason)
    }

    /// No verdict, for `reason`: a person decides. A blank reason is none.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::review::{ReviewDecision, ReviewVerdict};
    /// let verdict = ReviewVerdict::escalate("  ");
    /// assert_eq!(verdict.decision, ReviewDecision::Escalate);
    /// assert_eq!(verdict.reason, None);
    /// ```
    pub fn escalate(reason: impl Into<String>) -> Self {
        Self::of(ReviewDecision::Escalate, reason)
    }

    fn of(decision: ReviewDecision, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self {
            decision,
            reason: (!reason.trim().is_empty()).then_some(reason),
        }
    }
}

/// Why a reviewer could not answer: counted as [`ReviewDecision::Escalate`], and logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ReviewError {
    message: String,
}

impl ReviewError {
    /// An error saying `message`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::review::ReviewError;
    /// let error = ReviewError::new("the reviewer timed out");
    /// assert_eq!(error.to_string(), "the reviewer timed out");
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// What went wrong.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::review::ReviewError;
    /// assert_eq!(ReviewError::new("no answer").message(), "no answer");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The default `timeout` of a `[[reviewers]]` entry with a `model`: two minutes, since a
/// model reads the whole plan and may think before it answers. A `command` reviewer's default is
/// [`crate::hook::DEFAULT_HOOK_TIMEOUT`] (10s); either may set its own, at most
/// [`crate::hook::MAX_HOOK_TIMEOUT`].
pub const DEFAULT_MODEL_REVIEW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// A reviewer: consulted on the plans (and, with `reviewToolCalls`, the waiting tool calls) of
/// the modes whose `reviewBy` names its id (module docs: [`crate::review`]). Register one with
/// [`crate::controller::AgentControllerBuilder::reviewer`].
///
/// Implement it with `#[agent_controller::async_trait]` on the `impl` block. `review` runs on the
/// session's runtime, in a task of its own: a panic in it is caught and counts as
/// [`ReviewDecision::Escalate`], and so does a review still running past the `timeout` of the
/// `[[reviewers]]` entry of its id ([`ReviewerConfig::timeout`]), which is then dropped.
#[async_trait::async_trait]
pub trait Reviewer: Send + Sync + 'static {
    /// The verdict on `request`.
    ///
    /// # Errors
    /// Any [`ReviewError`]: it counts as [`ReviewDecision::Escalate`] (a person decides), and
    /// is logged.
    async fn review(&self, request: &ReviewRequest) -> Result<ReviewVerdict, ReviewError>;
}

/// What a reviewer said about one plan or tool call: shown beside it while it waits
/// ([`crate::event::SuspendPayload::review`], [`crate::event::ToolCallPayload::review`]) and
/// kept in the decision's audit record ([`crate::event::DecidedRecord::review`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReviewRecord {
    /// The reviewer's id (`[[reviewers]]` `id`, or the id a host registered it under).
    pub reviewer: String,
    /// What it decided (`escalate` when it failed).
    pub decision: ReviewDecision,
    /// Its reason, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why it could not answer, when it failed (then `decision` is `escalate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The sha256 of what it was given (the plan's, or the call's `argsSha256`): the only text
    /// its approval can approve.
    pub sha256: String,
    /// In a decision's audit record: whether the reviewer's verdict is the decision
    /// (`reviewerMay = "decide"`); `false` while it waits, and when a person decided after
    /// seeing it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub decided: bool,
}

impl ReviewRecord {
    /// The record of reviewer `reviewer`'s answer `answer` on what has `sha256`: its verdict,
    /// or the error that counts as escalate.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::review::{ReviewDecision, ReviewError, ReviewRecord};
    /// let failed = ReviewRecord::of("r", "abc", Err(ReviewError::new("timed out")));
    /// assert_eq!(failed.decision, ReviewDecision::Escalate);
    /// assert_eq!(failed.error.as_deref(), Some("timed out"));
    /// ```
    pub fn of(reviewer: &str, sha256: &str, answer: Result<ReviewVerdict, ReviewError>) -> Self {
        let (decision, reason, error) = match answer {
            Ok(verdict) => (verdict.decision, verdict.reason, None),
            Err(e) => (ReviewDecision::Escalate, None, Some(e.message)),
        };
        Self {
            reviewer: reviewer.to_owned(),
            decision,
            reason,
            error,
            sha256: sha256.to_owned(),
            decided: false,
        }
    }

    /// The verdict and why, on one line, as hosts show it beside a plan or a call
    /// (`reviewer r: reject: no tests`; `reviewer r: escalate (failed: timed out)`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::review::{ReviewRecord, ReviewVerdict};
    /// let record = ReviewRecord::of("r", "abc", Ok(ReviewVerdict::reject("no tests")));
    /// assert_eq!(record.shown(), "reviewer r: reject: no tests");
    /// ```
    pub fn shown(&self) -> String {
        let why = match (&self.reason, &self.error) {
            (_, Some(error)) => format!(" (failed: {error})"),
            (Some(reason), None) => format!(": {reason}"),
            (None, None) => String::new(),
        };
        crate::display::neutralize_line(&format!(
            "reviewer {}: {}{why}",
            self.reviewer, self.decision
        ))
        .into_owned()
    }
}

/// What a mode's reviewer may do (`reviewerMay`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ReviewerMay {
    /// Advise: a person always decides, seeing the verdict (the default).
    #[default]
    Advise,
    /// Decide: an approval or a rejection stands.
    Decide,
}

/// A mode's review: which reviewer (`reviewBy`), what it may do (`reviewerMay`), and whether it
/// also reviews the mode's waiting tool calls (`reviewToolCalls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeReview {
    pub(crate) reviewer: String,
    pub(crate) may: ReviewerMay,
    pub(crate) tool_calls: bool,
}

impl ModeReview {
    /// The reviewer's id (`reviewBy`).
    pub fn reviewer(&self) -> &str {
        &self.reviewer
    }

    /// What it may do (`reviewerMay`).
    pub fn may(&self) -> ReviewerMay {
        self.may
    }

    /// Whether it reviews the mode's waiting tool calls too (`reviewToolCalls`).
    pub fn tool_calls(&self) -> bool {
        self.tool_calls
    }
}

/// What a `[[reviewers]]` entry runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReviewerKind {
    /// A program (`command`) run in the workspace as a `[[hooks]]` command is, within `timeout`.
    Command {
        /// The program and its arguments.
        command: Vec<String>,
        /// How long it may take before it is stopped and counts as escalate.
        timeout: std::time::Duration,
    },
    /// A model (`model`, as the CLI's `--model` names it), told `instructions`.
    Model {
        /// The model's id, `provider/name`.
        model: String,
        /// What it is told (`instructions`), before the request.
        instructions: String,
    },
}

/// One `[[reviewers]]` entry of a config, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewerConfig {
    pub(crate) id: String,
    pub(crate) kind: ReviewerKind,
    pub(crate) timeout: std::time::Duration,
}

impl ReviewerConfig {
    /// The reviewer's id, as a mode's `reviewBy` names it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What it runs: a command or a model.
    pub fn kind(&self) -> &ReviewerKind {
        &self.kind
    }

    /// How long a review by this id may take (`timeout`: default
    /// [`DEFAULT_MODEL_REVIEW_TIMEOUT`] for a `model`, [`crate::hook::DEFAULT_HOOK_TIMEOUT`]
    /// for a `command`, at most [`crate::hook::MAX_HOOK_TIMEOUT`]),
    /// whoever answers for the id: the entry's command or model, or a reviewer a host
    /// registered under it. Past it the review is stopped and counts as
    /// [`ReviewDecision::Escalate`].
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\nreviewBy = \"critic\"\n[[reviewers]]\nid = \"critic\"\nmodel = \"openai/gpt-4o\"\ntimeout = \"30s\"\n",
    ///     "modes.toml",
    /// )?;
    /// assert_eq!(graph.reviewers()[0].timeout().as_secs(), 30);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn timeout(&self) -> std::time::Duration {
        self.timeout
    }

    /// The paths in the workspace its command may run (as [`crate::hook::HookConfig::script_paths`]):
    /// protected from the model's writes like the config. Empty for a model reviewer.
    pub fn script_paths(&self, workspace: &std::path::Path) -> Vec<std::path::PathBuf> {
        match &self.kind {
            ReviewerKind::Command { command, .. } => command
                .iter()
                .filter(|part| !part.starts_with('-') && !part.is_empty())
                .filter(|part| std::path::Path::new(part).is_relative())
                .map(|part| workspace.join(part))
                .collect(),
            ReviewerKind::Model { .. } => Vec::new(),
        }
    }
}

/// The shape of an answer, as errors name it.
const SHAPE: &str =
    "a JSON object {\"decision\": \"approve\" | \"reject\" | \"escalate\", \"reason\": \"...\"}";

/// An answer as a reviewer writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
}

/// The verdict of a reviewer's whole answer `text`: exactly one JSON object with a known
/// `decision` (surrounding blanks, and one Markdown code fence around it, are allowed).
///
/// # Errors
/// Anything else, saying why: no answer, not JSON, not an object, two values, an unknown
/// decision or field.
pub(crate) fn parse_answer(text: &str) -> Result<ReviewVerdict, ReviewError> {
    let mut text = text.trim();
    if let Some(inner) = text.strip_prefix("```") {
        let inner = inner.strip_prefix("json").unwrap_or(inner);
        text = inner.strip_suffix("```").unwrap_or(inner).trim();
    }
    if text.is_empty() {
        return Err(ReviewError::new("it gave no answer"));
    }
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let answer = match stream.next() {
        Some(Ok(value @ serde_json::Value::Object(_))) => {
            serde_json::from_value::<Answer>(value)
                .map_err(|e| ReviewError::new(format!("its answer is not {SHAPE}: {e}")))?
        }
        Some(Ok(_)) => return Err(ReviewError::new(format!("its answer is not {SHAPE}"))),
        Some(Err(e)) => return Err(ReviewError::new(format!("its answer is not {SHAPE}: {e}"))),
        None => return Err(ReviewError::new("it gave no answer")),
    };
    if stream.next().is_some() {
        return Err(ReviewError::new(
            "it answered more than one JSON value: an answer is one object",
        ));
    }
    let reason = answer.reason.unwrap_or_default();
    match answer.decision.as_str() {
        "approve" => Ok(ReviewVerdict::approve(reason)),
        "reject" if reason.trim().is_empty() => Ok(ReviewVerdict::reject("no reason given")),
        "reject" => Ok(ReviewVerdict::reject(reason)),
        "escalate" => Ok(ReviewVerdict::escalate(reason)),
        other => Err(ReviewError::new(format!(
            "its decision `{}` is not approve, reject or escalate",
            crate::display::neutralize_line_within(other, 80)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_object_is_an_answer_and_anything_else_is_not() {
        assert_eq!(
            parse_answer(r#"{"decision":"reject","reason":"no"}"#),
            Ok(ReviewVerdict::reject("no"))
        );
        assert_eq!(
            parse_answer("```json\n{\"decision\":\"approve\"}\n```"),
            Ok(ReviewVerdict::approve(""))
        );
        assert_eq!(
            parse_answer(r#"{"decision":"reject"}"#),
            Ok(ReviewVerdict::reject("no reason given"))
        );
        for bad in [
            r#"{"decision":"approve"}{"decision":"approve"}"#,
            "approve",
            "",
            r#"{"decision":"allow"}"#,
            r#"{"decision":"approve","extra":1}"#,
            r#"["approve"]"#,
        ] {
            assert!(parse_answer(bad).is_err(), "{bad:?}");
        }
    }
}
