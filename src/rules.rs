//! Rules on tool-call arguments, per mode: whether a call runs, waits for the user, or is
//! refused, decided by what it does and not only by which tool it is.
//!
//! A mode's `rules` list (after Roo Code's `fileRegex`/`commandRegex` and Claude Code's
//! `Bash(git:*)` permissions) holds rules of three kinds:
//!
//! ```toml
//! [[modes]]
//! id = "build"
//! availableTools = ["read_file", "write_file", "run_command"]
//! requireApproval = ["run_command"]
//! rules = [
//!   { tool = "write_file", path = "**/.env*", action = "deny" },
//!   { tool = "write_file", path = "src/**", action = "allow" },
//!   { tool = "run_command", arg = "command", glob = "git status*", action = "allow" },
//! ]
//! ```
//!
//! - **A path rule** (`path = GLOB`, on the argument `path`, or on the one `arg` names) matches
//!   the path *as the workspace jail resolved it* ([`crate::jail::Jail::resolve`]): `.` and
//!   `..` applied, symlinks inside the workspace followed. So `./src/../.env`, `src/../.env` and
//!   `src/link/.env` (with `src/link` a symlink to `..`) are all `.env`. In a path glob `*` and
//!   `?` stay within one folder and `**` crosses folders (`**/.env*` matches `.env` too). A
//!   `deny` or `ask` path rule matches ignoring case (`.GIT/hooks` is `.git/hooks` on a file
//!   system that ignores case), an `allow` path rule with the case as written ([`Glob`]).
//! - **A string rule** (`arg = NAME` with `glob = GLOB` or `regex = REGEX`) matches the
//!   argument's canonical value: a string as it is, any other value as its RFC 8785 text
//!   ([`crate::jcs`]: `42`, `true`, `["a","b"]`). In a string glob `*` matches any text, `/`
//!   included. A regex must match the whole value (it is anchored at both ends), and its `.`
//!   matches a line break too. A `deny` or `ask` string rule matches a value of several lines
//!   whole (`.*rm -rf.*` matches `echo ok\nrm -rf ~`); an `allow` string rule never matches a
//!   value with a line break in it (`git *` does not allow `git status\nrm -rf ~`: in doubt,
//!   nothing allows), so such a call gets what the other rules, or the mode's default, say.
//! - **A tool rule** (neither) matches every call of the tool.
//!
//! A rule's `tool` is a tool name or an MCP server's `SERVER__*` wildcard, which covers every
//! tool of the server, as in `availableTools` ([`Rule::is_on`]).
//!
//! **Precedence** ([`crate::mode::Mode::decide`]):
//! 1. the mode's `availableTools` outranks every rule: a tool the mode does not offer is refused
//!    whatever a rule says (`decidedBy: availableTools`);
//! 2. of the rules that match, `deny` beats `ask`, which beats `allow`; among rules of the same
//!    action the first listed decides (`decidedBy: rule N`, counted from 1 in the mode's list);
//! 3. a call no rule matches gets the mode's default: it waits when `requireApproval` covers
//!    the tool (`decidedBy: requireApproval`), else it runs (`decidedBy: default`).
//!
//! **Doubt** (the model is an attacker): a path argument that is not a string, or that cannot
//! be resolved inside the workspace (it leads outside, through `..` or a symlink), matches every
//! `deny` and `ask` path rule on it and no `allow` rule. A path argument the call leaves out is
//! the tool's default for it where the tool has one ([`crate::tool::Tool::locate`]: `list_files`
//! lists the workspace, so `list_files {}` is ruled as `.`). A rule on a server's `SERVER__*`
//! wildcard is on tools whose paths may go by other names (`paths`, `source`): a call of such a
//! tool without the rule's argument is in doubt, so it matches every `deny` and `ask` path rule
//! on the wildcard and no `allow` rule, and `check` warns at the rule about each such tool it
//! knows. Otherwise an argument the call leaves out matches no rule on it: a string rule, or a
//! path rule on a named tool with no default for it (the workspace tools other than
//! `list_files` require their `path`, so such a call is refused before it runs; a tool of your
//! own that does not should say its default in [`crate::tool::Tool::locate`]).
//!
//! A session applies the verdict to each tool call (`src/machine/ruling.rs`): a `deny` rule's
//! call never runs and the model is told the reason, an `ask` rule's waits for the user as under
//! `requireApproval`, an `allow` rule's runs without asking; the rule is named in the audit
//! record and the events ([`RuleRecord`]). An "always allow" lets through only what
//! `requireApproval` would hold, never a call a `deny` or `ask` rule decides.
//!
//! [`crate::mode::Mode::decide`] is pure: the paths come in already resolved ([`ResolvedPaths`], made by
//! [`resolve_paths`], which is the one part that reads the file system).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::explain::{Check, Step};
use crate::jail::Jail;
use crate::tool::{PathLocation, ToolCall};

/// The argument a path rule reads when it names none (`path = "src/**"` alone).
pub const DEFAULT_PATH_ARG: &str = "path";

/// What a rule does with a call it matches; ordered by strength (`Allow < Ask < Deny`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
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
    schemars(inline, schema_with = "crate::names::schema::<RuleAction>")
)]
pub enum RuleAction {
    /// The call runs without asking.
    Allow,
    /// The call waits for the user's approval, as under `requireApproval`.
    Ask,
    /// The call is refused, and the model is told which rule refused it.
    Deny,
}

impl RuleAction {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What part of a call a rule looks at, and the pattern it must fit.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Every call of the tool.
    Any,
    /// The path argument `arg`, as the workspace jail resolved it, fits the glob.
    Path {
        /// The argument holding the path.
        arg: Arc<str>,
        /// The glob ([`Glob::path`]).
        glob: Glob,
    },
    /// The canonical value of argument `arg` fits the glob.
    Glob {
        /// The argument.
        arg: Arc<str>,
        /// The glob ([`Glob::text`]).
        glob: Glob,
    },
    /// The canonical value of argument `arg` fits the regex, whole.
    Regex {
        /// The argument.
        arg: Arc<str>,
        /// The regex, as written.
        regex: Pattern,
    },
}

impl Matcher {
    /// The argument the matcher reads; `None` for [`Matcher::Any`].
    pub fn arg(&self) -> Option<&str> {
        match self {
            Matcher::Any => None,
            Matcher::Path { arg, .. } | Matcher::Glob { arg, .. } | Matcher::Regex { arg, .. } => {
                Some(arg)
            }
        }
    }

    /// The pattern as written; `None` for [`Matcher::Any`].
    pub fn pattern(&self) -> Option<&str> {
        match self {
            Matcher::Any => None,
            Matcher::Path { glob, .. } => Some(glob.as_str()),
            Matcher::Glob { glob, .. } => Some(glob.as_str()),
            Matcher::Regex { regex, .. } => Some(regex.as_str()),
        }
    }

    /// The key the pattern is written under: `path`, `glob` or `regex`; `None` for
    /// [`Matcher::Any`].
    pub fn key(&self) -> Option<&'static str> {
        match self {
            Matcher::Any => None,
            Matcher::Path { .. } => Some("path"),
            Matcher::Glob { .. } => Some("glob"),
            Matcher::Regex { .. } => Some("regex"),
        }
    }
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key() && self.arg() == other.arg() && self.pattern() == other.pattern()
    }
}

pub use crate::glob::{Glob, PatternError};

/// Largest compiled size of a rule's regex (1 MiB), so a config cannot make matching slow.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A regex that must match a whole value (anchored at both ends).
#[derive(Debug, Clone)]
pub struct Pattern {
    text: Arc<str>,
    regex: regex::Regex,
}

impl Pattern {
    /// Compiles `text`, anchored at both ends, with `.` matching any character, a line break
    /// included (as `*` does in a string glob): a value of several lines is matched whole.
    ///
    /// # Errors
    /// [`PatternError`] when `text` is not a regex (the `regex` crate's syntax) or compiles to
    /// more than 1 MiB.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::Pattern;
    /// let status = Pattern::new("git (status|diff)( .*)?")?;
    /// assert!(status.is_match("git status"));
    /// assert!(!status.is_match("rm -rf / ; git status"));
    /// assert!(Pattern::new(".*rm -rf.*")?.is_match("echo ok\nrm -rf ~"));
    /// # Ok::<(), agent_controller::rules::PatternError>(())
    /// ```
    pub fn new(text: &str) -> Result<Self, PatternError> {
        // The pattern alone must parse: `a)|(b` would balance the wrapper below and match
        // unanchored.
        regex_syntax::Parser::new()
            .parse(text)
            .map_err(|e| PatternError::new(&syntax_error(&e)))?;
        // `.` matches a line break too: `.*rm -rf.*` must see `echo ok\nrm -rf ~`.
        let regex = regex::RegexBuilder::new(&format!("^(?:{text})$"))
            .dot_matches_new_line(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| PatternError::new(&regex_error(&e)))?;
        Ok(Self {
            text: Arc::from(text),
            regex,
        })
    }

    /// The regex as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `value` fits, whole.
    pub fn is_match(&self, value: &str) -> bool {
        self.regex.is_match(value)
    }
}

/// The parser's message on one line (its `Display` draws the pattern and a caret).
fn syntax_error(e: &regex_syntax::Error) -> String {
    match e {
        regex_syntax::Error::Parse(e) => e.kind().to_string(),
        regex_syntax::Error::Translate(e) => e.kind().to_string(),
        other => other.to_string(),
    }
}

fn regex_error(e: &regex::Error) -> String {
    match e {
        regex::Error::CompiledTooBig(limit) => {
            format!("the regex compiles to more than {limit} bytes: write a simpler one")
        }
        other => other.to_string(),
    }
}

/// Where a config writes a rule, kept so the checks against a controller's tools can point at
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RulePlace {
    /// The rule's number in its mode's list as written (from 1).
    pub(crate) number: usize,
    /// The `tool` value: its line and column (1-based) and two-line snippet.
    pub(crate) tool: (usize, usize, String),
    /// The `arg` value, else the pattern's.
    pub(crate) arg: (usize, usize, String),
}

/// One rule of a mode: a tool, what of its call to look at, and what to do on a match.
#[derive(Debug, Clone)]
pub struct Rule {
    tool: Arc<str>,
    matcher: Matcher,
    action: RuleAction,
    /// Whether the rule matches the calls whose value does *not* fit its pattern (`not = true`).
    negated: bool,
    /// Where the config writes it (none for a rule made in code).
    place: Option<Box<RulePlace>>,
    /// For an `ask` rule: how many approvals by distinct identities a call it holds needs
    /// (`approvers`, 1 to 16; [`crate::quorum`]).
    approvers: u8,
}

/// Two rules are equal when they do the same, wherever they are written.
impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.tool == other.tool
            && self.matcher == other.matcher
            && self.action == other.action
            && self.negated == other.negated
            && self.approvers == other.approvers
    }
}

impl Rule {
    /// A rule on calls of `tool`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::{Glob, Matcher, Rule, RuleAction};
    /// let rule = Rule::new(
    ///     "write_file",
    ///     Matcher::Path { arg: "path".into(), glob: Glob::path("**/.env*")? },
    ///     RuleAction::Deny,
    /// );
    /// assert_eq!(rule.to_string(), "deny write_file path `**/.env*`");
    /// # Ok::<(), agent_controller::rules::PatternError>(())
    /// ```
    pub fn new(tool: impl Into<Arc<str>>, matcher: Matcher, action: RuleAction) -> Self {
        Self {
            tool: tool.into(),
            matcher,
            action,
            negated: false,
            place: None,
            approvers: 1,
        }
    }

    /// The same rule, whose calls (an `ask` rule's) need `approvers` approvals by distinct
    /// identities before they run (`approvers = 2` on the rule in a config; 0 counts as 1;
    /// [`crate::quorum`]). On an `allow` or `deny` rule it has no effect.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::{Matcher, Rule, RuleAction};
    /// let rule = Rule::new("bash", Matcher::Any, RuleAction::Ask).approvers(2);
    /// assert_eq!(rule.needs_approvers(), 2);
    /// ```
    pub fn approvers(mut self, approvers: u8) -> Self {
        self.approvers = approvers.max(1);
        self
    }

    /// How many approvals by distinct identities a call this rule holds needs (1 but for an
    /// `ask` rule with `approvers`, [`Rule::approvers`]).
    pub fn needs_approvers(&self) -> u8 {
        if self.action == RuleAction::Ask {
            self.approvers
        } else {
            1
        }
    }

    /// The same rule, negated (`not = true` in a config): it matches the calls whose value does
    /// *not* fit its pattern (a path outside `src/**`). Doubt is read as before: a path in
    /// doubt matches a negated `deny` or `ask` rule and no `allow` rule, and a negated `allow`
    /// rule allows a path only when it fits the pattern in no case (`SRC/a` is not outside
    /// `src/**` on a file system that ignores case), a negated `deny` or `ask` rule refuses
    /// unless it fits as written. A rule without a pattern ([`Matcher::Any`]) stays as it is.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::{Glob, Matcher, ResolvedPaths, Rule, RuleAction, Rules};
    /// use agent_controller::ToolCall;
    /// let only_src = Rule::new(
    ///     "write_file",
    ///     Matcher::Path { arg: "path".into(), glob: Glob::path("src/**")? },
    ///     RuleAction::Deny,
    /// )
    /// .negated();
    /// assert_eq!(only_src.to_string(), "deny write_file path not `src/**`");
    /// let rules = Rules::new(vec![only_src]);
    /// let call = ToolCall::new("c1", "write_file", serde_json::json!({"path": "docs/a.md"}));
    /// let outside = ResolvedPaths::new().with("path", "docs/a.md");
    /// assert!(rules.deciding(&call, &outside).is_some());
    /// let inside = ResolvedPaths::new().with("path", "src/a.rs");
    /// assert!(rules.deciding(&call, &inside).is_none());
    /// # Ok::<(), agent_controller::rules::PatternError>(())
    /// ```
    pub fn negated(mut self) -> Self {
        self.negated = !matches!(self.matcher, Matcher::Any);
        self
    }

    /// Whether the rule matches the calls whose value does not fit its pattern
    /// ([`Rule::negated`]).
    pub fn is_negated(&self) -> bool {
        self.negated
    }

    /// The same rule, written at `place` in a config.
    pub(crate) fn placed(mut self, place: RulePlace) -> Self {
        self.place = Some(Box::new(place));
        self
    }

    /// Where the config writes the rule, if it came from one.
    pub(crate) fn place(&self) -> Option<&RulePlace> {
        self.place.as_deref()
    }

    /// The line and column of the rule's `tool` value, as `LINE:COL`, if a config wrote it
    /// (the explanation puts the file name before it).
    pub(crate) fn line_column(&self) -> Option<String> {
        self.place
            .as_deref()
            .map(|p| format!("{}:{}", p.tool.0, p.tool.1))
    }

    /// The tool the rule is on, as written: a tool name, or an MCP server's `SERVER__*`
    /// wildcard, which covers every tool of the server ([`crate::tool::mcp::wildcard_covers`],
    /// as in `availableTools`).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Whether the rule is on calls of the tool `name`: its tool is `name`, or a `SERVER__*`
    /// wildcard that covers it.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::{Matcher, Rule, RuleAction};
    /// let rule = Rule::new("fs__*", Matcher::Any, RuleAction::Ask);
    /// assert!(rule.is_on("fs__write_file") && !rule.is_on("fsx__write_file"));
    /// ```
    pub fn is_on(&self, name: &str) -> bool {
        *self.tool == *name || crate::tool::mcp::wildcard_covers(&self.tool, name)
    }

    /// What of the call the rule looks at.
    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// What the rule does on a match.
    pub fn action(&self) -> RuleAction {
        self.action
    }

    /// Whether the rule matches `call` (whose path arguments `paths` resolved), and on what:
    /// `None` when it does not.
    fn matches(&self, call: &ToolCall, paths: &ResolvedPaths) -> Option<Fit> {
        if !self.is_on(&call.name) {
            return None;
        }
        let arg = match &self.matcher {
            Matcher::Any => return Some(Fit::Call),
            other => other.arg().unwrap_or_default(),
        };
        if let Matcher::Path { glob, .. } = &self.matcher {
            return self.fits_path(glob, arg, call, paths);
        }
        let value = call.args.get(arg)?;
        match &self.matcher {
            Matcher::Glob { glob, .. } => self.fits_text(value, |text| glob.is_match(text)),
            Matcher::Regex { regex, .. } => self.fits_text(value, |text| regex.is_match(text)),
            Matcher::Any | Matcher::Path { .. } => None,
        }
    }

    /// Whether a path rule's `glob` fits argument `arg` of `call`, as `paths` resolved it.
    fn fits_path(
        &self,
        glob: &Glob,
        arg: &str,
        call: &ToolCall,
        paths: &ResolvedPaths,
    ) -> Option<Fit> {
        let asks = self.action > RuleAction::Allow;
        let doubt = |why: String| asks.then_some(Fit::Doubt(why));
        match paths.get(arg) {
            // A deny or ask rule matches whatever the case: on a file system that ignores case
            // `.GIT/hooks` is `.git/hooks`. An allow rule allows only what it names.
            // Negated, in doubt the other way round: a deny or ask rule refuses unless the
            // path fits as written, an allow rule allows only what fits in no case.
            Some(ResolvedPath::Inside(path)) if self.negated => {
                let fits = if asks {
                    glob.is_match(path)
                } else {
                    glob.is_match_ignoring_case(path)
                };
                (!fits).then(|| Fit::Value(path.clone()))
            }
            Some(ResolvedPath::Inside(path))
                if (asks && glob.is_match_ignoring_case(path)) || glob.is_match(path) =>
            {
                Some(Fit::Value(path.clone()))
            }
            Some(ResolvedPath::Inside(_)) => None,
            // A path not known to lie inside: never allowed by a rule, always denied or asked
            // by one.
            Some(ResolvedPath::Doubtful(why)) | Some(ResolvedPath::NotAString(why)) => {
                doubt(why.clone())
            }
            None if call.args.get(arg).is_some() => doubt("its path was not resolved".to_owned()),
            // A rule on a server's `SERVER__*` covers tools whose paths go by other names
            // (`paths`, `source`): a call without the argument is in doubt, not let through.
            None if crate::tool::mcp::wildcard_covers(&self.tool, &call.name) => doubt(format!(
                "`{}` has no argument `{arg}`, so where it reads or writes is not known",
                call.name
            )),
            // A named tool's call without the argument: the tool refuses it, or its default
            // was resolved (`resolve_paths`).
            None => None,
        }
    }

    /// Whether a string rule fits `value`'s canonical text, by `is_match`.
    fn fits_text(&self, value: &Value, is_match: impl Fn(&str) -> bool) -> Option<Fit> {
        // An allow rule fits a scalar only: the text of an array or object holds several values
        // (a `*` spans them, and `["src/a", "../x"]` has no `..` component of its own), so it is
        // in doubt, and doubt never allows. Deny and ask rules match the text of any value.
        if self.action == RuleAction::Allow && (value.is_array() || value.is_object()) {
            return None;
        }
        let text = canonical_value(value);
        // An allow rule fits one line only: a line break in a value is in doubt (a shell runs
        // each line), and doubt never allows. Deny and ask rules match across lines.
        if self.action == RuleAction::Allow && (is_multi_line(&text) || has_dot_component(&text)) {
            return None;
        }
        (is_match(&text) != self.negated).then_some(Fit::Value(text))
    }
}

/// The step rule `number` leaves when it is on the call's tool: whether it matched, and on
/// what.
fn rule_step(number: usize, rule: &Rule, fit: Option<&Fit>) -> Step {
    let found = match fit {
        None => "does not match".to_owned(),
        Some(Fit::Call) => "matches every call of the tool".to_owned(),
        Some(Fit::Value(value)) => format!("matches `{}`", shorten(value)),
        Some(Fit::Doubt(why)) => format!("matches: the path is in doubt ({})", shorten(why)),
    };
    Step {
        check: Check::Rule(number),
        at: rule.line_column(),
        finding: format!("{} ({rule}) {found}", rule.action),
    }
}

/// Whether `text`, read as a path, has a `.` or `..` component (split at `/` and `\\`): a
/// string rule reads the text as sent, so `src/../.env` would fit `src/*`; such a value is in
/// doubt for an allow rule, which then does not fit it (a `path` rule reads the resolved path).
fn has_dot_component(text: &str) -> bool {
    text.split(['/', '\\'])
        .any(|part| part == "." || part == "..")
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.action, self.tool)?;
        let not = if self.negated { " not" } else { "" };
        match &self.matcher {
            Matcher::Any => Ok(()),
            Matcher::Path { arg, glob } if &**arg == DEFAULT_PATH_ARG => {
                write!(f, " path{not} `{}`", glob.as_str())
            }
            Matcher::Path { arg, glob } => write!(f, " {arg} path{not} `{}`", glob.as_str()),
            Matcher::Glob { arg, glob } => write!(f, " {arg} glob{not} `{}`", glob.as_str()),
            Matcher::Regex { arg, regex } => write!(f, " {arg} regex{not} `{}`", regex.as_str()),
        }
    }
}

/// Whether `text` holds a line break (`\n`, `\r`, or another Unicode one): more than one line
/// to a shell or a reader.
fn is_multi_line(text: &str) -> bool {
    text.contains([
        '\n', '\r', '\u{0b}', '\u{0c}', '\u{85}', '\u{2028}', '\u{2029}',
    ])
}

/// What a rule matched: the whole call, a value, or a path in doubt.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fit {
    Call,
    Value(String),
    Doubt(String),
}

/// The value a string rule matches: a string as it is, any other value as its RFC 8785 text.
///
/// # Examples
/// ```
/// use agent_controller::rules::canonical_value;
/// use serde_json::json;
/// assert_eq!(canonical_value(&json!("git status")), "git status");
/// assert_eq!(canonical_value(&json!(1.0)), "1");
/// assert_eq!(canonical_value(&json!({"b": 1, "a": [true]})), r#"{"a":[true],"b":1}"#);
/// ```
pub fn canonical_value(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => crate::jcs::to_string(other),
    }
}

/// A mode's rules, in the order written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rules(Vec<Rule>, Vec<RuleSource>);

/// Where rule N of a subagent's narrowed mode ([`Rules::layered`]) is written: in the parent's
/// mode (as its rule N), or in the subagent type (as its rule N, or, `None`, the `ask` its
/// `requireApproval` adds).
#[derive(Debug, Clone, PartialEq, Eq)]
enum RuleSource {
    Mode(usize),
    Subagent {
        agent_type: Arc<str>,
        number: Option<usize>,
    },
}

impl Rules {
    /// The rules `rules`, in order (rule 1 first).
    pub fn new(rules: Vec<Rule>) -> Self {
        Self(rules, Vec::new())
    }

    /// A subagent's rules: the parent mode's `parent`, then the rules of subagent type
    /// `agent_type` (`own`: each with its number in the type's `rules` list), then the `ask`
    /// rules its `requireApproval` adds (`waits`). Each is still known by where it is written
    /// ([`Rules::source_of`]), so a record names the type's rule N as the type's, not as the
    /// parent mode's rule.
    pub(crate) fn layered(
        parent: &Rules,
        agent_type: &str,
        own: impl IntoIterator<Item = (usize, Rule)>,
        waits: impl IntoIterator<Item = Rule>,
    ) -> Self {
        let agent_type: Arc<str> = Arc::from(agent_type);
        let mut rules = parent.0.clone();
        let mut sources: Vec<RuleSource> = (1..=rules.len()).map(|n| parent.source(n)).collect();
        for (number, rule) in own {
            rules.push(rule);
            sources.push(RuleSource::Subagent {
                agent_type: agent_type.clone(),
                number: Some(number),
            });
        }
        for rule in waits {
            rules.push(rule);
            sources.push(RuleSource::Subagent {
                agent_type: agent_type.clone(),
                number: None,
            });
        }
        Self(rules, sources)
    }

    /// Where rule `number` (of this list, from 1) is written.
    fn source(&self, number: usize) -> RuleSource {
        number
            .checked_sub(1)
            .and_then(|i| self.1.get(i))
            .cloned()
            .unwrap_or(RuleSource::Mode(number))
    }

    /// Rule `number` (of this list, from 1) as a reason names it: `rule N of mode `M``, or, for
    /// a rule a subagent type adds ([`Rules::layered`]), `rule N of subagent type `T` (in mode
    /// `M`)` with N its number in the type's list.
    fn label(&self, number: usize, mode: &str) -> String {
        match self.source(number) {
            RuleSource::Mode(n) => format!("rule {n} of mode `{mode}`"),
            RuleSource::Subagent {
                agent_type,
                number: Some(n),
            } => format!("rule {n} of subagent type `{agent_type}` (in mode `{mode}`)"),
            RuleSource::Subagent {
                agent_type,
                number: None,
            } => format!("the requireApproval of subagent type `{agent_type}` (in mode `{mode}`)"),
        }
    }

    /// The rules in order; rule N is `as_slice()[N - 1]`.
    pub fn as_slice(&self) -> &[Rule] {
        &self.0
    }

    /// Whether the mode has no rules.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The path arguments some rule on `tool` reads, each once, in rule order.
    pub fn path_args(&self, tool: &str) -> Vec<&str> {
        let mut args: Vec<&str> = Vec::new();
        for rule in self.0.iter().filter(|r| r.is_on(tool)) {
            if let Matcher::Path { arg, .. } = &rule.matcher
                && !args.contains(&&**arg)
            {
                args.push(arg);
            }
        }
        args
    }

    /// The rule that decides `call`: of those that match, the strongest action, and among
    /// those the first; `None` when no rule matches.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::{Glob, Matcher, ResolvedPaths, Rule, RuleAction, Rules};
    /// use agent_controller::ToolCall;
    /// let rules = Rules::new(vec![
    ///     Rule::new("write_file", Matcher::Path { arg: "path".into(), glob: Glob::path("src/**")? }, RuleAction::Allow),
    ///     Rule::new("write_file", Matcher::Path { arg: "path".into(), glob: Glob::path("**/*.lock")? }, RuleAction::Deny),
    /// ]);
    /// let call = ToolCall::new("c1", "write_file", serde_json::json!({"path": "src/Cargo.lock", "content": ""}));
    /// let paths = ResolvedPaths::new().with("path", "src/Cargo.lock");
    /// let (number, rule) = rules.deciding(&call, &paths).unwrap();
    /// assert_eq!((number, rule.action()), (2, RuleAction::Deny));
    /// # Ok::<(), agent_controller::rules::PatternError>(())
    /// ```
    pub fn deciding(&self, call: &ToolCall, paths: &ResolvedPaths) -> Option<(usize, &Rule)> {
        self.deciding_fit(call, paths, &mut Vec::new())
            .map(|(number, rule, _)| (number, rule))
    }

    /// [`Rules::deciding`], with the fit of the deciding rule; each rule on the call's tool
    /// leaves a step in `steps` saying whether it matched.
    fn deciding_fit(
        &self,
        call: &ToolCall,
        paths: &ResolvedPaths,
        steps: &mut Vec<Step>,
    ) -> Option<(usize, &Rule, Fit)> {
        let mut best: Option<(usize, &Rule, Fit)> = None;
        for (i, rule) in self.0.iter().enumerate() {
            let matched = rule.matches(call, paths);
            if rule.is_on(&call.name) {
                steps.push(rule_step(i + 1, rule, matched.as_ref()));
            }
            let Some(fit) = matched else {
                continue;
            };
            let stronger = best
                .as_ref()
                .is_none_or(|(_, b, _)| rule.action.cmp(&b.action) == Ordering::Greater);
            if stronger {
                best = Some((i + 1, rule, fit));
            }
        }
        best
    }
}

/// Where a path argument of a call lies, as the workspace jail resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedPath {
    /// Inside the workspace, at this relative path (folders separated by `/`, no `.` or `..`;
    /// empty for the workspace itself).
    Inside(String),
    /// Not known to lie inside (it leads outside, or could not be resolved), and why.
    Doubtful(String),
    /// The argument is not a string, and what it is.
    NotAString(String),
}

/// The path arguments of one call, resolved ([`resolve_paths`]): argument name to where it lies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedPaths(BTreeMap<String, ResolvedPath>);

impl ResolvedPaths {
    /// No resolved paths.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same, with argument `arg` resolved to `path` inside the workspace (for tests and
    /// hosts that resolve paths themselves).
    pub fn with(mut self, arg: &str, path: &str) -> Self {
        self.0
            .insert(arg.to_owned(), ResolvedPath::Inside(path.to_owned()));
        self
    }

    /// The same, with argument `arg` resolved to `resolved`.
    pub fn with_resolved(mut self, arg: &str, resolved: ResolvedPath) -> Self {
        self.0.insert(arg.to_owned(), resolved);
        self
    }

    /// Where argument `arg` lies, if it was resolved.
    pub fn get(&self, arg: &str) -> Option<&ResolvedPath> {
        self.0.get(arg)
    }
}

/// Resolves, beneath the workspace at `workspace`, every path argument of `call` that a rule of
/// `rules` reads, as a tool that takes its paths relative to the workspace reads them (the
/// default of [`crate::tool::Tool::locate`]): the file system is read here (symlinks followed
/// inside the workspace), and nowhere in [`crate::mode::Mode::decide`]. An argument the call
/// leaves out is left out. A session resolves with the tool's own
/// [`crate::tool::Tool::locate`] ([`resolve_paths_for`]).
///
/// # Examples
/// ```
/// use agent_controller::rules::{ResolvedPath, Rules, resolve_paths};
/// # let ws = tempfile::tempdir()?;
/// std::fs::create_dir(ws.path().join("src"))?;
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", path = \"**/.env*\", action = \"deny\" }]\n",
///     "modes.toml",
/// )?;
/// let call = agent_controller::ToolCall::new("c1", "write_file", serde_json::json!({"path": "./src/../.env"}));
/// let paths = resolve_paths(graph.default_mode().rules(), &call, ws.path());
/// assert_eq!(paths.get("path"), Some(&ResolvedPath::Inside(".env".to_owned())));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn resolve_paths(rules: &Rules, call: &ToolCall, workspace: &Path) -> ResolvedPaths {
    resolve_with(&rules.path_args(&call.name), call, workspace, |_, path| {
        path.map(|path| crate::tool::in_workspace(workspace, path))
    })
}

/// Resolves every path argument of `call` that a rule of `rules` reads where `tool` (the
/// call's tool) takes it ([`crate::tool::Tool::locate`], with `ctx`'s workspace and plans
/// directory), then follows the symlinks in it inside the workspace: the path the tool opens,
/// which is what the rules match. An argument the call leaves out is resolved to the tool's
/// default for it, if it has one (`list_files` lists the workspace), else left out.
///
/// # Examples
/// ```
/// use agent_controller::rules::{ResolvedPath, resolve_paths_for};
/// use agent_controller::tool::{ToolContext, fs::WritePlan};
/// # let ws = tempfile::tempdir()?;
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\nrules = [{ tool = \"write_plan\", path = \".agent/plans/final.md\", action = \"deny\" }]\n",
///     "modes.toml",
/// )?;
/// let plans = ws.path().join(".agent/plans");
/// let ctx = ToolContext::new(ws.path(), &plans, "plan");
/// let call = agent_controller::ToolCall::new("c1", "write_plan", serde_json::json!({"path": "final.md"}));
/// let paths = resolve_paths_for(graph.default_mode().rules(), &call, &WritePlan, &ctx);
/// assert_eq!(paths.get("path"), Some(&ResolvedPath::Inside(".agent/plans/final.md".to_owned())));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn resolve_paths_for(
    rules: &Rules,
    call: &ToolCall,
    tool: &dyn crate::tool::Tool,
    ctx: &crate::tool::ToolContext<'_>,
) -> ResolvedPaths {
    resolve_with(
        &rules.path_args(&call.name),
        call,
        ctx.workspace,
        |arg, path| tool.locate(arg, path, ctx),
    )
}

/// Where each path `call` writes leads ([`crate::tool::Tool::written_path_args`] of `tool`,
/// the call's tool), resolved as [`resolve_paths_for`] resolves a rule's path argument: where
/// the tool takes it, then the symlinks in it followed inside the workspace. An argument the
/// call leaves out, and the tool has no default for, is left out.
pub(crate) fn resolve_written(
    call: &ToolCall,
    tool: &dyn crate::tool::Tool,
    ctx: &crate::tool::ToolContext<'_>,
) -> Vec<(String, ResolvedPath)> {
    let args = tool.written_path_args(&call.args);
    let names: Vec<&str> = args.iter().map(String::as_str).collect();
    let resolved = resolve_with(&names, call, ctx.workspace, |arg, path| {
        tool.locate(arg, path, ctx)
    });
    resolved.0.into_iter().collect()
}

/// Where each path argument of `call` leads, for the approver of a call that waits: the
/// argument `path` ([`DEFAULT_PATH_ARG`]) and every other argument a path rule of `rules` reads
/// for the call's tool, each a string the call gives, resolved as the rules resolve it
/// ([`resolve_paths_for`]: where `tool` takes it, then the symlinks in it followed inside the
/// workspace; a call of a tool the registry lacks, `tool` `None`, relative to the workspace).
/// In the order the arguments are named, `path` first.
///
/// The one place the resolved location a host shows is computed: the session stores it with
/// the waiting call ([`crate::event::ToolCallPayload::locations`]), and every host shows it
/// from there ([`ResolvedLocation::shown`]).
///
/// # Examples
/// ```
/// # #[cfg(unix)] {
/// use agent_controller::rules::{Rules, locate_path_args};
/// use agent_controller::tool::{ToolContext, fs::WriteFile};
/// # let ws = tempfile::tempdir()?;
/// std::fs::create_dir(ws.path().join("src"))?;
/// std::fs::write(ws.path().join("src/main.rs"), "fn main() {}\n")?;
/// std::os::unix::fs::symlink("src/main.rs", ws.path().join("notes.md"))?;
/// let plans = ws.path().join(".agent/plans");
/// let ctx = ToolContext::new(ws.path(), &plans, "build");
/// let call = agent_controller::ToolCall::new("c1", "write_file", serde_json::json!({"path": "notes.md"}));
/// let located = locate_path_args(&Rules::default(), &call, Some(&WriteFile), &ctx);
/// assert_eq!(located[0].path.as_deref(), Some("src/main.rs"));
/// assert_eq!(located[0].shown(), "path notes.md -> src/main.rs");
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn locate_path_args(
    rules: &Rules,
    call: &ToolCall,
    tool: Option<&dyn crate::tool::Tool>,
    ctx: &crate::tool::ToolContext<'_>,
) -> Vec<ResolvedLocation> {
    let mut args = vec![DEFAULT_PATH_ARG];
    args.extend(
        rules
            .path_args(&call.name)
            .into_iter()
            .filter(|a| *a != DEFAULT_PATH_ARG),
    );
    // Only what the call gives: a left-out argument has nothing typed to compare.
    args.retain(|arg| call.args.get(*arg).is_some_and(Value::is_string));
    if args.is_empty() {
        return Vec::new();
    }
    let resolved = resolve_with(&args, call, ctx.workspace, |arg, path| match tool {
        Some(tool) => tool.locate(arg, path, ctx),
        None => path.map(|path| crate::tool::in_workspace(ctx.workspace, path)),
    });
    args.iter()
        .filter_map(|arg| {
            let given = call.args.get(*arg)?.as_str()?.to_owned();
            let (path, doubt) = match resolved.get(arg)? {
                ResolvedPath::Inside(path) => (Some(path.clone()), None),
                ResolvedPath::Doubtful(why) | ResolvedPath::NotAString(why) => {
                    (None, Some(why.clone()))
                }
            };
            Some(ResolvedLocation {
                arg: (*arg).to_owned(),
                given,
                path,
                doubt,
            })
        })
        .collect()
}

/// Where a path argument of a tool call that waits for approval leads, resolved when it began
/// to wait ([`locate_path_args`]): as the tool takes the path (`write_plan` puts a bare name
/// in the plans directory) and after the symlinks in it inside the workspace. The approver is
/// shown it beside the argument as the model typed it whenever the two differ
/// ([`ResolvedLocation::shown`]: `path notes.md -> src/main.rs`), so that a call that writes
/// `src/main.rs` through the symlink `notes.md` is seen to.
///
/// As JSON (in `tool_suspended`'s payload, the record, `pending --json`):
/// `{"arg": "path", "given": "notes.md", "path": "src/main.rs"}`, or with `doubt` in place of
/// `path` for a path not known to lie inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ResolvedLocation {
    /// The argument (`path`).
    pub arg: String,
    /// Its value, as the model typed it.
    pub given: String,
    /// Where it leads, relative to the workspace (folders separated by `/`, no `.` or `..`;
    /// empty for the workspace itself); `None` when that is in doubt (`doubt` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Why it is not known to lie inside the workspace (it leads outside, through `..` or a
    /// symlink, or cannot be resolved), when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doubt: Option<String>,
}

impl ResolvedLocation {
    /// Whether it leads elsewhere than it reads (or in doubt): then hosts show where.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::ResolvedLocation;
    /// let at = |given: &str, path: &str| ResolvedLocation {
    ///     arg: "path".into(), given: given.into(), path: Some(path.into()), doubt: None,
    /// };
    /// assert!(!at("src/a.rs", "src/a.rs").differs());
    /// assert!(at("notes.md", "src/main.rs").differs());
    /// ```
    pub fn differs(&self) -> bool {
        self.path.as_deref() != Some(self.given.as_str())
    }

    /// How every host shows it, on one line, each part through
    /// [`crate::display::neutralize_line`]: `path notes.md -> src/main.rs`, `path ../x -> not
    /// inside the workspace: WHY`, or `path src/a.rs` when it leads where it reads.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::ResolvedLocation;
    /// let doubt = ResolvedLocation {
    ///     arg: "path".into(), given: "../x".into(), path: None, doubt: Some("it leads outside".into()),
    /// };
    /// assert_eq!(doubt.shown(), "path ../x -> not inside the workspace: it leads outside");
    /// ```
    pub fn shown(&self) -> String {
        use crate::display::neutralize_line;
        let head = format!(
            "{} {}",
            neutralize_line(&self.arg),
            neutralize_line(&self.given)
        );
        if self.differs() {
            format!("{head} -> {}", self.leads_to())
        } else {
            head
        }
    }

    /// Where it leads, as [`ResolvedLocation::shown`] says it after the arrow: the path, `.
    /// (the workspace)`, or `not inside the workspace: WHY`.
    fn leads_to(&self) -> String {
        use crate::display::neutralize_line;
        match (&self.path, &self.doubt) {
            (Some(path), _) if path.is_empty() => ". (the workspace)".to_owned(),
            (Some(path), _) => neutralize_line(path).into_owned(),
            (None, why) => format!(
                "not inside the workspace: {}",
                neutralize_line(why.as_deref().unwrap_or("it cannot be resolved"))
            ),
        }
    }

    /// The argument as typed, where it leads where it reads: what an approver who was shown
    /// no location for it saw.
    fn as_typed(&self) -> Self {
        Self {
            path: Some(self.given.clone()),
            doubt: None,
            ..self.clone()
        }
    }
}

/// Why a call approved where `shown` said its paths lead must not run, now that they lead
/// where `now` says, if they moved: `shown` is what the approver was shown (the call's
/// [`crate::event::ToolCallPayload::locations`], which keeps only those that lead elsewhere
/// than they read: an argument it lacks was shown as typed), `now` where each path argument
/// leads just before the call runs ([`locate_path_args`], all of them). A path that leads
/// elsewhere, or that was shown and cannot be resolved now, moved: a symlink changed between
/// the approval and the run (another call of the reply, a restore, anything in the
/// workspace), and the approval does not reach where it leads now. `None` when each leads
/// where it was shown.
///
/// The one rule the session runs an approved call by ([`crate::Session::decide`]).
///
/// # Examples
/// ```
/// use agent_controller::rules::{ResolvedLocation, moved_since_shown};
/// let at = |given: &str, path: &str| ResolvedLocation {
///     arg: "path".into(), given: given.into(), path: Some(path.into()), doubt: None,
/// };
/// let shown = [at("notes.md", "src/main.rs")];
/// assert_eq!(moved_since_shown(&shown, &[at("notes.md", "src/main.rs")]), None);
/// assert_eq!(
///     moved_since_shown(&shown, &[at("notes.md", "secret.txt")]).as_deref(),
///     Some("where its path leads changed after it was approved: `path notes.md` led to \
///           `src/main.rs` and now leads to `secret.txt`; call it again to have it approved \
///           where it leads now")
/// );
/// // Shown as typed (no location kept), it now leads elsewhere.
/// assert!(moved_since_shown(&[], &[at("plain.txt", "src/main.rs")]).is_some());
/// assert_eq!(moved_since_shown(&[], &[at("plain.txt", "plain.txt")]), None);
/// ```
pub fn moved_since_shown(shown: &[ResolvedLocation], now: &[ResolvedLocation]) -> Option<String> {
    use crate::display::neutralize_line;
    let named = |loc: &ResolvedLocation| {
        format!(
            "`{} {}`",
            neutralize_line(&loc.arg),
            neutralize_line(&loc.given)
        )
    };
    let mut moved: Vec<String> = now
        .iter()
        .filter_map(|now| {
            let was = shown
                .iter()
                .find(|s| s.arg == now.arg)
                .cloned()
                .unwrap_or_else(|| now.as_typed());
            (was.path != now.path || was.doubt != now.doubt).then(|| {
                format!(
                    "{} led to `{}` and now leads to `{}`",
                    named(now),
                    was.leads_to(),
                    now.leads_to()
                )
            })
        })
        .collect();
    moved.extend(
        shown
            .iter()
            .filter(|s| !now.iter().any(|n| n.arg == s.arg))
            .map(|s| {
                format!(
                    "{} led to `{}` and cannot be resolved now",
                    named(s),
                    s.leads_to()
                )
            }),
    );
    (!moved.is_empty()).then(|| {
        format!(
            "where its path leads changed after it was approved: {}; call it again to have it \
             approved where it leads now",
            moved.join("; ")
        )
    })
}

/// What the approver must be told of `locations`: [`ResolvedLocation::shown`] of each that
/// leads elsewhere than it reads, or is in doubt ([`ResolvedLocation::differs`]); empty when
/// each leads where it reads. The one rule every host shows them by.
///
/// # Examples
/// ```
/// use agent_controller::rules::{ResolvedLocation, where_paths_lead};
/// let at = |given: &str, path: &str| ResolvedLocation {
///     arg: "path".into(), given: given.into(), path: Some(path.into()), doubt: None,
/// };
/// assert_eq!(where_paths_lead(&[at("a.rs", "a.rs")]), Vec::<String>::new());
/// assert_eq!(where_paths_lead(&[at("notes.md", "src/main.rs")]), ["path notes.md -> src/main.rs"]);
/// ```
pub fn where_paths_lead(locations: &[ResolvedLocation]) -> Vec<String> {
    locations
        .iter()
        .filter(|l| l.differs())
        .map(ResolvedLocation::shown)
        .collect()
}

/// Resolves the path arguments `args` of `call`: `locate` says where each leads relative to
/// the workspace (the argument's name and value, `None` when left out), the jail follows the
/// symlinks in it.
fn resolve_with(
    args: &[&str],
    call: &ToolCall,
    workspace: &Path,
    locate: impl Fn(&str, Option<&str>) -> PathLocation,
) -> ResolvedPaths {
    let mut resolved = ResolvedPaths::new();
    if args.is_empty() {
        return resolved;
    }
    let jail = Jail::open(workspace);
    for &arg in args {
        let located = match call.args.get(arg) {
            None => match locate(arg, None) {
                Some(located) => located,
                None => continue,
            },
            Some(Value::String(path)) => locate(arg, Some(path))
                .unwrap_or_else(|| Err(format!("`{path}` is not a path the tool takes"))),
            Some(other) => {
                let what = ResolvedPath::NotAString(format!(
                    "`{arg}` is {}, not a path",
                    crate::jcs::to_string(other)
                ));
                resolved.0.insert(arg.to_owned(), what);
                continue;
            }
        };
        let path = match (located, &jail) {
            (Err(why), _) => ResolvedPath::Doubtful(why),
            (Ok(_), Err(e)) => ResolvedPath::Doubtful(e.to_string()),
            (Ok(relative), Ok(jail)) => resolve_one(jail, &relative),
        };
        resolved.0.insert(arg.to_owned(), path);
    }
    resolved
}

fn resolve_one(jail: &Jail, relative: &Path) -> ResolvedPath {
    match jail.resolve(relative) {
        Ok(real) => match slashed(&real) {
            Some(text) => ResolvedPath::Inside(text),
            None => ResolvedPath::Doubtful(format!("`{}` is not valid UTF-8", relative.display())),
        },
        Err(e) => ResolvedPath::Doubtful(e.to_string()),
    }
}

/// A relative path as `a/b/c`; `None` when a part is not UTF-8.
fn slashed(path: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for part in path.components() {
        match part {
            Component::Normal(name) => parts.push(name.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// What decided a tool call's outcome, as the decision record names it (`decidedBy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecidedBy {
    /// The mode does not offer the tool (`availableTools`), which outranks every rule.
    AvailableTools,
    /// Rule N of the mode (counted from 1): `rule N`.
    Rule(usize),
    /// No rule matched, and the mode's `requireApproval` covers the tool.
    RequireApproval,
    /// No rule matched, and nothing makes the call wait: it runs.
    Default,
}

impl fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecidedBy::AvailableTools => f.write_str("availableTools"),
            DecidedBy::Rule(n) => write!(f, "rule {n}"),
            DecidedBy::RequireApproval => f.write_str("requireApproval"),
            DecidedBy::Default => f.write_str("default"),
        }
    }
}

impl std::str::FromStr for DecidedBy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "availableTools" => Ok(DecidedBy::AvailableTools),
            "requireApproval" => Ok(DecidedBy::RequireApproval),
            "default" => Ok(DecidedBy::Default),
            other => other
                .strip_prefix("rule ")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n > 0)
                .map(DecidedBy::Rule)
                .ok_or_else(|| format!("`{other}` names no decider")),
        }
    }
}

impl Serialize for DecidedBy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DecidedBy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// How one tool call is to be handled, and why ([`crate::mode::Mode::decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Run it, ask the user, or refuse it.
    pub action: RuleAction,
    /// What decided.
    pub decided_by: DecidedBy,
    /// Why, in a sentence the model (for a refusal) and the user can read.
    pub reason: String,
}

/// How a call is handled under a mode's `rules` (see [`crate::mode::Mode::decide`], which calls
/// this): `mode` names the mode in the reason, `offered` says whether it offers the tool, `asks`
/// whether its `requireApproval` covers it.
pub(crate) fn verdict(
    rules: &Rules,
    mode: &str,
    offered: bool,
    asks: bool,
    call: &ToolCall,
    paths: &ResolvedPaths,
    steps: &mut Vec<Step>,
) -> Verdict {
    let verdict = verdict_of(rules, mode, offered, asks, call, paths, steps);
    let check = match verdict.decided_by {
        DecidedBy::AvailableTools => Check::AvailableTools,
        DecidedBy::Rule(n) => Check::Rule(n),
        DecidedBy::RequireApproval => Check::RequireApproval,
        DecidedBy::Default => Check::Default,
    };
    let mut step = Step::new(check, format!("decides: {}", verdict.reason));
    if let DecidedBy::Rule(n) = verdict.decided_by {
        step.at = n
            .checked_sub(1)
            .and_then(|i| rules.as_slice().get(i))
            .and_then(Rule::line_column);
    }
    steps.push(step);
    verdict
}

/// [`verdict`], without its last step.
fn verdict_of(
    rules: &Rules,
    mode: &str,
    offered: bool,
    asks: bool,
    call: &ToolCall,
    paths: &ResolvedPaths,
    steps: &mut Vec<Step>,
) -> Verdict {
    if !offered {
        return Verdict {
            action: RuleAction::Deny,
            decided_by: DecidedBy::AvailableTools,
            reason: format!("mode `{mode}` does not offer the tool `{}`", call.name),
        };
    }
    if let Some((number, rule, fit)) = rules.deciding_fit(call, paths, steps) {
        let on = match fit {
            Fit::Call => String::new(),
            Fit::Value(value) => format!(", which matches `{}`", shorten(&value)),
            Fit::Doubt(why) => format!(", whose path is in doubt ({})", shorten(&why)),
        };
        let verb = match rule.action {
            RuleAction::Allow => "allows",
            RuleAction::Ask => "asks the user about",
            RuleAction::Deny => "refuses",
        };
        let arg = rule
            .matcher
            .arg()
            .map(|a| format!(" with {a}"))
            .unwrap_or_default();
        return Verdict {
            action: rule.action,
            decided_by: DecidedBy::Rule(number),
            reason: format!(
                "{} ({rule}) {verb} this call of `{}`{arg}{on}",
                rules.label(number, mode),
                call.name
            ),
        };
    }
    if asks {
        Verdict {
            action: RuleAction::Ask,
            decided_by: DecidedBy::RequireApproval,
            reason: format!(
                "no rule matches, and mode `{mode}` lists `{}` in requireApproval",
                call.name
            ),
        }
    } else {
        Verdict {
            action: RuleAction::Allow,
            decided_by: DecidedBy::Default,
            reason: format!("no rule matches, and mode `{mode}` runs it"),
        }
    }
}

/// Most characters of a model's value quoted in a reason.
const MAX_QUOTED: usize = 200;

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Which rule of a mode decided a tool call, as the audit record ([`crate::event::DecidedRecord`]),
/// the waiting call's payload ([`crate::event::ToolCallPayload`]) and their events carry it,
/// under the key `rule`:
///
/// ```json
/// "rule": {
///   "modeId": "build",
///   "number": 1,
///   "action": "deny",
///   "rule": "deny write_file path `**/.env*`",
///   "reason": "rule 1 of mode `build` (deny write_file path `**/.env*`) refuses this call of `write_file` with path, which matches `.env`"
/// }
/// ```
///
/// `number` is `N` of `decidedBy: rule N` ([`DecidedBy::Rule`]), counted from 1 in the mode's
/// list; a call no rule decided (the mode's `requireApproval`, or its default) carries none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleRecord {
    /// The mode whose rule it is; for a rule a subagent type adds (`agentType`), the parent's
    /// mode the child's call was ruled in.
    pub mode_id: String,
    /// The rule's number in the mode's `rules` list, from 1; for a rule of a subagent type
    /// (`agentType`), in the type's `rules` list, and 0 for the `ask` its `requireApproval`
    /// adds.
    pub number: usize,
    /// For a subagent's call a rule of its type decided (the type's `deny` and `ask` rules and
    /// its `requireApproval`, on top of the parent mode's): the type (`agentType` of the
    /// `subagent` call); `None` for a mode's own rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// What the rule does: `allow` (the call ran without asking), `ask` (it waited for the
    /// user) or `deny` (it was refused and never ran).
    pub action: RuleAction,
    /// The rule, as [`Rule`]'s `Display` writes it (`deny write_file path `**/.env*``).
    pub rule: String,
    /// Why, as the model (for a refusal) and the user read it: the rule and the value it
    /// matched.
    pub reason: String,
    /// For an `ask` rule with `approvers` above 1: how many approvals by distinct identities
    /// the call needs ([`crate::quorum`]); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<u8>,
}

impl RuleRecord {
    /// The rule as a sentence names it: `rule N of mode `M``, or for a rule a subagent type
    /// adds (`agentType`), `rule N of subagent type `T` (in mode `M`)` (N its number in the
    /// type's list), or `the requireApproval of subagent type `T` (in mode `M`)` for the `ask`
    /// its `requireApproval` adds (number 0). Not neutralized: a terminal neutralizes it.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::{RuleAction, RuleRecord};
    /// let mut record = RuleRecord {
    ///     mode_id: "build".into(),
    ///     number: 1,
    ///     action: RuleAction::Deny,
    ///     rule: "deny read_file path `secret/**`".into(),
    ///     reason: "no".into(),
    ///     approvers: None,
    ///     agent_type: None,
    /// };
    /// assert_eq!(record.owner(), "rule 1 of mode `build`");
    /// record.agent_type = Some("explore".into());
    /// assert_eq!(record.owner(), "rule 1 of subagent type `explore` (in mode `build`)");
    /// ```
    pub fn owner(&self) -> String {
        match (&self.agent_type, self.number) {
            (None, n) => format!("rule {n} of mode `{}`", self.mode_id),
            (Some(kind), 0) => format!(
                "the requireApproval of subagent type `{kind}` (in mode `{}`)",
                self.mode_id
            ),
            (Some(kind), n) => format!(
                "rule {n} of subagent type `{kind}` (in mode `{}`)",
                self.mode_id
            ),
        }
    }

    /// The record of `verdict` in mode `mode_id` with rules `rules`; `None` when no rule
    /// decided (`availableTools`, `requireApproval` or the default).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::{ResolvedPaths, RuleAction, RuleRecord};
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", path = \"**/.env*\", action = \"deny\" }]\n",
    ///     "modes.toml",
    /// )?;
    /// let build = graph.default_mode();
    /// let call = agent_controller::ToolCall::new("c1", "write_file", serde_json::json!({"path": ".env"}));
    /// let verdict = build.decide(true, &call, &ResolvedPaths::new().with("path", ".env"));
    /// let record = RuleRecord::of(&verdict, build.rules(), build.id()).expect("a rule decided");
    /// assert_eq!((record.number, record.action), (1, RuleAction::Deny));
    /// assert_eq!(record.rule, "deny write_file path `**/.env*`");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn of(verdict: &Verdict, rules: &Rules, mode_id: &str) -> Option<Self> {
        let DecidedBy::Rule(number) = verdict.decided_by else {
            return None;
        };
        let rule = rules.as_slice().get(number.checked_sub(1)?)?;
        let (number, agent_type) = match rules.source(number) {
            RuleSource::Mode(n) => (n, None),
            RuleSource::Subagent { agent_type, number } => {
                (number.unwrap_or(0), Some(agent_type.to_string()))
            }
        };
        Some(Self {
            mode_id: mode_id.to_owned(),
            number,
            agent_type,
            action: verdict.action,
            rule: rule.to_string(),
            reason: verdict.reason.clone(),
            approvers: (verdict.action == RuleAction::Ask && rule.needs_approvers() > 1)
                .then(|| rule.needs_approvers()),
        })
    }
}
