//! Mode configuration: TOML text in, a validated [`ModeGraph`] out.
//!
//! Parsing happens in two layers. Raw serde structs (`deny_unknown_fields`, camelCase keys, every
//! semantic field wrapped in [`toml::Spanned`]) catch syntax, unknown keys and wrong types; then a
//! validation pass turns them into a [`ModeGraph`] and reports graph errors (duplicate ids, unknown
//! or self targets, conflicting defaults) at the line and column of the offending text.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::value::SeqAccessDeserializer;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::deadline::ApprovalTimeout;
use crate::hint::{did_you_mean, edit_distance};
use crate::mode::{Mode, ModeGraph, ModeId, RequireApproval, ToolRef};
use crate::subagent::SUBAGENT;
use crate::tool::fs::PLAN_WRITING_TOOLS;
use crate::tool::{SUBMIT_PLAN, ToolAccess, ToolRegistry};
use owner::Owner;

mod builder;
mod hooks;
mod layers;
mod mcp;
mod on_timeout;
mod owner;
mod plan_scope;
mod rule_tests;
mod rules;
#[cfg(feature = "schema")]
pub(crate) mod schema;
mod subagents;

pub use self::builder::{BUILDER_ORIGIN, ModeBuilder, ModeGraphBuilder};
pub use self::layers::{
    ConfigSources, DEFAULT_MANAGED_CONFIG, LOCAL_CONFIG_NAME, Layer, LayerKind, Layers,
    MANAGED_CONFIG_ENV, ManagedWatch,
};

#[cfg(feature = "schema")]
pub use self::schema::{schema, schema_json};

/// The plans directory used when a config does not set `plansDir`, relative to the workspace.
pub const DEFAULT_PLANS_DIR: &str = ".agent/plans";

/// What kind of problem a [`ConfigError`] reports; callers match on this, users read the message.
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
    schemars(inline, schema_with = "crate::names::schema::<ConfigErrorKind>")
)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The file could not be read.
    Io,
    /// The text is not valid TOML.
    Syntax,
    /// A key the format does not define (for example `transitionTo` for `transitionsTo`).
    UnknownField,
    /// A value of the wrong type (for example a list where a mode id is expected).
    InvalidType,
    /// A required key is missing (for example a mode without `id`).
    MissingField,
    /// The file defines no `[[modes]]` at all.
    NoModes,
    /// A mode id is empty or uses characters other than ASCII letters, digits, `-` and `_`.
    InvalidId,
    /// Two modes share an id.
    DuplicateId,
    /// A mode's `transitionsTo` names the mode itself.
    SelfTransition,
    /// A mode's `transitionsTo` names a mode that does not exist (ids are case-sensitive).
    UnknownTarget,
    /// A mode's `transitionsTo` list names the same mode twice.
    DuplicateTarget,
    /// A mode's `availableTools` or `requireApproval` list names the same tool twice.
    DuplicateTool,
    /// A mode's `transitionsTo` is an empty list: it must name at least one mode.
    EmptyTargets,
    /// `defaultModeId` names a mode that does not exist.
    UnknownDefaultModeId,
    /// More than one mode is marked `default = true`.
    MultipleDefaults,
    /// `defaultModeId` names a different mode than the one marked `default = true`.
    ConflictingDefault,
    /// `availableTools` names a tool the controller has no implementation for.
    UnknownTool,
    /// A mode sets `transitionsTo` but its `availableTools` leaves out `submit_plan`, so it could
    /// never hand over.
    TargetWithoutSubmitPlan,
    /// A planning mode lists `submit_plan`, sets no `transitionsTo` and is itself the default
    /// mode, so approving its plan would hand over to itself.
    SelfHandover,
    /// A warning, not an error ([`warnings`]): a planning mode offers no tool that can write a
    /// plan file, so a real model there cannot author a plan.
    NoPlanWriter,
    /// A warning, not an error ([`warnings_with_tools`]): a planning mode lists a tool that
    /// writes ([`crate::tool::ToolAccess::Writes`]) in its `availableTools`, so the tool runs before
    /// any plan is approved.
    PlanningModeWrites,
    /// `plansDir` is empty, absolute, or leaves the workspace (`..`).
    InvalidPlansDir,
    /// The file is not valid UTF-8 (the location is the first bad byte).
    NotUtf8,
    /// A mode's `requireApproval` lists a tool the mode does not offer (not in its
    /// `availableTools`), so the rule could never apply. A warning ([`warnings_of`]) for a
    /// planning mode without `availableTools` and a tool that writes, which it does not
    /// offer.
    ApprovalToolNotOffered,
    /// A mode's `requireApproval` lists `submit_plan`, whose plan always waits for a decision.
    ApprovalOfSubmitPlan,
    /// A mode's `approvalTimeout` is not a duration (`"soon"`, `"-5m"`), is zero, or is
    /// longer than [`crate::deadline::MAX_APPROVAL_TIMEOUT`].
    InvalidApprovalTimeout,
    /// Two modes share a display `name` (compared without case; a mode without one is
    /// named by its id), so the user could not tell them apart at the prompt.
    DuplicateName,
    /// A mode's `name` is empty or only white space: the user could not see which mode
    /// they pick.
    EmptyName,
    /// A warning, not an error ([`warnings_with_tools`]): a mode's `metadata` holds a key
    /// the mode format defines (`requireApproval`, `availableTools`, ...), which there is
    /// free data for hosts and has no effect.
    KnownKeyInMetadata,
    /// A mode's `onTimeout` is not `reject` or `abort` (a deadline never approves), or is
    /// set without `approvalTimeout`.
    InvalidOnTimeout,
    /// A mode's rule is malformed: two patterns, a `glob` or `regex` without `arg`, an
    /// `arg` without a pattern, or a rule on `submit_plan` ([`crate::rules`]); or a subagent
    /// type's rule `allow`s, which would widen what its parent's mode allows.
    InvalidRule,
    /// A rule's `path`, `glob` or `regex` does not compile.
    InvalidPattern,
    /// A rule is on a tool its mode does not offer (not in its `availableTools`), so it
    /// could never apply. A warning ([`warnings_of`]) for a planning mode without
    /// `availableTools` and a tool that writes, which it does not offer.
    RuleToolNotOffered,
    /// A rule reads an argument its tool's input schema does not declare.
    UnknownArgument,
    /// A rule can never decide a call: another rule matches every call it matches and wins
    /// (a stronger action, or the same action listed first).
    ShadowedRule,
    /// A warning, not an error ([`warnings_with_tools`]): a path rule on an MCP server's
    /// `SERVER__*` wildcard reads an argument that some of the server's tools do not
    /// declare (their paths go by another name, `paths` or `source`). A `deny` or `ask`
    /// rule then matches every call of such a tool (its path is in doubt); an `allow` rule
    /// never does ([`crate::rules`]).
    WildcardRuleWithoutArg,
    /// A warning, not an error ([`workspace_warnings`]): the plans folder holds files that
    /// are not plans (source, for example), which the plan tools could then change.
    PlansDirNotDedicated,
    /// A mode's `subagents` list names a type no `[[subagents]]` entry has, or names one
    /// twice.
    UnknownSubagent,
    /// An `[[mcpServers]]` entry is not valid: a bad id, neither or both of `command` and
    /// `url`, a URL that is not http(s), a bad `timeout`.
    InvalidMcpServer,
    /// Two `[[mcpServers]]` entries share an id.
    DuplicateMcpServer,
    /// A mode lists `SERVER__TOOL` (or `SERVER__*`) but no `[[mcpServers]]` entry has
    /// that id.
    UnknownMcpServer,
    /// A mode lists an MCP tool name that no model provider accepts as a tool name.
    InvalidMcpToolName,
    /// A planning mode lists the `SERVER__*` wildcard of a server that is not `trusted`:
    /// a planning mode offers such a server's tools only by name.
    UntrustedWildcard,
    /// A mode's `planScope` is not `ask`, `enforce` or `off`, or is set on a mode that plans
    /// nothing (no plan of it could declare a scope).
    InvalidPlanScope,
    /// A `[[tests]]` entry is not valid: an unknown mode or tool, no tool, args that are not
    /// a table ([`crate::explain::RuleTest`]).
    InvalidRuleTest,
    /// A `[[tests]]` entry fails: the mode does with its call something else than it
    /// expects ([`crate::AgentController::rule_test_errors`]).
    FailedRuleTest,
    /// A `[[hooks]]` entry is not valid: no or an empty `command`, no or a bad `on`, a mode in
    /// `modes` that does not exist, a bad or too long `timeout`; or the build runs no command
    /// hooks (feature `command-hooks`).
    InvalidHook,
    /// A `[[reviewers]]` entry is not valid (a bad or duplicate id, neither or both of
    /// `command` and `model`), or a mode's `reviewerMay` or `reviewToolCalls` is bad or set
    /// without `reviewBy`.
    InvalidReviewer,
    /// A mode's `reviewBy` names a reviewer no `[[reviewers]]` entry has.
    UnknownReviewer,
    /// A mode's `approvers` is not a number from 1 to 16.
    InvalidApprovers,
    /// A warning, not an error ([`warnings_of`]): the config asks for what this version checks
    /// but does not enforce yet (reviewers, `reviewBy`, `approvers` above 1).
    NotEnforced,
    /// Two config layers ([`ConfigSources`]) give one key values of different types (a string in
    /// one, a list in another): they cannot be merged.
    LayerConflict,
    /// A warning, not an error ([`Layers::warnings`]): a lower layer sets a mode's `rules` or
    /// `requireApproval`, which the managed file sets too: the managed value stands.
    ManagedOverride,
}

impl ConfigErrorKind {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Largest config file read, in bytes (4 MiB).
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// A 1-based line and column in a config file (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// Line number, starting at 1.
    pub line: usize,
    /// Column number, starting at 1, in characters.
    pub column: usize,
}

/// A config that cannot be used: what is wrong, and where (`file:line:col` plus the source line).
///
/// Rendered as `origin:line:col: message`, followed by the offending source line and a caret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    origin: String,
    location: Option<Location>,
    message: String,
    snippet: String,
}

impl ConfigError {
    /// The kind of problem, for callers that want to match on it.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{self, ConfigErrorKind};
    /// let error = config::parse("[[modes]]\nid = \"build\"\ntransitionTo = \"plan\"\n", "modes.toml").unwrap_err();
    /// assert_eq!(error.kind(), ConfigErrorKind::UnknownField);
    /// assert_eq!(error.kind().to_string(), "unknown_field");
    /// ```
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// Where the problem is, or `None` for errors that have no place in the text (an I/O error).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{self, Location};
    /// let error = config::parse("[[modes]]\nid = \"build\"\ntransitionTo = \"plan\"\n", "modes.toml").unwrap_err();
    /// assert_eq!(error.location(), Some(Location { line: 3, column: 1 }));
    /// ```
    pub fn location(&self) -> Option<Location> {
        self.location
    }

    /// The file name (or other origin label) the config came from.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config;
    /// let error = config::parse("[[modes]]\n", "config/modes.toml").unwrap_err();
    /// assert_eq!(error.origin(), "config/modes.toml");
    /// ```
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The message alone, without location or snippet.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config;
    /// let error = config::parse("[[modes]]\nid = \"Build Mode\"\n", "modes.toml").unwrap_err();
    /// assert!(!error.message().contains("modes.toml"), "the message alone");
    /// assert!(error.to_string().contains("modes.toml"), "Display adds the place and a snippet");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// An error with no place in any text (a graph built in code).
    pub(crate) fn without_position(kind: ConfigErrorKind, message: String) -> Self {
        Self {
            kind,
            origin: BUILDER_ORIGIN.to_owned(),
            location: None,
            message,
            snippet: String::new(),
        }
    }

    /// The same error without location and snippet, for a graph built in code.
    pub(crate) fn stripped(self) -> Self {
        Self {
            location: None,
            snippet: String::new(),
            ..self
        }
    }

    fn io(origin: &str, message: String) -> Self {
        Self {
            kind: ConfigErrorKind::Io,
            origin: origin.to_owned(),
            location: None,
            message: format!("cannot read config: {message}"),
            snippet: String::new(),
        }
    }

    /// An error at a place found earlier (`location`, with its two-line `snippet`).
    pub(crate) fn placed_at(
        kind: ConfigErrorKind,
        origin: &str,
        location: Location,
        snippet: String,
        message: String,
    ) -> Self {
        Self {
            kind,
            origin: origin.to_owned(),
            location: Some(location),
            message,
            snippet,
        }
    }

    pub(crate) fn at(
        kind: ConfigErrorKind,
        source: &Source<'_>,
        span: Range<usize>,
        message: String,
    ) -> Self {
        let (location, snippet) = source.locate(span);
        Self {
            kind,
            origin: source.origin.to_owned(),
            location: Some(location),
            message,
            snippet,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Some(Location { line, column }) => {
                write!(f, "{}:{line}:{column}: {}", self.origin, self.message)?
            }
            None => write!(f, "{}: {}", self.origin, self.message)?,
        }
        if !self.snippet.is_empty() {
            write!(f, "\n{}", self.snippet)?;
        }
        Ok(())
    }
}

/// The config text together with the label used in error messages, and an index of it (built
/// on first need) to turn byte spans into lines and columns in time independent of the line's
/// length: one long line of many entries costs linear time and memory, not quadratic.
#[derive(Debug)]
pub(crate) struct Source<'a> {
    pub(crate) origin: &'a str,
    pub(crate) text: &'a str,
    index: std::cell::OnceCell<TextIndex>,
}

/// Where each line starts, and how many characters come before every [`CHECKPOINT`]-th byte.
#[derive(Debug)]
struct TextIndex {
    line_starts: Vec<usize>,
    /// `chars_before[k]`: the characters before the char boundary at or below `k * CHECKPOINT`.
    chars_before: Vec<usize>,
}

/// Bytes between two character-count checkpoints of a [`TextIndex`].
const CHECKPOINT: usize = 256;

/// Most characters of a line shown on either side of the offending text in a snippet, and most
/// characters of the offending text itself; a longer line is cut, with `…` where it is.
const SNIPPET_CONTEXT: usize = 60;
const SNIPPET_SPAN: usize = 120;

/// Where a span is: its location, the part of its line a snippet shows (the whole line when it
/// is short, else a window around the span with `…` where it is cut), the column of the span
/// in that excerpt (1-based, in characters) and its width there (at least 1).
#[derive(Debug, Clone)]
pub(crate) struct Position {
    pub(crate) location: Location,
    pub(crate) excerpt: String,
    pub(crate) excerpt_column: usize,
    pub(crate) width: usize,
}

impl<'a> Source<'a> {
    pub(crate) fn new(origin: &'a str, text: &'a str) -> Self {
        Self {
            origin,
            text,
            index: std::cell::OnceCell::new(),
        }
    }

    fn index(&self) -> &TextIndex {
        self.index.get_or_init(|| {
            let text = self.text;
            let line_starts = std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .collect();
            let mut chars_before = Vec::with_capacity(text.len() / CHECKPOINT + 1);
            let mut counted = 0;
            let mut at = 0;
            for k in 0..=text.len() / CHECKPOINT {
                let boundary = text.floor_char_boundary(k * CHECKPOINT);
                counted += text[at..boundary].chars().count();
                at = boundary;
                chars_before.push(counted);
            }
            TextIndex {
                line_starts,
                chars_before,
            }
        })
    }

    /// The number of characters before byte `at` (a char boundary), in time bounded by
    /// [`CHECKPOINT`].
    fn chars_before(&self, at: usize) -> usize {
        let k = at / CHECKPOINT;
        let checkpoint = self.text.floor_char_boundary(k * CHECKPOINT);
        self.index().chars_before[k] + self.text[checkpoint..at].chars().count()
    }

    /// The position of a byte span: 1-based line and column (in characters), and the excerpt of
    /// its line a snippet shows, in time and memory bounded by the span's length (not the line's).
    pub(crate) fn position(&self, span: Range<usize>) -> Position {
        let text = self.text;
        let start = text.floor_char_boundary(span.start.min(text.len()));
        let starts = &self.index().line_starts;
        let line = starts.partition_point(|&s| s <= start).saturating_sub(1);
        let line_start = starts[line];
        let line_end = starts.get(line + 1).map_or(text.len(), |next| next - 1);
        let line_text_end = line_start + text[line_start..line_end].trim_end_matches('\r').len();
        let end = text.floor_char_boundary(span.end.clamp(start, line_end));
        // The excerpt: up to SNIPPET_CONTEXT characters before the span, up to SNIPPET_SPAN of
        // it, up to SNIPPET_CONTEXT after.
        let back = |from: usize, count: usize| {
            text[line_start..from]
                .char_indices()
                .rev()
                .take(count)
                .last()
                .map_or(from, |(i, _)| line_start + i)
        };
        let forth = |from: usize, limit: usize, count: usize| {
            text[from..limit]
                .char_indices()
                .nth(count)
                .map_or(limit, |(i, _)| from + i)
        };
        let shown_start = back(start, SNIPPET_CONTEXT);
        let span_end = forth(start, end.max(start), SNIPPET_SPAN);
        let shown_end = forth(span_end.min(line_text_end), line_text_end, SNIPPET_CONTEXT);
        let cut_before = shown_start > line_start;
        let cut_after = shown_end < line_text_end;
        let mut excerpt = String::new();
        if cut_before {
            excerpt.push('…');
        }
        excerpt.push_str(&text[shown_start..shown_end.max(shown_start)]);
        if cut_after {
            excerpt.push('…');
        }
        Position {
            location: Location {
                line: line + 1,
                column: self.chars_before(start) - self.chars_before(line_start) + 1,
            },
            excerpt,
            excerpt_column: usize::from(cut_before) + text[shown_start..start].chars().count() + 1,
            width: text[start..span_end].chars().count().max(1),
        }
    }

    /// Turns a byte span into a location and a two-line snippet (source line, caret line).
    pub(crate) fn locate(&self, span: Range<usize>) -> (Location, String) {
        let p = self.position(span);
        (p.location, p.snippet())
    }
}

impl Position {
    /// The two-line snippet of an error: the line (or its excerpt) with its number, and carets
    /// under the offending text.
    pub(crate) fn snippet(&self) -> String {
        snippet(
            self.location.line,
            &self.excerpt,
            self.excerpt_column,
            self.width,
        )
    }
}

/// The two-line snippet of an error at `line`: `excerpt` (the line, or the part of it shown)
/// after the line number, and `width` carets under the offending text at `column` of the
/// excerpt.
fn snippet(line: usize, excerpt: &str, column: usize, width: usize) -> String {
    let gutter = line.to_string();
    format!(
        "{gutter} | {excerpt}\n{pad} | {caret_pad}{carets}",
        pad = " ".repeat(gutter.len()),
        caret_pad = " ".repeat(column - 1),
        carets = "^".repeat(width),
    )
}

// Strings that validation only looks up or copies (ids, targets, tool names) are `Cow`s, so a
// deserializer that can borrow from the text does. (Doc comments here are the JSON Schema's
// descriptions.)
/// The config file as written: a mode set for `agent-controller`.
///
/// The raw layer: keys, types and the mode id pattern. [`parse`] adds the graph rules (unique ids,
/// existing `transitionsTo` targets, one default) and the controller checks tool names. The JSON
/// Schema of [`schema`] is derived from these structs, so it cannot drift from the parser.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
// The parser reads a file without `modes` and reports "no modes"; the schema says it up front.
#[cfg_attr(feature = "schema", schemars(
    rename = "ModeConfig",
    title = "agent-controller mode config",
    extend("required" = ["modes"])
))]
struct RawConfig<'a> {
    /// The mode a new session starts in. Default resolution: `defaultModeId`, else the mode
    /// marked `default = true`, else the first mode.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", pattern(r"^[A-Za-z0-9_-]+$"))
    )]
    default_mode_id: Option<Spanned<Cow<'a, str>>>,
    /// Where plans are written and read from: a relative path inside the workspace, without
    /// `..` (default `.agent/plans`).
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>", length(min = 1)))]
    plans_dir: Option<Spanned<String>>,
    /// The modes, in order; at least one.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    modes: Vec<RawMode<'a>>,
    /// The MCP servers whose tools modes may offer, as `SERVER__TOOL` or `SERVER__*` in
    /// `availableTools` (guide: MCP). Each is a program with its own file access: the
    /// workspace jail covers only the built-in tools.
    #[serde(default)]
    mcp_servers: Vec<mcp::RawMcpServer>,
    /// The subagent types a mode's `subagent` tool may start (guide: subagents). A child
    /// never does more than its parent's mode allows.
    #[serde(default)]
    subagents: Vec<subagents::RawSubagent<'a>>,
    /// Rule tests: a tool call, the mode it is made in, and what that mode must do with it
    /// (`expect`); `check` and `verify` run each, and report a failing one at its `expect`
    /// (guide: rules).
    #[serde(default)]
    tests: Vec<rule_tests::RawRuleTest>,
    /// Commands consulted before a tool call runs or waits, or before a plan waits (guide:
    /// hooks): each may deny, allow a call that would wait, or have no say.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<hooks::RawHook>"))]
    hooks: Vec<Spanned<hooks::RawHook>>,
    /// Reviewers a mode's `reviewBy` names (guide: hooks): a model or a command that sees a
    /// mode's plans (and, with `reviewToolCalls`, its waiting tool calls) before a person.
    #[serde(default)]
    reviewers: Vec<hooks::RawReviewer>,
}

/// One mode: its id, what the model is told in it, its tools and where an approved plan hands
/// over to.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "Mode"))]
struct RawMode<'a> {
    /// The mode id: ASCII letters, digits, `-` and `_`; unique; case-sensitive.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "String", pattern(r"^[A-Za-z0-9_-]+$"))
    )]
    id: Spanned<Cow<'a, str>>,
    /// The display name (default: the id); unique among the modes, without case.
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    name: Option<Spanned<String>>,
    /// A one-line description, added to the system prompt.
    description: Option<String>,
    /// The instructions the model gets in this mode (its system prompt).
    instructions: Option<String>,
    /// Marks the default mode; at most one mode may set it.
    #[cfg_attr(feature = "schema", schemars(with = "Option<bool>"))]
    default: Option<Spanned<bool>>,
    /// Where a plan approved in this mode hands over to: another mode's id, or a list of them
    /// (`["build", "build-auto"]`) that the user chooses from when approving; a plain approval
    /// goes to the first. Makes this a planning mode (`submit_plan` is offered).
    // `default`: optional (a hand-written schema gives no `Option` for schemars to see).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(schema_with = "schema::targets_schema"))]
    transitions_to: Option<Spanned<RawTargets<'a>>>,
    /// The tools the model may call in this mode, each once (absent: every tool the controller
    /// has, but in a planning mode only those that change nothing and the plan tools). Listing
    /// `submit_plan` makes this a planning mode; a mode with `transitionsTo` must list it.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<Vec<String>>", extend("uniqueItems" = true))
    )]
    available_tools: Option<Spanned<Vec<Spanned<Cow<'a, str>>>>>,
    /// Tool calls that wait for the user's approval before they run: a list of tools the mode
    /// offers (`["write_file"]`), or `true` for every tool it offers. `submit_plan` is never
    /// listed (its plan always waits for a decision).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(schema_with = "schema::approval_schema"))]
    require_approval: Option<Spanned<RawApproval<'a>>>,
    /// The model this mode prefers, as `provider/model` (for example `openai/gpt-4.1`).
    default_model_id: Option<String>,
    /// How long a plan submitted in this mode may wait for a decision (`"24h"`, `"1h30m"`:
    /// whole numbers with the units d, h, m, s, largest first; more than zero, at most 3650d).
    /// A plan not decided by then expires and counts as rejected. Absent: no deadline.
    #[cfg_attr(feature = "schema", schemars(with = "Option<schema::Duration>"))]
    approval_timeout: Option<Spanned<String>>,
    /// What the deadline (`approvalTimeout`) does to a plan nobody decided in time: `reject`
    /// (the default: it counts as rejected, the run ends) or `abort` (the run is aborted). A
    /// deadline never approves.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", extend("enum" = ["reject", "abort"]))
    )]
    on_timeout: Option<Spanned<String>>,
    /// What the files an approved plan declares (its `## Files` section) do in the mode it
    /// hands over to: `ask` (the default: writes inside them run without asking, a write
    /// elsewhere waits for approval as drift), `enforce` (a write elsewhere is refused) or
    /// `off` (the files are shown, and grant and bind nothing). Only in a planning mode.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", extend("enum" = ["ask", "enforce", "off"]))
    )]
    plan_scope: Option<Spanned<String>>,
    /// Rules on tool-call arguments: each `{ tool, action }` with at most one pattern (`path`,
    /// or `arg` with `glob` or `regex`). Of the rules that match a call, `deny` beats `ask`,
    /// which beats `allow`; a call no rule matches gets the mode's default (`requireApproval`,
    /// else it runs).
    #[cfg_attr(feature = "schema", schemars(with = "Option<Vec<rules::RawRule>>"))]
    rules: Option<Spanned<Vec<Spanned<rules::RawRule>>>>,
    /// Free data for hosts, such as `color` (`#rrggbb` or a colour name) and `icon`.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")
    )]
    metadata: Option<Spanned<toml::Table>>,
    /// The subagent types this mode's `subagent` tool may start, by id (absent: every
    /// `[[subagents]]` type, when the mode offers the tool `subagent`).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<Vec<String>>", extend("uniqueItems" = true))
    )]
    subagents: Option<Spanned<Vec<Spanned<Cow<'a, str>>>>>,
    /// The `[[reviewers]]` id this mode's plans go to first.
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    review_by: Option<Spanned<String>>,
    /// What the reviewer may do: `advise` (the default: a person decides, seeing its verdict)
    /// or `decide` (its approval or rejection stands).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", extend("enum" = ["advise", "decide"]))
    )]
    reviewer_may: Option<Spanned<String>>,
    /// Whether the reviewer also sees the mode's waiting tool calls.
    #[cfg_attr(feature = "schema", schemars(with = "Option<bool>"))]
    review_tool_calls: Option<Spanned<bool>>,
    /// How many approvals by distinct people a plan or a waiting tool call of the mode needs
    /// (1 to 16; default 1): a rejection by any one of them rejects.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<u8>", range(min = 1, max = 16))
    )]
    approvers: Option<Spanned<i64>>,
}

/// `transitionsTo` as written: one mode id, or a list of them (each with its own span, so an
/// error points at the entry).
#[derive(Debug)]
enum RawTargets<'a> {
    /// `transitionsTo = "build"`.
    One(Cow<'a, str>),
    /// `transitionsTo = ["build", "build-auto"]`.
    List(Vec<Spanned<Cow<'a, str>>>),
}

impl<'de, 'a> Deserialize<'de> for RawTargets<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<RawTargets<'a>>);
        impl<'de, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = RawTargets<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mode id or a list of mode ids")
            }

            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawTargets::One(Cow::Owned(v.to_owned())))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<Self::Value, A::Error> {
                Deserialize::deserialize(SeqAccessDeserializer::new(seq)).map(RawTargets::List)
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

/// `requireApproval` as written: `true`/`false`, or a list of tool names (each with its span).
#[derive(Debug)]
enum RawApproval<'a> {
    /// `requireApproval = true` (every offered tool) or `false` (none).
    All(bool),
    /// `requireApproval = ["write_file", ...]`.
    List(Vec<Spanned<Cow<'a, str>>>),
}

impl<'de, 'a> Deserialize<'de> for RawApproval<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<RawApproval<'a>>);
        impl<'de, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = RawApproval<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or a list of tool names")
            }

            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(RawApproval::All(v))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<Self::Value, A::Error> {
                Deserialize::deserialize(SeqAccessDeserializer::new(seq)).map(RawApproval::List)
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

/// Reads and validates a config file. Tool names are not checked here: the controller checks them
/// against its registry when it is built ([`ModeGraph::check_tools`]).
///
/// # Errors
/// [`ConfigErrorKind::Io`] when the file cannot be read, otherwise every error of [`parse`].
///
/// # Examples
/// ```
/// use agent_controller::config::{self, ConfigErrorKind};
/// let graph = config::load("config/modes.toml")?;
/// assert!(graph.get("plan").is_some());
/// let missing = config::load("config/no-such-file.toml").unwrap_err();
/// assert_eq!(missing.kind(), ConfigErrorKind::Io);
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
pub fn load(path: impl AsRef<Path>) -> Result<ModeGraph, ConfigError> {
    let path = path.as_ref();
    let text = read(path)?;
    parse(&text, &path.display().to_string())
}

/// Loads the config file at `path`, relative to the directory `dir`, as [`load`] does, but
/// only where it lies inside `dir`: a path that leads out of it (a symlink to a file elsewhere,
/// `..`) is refused before anything is read. For a config a workspace holds (the CLI's default
/// `config/modes.toml`), which a model or a cloned repository can shape: a symlink to
/// `/etc/passwd` must not be read, nor its first line shown in a syntax error. Errors name the
/// file as `dir` joined with `path`.
///
/// # Errors
/// As [`load`]; [`ConfigErrorKind::Io`] saying the path leads out of `dir`.
///
/// # Examples
/// ```
/// # let dir = tempfile::tempdir()?;
/// std::fs::create_dir(dir.path().join("config"))?;
/// # #[cfg(unix)]
/// std::os::unix::fs::symlink("/etc/passwd", dir.path().join("config/modes.toml"))?;
/// # #[cfg(unix)] {
/// let error = agent_controller::config::load_in(dir.path(), "config/modes.toml").unwrap_err();
/// assert!(error.to_string().contains("leads out of"), "{error}");
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn load_in(dir: impl AsRef<Path>, path: impl AsRef<Path>) -> Result<ModeGraph, ConfigError> {
    let (dir, path) = (dir.as_ref(), path.as_ref());
    let text = read_in(dir, path)?;
    parse(&text, &origin_in(dir, path))
}

/// The name errors give the config at `path` in `dir`.
fn origin_in(dir: &Path, path: &Path) -> String {
    if dir == Path::new(".") {
        path.display().to_string()
    } else {
        dir.join(path).display().to_string()
    }
}

/// Reads the text of the config file at `path`, relative to the directory `dir`, as [`read`]
/// does, refusing a path that leads out of `dir` before anything is read ([`load_in`]).
///
/// # Errors
/// As [`load_in`].
///
/// # Examples
/// ```
/// use agent_controller::config;
/// let text = config::read_in(".", "config/modes.toml")?;
/// assert!(text.contains("[[modes]]"));
/// assert!(config::read_in("config", "../Cargo.toml").is_err(), "outside the directory");
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
pub fn read_in(dir: impl AsRef<Path>, path: impl AsRef<Path>) -> Result<String, ConfigError> {
    let (dir, path) = (dir.as_ref(), path.as_ref());
    let origin = origin_in(dir, path);
    let bytes = crate::jail::Jail::open(dir)
        .and_then(|jail| jail.read(path, MAX_CONFIG_BYTES))
        .map_err(|e| {
            let message = match e {
                crate::jail::JailError::Outside(..) => format!(
                    "leads out of `{}` (a symlink or `..`), so it is not read",
                    dir.display()
                ),
                other => read_error(other),
            };
            ConfigError::io(&origin, message)
        })?;
    text_of(bytes, &origin)
}

/// What [`read`] and [`load_in`] say about a file they cannot read.
fn read_error(e: crate::jail::JailError) -> String {
    match e {
        crate::jail::JailError::NotAFile(_) => {
            "not a regular file (a config must be a file, not a device, FIFO or folder)".to_owned()
        }
        crate::jail::JailError::TooLarge { .. } => {
            format!("larger than the limit of {MAX_CONFIG_BYTES} bytes")
        }
        crate::jail::JailError::NotFound(_) => "no such file".to_owned(),
        crate::jail::JailError::Io(_, e) => e.to_string(),
        other => other.to_string(),
    }
}

/// Reads a config file's text: a regular file (a FIFO or device such as `/dev/zero` is refused at
/// once, without reading), at most [`MAX_CONFIG_BYTES`], valid UTF-8.
///
/// # Errors
/// [`ConfigErrorKind::Io`] when the file cannot be read, is not a regular file or is too large;
/// [`ConfigErrorKind::NotUtf8`] at the line and column of the first byte that is not UTF-8.
///
/// # Examples
/// ```
/// use agent_controller::config::{self, ConfigErrorKind};
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("bad.toml"), b"[[modes]]\nid = \"b\xffuild\"\n")?;
/// let error = config::read(dir.path().join("bad.toml")).unwrap_err();
/// assert_eq!(error.kind(), ConfigErrorKind::NotUtf8);
/// assert_eq!(error.location().map(|l| l.line), Some(2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read(path: impl AsRef<Path>) -> Result<String, ConfigError> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    let bytes = crate::jail::read_file(path, MAX_CONFIG_BYTES)
        .map_err(|e| ConfigError::io(&origin, read_error(e)))?;
    text_of(bytes, &origin)
}

/// The bytes as text, or [`ConfigErrorKind::NotUtf8`] at the first bad byte.
fn text_of(bytes: Vec<u8>, origin: &str) -> Result<String, ConfigError> {
    String::from_utf8(bytes).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        // Text before the bad byte is unchanged by the lossy conversion, so `bad` is also the
        // offset of its replacement character.
        let lossy = String::from_utf8_lossy(&bytes);
        let source = Source::new(origin, &lossy);
        ConfigError::at(
            ConfigErrorKind::NotUtf8,
            &source,
            bad..bad + 1,
            format!(
                "the config is not valid UTF-8: byte 0x{:02x} at offset {bad} (save the file as UTF-8)",
                bytes[bad]
            ),
        )
    })
}

/// Parses and validates config text; `origin` labels the text in error messages (a file name).
///
/// Returns the validated graph; the default mode is resolved as Mastra's `AgentController` does:
/// `defaultModeId`, else the mode marked `default = true`, else the first mode.
///
/// # Errors
/// The first problem in text order (see [`check`] for all of them): invalid TOML, unknown keys,
/// wrong types, no modes, invalid or duplicate ids, self or unknown `transitionsTo`, an unknown
/// `defaultModeId`, two defaults, a `defaultModeId` that conflicts with `default = true`, and a
/// `transitionsTo` whose `availableTools` lacks `submit_plan`.
///
/// # Examples
/// ```
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
///     "modes.toml",
/// )
/// .unwrap();
/// assert_eq!(graph.default_mode().id(), "build");
/// let plan = graph.get("plan").unwrap();
/// assert_eq!(graph.mode(graph.transition_target(plan)).id(), "build");
///
/// let err = agent_controller::config::parse("[[modes]]\nid = \"plan\"\ntransitionsTo = \"plan\"\n", "bad.toml")
///     .unwrap_err();
/// assert_eq!(err.location().unwrap().line, 3);
/// ```
pub fn parse(text: &str, origin: &str) -> Result<ModeGraph, ConfigError> {
    parse_all(text, origin).map_err(|mut errors| errors.swap_remove(0))
}

/// Like [`parse`] but reports every problem it can find at once, sorted by position; an empty list
/// means the text is valid (tool names aside).
///
/// # Examples
/// ```
/// use agent_controller::config::{self, ConfigErrorKind};
/// let errors = config::check(
///     "[[modes]]\nid = \"plan\"\ntransitionTo = \"build\"\n\n[[modes]]\nid = \"plan\"\n",
///     "modes.toml",
/// );
/// let kinds: Vec<ConfigErrorKind> = errors.iter().map(|e| e.kind()).collect();
/// assert!(kinds.contains(&ConfigErrorKind::UnknownField), "{kinds:?}");
/// assert!(kinds.contains(&ConfigErrorKind::DuplicateId), "and the error after it: {kinds:?}");
/// assert!(errors[0].message().contains("transitionsTo"), "did you mean");
/// ```
pub fn check(text: &str, origin: &str) -> Vec<ConfigError> {
    parse_all(text, origin).err().unwrap_or_default()
}

/// Like [`check`], and also checks every `availableTools` name with `is_known` (the controller's
/// registry, for example [`crate::ToolRegistry::knows`]; `submit_plan` is always known): every
/// problem of the file at once, sorted by position, each with its source snippet. An empty list
/// means a controller with those tools accepts the file. Unknown tools are reported even when
/// the file has graph errors too. A key the format does not define is reported (with "did you
/// mean" for a near one) and the rest is still checked; a value of the wrong type is reported
/// with those of the other modes, and the graph rules are then not checked; a TOML syntax error
/// stops the reading, so it is the only error reported then.
///
/// # Examples
/// ```
/// let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"nope\"\navailableTools = [\"grep\", \"submit_plan\"]\n";
/// let errors = agent_controller::config::check_with_tools(text, "modes.toml", |name| name == "read_file");
/// let lines: Vec<usize> = errors.iter().map(|e| e.location().unwrap().line).collect();
/// assert_eq!(lines, [3, 4]);
/// assert!(errors[1].to_string().contains("unknown tool `grep`"));
/// ```
pub fn check_with_tools(
    text: &str,
    origin: &str,
    is_known: impl Fn(&str) -> bool,
) -> Vec<ConfigError> {
    check_tools_of(text, origin, |graph| graph.unknown_tools(is_known))
}

/// Like [`check_with_tools`], with the names of the controller's tools (for example
/// [`crate::ToolRegistry::names`]; `submit_plan` is always known), so that an unknown name near
/// a known one gets a "did you mean" hint ([`ModeGraph::unknown_tools_among`]). This is what
/// `agent-controller check` reports.
///
/// # Examples
/// ```
/// let text = "[[modes]]\nid = \"build\"\navailableTools = [\"Read_File\"]\n";
/// let errors = agent_controller::config::check_with_tool_names(text, "modes.toml", &["read_file"]);
/// assert!(errors[0].to_string().contains("unknown tool `Read_File` in availableTools: did you mean `read_file`?"));
/// ```
pub fn check_with_tool_names(text: &str, origin: &str, known: &[&str]) -> Vec<ConfigError> {
    check_tools_of(text, origin, |graph| graph.unknown_tools_among(known))
}

/// The errors of the file's rules against a controller's `tools` ([`ModeGraph::rule_errors`]:
/// a rule on a tool the controller lacks, or on an argument the tool does not declare), sorted
/// by position; empty also when the modes could not be read (see [`check`] for that). This is
/// what `agent-controller check` adds to [`check_with_tool_names`].
///
/// # Examples
/// ```
/// let text = "[[modes]]\nid = \"build\"\nrules = [{ tool = \"run_command\", action = \"ask\" }]\n";
/// let errors = agent_controller::config::rule_errors(text, "modes.toml", &agent_controller::ToolRegistry::with_workspace_tools());
/// assert!(errors[0].to_string().contains("rule 1 of mode `build` is on unknown tool `run_command`"));
/// ```
pub fn rule_errors(text: &str, origin: &str, tools: &ToolRegistry) -> Vec<ConfigError> {
    match parse_lenient(text, origin) {
        (Some(graph), _) => graph.rule_errors(tools),
        (None, _) => Vec::new(),
    }
}

/// Every error of the file: the graph's, and those `unknown_tools` finds in a graph read.
fn check_tools_of(
    text: &str,
    origin: &str,
    unknown_tools: impl FnOnce(&ModeGraph) -> Vec<ConfigError>,
) -> Vec<ConfigError> {
    let (graph, mut errors) = parse_lenient(text, origin);
    if let Some(graph) = graph {
        errors.extend(unknown_tools(&graph));
        errors.sort_by_key(|e| e.location);
        // A typo of `submit_plan` is found by the graph rules and as an unknown tool: once.
        errors
            .dedup_by(|later, first| later.location == first.location && later.kind == first.kind);
    }
    errors
}

/// What is valid but will not work as meant: every planning mode that offers no tool for which
/// `writes_plans` holds ([`ModeGraph::planning_modes_without_plan_writer`]; for the built-in tools
/// pass `|t| PLAN_WRITING_TOOLS.contains(&t)`, see [`crate::tool::fs::PLAN_WRITING_TOOLS`]),
/// sorted by position, with snippets like the errors of [`check_with_tools`]. Reported also when
/// the file has errors, as long as its modes could be read.
///
/// # Examples
/// ```
/// use agent_controller::tool::fs::PLAN_WRITING_TOOLS;
/// let text = "[[modes]]\nid = \"plan\"\navailableTools = [\"read_file\", \"list_files\", \"submit_plan\"]\n";
/// let warnings = agent_controller::config::warnings(text, "modes.toml", |t| PLAN_WRITING_TOOLS.contains(&t));
/// assert_eq!(warnings.len(), 1);
/// assert_eq!(warnings[0].kind(), agent_controller::config::ConfigErrorKind::NoPlanWriter);
/// ```
pub fn warnings(text: &str, origin: &str, writes_plans: impl Fn(&str) -> bool) -> Vec<ConfigError> {
    match parse_lenient(text, origin) {
        (Some(graph), _) => graph.planning_modes_without_plan_writer(writes_plans),
        (None, _) => Vec::new(),
    }
}

/// Every warning of the file for a controller with `tools` (what `agent-controller check`
/// reports): each planning mode that offers no tool that can write a plan (as [`warnings`], with
/// the plan tools of `tools` and `write_file`), and each tool that writes
/// ([`ToolAccess::Writes`]) a planning mode lists in `availableTools`
/// ([`ModeGraph::planning_modes_listing_writers`]), and each `requireApproval` entry and rule
/// of a planning mode without `availableTools` on a tool of `tools` that the mode does not
/// offer (it offers the read-only and plan tools), sorted by position.
///
/// # Examples
/// ```
/// use agent_controller::{config::ConfigErrorKind, ToolRegistry};
/// let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"write_plan\", \"write_file\", \"submit_plan\"]\n[[modes]]\nid = \"build\"\n";
/// let tools = ToolRegistry::with_workspace_tools();
/// let warnings = agent_controller::config::warnings_with_tools(text, "modes.toml", &tools);
/// assert_eq!(warnings.len(), 1);
/// assert_eq!(warnings[0].kind(), ConfigErrorKind::PlanningModeWrites);
/// assert_eq!(warnings[0].location().map(|l| (l.line, l.column)), Some((4, 33)));
/// ```
pub fn warnings_with_tools(text: &str, origin: &str, tools: &ToolRegistry) -> Vec<ConfigError> {
    let (Some(graph), _) = parse_lenient(text, origin) else {
        return Vec::new();
    };
    let mut warnings = warnings_of(&graph, tools);
    warnings.extend(metadata_warnings(text, origin));
    warnings.sort_by_key(|w| w.location);
    warnings
}

/// The keys of a mode's table, which in its `metadata` are a slip (the key has no effect there).
const MODE_KEYS: &[&str] = &[
    "id",
    "name",
    "description",
    "instructions",
    "default",
    "transitionsTo",
    "availableTools",
    "requireApproval",
    "defaultModelId",
    "approvalTimeout",
    "onTimeout",
    "planScope",
    "rules",
];

/// A warning for each key of a mode's `metadata` that the mode format defines
/// ([`ConfigErrorKind::KnownKeyInMetadata`]), at the key.
fn metadata_warnings(text: &str, origin: &str) -> Vec<ConfigError> {
    let Ok(raw) = toml::from_str::<RawConfig<'_>>(text) else {
        return Vec::new();
    };
    let source = Source::new(origin, text);
    let mut warnings = Vec::new();
    for mode in &raw.modes {
        let Some(metadata) = &mode.metadata else {
            continue;
        };
        let span = metadata.span();
        for key in metadata.get_ref().keys() {
            let Some(known) = MODE_KEYS.iter().find(|k| k.eq_ignore_ascii_case(key)) else {
                continue;
            };
            let at = key_span(text, span.clone(), key);
            warnings.push(ConfigError::at(
                ConfigErrorKind::KnownKeyInMetadata,
                &source,
                at,
                format!(
                    "mode `{}`: `{key}` sits in `metadata`, where it is free data for hosts and has no effect; move it up into the mode's own table to make it `{known}`",
                    mode.id.get_ref()
                ),
            ));
        }
    }
    warnings
}

/// Where `key` is written in the table that starts at `table` (the table keeps no span per key):
/// inside an inline table's span, else on a line of a `[header]` table before the next header;
/// the table's span when not found.
fn key_span(text: &str, table: Range<usize>, key: &str) -> Range<usize> {
    let inline = text.get(table.clone()).unwrap_or_default();
    if inline.trim_start().starts_with('{') {
        return inline.find(key).map_or(table.clone(), |k| {
            table.start + k..table.start + k + key.len()
        });
    }
    let mut offset = table.start;
    for (n, line) in text
        .get(table.start..)
        .unwrap_or_default()
        .split_inclusive('\n')
        .enumerate()
    {
        let trimmed = line.trim_start();
        if n > 0 && trimmed.starts_with('[') {
            break;
        }
        let lead = line.len() - trimmed.len();
        for written in [key.to_owned(), format!("\"{key}\"")] {
            if trimmed
                .strip_prefix(written.as_str())
                .is_some_and(|rest| rest.trim_start().starts_with('='))
            {
                let start = offset + lead;
                return start..start + written.len();
            }
        }
        offset += line.len();
    }
    table
}

/// The warnings about the workspace the config is used in ([`ConfigErrorKind::PlansDirNotDedicated`]):
/// the plans folder (`plansDir`, relative to `workspace`) must be a folder for plans only, since
/// the plan tools write there (a planning mode offers them unlisted); one that holds something
/// other than `.md` plan files (source, a subfolder) is warned about at `plansDir`, or at the
/// start of the file for the default `.agent/plans`. Nothing for a folder that does not exist.
///
/// # Examples
/// ```
/// # let ws = tempfile::tempdir()?;
/// std::fs::create_dir(ws.path().join("src"))?;
/// std::fs::write(ws.path().join("src/main.rs"), "fn main() {}")?;
/// let text = "plansDir = \"src\"\n[[modes]]\nid = \"build\"\n";
/// let warnings = agent_controller::config::workspace_warnings(text, "modes.toml", ws.path());
/// assert_eq!(warnings[0].kind(), agent_controller::config::ConfigErrorKind::PlansDirNotDedicated);
/// assert_eq!(warnings[0].location().map(|l| (l.line, l.column)), Some((1, 12)));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn workspace_warnings(text: &str, origin: &str, workspace: &Path) -> Vec<ConfigError> {
    let Ok(raw) = toml::from_str::<RawConfig<'_>>(text) else {
        return Vec::new();
    };
    let (dir, span) = match &raw.plans_dir {
        Some(dir) => (dir.get_ref().as_str(), dir.span()),
        None => (DEFAULT_PLANS_DIR, 0..0),
    };
    // A folder leading outside is an error ([`workspace_errors`]), never listed here.
    if plans_dir_problem(dir).is_some() || plans_dir_leaves(workspace, dir) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(workspace.join(dir)) else {
        return Vec::new();
    };
    // The first few entries tell; a huge folder is not read to its end.
    let stranger = entries.take(1000).flatten().find(|entry| {
        let is_plan = entry.file_type().is_ok_and(|t| t.is_file())
            && Path::new(&entry.file_name())
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("md"));
        !is_plan
    });
    let Some(stranger) = stranger else {
        return Vec::new();
    };
    let source = Source::new(origin, text);
    vec![ConfigError::at(
        ConfigErrorKind::PlansDirNotDedicated,
        &source,
        span,
        format!(
            "plansDir `{dir}` holds `{}`, which is not a plan: the plans folder must be a folder for plans only (for example `.agent/plans`), since the plan tools write there",
            crate::display::neutralize_line_within(&stranger.file_name().to_string_lossy(), 64)
        ),
    )]
}

/// The errors about the workspace the config is used in: a `plansDir` that exists but leads
/// out of `workspace` (a symlink to a folder outside), which the plan tools then refuse to
/// use ([`ConfigErrorKind::InvalidPlansDir`] at `plansDir`, or at the start of the file for
/// the default `.agent/plans`). Nothing for a folder that does not exist.
pub fn workspace_errors(text: &str, origin: &str, workspace: &Path) -> Vec<ConfigError> {
    let Ok(raw) = toml::from_str::<RawConfig<'_>>(text) else {
        return Vec::new();
    };
    let (dir, span) = match &raw.plans_dir {
        Some(dir) => (dir.get_ref().as_str(), dir.span()),
        None => (DEFAULT_PLANS_DIR, 0..0),
    };
    if plans_dir_problem(dir).is_some() || !plans_dir_leaves(workspace, dir) {
        return Vec::new();
    }
    let source = Source::new(origin, text);
    vec![ConfigError::at(
        ConfigErrorKind::InvalidPlansDir,
        &source,
        span,
        format!(
            "plansDir `{}` leads outside the workspace (a symlink): the plan tools refuse it, so plans cannot be written",
            crate::display::neutralize_line_within(dir, 64)
        ),
    )]
}

/// Whether `dir` in `workspace` exists and resolves (through symlinks) outside the workspace.
fn plans_dir_leaves(workspace: &Path, dir: &str) -> bool {
    let (Ok(root), Ok(resolved)) = (
        std::fs::canonicalize(workspace),
        std::fs::canonicalize(workspace.join(dir)),
    ) else {
        return false;
    };
    !resolved.starts_with(root)
}

/// The warnings of a loaded graph with the tools it runs with, as [`warnings_with_tools`] finds
/// them in its text: what a host prints before a run starts (the CLI's `run`, `decide` and
/// `continue` print them on stderr, like `check`).
///
/// # Examples
/// ```
/// use agent_controller::{config::ConfigErrorKind, ToolRegistry};
/// let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\
///             availableTools = [\"write_file\", \"write_plan\", \"submit_plan\"]\n\
///             [[modes]]\nid = \"build\"\ndefault = true\n";
/// let graph = agent_controller::config::parse(text, "modes.toml")?;
/// let tools = ToolRegistry::with_workspace_tools();
/// let warnings = agent_controller::config::warnings_of(&graph, &tools);
/// assert_eq!(warnings[0].kind(), ConfigErrorKind::PlanningModeWrites);
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
pub fn warnings_of(graph: &ModeGraph, tools: &ToolRegistry) -> Vec<ConfigError> {
    let access = |name: &str| tools.get(name).map(|tool| tool.access());
    let mut warnings = graph.planning_modes_without_plan_writer(|name| {
        PLAN_WRITING_TOOLS.contains(&name) || access(name) == Some(ToolAccess::Plans)
    });
    warnings.extend(graph.planning_modes_listing_writers(access));
    warnings.extend(graph.not_enforced.iter().cloned());
    warnings.extend(
        rules::wildcard_rule_warnings(graph, tools)
            .into_iter()
            .chain(rules::implicit_offer_warnings(graph, tools))
            .map(|w| graph.placed(w)),
    );
    warnings.sort_by_key(|w| w.location);
    warnings
}

fn parse_all(text: &str, origin: &str) -> Result<ModeGraph, Vec<ConfigError>> {
    match parse_lenient(text, origin) {
        (Some(graph), errors) if errors.is_empty() => Ok(graph),
        (_, errors) => Err(errors),
    }
}

/// Parses and validates, keeping the graph even when it has errors (for tool name checks);
/// `None` when the text could not be read into modes at all. Errors are sorted by position.
///
/// A key the format does not define is reported and left out, so the rest is still read and
/// checked; a value of the wrong type in one mode is reported with those of the other modes, and
/// the graph rules are then not checked (the modes could not all be read).
fn parse_lenient(text: &str, origin: &str) -> (Option<ModeGraph>, Vec<ConfigError>) {
    let source = Source::new(origin, text);
    let mut root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(e) => return (None, vec![syntax_error(&source, &e)]),
    };
    let mut errors = Vec::new();
    remove_unknown_keys(root.get_mut(), &source, &mut errors);
    // The document is handed over whole (a copy of it was a tenth of a large config's load,
    // issue 36 item 13); a config the raw layer refuses is read again for its type errors.
    let graph = match RawConfig::deserialize(toml::de::Deserializer::from(root)) {
        Ok(raw) => validate(raw, &source, &mut errors),
        Err(e) => {
            if let Ok(mut again) = DeTable::parse(text) {
                // Its unknown keys are reported already.
                remove_unknown_keys(again.get_mut(), &source, &mut Vec::new());
                errors.extend(mode_type_errors(again.get_ref(), &source));
            }
            let first = syntax_error(&source, &e);
            if !errors
                .iter()
                .any(|seen| seen.location == first.location && seen.kind == first.kind)
            {
                errors.push(first);
            }
            None
        }
    };
    errors.sort_by_key(|e| e.location);
    (graph, errors)
}

/// Takes the keys the format does not define out of the document (at the top and in each
/// `[[modes]]` table; `metadata` is free), with a [`ConfigErrorKind::UnknownField`] error at each
/// key: "did you mean" for a near one, where it belongs for a key of the other table, else the
/// keys there are.
fn remove_unknown_keys(root: &mut DeTable<'_>, source: &Source<'_>, errors: &mut Vec<ConfigError>) {
    let top = fields_of::<RawConfig<'_>>();
    let mode = fields_of::<RawMode<'_>>();
    let unknown = |table: &DeTable<'_>, known: &[&str]| -> Vec<(String, Range<usize>)> {
        table
            .keys()
            .filter(|key| !known.contains(&key.get_ref().as_ref()))
            .map(|key| (key.get_ref().to_string(), key.span()))
            .collect()
    };
    let mut report = |table: &mut DeTable<'_>, known: &[&str], other: &[&str], place: &str| {
        for (key, span) in unknown(table, known) {
            table.remove(key.as_str());
            let hint = if other.contains(&key.as_str()) {
                if place.is_empty() {
                    format!(": `{key}` belongs in a [[modes]] table")
                } else {
                    format!(": `{key}` belongs at the top of the file, before the first [[modes]]")
                }
            } else if let Some(near) = did_you_mean(&key, known.iter().copied()) {
                format!(": did you mean `{near}`?")
            } else {
                format!(", expected one of {}", listed_all(known))
            };
            errors.push(ConfigError::at(
                ConfigErrorKind::UnknownField,
                source,
                span,
                format!("unknown field `{key}`{place}{hint}"),
            ));
        }
    };
    report(root, top, mode, "");
    let Some(DeValue::Array(modes)) = root.get_mut("modes").map(Spanned::get_mut) else {
        return;
    };
    for entry in modes.iter_mut() {
        if let DeValue::Table(table) = entry.get_mut() {
            let place = match table.get("id").and_then(|id| id.get_ref().as_str()) {
                Some(id) => format!(" in mode `{id}`"),
                None => " in a mode".to_owned(),
            };
            report(table, mode, top, &place);
        }
    }
    let subagent = fields_of::<subagents::RawSubagent<'_>>();
    let Some(DeValue::Array(types)) = root.get_mut("subagents").map(Spanned::get_mut) else {
        return;
    };
    for entry in types.iter_mut() {
        if let DeValue::Table(table) = entry.get_mut() {
            let place = match table.get("id").and_then(|id| id.get_ref().as_str()) {
                Some(id) => format!(" in subagent type `{id}`"),
                None => " in a subagent type".to_owned(),
            };
            report(table, subagent, &[], &place);
        }
    }
}

/// The type errors of each `[[modes]]` table read on its own (and of the keys above them), so a
/// wrong value in one mode does not hide one in the next.
fn mode_type_errors(root: &DeTable<'_>, source: &Source<'_>) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    if let Some(DeValue::Array(modes)) = root.get("modes").map(Spanned::get_ref) {
        for mode in modes.iter() {
            let mode = toml::de::ValueDeserializer::from(mode.clone());
            if let Err(e) = RawMode::deserialize(mode) {
                errors.push(syntax_error(source, &e));
            }
        }
    }
    let mut top = root.clone();
    top.remove("modes");
    let span = 0..source.text.len();
    if let Err(e) = RawConfig::deserialize(toml::de::Deserializer::from(Spanned::new(span, top))) {
        errors.push(syntax_error(source, &e));
    }
    errors
}

/// The keys a derived `Deserialize` struct reads, as it names them to its deserializer (so the
/// list cannot drift from the struct).
fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    use std::cell::Cell;

    #[derive(Debug)]
    struct Stop;
    impl fmt::Display for Stop {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("fields read")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    struct Fields<'c>(&'c Cell<&'static [&'static str]>);
    impl<'de> serde::Deserializer<'de> for Fields<'_> {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.set(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let fields = Cell::new(&[][..]);
    let _ = T::deserialize(Fields(&fields));
    fields.get()
}

/// Every name of `names` as `` `a`, `b` ``.
fn listed_all(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn syntax_error(source: &Source<'_>, err: &toml::de::Error) -> ConfigError {
    let message = err.message().trim().to_owned();
    let kind = if message.starts_with("unknown field") {
        ConfigErrorKind::UnknownField
    } else if message.starts_with("invalid type") {
        ConfigErrorKind::InvalidType
    } else if message.starts_with("missing field") {
        ConfigErrorKind::MissingField
    } else {
        ConfigErrorKind::Syntax
    };
    ConfigError::at(kind, source, err.span().unwrap_or(0..0), message)
}

pub(crate) fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn validate(
    raw: RawConfig<'_>,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<ModeGraph> {
    let err =
        |kind, span: Range<usize>, message: String| ConfigError::at(kind, source, span, message);
    if raw.modes.is_empty() {
        errors.push(err(
            ConfigErrorKind::NoModes,
            0..0,
            "the config defines no modes: add at least one [[modes]] table with an id".to_owned(),
        ));
        return None;
    }

    let server_ids: Vec<String> = raw
        .mcp_servers
        .iter()
        .map(|s| s.id_text().to_owned())
        .collect();
    let mcp_servers = mcp::validate_servers(raw.mcp_servers, source, errors);
    let mode_ids: Vec<&str> = raw.modes.iter().map(|m| &**m.id.get_ref()).collect();
    let hooks = hooks::validate_hooks(raw.hooks, &mode_ids, source, errors);
    // Every key of the hooks' tables runs: none is read and left unenforced.
    let review_warnings = Vec::new();
    let reviewer_configs = hooks::validate_reviewers(raw.reviewers, source, errors);
    let reviewers: Vec<String> = reviewer_configs.iter().map(|r| r.id().to_owned()).collect();
    let (subagent_types, subagent_refs) =
        subagents::validate_subagents(raw.subagents, source, errors);
    let mut index: HashMap<Arc<str>, ModeId> = HashMap::default();
    index.reserve(raw.modes.len());
    let mut ids: Vec<Arc<str>> = Vec::with_capacity(raw.modes.len());
    for (i, mode) in raw.modes.iter().enumerate() {
        let id: &str = mode.id.get_ref();
        ids.push(Arc::from(id));
        if !is_valid_id(id) {
            let message = if id.is_empty() {
                "mode id is empty".to_owned()
            } else {
                format!("mode id `{id}` is invalid: use only ASCII letters, digits, `-` and `_`")
            };
            errors.push(err(ConfigErrorKind::InvalidId, mode.id.span(), message));
        } else if index.contains_key(id) {
            errors.push(err(
                ConfigErrorKind::DuplicateId,
                mode.id.span(),
                format!("duplicate mode id `{id}`: another mode already uses it"),
            ));
        } else {
            index.insert(ids[i].clone(), ModeId::from_index(i));
        }
    }
    // The user picks a target mode by its name at the prompt: two alike names are refused.
    // A mode whose id is invalid or taken is reported once, for its id.
    let mut names: HashMap<String, &str> = HashMap::default();
    for (i, mode) in raw.modes.iter().enumerate() {
        if index.get(mode.id.get_ref().as_ref()) != Some(&ModeId::from_index(i)) {
            continue;
        }
        let (name, span) = match &mode.name {
            Some(name) => (name.get_ref().as_str(), name.span()),
            None => (mode.id.get_ref().as_ref(), mode.id.span()),
        };
        let key = name.trim().to_lowercase();
        if key.is_empty() {
            errors.push(err(
                ConfigErrorKind::EmptyName,
                span,
                format!(
                    "mode `{}` has an empty name: leave `name` out to show the id, or name the mode",
                    mode.id.get_ref()
                ),
            ));
            continue;
        }
        match names.get(&key) {
            Some(other) => errors.push(err(
                ConfigErrorKind::DuplicateName,
                span,
                format!(
                    "mode `{}` is named `{name}`, like mode `{other}`: the user picks a mode by its name, so each needs its own",
                    mode.id.get_ref()
                ),
            )),
            None => {
                names.insert(key, mode.id.get_ref());
            }
        }
    }

    let rule_tests = rule_tests::rule_tests_of(raw.tests, &index, source, errors);

    // Errors before the default mode is resolved: when resolving it fails, which mode is the
    // default is unclear, and rules that depend on it are not checked.
    let errors_before_default = errors.len();
    let mut marked_default: Option<(usize, Range<usize>)> = None;
    for (i, mode) in raw.modes.iter().enumerate() {
        if let Some(flag) = &mode.default
            && *flag.get_ref()
        {
            match &marked_default {
                Some((first, _)) => errors.push(err(
                    ConfigErrorKind::MultipleDefaults,
                    flag.span(),
                    format!(
                        "mode `{}` is marked default, but mode `{}` already is: only one mode may set `default = true`",
                        mode.id.get_ref(),
                        raw.modes[*first].id.get_ref()
                    ),
                )),
                None => marked_default = Some((i, flag.span())),
            }
        }
    }

    let mut default = marked_default.as_ref().map_or(0, |(i, _)| *i);
    if let Some(default_id) = &raw.default_mode_id {
        match index.get(&**default_id.get_ref()) {
            None => errors.push(err(
                ConfigErrorKind::UnknownDefaultModeId,
                default_id.span(),
                format!(
                    "defaultModeId `{}` names no mode{}",
                    default_id.get_ref(),
                    id_hint(default_id.get_ref(), &index, &ids)
                ),
            )),
            Some(id) => {
                if let Some((marked, _)) = &marked_default
                    && *marked != id.index()
                {
                    errors.push(err(
                        ConfigErrorKind::ConflictingDefault,
                        default_id.span(),
                        format!(
                            "defaultModeId `{}` conflicts with mode `{}`, which is marked `default = true`: name one default mode",
                            default_id.get_ref(),
                            raw.modes[*marked].id.get_ref()
                        ),
                    ));
                }
                default = id.index();
            }
        }
    }

    let default_is_clear = errors.len() == errors_before_default;
    // The known ids an unknown target's message lists, made once however many there are.
    let known_ids = std::cell::OnceCell::new();
    // How many "did you mean" hints errors got so far (at most MAX_HINTED).
    let mut hinted = 0;
    let mut modes = Vec::with_capacity(raw.modes.len());
    let mut tool_refs = Vec::new();
    for (i, mode) in raw.modes.into_iter().enumerate() {
        let this = ModeId::from_index(i);
        let id = mode.id.get_ref();
        let mut transitions_to: Vec<ModeId> = Vec::new();
        let mut targeted: HashSet<ModeId> = HashSet::new();
        if let Some(targets) = &mode.transitions_to {
            let entries: Vec<(&str, Range<usize>)> = match targets.get_ref() {
                RawTargets::One(target) => vec![(&**target, targets.span())],
                RawTargets::List(list) => list.iter().map(|t| (&**t.get_ref(), t.span())).collect(),
            };
            if entries.is_empty() {
                errors.push(err(
                    ConfigErrorKind::EmptyTargets,
                    targets.span(),
                    format!("mode `{id}` has an empty transitionsTo list: name at least one mode to hand over to, or leave transitionsTo out"),
                ));
            }
            for (target, span) in entries {
                match index.get(target) {
                    Some(t) if *t == this => errors.push(err(
                        ConfigErrorKind::SelfTransition,
                        span,
                        format!("mode `{id}` has transitionsTo naming itself: a plan approved in `{id}` must hand over to another mode"),
                    )),
                    Some(t) if targeted.contains(t) => errors.push(err(
                        ConfigErrorKind::DuplicateTarget,
                        span,
                        format!("mode `{id}` lists `{target}` twice in transitionsTo: name each mode once"),
                    )),
                    Some(t) => {
                        targeted.insert(*t);
                        transitions_to.push(*t);
                    }
                    None => errors.push(err(
                        ConfigErrorKind::UnknownTarget,
                        span,
                        format!(
                            "mode `{id}` has transitionsTo `{target}`, which names no mode{}",
                            if hinted < MAX_HINTED {
                                hinted += 1;
                                id_hint(target, &index, &ids)
                            } else {
                                format!(
                                    " (ids are case-sensitive; known: {})",
                                    known_ids.get_or_init(|| index_ids(&index))
                                )
                            }
                        ),
                    )),
                }
            }
        }
        // Where the list names `submit_plan`: a planning mode without a target.
        let mut submit_span = None;
        let available_tools = mode.available_tools.map(|list| {
            let span = list.span();
            submit_span = list
                .get_ref()
                .iter()
                .find(|name| name.get_ref() == SUBMIT_PLAN)
                .map(Spanned::span);
            let list = list.into_inner();
            let mut seen: HashSet<&str> = HashSet::with_capacity(list.len());
            let mut names: Vec<Arc<str>> = Vec::with_capacity(list.len());
            for entry in &list {
                let name: &str = entry.get_ref();
                if !seen.insert(name) {
                    errors.push(duplicate_tool(
                        source,
                        entry.span(),
                        Owner::Mode(id),
                        name,
                        "availableTools",
                    ));
                    continue;
                }
                let name: Arc<str> = Arc::from(name);
                tool_refs.push(ToolRef::at(this, name.clone(), entry.span(), false));
                names.push(name);
            }
            (span, names)
        });
        if let (Some(_), Some((span, names))) = (&mode.transitions_to, &available_tools)
            && !names.iter().any(|n| &**n == SUBMIT_PLAN)
        {
            // A near miss of the built-in name is a typo: report the unknown tool itself.
            let typo = tool_refs
                .iter()
                .rev()
                .take(names.len())
                .find(|r| edit_distance(&r.name, SUBMIT_PLAN) <= 2);
            if let Some(typo) = typo {
                let at = source.position(typo.span.clone());
                errors.push(ConfigError::placed_at(
ConfigErrorKind::UnknownTool,
                    source.origin,
                    at.location,
                    at.snippet(),
                    format!(
                        "mode `{id}` lists unknown tool `{}` in availableTools: did you mean `{SUBMIT_PLAN}`?",
                        typo.name
                    ),
                ));
            } else {
                errors.push(err(
                ConfigErrorKind::TargetWithoutSubmitPlan,
                span.clone(),
                format!("mode `{id}` sets transitionsTo but its availableTools leaves out `{SUBMIT_PLAN}`, so a plan could never be submitted in it: add `{SUBMIT_PLAN}`"),
            ));
            }
        }
        let plans = mode.transitions_to.is_some() || submit_span.is_some();
        if let (None, Some(span), true) = (
            &mode.transitions_to,
            submit_span,
            default_is_clear && i == default,
        ) {
            errors.push(err(
                ConfigErrorKind::SelfHandover,
                span,
                format!("mode `{id}` lists `{SUBMIT_PLAN}` but sets no transitionsTo and is itself the default mode, so an approved plan would hand over to `{id}` itself: add `transitionsTo` naming the mode to hand over to, or mark another mode default"),
            ));
        }
        let offered = available_tools.as_ref().map(|(_, names)| names.as_slice());
        let mode_subagents =
            subagents::mode_subagents(mode.subagents, id, &subagent_types, source, errors);
        let require_approval = mode.require_approval.map_or(RequireApproval::None, |raw| {
            approval_policy(
                raw,
                Owner::Mode(id),
                offered,
                source,
                |name, span| tool_refs.push(ToolRef::at(this, name, span, true)),
                errors,
                &mut hinted,
            )
        });
        let rules = rules::rules_of(mode.rules, Owner::Mode(id), offered, source, errors);
        let on_timeout = on_timeout::on_timeout_of(
            mode.on_timeout,
            mode.approval_timeout.is_some(),
            id,
            source,
            errors,
        );
        let plan_scope = plan_scope::plan_scope_of(mode.plan_scope, plans, id, source, errors);
        let review = hooks::RawModeReview {
            review_by: mode.review_by,
            reviewer_may: mode.reviewer_may,
            review_tool_calls: mode.review_tool_calls,
            approvers: mode.approvers,
        };
        let (approvers, review) = hooks::check_mode_review(review, id, &reviewers, source, errors);
        let approval_timeout = mode.approval_timeout.and_then(|text| {
            text.get_ref()
                .parse::<ApprovalTimeout>()
                .map_err(|e| {
                    errors.push(err(
                        ConfigErrorKind::InvalidApprovalTimeout,
                        text.span(),
                        format!("mode `{id}`: {e}"),
                    ));
                })
                .ok()
        });
        modes.push(Mode {
            id: ids[i].clone(),
            name: mode
                .name
                .map_or_else(|| ids[i].to_string(), Spanned::into_inner),
            description: mode.description.unwrap_or_default(),
            instructions: mode.instructions.unwrap_or_default(),
            marked_default: marked_default.as_ref().is_some_and(|(m, _)| *m == i),
            transitions_to,
            available_tools: available_tools.map(|(_, names)| names),
            require_approval,
            default_model_id: mode.default_model_id,
            metadata: mode.metadata.map(Spanned::into_inner).unwrap_or_default(),
            approval_timeout,
            rules,
            on_timeout,
            plan_scope,
            subagents: mode_subagents,
            approvers,
            review,
            managed: crate::mode::Managed::default(),
        });
    }

    let plans_dir = match raw.plans_dir {
        None => DEFAULT_PLANS_DIR.to_owned(),
        Some(dir) => {
            if let Some(problem) = plans_dir_problem(dir.get_ref()) {
                errors.push(err(
                    ConfigErrorKind::InvalidPlansDir,
                    dir.span(),
                    format!("plansDir `{}` {problem}", dir.get_ref()),
                ));
            }
            dir.into_inner()
        }
    };
    errors.extend(mcp::reference_errors(
        &tool_refs,
        &modes,
        &mcp_servers,
        &server_ids,
        source,
    ));
    Some(
        ModeGraph::new(
            modes,
            ModeId::from_index(default),
            index,
            plans_dir.into(),
            source.origin.to_owned(),
            tool_refs,
            Arc::from(source.text),
        )
        .with_mcp_servers(mcp_servers)
        .with_subagents(subagent_types, subagent_refs)
        .with_rule_tests(rule_tests)
        .with_hooks(hooks, review_warnings)
        .with_reviewers(reviewer_configs),
    )
}

/// The error for a tool `name` that `owner` lists a second time (at `span`) in `key`.
fn duplicate_tool(
    source: &Source<'_>,
    span: Range<usize>,
    owner: Owner<'_>,
    name: &str,
    key: &str,
) -> ConfigError {
    ConfigError::at(
        ConfigErrorKind::DuplicateTool,
        source,
        span,
        format!("{owner} lists `{name}` twice in {key}: name each tool once"),
    )
}

/// Most candidates a "did you mean" hint looks through among a config's own names (a mode's
/// `availableTools`): a longer list gets no hint.
const MAX_HINT_CANDIDATES: usize = 256;

/// Most errors of one check that get a "did you mean" hint; later ones go without, so checking
/// many names against many candidates stays linear in the config's length.
const MAX_HINTED: usize = 100;

/// Most names an error message lists (the tools a mode offers), the rest counted.
const MAX_LISTED_NAMES: usize = 8;

/// `names` as `` `a`, `b` ``, at most [`MAX_LISTED_NAMES`] of them and then how many more.
fn listed<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    let total = names.len();
    let mut shown: Vec<String> = names
        .take(MAX_LISTED_NAMES)
        .map(|name| format!("`{name}`"))
        .collect();
    if total > MAX_LISTED_NAMES {
        shown.push(format!("and {} more", total - MAX_LISTED_NAMES));
    }
    shown.join(", ")
}

/// A mode's or a subagent type's (`owner`'s) `requireApproval` as a policy. Every listed name
/// is listed once, must be offered by the owner (in its `availableTools`; without the list it
/// offers every tool, and each name goes to `unlisted`, to be checked against the controller's
/// tools by [`ModeGraph::unknown_tools`]), and `submit_plan` is never listed; an error is pushed
/// at the name's line and column otherwise.
fn approval_policy(
    raw: Spanned<RawApproval<'_>>,
    owner: Owner<'_>,
    offered: Option<&[Arc<str>]>,
    source: &Source<'_>,
    mut unlisted: impl FnMut(Arc<str>, Range<usize>),
    errors: &mut Vec<ConfigError>,
    hinted: &mut usize,
) -> RequireApproval {
    let list = match raw.into_inner() {
        RawApproval::All(true) => return RequireApproval::All,
        RawApproval::All(false) => return RequireApproval::None,
        RawApproval::List(list) => list,
    };
    // What the mode offers, as a set: each name is looked up in constant time.
    let offered = offered.map(|list| (list, list.iter().map(|t| &**t).collect::<HashSet<&str>>()));
    let mut seen: HashSet<&str> = HashSet::with_capacity(list.len());
    let mut tools: Vec<Arc<str>> = Vec::with_capacity(list.len());
    for entry in &list {
        let span = entry.span();
        let name: &str = entry.get_ref();
        if !seen.insert(name) {
            errors.push(duplicate_tool(source, span, owner, name, "requireApproval"));
            continue;
        }
        if name == SUBMIT_PLAN {
            errors.push(ConfigError::at(
                ConfigErrorKind::ApprovalOfSubmitPlan,
                source,
                span,
                format!("{owner} lists `{SUBMIT_PLAN}` in requireApproval, but a submitted plan always waits for a decision: leave it out"),
            ));
            continue;
        }
        match &offered {
            Some((offered, set))
                if !set.contains(name)
                    && !offered
                        .iter()
                        .any(|pattern| crate::tool::mcp::wildcard_covers(pattern, name)) =>
            {
                let hint = if offered.len() <= MAX_HINT_CANDIDATES && *hinted < MAX_HINTED {
                    *hinted += 1;
                    did_you_mean(name, offered.iter().map(|t| &**t))
                } else {
                    None
                };
                errors.push(ConfigError::at(
                    ConfigErrorKind::ApprovalToolNotOffered,
                    source,
                    span,
                    format!(
                        "{owner} lists `{name}` in requireApproval, but does not offer it (its availableTools: {}): {}",
                        if offered.is_empty() { "none".to_owned() } else { listed(offered.iter().map(|t| &**t)) },
                        match hint {
                            Some(near) => tool_hint(name, near)[2..].to_owned(),
                            None => format!("add `{name}` to availableTools or leave it out of requireApproval"),
                        }
                    ),
                ));
                continue;
            }
            Some(_) => {}
            None => unlisted(Arc::from(name), span),
        }
        tools.push(Arc::from(name));
    }
    if tools.is_empty() {
        RequireApproval::None
    } else {
        RequireApproval::Tools(tools)
    }
}

/// Why `dir` cannot be the plans directory, or `None` when it is a relative path inside the
/// workspace: at least one named folder, no `..`, not absolute.
fn plans_dir_problem(dir: &str) -> Option<&'static str> {
    use std::path::Component;
    let path = Path::new(dir);
    if path.has_root() || dir.starts_with(['/', '\\']) {
        return Some(
            "is absolute: plansDir must be a relative path inside the workspace (for example `.agent/plans`)",
        );
    }
    let mut named = false;
    for part in path.components() {
        match part {
            Component::Normal(_) => named = true,
            Component::CurDir => {}
            Component::ParentDir => {
                return Some(
                    "leaves the workspace: plansDir must be a relative path inside it, without `..`",
                );
            }
            Component::RootDir | Component::Prefix(_) => {
                return Some("is absolute: plansDir must be a relative path inside the workspace");
            }
        }
    }
    if named {
        None
    } else {
        Some(
            "names no folder: plansDir must be a non-empty relative path inside the workspace (for example `.agent/plans`)",
        )
    }
}

/// `: did you mean `near`?` for an unknown tool `name`, saying so when the two differ only in case.
fn tool_hint(name: &str, near: &str) -> String {
    if near.to_lowercase() == name.to_lowercase() {
        format!(": did you mean `{near}`? (tool names are case-sensitive)")
    } else {
        format!(": did you mean `{near}`?")
    }
}

/// What follows "names no mode" for an unknown mode id `name`: the mode it differs from only in
/// case, or a near one ("did you mean"), or else the known ids.
fn id_hint(name: &str, index: &HashMap<Arc<str>, ModeId>, ids: &[Arc<str>]) -> String {
    let candidates = (ids.len() <= MAX_HINT_CANDIDATES).then(|| {
        ids.iter()
            .filter(|id| index.contains_key(&***id))
            .map(|id| &**id)
    });
    match candidates.and_then(|c| did_you_mean(name, c)) {
        Some(near)
            if near.eq_ignore_ascii_case(name) || near.to_lowercase() == name.to_lowercase() =>
        {
            format!("; the mode is `{near}` (ids are case-sensitive)")
        }
        Some(near) => format!(": did you mean `{near}`?"),
        None => format!(" (ids are case-sensitive; known: {})", index_ids(index)),
    }
}

fn index_ids(index: &HashMap<Arc<str>, ModeId>) -> String {
    let mut ids: Vec<(&str, usize)> = index.iter().map(|(k, v)| (&**k, v.index())).collect();
    ids.sort_by_key(|(_, i)| *i);
    if ids.len() > 8 {
        ids.truncate(8);
        return format!(
            "{}, ...",
            ids.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
        );
    }
    ids.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
}

// The graph's tool names checked against a controller's tools. Here rather than in
// `crate::mode`, beside the errors they make, so that the mode graph does not depend on the
// config module that builds it.
impl ModeGraph {
    /// Checks every `availableTools` name, and the `requireApproval` names of modes without
    /// `availableTools` (which offer every tool), against the tools a controller has;
    /// `submit_plan` is always known. Without the list of names there is nothing to suggest:
    /// [`ModeGraph::unknown_tools_among`] adds "did you mean" hints.
    ///
    /// # Errors
    /// One [`ConfigErrorKind::UnknownTool`] error per unknown name, at the name's line and column,
    /// in text order. An empty list means every name is known.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config;
    /// let graph = config::parse("[[modes]]\nid = \"build\"\navailableTools = [\"read_file\", \"deploy\", \"ship\"]\n", "modes.toml")?;
    /// let errors = graph.unknown_tools(|name| name == "read_file");
    /// assert_eq!(errors.len(), 2);
    /// assert!(errors[0].message().contains("`deploy`"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn unknown_tools(&self, is_known: impl Fn(&str) -> bool) -> Vec<ConfigError> {
        self.unknown_tools_hinted(is_known, &[])
    }

    /// Like [`ModeGraph::unknown_tools`], with the tool names a controller has (for example
    /// [`crate::ToolRegistry::names`]; `submit_plan` is always known): an unknown name that
    /// differs from a known one only in case, or by at most two characters, gets `did you mean
    /// `NAME`?` (`Write_File` in `requireApproval` -> `write_file`).
    ///
    /// # Errors
    /// One [`ConfigErrorKind::UnknownTool`] error per unknown name, at the name's line and column,
    /// in text order. An empty list means every name is known.
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\nrequireApproval = [\"Write_File\"]\n",
    ///     "modes.toml",
    /// )?;
    /// let errors = graph.unknown_tools_among(&["read_file", "write_file"]);
    /// assert!(errors[0].to_string().contains("did you mean `write_file`?"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn unknown_tools_among(&self, known: &[&str]) -> Vec<ConfigError> {
        let set: HashSet<&str> = known.iter().copied().collect();
        self.unknown_tools_hinted(|name| set.contains(name), known)
    }

    /// [`ModeGraph::unknown_tools`], each message with a hint from `candidates` when one is near.
    fn unknown_tools_hinted(
        &self,
        is_known: impl Fn(&str) -> bool,
        candidates: &[&str],
    ) -> Vec<ConfigError> {
        let source = self.source();
        self.tool_refs()
            .iter()
            .filter(|r| !is_builtin(&r.name) && !self.is_mcp_ref(&r.name) && !is_known(&r.name))
            .enumerate()
            .map(|(n, r)| {
                let at = source.position(r.span.clone());
                self.placed(ConfigError::placed_at(
                    ConfigErrorKind::UnknownTool,
                    self.origin(),
                    at.location,
                    at.snippet(),
                    format!(
                        "mode `{}` lists unknown tool `{}` in {}{}",
                        self.mode(r.mode).id(),
                        r.name,
                        if r.in_approval {
                            "requireApproval"
                        } else {
                            "availableTools"
                        },
                        // `submit_plan` is never listed in requireApproval: no guess of it there.
                        (n < MAX_HINTED)
                            .then(|| did_you_mean(
                                &r.name,
                                candidates
                                    .iter()
                                    .copied()
                                    .chain((!r.in_approval).then_some(SUBMIT_PLAN))
                            ))
                            .flatten()
                            .map(|near| tool_hint(&r.name, near))
                            .unwrap_or_default()
                    ),
                ))
            })
            .chain(self.unknown_subagent_tools(&is_known, candidates))
            .collect()
    }

    /// [`ModeGraph::unknown_tools_hinted`] for the tools the `[[subagents]]` types list.
    fn unknown_subagent_tools(
        &self,
        is_known: &impl Fn(&str) -> bool,
        candidates: &[&str],
    ) -> Vec<ConfigError> {
        let source = self.source();
        self.subagent_tool_refs
            .iter()
            .filter(|r| !is_builtin(&r.name) && !self.is_mcp_ref(&r.name) && !is_known(&r.name))
            .take(MAX_HINTED)
            .map(|r| {
                let at = source.position(r.span.clone());
                let hint = did_you_mean(&r.name, candidates.iter().copied())
                    .map(|near| tool_hint(&r.name, near))
                    .unwrap_or_default();
                self.placed(ConfigError::placed_at(
                    ConfigErrorKind::UnknownTool,
                    self.origin(),
                    at.location,
                    at.snippet(),
                    format!(
                        "subagent type `{}` lists unknown tool `{}` in {}{hint}",
                        self.subagents()[r.subagent].id(),
                        r.name,
                        if r.in_approval {
                            "requireApproval"
                        } else {
                            "availableTools"
                        },
                    ),
                ))
            })
            .collect()
    }

    /// Warnings, not errors: every planning mode whose `availableTools` lists no tool for which
    /// `writes_plans` holds (for the built-in tools, [`crate::tool::fs::PLAN_WRITING_TOOLS`]), so
    /// a real model there has nothing to write a plan with. One warning per mode, of kind
    /// [`ConfigErrorKind::NoPlanWriter`], at the
    /// mode's first tool name. A mode without `availableTools` is offered every tool and is not
    /// reported.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::tool::fs::PLAN_WRITING_TOOLS;
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"submit_plan\"]\n[[modes]]\nid = \"build\"\n",
    ///     "modes.toml",
    /// )?;
    /// let warnings = graph.planning_modes_without_plan_writer(|t| PLAN_WRITING_TOOLS.contains(&t));
    /// assert_eq!(warnings.len(), 1);
    /// assert_eq!(warnings[0].location().unwrap().line, 4);
    /// assert!(warnings[0].message().contains("no tool that can write a plan"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn planning_modes_without_plan_writer(
        &self,
        writes_plans: impl Fn(&str) -> bool,
    ) -> Vec<ConfigError> {
        let mut warnings = Vec::new();
        // Each mode's first availableTools name, found in one pass over them all.
        let mut firsts: Vec<Option<&ToolRef>> = vec![None; self.len()];
        for r in self.tool_refs().iter().filter(|r| !r.in_approval) {
            firsts[r.mode.index()].get_or_insert(r);
        }
        for (mode, first) in self.modes().iter().zip(firsts) {
            let Some(tools) = mode.available_tools() else {
                continue;
            };
            if !mode.is_planning() || tools.iter().any(|t| writes_plans(t)) {
                continue;
            }
            let Some(first) = first else {
                continue;
            };
            let at = self.source().position(first.span.clone());
            warnings.push(self.placed(ConfigError::placed_at(
                ConfigErrorKind::NoPlanWriter,
                self.origin(),
                at.location,
                at.snippet(),
                format!(
                    "planning mode `{}` offers no tool that can write a plan (its availableTools has none of the plan-writing tools, such as `write_plan`): a model there cannot author a plan to submit",
                    mode.id()
                ),
            )));
        }
        warnings
    }

    /// Warnings, not errors: every tool that writes ([`ToolAccess::Writes`] by `access`, the
    /// access of the controller's tool of that name, `None` for a name it has not) that a
    /// planning mode lists in its `availableTools`. Listed, it runs in the planning mode, before
    /// any plan is approved; unlisted, a planning mode offers only read-only tools and the plan
    /// tools. One warning per name, of kind [`ConfigErrorKind::PlanningModeWrites`], at the
    /// name's line and column, in text order.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_file\", \"submit_plan\"]\n[[modes]]\nid = \"build\"\n",
    ///     "modes.toml",
    /// )?;
    /// let tools = ToolRegistry::with_workspace_tools();
    /// let warnings = graph.planning_modes_listing_writers(|t| tools.get(t).map(|t| t.access()));
    /// assert_eq!(warnings.len(), 1);
    /// assert!(warnings[0].message().contains("`write_file`"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn planning_modes_listing_writers(
        &self,
        access: impl Fn(&str) -> Option<ToolAccess>,
    ) -> Vec<ConfigError> {
        let planning: Vec<bool> = self.modes().iter().map(Mode::is_planning).collect();
        let source = self.source();
        self.tool_refs()
            .iter()
            .filter(|r| !r.in_approval && planning[r.mode.index()])
            .filter(|r| access(&r.name) == Some(ToolAccess::Writes))
            .map(|r| {
                let at = source.position(r.span.clone());
                self.placed(ConfigError::placed_at(
ConfigErrorKind::PlanningModeWrites,

                        self.origin(),
                        at.location,
                        at.snippet(),
                        format!(
                            "planning mode `{}` lists `{}`, a tool that writes, in availableTools: it runs there before any plan is approved. Leave it out unless this mode must write (without availableTools a planning mode offers only read-only tools and the plan tools)",
                            self.mode(r.mode).id(),
                            r.name
                        ),
                    ))
            })
            .collect()
    }

    /// One error for every name [`ModeGraph::unknown_tools_among`] finds unknown among `known`
    /// (what [`crate::controller::AgentControllerBuilder::build`] returns), `None` when there is none: the
    /// first one's error, its message naming the others with their line and column, and saying
    /// which are built-in tools, which [`ToolRegistry::with_workspace_tools`] registers.
    pub(crate) fn unknown_tools_error(&self, known: &[&str]) -> Option<ConfigError> {
        let mut first = self.unknown_tools_among(known).into_iter().next()?;
        let refs: Vec<&ToolRef> = self
            .tool_refs()
            .iter()
            .filter(|r| {
                !is_builtin(&r.name) && !self.is_mcp_ref(&r.name) && !known.contains(&&*r.name)
            })
            .collect();
        let source = self.source();
        let others: Vec<String> = refs
            .iter()
            .skip(1)
            .map(|r| {
                let place = if self.has_positions() {
                    let at = source.position(r.span.clone()).location;
                    format!("{}:{}, ", at.line, at.column)
                } else {
                    String::new()
                };
                format!("`{}` ({place}mode `{}`)", r.name, self.mode(r.mode).id())
            })
            .collect();
        if !others.is_empty() {
            first.message = format!(
                "{}, and {} more: {}",
                first.message,
                others.len(),
                others.join(", ")
            );
        }
        let built_in = ToolRegistry::with_workspace_tools();
        let mut built: Vec<String> = Vec::new();
        for r in &refs {
            let name = format!("`{}`", r.name);
            if built_in.knows(&r.name) && !built.contains(&name) {
                built.push(name);
            }
        }
        let built = match built.as_slice() {
            [] => None,
            [one] => Some(format!("{one} is a built-in tool: register it")),
            [init @ .., last] => Some(format!(
                "{} and {last} are built-in tools: register them",
                init.join(", ")
            )),
        };
        if let Some(built) = built {
            first.message = format!(
                "{}. {built} with `ToolRegistry::with_workspace_tools()`",
                first.message
            );
        }
        Some(first)
    }

    /// Like [`ModeGraph::unknown_tools`] but stops at the first unknown name.
    ///
    /// # Errors
    /// [`ConfigErrorKind::UnknownTool`] for the first name `is_known` rejects.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ToolRegistry, config};
    /// let graph = config::parse("[[modes]]\nid = \"build\"\navailableTools = [\"read_file\"]\n", "modes.toml")?;
    /// let tools = ToolRegistry::with_workspace_tools();
    /// assert!(graph.check_tools(|name| tools.knows(name)).is_ok());
    /// assert!(graph.check_tools(|_| false).is_err());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn check_tools(&self, is_known: impl Fn(&str) -> bool) -> Result<(), ConfigError> {
        match self.unknown_tools(is_known).into_iter().next() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// `error` as is for a graph read from text; without its file position for one built in
    /// code.
    fn placed(&self, error: ConfigError) -> ConfigError {
        if self.has_positions() {
            error
        } else {
            error.stripped()
        }
    }
}

impl ToolRef {
    fn at(mode: ModeId, name: Arc<str>, span: Range<usize>, in_approval: bool) -> Self {
        ToolRef {
            mode,
            name,
            span,
            in_approval,
        }
    }
}

impl ModeGraph {
    /// The graph's text with its origin, to place its tool references (their spans) when an
    /// error reports them: one per report, so the index of its lines is built once for all.
    pub(crate) fn source(&self) -> Source<'_> {
        Source::new(self.origin(), self.text())
    }
}

/// Whether `name` is a built-in tool the controller provides itself (`submit_plan`, and
/// `ask_user` and the task tools, added when a mode lists them): never an unknown tool.
fn is_builtin(name: &str) -> bool {
    name == SUBMIT_PLAN
        || name == crate::tool::ASK_USER
        || name == SUBAGENT
        || crate::tool::tasks::is_task_tool(name)
}

#[cfg(test)]
mod tests {
    #[cfg(unix)]
    #[test]
    fn a_plans_dir_leading_outside_the_workspace_is_an_error_at_the_key_and_not_listed() {
        // Trial L14: `check` said ok for a plansDir symlinked out of the workspace and listed
        // the outside folder. Failed before: no error, and a warning naming the outside entry.
        let outside = tempfile::tempdir().expect("a directory");
        std::fs::write(outside.path().join("secret.txt"), "x").expect("write");
        let ws = tempfile::tempdir().expect("a directory");
        std::os::unix::fs::symlink(outside.path(), ws.path().join("plans")).expect("symlink");
        let text = "plansDir = \"plans\"\n[[modes]]\nid = \"build\"\n";
        let errors = super::workspace_errors(text, "modes.toml", ws.path());
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].kind(), super::ConfigErrorKind::InvalidPlansDir);
        assert_eq!(
            errors[0].location().map(|l| (l.line, l.column)),
            Some((1, 12))
        );
        let warnings = super::workspace_warnings(text, "modes.toml", ws.path());
        assert!(warnings.is_empty(), "{warnings:?}");
        std::fs::create_dir(ws.path().join("inside")).expect("dir");
        let inside = "plansDir = \"inside\"\n[[modes]]\nid = \"build\"\n";
        assert!(super::workspace_errors(inside, "modes.toml", ws.path()).is_empty());
    }

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(crate::hint::edit_distance("submit_plan", "submit_plan"), 0);
        assert_eq!(crate::hint::edit_distance("submitplan", "submit_plan"), 1);
        assert_eq!(crate::hint::edit_distance("sbumit_plan", "submit_plan"), 2);
        assert_eq!(crate::hint::edit_distance("", "abc"), 3);
        assert_eq!(crate::hint::edit_distance("kitten", "sitting"), 3);
    }

    use super::*;

    #[test]
    fn locate_reports_line_column_and_caret() {
        let source = Source::new("f.toml", "a = 1\nbé = \"x\"\n");
        let (loc, snippet) = source.locate(12..15);
        assert_eq!(loc, Location { line: 2, column: 6 });
        assert_eq!(snippet, "2 | bé = \"x\"\n  |      ^^^");
    }

    #[test]
    fn spans_are_located_forwards_and_backwards_alike() {
        let text = "a = 1\n\nbé = \"x\"\n  c = [\"y\"]\nlast";
        let spans = [0..1, 8..11, 13..16, 23..26, 31..35, 34..35];
        let expected: Vec<(Location, String)> = spans
            .iter()
            .map(|span| Source::new("f", text).locate(span.clone()))
            .collect();
        let source = Source::new("f", text);
        let forwards: Vec<_> = spans.iter().map(|s| source.locate(s.clone())).collect();
        assert_eq!(forwards, expected);
        let backwards: Vec<_> = spans
            .iter()
            .rev()
            .map(|s| source.locate(s.clone()))
            .collect();
        assert_eq!(backwards, expected.into_iter().rev().collect::<Vec<_>>());
        assert_eq!(source.locate(23..26).0, Location { line: 4, column: 7 });
    }

    /// Issue 19 item 7: a snippet on a long line shows a window around the offending text, cut
    /// with `…`, the carets under it; its column is still the column in the whole line.
    #[test]
    fn a_long_line_is_shown_as_a_window_around_the_offending_text() {
        let before = "é, ".repeat(1000);
        let text = format!("x = [{before}\"bad\", {}]\n", "ü, ".repeat(1000));
        let start = text.find("\"bad\"").expect("bad");
        let source = Source::new("f.toml", &text);
        let (location, snippet) = source.locate(start..start + 5);
        assert_eq!(
            location,
            Location {
                line: 1,
                column: 6 + 3 * 1000
            }
        );
        let (line, carets) = snippet.split_once('\n').expect("two lines");
        assert!(
            line.starts_with("1 | …") && line.ends_with('…'),
            "{snippet}"
        );
        assert!(line.chars().count() < 2 * SNIPPET_CONTEXT + 20, "{snippet}");
        let caret = carets.find('^').expect("carets");
        let marked: String = line.chars().skip(caret).take(5).collect();
        assert_eq!(marked, "\"bad\"", "{snippet}");
        assert_eq!(carets.trim_start_matches([' ', '|']).len(), 5, "{snippet}");
        // A short line is shown whole, as before.
        let (_, whole) = Source::new("f", "a = [\"bad\"]\n").locate(5..10);
        assert_eq!(whole, "1 | a = [\"bad\"]\n  |      ^^^^^");
    }

    #[test]
    fn ids_allow_ascii_letters_digits_dash_underscore_only() {
        assert!(is_valid_id("plan-2_b"));
        assert!(!is_valid_id(""));
        assert!(!is_valid_id("plan mode"));
        assert!(!is_valid_id("計画"));
    }
}
