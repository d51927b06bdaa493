//! The config a session ran under, as its record keeps it ([`RecordedConfig`]): the file it was
//! read from and what each mode may do, so a host that decides or carries the session on later
//! can load that file again, and can tell a config that lets the modes do more
//! ([`RecordedConfig::change_to`]) from one that only narrows them.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::mode::{ModeGraph, RequireApproval};
use crate::rules::{RuleAction, Rules};

/// The config a session ran under: the file it was read from and what each of its modes may
/// do. Saved in the session record ([`crate::store::SessionRecord::config`]) with every save,
/// from the config of the controller that saved it.
///
/// # Examples
/// ```
/// use agent_controller::config;
/// use agent_controller::store::RecordedConfig;
///
/// let asking = config::parse("[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n", "modes.toml")?;
/// let recorded = RecordedConfig::of(&asking);
/// assert_eq!(recorded.modes[0].asks, ["write_file"]);
///
/// let silent = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
/// let change = recorded.change_to(&silent);
/// assert_eq!(change.wider, ["mode `build` runs `write_file` without asking (it asked before)"]);
/// assert!(!change.only_narrows());
/// assert!(recorded.change_to(&asking).is_empty());
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordedConfig {
    /// The file the config was read from, absolute where it named a file that exists (else the
    /// name it was parsed under).
    pub path: String,
    /// The planning output folder (`plansDir`).
    #[serde(default)]
    pub plans_dir: String,
    /// What each mode may do, in the config's order.
    pub modes: Vec<ModePowers>,
    /// The config's MCP servers, each as `id` and a digest of its trust and transport.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// What each subagent type may do (`[[subagents]]`), in the config's order, as a mode's
    /// powers (no hand-over targets, no types of its own). Empty in records written before
    /// types were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subagents: Vec<ModePowers>,
}

/// What one mode (or one subagent type) of a [`RecordedConfig`] may do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModePowers {
    /// The mode's id.
    pub id: String,
    /// The tools it offers (`availableTools`); `None`: every tool.
    pub tools: Option<Vec<String>>,
    /// Whether every call waits for approval (`requireApproval = true`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asks_all: bool,
    /// The tools whose calls wait for approval (`requireApproval = [...]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<String>,
    /// Its rules, each as written (`deny write_file path `**/.env*``).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// The modes its plans hand over to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transitions_to: Vec<String>,
    /// A digest of its instructions.
    #[serde(default)]
    pub instructions: String,
    /// The subagent types a mode's `subagent` tool may start (its `subagents` list, or every
    /// type when it leaves the list out), in the config's order; `None` for a subagent type,
    /// and in records written before types were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagents: Option<Vec<String>>,
}

/// How a config differs from a [`RecordedConfig`] ([`RecordedConfig::change_to`]), each line
/// naming a mode (or a server) and what it may do now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigChange {
    /// What the modes may do now that they could not: a new mode, a tool offered or run without
    /// asking, a rule that held calls back gone, a new hand-over target, a subagent type a mode
    /// may start or a type's tool offered or run without asking or rule gone, a new or changed
    /// MCP server, another plans folder.
    pub wider: Vec<String>,
    /// What the modes may no longer do: the opposites.
    pub narrower: Vec<String>,
    /// Changes that neither widen nor narrow what the modes may do (instructions, the default
    /// mode).
    pub other: Vec<String>,
}

impl ConfigChange {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.wider.is_empty() && self.narrower.is_empty() && self.other.is_empty()
    }

    /// Whether the change lets no mode do more than before.
    pub fn only_narrows(&self) -> bool {
        self.wider.is_empty()
    }
}

impl fmt::Display for ConfigChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all = self.wider.iter().chain(&self.narrower).chain(&self.other);
        let lines: Vec<&str> = all.map(String::as_str).collect();
        f.write_str(&lines.join("; "))
    }
}

/// How a config stands to the one a stored session ran under ([`ConfigCheck::of`]): the rule
/// every host applies before it decides or carries the session on under a config (the CLI's
/// `decide`, `continue`, `switch`; `serve`). The same config, or one that only narrows what the
/// modes may do, may act on the session; one that lets them do more, or one the record cannot
/// compare with, must not without the user's say ([`ConfigCheck::widens`]).
///
/// # Examples
/// ```
/// use agent_controller::config;
/// use agent_controller::store::{ConfigCheck, RecordedConfig};
///
/// let asking = config::parse("[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n", "modes.toml")?;
/// let silent = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
/// let recorded = RecordedConfig::of(&asking);
/// let check = ConfigCheck::of(&asking.fingerprint(), Some(&recorded), &silent);
/// assert!(check.widens());
/// assert!(!ConfigCheck::of(&asking.fingerprint(), Some(&recorded), &asking).widens());
/// // A record that does not say what its config let the modes do: not comparable.
/// assert!(ConfigCheck::of("another", None, &asking).widens());
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigCheck {
    /// The config the session ran under (the same fingerprint).
    Same,
    /// Another config that lets no mode do more (the change, maybe empty).
    Narrows(ConfigChange),
    /// Another config that lets the modes do more: the change, whose `wider` lines say what.
    Widens(ConfigChange),
    /// Another config, and the record does not say what the one it ran under let the modes do
    /// (written before records did): counted as one that does more.
    Unknown,
}

impl ConfigCheck {
    /// How `graph` stands to the config a session ran under: `fingerprint` and `recorded` are
    /// the record's ([`crate::store::SessionRecord::config_fingerprint`],
    /// [`crate::store::SessionRecord::config`]).
    pub fn of(fingerprint: &str, recorded: Option<&RecordedConfig>, graph: &ModeGraph) -> Self {
        if fingerprint == graph.fingerprint() {
            return Self::Same;
        }
        let Some(recorded) = recorded else {
            return Self::Unknown;
        };
        let change = recorded.change_to(graph);
        match change.only_narrows() {
            true => Self::Narrows(change),
            false => Self::Widens(change),
        }
    }

    /// Whether the config lets the session's modes do more than the one it ran under (or
    /// cannot be compared with it): a host refuses to act under it unless the user allowed it.
    pub fn widens(&self) -> bool {
        matches!(self, Self::Widens(_) | Self::Unknown)
    }

    /// What the config lets the modes do that they could not, one line each joined by `; `
    /// (empty when it does not widen; a line saying the record cannot tell for
    /// [`ConfigCheck::Unknown`]).
    pub fn wider(&self) -> String {
        match self {
            Self::Widens(change) => change.wider.join("; "),
            Self::Unknown => {
                "the record does not say what the config it ran under let its modes do".to_owned()
            }
            Self::Same | Self::Narrows(_) => String::new(),
        }
    }
}

impl RecordedConfig {
    /// What `graph` lets each mode do, and the file it was read from.
    pub fn of(graph: &ModeGraph) -> Self {
        let origin = graph.origin();
        let path = std::path::Path::new(origin);
        let path = match path.is_file() {
            true => std::path::absolute(path)
                .map_or_else(|_| origin.to_owned(), |p| p.to_string_lossy().into_owned()),
            false => origin.to_owned(),
        };
        let modes = graph
            .modes()
            .iter()
            .map(|mode| ModePowers {
                transitions_to: mode
                    .transitions_to_all()
                    .iter()
                    .map(|t| graph.mode(*t).id().to_owned())
                    .collect(),
                subagents: graph.get(mode.id()).map(|id| {
                    graph
                        .subagents_of(id)
                        .iter()
                        .map(|t| t.id().to_owned())
                        .collect()
                }),
                ..powers(
                    mode.id(),
                    mode.available_tools(),
                    mode.require_approval(),
                    mode.rules(),
                    mode.instructions(),
                )
            })
            .collect();
        let subagents = graph
            .subagents()
            .iter()
            .map(|kind| {
                powers(
                    kind.id(),
                    kind.available_tools(),
                    kind.require_approval(),
                    kind.rules(),
                    kind.instructions(),
                )
            })
            .collect();
        let mcp_servers = graph
            .mcp_servers()
            .iter()
            .map(|server| {
                let what = format!("{}\n{:?}", server.is_trusted(), server.transport());
                format!("{} {}", server.id(), digest(&what))
            })
            .collect();
        Self {
            path,
            plans_dir: graph.plans_dir().to_string_lossy().into_owned(),
            modes,
            mcp_servers,
            subagents,
        }
    }

    /// The mode with id `id`.
    pub fn mode(&self, id: &str) -> Option<&ModePowers> {
        self.modes.iter().find(|m| m.id == id)
    }

    /// How `graph` differs from this config in what its modes may do: each mode compared with
    /// the mode of the same id here (its tools, the calls that wait for approval, its rules,
    /// its hand-over targets, the subagent types it may start), each subagent type with the
    /// type of the same id here (as a mode), then the modes and MCP servers that are new or
    /// gone, and the plans folder.
    pub fn change_to(&self, graph: &ModeGraph) -> ConfigChange {
        let now = RecordedConfig::of(graph);
        let mut change = ConfigChange::default();
        for mode in &now.modes {
            match self.mode(&mode.id) {
                Some(was) => compare(was, mode, &format!("mode `{}`", mode.id), &mut change),
                None => change.wider.push(format!("mode `{}` is new", mode.id)),
            }
        }
        for was in &self.modes {
            if now.mode(&was.id).is_none() {
                change.narrower.push(format!("mode `{}` is gone", was.id));
            }
        }
        // A type is compared where the record has it: a new type reaches a session only
        // through a mode that may start it (counted above), a gone one cannot be started.
        for kind in &now.subagents {
            if let Some(was) = self.subagents.iter().find(|t| t.id == kind.id) {
                let what = format!("subagent type `{}`", kind.id);
                compare(was, kind, &what, &mut change);
            }
        }
        for server in &now.mcp_servers {
            if !self.mcp_servers.contains(server) {
                let id = server.split(' ').next().unwrap_or_default();
                change
                    .wider
                    .push(format!("MCP server `{id}` is new or changed"));
            }
        }
        for server in &self.mcp_servers {
            let id = server.split(' ').next().unwrap_or_default();
            if !now
                .mcp_servers
                .iter()
                .any(|s| s.split(' ').next() == Some(id))
            {
                change.narrower.push(format!("MCP server `{id}` is gone"));
            }
        }
        if !self.plans_dir.is_empty() && self.plans_dir != now.plans_dir {
            change.wider.push(format!(
                "plans are written to `{}` (they were written to `{}`)",
                now.plans_dir, self.plans_dir
            ));
        }
        change
    }
}

/// What a mode or subagent type with these settings may do (no hand-over targets, no types).
fn powers(
    id: &str,
    tools: Option<&[std::sync::Arc<str>]>,
    approval: &RequireApproval,
    rules: &Rules,
    instructions: &str,
) -> ModePowers {
    let (asks_all, asks) = match approval {
        RequireApproval::None => (false, Vec::new()),
        RequireApproval::All => (true, Vec::new()),
        RequireApproval::Tools(tools) => (false, tools.iter().map(|t| t.to_string()).collect()),
    };
    ModePowers {
        id: id.to_owned(),
        tools: tools.map(|tools| tools.iter().map(|t| t.to_string()).collect()),
        asks_all,
        asks,
        rules: rules.as_slice().iter().map(|r| r.to_string()).collect(),
        transitions_to: Vec::new(),
        instructions: digest(instructions),
        subagents: None,
    }
}

/// Adds how mode (or subagent type) `now` differs from `was` (the same id) to `change`, each
/// line naming it as `what` does (`mode `build``, `subagent type `explore``).
fn compare(was: &ModePowers, now: &ModePowers, what: &str, change: &mut ConfigChange) {
    let id = what;
    match (&was.tools, &now.tools) {
        (Some(before), None) => change.wider.push(format!(
            "{id} offers every tool (it offered {})",
            listed(before)
        )),
        (None, Some(after)) => change.narrower.push(format!(
            "{id} offers only {} (it offered every tool)",
            listed(after)
        )),
        (Some(before), Some(after)) => {
            let added = missing_from(after, before);
            if !added.is_empty() {
                change
                    .wider
                    .push(format!("{id} offers {} (it did not)", listed(&added)));
            }
            let gone = missing_from(before, after);
            if !gone.is_empty() {
                change
                    .narrower
                    .push(format!("{id} no longer offers {}", listed(&gone)));
            }
        }
        (None, None) => {}
    }
    let offered = |tool: &str| {
        now.tools
            .as_ref()
            .is_none_or(|t| t.iter().any(|x| x == tool))
    };
    match (was.asks_all, now.asks_all) {
        (true, false) => {
            let still = match now.asks.is_empty() {
                true => String::new(),
                false => format!("; it asks before {} only", listed(&now.asks)),
            };
            change
                .wider
                .push(format!("{id} no longer asks before every call{still}"));
        }
        (false, true) => change.narrower.push(format!("{id} asks before every call")),
        (true, true) => {}
        (false, false) => {
            let unasked: Vec<String> = was
                .asks
                .iter()
                .filter(|t| !now.asks.contains(t) && offered(t))
                .cloned()
                .collect();
            for tool in unasked {
                change.wider.push(format!(
                    "{id} runs `{tool}` without asking (it asked before)"
                ));
            }
            let asked = missing_from(&now.asks, &was.asks);
            if !asked.is_empty() {
                change
                    .narrower
                    .push(format!("{id} asks before {}", listed(&asked)));
            }
        }
    }
    let allows = |rule: &str| rule.starts_with(&format!("{} ", RuleAction::Allow));
    for rule in missing_from(&was.rules, &now.rules) {
        let line = format!("{id} no longer has the rule `{rule}`");
        match allows(&rule) {
            true => change.narrower.push(line),
            false => change.wider.push(line),
        }
    }
    for rule in missing_from(&now.rules, &was.rules) {
        let line = format!("{id} has the new rule `{rule}`");
        match allows(&rule) {
            true => change.wider.push(line),
            false => change.narrower.push(line),
        }
    }
    let added = missing_from(&now.transitions_to, &was.transitions_to);
    if !added.is_empty() {
        change.wider.push(format!(
            "{id} hands plans over to {} (it did not)",
            listed(&added)
        ));
    }
    let gone = missing_from(&was.transitions_to, &now.transitions_to);
    if !gone.is_empty() {
        change.narrower.push(format!(
            "{id} no longer hands plans over to {}",
            listed(&gone)
        ));
    }
    if let (Some(before), Some(after)) = (&was.subagents, &now.subagents) {
        for kind in missing_from(after, before) {
            change.wider.push(format!(
                "{id} may start the subagent type `{kind}` (it could not)"
            ));
        }
        for kind in missing_from(before, after) {
            change.narrower.push(format!(
                "{id} may no longer start the subagent type `{kind}`"
            ));
        }
    }
    if !was.instructions.is_empty() && was.instructions != now.instructions {
        change.other.push(format!("{id} has other instructions"));
    }
}

/// The entries of `list` that `other` lacks, each once, in `list`'s order.
fn missing_from(list: &[String], other: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    list.iter()
        .filter(|x| !other.contains(x) && seen.insert(x.as_str()))
        .cloned()
        .collect()
}

/// `a`, `b`, `c` as a message names them.
fn listed(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.is_empty() {
        true => "no tool".to_owned(),
        false => quoted.join(", "),
    }
}

/// A short digest of `text` (16 hex digits of its SHA-256).
fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(text.as_bytes());
    hash.iter().take(8).map(|b| format!("{b:02x}")).collect()
}
