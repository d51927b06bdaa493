//! Claude Code's `.claude/settings.json` `permissions` and `.claude/agents/*.md` subagents.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::write::{Action, Entry, Ids, Pattern, RuleOut, finish, quoted, without_shadowed};
use super::{ImportError, Imported, SourceFile, frontmatter, within_bounds};

#[derive(Deserialize)]
struct Settings {
    permissions: Option<Permissions>,
    model: Option<String>,
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Permissions {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    ask: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    default_mode: Option<String>,
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

#[derive(Deserialize)]
struct Agent {
    name: String,
    description: String,
    tools: Option<Tools>,
    model: Option<String>,
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

/// A subagent's `tools`: a comma list (as Claude Code writes it) or a YAML list.
#[derive(Deserialize)]
#[serde(untagged)]
enum Tools {
    Comma(String),
    List(Vec<String>),
}

/// The id of the mode the settings become.
const MODE: &str = "build";

/// Imports Claude Code's settings `settings` (`.claude/settings.json`, then
/// `settings.local.json`, whose `defaultMode` wins; JSON) and subagent files `agents`
/// (`.claude/agents/NAME.md`: frontmatter `name`, `description`, `tools`, `model`, the body
/// the system prompt): the modes TOML and what it could not carry over ([`crate::import`]).
///
/// The settings become the mode `build`. Its rules come from `permissions` as Claude Code
/// weighs them (deny beats ask beats allow, as here): `Read(GLOB)` on `read_file` and
/// `list_files`, `Edit(GLOB)`, `Write(GLOB)`, `MultiEdit(...)` and `NotebookEdit(...)` on
/// `write_file`, `Glob` and `LS` on `list_files`, a bare tool name on every call of it. Paths
/// follow Claude Code's (gitignore's) reading: `./x` and `/x` from the project root, a
/// pattern without a `/` at any depth (`*.pem` is `**/*.pem`), `dir/` everything under it;
/// `//abs` and `~/x` lie outside the workspace and are reported. `defaultMode` `default` (or
/// none) and `dontAsk` list `write_file` under `requireApproval`, `acceptEdits` and
/// `bypassPermissions` do not, `plan` adds a planning mode `plan` (the default) that hands
/// over to `build`. `Bash(...)`, `WebFetch(...)`, `WebSearch`, `mcp__...` have no tool here
/// and are reported with why. Subagents become subagent types, their tools mapped the same way.
///
/// # Errors
/// [`ImportError::TooLarge`] (all files together), [`ImportError::Malformed`] (not JSON, a
/// subagent file without frontmatter or without `name` and `description`: at its line and
/// column), [`ImportError::Empty`] (neither permissions nor subagents),
/// [`ImportError::Unsupported`].
///
/// # Examples
/// ```
/// use agent_controller::import::{SourceFile, claude_code};
/// let settings = SourceFile::new(".claude/settings.json", r#"{"permissions": {
///   "deny": ["Read(./.env)"], "ask": ["Edit(docs/**)"], "allow": ["Edit(src/**)"]
/// }}"#);
/// let imported = claude_code(&[settings], &[])?;
/// let graph = agent_controller::config::parse(&imported.toml, "modes.toml")?;
/// let rules: Vec<String> = graph.default_mode().rules().as_slice().iter().map(|r| r.to_string()).collect();
/// assert_eq!(rules[0], "deny read_file path `.env`");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn claude_code(
    settings: &[SourceFile],
    agents: &[SourceFile],
) -> Result<Imported, ImportError> {
    import(settings, agents, Vec::new())
}

/// [`claude_code`], `not_carried` already holding what reading the files skipped.
pub(super) fn import(
    settings: &[SourceFile],
    agents: &[SourceFile],
    mut not_carried: Vec<String>,
) -> Result<Imported, ImportError> {
    within_bounds(settings.iter().chain(agents))?;
    let mut rules = Vec::new();
    let mut default_mode: Option<String> = None;
    let mut model = None;
    let mut any_permissions = false;
    for file in settings {
        let parsed: Settings =
            serde_json::from_str(&file.text).map_err(|e| ImportError::Malformed {
                origin: file.origin.clone(),
                line: e.line().max(1),
                column: e.column().max(1),
                message: format!("not Claude Code settings (JSON): {e}"),
            })?;
        let ignored: Vec<&str> = parsed
            .other
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "$schema")
            .collect();
        if !ignored.is_empty() {
            not_carried.push(format!(
                "{}: settings other than permissions and model are not carried over: {}",
                file.origin,
                ignored.join(", ")
            ));
        }
        if let Some(m) = parsed.model {
            model = model_id(&m, &format!("{}: model", file.origin), &mut not_carried);
        }
        let Some(permissions) = parsed.permissions else {
            continue;
        };
        any_permissions = true;
        for key in permissions.other.keys() {
            not_carried.push(format!(
                "{}: permissions.{key} is not carried over (the workspace jail keeps every tool here inside the workspace)",
                file.origin
            ));
        }
        for (action, list) in [
            (Action::Deny, &permissions.deny),
            (Action::Ask, &permissions.ask),
            (Action::Allow, &permissions.allow),
        ] {
            for rule in list {
                rules.extend(rule_of(rule, action, &mut not_carried));
            }
        }
        if permissions.default_mode.is_some() {
            default_mode = permissions.default_mode;
        }
    }

    let mut subagents = Vec::new();
    let parsed = agents
        .iter()
        .map(frontmatter::parse::<Agent>)
        .collect::<Result<Vec<(Agent, String)>, _>>()?;
    let mut ids = Ids::reserving(parsed.iter().map(|(agent, _)| agent.name.as_str()));
    for (agent, body) in parsed {
        let owner = format!("subagent `{}`", agent.name);
        let id = ids.claim(&agent.name, "subagent", &mut not_carried);
        for key in agent.other.keys() {
            not_carried.push(format!(
                "{owner}: `{key}` is not carried over (no such setting here)"
            ));
        }
        let tools = agent.tools.map(|tools| {
            let names: Vec<String> = match tools {
                Tools::Comma(text) => text.split(',').map(|t| t.trim().to_owned()).collect(),
                Tools::List(list) => list,
            };
            let mut mapped = Vec::new();
            for name in names.iter().filter(|n| !n.is_empty()) {
                match tools_of(name) {
                    Ok(found) => {
                        for tool in found {
                            if !mapped.contains(tool) {
                                mapped.push(*tool);
                            }
                        }
                    }
                    Err(why) => not_carried.push(format!("{owner}: tool `{name}` {why}")),
                }
            }
            mapped
        });
        let model = agent
            .model
            .filter(|m| m != "inherit")
            .and_then(|m| model_id(&m, &format!("{owner}: model"), &mut not_carried));
        subagents.push(Entry {
            id,
            description: Some(agent.description),
            instructions: (!body.is_empty()).then_some(body),
            model,
            tools,
            ..Entry::default()
        });
    }

    let origin = settings
        .iter()
        .chain(agents)
        .map(|f| f.origin.as_str())
        .next()
        .unwrap_or(".claude");
    if !any_permissions && subagents.is_empty() && model.is_none() {
        return Err(ImportError::Empty {
            origin: origin.to_owned(),
            message: "not Claude Code settings: no `permissions` and no subagent".to_owned(),
        });
    }
    let rules = without_shadowed(
        rules,
        &format!("mode `{MODE}`"),
        "in Claude Code too",
        &mut not_carried,
    );

    let mut build = Entry {
        id: MODE.to_owned(),
        name: Some("Build".to_owned()),
        description: Some("Imported from Claude Code's settings.".to_owned()),
        model,
        rules,
        ..Entry::default()
    };
    let mut modes = Vec::new();
    let mut default = None;
    match default_mode.as_deref().unwrap_or("default") {
        "default" => build.require_approval.push("write_file"),
        "acceptEdits" => {}
        "bypassPermissions" => not_carried.push(
            "defaultMode `bypassPermissions`: here too calls run without asking, but the ask and deny rules still hold".to_owned(),
        ),
        "dontAsk" => {
            build.require_approval.push("write_file");
            not_carried.push(
                "defaultMode `dontAsk` is not carried over: a write no rule allows asks here, where Claude Code refuses it".to_owned(),
            );
        }
        "plan" => {
            build.require_approval.push("write_file");
            let tools: Vec<&'static str> = ["read_file", "list_files", "write_plan", "submit_plan"]
                .into_iter()
                .chain((!subagents.is_empty()).then_some("subagent"))
                .collect();
            let rules = build
                .rules
                .iter()
                .filter(|r| tools.contains(&r.tool))
                .cloned()
                .collect();
            modes.push(Entry {
                id: "plan".to_owned(),
                name: Some("Plan".to_owned()),
                description: Some("Explore read-only and write a plan; its approval hands over to build.".to_owned()),
                transitions_to: Some(MODE.to_owned()),
                tools: Some(tools),
                rules,
                model: build.model.clone(),
                ..Entry::default()
            });
            default = Some("plan");
        }
        other => {
            build.require_approval.push("write_file");
            not_carried.push(format!(
                "defaultMode `{other}` is not one Claude Code documents: every write asks, as in `default`"
            ));
        }
    }
    modes.push(build);
    not_carried.dedup();
    let origins: Vec<&str> = settings
        .iter()
        .chain(agents)
        .map(|f| f.origin.as_str())
        .collect();
    finish(
        origin,
        &format!(
            "Imported from Claude Code ({}) by `agent-controller import claude`.",
            origins.join(", ")
        ),
        not_carried,
        default,
        &subagents,
        &modes,
    )
}

/// The tools here that Claude Code's tool `name` is, or why it has none.
fn tools_of(name: &str) -> Result<&'static [&'static str], &'static str> {
    match name {
        "Read" => Ok(&["read_file"]),
        "Glob" | "LS" => Ok(&["list_files"]),
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => Ok(&["write_file"]),
        "Task" | "Agent" => Ok(&["subagent"]),
        "Bash" | "BashOutput" | "KillShell" => {
            Err("has no equivalent here: there is no shell tool")
        }
        "WebFetch" | "WebSearch" => Err("has no equivalent here: there is no web tool"),
        "Grep" => Err("has no equivalent here: no tool searches file contents"),
        n if n.starts_with("mcp__") => Err(
            "is an MCP tool: here it is `SERVER__TOOL`, offered once a [[mcpServers]] entry names the server",
        ),
        _ => Err("has no equivalent here"),
    }
}

/// The `defaultModelId` of Claude Code's model `model`, or `None` (reported as `what`'s).
fn model_id(model: &str, what: &str, not_carried: &mut Vec<String>) -> Option<String> {
    if model.starts_with("claude-") && !model.contains(char::is_whitespace) {
        return Some(format!("anthropic/{model}"));
    }
    not_carried.push(format!(
        "{what} `{model}` is not carried over: it is a Claude Code alias; set defaultModelId = \"anthropic/MODEL_ID\""
    ));
    None
}

/// The rules here of Claude Code's permission rule `text` in list `action`; what cannot be
/// carried over goes to `not_carried`.
fn rule_of(text: &str, action: Action, not_carried: &mut Vec<String>) -> Vec<RuleOut> {
    let what = format!("{} rule `{text}`", action.as_str());
    let (tool, spec) = match text.split_once('(') {
        Some((tool, rest)) => match rest.strip_suffix(')') {
            Some(spec) => (tool.trim(), Some(spec.trim())),
            None => ("", None),
        },
        None => (text.trim(), None),
    };
    let is_name = !tool.is_empty()
        && tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !is_name {
        not_carried.push(format!(
            "{what} is not carried over: it does not read as `Tool` or `Tool(specifier)`"
        ));
        return Vec::new();
    }
    if tool == "Bash" {
        let example = match spec {
            None | Some("*") => format!(
                "{{ tool = \"run_command\", action = {} }}",
                quoted(action.as_str())
            ),
            Some(spec) => match spec.strip_suffix(":*") {
                Some(prefix) => format!(
                    "{{ tool = \"run_command\", arg = \"command\", regex = {}, action = {} }}",
                    quoted(&format!("{}( .*)?", regex::escape(prefix))),
                    quoted(action.as_str())
                ),
                None => format!(
                    "{{ tool = \"run_command\", arg = \"command\", glob = {}, action = {} }}",
                    quoted(spec),
                    quoted(action.as_str())
                ),
            },
        };
        not_carried.push(format!(
            "{what} is not carried over: there is no shell tool here (a host's command tool, say `run_command`, takes {example})"
        ));
        return Vec::new();
    }
    let tools = match tools_of(tool) {
        Ok(tools) if *tools != ["subagent"] => tools,
        Ok(_) => {
            not_carried.push(format!(
                "{what} is not carried over: write a rule on `subagent` with arg = \"agentType\" for the types it names"
            ));
            return Vec::new();
        }
        Err(why) => {
            not_carried.push(format!("{what} is not carried over: `{tool}` {why}"));
            return Vec::new();
        }
    };
    let tools: &[&'static str] = if tool == "Read" {
        &["read_file", "list_files"]
    } else {
        tools
    };
    let pattern = match spec {
        None | Some("" | "*" | "**") => Pattern::Any,
        Some(spec) => match path_glob(spec) {
            Ok(glob) => Pattern::Path(glob),
            Err(why) => {
                not_carried.push(format!("{what} is not carried over: {why}"));
                return Vec::new();
            }
        },
    };
    tools
        .iter()
        .map(|tool| RuleOut {
            tool,
            pattern: pattern.clone(),
            action,
            source: text.to_owned(),
        })
        .collect()
}

/// The path glob here of Claude Code's path pattern `spec` (gitignore's reading), or why none.
fn path_glob(spec: &str) -> Result<String, String> {
    if spec.starts_with("//") || spec.starts_with('~') {
        return Err(
            "the path lies outside the workspace, where no tool here reaches (the workspace jail)"
                .to_owned(),
        );
    }
    let (anchored, rest) = match spec.strip_prefix("./").or_else(|| spec.strip_prefix('/')) {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    if rest.split('/').any(|part| part == "..") {
        return Err(
            "the path leaves the project folder (`..`), where no tool here reaches".to_owned(),
        );
    }
    let folder = rest.ends_with('/');
    let rest = rest.trim_end_matches('/');
    let mut glob = if !anchored && !rest.contains('/') {
        format!("**/{rest}")
    } else {
        rest.to_owned()
    };
    if folder {
        glob.push_str("/**");
    }
    if glob.is_empty() {
        glob.push_str("**");
    }
    crate::rules::Glob::path(&glob)
        .map(|_| glob)
        .map_err(|e| format!("`{spec}` is not a glob here ({e})"))
}
