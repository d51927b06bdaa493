//! OpenCode's agents: `opencode.json` / `opencode.jsonc` (`agent`, `permission`, `tools`,
//! `model`, `default_agent`) and `.opencode/agent/*.md` files.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::write::{Action, Entry, Ids, Pattern, RuleOut, finish, quoted};
use super::{ImportError, Imported, SourceFile, frontmatter, within_bounds};

#[derive(Deserialize, Default)]
struct Config {
    #[serde(default)]
    agent: BTreeMap<String, Agent>,
    model: Option<String>,
    default_agent: Option<String>,
    #[serde(default)]
    tools: BTreeMap<String, bool>,
    #[serde(default)]
    permission: Permission,
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct Agent {
    description: Option<String>,
    mode: Option<AgentMode>,
    model: Option<String>,
    prompt: Option<String>,
    #[serde(default)]
    tools: BTreeMap<String, bool>,
    #[serde(default)]
    permission: Permission,
    #[serde(default)]
    disable: bool,
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum AgentMode {
    Primary,
    Subagent,
    All,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Level {
    Allow,
    Ask,
    Deny,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Allow => "allow",
            Level::Ask => "ask",
            Level::Deny => "deny",
        }
    }
}

/// A permission: one level, or a level per pattern.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Setting {
    Level(Level),
    Patterns(BTreeMap<String, Level>),
}

impl Setting {
    fn shown(&self) -> String {
        match self {
            Setting::Level(level) => format!("`{}`", level.as_str()),
            Setting::Patterns(map) => {
                let each: Vec<String> = map
                    .iter()
                    .map(|(p, l)| format!("`{p}`: {}", l.as_str()))
                    .collect();
                format!("{{{}}}", each.join(", "))
            }
        }
    }
}

#[derive(Deserialize, Default, Clone)]
struct Permission {
    edit: Option<Setting>,
    bash: Option<Setting>,
    webfetch: Option<Setting>,
    #[serde(flatten)]
    other: BTreeMap<String, serde_json::Value>,
}

/// Imports OpenCode's config `config` (`opencode.json` or `opencode.jsonc`: JSON with
/// comments and trailing commas) and its agent files `agents` (`.opencode/agent/NAME.md`: YAML
/// frontmatter with the keys of an `agent` entry, the body its prompt): the modes TOML and what
/// it could not carry over ([`crate::import`]).
///
/// Each agent of `mode` `primary` becomes a mode, `subagent` a subagent type, `all` (the
/// default) both; `prompt` is its instructions, `description` and `model` carry over (the
/// config's `model` is the modes' default). `permission` (the config's, each key of an
/// agent's own replacing it): `edit` `ask` lists `write_file` under `requireApproval`, `deny`
/// adds a rule refusing every write; a `tools` map (the config's and the agent's) lists
/// `read_file` (`read`), `list_files` (`list`), `write_file` (unless `write`, `edit` or
/// `patch` is off) and `subagent` (`task`) in `availableTools`. `bash` and `webfetch` have no
/// tool here and are reported, as are a `{file:...}` prompt, `temperature` and other keys.
/// `default_agent` (else `build`) is the default mode.
///
/// # Errors
/// [`ImportError::TooLarge`] (all files together), [`ImportError::Malformed`] (not JSONC, an
/// agent file without frontmatter, a value of the wrong type: at its line and column),
/// [`ImportError::Empty`] (no agent), [`ImportError::Unsupported`].
///
/// # Examples
/// ```
/// use agent_controller::import::{SourceFile, opencode};
/// let config = SourceFile::new("opencode.jsonc", r#"{
///   // read-only reviews
///   "agent": {
///     "review": { "mode": "primary", "prompt": "Review.", "permission": { "edit": "deny" }, },
///   },
/// }"#);
/// let imported = opencode(Some(&config), &[])?;
/// let graph = agent_controller::config::parse(&imported.toml, "modes.toml")?;
/// assert_eq!(graph.default_mode().rules().as_slice()[0].to_string(), "deny write_file");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn opencode(
    config: Option<&SourceFile>,
    agents: &[SourceFile],
) -> Result<Imported, ImportError> {
    import(config, agents, Vec::new())
}

/// [`opencode`], `not_carried` already holding what reading the files skipped.
pub(super) fn import(
    config: Option<&SourceFile>,
    agents: &[SourceFile],
    mut not_carried: Vec<String>,
) -> Result<Imported, ImportError> {
    within_bounds(config.into_iter().chain(agents))?;
    let mut parsed = match config {
        Some(file) => parse_config(file)?,
        None => Config::default(),
    };
    let mut origins: Vec<&str> = config.iter().map(|f| f.origin.as_str()).collect();
    for file in agents {
        let (mut agent, body): (Agent, String) = frontmatter::parse(file)?;
        let stem = std::path::Path::new(&file.origin)
            .file_stem()
            .map_or_else(|| file.origin.clone(), |s| s.to_string_lossy().into_owned());
        if !body.is_empty() {
            agent.prompt = Some(body);
        }
        if parsed.agent.insert(stem.clone(), agent).is_some() {
            not_carried.push(format!(
                "agent `{stem}`: {} replaces the config's entry of that name",
                file.origin
            ));
        }
        origins.push(&file.origin);
    }
    let origin = origins.first().copied().unwrap_or("opencode");
    if parsed.agent.is_empty() {
        let v2 = if parsed.other.contains_key("agents") {
            " (`agents` is OpenCode's newer layout, which this import does not read)"
        } else {
            ""
        };
        return Err(ImportError::Empty {
            origin: origin.to_owned(),
            message: format!("not an OpenCode config with agents: no agent in `agent`{v2}"),
        });
    }
    let config = parsed;
    for (key, setting) in [
        ("bash", &config.permission.bash),
        ("webfetch", &config.permission.webfetch),
    ] {
        if let Some(setting) = setting {
            not_carried.push(unsupported_permission("the config", key, setting));
        }
    }
    for key in config.permission.other.keys() {
        not_carried.push(format!(
            "the config's permission.{key} is not carried over: no tool here has that permission"
        ));
    }
    for (name, enabled) in &config.tools {
        if let Some(note) = tool_without_equivalent(name, *enabled) {
            not_carried.push(format!("the config's tools: {note}"));
        }
    }
    let ignored: Vec<&str> = config
        .other
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "$schema")
        .collect();
    if !ignored.is_empty() {
        not_carried.push(format!(
            "the config's settings other than agents are not carried over: {}",
            ignored.join(", ")
        ));
    }

    let has_subagents = config
        .agent
        .values()
        .any(|a| !a.disable && a.mode != Some(AgentMode::Primary));
    let mut modes = Vec::new();
    let mut subagents = Vec::new();
    let mut ids = Ids::reserving(
        config
            .agent
            .iter()
            .filter(|(_, a)| !a.disable)
            .map(|(name, _)| name.as_str()),
    );
    for (name, agent) in &config.agent {
        let owner = format!("agent `{name}`");
        if agent.disable {
            not_carried.push(format!(
                "{owner}: left out, it is disabled (`disable: true`)"
            ));
            continue;
        }
        let id = ids.claim(name, "agent", &mut not_carried);
        let mode = agent.mode.unwrap_or(AgentMode::All);
        report_agent(&owner, agent, &mut not_carried);
        if name == "plan" {
            not_carried.push(format!(
                "{owner}: OpenCode's plan agent is an ordinary mode here; to hand a plan over for approval, list `submit_plan` and set `transitionsTo`"
            ));
        }
        if mode != AgentMode::Subagent {
            let mut entry = entry(
                &id,
                agent,
                &config,
                true,
                has_subagents,
                &owner,
                &mut not_carried,
            );
            entry.model = agent.model.clone().or_else(|| config.model.clone());
            modes.push(entry);
        }
        if mode != AgentMode::Primary {
            let mut entry = entry(
                &id,
                agent,
                &config,
                false,
                has_subagents,
                &owner,
                &mut not_carried,
            );
            entry.model = agent.model.clone();
            subagents.push(entry);
        }
    }
    if modes.is_empty() {
        // Only subagents: OpenCode starts them from its built-in `build` agent.
        let builtin = Agent::default();
        let mut entry = entry(
            "build",
            &builtin,
            &config,
            true,
            has_subagents,
            "agent `build`",
            &mut not_carried,
        );
        entry.description = Some("OpenCode's built-in build agent".to_owned());
        entry.model = config.model.clone();
        not_carried.push(
            "no agent is primary: the mode `build` stands in for OpenCode's built-in build agent, which starts the subagents".to_owned(),
        );
        modes.push(entry);
    }
    let default = config
        .default_agent
        .as_deref()
        .filter(|d| modes.iter().any(|m| m.id == *d))
        .or_else(|| modes.iter().any(|m| m.id == "build").then_some("build"));
    if let Some(wanted) = &config.default_agent
        && default != Some(wanted.as_str())
    {
        not_carried.push(format!(
            "default_agent `{wanted}` names no primary agent imported here"
        ));
    }
    not_carried.dedup();
    finish(
        origin,
        &format!(
            "Imported from OpenCode ({}) by `agent-controller import opencode`.",
            origins.join(", ")
        ),
        not_carried,
        default,
        &subagents,
        &modes,
    )
}

/// The config `file`, read as JSONC.
fn parse_config(file: &SourceFile) -> Result<Config, ImportError> {
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        ..Default::default()
    };
    jsonc_parser::parse_to_serde_value::<Option<Config>>(&file.text, &options)
        .map_err(|e| ImportError::Malformed {
            origin: file.origin.clone(),
            line: e.line_display(),
            column: e.column_display(),
            message: format!("not an OpenCode config (JSON with comments): {}", e.kind()),
        })?
        .ok_or_else(|| ImportError::Empty {
            origin: file.origin.clone(),
            message: "the file is empty".to_owned(),
        })
}

/// The keys of `agent` that carry over nowhere, reported as `owner`'s.
fn report_agent(owner: &str, agent: &Agent, not_carried: &mut Vec<String>) {
    for key in agent.other.keys() {
        not_carried.push(format!(
            "{owner}: `{key}` is not carried over (no such setting here)"
        ));
    }
    if let Some(prompt) = &agent.prompt
        && prompt.trim_start().starts_with("{file:")
    {
        not_carried.push(format!(
            "{owner}: its prompt `{}` names a file, which import does not read: put its text in `instructions`",
            prompt.trim()
        ));
    }
    for (key, setting) in [
        ("bash", &agent.permission.bash),
        ("webfetch", &agent.permission.webfetch),
    ] {
        if let Some(setting) = setting {
            not_carried.push(unsupported_permission(owner, key, setting));
        }
    }
    for key in agent.permission.other.keys() {
        not_carried.push(format!(
            "{owner}: permission.{key} is not carried over: no tool here has that permission"
        ));
    }
    for (name, enabled) in &agent.tools {
        if let Some(note) = tool_without_equivalent(name, *enabled) {
            not_carried.push(format!("{owner}: {note}"));
        }
    }
}

/// The report of OpenCode's permission `key` (`bash`, `webfetch`) set to `setting` by `owner`.
fn unsupported_permission(owner: &str, key: &str, setting: &Setting) -> String {
    if key == "bash" {
        let example = match setting {
            Setting::Level(level) => format!(
                "{{ tool = \"run_command\", action = {} }}",
                quoted(level.as_str())
            ),
            Setting::Patterns(map) => {
                // The first pattern that is not the catch-all `*`, as the example.
                let Some((pattern, level)) = map
                    .iter()
                    .find(|(p, _)| p.as_str() != "*")
                    .or_else(|| map.iter().next())
                else {
                    return format!(
                        "{owner}'s permission.bash {{}} is not carried over: there is no shell tool here"
                    );
                };
                format!(
                    "{{ tool = \"run_command\", arg = \"command\", glob = {}, action = {} }}",
                    quoted(pattern),
                    quoted(level.as_str())
                )
            }
        };
        format!(
            "{owner}'s permission.bash {} is not carried over: there is no shell tool here (a host's command tool, say `run_command`, takes rules such as {example})",
            setting.shown()
        )
    } else {
        format!(
            "{owner}'s permission.{key} {} is not carried over: there is no web tool here",
            setting.shown()
        )
    }
}

/// What a `tools` entry `name` = `enabled` cannot carry over, if anything.
fn tool_without_equivalent(name: &str, enabled: bool) -> Option<String> {
    match name {
        "read" | "list" | "edit" | "write" | "patch" | "task" => None,
        "bash" | "webfetch" | "websearch" | "grep" | "glob" | "todowrite" | "todoread"
        | "codesearch" | "lsp" | "skill" | "question" => {
            enabled.then(|| format!("tool `{name}` is not carried over: it has no equivalent here"))
        }
        other => Some(format!(
            "tool `{other}` = {enabled} is not carried over: an MCP tool is offered here by a [[mcpServers]] entry and listed as `SERVER__TOOL`"
        )),
    }
}

/// A mode (`as_mode`) or subagent type of OpenCode agent `agent` with id `id`, the config's
/// `permission` and `tools` under the agent's own.
fn entry(
    id: &str,
    agent: &Agent,
    config: &Config,
    as_mode: bool,
    has_subagents: bool,
    owner: &str,
    not_carried: &mut Vec<String>,
) -> Entry {
    let mut tools = config.tools.clone();
    tools.extend(agent.tools.iter().map(|(k, v)| (k.clone(), *v)));
    let off = |name: &str| tools.get(name) == Some(&false);
    let available = (!tools.is_empty()).then(|| {
        let mut list = Vec::new();
        if !off("read") {
            list.push("read_file");
        }
        if !off("list") {
            list.push("list_files");
        }
        if !off("write") && !off("edit") && !off("patch") {
            list.push("write_file");
        }
        if as_mode && has_subagents && !off("task") {
            list.push("subagent");
        }
        list
    });
    let writes = available
        .as_ref()
        .is_none_or(|list| list.contains(&"write_file"));
    let edit = agent
        .permission
        .edit
        .clone()
        .or_else(|| config.permission.edit.clone());
    let mut require_approval = Vec::new();
    let mut rules = Vec::new();
    match (&edit, writes) {
        (_, false) | (None | Some(Setting::Level(Level::Allow)), _) => {}
        (Some(Setting::Level(Level::Ask)), true) => require_approval.push("write_file"),
        (Some(Setting::Level(Level::Deny)), true) => rules.push(RuleOut {
            tool: "write_file",
            pattern: Pattern::Any,
            action: Action::Deny,
            source: "permission.edit: deny".to_owned(),
        }),
        (Some(patterns @ Setting::Patterns(_)), true) => {
            require_approval.push("write_file");
            not_carried.push(format!(
                "{owner}: permission.edit {} is not carried over pattern by pattern: every write asks instead",
                patterns.shown()
            ));
        }
    }
    let instructions = agent
        .prompt
        .clone()
        .filter(|p| !p.trim_start().starts_with("{file:") && !p.trim().is_empty());
    Entry {
        id: id.to_owned(),
        description: agent.description.clone(),
        instructions,
        tools: available,
        require_approval,
        rules,
        ..Entry::default()
    }
}
