//! Tools: the [`Tool`] trait, the [`ToolRegistry`] a controller is built with, and the shapes
//! exchanged with the model ([`ToolSpec`], [`ToolCall`], [`ToolOutput`]).
//!
//! `submit_plan` is built in ([`submit_plan`]): the controller offers it in planning modes and
//! handles its plan itself, and a builder may put it in a registry like any tool
//! ([`submit_plan::SubmitPlan`]; outside a run it returns a readable fallback).
//!
//! The task tools are built in too ([`tasks`]): `task_write`, `task_update`,
//! `task_complete` and `task_check` keep the session's task list, added when a mode lists one.
//!
//! The workspace tools ([`fs`]) read and write small regular files inline, with blocking calls
//! inside their async `execute`: reads are capped at [`fs::MAX_READ_BYTES`] and only regular
//! files inside the workspace are touched, so a call holds the runtime thread for about as long
//! as a page-cache read. The session stores' fsyncing I/O, which can take milliseconds, runs on
//! tokio's blocking pool instead ([`crate::store`]). A tool of your own that does slow I/O
//! should use async I/O or `tokio::task::spawn_blocking`.

pub mod ask_user;
pub mod fs;
pub use crate::exchange::input;
pub mod mcp;
pub mod subagent;
pub mod submit_plan;
pub mod tasks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use tokio_util::sync::CancellationToken;

use crate::extensions::Extensions;

pub use self::submit_plan::SUBMIT_PLAN;
pub use crate::exchange::{ASK_USER, ToolCall, ToolOutput, ToolSuspension, args};

/// What a tool may change, as the tool declares it ([`Tool::access`]), after MCP's
/// `readOnlyHint`. A planning mode without `availableTools` offers only the tools that change
/// nothing and the plan tools; one that writes runs in a planning mode only where its config
/// lists it by name (and `check` warns then: [`crate::ModeGraph::planning_modes_listing_writers`]).
///
/// # Examples
/// ```
/// use agent_controller::tool::{Tool, ToolAccess, fs};
/// assert_eq!(fs::ReadFile.access(), ToolAccess::ReadOnly);
/// assert_eq!(fs::WritePlan.access(), ToolAccess::Plans);
/// assert_eq!(fs::WriteFile.access(), ToolAccess::Writes);
/// assert!(ToolAccess::Plans.is_offered_unlisted_in_planning_modes());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ToolAccess {
    /// Changes nothing: it only reads (MCP's `readOnlyHint: true`), like `read_file` and
    /// `list_files`.
    ReadOnly,
    /// A plan tool: changes only plan files inside the plans directory, like `write_plan`
    /// (and the built-in `submit_plan`, which reads one).
    Plans,
    /// May change anything it can reach, like `write_file`: what a tool is unless it says
    /// otherwise.
    #[default]
    Writes,
}

impl ToolAccess {
    /// Whether a planning mode without `availableTools` offers a tool of this access: a
    /// read-only tool or a plan tool, never one that writes.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::tool::ToolAccess;
    /// assert!(ToolAccess::ReadOnly.is_offered_unlisted_in_planning_modes());
    /// assert!(!ToolAccess::Writes.is_offered_unlisted_in_planning_modes());
    /// ```
    pub fn is_offered_unlisted_in_planning_modes(self) -> bool {
        matches!(self, ToolAccess::ReadOnly | ToolAccess::Plans)
    }
}

/// What the model is told about a tool: name, description and JSON Schema of its input, and
/// what the tool may change ([`ToolAccess`], for hosts; providers send the first three).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The tool name the model calls it by.
    pub name: Arc<str>,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the tool's input object.
    pub input_schema: Value,
    /// What the tool may change, as it declares it ([`Tool::access`]); absent in JSON:
    /// [`ToolAccess::Writes`].
    #[serde(default)]
    pub access: ToolAccess,
}

/// Where a tool says a path argument of a call leads ([`Tool::locate`]): `None` when the call
/// leaves the argument out and the tool has no default for it, `Some(Ok(path))` relative to the
/// workspace, `Some(Err(why))` for a path the tool refuses.
pub type PathLocation = Option<Result<PathBuf, String>>;

/// What a tool sees of the session that runs it: where it works, which session, run, mode and
/// tool call it serves, a cancellation token, and the host's extensions.
///
/// `#[non_exhaustive]` so fields can be added; build one outside a session (to test a tool)
/// with [`ToolContext::new`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolContext<'a> {
    /// The workspace root; relative paths are resolved against it.
    pub workspace: &'a Path,
    /// The plans directory: the workspace joined with the config's `plansDir`, which lies inside
    /// the workspace.
    pub plans_dir: &'a Path,
    /// The id of the mode the call runs in.
    pub mode_id: &'a str,
    /// The id of the session the call belongs to.
    pub session_id: &'a str,
    /// The id of the run the call belongs to (unique within the session).
    pub run_id: &'a str,
    /// The id of this tool call, as the model gave it.
    pub tool_call_id: &'a str,
    /// Cancelled when the host cancels the run ([`crate::session::CancelHandle`]). The run loop
    /// stops waiting for the tool at once either way (the tool's future is dropped, and the
    /// model gets a "cancelled" result); a tool may watch the token to stop work that outlives
    /// its future.
    pub cancel: CancellationToken,
    /// The host's state for this session ([`crate::SessionOptions::extension`]).
    pub extensions: &'a Extensions,
    /// The plan files pending a decision in any session of the store; tools must not change
    /// them (the workspace tools refuse to, or write the new plan under a fresh name).
    pub pending_plans: &'a dyn PendingPlans,
    /// The protected areas no workspace tool reads, lists or writes: files, and directories with
    /// everything beneath them ([`crate::controller::AgentControllerBuilder::protected_path`]; the
    /// controller adds its store's files, [`crate::store::SessionStore::protected_paths`]).
    pub protected_paths: &'a [PathBuf],
}

impl<'a> ToolContext<'a> {
    /// A context outside any session (for testing a tool on its own): empty session, run and
    /// tool-call ids, a token nobody cancels, and no extensions.
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use agent_controller::{Tool, ToolContext, ToolRegistry};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let workspace = tempfile::tempdir()?;
    /// std::fs::write(workspace.path().join("a.txt"), "hello")?;
    /// let plans = workspace.path().join(".agent/plans");
    /// let ctx = ToolContext::new(workspace.path(), &plans, "build");
    /// let tools = ToolRegistry::with_workspace_tools();
    /// let read = tools.get("read_file").unwrap();
    /// let output = read.execute(&serde_json::json!({ "path": "a.txt" }), &ctx).await;
    /// assert!(!output.is_error);
    /// assert!(output.content.contains("hello"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(workspace: &'a Path, plans_dir: &'a Path, mode_id: &'a str) -> Self {
        Self {
            workspace,
            plans_dir,
            mode_id,
            session_id: "",
            run_id: "",
            tool_call_id: "",
            cancel: CancellationToken::new(),
            extensions: &crate::extensions::EMPTY,
            pending_plans: &(),
            protected_paths: &[],
        }
    }

    /// The same context, with `paths` as the protected areas no workspace tool touches.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ToolContext, ToolRegistry};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let workspace = tempfile::tempdir()?;
    /// std::fs::write(workspace.path().join("secret.toml"), "key = 1")?;
    /// let plans = workspace.path().join(".agent/plans");
    /// let protected = [workspace.path().join("secret.toml")];
    /// let ctx = ToolContext::new(workspace.path(), &plans, "build").with_protected_paths(&protected);
    /// let read = ToolRegistry::with_workspace_tools().get("read_file").unwrap().clone();
    /// let output = read.execute(&serde_json::json!({ "path": "secret.toml" }), &ctx).await;
    /// assert!(output.is_error, "a protected file is not read");
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_protected_paths(mut self, paths: &'a [PathBuf]) -> Self {
        self.protected_paths = paths;
        self
    }

    /// The same context, telling the tools which plan files are pending a decision.
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use agent_controller::ToolContext;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pending = vec![".agent/plans/add-dark-mode.md".to_owned()];
    /// let ctx = ToolContext::new(Path::new("."), Path::new(".agent/plans"), "plan").with_pending_plans(&pending);
    /// assert_eq!(ctx.pending_plans.pending_plan_paths().await.unwrap(), pending);
    /// # }
    /// ```
    pub fn with_pending_plans(mut self, pending_plans: &'a dyn PendingPlans) -> Self {
        self.pending_plans = pending_plans;
        self
    }
}

impl std::fmt::Debug for dyn PendingPlans + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingPlans")
    }
}

/// Tells a tool which plan files are pending a decision, asked only when a tool is about to
/// change a file (the store behind it may have to be read).
///
/// # Examples
/// ```
/// use agent_controller::tool::PendingPlans;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pending = vec![".agent/plans/add-dark-mode.md".to_owned()];
/// assert_eq!(pending.pending_plan_paths().await.unwrap(), [".agent/plans/add-dark-mode.md"]);
/// assert!(().pending_plan_paths().await.unwrap().is_empty());
/// # }
/// ```
#[async_trait]
pub trait PendingPlans: Send + Sync {
    /// The paths of the pending plan files, relative to the workspace (as submitted).
    ///
    /// # Errors
    /// A message when they cannot be known (the store cannot be read); tools then refuse to
    /// change files rather than risk changing a pending plan.
    async fn pending_plan_paths(&self) -> Result<Vec<String>, String>;
}

/// A fixed list of pending plan paths.
#[async_trait]
impl PendingPlans for Vec<String> {
    async fn pending_plan_paths(&self) -> Result<Vec<String>, String> {
        Ok(self.clone())
    }
}

/// No plan is pending.
#[async_trait]
impl PendingPlans for () {
    async fn pending_plan_paths(&self) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

/// A tool the model can call.
///
/// `Any` lets a registry tell the crate's built-in tools from a tool that takes a built-in's
/// name ([`ToolRegistry::register`]); a tool is `'static`, as one in an `Arc<dyn Tool>` is.
///
/// Implementations report failures as [`ToolOutput::error`] results for the model rather than
/// panicking or returning Rust errors: a tool failure is part of the conversation. The trait is
/// async through [`async_trait`](crate::async_trait): implement it with
/// `#[agent_controller::async_trait]` on the `impl` block.
///
/// # Examples
/// A tool that counts the words of its `text` argument, registered and offered in a mode that
/// lists it:
/// ```
/// use std::path::Path;
/// use std::sync::Arc;
/// use agent_controller::{Tool, ToolContext, ToolOutput, ToolRegistry};
/// use serde_json::{json, Value};
///
/// struct WordCount;
///
/// #[agent_controller::async_trait]
/// impl Tool for WordCount {
///     fn name(&self) -> &str {
///         "word_count"
///     }
///     fn description(&self) -> String {
///         "Counts the words of `text`.".to_owned()
///     }
///     fn input_schema(&self) -> Value {
///         json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
///     }
///     async fn execute(&self, args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
///         match args["text"].as_str() {
///             Some(text) => ToolOutput::ok(text.split_whitespace().count().to_string()),
///             None => ToolOutput::error("`text` must be a string"),
///         }
///     }
/// }
///
/// let mut tools = ToolRegistry::new();
/// tools.register(Arc::new(WordCount))?;
/// let ctx = ToolContext::new(Path::new("."), Path::new(".agent/plans"), "build");
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let tool = tools.get("word_count").unwrap();
/// assert_eq!(tool.execute(&json!({"text": "a b c"}), &ctx).await, ToolOutput::ok("3"));
/// # });
/// # Ok::<(), agent_controller::Error>(())
/// ```
#[async_trait]
pub trait Tool: Send + Sync + std::any::Any {
    /// The name the model calls the tool by; unique within a registry.
    fn name(&self) -> &str;
    /// What the tool does, for the model.
    fn description(&self) -> String;
    /// JSON Schema of the input object. A call whose arguments do not fit it (an unknown
    /// property where `additionalProperties` is `false`, a wrong type, a missing required
    /// property) is refused before it runs or waits for approval, and the model gets an error
    /// result saying why ([`input`] lists the keywords checked).
    fn input_schema(&self) -> Value;
    /// What the tool may change (after MCP's `readOnlyHint`): [`ToolAccess::Writes`] unless
    /// the tool says otherwise. Say [`ToolAccess::ReadOnly`] only for a tool that changes
    /// nothing, on disk or elsewhere: a planning mode without `availableTools` offers it.
    fn access(&self) -> ToolAccess {
        ToolAccess::Writes
    }
    /// Where the path argument `arg` of a call leads, relative to the workspace, as this tool
    /// opens it (before symlinks are followed): what a mode's path rules on `arg` match, once
    /// the workspace jail has followed the symlinks in it ([`crate::rules::resolve_paths_for`]).
    /// `path` is the argument's value, `None` when the call leaves it out. Only `ctx`'s
    /// `workspace` and `plans_dir` are set when rules ask.
    ///
    /// Returns `None` when the call leaves the argument out and the tool has no default for it
    /// (a rule on it then matches nothing, [`crate::rules`]), and `Some(Err(why))` for a path
    /// the tool refuses (in doubt, for the rules: every `deny` and `ask` rule on it matches).
    /// The default: `path` relative to the workspace (an absolute path under it made
    /// relative), and no default path. Override it when the tool reads its path otherwise
    /// (`write_plan` puts a bare file name in the plans directory; `list_files` lists the
    /// workspace when `path` is left out), so that a rule checks the path the tool uses.
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use agent_controller::tool::{Tool, ToolContext, fs::{ListFiles, WritePlan}};
    /// let ws = Path::new("/ws");
    /// let plans = ws.join(".agent/plans");
    /// let ctx = ToolContext::new(ws, &plans, "plan");
    /// let at = |tool: &dyn Tool, path| tool.locate("path", path, &ctx);
    /// assert_eq!(at(&WritePlan, Some("p.md")), Some(Ok(".agent/plans/p.md".into())));
    /// assert_eq!(at(&ListFiles, None), Some(Ok(".".into())));
    /// ```
    fn locate(&self, arg: &str, path: Option<&str>, ctx: &ToolContext<'_>) -> PathLocation {
        let _ = arg;
        path.map(|path| in_workspace(ctx.workspace, path))
    }
    /// The arguments of a call (its `args`) that name paths the call writes, each located
    /// as [`Tool::locate`] locates it: what the files of an approved plan bind in the mode it
    /// handed over to (`planScope`, the guide's [plan scope page](crate::guide::plan_scope)).
    /// The default: none. A tool that writes ([`ToolAccess::Writes`]) and names none counts as
    /// writing outside every plan's files, so a write of it waits (or is refused) there.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::tool::{Tool, fs::{ReadFile, WriteFile}};
    /// let args = serde_json::json!({ "path": "src/a.rs", "content": "x" });
    /// assert_eq!(WriteFile.written_path_args(&args), ["path"]);
    /// assert!(ReadFile.written_path_args(&args).is_empty());
    /// ```
    fn written_path_args(&self, args: &Value) -> Vec<String> {
        let _ = args;
        Vec::new()
    }
    /// What runs the tool's calls when that is not this process: for an MCP server's tool, the
    /// server's transport (its command and arguments, or its URL). An allowance given for the
    /// tool records it ([`crate::allowance::Allowance::origin`]) and covers only a tool of the
    /// same origin, so another server that reuses the name is asked about again. `None` (the
    /// default) for a tool of the process itself.
    fn origin(&self) -> Option<String> {
        None
    }
    /// Runs the tool on `args` (a JSON object).
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput;

    /// The *resume* step of a call that suspended ([`ToolOutput::suspend`]): `answer` is the
    /// user's answer, already checked against the schema the call suspended with; `args` are
    /// the call's arguments. Returns the call's result for the model. Runs once per answered
    /// call, in the process that carries the run on (it may not be the one that suspended it).
    /// The default hands the model the answer as JSON text.
    async fn resume(&self, args: &Value, answer: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let _ = (args, ctx);
        ToolOutput::ok(answer.to_string())
    }
}

/// `path`, as the workspace tools take it, relative to `workspace`: an absolute path under it
/// made relative ([`crate::jail::relative_to`]); the reason when it cannot be.
pub(crate) fn in_workspace(workspace: &Path, path: &str) -> Result<PathBuf, String> {
    crate::jail::relative_to(workspace, path).map_err(|e| e.to_string())
}

/// Errors from building a [`ToolRegistry`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// Two tools were registered under the same name.
    #[error("tool `{0}` is registered twice")]
    Duplicate(String),
    /// A tool other than the crate's [`submit_plan::SubmitPlan`] tried to take the built-in
    /// `submit_plan` name.
    #[error(
        "tool name `{0}` is reserved for the built-in plan tool: register `agent_controller::tool::submit_plan::SubmitPlan` for it, or name your tool otherwise"
    )]
    Reserved(String),
}

/// The tools a controller can offer, by name. `submit_plan` is built in: a controller offers it
/// whether a registry holds it or not, and a registry holds it only when a builder registers
/// the crate's [`submit_plan::SubmitPlan`].
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// let tools = ToolRegistry::new();
    /// assert_eq!(tools.names().count(), 0);
    /// assert!(tools.knows("submit_plan"), "the built-in plan tool is always known");
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with the workspace tools the CLI uses: `read_file`, `list_files`, `write_file`
    /// (all confined to the workspace) and `write_plan` (confined to the plans directory).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// let tools = ToolRegistry::with_workspace_tools();
    /// let mut names: Vec<&str> = tools.names().collect();
    /// names.sort();
    /// assert_eq!(names, ["list_files", "read_file", "write_file", "write_plan"]);
    /// ```
    pub fn with_workspace_tools() -> Self {
        let mut registry = Self::new();
        for tool in fs::workspace_tools() {
            // The built-in names are distinct and not reserved.
            let _ = registry.register(tool);
        }
        registry
    }

    /// Adds a tool. The crate's [`submit_plan::SubmitPlan`] is added like any other (the
    /// config offers `submit_plan` the same way with it or without it).
    ///
    /// # Errors
    /// [`ToolError::Duplicate`] if the name is taken (the crate's `submit_plan` registered
    /// twice too), [`ToolError::Reserved`] for another tool named `submit_plan`.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::json::{Value, json};
    /// use agent_controller::{Tool, ToolContext, ToolOutput, ToolRegistry, tool::ToolError};
    ///
    /// struct Clock;
    /// #[agent_controller::async_trait]
    /// impl Tool for Clock {
    ///     fn name(&self) -> &str { "clock" }
    ///     fn description(&self) -> String { "The time".into() }
    ///     fn input_schema(&self) -> Value { json!({ "type": "object" }) }
    ///     async fn execute(&self, _: &Value, _: &ToolContext<'_>) -> ToolOutput { ToolOutput::ok("12:00") }
    /// }
    ///
    /// let mut tools = ToolRegistry::with_workspace_tools();
    /// tools.register(Arc::new(Clock))?;
    /// assert!(tools.knows("clock"));
    /// assert_eq!(tools.register(Arc::new(Clock)), Err(ToolError::Duplicate("clock".into())));
    /// // The crate's plan tool is registered like any other.
    /// tools.register(Arc::new(agent_controller::tool::submit_plan::SubmitPlan))?;
    /// assert!(tools.get("submit_plan").is_some());
    /// # Ok::<(), ToolError>(())
    /// ```
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), ToolError> {
        let name = tool.name().to_owned();
        if name == SUBMIT_PLAN && !submit_plan::SubmitPlan::is(&*tool) {
            return Err(ToolError::Reserved(name));
        }
        if self.by_name.contains_key(&name) {
            return Err(ToolError::Duplicate(name));
        }
        self.by_name.insert(name, self.tools.len());
        self.tools.push(tool);
        Ok(())
    }

    /// The tool with this name, if registered.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ToolRegistry, tool::ToolAccess};
    /// let tools = ToolRegistry::with_workspace_tools();
    /// assert_eq!(tools.get("read_file").map(|t| t.access()), Some(ToolAccess::ReadOnly));
    /// assert!(tools.get("deploy").is_none());
    /// ```
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|i| &self.tools[*i])
    }

    /// Whether a config may name this tool: a registered name or `submit_plan`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// let tools = ToolRegistry::with_workspace_tools();
    /// assert!(tools.knows("write_file"));
    /// assert!(!tools.knows("Write_File"), "names are exact");
    /// ```
    pub fn knows(&self, name: &str) -> bool {
        name == SUBMIT_PLAN || self.by_name.contains_key(name)
    }

    /// Registered tool names in registration order (`submit_plan` only where a builder
    /// registered it).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolRegistry;
    /// assert!(ToolRegistry::with_workspace_tools().names().any(|n| n == "list_files"));
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.tools.iter().map(|t| t.name())
    }

    /// All registered tools in registration order.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ToolRegistry, tool::ToolAccess};
    /// let tools = ToolRegistry::with_workspace_tools();
    /// let writers: Vec<&str> = tools.iter().filter(|t| t.access() == ToolAccess::Writes).map(|t| t.name()).collect();
    /// assert_eq!(writers, ["write_file"]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> + '_ {
        self.tools.iter()
    }
}
