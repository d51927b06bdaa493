//! The validated mode graph: modes, the default mode and the approval hand-over edges.
//!
//! A [`ModeGraph`] only comes out of [`crate::config::parse`] (or [`crate::config::load`], or
//! [`crate::config::ModeGraphBuilder`] in code), so every [`ModeId`] it hands out names a mode
//! that exists: an unknown mode id cannot reach a running session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod subagent;
pub(crate) mod timeout;

use self::subagent::SubagentType;

use self::timeout::{ApprovalTimeout, OnTimeout};
use crate::event::ModeChangeReason;
use crate::rules::{ResolvedPaths, Rules, Verdict};
use crate::tool::ToolCall;
use crate::tool::mcp::{McpServer, McpTransport};
use crate::tool::{SUBMIT_PLAN, ToolSpec};

/// A handle to a mode of one [`ModeGraph`]: a small copyable index, valid for the graph that
/// handed it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModeId(u32);

impl ModeId {
    pub(crate) fn from_index(index: usize) -> Self {
        // A config with more than u32::MAX modes cannot be parsed into memory anyway.
        Self(u32::try_from(index).unwrap_or(u32::MAX))
    }

    /// The position of the mode in its config file, starting at 0.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(plan.index(), 0, "the first mode in the file");
    /// assert_eq!(graph.modes()[build.index()].id(), "build");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One mode as configured: id, display name, instructions, tool allowlist and hand-over target.
#[derive(Debug, Clone, PartialEq)]
pub struct Mode {
    pub(crate) id: Arc<str>,
    /// `name`, or the id when the config sets none.
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) instructions: String,
    pub(crate) marked_default: bool,
    /// The listed hand-over targets in config order (empty: none set); the first is where a
    /// plain approval goes.
    pub(crate) transitions_to: Vec<ModeId>,
    pub(crate) available_tools: Option<Vec<Arc<str>>>,
    pub(crate) require_approval: RequireApproval,
    pub(crate) default_model_id: Option<String>,
    pub(crate) metadata: toml::Table,
    pub(crate) approval_timeout: Option<ApprovalTimeout>,
    pub(crate) rules: Rules,
    pub(crate) on_timeout: OnTimeout,
    /// What the files a plan approved in this mode declares do in the mode it hands over to
    /// (`planScope`).
    pub(crate) plan_scope: crate::plan::PlanScopePolicy,
    /// The subagent types the mode's `subagent` tool may start (`None`: every type).
    pub(crate) subagents: Option<Vec<Arc<str>>>,
    /// How many approvals by distinct identities its plans and waiting tool calls need
    /// (`approvers`, 1 to 16; [`crate::quorum`]).
    pub(crate) approvers: u8,
    /// Its review (`reviewBy`, `reviewerMay`, `reviewToolCalls`; `None`: no reviewer).
    pub(crate) review: Option<crate::review::ModeReview>,
    /// Which of its settings the managed config file set ([`crate::config::Layers`]).
    pub(crate) managed: Managed,
}

/// Which of a mode's settings come from the managed config file, which nothing below it may
/// loosen: no allowance, plan scope or hook lets through a call they hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Managed {
    /// The mode's `rules` are the managed file's.
    pub(crate) rules: bool,
    /// The mode's `requireApproval` is the managed file's.
    pub(crate) approval: bool,
}

impl Mode {
    /// What the deadline does to a plan nobody decided in time (`onTimeout`):
    /// [`OnTimeout::Reject`] unless the config says `abort`. A deadline never approves.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(plan).on_timeout().to_string(), "reject", "the default");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn on_timeout(&self) -> OnTimeout {
        self.on_timeout
    }

    /// How many approvals by distinct identities the mode's plans and waiting tool calls need
    /// before the decision applies (`approvers`, default 1; [`crate::quorum`]).
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\napprovers = 2\n", "modes.toml")?;
    /// assert_eq!(graph.default_mode().approvers(), 2);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn approvers(&self) -> u8 {
        self.approvers
    }

    /// Its review ([`crate::review`]): the reviewer its `reviewBy` names, what `reviewerMay`
    /// lets it do, whether `reviewToolCalls` sends it the waiting tool calls; `None` without
    /// `reviewBy`.
    pub fn review(&self) -> Option<&crate::review::ModeReview> {
        self.review.as_ref()
    }

    /// What the files a plan approved in this mode declares (its `## Files` section) do in the
    /// mode it hands over to (`planScope`): [`PlanScopePolicy::Ask`](crate::tool::submit_plan::PlanScopePolicy::Ask)
    /// unless the config says `enforce` or `off`.
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\nplanScope = \"enforce\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    ///     "modes.toml",
    /// )?;
    /// let plan = graph.get("plan").unwrap();
    /// assert_eq!(graph.mode(plan).plan_scope().to_string(), "enforce");
    /// assert_eq!(graph.default_mode().plan_scope().to_string(), "ask", "the default");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn plan_scope(&self) -> crate::plan::PlanScopePolicy {
        self.plan_scope
    }

    /// The same mode with `rules` instead of its own (for a mode made or changed in code;
    /// a config's `rules` are checked when it is read, these are not).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// let mode = graph.mode(build).clone().with_rules(Default::default());
    /// assert!(mode.rules().is_empty());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn with_rules(mut self, rules: Rules) -> Self {
        self.rules = rules;
        self
    }

    /// The mode's rules on tool-call arguments (`rules`), in the order written; empty unless
    /// the config sets them. [`Mode::decide`] applies them.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert!(graph.mode(build).rules().is_empty(), "no `rules` in the config");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// How `call` is handled in this mode ([`crate::rules`] for the precedence): `offered` says
    /// whether the mode offers the call's tool (its `availableTools`, as the controller resolved
    /// it), `paths` where the call's path arguments lie ([`crate::rules::resolve_paths`]). Pure:
    /// no I/O.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::{DecidedBy, ResolvedPaths, RuleAction};
    /// use agent_controller::ToolCall;
    /// let graph = agent_controller::config::parse(r#"
    /// [[modes]]
    /// id = "build"
    /// requireApproval = ["write_file"]
    /// rules = [
    ///   { tool = "write_file", path = "**/.env*", action = "deny" },
    ///   { tool = "write_file", path = "src/**", action = "allow" },
    /// ]
    /// "#, "modes.toml")?;
    /// let build = graph.default_mode();
    /// let write = |path: &str| ToolCall::new("c1", "write_file", serde_json::json!({"path": path, "content": ""}));
    ///
    /// let env = build.decide(true, &write("src/../.env"), &ResolvedPaths::new().with("path", ".env"));
    /// assert_eq!((env.action, env.decided_by), (RuleAction::Deny, DecidedBy::Rule(1)));
    /// let src = build.decide(true, &write("src/a.rs"), &ResolvedPaths::new().with("path", "src/a.rs"));
    /// assert_eq!((src.action, src.decided_by), (RuleAction::Allow, DecidedBy::Rule(2)));
    /// let docs = build.decide(true, &write("docs/a.md"), &ResolvedPaths::new().with("path", "docs/a.md"));
    /// assert_eq!((docs.action, docs.decided_by), (RuleAction::Ask, DecidedBy::RequireApproval));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn decide(&self, offered: bool, call: &ToolCall, paths: &ResolvedPaths) -> Verdict {
        self.decide_explained(offered, call, paths, &mut Vec::new())
    }

    /// [`Mode::decide`], each step of its reasoning added to `steps` (each rule on the tool:
    /// whether it matched; then what decided).
    pub(crate) fn decide_explained(
        &self,
        offered: bool,
        call: &ToolCall,
        paths: &ResolvedPaths,
        steps: &mut Vec<crate::explain::Step>,
    ) -> Verdict {
        crate::rules::verdict(
            &self.rules,
            &self.id,
            offered,
            self.requires_approval(&call.name),
            call,
            paths,
            steps,
        )
    }

    /// How long a plan submitted in this mode may wait for a decision (`approvalTimeout`), if
    /// set: a plan not decided by then expires and counts as rejected ([`crate::deadline`]).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// let timeout = graph.mode(plan).approval_timeout().expect("approvalTimeout = \"30m\"");
    /// assert_eq!(timeout.duration(), std::time::Duration::from_secs(30 * 60));
    /// assert_eq!(timeout.as_str(), "30m");
    /// assert!(graph.mode(build).approval_timeout().is_none());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn approval_timeout(&self) -> Option<&ApprovalTimeout> {
        self.approval_timeout.as_ref()
    }

    /// The mode id (`id` in TOML): ASCII letters, digits, `-` and `_`.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(plan).id(), "plan");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn id_arc(&self) -> &Arc<str> {
        &self.id
    }

    /// The display name (`name`); the id when the config gives none.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(plan).name(), "Plan");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description (`description`); empty when the config gives none.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(plan).description(), "Explore and write a plan.");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The instructions given to the model in this mode (`instructions`); may be empty.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(plan).instructions(), "Plan first.");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn instructions(&self) -> &str {
        &self.instructions
    }

    /// Whether the config marks this mode `default = true`. The resolved default mode may differ
    /// when no mode is marked; see [`ModeGraph::default_mode_id`].
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert!(graph.mode(build).is_marked_default());
    /// assert!(!graph.mode(plan).is_marked_default());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn is_marked_default(&self) -> bool {
        self.marked_default
    }

    /// The mode a plain approval of a plan in this mode hands over to: the first mode
    /// `transitionsTo` names, if set.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(plan).transitions_to(), Some(build), "the first of the list");
    /// assert_eq!(graph.mode(build).transitions_to(), None);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn transitions_to(&self) -> Option<ModeId> {
        self.transitions_to.first().copied()
    }

    /// Every mode `transitionsTo` names, in config order: one for `transitionsTo = "build"`, each
    /// listed one for `transitionsTo = ["build", "build-auto"]`, none when unset. The user may
    /// approve a plan to any of them; a plain approval goes to the first.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// let targets: Vec<&str> = graph.mode(plan).transitions_to_all().iter().map(|&m| graph.mode(m).id()).collect();
    /// assert_eq!(targets, ["build", "build-auto"]);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn transitions_to_all(&self) -> &[ModeId] {
        &self.transitions_to
    }

    /// The tool allowlist (`availableTools`); `None` means every tool the controller has
    /// (plus `submit_plan` when this is a planning mode).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// let tools = graph.mode(plan).available_tools().expect("listed");
    /// assert_eq!(&*tools[0], "read_file");
    /// assert!(graph.mode(build).available_tools().is_none(), "every tool");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn available_tools(&self) -> Option<&[Arc<str>]> {
        self.available_tools.as_deref()
    }

    /// Which of this mode's tool calls wait for the user before they run (`requireApproval`):
    /// [`RequireApproval::None`] unless the config sets it.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// use agent_controller::mode::RequireApproval;
    /// assert!(graph.mode(build).require_approval().covers("write_file"));
    /// assert!(matches!(graph.mode(plan).require_approval(), RequireApproval::None));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn require_approval(&self) -> &RequireApproval {
        &self.require_approval
    }

    /// Whether the mode's `requireApproval` comes from the managed config file
    /// ([`crate::config::Layers`]): then no allowance, approved plan's scope or hook's `allow`
    /// lets a call through that it holds; only a decision on the call does.
    pub fn managed_approval(&self) -> bool {
        self.managed.approval
    }

    /// Whether the mode's `rules` come from the managed config file: then no hook's `allow`
    /// lets through a call an `ask` rule of them holds (a `deny` rule is never loosened).
    pub fn managed_rules(&self) -> bool {
        self.managed.rules
    }

    /// Whether a call to `tool` in this mode waits for the user's approval
    /// ([`RequireApproval::covers`]). Never for `submit_plan`, which always waits.
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
    ///     "modes.toml",
    /// )?;
    /// let build = graph.default_mode();
    /// assert!(build.requires_approval("write_file"));
    /// assert!(!build.requires_approval("read_file"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn requires_approval(&self, tool: &str) -> bool {
        self.require_approval.covers(tool)
    }

    /// The model id this mode prefers (`defaultModelId`, `provider/model`), if set.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(build).default_model_id(), Some("gpt-4o"));
    /// assert_eq!(graph.mode(plan).default_model_id(), None);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn default_model_id(&self) -> Option<&str> {
        self.default_model_id.as_deref()
    }

    /// The subagent types this mode's `subagent` tool may start, as its `subagents` list names
    /// them (`None`: the list is left out, every type).
    pub fn subagents(&self) -> Option<&[Arc<str>]> {
        self.subagents.as_deref()
    }

    /// The free `[modes.metadata]` table (colours, icons, ...); empty when absent.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(build).metadata()["color"].as_str(), Some("green"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn metadata(&self) -> &toml::Table {
        &self.metadata
    }

    /// Whether `submit_plan` is registered in this mode: it sets `transitionsTo` or lists
    /// `submit_plan` in `availableTools`.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert!(graph.mode(plan).is_planning());
    /// assert!(!graph.mode(build).is_planning());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn is_planning(&self) -> bool {
        !self.transitions_to.is_empty()
            || self
                .available_tools
                .as_ref()
                .is_some_and(|tools| tools.iter().any(|t| &**t == SUBMIT_PLAN))
    }
}

/// Which of a mode's tool calls wait for the user before they run, as the mode's
/// `requireApproval` says (after Mastra's `requireApproval` and the `needsApproval` of the OpenAI
/// Agents SDK and the Vercel AI SDK). Such a call suspends the run until it is decided
/// ([`crate::Session::decide`]); `submit_plan` always waits and is never listed.
///
/// # Examples
/// ```
/// use agent_controller::mode::RequireApproval;
/// let listed = RequireApproval::Tools(vec!["write_file".into()]);
/// assert!(listed.covers("write_file") && !listed.covers("read_file"));
/// assert!(RequireApproval::All.covers("read_file"));
/// assert!(!RequireApproval::All.covers("submit_plan"));
/// assert!(!RequireApproval::None.covers("write_file"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RequireApproval {
    /// No tool call waits (no `requireApproval`, `requireApproval = false` or `[]`).
    #[default]
    None,
    /// Every tool the mode offers waits (`requireApproval = true`).
    All,
    /// The listed tools wait (`requireApproval = ["write_file", ...]`), each offered by the mode.
    Tools(Vec<Arc<str>>),
}

impl RequireApproval {
    /// Whether a call to `tool` waits for approval under this policy; `false` for `submit_plan`
    /// (its plan waits for a decision anyway).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::mode::RequireApproval;
    /// assert!(RequireApproval::All.covers("anything"));
    /// assert!(!RequireApproval::None.covers("write_file"));
    /// ```
    pub fn covers(&self, tool: &str) -> bool {
        if tool == SUBMIT_PLAN {
            return false;
        }
        match self {
            RequireApproval::None => false,
            RequireApproval::All => true,
            RequireApproval::Tools(tools) => tools
                .iter()
                .any(|t| &**t == tool || crate::tool::mcp::wildcard_covers(t, tool)),
        }
    }

    /// Whether no tool call waits.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::mode::RequireApproval;
    /// assert!(RequireApproval::None.is_none());
    /// assert!(!RequireApproval::All.is_none());
    /// ```
    pub fn is_none(&self) -> bool {
        match self {
            RequireApproval::None => true,
            RequireApproval::All => false,
            RequireApproval::Tools(tools) => tools.is_empty(),
        }
    }
}

/// Where a config names a tool, kept so unknown tool names can be reported at their line (the
/// checks against a controller's tools, which make config errors of them, are in
/// [`crate::config`]). Only the name's byte span is kept: its line, column and excerpt are
/// computed from the graph's text when an error or warning reports it, never for the names
/// that are fine (issue 36 item 13: computing them for every name was a fifth of a large
/// config's load).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolRef {
    pub(crate) mode: ModeId,
    pub(crate) name: Arc<str>,
    /// The name's bytes in the config text ([`ModeGraph::text`]).
    pub(crate) span: std::ops::Range<usize>,
    /// Whether the name is in `requireApproval` (else in `availableTools`).
    pub(crate) in_approval: bool,
}

/// A validated set of modes: ids are unique, every `transitionsTo` names another existing mode,
/// and exactly one default mode is resolved.
#[derive(Debug, Clone)]
pub struct ModeGraph {
    modes: Vec<Mode>,
    index: HashMap<Arc<str>, ModeId>,
    default: ModeId,
    plans_dir: PathBuf,
    origin: String,
    tool_refs: Vec<ToolRef>,
    /// The config text the tool references point into (shared by the graph's clones).
    text: Arc<str>,
    /// Whether the graph came from text, so its errors can point into it (not for a graph built
    /// in code).
    positions: bool,
    /// The `[[mcpServers]]` whose tools modes may name as `SERVER__TOOL`.
    mcp_servers: Arc<[McpServer]>,
    /// The `[[subagents]]` types, in config order.
    subagents: Arc<[SubagentType]>,
    /// Every tool name a subagent type lists, with the type's index: checked like the modes'.
    pub(crate) subagent_tool_refs: Arc<[SubagentToolRef]>,
    /// The config's `[[tests]]`, in order.
    rule_tests: Arc<[crate::explain::RuleTest]>,
    /// The `[[hooks]]`, in config order.
    hooks: Arc<[crate::hook::HookConfig]>,
    /// The `[[reviewers]]`, in config order.
    reviewers: Arc<[crate::review::ReviewerConfig]>,
    /// What the config asks for that this version checks but does not enforce yet
    /// (reviewers, quorum): warnings ([`crate::config::warnings_of`]).
    pub(crate) not_enforced: Arc<[crate::ConfigError]>,
}

/// A tool name in a subagent type's `availableTools` (or `requireApproval`), where the config
/// writes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SubagentToolRef {
    /// The type's index in [`ModeGraph::subagents`].
    pub(crate) subagent: usize,
    pub(crate) name: Arc<str>,
    pub(crate) span: std::ops::Range<usize>,
    pub(crate) in_approval: bool,
}

impl ModeGraph {
    pub(crate) fn new(
        modes: Vec<Mode>,
        default: ModeId,
        index: HashMap<Arc<str>, ModeId>,
        plans_dir: PathBuf,
        origin: String,
        tool_refs: Vec<ToolRef>,
        text: Arc<str>,
    ) -> Self {
        Self {
            modes,
            index,
            default,
            plans_dir,
            origin,
            tool_refs,
            text,
            positions: true,
            mcp_servers: Arc::from([]),
            subagents: Arc::from([]),
            subagent_tool_refs: Arc::from([]),
            rule_tests: Arc::from([]),
            hooks: Arc::from([]),
            reviewers: Arc::from([]),
            not_enforced: Arc::from([]),
        }
    }

    /// Marks mode `id`'s `rules` and `requireApproval` as the managed config file's
    /// ([`Mode::managed_rules`], [`Mode::managed_approval`]); an unknown id changes nothing.
    pub(crate) fn mark_managed(&mut self, id: &str, rules: bool, approval: bool) {
        if let Some(&at) = self.index.get(id) {
            let mode = &mut self.modes[at.index()];
            mode.managed.rules |= rules;
            mode.managed.approval |= approval;
        }
    }

    /// The same graph with `tests` as its `[[tests]]`.
    pub(crate) fn with_rule_tests(mut self, tests: Vec<crate::explain::RuleTest>) -> Self {
        self.rule_tests = tests.into();
        self
    }

    /// The config's rule tests (`[[tests]]`), in order; run them with
    /// [`crate::AgentController::rule_test_errors`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::explain::Outcome;
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\n\n[[tests]]\nmode = \"build\"\ntool = \"read_file\"\nargs = { path = \"a\" }\nexpect = \"allow\"\n",
    ///     "modes.toml",
    /// )?;
    /// let test = &graph.rule_tests()[0];
    /// assert_eq!((test.tool.as_str(), test.expect), ("read_file", Outcome::Allow));
    /// assert_eq!(test.location(), (8, 10));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn rule_tests(&self) -> &[crate::explain::RuleTest] {
        &self.rule_tests
    }

    /// The same graph with `hooks` as its `[[hooks]]`, and `not_enforced` as the warnings of
    /// what it asks for that does not run yet.
    pub(crate) fn with_hooks(
        mut self,
        hooks: Vec<crate::hook::HookConfig>,
        not_enforced: Vec<crate::ConfigError>,
    ) -> Self {
        self.hooks = hooks.into();
        self.not_enforced = not_enforced.into();
        self
    }

    /// The same graph with `reviewers` as its `[[reviewers]]`.
    pub(crate) fn with_reviewers(mut self, reviewers: Vec<crate::review::ReviewerConfig>) -> Self {
        self.reviewers = reviewers.into();
        self
    }

    /// The `[[reviewers]]` of the config, in order ([`crate::review`]).
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\nreviewBy = \"critic\"\n[[reviewers]]\nid = \"critic\"\nmodel = \"openai/gpt-4o\"\n",
    ///     "modes.toml",
    /// )?;
    /// assert_eq!(graph.reviewers()[0].id(), "critic");
    /// assert_eq!(graph.modes()[0].review().map(|r| r.reviewer()), Some("critic"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn reviewers(&self) -> &[crate::review::ReviewerConfig] {
        &self.reviewers
    }

    /// The `[[hooks]]` of the config, in order ([`crate::hook`]): commands the controller
    /// consults before a tool call runs or waits and before a plan waits.
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\n[[hooks]]\non = [\"toolCall\", \"plan\"]\ncommand = [\"./guard\"]\ntimeout = \"5s\"\n",
    ///     "modes.toml",
    /// )?;
    /// assert_eq!(graph.hooks()[0].command(), ["./guard"]);
    /// assert_eq!(graph.hooks()[0].timeout().as_secs(), 5);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn hooks(&self) -> &[crate::hook::HookConfig] {
        &self.hooks
    }

    /// The same graph with `types` as its `[[subagents]]` and `refs` as their tool names.
    pub(crate) fn with_subagents(
        mut self,
        types: Vec<SubagentType>,
        refs: Vec<SubagentToolRef>,
    ) -> Self {
        self.subagents = types.into();
        self.subagent_tool_refs = refs.into();
        self
    }

    /// The `[[subagents]]` types of the config, in order.
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[subagents]]\nid = \"explore\"\n[[modes]]\nid = \"build\"\n",
    ///     "modes.toml",
    /// )?;
    /// assert_eq!(graph.subagents()[0].id(), "explore");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn subagents(&self) -> &[SubagentType] {
        &self.subagents
    }

    /// The subagent type with id `id`, if the config has one.
    pub fn subagent(&self, id: &str) -> Option<&SubagentType> {
        self.subagents.iter().find(|t| &*t.id == id)
    }

    /// The subagent types mode `mode`'s `subagent` tool may start: those its `subagents` list
    /// names, in config order, or every type when it leaves the list out. Whether the mode
    /// offers the tool at all is its `availableTools`'s say.
    pub fn subagents_of(&self, mode: ModeId) -> Vec<&SubagentType> {
        match &self.mode(mode).subagents {
            None => self.subagents.iter().collect(),
            Some(list) => self
                .subagents
                .iter()
                .filter(|t| list.contains(&t.id))
                .collect(),
        }
    }

    /// The same graph with mode `id` replaced by `mode` (a child's view of its parent's mode:
    /// the parent's rules with its type's on top).
    pub(crate) fn with_mode(&self, id: ModeId, mode: Mode) -> Self {
        let mut graph = self.clone();
        if let Some(slot) = graph.modes.get_mut(id.index()) {
            *slot = mode;
        }
        graph
    }

    /// The same graph with `servers` as its `[[mcpServers]]`.
    pub(crate) fn with_mcp_servers(mut self, servers: Vec<McpServer>) -> Self {
        self.mcp_servers = servers.into();
        self
    }

    /// The `[[mcpServers]]` of the config, in order: the MCP servers whose tools modes may
    /// name as `SERVER__TOOL` or `SERVER__*` ([`crate::tool::mcp`] starts them).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mcp_servers().len(), 1);
    /// assert_eq!(graph.mcp_servers()[0].id(), "gh");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn mcp_servers(&self) -> &[McpServer] {
        &self.mcp_servers
    }

    /// The MCP server with this id, if the config has one.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert!(graph.mcp_server("gh").is_some());
    /// assert!(graph.mcp_server("fs").is_none());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn mcp_server(&self, id: &str) -> Option<&McpServer> {
        self.mcp_servers.iter().find(|s| s.id() == id)
    }

    /// Whether `name` refers to one of the config's MCP servers (`fs__read_text_file`,
    /// `fs__*` with a server `fs`): such a name is checked against the server's own tools
    /// when it is started, not against the controller's registry.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert!(graph.is_mcp_ref("gh__search_issues"));
    /// assert!(graph.is_mcp_ref("gh__*"));
    /// assert!(!graph.is_mcp_ref("fs__read"), "no server `fs`");
    /// assert!(!graph.is_mcp_ref("read_file"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn is_mcp_ref(&self, name: &str) -> bool {
        crate::tool::mcp::split_mcp_name(name)
            .is_some_and(|(server, _)| self.mcp_server(server).is_some())
    }

    /// The `SERVER__TOOL` names the modes list by name (not the `SERVER__*` wildcards) in
    /// `availableTools` and `requireApproval`, of the config's MCP servers, each once.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mcp_tool_names(), ["gh__search_issues"]);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn mcp_tool_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for mode in &self.modes {
            let listed = mode.available_tools.iter().flatten();
            let approval = match &mode.require_approval {
                RequireApproval::Tools(list) => list.as_slice(),
                _ => &[],
            };
            for name in listed.chain(approval) {
                if !name.ends_with('*') && self.is_mcp_ref(name) && !names.contains(&&**name) {
                    names.push(name);
                }
            }
        }
        names
    }

    /// The MCP servers a session of this graph needs: those some mode names a tool of, and
    /// every one when a mode has no `availableTools` (it offers every tool).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// // `build` lists no tools (it offers every tool), so every server is needed.
    /// assert_eq!(graph.needed_mcp_servers().len(), 1);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn needed_mcp_servers(&self) -> Vec<&McpServer> {
        let all = self.modes.iter().any(|m| m.available_tools.is_none());
        self.mcp_servers
            .iter()
            .filter(|server| {
                all || self.tool_refs.iter().any(|r| {
                    crate::tool::mcp::split_mcp_name(&r.name).is_some_and(|(s, _)| s == server.id())
                })
            })
            .collect()
    }

    /// Marks the graph as built in code: its tool errors carry no file position.
    pub(crate) fn drop_positions(&mut self) {
        self.positions = false;
    }

    /// Whether the graph came from text, so its errors can point into it.
    pub(crate) fn has_positions(&self) -> bool {
        self.positions
    }

    /// The file (or other origin) the graph was read from, as errors name it.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// The config text the graph was read from, which its tool references point into.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Every place the config names a tool in an `availableTools` list, in text order.
    pub(crate) fn tool_refs(&self) -> &[ToolRef] {
        &self.tool_refs
    }

    /// Looks a mode up by its id (case-sensitive); `None` when no mode has that id.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.get("plan"), Some(plan));
    /// assert_eq!(graph.get("Plan"), None, "ids are case-sensitive");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn get(&self, id: &str) -> Option<ModeId> {
        self.index.get(id).copied()
    }

    /// The mode behind a handle.
    ///
    /// A [`ModeId`] from another graph may name a different mode or, when out of range, the
    /// default mode; handles are only meaningful for the graph that handed them out.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.mode(build).id(), "build");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn mode(&self, id: ModeId) -> &Mode {
        self.modes
            .get(id.index())
            .unwrap_or(&self.modes[self.default.index()])
    }

    /// All modes in config order.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// let ids: Vec<&str> = graph.modes().iter().map(|m| m.id()).collect();
    /// assert_eq!(ids, ["plan", "build", "build-auto"]);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn modes(&self) -> &[Mode] {
        &self.modes
    }

    /// All mode handles in config order.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.ids().len(), 3);
    /// assert_eq!(graph.ids().next(), Some(plan));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn ids(&self) -> impl ExactSizeIterator<Item = ModeId> + '_ {
        (0..self.modes.len()).map(ModeId::from_index)
    }

    /// The number of modes (at least 1).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.len(), 3);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.modes.len()
    }

    /// Always `false`: a validated graph has at least one mode.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert!(!graph.is_empty(), "a graph has at least one mode");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.modes.is_empty()
    }

    /// The resolved default mode: `defaultModeId`, else the mode marked `default = true`, else
    /// the first mode (the resolution order of Mastra's `AgentController`).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.default_mode_id(), build);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn default_mode_id(&self) -> ModeId {
        self.default
    }

    /// The resolved default mode itself.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.default_mode().id(), "build");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn default_mode(&self) -> &Mode {
        self.mode(self.default)
    }

    /// Where a plan approved in `mode` hands over to: its `transitionsTo`, else the default mode.
    /// Never `mode` itself for a planning mode: validation refuses a `transitionsTo` naming its
    /// own mode ([`crate::config::ConfigErrorKind::SelfTransition`]) and a default mode that plans
    /// without one ([`crate::config::ConfigErrorKind::SelfHandover`]).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.transition_target(plan), build);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn transition_target(&self, mode: ModeId) -> ModeId {
        self.mode(mode).transitions_to().unwrap_or(self.default)
    }

    /// Every mode a plan approved in `mode` may hand over to, the plain approval's target
    /// ([`ModeGraph::transition_target`]) first: the modes its `transitionsTo` lists, else the
    /// default mode alone.
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"build-auto\"]\n[[modes]]\nid = \"build\"\n[[modes]]\nid = \"build-auto\"\n",
    ///     "modes.toml",
    /// )?;
    /// let plan = graph.get("plan").unwrap();
    /// let ids: Vec<&str> = graph.transition_targets(plan).iter().map(|t| graph.mode(*t).id()).collect();
    /// assert_eq!(ids, ["build", "build-auto"]);
    /// assert_eq!(graph.mode(graph.transition_target(plan)).id(), "build");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn transition_targets(&self, mode: ModeId) -> Vec<ModeId> {
        match self.mode(mode).transitions_to_all() {
            [] => vec![self.default],
            listed => listed.to_vec(),
        }
    }

    /// The planning modes (where `submit_plan` is registered), in config order.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.planning_modes().collect::<Vec<_>>(), [plan]);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn planning_modes(&self) -> impl Iterator<Item = ModeId> + '_ {
        self.ids().filter(|id| self.mode(*id).is_planning())
    }

    /// Every approval hand-over edge `(planning mode, target)`, in config order: one per target
    /// a planning mode lists (the plain approval's first); never a loop (see
    /// [`ModeGraph::transition_target`]).
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// let auto = graph.get("build-auto").unwrap();
    /// assert_eq!(graph.transition_edges().collect::<Vec<_>>(), [(plan, build), (plan, auto)]);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn transition_edges(&self) -> impl Iterator<Item = (ModeId, ModeId)> + '_ {
        self.planning_modes().flat_map(|from| {
            self.transition_targets(from)
                .into_iter()
                .map(move |to| (from, to))
        })
    }

    /// The plans directory as configured (`plansDir`, default `.agent/plans`), relative to the
    /// workspace unless absolute.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// assert_eq!(graph.plans_dir(), std::path::Path::new("plans"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn plans_dir(&self) -> &Path {
        &self.plans_dir
    }

    /// A SHA-256 (hex) over what decides behaviour: each mode's id, instructions, `transitionsTo`,
    /// `availableTools`, `requireApproval`, `onTimeout` and rules, the default mode, the plans
    /// directory, and the MCP servers (`[[mcpServers]]`: each one's id, trust and transport,
    /// its command, arguments and environment or its URL: what a `SERVER__TOOL` name runs).
    /// Names, descriptions, metadata and timeouts do not count. Persisted sessions carry it so
    /// a restore can tell a changed config, and workspace allowances are keyed by it
    /// ([`crate::allowance`]): one given under one set of MCP servers does not apply when the
    /// config points the same tool name at another server.
    ///
    /// # Examples
    /// ```
    /// # let graph = agent_controller::config::parse(r#"
    /// # plansDir = "plans"
    /// #
    /// # [[mcpServers]]
    /// # id = "gh"
    /// # command = "gh-mcp"
    /// #
    /// # [[modes]]
    /// # id = "plan"
    /// # name = "Plan"
    /// # description = "Explore and write a plan."
    /// # instructions = "Plan first."
    /// # transitionsTo = ["build", "build-auto"]
    /// # availableTools = ["read_file", "write_plan", "submit_plan", "gh__search_issues"]
    /// # approvalTimeout = "30m"
    /// #
    /// # [[modes]]
    /// # id = "build"
    /// # default = true
    /// # requireApproval = ["write_file"]
    /// # defaultModelId = "gpt-4o"
    /// # [modes.metadata]
    /// # color = "green"
    /// #
    /// # [[modes]]
    /// # id = "build-auto"
    /// # "#, "modes.toml")?;
    /// # let plan = graph.get("plan").unwrap();
    /// # let build = graph.get("build").unwrap();
    /// let same = agent_controller::config::parse(&std::fs::read_to_string("config/modes.toml").unwrap(), "a.toml")?;
    /// let again = agent_controller::config::parse(&std::fs::read_to_string("config/modes.toml").unwrap(), "b.toml")?;
    /// assert_eq!(same.fingerprint(), again.fingerprint());
    /// assert_ne!(graph.fingerprint(), same.fingerprint());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        field(self.default_mode().id().as_bytes());
        field(self.plans_dir.to_string_lossy().as_bytes());
        for mode in &self.modes {
            field(mode.id.as_bytes());
            field(mode.instructions.as_bytes());
            // One target hashes as its id alone, as before lists existed.
            let targets: Vec<&str> = mode
                .transitions_to
                .iter()
                .map(|t| self.mode(*t).id())
                .collect();
            field(targets.join(",").as_bytes());
            match &mode.available_tools {
                None => field(b"*"),
                Some(tools) => {
                    field(&(tools.len() as u64).to_le_bytes());
                    for tool in tools {
                        field(tool.as_bytes());
                    }
                }
            }
            // Only a mode that sets it adds to the hash, so configs without `requireApproval`
            // keep the fingerprint they had (`?` is in no mode id, so it cannot be one).
            hash_require_approval(&mut field, &mode.require_approval);
            if mode.on_timeout == OnTimeout::Abort {
                field(b"?onTimeout=abort");
            }
            // Likewise only a mode whose planScope is not the default.
            if !mode.plan_scope.is_ask() {
                field(b"?planScope=");
                field(mode.plan_scope.as_str().as_bytes());
            }
            // Likewise only a mode with rules adds them.
            if !mode.rules.is_empty() {
                field(b"?rules");
                hash_rules(&mut field, &mode.rules);
            }
            // Likewise only a mode with a `subagents` list.
            if let Some(list) = &mode.subagents {
                field(b"?subagents");
                field(&(list.len() as u64).to_le_bytes());
                for id in list {
                    field(id.as_bytes());
                }
            }
        }
        // Only a config with subagent types adds them (what a child may do is part of what the
        // config lets a session do).
        if !self.subagents.is_empty() {
            field(b"?subagentTypes");
            field(&(self.subagents.len() as u64).to_le_bytes());
            for kind in self.subagents.iter() {
                field(kind.id.as_bytes());
                field(kind.instructions.as_bytes());
                match &kind.available_tools {
                    None => field(b"*"),
                    Some(tools) => {
                        field(&(tools.len() as u64).to_le_bytes());
                        for tool in tools {
                            field(tool.as_bytes());
                        }
                    }
                }
                // A marker first, so a type without requireApproval hashes apart from one with.
                field(b"?approval");
                hash_require_approval(&mut field, &kind.require_approval);
                field(b"?rules");
                hash_rules(&mut field, &kind.rules);
                field(kind.default_model_id.as_deref().unwrap_or("").as_bytes());
            }
        }
        // Only a config with MCP servers adds them, so configs without keep their fingerprint.
        if !self.mcp_servers.is_empty() {
            field(b"?mcpServers");
            field(&(self.mcp_servers.len() as u64).to_le_bytes());
            for server in self.mcp_servers.iter() {
                field(server.id().as_bytes());
                let trust: &[u8] = if server.is_trusted() {
                    b"trusted"
                } else {
                    b"untrusted"
                };
                field(trust);
                match server.transport() {
                    McpTransport::Stdio { command, args, env } => {
                        field(b"stdio");
                        field(command.as_bytes());
                        field(&(args.len() as u64).to_le_bytes());
                        for arg in args {
                            field(arg.as_bytes());
                        }
                        field(&(env.len() as u64).to_le_bytes());
                        for (key, value) in env {
                            field(key.as_bytes());
                            field(value.as_bytes());
                        }
                    }
                    McpTransport::Http { url } => {
                        field(b"http");
                        field(url.as_bytes());
                    }
                }
            }
        }
        crate::plan::hex(&hash.finalize())
    }
}
/// What a mode needs at run time, built once when the controller is built.
#[derive(Debug, Clone)]
pub(crate) struct ModeRuntime {
    pub(crate) system_prompt: String,
    pub(crate) specs: Vec<ToolSpec>,
    pub(crate) tool_list: String,
    pub(crate) name: String,
    pub(crate) id: Arc<str>,
}

impl ModeRuntime {
    pub(crate) fn allows(&self, tool: &str) -> bool {
        self.specs.iter().any(|s| &*s.name == tool)
    }

    /// The notice the model reads after a switch into this mode.
    pub(crate) fn mode_notice(&self, previous: &str, reason: ModeChangeReason) -> String {
        let why = match reason {
            ModeChangeReason::Manual => "switched by the user",
            ModeChangeReason::PlanApproved => "your plan was approved",
        };
        format!(
            "Mode changed: you are now in the {} mode (`{}`), previously `{previous}` ({why}). Follow this mode's instructions from now on. Your tools are now: {}.",
            self.name, self.id, self.tool_list
        )
    }
}

/// Feeds a `requireApproval` setting to a fingerprint's `field`: nothing for none, one marker for
/// all, a marker, the count and each tool for a list. Shared by modes and subagent types, so both
/// hash it the same way.
fn hash_require_approval(field: &mut impl FnMut(&[u8]), approval: &RequireApproval) {
    match approval {
        RequireApproval::None => {}
        RequireApproval::All => field(b"?approval=*"),
        RequireApproval::Tools(tools) => {
            field(b"?approval");
            field(&(tools.len() as u64).to_le_bytes());
            for tool in tools {
                field(tool.as_bytes());
            }
        }
    }
}

/// Feeds rules to a fingerprint's `field`: the count, then each rule's tool, action, matcher kind,
/// argument and pattern. Shared by modes and subagent types, so a rule that changes in any part
/// changes the fingerprint wherever it sits.
fn hash_rules(field: &mut impl FnMut(&[u8]), rules: &Rules) {
    field(&(rules.as_slice().len() as u64).to_le_bytes());
    for rule in rules.as_slice() {
        field(rule.tool().as_bytes());
        field(rule.action().as_str().as_bytes());
        field(rule.matcher().key().unwrap_or("*").as_bytes());
        field(rule.matcher().arg().unwrap_or("").as_bytes());
        field(rule.matcher().pattern().unwrap_or("").as_bytes());
    }
}
