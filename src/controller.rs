//! The [`AgentController`]: a validated mode graph, a tool registry and a model, from which
//! sessions are started.

use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::ConfigError;
use crate::deadline::{Clock, system_clock};
use crate::event::Event;
use crate::mode::{ModeGraph, ModeId};
use crate::model::LanguageModel;
use crate::session::{ModeRuntime, Session, SessionError, SessionOptions, Shared, check_workspace};
use crate::store::{PendingListing, SessionStore, check_session_id};
use crate::tool::submit_plan::{self, SUBMIT_PLAN, SubmitPlan};
use crate::tool::{Tool, ToolAccess, ToolRegistry, ToolSpec};

/// How often [`AgentController::restore_session`] loads a session again when another host
/// saved it while this one applied a deadline.
const RESTORE_ATTEMPTS: usize = 4;

/// Default limit of model calls in one run.
pub const DEFAULT_MAX_STEPS: usize = 50;

/// Default limit of plan revisions in one run ([`AgentControllerBuilder::max_revisions`]): the
/// plans a model submits again after a rejection with feedback.
pub const DEFAULT_MAX_REVISIONS: usize = 20;

/// Default lease of a running run ([`AgentControllerBuilder::lease_duration`]): 30 seconds.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Wraps each registered tool when a controller is built (the testing kit's spy).
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) type ToolLayer = Arc<dyn Fn(Arc<dyn Tool>) -> Arc<dyn Tool> + Send + Sync>;

/// Builds an [`AgentController`]; see [`AgentController::builder`].
pub struct AgentControllerBuilder {
    graph: ModeGraph,
    model: Arc<dyn LanguageModel>,
    tools: ToolRegistry,
    workspace: PathBuf,
    /// Whether the host named the workspace ([`AgentControllerBuilder::workspace`]).
    workspace_named: bool,
    max_steps: usize,
    max_revisions: usize,
    store: Option<Arc<dyn SessionStore>>,
    tool_layer: Option<ToolLayer>,
    lease_owner: Option<String>,
    lease_duration: Duration,
    protected_paths: Vec<PathBuf>,
    clock: Clock,
    model_chooser: Option<Arc<dyn crate::model::ModelChooser>>,
    /// Tools another host has ([`AgentControllerBuilder::tools_elsewhere`]).
    elsewhere: Vec<String>,
    model_id: Option<String>,
    subagent_limits: crate::subagent::SubagentLimits,
    hooks: Vec<Arc<dyn crate::hook::Hook>>,
    reviewers: std::collections::HashMap<String, Arc<dyn crate::review::Reviewer>>,
    managed_watch: Option<Arc<crate::config::ManagedWatch>>,
}

impl std::fmt::Debug for AgentControllerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentControllerBuilder")
            .field("modes", &self.graph.len())
            .field("tools", &self.tools)
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl AgentControllerBuilder {
    /// The tools modes may name (default: none but the built-in `submit_plan`). The registry may
    /// hold the crate's `submit_plan` ([`submit_plan::SubmitPlan`]): the config offers it the
    /// same way with it or without it.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, ToolRegistry, config, model::scripted::ScriptedModel};
    /// let graph = config::parse("[[modes]]\nid = \"build\"\navailableTools = [\"read_file\"]\n", "modes.toml")?;
    /// // Without the workspace tools, `read_file` is unknown and the build is refused.
    /// let refused = AgentController::builder(graph.clone(), Arc::new(ScriptedModel::new())).build();
    /// assert!(refused.is_err());
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .build()?;
    /// let build = controller.modes().get("build").unwrap();
    /// assert_eq!(&*controller.tool_specs(build)[0].name, "read_file");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Tools that another host has and this one does not (a user's own tool, for a host such
    /// as the CLI that decides a stored session another host ran): the config may name them,
    /// where it would otherwise be refused as naming unknown tools. No call of them runs here
    /// and the model is not offered them here: an answer to a call of one is recorded, and the
    /// run waits for the host that has the tool to carry it on ([`crate::Session::continue_run`]).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, ToolRegistry, config, model::scripted::ScriptedModel};
    /// let graph = config::parse("[[modes]]\nid = \"build\"\navailableTools = [\"confirm_deploy\"]\n", "modes.toml")?;
    /// let refused = AgentController::builder(graph.clone(), Arc::new(ScriptedModel::new())).build();
    /// assert!(refused.is_err());
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .tools_elsewhere(["confirm_deploy"])
    ///     .build()?;
    /// assert!(controller.tool_specs(controller.modes().get("build").unwrap()).is_empty());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn tools_elsewhere<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.elsewhere = names.into_iter().map(Into::into).collect();
        self
    }

    /// The workspace root tools work in (default: the current directory). The plans directory is
    /// the config's `plansDir` resolved against it.
    ///
    /// A session records the workspace it starts in, and is restored only into a controller
    /// whose workspace is that same directory ([`crate::workspace`]). A session recorded before
    /// workspaces were (schema 4) adopts this workspace when it is named here, and is refused
    /// ([`SessionError::NoWorkspaceRecorded`]) when it is left as the default.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// let dir = tempfile::tempdir()?;
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .workspace(dir.path())
    ///     .build()?;
    /// assert_eq!(controller.workspace(), dir.path());
    /// assert_eq!(controller.plans_dir(), dir.path().join(".agent/plans"), "the default plansDir");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = dir.into();
        self.workspace_named = true;
        self
    }

    /// The limit of model calls per run (default [`DEFAULT_MAX_STEPS`]); a run that reaches it
    /// ends with reason `failed`.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// use agent_controller::model::{ModelErrorKind, scripted::ReplayModel};
    /// let model = ReplayModel::new([
    ///     ReplayModel::call("call_1", "read_file", serde_json::json!({ "path": "a.txt" })),
    ///     ReplayModel::text("never reached"),
    /// ]);
    /// let controller = AgentController::builder(controller.modes().clone(), Arc::new(model))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .max_steps(1)
    ///     .build()?;
    /// let mut session = controller.start_session(SessionOptions::new()).await?;
    /// let RunOutcome::Failed { error, .. } = session.send_message("read a.txt").await? else { unreachable!() };
    /// assert_eq!(error.kind(), ModelErrorKind::StepLimit);
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_steps(mut self, steps: usize) -> Self {
        self.max_steps = steps.max(1);
        self
    }

    /// How deep subagents nest (default [`crate::subagent::DEFAULT_DEPTH`], 1: a child may not
    /// start subagents of its own; 0: no mode may start any). A child at the limit is not
    /// offered `subagent`.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let builder = AgentController::builder(graph, Arc::new(ScriptedModel::new())).subagent_depth(2);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn subagent_depth(mut self, depth: usize) -> Self {
        self.subagent_limits.depth = depth;
        self
    }

    /// How many `subagent` calls of one reply run at once (default
    /// [`crate::subagent::DEFAULT_CONCURRENCY`], at least 1); the rest wait their turn. Past
    /// [`crate::subagent::MAX_PER_REPLY`] calls in one reply, each gets an error result.
    pub fn subagent_concurrency(mut self, concurrency: usize) -> Self {
        self.subagent_limits.concurrency = concurrency.max(1);
        self
    }

    /// The model calls a subagent's run may make (default
    /// [`crate::subagent::DEFAULT_MAX_STEPS`], at least 1): a child that loops ends failed
    /// there, and its parent's call gets an error result saying so.
    pub fn subagent_max_steps(mut self, steps: usize) -> Self {
        self.subagent_limits.max_steps = steps.max(1);
        self
    }

    /// The limit of plan revisions per run (default [`DEFAULT_MAX_REVISIONS`]): how many times
    /// a rejection with feedback sends the plan back to the model in one run. The rejection that
    /// would ask for one more is recorded as usual, its result tells the model that the run ends
    /// here, and the run ends with reason `failed` and
    /// [`crate::model::ModelErrorKind::RevisionLimit`] ([`crate::RunOutcome::Failed`]); the mode
    /// stays, and a new message starts a run with its own count. `0` allows no revision: every
    /// rejection with feedback ends the run. The count lives in the session record (the
    /// rejected decisions of the run), so a restore or another process keeps it.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// # let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml").unwrap();
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .max_revisions(5)
    ///     .build()?;
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn max_revisions(mut self, revisions: usize) -> Self {
        self.max_revisions = revisions;
        self
    }

    /// Protects `path` from the workspace tools: no tool call reads, lists or writes it, or
    /// anything beneath it when it is a directory (the tool gets an error result and nothing
    /// changes). For files the model must not see or change that may lie in the workspace, such
    /// as the mode config (the CLI protects the config it loaded). The store's own files are
    /// protected without this ([`crate::store::SessionStore::protected_paths`]). A relative path
    /// is taken from the current directory; the path need not exist yet.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, ToolRegistry, config, model::scripted::ScriptedModel};
    /// let dir = tempfile::tempdir()?;
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(dir.path())
    ///     .protected_path(dir.path().join("config"))
    ///     .build()?;
    /// assert!(controller.protected_paths().iter().any(|p| p.ends_with("config")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn protected_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.protected_paths.push(path.into());
        self
    }

    /// Looks at the managed config file of `watch` before each step of a session: once it
    /// changed, the session's calls are ruled by the layers merged again
    /// ([`crate::config::ManagedWatch`]), so an administrator's new `deny` or
    /// `requireApproval` reaches open sessions at their next step.
    pub fn managed_watch(mut self, watch: crate::config::ManagedWatch) -> Self {
        self.managed_watch = Some(Arc::new(watch));
        self
    }

    /// Registers `hook`, consulted before each tool call the mode offers runs or waits and
    /// before each submitted plan waits ([`crate::hook`]): it may deny a call or a plan, or let
    /// a call that would wait for approval run; it never widens what the mode's rules allow.
    /// Hooks registered here are consulted before the config's `[[hooks]]`; of several, `deny`
    /// beats `ask`, which beats `allow`. Each is bounded by its [`crate::hook::Hook::timeout`]
    /// (default 10s): one still deciding past it is dropped and counts as `ask`.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::hook::{Hook, HookError, HookRequest, HookVerdict};
    /// use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    ///
    /// struct ReadOnlyFriday;
    /// #[agent_controller::async_trait]
    /// impl Hook for ReadOnlyFriday {
    ///     fn name(&self) -> &str { "read-only-friday" }
    ///     async fn decide(&self, _: &HookRequest) -> Result<HookVerdict, HookError> {
    ///         Ok(HookVerdict::deny("no changes on Friday"))
    ///     }
    /// }
    ///
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .hook(ReadOnlyFriday)
    ///     .build()?;
    /// # let _ = controller;
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn hook(mut self, hook: impl crate::hook::Hook) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Registers `reviewer` under `id`: a mode whose `reviewBy` names `id` sends its plans
    /// (and, with `reviewToolCalls`, its waiting tool calls) to it before a person is asked
    /// ([`crate::review`]). It takes the place of the config's `[[reviewers]]` entry with the
    /// same id (the config must still declare one, so `reviewBy` is checked), and is bounded by
    /// that entry's `timeout` ([`crate::review::ReviewerConfig::timeout`]: default 2m for an
    /// entry with a `model`, 10s for one with a `command`): a review still running past it is
    /// dropped and counts as escalate.
    ///
    /// Without one, the config's entries are built: a `command` one as a command reviewer
    /// (feature `command-hooks`), a `model` one as a model reviewer
    /// ([`crate::model::reviewer::ModelReviewer`]) whose model the model chooser
    /// ([`AgentControllerBuilder::model_chooser`]) builds at its first review.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::review::{ReviewError, ReviewRequest, ReviewVerdict, Reviewer};
    /// use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    ///
    /// struct AlwaysAsk;
    /// #[agent_controller::async_trait]
    /// impl Reviewer for AlwaysAsk {
    ///     async fn review(&self, _: &ReviewRequest) -> Result<ReviewVerdict, ReviewError> {
    ///         Ok(ReviewVerdict::escalate("a person decides"))
    ///     }
    /// }
    ///
    /// let graph = config::parse(
    ///     "[[modes]]\nid = \"build\"\nreviewBy = \"first\"\n[[reviewers]]\nid = \"first\"\nmodel = \"openai/gpt-4o\"\n",
    ///     "modes.toml",
    /// )?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .reviewer("first", AlwaysAsk)
    ///     .build()?;
    /// # let _ = controller;
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn reviewer(
        mut self,
        id: impl Into<String>,
        reviewer: impl crate::review::Reviewer,
    ) -> Self {
        self.reviewers.insert(id.into(), Arc::new(reviewer));
        self
    }

    /// The host's reviewers, then one for each `[[reviewers]]` entry the host registered none
    /// for.
    ///
    /// # Errors
    /// A `command` entry in a build without the feature `command-hooks`, or a `model` entry
    /// without a model chooser: a reviewer that cannot run must not look as if it did.
    fn config_reviewers(
        &mut self,
    ) -> Result<std::collections::HashMap<String, Arc<dyn crate::review::Reviewer>>, ConfigError>
    {
        use crate::review::ReviewerKind;
        let mut reviewers = std::mem::take(&mut self.reviewers);
        for config in self.graph.reviewers() {
            if reviewers.contains_key(config.id()) {
                continue;
            }
            let reviewer: Arc<dyn crate::review::Reviewer> = match config.kind() {
                #[cfg(feature = "command-hooks")]
                ReviewerKind::Command { command, timeout } => Arc::new(
                    crate::review::command::CommandReviewer::new(command.clone(), *timeout),
                ),
                #[cfg(not(feature = "command-hooks"))]
                ReviewerKind::Command { .. } => {
                    return Err(ConfigError::without_position(
                        crate::config::ConfigErrorKind::InvalidReviewer,
                        format!(
                            "reviewer `{}` is a command, but this build runs no commands: enable the feature `command-hooks`, or register the reviewer in code",
                            config.id()
                        ),
                    ));
                }
                ReviewerKind::Model {
                    model,
                    instructions,
                } => {
                    // Built by the chooser at its first review: a model it cannot build then
                    // makes each review escalate, saying why.
                    let Some(chooser) = &self.model_chooser else {
                        return Err(ConfigError::without_position(
                            crate::config::ConfigErrorKind::InvalidReviewer,
                            format!(
                                "reviewer `{}` names model `{model}`, but the controller has no model chooser to build it with (`model_chooser`); or register the reviewer in code (`reviewer`)",
                                config.id()
                            ),
                        ));
                    };
                    Arc::new(crate::model::reviewer::ModelReviewer::chosen(
                        chooser.clone(),
                        model.clone(),
                        instructions.clone(),
                    ))
                }
            };
            reviewers.insert(config.id().to_owned(), reviewer);
        }
        Ok(reviewers)
    }

    /// The host's hooks, then one [`crate::hook::command::CommandHook`] for each `[[hooks]]`
    /// entry of the config.
    ///
    /// # Errors
    /// A config with `[[hooks]]` in a build without the feature `command-hooks`: the hooks
    /// would not run, and a hook that does not run must not look as if it did.
    fn config_hooks(&mut self) -> Result<Vec<Arc<dyn crate::hook::Hook>>, ConfigError> {
        #[cfg_attr(not(feature = "command-hooks"), allow(unused_mut))]
        let mut hooks = std::mem::take(&mut self.hooks);
        #[cfg(feature = "command-hooks")]
        for config in self.graph.hooks() {
            hooks.push(Arc::new(crate::hook::command::CommandHook::new(
                config.clone(),
            )));
        }
        #[cfg(not(feature = "command-hooks"))]
        if let Some(config) = self.graph.hooks().first() {
            return Err(ConfigError::without_position(
                crate::config::ConfigErrorKind::InvalidHook,
                format!(
                    "the config has [[hooks]] (`{}`), but this build runs no command hooks: enable the feature `command-hooks`",
                    config.command().join(" ")
                ),
            ));
        }
        Ok(hooks)
    }

    /// Lets an approval choose the model of the next mode ([`crate::Decision::model`]): `chooser`
    /// builds a model from the id the decision names, or says why it cannot (the approval is
    /// then refused, [`SessionError::UnknownModel`], before anything changes). Without a chooser
    /// every approval naming a model is refused. The CLI's chooser is
    /// [`crate::model::SpecChooser`] (its `--model` specs).
    ///
    /// The chosen model runs the mode the plan hands over to until the session's next change
    /// of mode (a manual switch, or the next approved plan), then the session's own model runs
    /// again; the session record keeps the id, so a session restored in another process builds
    /// it again with its controller's chooser before its next model call.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// use agent_controller::model::SpecChooser;
    /// # let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml").unwrap();
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .model_chooser(SpecChooser)
    ///     .build()?;
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn model_chooser(mut self, chooser: impl crate::model::ModelChooser + 'static) -> Self {
        self.model_chooser = Some(Arc::new(chooser));
        self
    }

    /// Names the controller's own model (the one [`AgentController::builder`] takes) by the id
    /// the model chooser builds it by ([`AgentControllerBuilder::model_chooser`]; the CLI's
    /// `--model` spec, `openai/gpt-4o`): it is then offered beside the modes' `defaultModelId`s
    /// when a session's model is chosen by hand ([`crate::Session::choose_model`], the ACP
    /// `model` option), and it is what [`crate::Session::model_id`] names for a mode without a
    /// `defaultModelId`. Unnamed by default.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// use agent_controller::model::SpecChooser;
    /// let graph = config::parse(
    ///     "[[modes]]\nid = \"plan\"\ndefaultModelId = \"openai/o3\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    ///     "modes.toml",
    /// )?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .model_chooser(SpecChooser)
    ///     .model_id("openai/gpt-4o")
    ///     .build()?;
    /// assert_eq!(controller.models(), ["openai/gpt-4o", "openai/o3"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn model_id(mut self, id: impl Into<String>) -> Self {
        self.model_id = Some(id.into());
        self
    }

    /// Persists sessions in `store` at every state change that matters (suspend, decision, mode
    /// change, run end), so they can be restored in another process
    /// ([`AgentController::restore_session`]). Without a store, sessions live in memory only.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// use agent_controller::MemoryStore;
    /// let store = Arc::new(MemoryStore::new());
    /// let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .store(store.clone())
    ///     .build()?;
    /// let session = controller.start_session(SessionOptions::new()).await?;
    /// assert_eq!(store.len(), 1, "saved as it started");
    /// assert!(controller.restore_session(session.id(), SessionOptions::new()).await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Names this process as the owner of the runs it carries on (default: `HOST:PID`, from
    /// `$HOSTNAME` or `/proc/sys/kernel/hostname`, else `localhost`). The owner is saved with a
    /// running run's lease and shown by `pending`; give each process its own name.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// # let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml").unwrap();
    /// let builder = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .lease_owner(format!("web-1:{}", std::process::id()));
    /// ```
    pub fn lease_owner(mut self, owner: impl Into<String>) -> Self {
        self.lease_owner = Some(owner.into());
        self
    }

    /// How long the lease of a running run lasts (default [`DEFAULT_LEASE`], at least 1 ms).
    ///
    /// A run carried on after a decision (or by [`Session::continue_run`]) is saved as running
    /// with a lease that its process renews while it works: with a save before each step's tool
    /// calls run, and before each model call when less than half of the lease is left. A run
    /// whose lease has ended is *interrupted*: `pending` lists it, and another process may carry
    /// it on. Choose a lease longer than the longest model call or tool call: a run whose call
    /// outlasts it may be taken over, and then stops at its next step
    /// ([`crate::SessionError::LeaseLost`]) without running that step's tool calls.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .lease_duration(Duration::from_secs(120))
    ///     .build()?;
    /// assert!(controller.store().is_none());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn lease_duration(mut self, lease: Duration) -> Self {
        self.lease_duration = lease.max(Duration::from_millis(1));
        self
    }

    /// The clock every time a session reads comes from (default: the system's wall clock):
    /// deadlines (a plan submitted in a mode with `approvalTimeout` expires at
    /// `now() + approvalTimeout`, [`crate::deadline`]), leases (a run's lease ends
    /// [`lease_duration`](Self::lease_duration) after it was taken or renewed, and a lease is
    /// held until then), `updatedAt` and `decidedAt`. Give a controllable one in tests, so
    /// nothing has to sleep; hosts sharing a store should keep their clocks in step (NTP).
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use std::time::{Duration, SystemTime};
    /// # use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// # let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml").unwrap();
    /// // A clock one day ahead.
    /// let builder = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .clock(|| SystemTime::now() + Duration::from_secs(86_400));
    /// ```
    pub fn clock(mut self, now: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(now);
        self
    }

    /// [`AgentControllerBuilder::clock`] with a clock already shared (the testing kit's, which
    /// it moves and recognises).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn shared_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Wraps every registered tool in `layer` at build time, outside any wrapping of the
    /// caller's (the testing kit's spy).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn tool_layer(mut self, layer: ToolLayer) -> Self {
        self.tool_layer = Some(layer);
        self
    }

    /// The modes the controller will run: the graph given to [`AgentController::builder`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let builder = AgentController::builder(graph, Arc::new(ScriptedModel::new()));
    /// assert_eq!(builder.modes().len(), 1);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn modes(&self) -> &ModeGraph {
        &self.graph
    }

    /// Adds the tools of started MCP servers ([`McpTools::register`]: each server's tools as
    /// `SERVER__TOOL`, and a stand-in reporting the failure for each name a mode lists of a
    /// server that did not start) to the tools modes may name.
    ///
    /// # Errors
    /// [`ToolError::Duplicate`](crate::tool::ToolError::Duplicate) when a name is registered
    /// already (a tool of your own named like an MCP tool).
    ///
    /// [`McpTools::register`]: crate::tool::mcp::McpTools::register
    #[cfg(feature = "mcp")]
    pub fn mcp_tools(
        mut self,
        mcp: &crate::tool::mcp::McpTools,
    ) -> Result<Self, crate::tool::ToolError> {
        mcp.register(&mut self.tools)?;
        Ok(self)
    }

    /// Checks the config's tool names against the registry and builds the controller: system
    /// prompts and tool specs are built here, once per mode.
    ///
    /// # Errors
    /// [`crate::config::ConfigErrorKind::UnknownTool`] when an `availableTools` (or
    /// `requireApproval`) name is neither registered nor `submit_plan`: at the first one's line
    /// and column, its message naming every unknown tool with theirs, and saying which are
    /// built-in tools that [`ToolRegistry::with_workspace_tools`] registers. The first error of
    /// [`ModeGraph::rule_errors`] when a mode's rule is on a tool the registry lacks, or reads an
    /// argument its tool does not declare.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, ToolRegistry, config, config::ConfigErrorKind};
    /// use agent_controller::model::scripted::ScriptedModel;
    /// let graph = config::parse(
    ///     "[[modes]]\nid = \"build\"\navailableTools = [\"read_file\", \"deploy\"]\n",
    ///     "modes.toml",
    /// )?;
    /// let error = AgentController::builder(graph.clone(), Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(error.kind(), ConfigErrorKind::UnknownTool);
    /// assert!(error.message().contains("`deploy`"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn build(mut self) -> Result<AgentController, ConfigError> {
        // The config's `[[hooks]]` run after the host's own.
        let hooks = self.config_hooks()?;
        let reviewers = self.config_reviewers()?;
        // `ask_user` is built in: added when a mode lists it, or when a planning mode has no
        // list (such a mode offers the tools that change nothing, and it changes nothing),
        // unless the host registered a tool of that name. Once added it is a tool like the
        // others: a mode with no list offers it.
        let builtin_ask_user = self.tools.get(crate::tool::ASK_USER).is_none()
            && self.graph.ids().any(|id| {
                let mode = self.graph.mode(id);
                match mode.available_tools() {
                    Some(list) => list.iter().any(|t| &**t == crate::tool::ASK_USER),
                    None => mode.is_planning(),
                }
            });
        if builtin_ask_user {
            // The name is free: checked just above.
            let _ = self
                .tools
                .register(Arc::new(crate::tool::ask_user::AskUser));
        }
        // The task tools are built in the same way: when a mode lists one of them, each whose
        // name the host has not taken is added, and the session keeps their list itself.
        let lists_task_tool = self.graph.ids().any(|id| {
            self.graph
                .mode(id)
                .available_tools()
                .is_some_and(|list| list.iter().any(|t| crate::tool::tasks::is_task_tool(t)))
        });
        let mut task_tools: Vec<&'static str> = Vec::new();
        if lists_task_tool {
            for (name, tool) in crate::tool::tasks::TASK_TOOLS
                .into_iter()
                .zip(crate::tool::tasks::task_tools())
            {
                if self.tools.get(name).is_none() && self.tools.register(tool).is_ok() {
                    task_tools.push(name);
                }
            }
        }
        // `subagent` likewise: added when the config has subagent types or a mode lists it,
        // unless the host registered a tool of that name; the session runs its calls itself.
        let subagent_tool = self.tools.get(crate::subagent::SUBAGENT).is_none()
            && (!self.graph.subagents().is_empty()
                || self.graph.ids().any(|id| {
                    self.graph
                        .mode(id)
                        .available_tools()
                        .is_some_and(|list| list.iter().any(|t| &**t == crate::subagent::SUBAGENT))
                }))
            && self
                .tools
                .register(Arc::new(crate::tool::subagent::Subagent))
                .is_ok();
        let names: Vec<&str> = self
            .tools
            .names()
            .chain(self.elsewhere.iter().map(String::as_str))
            .collect();
        if let Some(unknown) = self.graph.unknown_tools_error(&names) {
            return Err(unknown);
        }
        if let Some(rule) = self.graph.rule_errors(&self.tools).into_iter().next() {
            return Err(rule);
        }
        if let Some(layer) = &self.tool_layer {
            let mut layered = ToolRegistry::new();
            for tool in self.tools.iter() {
                // The names are those of a registry that already accepted them. The crate's
                // `submit_plan` stays itself: a run never executes it, and only it may take the name.
                let layered_tool = if SubmitPlan::is(&**tool) {
                    tool.clone()
                } else {
                    layer(tool.clone())
                };
                let _ = layered.register(layered_tool);
            }
            self.tools = layered;
        }
        let plans_dir = self.workspace.join(self.graph.plans_dir());
        // At depth 0 no mode may start a subagent: the tool stays registered (a mode may list
        // it) but is offered nowhere, rather than offered and refused at every call.
        let offer_subagent = subagent_tool && self.subagent_limits.depth > 0;
        let runtimes = self
            .graph
            .ids()
            .map(|id| {
                let subagent = SubagentTool {
                    registered: subagent_tool,
                    offered: offer_subagent,
                };
                mode_runtime(&self.graph, &self.tools, id, &plans_dir, subagent)
            })
            .collect();
        let fingerprint = self.graph.fingerprint();
        let models = crate::machine::models::offered(&self.graph, self.model_id.as_deref());
        // A hook's script is as protected as the config: a tool call that rewrote it could
        // make it answer `allow`.
        let hook_scripts: Vec<PathBuf> = self
            .graph
            .hooks()
            .iter()
            .flat_map(|h| h.script_paths(&self.workspace))
            .collect();
        self.protected_paths.extend(hook_scripts);
        // So is a command reviewer's: rewritten, it could approve anything.
        let reviewer_scripts: Vec<PathBuf> = self
            .graph
            .reviewers()
            .iter()
            .flat_map(|r| r.script_paths(&self.workspace))
            .collect();
        self.protected_paths.extend(reviewer_scripts);
        let store_paths = self.store.iter().flat_map(|s| s.protected_paths());
        let protected_paths = self
            .protected_paths
            .into_iter()
            .chain(store_paths)
            .map(|p| std::path::absolute(&p).unwrap_or(p))
            .collect();
        Ok(AgentController {
            shared: Arc::new(Shared {
                graph: self.graph,
                tools: self.tools,
                model: self.model,
                workspace: self.workspace,
                workspace_named: self.workspace_named,
                plans_dir,
                max_steps: self.max_steps,
                max_revisions: self.max_revisions,
                fingerprint,
                store: self.store,
                lease_owner: self.lease_owner.unwrap_or_else(default_lease_owner),
                lease_duration: self.lease_duration,
                protected_paths,
                runtimes,
                clock: self.clock,
                model_chooser: self.model_chooser,
                models,
                model_id: self.model_id,
                recorded_config: std::sync::OnceLock::new(),
                task_tools,
                subagent_tool,
                subagent_limits: self.subagent_limits,
                depth: 0,
                events: Some(tokio::sync::broadcast::channel(CONTROLLER_EVENTS).0),
                hooks,
                reviewers,
                managed_watch: self.managed_watch,
            }),
        })
    }
}

/// The crate's `subagent` tool: whether the controller registered it (the config has types or
/// a mode lists it, and the host registered no tool of that name), and whether a mode that
/// offers it does (not at depth 0).
#[derive(Clone, Copy)]
struct SubagentTool {
    registered: bool,
    offered: bool,
}

fn mode_runtime(
    graph: &ModeGraph,
    tools: &ToolRegistry,
    id: ModeId,
    plans_dir: &Path,
    subagent: SubagentTool,
) -> ModeRuntime {
    let mode = graph.mode(id);
    let mut specs: Vec<ToolSpec> = Vec::new();
    // A tool list is a set (the config refuses a name listed twice, and model providers refuse
    // requests that name a tool twice): each name is offered once.
    let mut offered: HashSet<&str> = HashSet::new();
    let mut push = |name: &str| {
        if name == SUBMIT_PLAN {
            if !offered.insert(SUBMIT_PLAN) {
                return;
            }
            let target = graph.mode(graph.transition_target(id));
            specs.push(ToolSpec {
                name: Arc::from(SUBMIT_PLAN),
                description: submit_plan::description(target.id(), target.name()),
                input_schema: submit_plan::input_schema(),
                access: ToolAccess::Plans,
            });
        } else if name == crate::subagent::SUBAGENT && subagent.registered {
            if !subagent.offered || !offered.insert(crate::subagent::SUBAGENT) {
                return;
            }
            // The types this mode may start, named in the tool's description and schema.
            let types: Vec<(&str, &str)> = graph
                .subagents_of(id)
                .iter()
                .map(|t| (t.id(), t.description()))
                .collect();
            specs.push(ToolSpec {
                name: Arc::from(crate::subagent::SUBAGENT),
                description: crate::tool::subagent::description(&types),
                input_schema: crate::tool::subagent::input_schema(&types),
                access: ToolAccess::ReadOnly,
            });
        } else if let Some(tool) = tools.get(name) {
            if !offered.insert(tool.name()) {
                return;
            }
            specs.push(ToolSpec {
                name: Arc::from(tool.name()),
                description: tool.description(),
                input_schema: tool.input_schema(),
                access: tool.access(),
            });
        }
    };
    // `submit_plan` is offered where the config offers it, as above, whether the registry
    // holds the crate's tool (a builder registered it) or not: never through the registry.
    let registered = || tools.iter().filter(|tool| tool.name() != SUBMIT_PLAN);
    match mode.available_tools() {
        Some(list) => {
            for name in list {
                if name.ends_with("__*") {
                    // A `SERVER__*` wildcard: the server's tools, in registration order; in
                    // a planning mode only those that change nothing (a trusted server's
                    // tools annotated read-only: crate::tool::mcp).
                    for tool in registered() {
                        if crate::tool::mcp::wildcard_covers(name, tool.name())
                            && (!mode.is_planning() || tool.access() == ToolAccess::ReadOnly)
                        {
                            push(tool.name());
                        }
                    }
                } else {
                    push(name);
                }
            }
        }
        // A planning mode offers a tool that writes only where its config lists it: without
        // a list it gets the read-only tools and the plan tools (the default `--config` is a
        // file in the workspace, which a model or a cloned repository can shape).
        None if mode.is_planning() => {
            for tool in registered() {
                if tool.access().is_offered_unlisted_in_planning_modes() {
                    push(tool.name());
                }
            }
            push(SUBMIT_PLAN);
        }
        None => {
            for tool in registered() {
                push(tool.name());
            }
        }
    }
    let tool_list = if specs.is_empty() {
        "none".to_owned()
    } else {
        specs
            .iter()
            .map(|s| &*s.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut system_prompt = format!("You are in the {} mode (`{}`).", mode.name(), mode.id());
    if !mode.description().is_empty() {
        system_prompt.push(' ');
        system_prompt.push_str(mode.description());
    }
    if !mode.instructions().is_empty() {
        system_prompt.push_str("\n\n");
        system_prompt.push_str(mode.instructions());
    }
    if mode.is_planning() {
        let target = graph.mode(graph.transition_target(id));
        system_prompt.push_str(&format!(
            "\n\nWhen your plan is ready, write it as a markdown file inside {} and call {SUBMIT_PLAN} with its path. \
             On approval the session continues in the {} mode (`{}`).",
            plans_dir.display(),
            target.name(),
            target.id()
        ));
        let others: Vec<String> = graph
            .transition_targets(id)
            .into_iter()
            .skip(1)
            .map(|t| format!("{} (`{}`)", graph.mode(t).name(), graph.mode(t).id()))
            .collect();
        if !others.is_empty() {
            system_prompt.push_str(&format!(
                " The user may choose to continue in another mode instead: {}.",
                others.join(", ")
            ));
        }
    }
    ModeRuntime {
        system_prompt,
        specs,
        tool_list,
        name: mode.name().to_owned(),
        id: mode.id_arc().clone(),
    }
}

/// How many events [`AgentController::events`] holds for a receiver that has not read them:
/// one further behind misses the oldest ([`tokio::sync::broadcast::error::RecvError::Lagged`]).
pub const CONTROLLER_EVENTS: usize = 4096;

/// Loads modes, owns the tools and the model, and starts [`Session`]s. Cheap to clone (shared).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::{AgentController, SessionOptions, config, model::scripted::ScriptedModel};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let graph = config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n[[modes]]\nid = \"build\"\ndefault = true\n",
///     "modes.toml",
/// )?;
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
/// let mut session = controller.start_session(SessionOptions::new()).await?;
/// assert_eq!(session.mode().id(), "build");
/// assert!(session.switch_mode("plan").await?);
/// assert!(session.switch_mode("nope").await.is_err());
/// assert_eq!(session.mode().id(), "plan");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AgentController {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for AgentController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentController")
            .field("modes", &self.shared.graph.len())
            .field("workspace", &self.shared.workspace)
            .finish_non_exhaustive()
    }
}

impl AgentController {
    /// Starts building a controller over a validated `graph`, driving `model`.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, config, model::scripted::ScriptedModel};
    /// let graph = config::parse("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n", "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
    /// assert_eq!(controller.modes().default_mode().id(), "build");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn builder(graph: ModeGraph, model: Arc<dyn LanguageModel>) -> AgentControllerBuilder {
        AgentControllerBuilder {
            graph,
            model,
            tools: ToolRegistry::new(),
            workspace: PathBuf::from("."),
            workspace_named: false,
            max_steps: DEFAULT_MAX_STEPS,
            subagent_limits: crate::subagent::SubagentLimits::default(),
            max_revisions: DEFAULT_MAX_REVISIONS,
            store: None,
            tool_layer: None,
            lease_owner: None,
            lease_duration: DEFAULT_LEASE,
            clock: system_clock(),
            protected_paths: Vec::new(),
            hooks: Vec::new(),
            reviewers: std::collections::HashMap::new(),
            managed_watch: None,
            model_chooser: None,
            elsewhere: Vec::new(),
            model_id: None,
        }
    }

    /// The mode graph.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let modes = controller.modes();
    /// assert_eq!(modes.len(), 2);
    /// assert_eq!(modes.default_mode().id(), "build");
    /// assert!(modes.mode(modes.get("plan").unwrap()).is_planning());
    /// # Ok(())
    /// # }
    /// ```
    pub fn modes(&self) -> &ModeGraph {
        &self.shared.graph
    }

    /// The models a session may be switched to by hand ([`crate::Session::models`]): the
    /// controller's own model when named ([`AgentControllerBuilder::model_id`]), then every
    /// mode's `defaultModelId`, each id once.
    pub fn models(&self) -> &[String] {
        &self.shared.models
    }

    /// The id of the model mode `mode_id` runs with when no model is chosen: its
    /// `defaultModelId`, else the controller's own model's id
    /// ([`AgentControllerBuilder::model_id`]); `None` when neither is named or no mode has
    /// this id.
    pub fn mode_model_id(&self, mode_id: &str) -> Option<&str> {
        let mode = self.shared.graph.get(mode_id)?;
        crate::machine::models::mode_model(
            &self.shared.graph,
            mode,
            self.shared.model_id.as_deref(),
        )
    }

    /// The registered tools (`submit_plan` only where the builder registered it).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn registry(&self) -> &ToolRegistry {
        &self.shared.tools
    }

    /// The clock the controller reads (the testing kit checks it is its own).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// The limit of model calls per run segment ([`AgentControllerBuilder::max_steps`]).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn max_steps(&self) -> usize {
        self.shared.max_steps
    }

    /// The limit of plan revisions per run ([`AgentControllerBuilder::max_revisions`]).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn max_revisions(&self) -> usize {
        self.shared.max_revisions
    }

    /// The tool specs the model is offered in `mode`, in order (built once at build time).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let plan = controller.modes().get("plan").unwrap();
    /// let names: Vec<&str> = controller.tool_specs(plan).iter().map(|t| &*t.name).collect();
    /// assert_eq!(names, ["read_file", "write_plan", "submit_plan"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_specs(&self, mode: ModeId) -> &[ToolSpec] {
        &self.shared.runtime(mode).specs
    }

    /// The system prompt of `mode` (built once at build time).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let plan = controller.modes().get("plan").unwrap();
    /// assert!(controller.system_prompt(plan).contains("submit_plan"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn system_prompt(&self, mode: ModeId) -> &str {
        &self.shared.runtime(mode).system_prompt
    }

    /// The absolute-or-workspace-relative plans directory.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// assert!(controller.plans_dir().starts_with(workspace.path()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn plans_dir(&self) -> &Path {
        &self.shared.plans_dir
    }

    /// The workspace root.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// assert_eq!(controller.workspace(), workspace.path());
    /// # Ok(())
    /// # }
    /// ```
    pub fn workspace(&self) -> &Path {
        &self.shared.workspace
    }

    /// Starts a session in the resolved default mode, or in the mode `options` names, and emits
    /// `session_started`.
    ///
    /// With a store, the new session is saved before this returns (as version 1), so a host
    /// that restarts before the first message can restore it with
    /// [`AgentController::restore_session`]; `session_started` is emitted once it is saved.
    /// Without a store, nothing is persisted.
    ///
    /// # Errors
    /// [`SessionError::UnknownMode`] when `options` names a mode that does not exist;
    /// [`SessionError::InvalidSessionId`] when `options` names an id that cannot be stored
    /// (see [`crate::store::check_session_id`]; checked with or without a store);
    /// [`SessionError::SessionExists`] when the store already has a session with that id (it is
    /// left untouched); [`SessionError::WorkspaceGone`] when the workspace cannot be opened (the
    /// session records it: [`crate::workspace`]); [`SessionError::Store`] when the first save
    /// fails. On error no session is started and no event is emitted.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// assert_eq!(session.mode().id(), "plan");
    /// assert!(session.pending().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start_session(
        &self,
        mut options: SessionOptions,
    ) -> Result<Session, SessionError> {
        let mode = match &options.mode {
            Some(id) => self
                .shared
                .graph
                .get(id)
                .ok_or_else(|| SessionError::unknown_mode(id, &self.shared.graph))?,
            None => self.shared.graph.default_mode_id(),
        };
        let id: Arc<str> = match options.id.take() {
            Some(id) => {
                check_session_id(&id).map_err(|_| SessionError::InvalidSessionId(id.clone()))?;
                Arc::from(id)
            }
            None => Arc::from(new_session_id()),
        };
        Session::start(self.shared.clone(), id, mode, options).await
    }

    /// The protected areas no workspace tool touches: the host's
    /// ([`AgentControllerBuilder::protected_path`]) and the store's, as absolute paths.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// assert!(controller.protected_paths().is_empty(), "no store, nothing protected by hand");
    /// # Ok(())
    /// # }
    /// ```
    pub fn protected_paths(&self) -> &[PathBuf] {
        &self.shared.protected_paths
    }

    /// The session store, if one is configured.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// assert!(controller.store().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.shared.store.as_ref()
    }

    /// Restores a session from the store: its persisted mode is the mode reported and enforced,
    /// and a pending plan can be decided as if the process had never stopped. `options` supplies
    /// subscribers (its mode and id are ignored). No `session_started` event is emitted.
    ///
    /// When the config changed since the plan was submitted so that its hand-over target is gone
    /// or different, the plan stays pending and can be rejected, but approving it gives
    /// [`SessionError::ConfigChanged`].
    ///
    /// A pending plan whose deadline has passed (the planning mode's `approvalTimeout`, by this
    /// controller's clock) expires as the session is restored, by a compare-and-swap save: of
    /// hosts restoring it at once, one applies the expiry (its subscribers get the events) and
    /// the others load the session as that one left it ([`crate::deadline`]).
    ///
    /// # Errors
    /// [`SessionError::NoStore`], [`SessionError::UnknownSession`], [`SessionError::Store`] (an
    /// unreadable record, or a failed save of an expiry), [`SessionError::ConfigChanged`] when
    /// the persisted current mode no longer exists. The session's recorded workspace
    /// ([`crate::workspace`]) must be this controller's: [`SessionError::WrongWorkspace`] when
    /// this controller works in another directory, [`SessionError::WorkspaceGone`] when it is
    /// gone, [`SessionError::WorkspaceReplaced`] when another directory is at its path now,
    /// [`SessionError::NoWorkspaceRecorded`] for a record without one restored by a controller
    /// whose workspace was not named. On any of these nothing changes (no expiry is applied).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let store = Arc::new(agent_controller::FileStore::open(workspace.path().join(".sessions"))?);
    /// let build = || {
    ///     AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    ///         .tools(ToolRegistry::with_workspace_tools())
    ///         .workspace(workspace.path())
    ///         .store(store.clone())
    ///         .build()
    /// };
    /// let mut session = build()?.start_session(SessionOptions::new().mode("plan")).await?;
    /// let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let id = session.id().to_owned();
    /// drop(session);
    /// // Another process (here: another controller on the same files) decides.
    /// let mut restored = build()?.restore_session(&id, SessionOptions::new()).await?;
    /// assert_eq!(restored.mode().id(), "plan");
    /// restored.decide(&payload.decision_id, Decision::approve().with_sha256(&payload.submission.sha256)).await?;
    /// assert_eq!(restored.mode().id(), "build");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn restore_session(
        &self,
        id: &str,
        options: SessionOptions,
    ) -> Result<Session, SessionError> {
        let mut options = options;
        // A plan past its deadline expires now; if another host saved first (it applied the
        // expiry, or decided), the session is loaded again as that host left it.
        for _ in 0..RESTORE_ATTEMPTS {
            let mut session = self.load_session(id, options).await?;
            match session.apply_expiry().await {
                Ok(_) => return Ok(session),
                Err(e) if e.is_conflict() => options = session.into_options(),
                Err(e) => return Err(e),
            }
        }
        self.load_session(id, options).await
    }

    /// Session `id` as the store holds it, with the allowances of its workspace: one attempt of
    /// [`AgentController::restore_session`], before any expiry.
    async fn load_session(
        &self,
        id: &str,
        options: SessionOptions,
    ) -> Result<Session, SessionError> {
        let store = self.shared.store.as_ref().ok_or(SessionError::NoStore)?;
        let record = store
            .load(id)
            .await?
            .ok_or_else(|| SessionError::UnknownSession(id.to_owned()))?;
        let mut session = Session::from_record(self.shared.clone(), record, options)?;
        session.load_workspace_allowances().await;
        Ok(session)
    }

    /// What a new session in mode `mode` would do with a call of `tool` with `args`, and each
    /// step of why ([`crate::explain`]), without running anything: the session's own ruling
    /// ([`Session::explain`]) in a session that is never saved nor opened, so no allowance
    /// weighs in (to weigh a stored session's, restore it and call [`Session::explain`]). Paths
    /// are resolved in this controller's workspace, as a session resolves them.
    ///
    /// # Errors
    /// [`crate::explain::ExplainError::Session`] with [`SessionError::UnknownMode`] for a mode
    /// the config lacks, or [`SessionError::WorkspaceGone`] when the workspace cannot be read;
    /// [`crate::explain::ExplainError::UnknownTool`], [`crate::explain::ExplainError::Arguments`]
    /// as [`Session::explain`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, ToolRegistry};
    /// # use agent_controller::explain::{Check, Outcome};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # let workspace = tempfile::tempdir()?;
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", path = \"**/.env*\", action = \"deny\" }]\n",
    ///     "modes.toml",
    /// )?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .build()?;
    /// let args = serde_json::json!({"path": "src/../.env", "content": "KEY=1"});
    /// let explained = controller.explain("build", "write_file", args)?;
    /// assert_eq!(explained.outcome, Outcome::Deny);
    /// assert_eq!(explained.decided_by, Check::Rule(1));
    /// assert_eq!(explained.at.as_deref(), Some("modes.toml:3:19"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn explain(
        &self,
        mode: &str,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<crate::explain::Explanation, crate::explain::ExplainError> {
        let id = self
            .shared
            .graph
            .get(mode)
            .ok_or_else(|| SessionError::unknown_mode(mode, &self.shared.graph))?;
        let session = Session::unsaved(
            self.shared.clone(),
            Arc::from("explain"),
            id,
            SessionOptions::new(),
        )?;
        session.explain(tool, args)
    }

    /// Runs the config's rule tests (`[[tests]]`, [`ModeGraph::rule_tests`]) through
    /// [`AgentController::explain`], in this controller's workspace: an error
    /// ([`crate::config::ConfigErrorKind::FailedRuleTest`]) at the `expect` of each test whose
    /// call the mode does not handle as expected, saying what `explain` says instead (or why it
    /// could not explain the call). Empty when every test passes. `check` and `verify` print
    /// them as they print the config's other errors.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # let workspace = tempfile::tempdir()?;
    /// let graph = agent_controller::config::parse(r#"[[modes]]
    /// id = "build"
    /// rules = [{ tool = "write_file", path = "**/.env*", action = "deny" }]
    ///
    /// [[tests]]
    /// mode = "build"
    /// tool = "write_file"
    /// args = { path = ".env", content = "" }
    /// expect = "allow"
    /// "#, "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .build()?;
    /// let failed = controller.rule_test_errors();
    /// assert!(failed[0].to_string().starts_with(
    ///     "modes.toml:9:10: rule test 1 expects `allow` for write_file in mode `build`, but explain says deny (by rule 1 at modes.toml:3:19)"
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rule_test_errors(&self) -> Vec<ConfigError> {
        let graph = &self.shared.graph;
        let mut errors = Vec::new();
        for test in graph.rule_tests() {
            let says = match self.explain(&test.mode_id, &test.tool, test.args.clone()) {
                Ok(explained) if explained.outcome == test.expect => continue,
                Ok(explained) => {
                    let at = explained
                        .at
                        .as_deref()
                        .map(|at| format!(" at {at}"))
                        .unwrap_or_default();
                    format!(
                        "explain says {} (by {}{at}): {}",
                        explained.outcome, explained.decided_by, explained.reason
                    )
                }
                Err(e) => format!("explain cannot rule the call: {e}"),
            };
            let (line, column, snippet) = &test.expect_at;
            errors.push(ConfigError::placed_at(
                crate::config::ConfigErrorKind::FailedRuleTest,
                graph.origin(),
                crate::config::Location {
                    line: *line,
                    column: *column,
                },
                snippet.clone(),
                format!(
                    "rule test {} expects `{}` for {} in mode `{}`, but {says}",
                    test.number, test.expect, test.tool, test.mode_id
                ),
            ));
        }
        errors
    }

    /// Every event of every session this controller starts or restores from now on, in each
    /// session's order, without access to the sessions (a web host's `GET /events` for all
    /// sessions): a [`tokio::sync::broadcast`] receiver. Each [`Event`] names its session
    /// ([`Event::session_id`]). A subagent's events come wrapped in its parent's
    /// `subagent_event`, as the parent's subscribers get them.
    ///
    /// Sending never waits: a receiver more than [`CONTROLLER_EVENTS`] events behind misses the
    /// oldest and its next `recv` says how many
    /// ([`tokio::sync::broadcast::error::RecvError::Lagged`]), so one slow reader never holds up
    /// a run or another reader.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::{AgentController, SessionOptions, config, model::scripted::ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let graph = config::parse("[[modes]]\nid = \"build\"\n", "modes.toml")?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new())).build()?;
    /// let mut events = controller.events();
    /// let mut a = controller.start_session(SessionOptions::new()).await?;
    /// let b = controller.start_session(SessionOptions::new()).await?;
    /// a.send_message("hello").await?;
    /// let first = events.recv().await?;
    /// assert_eq!((first.kind(), first.session_id()), ("session_started", a.id()));
    /// let second = events.recv().await?;
    /// assert_eq!((second.kind(), second.session_id()), ("session_started", b.id()));
    /// assert_eq!(events.recv().await?.kind(), "agent_start");
    /// # Ok(())
    /// # }
    /// ```
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<Event> {
        match &self.shared.events {
            Some(sender) => sender.subscribe(),
            // A controller's shared part always has a sender; a closed receiver otherwise.
            None => tokio::sync::broadcast::channel(1).1,
        }
    }

    /// Every pending decision in the store, oldest first, and apart from them every record the
    /// store could not read ([`SessionStore::list_pending`]). Plans whose deadline has passed
    /// (by this controller's clock) are expired first ([`crate::deadline::expire_due`]), so they
    /// are not listed.
    ///
    /// # Errors
    /// [`SessionError::NoStore`], [`SessionError::Store`] when the store itself fails (never for
    /// one unreadable record).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .store(Arc::new(agent_controller::MemoryStore::new()))
    ///     .build()?;
    /// let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// session.send_message("Add dark mode").await?;
    /// let listing = controller.list_pending().await?;
    /// assert_eq!(listing.pending.len(), 1);
    /// assert_eq!(listing.pending[0].session_id, session.id());
    /// assert_eq!(listing.pending[0].title, "Add dark mode");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn list_pending(&self) -> Result<PendingListing, SessionError> {
        let store = self.shared.store.as_ref().ok_or(SessionError::NoStore)?;
        let now = (self.shared.clock)();
        Ok(crate::deadline::expire_due_then_list(&**store, now)
            .await?
            .1)
    }

    /// One page of the pending decisions in the store: at most `limit` (at least one) after
    /// `after` (the [`crate::store::PendingPage::next_cursor`] of the previous page; `None` for
    /// the first), in [`AgentController::list_pending`]'s order, read by the store a page at a
    /// time ([`SessionStore::list_pending_page`]). Decisions of the page whose deadline has
    /// passed (by this controller's clock) are expired first
    /// ([`crate::deadline::expire_due_then_page`]), so no page shows one. A cursor the client
    /// sent as text is parsed first (`text.parse::<PendingCursor>()`), which refuses one that
    /// is no cursor with [`crate::store::InvalidPendingCursor`].
    ///
    /// # Errors
    /// [`SessionError::NoStore`], [`SessionError::Store`] when the store itself fails (never for
    /// one unreadable record).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// use agent_controller::store::PendingCursor;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .store(Arc::new(agent_controller::MemoryStore::new()))
    ///     .build()?;
    /// for prompt in ["Add dark mode", "Fix the login"] {
    ///     let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    ///     session.send_message(prompt).await?;
    /// }
    /// let first = controller.list_pending_page(None, 1).await?;
    /// assert_eq!(first.pending.len(), 1);
    /// let cursor: PendingCursor = first.next_cursor.expect("one more").to_string().parse()?;
    /// let second = controller.list_pending_page(Some(&cursor), 1).await?;
    /// assert_eq!(second.pending.len(), 1);
    /// assert_ne!(second.pending[0].session_id, first.pending[0].session_id);
    /// assert!(second.next_cursor.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn list_pending_page(
        &self,
        after: Option<&crate::store::PendingCursor>,
        limit: usize,
    ) -> Result<crate::store::PendingPage, SessionError> {
        let store = self.shared.store.as_ref().ok_or(SessionError::NoStore)?;
        let now = (self.shared.clock)();
        Ok(
            crate::deadline::expire_due_then_page(&**store, now, after, limit)
                .await?
                .1,
        )
    }

    /// [`AgentController::list_pending_page`] as a host lists it: each pending decision of the
    /// page with the allowances in force for its session
    /// ([`crate::session::pending_entries`]: the page's sessions read in one batch, each
    /// workspace's allowances once), and the cursor of the next page. What `serve`'s
    /// `GET /v1/pending` answers.
    ///
    /// # Errors
    /// As for [`AgentController::list_pending_page`]; allowances that cannot be read are no
    /// error ([`crate::session::PendingEntries::unread_allowances`]).
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .store(Arc::new(agent_controller::MemoryStore::new()))
    ///     .build()?;
    /// for prompt in ["Add dark mode", "Fix the login"] {
    ///     let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    ///     session.send_message(prompt).await?;
    /// }
    /// let first = controller.pending_entries_page(None, 1).await?;
    /// assert_eq!(first.pending.len(), 1);
    /// assert!(first.pending[0].allowances_in_force.is_empty());
    /// let cursor = first.next_cursor.expect("one more");
    /// let second = controller.pending_entries_page(Some(&cursor), 1).await?;
    /// assert_eq!(second.pending.len(), 1);
    /// assert!(second.next_cursor.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn pending_entries_page(
        &self,
        after: Option<&crate::store::PendingCursor>,
        limit: usize,
    ) -> Result<crate::session::PendingEntries, SessionError> {
        let page = self.list_pending_page(after, limit).await?;
        let store = self.shared.store.as_ref().ok_or(SessionError::NoStore)?;
        let mut entries = crate::session::pending_entries(&**store, page.pending).await;
        entries.next_cursor = page.next_cursor;
        entries.unreadable = page.unreadable;
        Ok(entries)
    }

    /// Deletes a session from the store; returns whether it existed.
    ///
    /// # Errors
    /// [`SessionError::NoStore`], [`SessionError::Store`].
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .store(Arc::new(agent_controller::MemoryStore::new()))
    ///     .build()?;
    /// let session = controller.start_session(SessionOptions::new()).await?;
    /// assert!(controller.delete_session(session.id()).await?);
    /// assert!(!controller.delete_session(session.id()).await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn delete_session(&self, id: &str) -> Result<bool, SessionError> {
        let store = self.shared.store.as_ref().ok_or(SessionError::NoStore)?;
        Ok(store.delete(id).await?)
    }
}

/// The directory a stored session acts in, for a host that restores it in a fresh process and
/// must build its controller there first (the CLI's `decide` and `continue` read the config from
/// it): the workspace the session recorded when it started, checked as
/// [`AgentController::restore_session`] checks it ([`crate::workspace`]).
///
/// `named` is a workspace the host was given (`--workspace`): it must be the recorded one (the
/// same directory spelled another way is fine). A record from before workspaces were recorded
/// has none, and adopts `named` ([`AgentControllerBuilder::workspace`] it, and it is recorded
/// from the next save on). Returns the recorded workspace's canonical path, else `named`.
///
/// # Errors
/// [`SessionError::UnknownSession`] when the store has no such session, [`SessionError::Store`]
/// when it cannot be read; [`SessionError::WrongWorkspace`] when `named` is another directory;
/// [`SessionError::WorkspaceGone`] when the workspace cannot be opened (deleted, say) and
/// [`SessionError::WorkspaceReplaced`] when another directory is at its path now;
/// [`SessionError::NoWorkspaceRecorded`] for a record without one and no `named`. Nothing is
/// changed.
///
/// # Examples
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use agent_controller::controller::session_workspace;
/// use agent_controller::{MemoryStore, SessionError};
///
/// let store = MemoryStore::new();
/// assert!(matches!(
///     session_workspace(&store, "s1", None).await,
///     Err(SessionError::UnknownSession(_))
/// ));
/// # });
/// ```
pub async fn session_workspace(
    store: &dyn SessionStore,
    session_id: &str,
    named: Option<&Path>,
) -> Result<PathBuf, SessionError> {
    let record = store
        .load(session_id)
        .await?
        .ok_or_else(|| SessionError::UnknownSession(session_id.to_owned()))?;
    let Some(recorded) = record.workspace else {
        return named
            .map(Path::to_path_buf)
            .ok_or_else(|| SessionError::NoWorkspaceRecorded {
                session_id: session_id.to_owned(),
            });
    };
    check_workspace(session_id, &recorded, named.unwrap_or(&recorded.path))?;
    Ok(recorded.path)
}

/// `HOST:PID`: this process, as the owner of the runs it carries on.
fn default_lease_owner() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// A new random session id in the text form of a UUID v4 (`xxxxxxxx-xxxx-4xxx-Yxxx-xxxxxxxxxxxx`,
/// lowercase hex), unique across processes and hosts for every practical purpose.
///
/// The 122 random bits are SipHash outputs under std's [`RandomState`] keys, which std seeds from
/// the operating system's random source; a process-wide counter, the process id and the clock go
/// in, so ids differ even when the clock stands still. An id names a session; it is not a secret.
fn new_session_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let half = |salt: u64| {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.write_u64(count);
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        u128::from(hasher.finish())
    };
    let mut bits = (half(0) << 64) | half(1);
    bits = (bits & !(0xf << 76)) | (0x4 << 76); // version 4
    bits = (bits & !(0x3 << 62)) | (0x2 << 62); // variant 10 (RFC 9562)
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        bits >> 96,
        (bits >> 80) & 0xffff,
        (bits >> 64) & 0xffff,
        (bits >> 48) & 0xffff,
        bits & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn session_ids_are_uuid_v4_text_and_do_not_repeat() {
        let ids: std::collections::HashSet<String> =
            (0..1000).map(|_| super::new_session_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            let parts: Vec<&str> = id.split('-').collect();
            let lengths: Vec<usize> = parts.iter().map(|p| p.len()).collect();
            assert_eq!(lengths, [8, 4, 4, 4, 12], "{id}");
            assert!(
                id.chars()
                    .all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
            assert!(parts[2].starts_with('4'), "{id}");
            assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"), "{id}");
        }
    }

    use super::*;
    use crate::model::scripted::ScriptedModel;

    /// Issue 19 item 6: a planning mode without `availableTools` is offered the read-only tools
    /// and the plan tools, never one that writes; a mode that does not plan is offered them all.
    #[test]
    fn a_planning_mode_without_a_tool_list_is_offered_no_writing_tool() {
        let graph = crate::config::parse(
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\
             [[modes]]\nid = \"build\"\ndefault = true\n",
            "modes.toml",
        )
        .expect("a valid config");
        let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
            .tools(ToolRegistry::with_workspace_tools())
            .build()
            .expect("a controller");
        let names = |id: &str| -> Vec<(String, ToolAccess)> {
            let mode = controller.modes().get(id).expect("mode");
            controller
                .tool_specs(mode)
                .iter()
                .map(|s| (s.name.to_string(), s.access))
                .collect()
        };
        let access = |list: &[(&str, ToolAccess)]| -> Vec<(String, ToolAccess)> {
            list.iter().map(|(n, a)| ((*n).to_owned(), *a)).collect()
        };
        use ToolAccess::*;
        assert_eq!(
            names("plan"),
            access(&[
                ("read_file", ReadOnly),
                ("list_files", ReadOnly),
                ("write_plan", Plans),
                // It changes nothing (issue 37): built in, offered here though no mode lists it.
                ("ask_user", ReadOnly),
                ("submit_plan", Plans)
            ])
        );
        assert_eq!(
            names("build"),
            access(&[
                ("read_file", ReadOnly),
                ("list_files", ReadOnly),
                ("write_file", Writes),
                ("write_plan", Plans),
                // Added for `plan`, it is a tool of the controller: `build` has no list either.
                ("ask_user", ReadOnly)
            ])
        );
        let plan = controller.modes().get("plan").expect("plan");
        assert_eq!(
            controller.shared.runtime(plan).tool_list,
            "read_file, list_files, write_plan, ask_user, submit_plan"
        );
    }
}
