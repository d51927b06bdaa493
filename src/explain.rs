//! What would happen to a tool call, and why, without running it: the reasoning the session's
//! own ruling leaves behind ([`crate::AgentController::explain`], [`crate::Session::explain`],
//! `agent-controller explain`).
//!
//! A session rules every tool call of the model by one path (the driver's ruling, then the pure
//! core: `src/session/drive.rs`, `src/machine/ruling.rs`, `src/machine/scope.rs`, and
//! [`crate::mode::Mode::decide`]). Each step of that path writes down what it weighed and what
//! it found ([`Step`]); an explanation is those steps with the outcome they led to. There is no
//! second copy of a rule here: what `explain` says is what a session would do, in the same
//! workspace, under the same config, with the same allowances.
//!
//! The order of the steps is the order of the ruling: the mode offers the tool
//! (`availableTools`), the arguments fit the tool's input schema, each rule on the tool matches
//! or not, the deciding rule (or `requireApproval`, or the default), then an allowance in force
//! and an approved plan's files (`planScope`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// What would happen to a tool call: the outcome a rule test expects (`expect = "allow"`).
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
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[strum(parse_err_ty = crate::names::UnknownName, parse_err_fn = crate::names::UnknownName::of::<Self>)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(inline, schema_with = "crate::names::schema::<Outcome>")
)]
pub enum Outcome {
    /// The call runs without asking anyone.
    Allow,
    /// The call waits for a decision: a rule asks, `requireApproval` holds it, or it writes
    /// outside an approved plan's files.
    Ask,
    /// The call is refused and never runs; the model is told why.
    Deny,
    /// The mode does not offer the tool (`availableTools`): the model is not even shown it, and
    /// a call of it is refused.
    Unavailable,
}

impl Outcome {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What one step of the ruling weighed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Check {
    /// Whether the mode offers the tool (`availableTools`).
    AvailableTools,
    /// Whether the arguments are well formed and fit the tool's input schema.
    Arguments,
    /// Rule N of the mode (counted from 1): whether it matches, or that it decides.
    Rule(usize),
    /// The mode's `requireApproval`, for a call no rule matched.
    RequireApproval,
    /// The mode's default for a call no rule matched and nothing holds: it runs.
    Default,
    /// An allowance in force (an earlier "always allow").
    Allowance,
    /// The files of the plan approved for this mode (`planScope`).
    PlanScope,
    /// What the tool itself does (`ask_user` asks the user already).
    Tool,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::AvailableTools => f.write_str("availableTools"),
            Check::Arguments => f.write_str("arguments"),
            Check::Rule(n) => write!(f, "rule {n}"),
            Check::RequireApproval => f.write_str("requireApproval"),
            Check::Default => f.write_str("default"),
            Check::Allowance => f.write_str("allowance"),
            Check::PlanScope => f.write_str("planScope"),
            Check::Tool => f.write_str("tool"),
        }
    }
}

impl Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One step of a ruling: what it weighed, where the config writes it (a rule's `file:line:col`),
/// and what it found, in a sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// What was weighed.
    pub check: Check,
    /// Where the config writes it, as `file:line:col`: a rule's `tool` value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// What it found.
    pub finding: String,
}

impl Step {
    /// A step of `check` that found `finding`, at no place in the config.
    pub(crate) fn new(check: Check, finding: impl Into<String>) -> Self {
        Self {
            check,
            at: None,
            finding: finding.into(),
        }
    }
}

/// What the session would do with one tool call, and each step of why
/// ([`crate::AgentController::explain`]).
///
/// As JSON (`agent-controller explain --json`):
///
/// ```json
/// {"modeId": "build", "tool": "write_file", "outcome": "deny", "decidedBy": "rule 1",
///  "at": "modes.toml:5:5", "reason": "rule 1 of mode `build` (...) refuses ...",
///  "steps": [{"check": "availableTools", "finding": "..."}, ...]}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The mode the call is ruled in.
    pub mode_id: String,
    /// The tool called.
    pub tool: String,
    /// What would happen.
    pub outcome: Outcome,
    /// What decided: the last step that changed the outcome.
    pub decided_by: Check,
    /// Where the config writes what decided, when a rule did (`file:line:col`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Why, in a sentence (the model reads the same for a refusal).
    pub reason: String,
    /// Each step of the ruling, in order.
    pub steps: Vec<Step>,
}

impl fmt::Display for Explanation {
    /// The explanation for a reader: the outcome and why, then each step, each line through
    /// [`crate::display::neutralize_line`] (a rule's pattern and a model's value may hold
    /// anything).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::display::neutralize_line;
        let verdict = match self.outcome {
            Outcome::Allow => "allowed",
            Outcome::Ask => "asks (would wait for a decision)",
            Outcome::Deny => "refused",
            Outcome::Unavailable => "not offered",
        };
        let at = self
            .at
            .as_deref()
            .map(|at| format!(" at {}", neutralize_line(at)))
            .unwrap_or_default();
        writeln!(
            f,
            "{}: {verdict}, by {}{at}",
            neutralize_line(&self.tool),
            self.decided_by
        )?;
        writeln!(f, "  {}", neutralize_line(&self.reason))?;
        writeln!(f, "steps:")?;
        for (i, step) in self.steps.iter().enumerate() {
            let at = step
                .at
                .as_deref()
                .map(|at| format!(" ({})", neutralize_line(at)))
                .unwrap_or_default();
            writeln!(
                f,
                "  {}. {}{at}: {}",
                i + 1,
                step.check,
                neutralize_line(&step.finding)
            )?;
        }
        Ok(())
    }
}

/// Why a call could not be explained: it would not reach the ruling at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExplainError {
    /// The mode is unknown, or the controller's workspace cannot be used.
    #[error(transparent)]
    Session(#[from] crate::SessionError),
    /// No tool of this name is known to the controller or offered by the mode.
    #[error("unknown tool `{tool}`: the controller has no tool of this name{hint}")]
    UnknownTool {
        /// The tool named.
        tool: String,
        /// A suggestion (`: did you mean ...`), or empty.
        hint: String,
    },
    /// The arguments are not well formed, or do not fit the tool's input schema: the session
    /// would refuse the call before any rule applies.
    #[error("the arguments of `{tool}` are refused before any rule applies: {reason}")]
    Arguments {
        /// The tool called.
        tool: String,
        /// Why, as the model would be told.
        reason: String,
    },
}

/// A rule test of the config (`[[tests]]`): a call, the mode it is made in, and what that mode
/// must do with it. `check` and `verify` run each ([`crate::AgentController::rule_test_errors`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleTest {
    /// Its number among the config's tests, from 1.
    pub number: usize,
    /// The mode the call is made in.
    pub mode_id: String,
    /// The tool called.
    pub tool: String,
    /// The call's arguments (an object).
    pub args: serde_json::Value,
    /// What the mode must do with it.
    pub expect: Outcome,
    /// The `tool` value's line, column and snippet.
    pub(crate) tool_at: (usize, usize, String),
    /// The `expect` value's line, column and snippet: where a failing test is reported.
    pub(crate) expect_at: (usize, usize, String),
}

impl RuleTest {
    /// The line and column (1-based) of its `expect` value, where a failure is reported.
    pub fn location(&self) -> (usize, usize) {
        (self.expect_at.0, self.expect_at.1)
    }
}
