//! The modes TOML an import writes: its tables, rules, the report at its top, and the `check`
//! every output must pass before it is handed out.

use std::fmt::Write as _;

use super::{ImportError, Imported};

/// What a rule does to the calls it matches; ordered as the rules weigh them (deny wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Action {
    Allow,
    Ask,
    Deny,
}

impl Action {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
        }
    }
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pattern {
    /// Every call of the tool.
    Any,
    /// The `path` argument, where it leads (a path glob).
    Path(String),
}

/// One rule of a mode, and the source's text it came from (for the report).
#[derive(Debug, Clone)]
pub(super) struct RuleOut {
    pub(super) tool: &'static str,
    pub(super) pattern: Pattern,
    pub(super) action: Action,
    pub(super) source: String,
}

/// A `[[modes]]` or `[[subagents]]` table.
#[derive(Debug, Clone, Default)]
pub(super) struct Entry {
    pub(super) id: String,
    pub(super) name: Option<String>,
    pub(super) description: Option<String>,
    pub(super) instructions: Option<String>,
    pub(super) model: Option<String>,
    /// `availableTools`; `None`: every tool.
    pub(super) tools: Option<Vec<&'static str>>,
    pub(super) require_approval: Vec<&'static str>,
    pub(super) rules: Vec<RuleOut>,
    /// A planning mode's `transitionsTo`.
    pub(super) transitions_to: Option<String>,
}

/// `text` fit for a TOML comment: each control character (a line break among them, which
/// would end the comment; TOML allows no other in one) as a visible escape.
pub(super) fn comment(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                format!("\\u{{{:x}}}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A TOML string literal of `text`.
pub(super) fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// `rules` without the rules that could never decide a call (another matches every call they
/// match and wins: a stronger action, or the same one listed first), each of those reported to
/// `not_carried` as `owner`'s, with `why` saying that the source tool ruled so too.
pub(super) fn without_shadowed(
    rules: Vec<RuleOut>,
    owner: &str,
    why: &str,
    not_carried: &mut Vec<String>,
) -> Vec<RuleOut> {
    let covers = |a: &RuleOut, b: &RuleOut| {
        a.tool == b.tool && (a.pattern == Pattern::Any || a.pattern == b.pattern)
    };
    let mut kept = Vec::with_capacity(rules.len());
    for (j, rule) in rules.iter().enumerate() {
        let winner = rules.iter().enumerate().find(|(i, other)| {
            *i != j
                && covers(other, rule)
                && (other.action > rule.action || (*i < j && other.action == rule.action))
        });
        match winner {
            Some((_, other)) => not_carried.push(format!(
                "{owner}: {} rule `{}` is left out: {} rule `{}` matches every call it matches and wins, so it would never decide a call ({why})",
                rule.action.as_str(),
                rule.source,
                other.action.as_str(),
                other.source
            )),
            None => kept.push(rule.clone()),
        }
    }
    kept
}

fn names(list: &[&str]) -> String {
    let quoted: Vec<String> = list.iter().map(|t| quoted(t)).collect();
    format!("[{}]", quoted.join(", "))
}

/// The TOML table `[[key]]` of `entry`.
fn table(key: &str, entry: &Entry) -> String {
    let mut out = format!("\n[[{key}]]\n");
    let _ = writeln!(out, "id = {}", quoted(&entry.id));
    for (name, value) in [
        ("name", &entry.name),
        ("description", &entry.description),
        ("instructions", &entry.instructions),
        ("defaultModelId", &entry.model),
        ("transitionsTo", &entry.transitions_to),
    ] {
        if let Some(value) = value {
            let _ = writeln!(out, "{name} = {}", quoted(value));
        }
    }
    if let Some(tools) = &entry.tools {
        let _ = writeln!(out, "availableTools = {}", names(tools));
    }
    if !entry.require_approval.is_empty() {
        let _ = writeln!(out, "requireApproval = {}", names(&entry.require_approval));
    }
    if !entry.rules.is_empty() {
        out.push_str("rules = [\n");
        for rule in &entry.rules {
            let _ = writeln!(out, "  # {}", comment(&rule.source));
            let pattern = match &rule.pattern {
                Pattern::Any => String::new(),
                Pattern::Path(glob) => format!(", path = {}", quoted(glob)),
            };
            let _ = writeln!(
                out,
                "  {{ tool = {}{pattern}, action = {} }},",
                quoted(rule.tool),
                quoted(rule.action.as_str())
            );
        }
        out.push_str("]\n");
    }
    out
}

/// The whole import: `header` (one line, a comment), the report, `defaultModeId`, the types,
/// then the modes; refused unless `check` passes it with the workspace tools.
pub(super) fn finish(
    origin: &str,
    header: &str,
    not_carried: Vec<String>,
    default_mode: Option<&str>,
    subagents: &[Entry],
    modes: &[Entry],
) -> Result<Imported, ImportError> {
    let mut toml = report(header, &not_carried);
    if let Some(id) = default_mode {
        let _ = writeln!(toml, "\ndefaultModeId = {}", quoted(id));
    }
    for entry in subagents {
        toml.push_str(&table("subagents", entry));
    }
    for entry in modes {
        toml.push_str(&table("modes", entry));
    }
    checked(origin, toml, not_carried)
}

/// The top of an import: `header` (one line, a comment), then `not_carried` as comments, each
/// line fit for a comment.
pub(super) fn report(header: &str, not_carried: &[String]) -> String {
    let mut toml = format!("# {}\n", comment(header));
    if not_carried.is_empty() {
        toml.push_str("# Everything was carried over.\n");
    } else {
        toml.push_str("# Not carried over:\n");
        for line in not_carried {
            let _ = writeln!(toml, "# - {}", comment(line));
        }
    }
    toml
}

/// `toml` and `not_carried` as the import of `origin`, refused unless `check` passes `toml`
/// with the workspace tools.
pub(super) fn checked(
    origin: &str,
    toml: String,
    not_carried: Vec<String>,
) -> Result<Imported, ImportError> {
    let tools = crate::ToolRegistry::with_workspace_tools();
    let mut errors = crate::config::check_with_tools(&toml, "modes.toml", |t| tools.knows(t));
    errors.extend(crate::config::rule_errors(&toml, "modes.toml", &tools));
    if !errors.is_empty() {
        let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return Err(ImportError::Unsupported {
            origin: origin.to_owned(),
            message: format!(
                "the modes made from it do not pass `check`: {}",
                said.join("; ")
            ),
        });
    }
    Ok(Imported { toml, not_carried })
}

/// `id` as a mode id here (ASCII letters, digits, `-`, `_`): each other character becomes `-`,
/// and the id neither starts nor ends with `-` (those are trimmed); an id left empty is `agent`.
fn as_id(id: &str) -> String {
    let fixed: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let fixed = fixed.trim_matches('-');
    if fixed.is_empty() {
        "agent".to_owned()
    } else {
        fixed.to_owned()
    }
}

/// The sentence reporting that `what` `id` is named `fixed` here.
fn renamed(what: &str, id: &str, fixed: &str) -> String {
    format!("{what} `{id}` is named `{fixed}` here (an id is ASCII letters, digits, `-` and `_`)")
}

/// The ids an import hands out, each once: a source's id valid here keeps it, one renamed
/// ([`as_id`]'s rule) into an id taken (or reserved by a valid one) gets a `-2`, `-3`, ...
/// suffix, so two source entries never become one.
#[derive(Debug, Default)]
pub(super) struct Ids {
    /// The source's ids that are valid as they are: theirs, whatever comes first.
    reserved: std::collections::HashSet<String>,
    /// The ids handed out.
    taken: std::collections::HashSet<String>,
}

impl Ids {
    /// Ids reserving each of `ids` that is valid here as it is, for the entry that has it.
    pub(super) fn reserving<'a>(ids: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            reserved: ids
                .into_iter()
                .filter(|id| crate::config::is_valid_id(id))
                .map(str::to_owned)
                .collect(),
            taken: std::collections::HashSet::new(),
        }
    }

    /// The id of `what` `id`: [`as_id`]'s, made distinct from those handed out before; a
    /// change is reported to `not_carried` (once, naming the id it gets).
    pub(super) fn claim(&mut self, id: &str, what: &str, not_carried: &mut Vec<String>) -> String {
        let fixed = as_id(id);
        let free = |candidate: &str, ids: &Self| {
            !ids.taken.contains(candidate) && (candidate == id || !ids.reserved.contains(candidate))
        };
        let mut candidate = fixed.clone();
        let mut n = 2u32;
        while !free(&candidate, self) {
            candidate = format!("{fixed}-{n}");
            n += 1;
        }
        if candidate == fixed {
            if fixed != id {
                not_carried.push(renamed(what, id, &fixed));
            }
        } else {
            not_carried.push(format!(
                "{}; `{fixed}` is another's",
                renamed(what, id, &candidate)
            ));
        }
        self.taken.insert(candidate.clone());
        candidate
    }
}
