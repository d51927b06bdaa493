//! # agent-controller
//!
//! The mode state machine and plan-approval hand-over of an AI-agent harness.
//!
//! A harness runs a model in *modes*: a read-only **plan** mode where the agent explores and
//! writes a plan, and a **build** mode where it carries the plan out. In a planning mode the model
//! calls the built-in `submit_plan` tool, which captures the plan file and *suspends* the run; the
//! host shows the plan and decides. Approval switches the session to the planning mode's
//! `transitionsTo` (else the default mode) exactly once, before the next model call; rejection,
//! abort, a new user message or a dismissed prompt leave the mode as it was. A mode's
//! `requireApproval` makes tool calls wait for the user the same way.
//!
//! # Map
//!
//! | step | what | where |
//! |---|---|---|
//! | modes | TOML text to a validated mode graph | [`config::load`], [`config::parse`], [`ModeGraph`], or in code [`ModeGraphBuilder`](config::ModeGraphBuilder) |
//! | controller | the graph, the model, the tools, the workspace and a store, wired once | [`AgentController::builder`] ([`AgentControllerBuilder`](controller::AgentControllerBuilder)), with a [`LanguageModel`] and a [`ToolRegistry`] of [`Tool`]s |
//! | session | one conversation in its current mode | [`AgentController::start_session`] with [`SessionOptions`], then [`Session::send_message`] |
//! | outcome | how a run stopped | [`RunOutcome`]: [`Suspended`](RunOutcome::Suspended) on a plan, [`ToolCallsSuspended`](RunOutcome::ToolCallsSuspended) on calls that wait, `Completed`, `Failed`, `Aborted` |
//! | decide | approve or reject one pending decision by its id | [`Session::decide`] with a [`Decision`] (pinned with [`Decision::with_sha256`]); from JSON [`Session::decide_json`] |
//! | restore | the session again, in another process or after a restart | a [`SessionStore`] ([`MemoryStore`], [`FileStore`], `sqlite`, `postgres`), then [`AgentController::restore_session`]; what waits: [`AgentController::list_pending`] |
//! | cancel | stop a run from another task | [`Session::cancel_handle`] gives a [`CancelHandle`](session::CancelHandle) |
//! | events | what happened, in order | [`SessionOptions::on_event`] or the stream [`Session::events`]: [`Event`], matched by [`Event::kind`] |
//! | errors | typed, with a kind to match | [`SessionError`] ([`SessionErrorKind`](session::SessionErrorKind)), [`ConfigError`], [`ModelError`] |
//!
//! The crate root re-exports only what a first program names; the rest lives in its module:
//! what events carry in [`event`] (`SuspendPayload`, `ToolCallPayload`, `RunState`, ...), the
//! parts of a session in [`session`] (`CancelHandle`, `PendingPlan`, `SessionErrorKind`, ...),
//! records and listings in [`store`] (`SessionRecord`, `PendingSummary`, `StoreError`, ...), modes
//! in [`mode`] (`Mode`, `ModeId`), building a graph in code in [`config`] (`ModeGraphBuilder`),
//! tool parts in [`tool`] (`ToolSpec`, `ToolAccess`, `ToolError`) and model parts in [`model`]
//! (`Message`, `ModelErrorKind`).
//!
//! The [`guide`] explains the rest: [the hand-over contract](guide::contract), [the approved
//! plan's files](guide::plan_scope), [a tool that
//! asks](guide::asking), [the task list](guide::tasks), [subagents](guide::subagents), [modes in
//! TOML](guide::config), [rules on tool-call arguments](guide::rules), [hooks that decide
//! first](guide::hooks), [the command
//! line](guide::cli), [real models](guide::models), [editors over ACP](guide::acp), [deciding
//! from anywhere over HTTP](guide::serve), [MCP
//! servers' tools](guide::mcp), [a whole host in Rust](guide::library), [stores and
//! operations](guide::stores), [the workspace jail](guide::jail), [property
//! testing](guide::testing), [performance](guide::performance) and [where each concept
//! lives](guide::layout).
//!
//! # Example
//!
//! Plan, approve pinned to what was shown, and check the switch:
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
//! use agent_controller::model::scripted::ScriptedModel;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let workspace = std::env::temp_dir().join(format!("ac-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&workspace)?;
//! let graph = agent_controller::config::parse(r#"
//!     [[modes]]
//!     id = "plan"
//!     transitionsTo = "build"
//!     availableTools = ["read_file", "write_plan", "submit_plan"]
//!
//!     [[modes]]
//!     id = "build"
//!     default = true
//! "#, "modes.toml")?;
//! let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
//!     .tools(ToolRegistry::with_workspace_tools())
//!     .workspace(&workspace)
//!     .build()?;
//!
//! let events = Arc::new(Mutex::new(Vec::new()));
//! let sink = events.clone();
//! let mut session = controller.start_session(
//!     SessionOptions::new().mode("plan").on_event(move |e| sink.lock().unwrap().push(e.kind())),
//! ).await?;
//! let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else {
//!     panic!("the scripted model submits a plan in plan mode");
//! };
//! assert_eq!(payload.submission.title, "Add dark mode");
//! assert_eq!(&*payload.target_mode_id, "build");
//!
//! let approve = Decision::approve().with_sha256(&payload.submission.sha256);
//! session.decide(&payload.decision_id, approve.clone()).await?;
//! assert_eq!(session.mode().id(), "build");
//! // A second decision for the same plan is refused and changes nothing.
//! assert!(session.decide(&payload.decision_id, approve).await.is_err());
//! assert_eq!(events.lock().unwrap().iter().filter(|k| **k == "mode_changed").count(), 1);
//! # std::fs::remove_dir_all(&workspace)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//!
//! | feature | what it adds |
//! |---|---|
//! | *(none)* | the core: modes, sessions, runs, tools, [`MemoryStore`], [`FileStore`] |
//! | `cli` (default) | the `agent-controller` binary (with `command-hooks`, `terminal`, `schema`, `testing`, `anthropic`, `acp`, `mcp`, `serve`, `import`) |
//! | `command-hooks` | `hook::command::CommandHook` and `review::command::CommandReviewer`: a config's `[[hooks]]` and command `[[reviewers]]` run as commands |
//! | `diff` (default) | a unified diff of each plan revision against the previous one in the suspend payload |
//! | `acp` | `acp`: an Agent Client Protocol agent (`agent-controller acp`), for editors such as Zed |
//! | `serve` | `agent-controller serve`: an HTTP API to decide from anywhere, with `schema` for its OpenAPI document (axum) |
//! | `import` | `import`: a modes TOML from Roo Code's `.roomodes` (YAML or JSON), OpenCode's agents or Claude Code's permissions and subagents |
//! | `terminal` | `terminal`: the plan shown as written, the approval prompt, editing in `$EDITOR` |
//! | `schema` | `schema` and `config::schema`: the JSON Schemas of the config and of the decision JSON |
//! | `openai` | `model::openai`: OpenAI-compatible chat-completions endpoints |
//! | `anthropic` | `model::anthropic`: Anthropic's Messages API |
//! | `mcp` | `tool::mcp::McpTools`: the tools of a config's `[[mcpServers]]`, offered per mode |
//! | `sqlite` | `store::sqlite::SqliteStore` |
//! | `postgres` | `store::PostgresStore`: sessions shared by several hosts |
//! | `testing` | `testing`: proptest strategies, a reference model, `check_controller` |
//!
//! A library user writes `agent-controller = { version = "0.2", default-features = false }` and
//! adds the features they need; on docs.rs each feature-gated item says which feature it needs.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod hint;
mod names;

#[cfg(feature = "acp")]
pub mod acp;
pub mod allowance;
pub mod comment;
pub mod config;
pub mod controller;
pub mod deadline;
pub mod diagram;
pub mod display;
pub mod error;
pub mod event;
mod exchange;
pub mod explain;
pub mod extensions;
mod glob;
pub mod guide;
pub mod hook;
#[cfg(feature = "import")]
pub mod import;
pub mod jail;
pub mod jcs;
pub(crate) mod machine;
pub mod mode;
pub mod model;
mod plan;
pub mod plan_report;
pub mod quorum;
pub mod review;
pub mod rules;
pub mod run;
mod run_state;
#[cfg(feature = "schema")]
pub mod schema;
pub mod session;
pub mod store;
mod store_error;
pub mod subagent;
#[cfg(feature = "terminal")]
pub mod terminal;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tool;
pub mod workspace;

// The root holds what a first program touches (at most 25 names, issue 21); everything else is
// in its module: `config::ModeGraphBuilder`, `event::SuspendPayload`, `session::CancelHandle`,
// `store::SessionRecord`, `tool::ToolSpec`, ...
pub use crate::config::ConfigError;
pub use crate::controller::AgentController;
pub use crate::error::{Error, Result};
pub use crate::event::Event;
pub use crate::mode::ModeGraph;
pub use crate::model::{LanguageModel, ModelError, ModelRequest, ModelResponse};
pub use crate::session::{
    Decision, PendingDecision, RunOutcome, Session, SessionError, SessionOptions,
};
pub use crate::store::{FileStore, MemoryStore, SessionStore};
pub use crate::tool::{Tool, ToolCall, ToolContext, ToolOutput, ToolRegistry};

/// The JSON types of the public API ([`ToolCall::args`], [`Tool::input_schema`],
/// [`SessionOptions::metadata`], ...), re-exported from `serde_json` so a host needs no
/// `serde_json` dependency of its own (nor one of a matching version).
///
/// # Examples
/// ```
/// use agent_controller::json::{Map, Value, json};
/// use agent_controller::ToolCall;
/// let call = ToolCall::new("call_1", "read_file", json!({ "path": "a.txt" }));
/// let args: &Map<String, Value> = call.args.as_object().unwrap();
/// assert_eq!(args["path"], Value::from("a.txt"));
/// ```
pub mod json {
    pub use serde_json::{Map, Value, json};
}

/// The attribute macro the async traits ([`LanguageModel`], [`Tool`], [`SessionStore`]) are
/// written with; implementors put `#[agent_controller::async_trait]` on their `impl` block, so
/// they need no `async-trait` dependency of their own.
pub use async_trait::async_trait;

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    /// The core (`default-features = false`) pulls at most 64 crates (the trial's F9 added `unicode-security`'s
    /// confusable skeletons for `ask_user`, four crates; issue 36 added `strum`'s
    /// derives, four crates; issue 11; `cap-std`, the
    /// workspace jail, brings about ten of them; issue 19 added `regex-syntax`, the Unicode
    /// tables of `display`; issue 23 added `globset` and `regex` for rules on tool-call
    /// arguments, five crates with `bstr`, `aho-corasick` and `regex-automata`), counted as the README's
    /// "Features" section says: distinct name-and-version lines of the normal-dependency tree,
    /// without the crate itself.
    #[test]
    fn core_dependency_count_is_at_most_64() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let output = std::process::Command::new(cargo)
            .args([
                "tree",
                "-e",
                "normal",
                "--no-default-features",
                "--prefix",
                "none",
            ])
            .args([
                "--manifest-path",
                concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
            ])
            .output()
            .expect("cargo tree runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8(output.stdout).expect("cargo tree prints UTF-8");
        let crates: std::collections::BTreeSet<&str> = text
            .lines()
            .map(|line| line.trim_end_matches(" (*)"))
            .filter(|line| !line.is_empty() && !line.starts_with("agent-controller "))
            .collect();
        assert!(
            crates.len() <= 64,
            "{} crates with default-features = false:\n{crates:#?}",
            crates.len()
        );
    }

    /// Issue 21: the crate root re-exports at most 25 names (`toml` has 9), what a first
    /// program touches; the rest are reached through their modules. Counted in this file's
    /// `pub use` items outside `mod tests` and the `json` module.
    #[test]
    fn root_reexports_at_most_25_names() {
        let text = include_str!("lib.rs");
        let code = text
            .split("\n#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        let mut names = Vec::new();
        let mut rest = code;
        while let Some(at) = rest.find("\npub use ") {
            let item = &rest[at + "\npub use ".len()..];
            let end = item.find(';').expect("a use item ends with ';'");
            let path = &item[..end];
            let list = match path.find('{') {
                Some(open) => &path[open + 1..path.rfind('}').expect("a closing brace")],
                None => path.rsplit("::").next().unwrap_or_default(),
            };
            names.extend(
                list.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned),
            );
            rest = &item[end..];
        }
        assert!(names.contains(&"AgentController".to_owned()), "{names:?}");
        assert!(
            names.len() <= 25,
            "{} root re-exports: {names:?}",
            names.len()
        );
    }

    /// The top-level modules under `src/` and, for each, the modules its code names by a
    /// `crate::module` path (`use` lines and paths in expressions alike; comments, doc links
    /// and the `#[cfg(test)] mod tests` at the end of a file do not count).
    fn module_imports() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
        use std::collections::{BTreeMap, BTreeSet};
        use std::path::Path;

        fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).expect("src is readable") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    files(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut paths = Vec::new();
        files(&src, &mut paths);
        let module_of = |path: &Path| -> String {
            let first = path
                .strip_prefix(&src)
                .expect("under src")
                .components()
                .next();
            let name = first.expect("a component").as_os_str().to_string_lossy();
            name.trim_end_matches(".rs").to_owned()
        };
        let modules: BTreeSet<String> = paths.iter().map(|p| module_of(p)).collect();
        let mut imports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for path in &paths {
            let from = module_of(path);
            if from == "lib" || from == "main" {
                continue;
            }
            let text = std::fs::read_to_string(path).expect("a source file");
            let code = text
                .split("\n#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            // Comments and doc text (`///`, and `doc = "..."` in a `cfg_attr`) link, not import.
            let is_doc = |l: &str| {
                let l = l.trim_start();
                l.starts_with("//") || l.starts_with("doc = \"")
            };
            for line in code.lines().filter(|l| !is_doc(l)) {
                for (at, _) in line.match_indices("crate::") {
                    let rest = &line[at + "crate::".len()..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    let to = &rest[..end];
                    if to != from && modules.contains(to) {
                        imports
                            .entry(from.clone())
                            .or_default()
                            .insert(to.to_owned());
                    }
                }
            }
            imports.entry(from).or_default();
        }
        imports
    }

    /// Issue 11: no import cycles between modules. The data flows config -> mode graph ->
    /// session -> run -> tools / model -> store, with the controller wiring them; every other
    /// pair of modules that names each other is a cycle and fails this test.
    ///
    /// The run loop is written as `impl Session` in `src/session/drive.rs` and names the session; the
    /// types the session's operations take and return (`Decision`, `PendingDecision`,
    /// `RunOutcome`) are defined with the session (`run` re-exports them), so the session does
    /// not name the run module.
    /// The edges that lie on an import cycle of `imports` (`from -> to`, sorted).
    fn cycle_edges(
        imports: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    ) -> Vec<String> {
        let reaches = |from: &str, to: &str| {
            let mut seen = std::collections::BTreeSet::new();
            let mut stack = vec![from.to_owned()];
            while let Some(next) = stack.pop() {
                for m in imports.get(&next).into_iter().flatten() {
                    if m == to {
                        return true;
                    }
                    if seen.insert(m.clone()) {
                        stack.push(m.clone());
                    }
                }
            }
            false
        };
        let mut cycles = Vec::new();
        for (from, tos) in imports {
            for to in tos {
                if reaches(to, from) {
                    cycles.push(format!("{from} -> {to}"));
                }
            }
        }
        cycles
    }

    /// The files of the folder `src/{dir}/` and, for each (by name, without `.rs`), the files
    /// of the same folder its code names: `super::file` and `crate::{dir}::file` paths, one
    /// name or a `{...}` group of them (`use super::{change::Change, input::Next}`), in `use`
    /// lines and expressions alike. Comments, doc text and the `#[cfg(test)] mod tests` at the
    /// end of a file do not count, as in [`module_imports`].
    fn file_imports(
        dir: &str,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
        use std::collections::{BTreeMap, BTreeSet};

        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src")
            .join(dir);
        let mut texts = BTreeMap::new();
        for entry in std::fs::read_dir(&folder).expect("the folder is readable") {
            let path = entry.expect("an entry").path();
            if path.extension().is_some_and(|e| e == "rs") {
                let name = path.file_stem().expect("a name").to_string_lossy();
                let text = std::fs::read_to_string(&path).expect("a source file");
                texts.insert(name.into_owned(), text);
            }
        }
        let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '#';
        // The first name of each item of `rest`: one path, or a `{...}` group at its start.
        let first_names = |rest: &str| -> Vec<String> {
            let Some(group) = rest.strip_prefix('{') else {
                let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
                return vec![rest[..end].to_owned()];
            };
            let mut depth = 0;
            let mut items = vec![String::new()];
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => items.push(String::new()),
                    _ => {}
                }
                if let Some(item) = items.last_mut() {
                    item.push(c);
                }
            }
            items
                .iter()
                .map(|item| {
                    let item = item.trim_start_matches([',', ' ', '\n']);
                    let end = item.find(|c: char| !is_ident(c)).unwrap_or(item.len());
                    item[..end].to_owned()
                })
                .collect()
        };
        let mut imports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, text) in &texts {
            let code = text
                .split("\n#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            let is_doc = |l: &&str| {
                let l = l.trim_start();
                l.starts_with("//") || l.starts_with("doc = \"")
            };
            let code: Vec<&str> = code.lines().filter(|l| !is_doc(l)).collect();
            let code = code.join("\n");
            let mut names = BTreeSet::new();
            for prefix in ["super::".to_owned(), format!("crate::{dir}::")] {
                for (at, _) in code.match_indices(&prefix) {
                    names.extend(first_names(&code[at + prefix.len()..]));
                }
            }
            let to = names
                .into_iter()
                .map(|n| n.trim_start_matches("r#").to_owned())
                .filter(|n| n != from && texts.contains_key(n));
            imports.entry(from.clone()).or_default().extend(to);
        }
        imports
    }

    /// Issue 11: no import cycles between modules. The data flows config -> mode graph ->
    /// session -> run -> tools / model -> store, with the controller wiring them; every other
    /// pair of modules that names each other is a cycle and fails this test.
    ///
    /// The run loop is written as `impl Session` in `src/session/drive.rs` and names the session; the
    /// types the session's operations take and return (`Decision`, `PendingDecision`,
    /// `RunOutcome`) are defined with the session (`run` re-exports them), so the session does
    /// not name the run module.
    #[test]
    fn modules_import_each_other_one_way() {
        let imports = module_imports();
        let cycles = cycle_edges(&imports);
        assert!(
            cycles.is_empty(),
            "edges on an import cycle: {cycles:?}\nimports: {imports:#?}"
        );
        assert!(
            imports["mode"].iter().all(|m| m != "config"),
            "{imports:#?}"
        );
        assert!(
            imports["store"]
                .iter()
                .all(|m| m != "run" && m != "session")
        );
    }

    /// Issue 36: the files inside the core (`src/machine/`) and the CLI (`src/cli/`) import
    /// each other one way too (`machine/{change,decide,expiry,input}`, `machine/{check,pending}`
    /// and `cli/{decider,prompt}` named each other).
    #[test]
    fn files_of_the_core_and_the_cli_import_each_other_one_way() {
        for dir in ["machine", "cli"] {
            let imports = file_imports(dir);
            assert!(imports.len() > 5, "{dir}: {imports:#?}");
            let cycles = cycle_edges(&imports);
            assert!(
                cycles.is_empty(),
                "src/{dir}/: edges on an import cycle: {cycles:?}\nimports: {imports:#?}"
            );
        }
    }

    /// Issue 36: the pure core owns its data: it imports no tool, store or workspace module
    /// (what it decides with is its own or sits beneath both, in `exchange` and `plan`).
    #[test]
    fn the_core_imports_no_tool_store_or_workspace_module() {
        let imports = module_imports();
        let leaned_on: Vec<&String> = imports["machine"]
            .iter()
            .filter(|m| ["tool", "store", "workspace"].contains(&m.as_str()))
            .collect();
        assert!(leaned_on.is_empty(), "src/machine/ imports {leaned_on:?}");
    }
}
