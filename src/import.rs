//! A modes TOML from another tool's config (`agent-controller import roo FILE`), with a report
//! of what could not be carried over.
//!
//! **Roo Code / Kilo Code `.roomodes`** (YAML or JSON: JSON is YAML): each of `customModes`
//! becomes a mode: `slug` its id, `name` its name, `roleDefinition` and `customInstructions`
//! its instructions, `description` (else `whenToUse`) its description. Its `groups` become
//! `availableTools`: `read` is `read_file` and `list_files`, `edit` is `write_file`. An `edit`
//! group with a `fileRegex` ("only these files") becomes a negated rule refusing writes to any
//! other path (`not = true`), and keeps `write_file` under `requireApproval`, since a regex reads
//! the path as sent (`docs/../src/main.rs` fits `^docs/`) while Roo Code matches it in the
//! editor. Roo's `fileRegex` is a JavaScript regex searched anywhere in the path; here a rule's
//! regex must match the whole value, so it is wrapped as `.*(?:REGEX).*`. A regex Rust's `regex`
//! cannot read (JavaScript lookaround) is reported, never dropped: its mode then asks before
//! every write. `command`, `mcp` and `browser` have no tool here and are reported.
//!
//! **Ids**: a slug, agent name or subagent name that is no mode id here (ASCII letters, digits,
//! `-` and `_`; Roo Code allows more) is renamed, each other character becoming `-`
//! (`docs-writer.v2` is `docs-writer-v2`), and the rename reported. Names valid as they are keep
//! them; two that rename to the same id stay two modes, the later one with a `-2` suffix (Roo
//! Code; the OpenCode and Claude Code imports leave the second out and report it).
//!
//! **OpenCode** ([`opencode`], [`read_opencode`]): the `agent` entries of `opencode.json` /
//! `opencode.jsonc` (JSON with comments and trailing commas) and the `.opencode/agent/*.md`
//! (or `agents/`) files, whose YAML frontmatter holds the same keys and whose body is the
//! prompt. An agent of `mode` `primary` becomes a mode, `subagent` a subagent type, `all` (the
//! default) both. `permission.edit` `ask` puts `write_file` under `requireApproval`, `deny`
//! refuses every write by a rule; a `tools` map with `write` or `edit` off leaves `write_file`
//! out of `availableTools`.
//!
//! **Claude Code** ([`claude_code`], [`read_claude_code`]): the `permissions` of
//! `.claude/settings.json` (and `settings.local.json`) become the rules of the mode `build`
//! (`Read(...)` on `read_file` and `list_files`, `Edit(...)`/`Write(...)` on `write_file`,
//! with Claude Code's order: deny beats ask beats allow), `defaultMode` its `requireApproval`
//! (`plan` adds a planning mode); `.claude/agents/*.md` become subagent types.
//!
//! Both have a `Bash` tool, web fetches and MCP servers, which have no tool here: each rule or
//! setting on them is reported (with the rule a host's command tool would take), never dropped
//! silently. Every output passes `check` with the workspace tools, or the import is refused.

use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use write::quoted;

mod claude;
mod files;
mod frontmatter;
mod opencode;
mod write;

pub use claude::claude_code;
pub use opencode::opencode;

/// Largest input `import` reads (1 MiB), every file it reads together: a modes file is far
/// smaller.
pub const MAX_IMPORT_BYTES: usize = 1 << 20;

/// Most agent files `import` reads from one folder.
pub const MAX_AGENT_FILES: usize = 256;

/// One file an import reads: its name (as errors and the report name it) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The file's name, as given.
    pub origin: String,
    /// Its text.
    pub text: String,
}

impl SourceFile {
    /// The file `origin` holding `text`.
    pub fn new(origin: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            origin: origin.into(),
            text: text.into(),
        }
    }
}

/// [`ImportError::TooLarge`] naming the file past which `files` hold more than
/// [`MAX_IMPORT_BYTES`] together.
fn within_bounds<'a>(files: impl IntoIterator<Item = &'a SourceFile>) -> Result<(), ImportError> {
    let mut total = 0usize;
    for file in files {
        total = total.saturating_add(file.text.len());
        if total > MAX_IMPORT_BYTES {
            return Err(ImportError::TooLarge {
                origin: file.origin.clone(),
            });
        }
    }
    Ok(())
}

/// Imports the OpenCode project or file at `path`: a folder's `opencode.jsonc` or
/// `opencode.json` and its `.opencode/agent/*.md` and `.opencode/agents/*.md` files (as
/// OpenCode finds them), or the one file named (a `.md` file is an agent file). Only regular
/// files are read (a symlink in the agent folders is reported and skipped); see [`opencode`].
///
/// # Errors
/// [`ImportError::Read`], [`ImportError::TooLarge`] (all files together),
/// [`ImportError::TooManyFiles`], [`ImportError::Empty`] (none of those files), and those of
/// [`opencode`].
pub fn read_opencode(path: &Path) -> Result<Imported, ImportError> {
    let mut budget = files::Budget::new();
    let mut notes = Vec::new();
    if !path.is_dir() {
        let file = files::read(path, &mut budget)?;
        return if path.extension().is_some_and(|e| e == "md") {
            opencode::import(None, &[file], notes)
        } else {
            opencode::import(Some(&file), &[], notes)
        };
    }
    let mut config = None;
    for name in ["opencode.jsonc", "opencode.json"] {
        let candidate = path.join(name);
        if files::regular(&candidate, &mut notes).is_some() {
            if let Some(SourceFile { origin, .. }) = &config {
                return Err(ImportError::Unsupported {
                    origin: path.display().to_string(),
                    message: format!("both {origin} and {name} are there: name the one to import"),
                });
            }
            config = Some(files::read(&candidate, &mut budget)?);
        }
    }
    let mut agents = Vec::new();
    for folder in [".opencode/agent", ".opencode/agents"] {
        agents.extend(files::markdown_in(
            &path.join(folder),
            &mut budget,
            &mut notes,
        )?);
    }
    if config.is_none() && agents.is_empty() {
        return Err(ImportError::Empty {
            origin: path.display().to_string(),
            message: "no opencode.jsonc, opencode.json or .opencode/agent/*.md here".to_owned(),
        });
    }
    opencode::import(config.as_ref(), &agents, notes)
}

/// Imports the Claude Code project or file at `path`: a folder's `.claude/settings.json`,
/// `.claude/settings.local.json` and `.claude/agents/*.md` (or those directly in the folder
/// when it is the `.claude` folder itself), or the one file named (a `.md` file is a subagent
/// file). Only regular files are read; see [`claude_code`].
///
/// # Errors
/// [`ImportError::Read`], [`ImportError::TooLarge`] (all files together),
/// [`ImportError::TooManyFiles`], [`ImportError::Empty`] (none of those files), and those of
/// [`claude_code`].
pub fn read_claude_code(path: &Path) -> Result<Imported, ImportError> {
    let mut budget = files::Budget::new();
    let mut notes = Vec::new();
    if !path.is_dir() {
        let file = files::read(path, &mut budget)?;
        return if path.extension().is_some_and(|e| e == "md") {
            claude::import(&[], &[file], notes)
        } else {
            claude::import(&[file], &[], notes)
        };
    }
    let nested = path.join(".claude");
    let base = if nested.is_dir() {
        nested
    } else {
        path.to_path_buf()
    };
    let mut settings = Vec::new();
    for name in ["settings.json", "settings.local.json"] {
        let candidate = base.join(name);
        if files::regular(&candidate, &mut notes).is_some() {
            settings.push(files::read(&candidate, &mut budget)?);
        }
    }
    let agents = files::markdown_in(&base.join("agents"), &mut budget, &mut notes)?;
    if settings.is_empty() && agents.is_empty() {
        return Err(ImportError::Empty {
            origin: path.display().to_string(),
            message: "no .claude/settings.json, settings.local.json or agents/*.md here".to_owned(),
        });
    }
    claude::import(&settings, &agents, notes)
}

/// What an import made: the modes TOML, and what it could not carry over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The modes TOML, the report at its top as comments.
    pub toml: String,
    /// What could not be carried over, one sentence each.
    pub not_carried: Vec<String>,
}

/// Why a file could not be imported; nothing was made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The file is larger than [`MAX_IMPORT_BYTES`].
    #[error("{origin}: the file is larger than {MAX_IMPORT_BYTES} bytes")]
    TooLarge {
        /// The file's name, as given.
        origin: String,
    },
    /// The file is not of the format named, or malformed, at this place.
    #[error("{origin}:{line}:{column}: {message}")]
    Malformed {
        /// The file's name, as given.
        origin: String,
        /// The line (1-based).
        line: usize,
        /// The column (1-based).
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The file holds no mode to import.
    #[error("{origin}: {message}")]
    Empty {
        /// The file's name, as given.
        origin: String,
        /// What is missing.
        message: String,
    },
    /// A file or folder could not be read.
    #[error("{origin}: {source}")]
    Read {
        /// The file's name, as given.
        origin: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A folder holds more than [`MAX_AGENT_FILES`] agent files.
    #[error("{origin}: more than {MAX_AGENT_FILES} agent files")]
    TooManyFiles {
        /// The folder's name.
        origin: String,
    },
    /// The input reads, but cannot be imported as it is (the message says why): two configs
    /// where the tool reads one, or modes that would not pass `check`.
    #[error("{origin}: {message}")]
    Unsupported {
        /// The file's or folder's name, as given.
        origin: String,
        /// Why.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RooFile {
    custom_modes: Vec<RooMode>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RooMode {
    slug: String,
    name: Option<String>,
    role_definition: Option<String>,
    custom_instructions: Option<String>,
    description: Option<String>,
    when_to_use: Option<String>,
    #[serde(default)]
    groups: Vec<RooGroup>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RooGroup {
    Plain(String),
    WithOptions(String, RooGroupOptions),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RooGroupOptions {
    file_regex: Option<String>,
}

/// Imports Roo Code's (or Kilo Code's) `.roomodes` text `text` (YAML or JSON), read from
/// `origin`: the modes TOML and what it could not carry over ([`crate::import`]).
///
/// # Errors
/// [`ImportError::TooLarge`], [`ImportError::Malformed`] (not YAML, or no `customModes` list of
/// modes with a `slug`, at its line and column), [`ImportError::Empty`] (no mode),
/// [`ImportError::Unsupported`] (the modes made would not pass `check`).
///
/// # Examples
/// ```
/// let roo = "customModes:\n  - slug: docs\n    name: Docs\n    roleDefinition: You write docs.\n    groups:\n      - read\n      - - edit\n        - fileRegex: \\.md$\n";
/// let imported = agent_controller::import::roo_code(roo, ".roomodes")?;
/// let graph = agent_controller::config::parse(&imported.toml, "modes.toml")?;
/// let docs = graph.default_mode();
/// assert_eq!(docs.id(), "docs");
/// assert_eq!(docs.rules().as_slice()[0].to_string(), "deny write_file path regex not `.*(?:\\.md$).*`");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn roo_code(text: &str, origin: &str) -> Result<Imported, ImportError> {
    if text.len() > MAX_IMPORT_BYTES {
        return Err(ImportError::TooLarge {
            origin: origin.to_owned(),
        });
    }
    let file: RooFile = serde_norway::from_str(text).map_err(|e| {
        let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
        ImportError::Malformed {
            origin: origin.to_owned(),
            line,
            column,
            message: format!("not a Roo Code modes file: {e}"),
        }
    })?;
    if file.custom_modes.is_empty() {
        return Err(ImportError::Empty {
            origin: origin.to_owned(),
            message: "customModes holds no mode".to_owned(),
        });
    }
    let mut not_carried = Vec::new();
    let mut ids = write::Ids::reserving(file.custom_modes.iter().map(|m| m.slug.as_str()));
    let mut body = String::new();
    for mode in &file.custom_modes {
        let id = ids.claim(&mode.slug, "mode", &mut not_carried);
        body.push_str(&roo_mode(mode, &id, &mut not_carried));
    }
    let mut toml = write::report(
        &format!("Imported from Roo Code modes ({origin}) by `agent-controller import roo`."),
        &not_carried,
    );
    toml.push_str(&body);
    write::checked(origin, toml, not_carried)
}

/// One `[[modes]]` table of Roo Code mode `mode`, of id `id` (its slug, or what it is renamed
/// to); what it cannot carry goes to `not_carried`.
fn roo_mode(mode: &RooMode, id: &str, not_carried: &mut Vec<String>) -> String {
    let slug = &mode.slug;
    let mut tools: Vec<&str> = Vec::new();
    let mut rules: Vec<String> = Vec::new();
    let mut asks = false;
    for group in &mode.groups {
        let (name, options) = match group {
            RooGroup::Plain(name) => (name.as_str(), None),
            RooGroup::WithOptions(name, options) => (name.as_str(), Some(options)),
        };
        match name {
            "read" => tools.extend(["read_file", "list_files"]),
            "edit" => {
                tools.push("write_file");
                let Some(regex) = options.and_then(|o| o.file_regex.as_deref()) else {
                    continue;
                };
                // Roo searches the path for the regex; a rule's regex matches the whole value.
                let whole = format!(".*(?:{regex}).*");
                asks = true;
                match crate::rules::Pattern::new(&whole) {
                    Ok(_) => rules.push(format!(
                        "  {{ tool = \"write_file\", arg = \"path\", regex = {}, not = true, action = \"deny\" }},",
                        quoted(&whole)
                    )),
                    Err(e) => not_carried.push(format!(
                        "mode `{slug}`: the edit group's fileRegex `{regex}` cannot be read here ({e}; JavaScript lookaround has no Rust equivalent): every write of the mode asks instead"
                    )),
                }
            }
            "command" | "mcp" | "browser" => not_carried.push(format!(
                "mode `{slug}`: the `{name}` group has no tool here (add your own tool, or an MCP server in [[mcpServers]], and list it in availableTools)"
            )),
            other => not_carried.push(format!("mode `{slug}`: unknown group `{other}`")),
        }
    }
    tools.dedup();
    let mut out = String::from("\n[[modes]]\n");
    if id != slug {
        let _ = writeln!(out, "# Roo Code's slug: {}", write::comment(&quoted(slug)));
    }
    let _ = writeln!(out, "id = {}", quoted(id));
    if let Some(name) = &mode.name {
        let _ = writeln!(out, "name = {}", quoted(name));
    }
    if let Some(description) = mode.description.as_ref().or(mode.when_to_use.as_ref()) {
        let _ = writeln!(out, "description = {}", quoted(description));
    }
    let instructions: Vec<&str> = [&mode.role_definition, &mode.custom_instructions]
        .into_iter()
        .filter_map(|t| t.as_deref())
        .collect();
    if !instructions.is_empty() {
        let _ = writeln!(out, "instructions = {}", quoted(&instructions.join("\n\n")));
    }
    let listed: Vec<String> = tools.iter().map(|t| quoted(t)).collect();
    let _ = writeln!(out, "availableTools = [{}]", listed.join(", "));
    if asks {
        out.push_str("# Roo Code matched fileRegex in the editor; here a write outside it is refused, and\n# every other write asks (the regex reads the path as sent).\n");
        out.push_str("requireApproval = [\"write_file\"]\n");
    }
    if !rules.is_empty() {
        out.push_str("rules = [\n");
        for rule in rules {
            out.push_str(&rule);
            out.push('\n');
        }
        out.push_str("]\n");
    }
    out
}
