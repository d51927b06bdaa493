//! What a mode config means, read straight from the TOML text by the rules of the config format,
//! without [`crate::config`]: the oracle the reference model is built on.

use std::sync::Arc;

use toml::Value;

use crate::config::DEFAULT_PLANS_DIR;
use crate::controller::{DEFAULT_MAX_REVISIONS, DEFAULT_MAX_STEPS};
use crate::plan::PlanScopePolicy;
use crate::tool::{ASK_USER, SUBMIT_PLAN};

/// A tool name no controller is expected to register: a call to it is always outside the mode's
/// tools.
pub const UNKNOWN_TOOL: &str = "not_a_registered_tool";

/// One mode as the reference model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeFacts {
    /// The mode id.
    pub id: String,
    /// The indices of the `transitionsTo` modes in config order (one for the single-id form;
    /// empty when unset). A plain approval goes to the first.
    pub transitions_to: Vec<usize>,
    /// The `availableTools` list as written (`None` when absent: every tool of the controller).
    pub tools: Option<Vec<String>>,
    /// `requireApproval` as written: which offered tools wait for the user's approval.
    pub require_approval: Approvals,
    /// The `rules` list as written, in order (rule N is `rules[N - 1]`).
    pub rules: Vec<RuleFacts>,
    /// `approvalTimeout` in milliseconds: how long a plan submitted in this mode, or a tool
    /// call made in it that waits for approval, waits for a decision before it expires; `None`
    /// without one (it waits for ever).
    pub approval_timeout_ms: Option<u64>,
    /// `onTimeout`: what an expiry does to the run.
    pub on_timeout: TimeoutRule,
    /// The `subagents` list as written: the subagent types the mode may start (`None`: every
    /// type, where it offers `subagent`).
    pub subagents: Option<Vec<String>>,
    /// `approvers`: how many approvals by distinct identities a plan submitted in this mode,
    /// or a call of it waiting for approval, needs (1 without a quorum).
    pub approvers: u8,
    /// `planScope` as written (`ask` when absent): what the files a plan submitted in this
    /// mode declares do, once approved, in the mode it hands over to.
    pub plan_scope: PlanScopePolicy,
}

/// One `[[subagents]]` type as the reference model reads it: what bounds a child of it, on
/// top of its parent's mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentFacts {
    /// The type id (`agentType` of a `subagent` call).
    pub id: String,
    /// The `availableTools` list as written (`None`: every tool the parent's mode offers).
    pub tools: Option<Vec<String>>,
    /// `requireApproval` as written: each tool it covers gets an `ask` rule in the child.
    pub require_approval: Approvals,
    /// The `rules` list as written, in order (its `allow` rules are refused by the config).
    pub rules: Vec<RuleFacts>,
}

impl SubagentFacts {
    /// Whether the type's `availableTools` lets a child call `tool` (a name or a `SERVER__*`
    /// wildcard covering it; every tool without a list).
    pub fn lists(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|list| {
            list.iter()
                .any(|t| t == tool || crate::tool::mcp::wildcard_covers(t, tool))
        })
    }
}

/// One rule of a mode as the reference model reads it: its tool, whether it has a pattern, and
/// its action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuleFacts {
    /// `tool`: a tool name or a `SERVER__*` wildcard.
    pub tool: String,
    /// Whether the rule reads an argument (`path`, `glob` or `regex`). The kit's calls carry
    /// `{}`, so such a rule never matches one of them (an argument the call leaves out matches
    /// no rule on it).
    pub pattern: bool,
    /// `action`: `allow`, `ask` or `deny`.
    pub action: String,
    /// `approvers` (an `ask` rule's quorum): 1 without one.
    pub approvers: u8,
}

impl RuleFacts {
    /// The action's strength: `deny` beats `ask`, which beats `allow`.
    fn strength(&self) -> u8 {
        match self.action.as_str() {
            "deny" => 2,
            "ask" => 1,
            _ => 0,
        }
    }
}

/// A mode's `onTimeout` as the reference model reads it: what happens to the run when what it
/// waits on expires. Either way the plan, or the tool call, counts as not approved and the mode
/// stays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutRule {
    /// `reject` (the default): the run ends `completed`, as after a rejection.
    #[default]
    Reject,
    /// `abort`: the run ends `aborted`.
    Abort,
}

/// An `approvalTimeout` value in milliseconds, read by the format's rule (whole numbers of
/// `d`, `h`, `m`, `s`, largest unit first, each once: `90s`, `1h30m`); `None` for anything else.
fn timeout_ms(text: &str) -> Option<u64> {
    const UNITS: [(char, u64); 4] = [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)];
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut next_unit = 0;
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let at = UNITS.iter().position(|(unit, _)| *unit == c)?;
        if at < next_unit || digits.is_empty() {
            return None;
        }
        let n: u64 = digits.parse().ok()?;
        total = total.checked_add(n.checked_mul(UNITS[at].1)?)?;
        digits.clear();
        next_unit = at + 1;
    }
    (digits.is_empty() && total > 0).then_some(total.checked_mul(1000)?)
}

/// A mode's `requireApproval` as the reference model reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Approvals {
    /// Absent or `false`: no tool call waits.
    #[default]
    None,
    /// `requireApproval = [...]`: calls to these tools wait.
    Tools(Vec<String>),
    /// `requireApproval = true`: a call to any tool the mode offers (but `submit_plan`) waits.
    All,
}

impl Approvals {
    /// Whether a call to `tool` waits by this rule (whether the mode offers it aside);
    /// `submit_plan` never does (its plan waits anyway).
    pub fn covers(&self, tool: &str) -> bool {
        tool != SUBMIT_PLAN
            && match self {
                Approvals::None => false,
                Approvals::Tools(tools) => tools
                    .iter()
                    .any(|t| t == tool || crate::tool::mcp::wildcard_covers(t, tool)),
                Approvals::All => true,
            }
    }

    /// Whether no tool call waits.
    pub fn is_none(&self) -> bool {
        matches!(self, Approvals::None) || matches!(self, Approvals::Tools(t) if t.is_empty())
    }
}

impl ModeFacts {
    /// Whether `submit_plan` is offered in this mode: it sets `transitionsTo` or lists
    /// `submit_plan`.
    pub fn is_planning(&self) -> bool {
        !self.transitions_to.is_empty()
            || self
                .tools
                .as_ref()
                .is_some_and(|tools| tools.iter().any(|t| t == SUBMIT_PLAN))
    }
}

/// Why [`ConfigFacts::from_toml`] could not read a config; it expects text that
/// [`crate::config::parse`] accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the config as a mode graph: {0}")]
pub struct FactsError(String);

/// The facts of a valid config the reference model needs: the modes in order, the resolved
/// default mode, the hand-over targets, the tool lists and the plans directory; and, once
/// known, two facts of the controller under test: the names of its registered tools (what a
/// mode without `availableTools` offers) and its step limit.
///
/// Read independently of [`crate::config`] so that a bug there cannot hide in the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFacts {
    modes: Vec<ModeFacts>,
    default: usize,
    plans_dir: String,
    text: Arc<str>,
    registered: Option<Vec<String>>,
    /// The registered tools that write ([`crate::tool::ToolAccess::Writes`]), which a planning mode
    /// without `availableTools` does not offer.
    writing: Vec<String>,
    /// The registered tools whose calls may carry a `path` ([`ConfigFacts::with_path_tools`]).
    path_tools: Vec<String>,
    /// The registered tools that write, each the file at its `path` argument
    /// ([`ConfigFacts::with_path_writers`]).
    path_writers: Vec<String>,
    max_steps: usize,
    max_revisions: usize,
    workspace_store: WorkspaceStore,
    /// The `[[subagents]]` types, in config order.
    subagents: Vec<SubagentFacts>,
    /// The registered tools that change nothing ([`crate::tool::ToolAccess::ReadOnly`]): the
    /// only ones a child started from a planning mode gets (`None`: not known).
    read_only: Option<Vec<String>>,
}

/// Whether the controller under test keeps workspace allowances
/// ([`crate::allowance::AllowanceScope::Workspace`]), which the reference needs to say what a
/// decision of that scope does; the [`super::Harness`] finds out from the controller's store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WorkspaceStore {
    /// No session store: a decision of scope `workspace` is refused (nothing can keep it).
    #[default]
    None,
    /// A store that keeps none ([`crate::SessionStore::save_workspace_allowance`] is
    /// unsupported): the decision stands, its allowance allows nothing.
    Drops,
    /// A store that keeps them: later sessions in the same workspace, under the same config,
    /// apply them.
    Keeps,
}

/// The names of the tools of `registry` whose calls may carry a `path`
/// ([`ConfigFacts::with_path_tools`]): each declares `path` in its input schema and locates
/// every path of [`super::CallPath`] where it is written.
pub(crate) fn path_tools(registry: &crate::ToolRegistry) -> Vec<String> {
    let workspace = std::path::Path::new("/kit-probe/workspace");
    let plans = workspace.join(".agent/plans");
    let ctx = crate::tool::ToolContext::new(workspace, &plans, "kit-probe");
    registry
        .iter()
        .filter(|tool| {
            let schema = tool.input_schema();
            let declared = schema
                .get("properties")
                .and_then(|p| p.get(crate::rules::DEFAULT_PATH_ARG))
                .is_some();
            declared
                && super::CallPath::ALL.iter().all(|path| {
                    tool.locate(crate::rules::DEFAULT_PATH_ARG, Some(path.as_str()), &ctx)
                        == Some(Ok(std::path::PathBuf::from(path.as_str())))
                })
        })
        .map(|tool| tool.name().to_owned())
        .collect()
}

/// The names of the tools of `registry` that write ([`crate::tool::ToolAccess::Writes`]) the
/// file at their `path` argument, as each says ([`crate::tool::Tool::written_path_args`] of a
/// call with one) and where it is written ([`path_tools`]), in registration order.
pub(crate) fn path_writers(registry: &crate::ToolRegistry) -> Vec<String> {
    let located = path_tools(registry);
    let args =
        serde_json::json!({ (crate::rules::DEFAULT_PATH_ARG): super::CallPath::Src.as_str() });
    registry
        .iter()
        .filter(|tool| tool.access() == crate::tool::ToolAccess::Writes)
        .filter(|tool| located.iter().any(|t| t == tool.name()))
        .filter(|tool| {
            tool.written_path_args(&args)
                .iter()
                .any(|a| a == crate::rules::DEFAULT_PATH_ARG)
        })
        .map(|tool| tool.name().to_owned())
        .collect()
}

/// The names of the tools of `registry` that change nothing
/// ([`crate::tool::ToolAccess::ReadOnly`]), in registration order.
pub(crate) fn read_only_tools(registry: &crate::ToolRegistry) -> Vec<String> {
    registry
        .iter()
        .filter(|tool| tool.access() == crate::tool::ToolAccess::ReadOnly)
        .map(|tool| tool.name().to_owned())
        .collect()
}

/// The names of the tools of `registry` that write ([`crate::tool::ToolAccess::Writes`]), in
/// registration order.
pub(crate) fn writing_tools(registry: &crate::ToolRegistry) -> Vec<String> {
    registry
        .iter()
        .filter(|tool| tool.access() == crate::tool::ToolAccess::Writes)
        .map(|tool| tool.name().to_owned())
        .collect()
}

/// The strings of a TOML array (`None` for anything else).
fn string_list(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|t| t.as_str().map(str::to_owned))
        .collect()
}

/// The `rules` of a mode or a subagent type as written (none without the key); `None` when one
/// lacks its tool or action.
/// `approvers` of a mode or a rule as written (0 and a missing key count as 1).
fn approvers_of(table: &Value) -> u8 {
    table
        .get("approvers")
        .and_then(Value::as_integer)
        .and_then(|n| u8::try_from(n).ok())
        .unwrap_or(1)
        .max(1)
}

fn read_rules(table: &Value) -> Option<Vec<RuleFacts>> {
    table
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|rule| {
            let text = |key: &str| rule.get(key).and_then(Value::as_str).map(str::to_owned);
            Some(RuleFacts {
                tool: text("tool")?,
                pattern: ["path", "glob", "regex"]
                    .iter()
                    .any(|k| rule.get(*k).is_some()),
                action: text("action")?,
                approvers: approvers_of(rule),
            })
        })
        .collect()
}

impl ConfigFacts {
    /// Reads the facts of config `text` by the rules of the format: the default mode is
    /// `defaultModeId`, else the mode marked `default = true`, else the first mode.
    ///
    /// # Errors
    /// [`FactsError`] when the text is not TOML or lacks what a valid config has (modes with
    /// string ids, known `transitionsTo` and `defaultModeId` ids, string tool names). Run
    /// [`crate::config::parse`] first for a precise error.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// )?;
    /// assert_eq!(facts.default_mode(), 1);
    /// assert_eq!(facts.transition_target(0), 1);
    /// assert!(facts.modes()[0].is_planning());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn from_toml(text: &str) -> Result<Self, FactsError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| FactsError(e.to_string()))?;
        let raw_modes = table
            .get("modes")
            .and_then(Value::as_array)
            .filter(|modes| !modes.is_empty())
            .ok_or_else(|| FactsError("no [[modes]]".to_owned()))?;
        let ids = raw_modes
            .iter()
            .map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| FactsError("a mode has no string id".to_owned()))?;
        let index_of = |id: &str| {
            ids.iter()
                .position(|known| known == id)
                .ok_or_else(|| FactsError(format!("`{id}` names no mode")))
        };
        let mut modes = Vec::with_capacity(raw_modes.len());
        for (raw, id) in raw_modes.iter().zip(&ids) {
            let transitions_to = match raw.get("transitionsTo") {
                None => Vec::new(),
                Some(Value::Array(targets)) => targets
                    .iter()
                    .map(|t| index_of(t.as_str().unwrap_or_default()))
                    .collect::<Result<Vec<usize>, FactsError>>()?,
                Some(target) => vec![index_of(target.as_str().unwrap_or_default())?],
            };
            let tools = match raw.get("availableTools") {
                None => None,
                Some(list) => Some(
                    list.as_array()
                        .into_iter()
                        .flatten()
                        .map(|t| t.as_str().map(str::to_owned))
                        .collect::<Option<Vec<String>>>()
                        .ok_or_else(|| FactsError(format!("mode `{id}` has a bad tool list")))?,
                ),
            };
            let require_approval = match raw.get("requireApproval") {
                None | Some(Value::Boolean(false)) => Approvals::None,
                Some(Value::Boolean(true)) => Approvals::All,
                Some(list) => Approvals::Tools(
                    list.as_array()
                        .into_iter()
                        .flatten()
                        .map(|t| t.as_str().map(str::to_owned))
                        .collect::<Option<Vec<String>>>()
                        .ok_or_else(|| {
                            FactsError(format!("mode `{id}` has a bad requireApproval list"))
                        })?,
                ),
            };
            let approval_timeout_ms =
                match raw.get("approvalTimeout") {
                    None => None,
                    Some(value) => Some(value.as_str().and_then(timeout_ms).ok_or_else(|| {
                        FactsError(format!("mode `{id}` has a bad approvalTimeout"))
                    })?),
                };
            let on_timeout = match raw.get("onTimeout").and_then(Value::as_str) {
                Some("abort") => TimeoutRule::Abort,
                _ => TimeoutRule::Reject,
            };
            let subagents =
                match raw.get("subagents") {
                    None => None,
                    Some(list) => Some(string_list(list).ok_or_else(|| {
                        FactsError(format!("mode `{id}` has a bad subagents list"))
                    })?),
                };
            let plan_scope = match raw.get("planScope").and_then(Value::as_str) {
                Some("enforce") => PlanScopePolicy::Enforce,
                Some("off") => PlanScopePolicy::Off,
                _ => PlanScopePolicy::Ask,
            };
            modes.push(ModeFacts {
                plan_scope,
                id: id.clone(),
                transitions_to,
                tools,
                require_approval,
                rules: read_rules(raw)
                    .ok_or_else(|| FactsError(format!("mode `{id}` has a bad rule")))?,
                approval_timeout_ms,
                on_timeout,
                subagents,
                approvers: approvers_of(raw),
            });
        }
        let marked = raw_modes
            .iter()
            .position(|m| m.get("default").and_then(Value::as_bool) == Some(true));
        let default = match table.get("defaultModeId") {
            Some(id) => index_of(id.as_str().unwrap_or_default())?,
            None => marked.unwrap_or(0),
        };
        let plans_dir = table
            .get("plansDir")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_PLANS_DIR)
            .to_owned();
        let mut subagents = Vec::new();
        for raw in table
            .get("subagents")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = raw
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| FactsError("a subagent type has no string id".to_owned()))?
                .to_owned();
            let bad = |what: &str| FactsError(format!("subagent type `{id}` has a bad {what}"));
            let tools = match raw.get("availableTools") {
                None => None,
                Some(list) => Some(string_list(list).ok_or_else(|| bad("tool list"))?),
            };
            let require_approval = match raw.get("requireApproval") {
                None | Some(Value::Boolean(false)) => Approvals::None,
                Some(Value::Boolean(true)) => Approvals::All,
                Some(list) => {
                    Approvals::Tools(string_list(list).ok_or_else(|| bad("requireApproval list"))?)
                }
            };
            let rules = read_rules(raw).ok_or_else(|| bad("rule"))?;
            subagents.push(SubagentFacts {
                id,
                tools,
                require_approval,
                rules,
            });
        }
        let mut facts = Self::new(modes, default, plans_dir, text.to_owned());
        facts.subagents = subagents;
        Ok(facts)
    }

    pub(crate) fn new(
        modes: Vec<ModeFacts>,
        default: usize,
        plans_dir: String,
        text: String,
    ) -> Self {
        Self {
            modes,
            default,
            plans_dir,
            text: Arc::from(text),
            registered: None,
            writing: Vec::new(),
            path_tools: Vec::new(),
            path_writers: Vec::new(),
            max_steps: DEFAULT_MAX_STEPS,
            max_revisions: DEFAULT_MAX_REVISIONS,
            workspace_store: WorkspaceStore::None,
            subagents: Vec::new(),
            read_only: None,
        }
    }

    /// The same facts for a controller that registers the tools `names` (without
    /// `submit_plan`): a mode without `availableTools` offers these, a planning mode those of
    /// them that do not write ([`ConfigFacts::with_writing_tools`]; none writes unless named
    /// there). The controller adds the built-in `ask_user` after them, unless `names` has a
    /// tool of that name, when a mode lists it or a planning mode has no list: so do these
    /// facts ([`ConfigFacts::adds_ask_user`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.offers(build, "list_files"), Some(true), "build lists no tools: every registered one");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut names: Vec<String> = names.into_iter().map(Into::into).collect();
        if self.adds_ask_user() && !names.iter().any(|n| n == ASK_USER) {
            names.push(ASK_USER.to_owned());
        }
        self.registered = Some(names);
        self
    }

    /// Whether the controller adds the built-in `ask_user` to a registry without one: when a
    /// mode lists it, or a planning mode has no `availableTools` (it offers the tools that
    /// change nothing, and `ask_user` changes nothing).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let unlisted_plan = ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\navailableTools = [\"read_file\"]\n")?;
    /// assert!(unlisted_plan.adds_ask_user());
    /// assert_eq!(unlisted_plan.with_tools(["read_file"]).registered().map(|r| r.len()), Some(2));
    /// let none = ConfigFacts::from_toml("[[modes]]\nid = \"build\"\n")?;
    /// assert!(!none.adds_ask_user(), "a mode with no list that is not planning adds nothing");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn adds_ask_user(&self) -> bool {
        self.modes.iter().any(|m| match &m.tools {
            Some(list) => list.iter().any(|t| t == ASK_USER),
            None => m.is_planning(),
        })
    }

    /// The same facts, with `names` as the registered tools that write
    /// ([`crate::tool::ToolAccess::Writes`]): a planning mode without `availableTools` does not offer
    /// them.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.writing_tools(), ["write_file"]);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_writing_tools(
        mut self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.writing = names.into_iter().map(Into::into).collect();
        self
    }

    /// The same facts for a controller with the tools of `registry`: their names
    /// ([`ConfigFacts::with_tools`]) and which of them write
    /// ([`ConfigFacts::with_writing_tools`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ToolRegistry, testing::ConfigFacts};
    /// let facts = ConfigFacts::from_toml("[[modes]]\nid = \"build\"\n")?.with_registry(&ToolRegistry::with_workspace_tools());
    /// assert_eq!(facts.writing_tools(), ["write_file"]);
    /// assert_eq!(facts.registered().map(|r| r.len()), Some(4));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_registry(self, registry: &crate::ToolRegistry) -> Self {
        self.with_tools(registry.names())
            .with_writing_tools(writing_tools(registry))
            .with_path_tools(path_tools(registry))
            .with_path_writers(path_writers(registry))
            .with_read_only_tools(read_only_tools(registry))
    }

    /// The same facts, with `names` as the registered tools that write the file their `path`
    /// argument names, as each says ([`crate::tool::Tool::written_path_args`]): where an
    /// approved plan declares its files, a call of one of them with a `path` is inside or
    /// outside those files by where that path leads; a call of another tool that writes (or of
    /// one of these without a `path`) writes where nobody can say, so outside.
    /// [`ConfigFacts::with_registry`] and the [`super::Harness`] find them in the registry.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ToolRegistry, testing::ConfigFacts};
    /// let facts = ConfigFacts::from_toml("[[modes]]\nid = \"build\"\n")?
    ///     .with_registry(&ToolRegistry::with_workspace_tools());
    /// assert_eq!(facts.path_writers(), ["write_file"]);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_path_writers(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.path_writers = names.into_iter().map(Into::into).collect();
        self
    }

    /// The registered tools that write the file at their `path`, as
    /// [`ConfigFacts::with_path_writers`] set them.
    pub fn path_writers(&self) -> &[String] {
        &self.path_writers
    }

    /// The `planScope` of mode `mode` (`ask` for an index out of range).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::tool::submit_plan::PlanScopePolicy;
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\nplanScope = \"enforce\"\n\n[[modes]]\nid = \"build\"\n")?;
    /// assert_eq!(facts.plan_scope(0), PlanScopePolicy::Enforce);
    /// assert_eq!(facts.plan_scope(1), PlanScopePolicy::Ask, "the default");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn plan_scope(&self, mode: usize) -> PlanScopePolicy {
        self.modes
            .get(mode)
            .map(|m| m.plan_scope)
            .unwrap_or_default()
    }

    /// The same facts, with `names` as the registered tools whose calls the kit may give a
    /// `path` argument ([`crate::testing::CallPath`]): each declares `path` in its input schema
    /// and takes it relative to the workspace, as written (the default of
    /// [`crate::tool::Tool::locate`]), so that the reference knows where the path lies.
    /// [`ConfigFacts::with_registry`] and the [`super::Harness`] find them in the registry.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ToolRegistry, testing::ConfigFacts};
    /// let facts = ConfigFacts::from_toml("[[modes]]\nid = \"build\"\n")?
    ///     .with_registry(&ToolRegistry::with_workspace_tools());
    /// assert!(facts.path_tools().iter().any(|t| t == "write_file"));
    /// assert!(!facts.path_tools().iter().any(|t| t == "write_plan"), "it takes a bare name in the plans directory");
    /// assert!(ConfigFacts::from_toml("[[modes]]\nid = \"build\"\n")?.path_tools().is_empty());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_path_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.path_tools = names.into_iter().map(Into::into).collect();
        self
    }

    /// The registered tools whose calls may carry a `path`, as
    /// [`ConfigFacts::with_path_tools`] set them.
    pub fn path_tools(&self) -> &[String] {
        &self.path_tools
    }

    /// Whether the kit's calls of `tool` in `mode` may carry a `path`: it is one of
    /// [`ConfigFacts::path_tools`], the mode offers it, and no rule of the mode with a pattern
    /// is on it (the reference reads the rules without one only).
    pub fn takes_path(&self, mode: usize, tool: &str) -> bool {
        self.path_tools.iter().any(|t| t == tool)
            && self.offers(mode, tool) == Some(true)
            && self.modes.get(mode).is_some_and(|m| {
                !m.rules.iter().any(|rule| {
                    rule.pattern
                        && (rule.tool == tool
                            || crate::tool::mcp::wildcard_covers(&rule.tool, tool))
                })
            })
    }

    /// The registered tools that write, as [`ConfigFacts::with_writing_tools`] set them.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert!(facts.writing_tools().iter().all(|t| t == "write_file"));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn writing_tools(&self) -> &[String] {
        &self.writing
    }

    /// The same facts for a controller whose runs make at most `steps` model calls per drive
    /// (per message or decision; [`crate::controller::AgentControllerBuilder::max_steps`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.with_max_steps(3).max_steps(), 3);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_max_steps(mut self, steps: usize) -> Self {
        self.max_steps = steps.max(1);
        self
    }

    /// The same facts for a controller whose runs take at most `revisions` plan revisions
    /// ([`crate::controller::AgentControllerBuilder::max_revisions`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.with_max_revisions(0).max_revisions(), 0);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_max_revisions(mut self, revisions: usize) -> Self {
        self.max_revisions = revisions;
        self
    }

    /// The limit of plan revisions per run (default [`DEFAULT_MAX_REVISIONS`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.max_revisions(), agent_controller::controller::DEFAULT_MAX_REVISIONS);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn max_revisions(&self) -> usize {
        self.max_revisions
    }

    /// The same facts, with `store` saying whether the controller keeps workspace allowances
    /// (the [`super::Harness`] sets it from the controller's store).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::{ConfigFacts, WorkspaceStore};
    /// let facts = ConfigFacts::from_toml("[[modes]]\nid = \"build\"\n")?;
    /// assert_eq!(facts.workspace_store(), WorkspaceStore::None);
    /// assert_eq!(facts.with_workspace_store(WorkspaceStore::Keeps).workspace_store(), WorkspaceStore::Keeps);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn with_workspace_store(mut self, store: WorkspaceStore) -> Self {
        self.workspace_store = store;
        self
    }

    /// Whether the controller keeps workspace allowances ([`WorkspaceStore`]).
    pub fn workspace_store(&self) -> WorkspaceStore {
        self.workspace_store
    }

    /// The registered tool names, once known ([`ConfigFacts::with_tools`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml("[[modes]]\nid = \"build\"\n")?;
    /// assert_eq!(facts.registered(), None, "not known yet");
    /// assert_eq!(facts.with_tools(["read_file"]).registered().map(|r| r.len()), Some(1));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn registered(&self) -> Option<&[String]> {
        self.registered.as_deref()
    }

    /// The step limit (default [`DEFAULT_MAX_STEPS`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.max_steps(), agent_controller::controller::DEFAULT_MAX_STEPS);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn max_steps(&self) -> usize {
        self.max_steps
    }

    /// The modes in config order.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.modes().len(), 2);
    /// assert!(facts.modes()[plan].is_planning());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn modes(&self) -> &[ModeFacts] {
        &self.modes
    }

    /// The number of modes.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.len(), 2);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.modes.len()
    }

    /// Always `false`: a config has at least one mode.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert!(!facts.is_empty());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.modes.is_empty()
    }

    /// The mode at `index`: its id. Out of range gives `""`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.id(build), "build");
    /// assert_eq!(facts.id(9), "");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn id(&self, index: usize) -> &str {
        self.modes.get(index).map_or("", |m| m.id.as_str())
    }

    /// The index of the mode with this id (case-sensitive), if any.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.index_of("build"), Some(build));
    /// assert_eq!(facts.index_of("Build"), None);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.modes.iter().position(|m| m.id == id)
    }

    /// The index of the resolved default mode.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.default_mode(), build);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn default_mode(&self) -> usize {
        self.default
    }

    /// Where a plain approval of a plan submitted in `mode` hands over to: the first mode its
    /// `transitionsTo` names, else the default mode.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.transition_target(plan), build);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn transition_target(&self, mode: usize) -> usize {
        self.modes
            .get(mode)
            .and_then(|m| m.transitions_to.first().copied())
            .unwrap_or(self.default)
    }

    /// Every mode a plan submitted in `mode` may be approved to, the plain approval's target
    /// first: the modes its `transitionsTo` names, else the default mode alone.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.transition_targets(plan), [build]);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn transition_targets(&self, mode: usize) -> Vec<usize> {
        match self.modes.get(mode).map(|m| m.transitions_to.as_slice()) {
            Some([]) | None => vec![self.default],
            Some(listed) => listed.to_vec(),
        }
    }

    /// Whether `mode` is a planning mode (where `submit_plan` is offered).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert!(facts.is_planning(plan));
    /// assert!(!facts.is_planning(build));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn is_planning(&self, mode: usize) -> bool {
        self.modes.get(mode).is_some_and(ModeFacts::is_planning)
    }

    /// Whether the model is offered `tool` in `mode`: `Some(answer)` when the config (and, for a
    /// mode without `availableTools`, the registered tools) decide it, `None` when the tools are
    /// not known. [`UNKNOWN_TOOL`] is never offered.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.offers(plan, "write_file"), Some(false), "not listed");
    /// assert_eq!(facts.offers(plan, "read_file"), Some(true));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn offers(&self, mode: usize, tool: &str) -> Option<bool> {
        if tool == UNKNOWN_TOOL {
            return Some(false);
        }
        if tool == SUBMIT_PLAN {
            return Some(self.is_planning(mode));
        }
        match &self.modes.get(mode)?.tools {
            // A listed name is offered when the controller has the tool: the config refuses
            // other unknown names, but an MCP server may lack one its config lists.
            Some(list) if list.iter().any(|t| t == tool) => Some(
                self.registered
                    .as_ref()
                    .is_none_or(|registered| registered.iter().any(|t| t == tool)),
            ),
            // A `SERVER__*` wildcard offers the registered tools it covers; in a planning mode
            // only those that change nothing (an MCP tool is read-only or writes).
            Some(list)
                if list
                    .iter()
                    .any(|t| crate::tool::mcp::wildcard_covers(t, tool)) =>
            {
                Some(
                    self.registered.as_ref()?.iter().any(|t| t == tool)
                        && !(self.is_planning(mode) && self.writing.iter().any(|t| t == tool)),
                )
            }
            Some(_) => Some(false),
            // A planning mode offers a tool that writes only where it lists it.
            None => Some(
                self.registered.as_ref()?.iter().any(|t| t == tool)
                    && !(self.is_planning(mode) && self.writing.iter().any(|t| t == tool)),
            ),
        }
    }

    /// The names `mode` offers when it has `availableTools`: the list with each `SERVER__*`
    /// wildcard replaced by the registered tools it covers ([`ConfigFacts::offers`]), each
    /// once, in the order the controller offers them; `None` without a list.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.listed_offer(plan), Some(vec!["read_file".to_owned(), "write_plan".to_owned(), "submit_plan".to_owned()]));
    /// assert_eq!(facts.listed_offer(build), None);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn listed_offer(&self, mode: usize) -> Option<Vec<String>> {
        let list = self.modes.get(mode)?.tools.as_ref()?;
        let mut names: Vec<String> = Vec::new();
        for name in list {
            if name.ends_with("__*") {
                for tool in self.registered.iter().flatten() {
                    if crate::tool::mcp::wildcard_covers(name, tool)
                        && self.offers(mode, tool) == Some(true)
                        && !names.contains(tool)
                    {
                        names.push(tool.clone());
                    }
                }
            } else if !names.contains(name)
                && (name == SUBMIT_PLAN || self.offers(mode, name) != Some(false))
            {
                names.push(name.clone());
            }
        }
        Some(names)
    }

    /// The `approvalTimeout` of `mode` in milliseconds, if it has one.
    pub fn approval_timeout_ms(&self, mode: usize) -> Option<u64> {
        self.modes.get(mode)?.approval_timeout_ms
    }

    /// What an expiry in `mode` does to the run ([`TimeoutRule`]).
    pub fn on_timeout(&self, mode: usize) -> TimeoutRule {
        self.modes
            .get(mode)
            .map_or_else(TimeoutRule::default, |m| m.on_timeout)
    }

    /// Whether some mode has an `approvalTimeout`: then time passing is among the operations.
    pub fn has_deadlines(&self) -> bool {
        self.modes.iter().any(|m| m.approval_timeout_ms.is_some())
    }

    /// Whether a call to `tool` in `mode` waits for the user's approval (unless a decision
    /// always allowed the tool): the mode offers it and its `requireApproval` covers it.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert!(facts.requires_approval(build, "write_file"));
    /// assert!(!facts.requires_approval(plan, "write_file"), "not offered there");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn requires_approval(&self, mode: usize, tool: &str) -> bool {
        // `ask_user` asks the user already: `requireApproval` never gates it.
        tool != ASK_USER
            && self.offers(mode, tool) == Some(true)
            && self
                .modes
                .get(mode)
                .is_some_and(|m| m.require_approval.covers(tool))
    }

    /// The tools whose calls wait for approval in `mode` by `requireApproval` alone (registered
    /// tools it offers that its `requireApproval` covers and no rule decides), in
    /// [`ConfigFacts::tool_names`] order: those an "always allow" can allow.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.approval_tools(build), ["write_file"]);
    /// assert!(facts.approval_tools(plan).is_empty());
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn approval_tools(&self, mode: usize) -> Vec<String> {
        self.tool_names()
            .into_iter()
            .filter(|t| self.requires_approval(mode, t) && self.rule_for(mode, t).is_none())
            .collect()
    }

    /// The rule of `mode` that decides a kit call of `tool` (arguments `{}`), as the rules'
    /// precedence says: of the rules on the tool (by name or `SERVER__*` wildcard) without a
    /// pattern, the strongest action (`deny`, then `ask`, then `allow`), the first listed
    /// among equals. Returns its number (from 1) and action; `None` when none decides (a tool
    /// the mode does not offer included: `availableTools` outranks every rule).
    pub fn rule_for(&self, mode: usize, tool: &str) -> Option<(usize, &str)> {
        self.deciding_rule(mode, tool)
            .map(|(n, rule)| (n, rule.action.as_str()))
    }

    /// [`ConfigFacts::rule_for`], the rule itself.
    fn deciding_rule(&self, mode: usize, tool: &str) -> Option<(usize, &RuleFacts)> {
        if self.offers(mode, tool) != Some(true) {
            return None;
        }
        let mut best: Option<(usize, &RuleFacts)> = None;
        for (i, rule) in self.modes.get(mode)?.rules.iter().enumerate() {
            let on = rule.tool == tool || crate::tool::mcp::wildcard_covers(&rule.tool, tool);
            if !on || rule.pattern {
                continue;
            }
            if best.is_none_or(|(_, b)| rule.strength() > b.strength()) {
                best = Some((i + 1, rule));
            }
        }
        best
    }

    /// How many approvals by distinct identities a plan submitted in `mode` needs: the mode's
    /// `approvers` (1 without a quorum).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\napprovers = 2\n\n\
    ///      [[modes]]\nid = \"build\"\n",
    /// )?;
    /// assert_eq!((facts.plan_quorum(0), facts.plan_quorum(1)), (2, 1));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn plan_quorum(&self, mode: usize) -> u8 {
        self.modes.get(mode).map_or(1, |m| m.approvers)
    }

    /// How many approvals by distinct identities a kit call of `tool` waiting for approval in
    /// `mode` needs: the mode's `approvers` or the deciding `ask` rule's, whichever is higher
    /// (1 without a quorum).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"build\"\navailableTools = [\"bash\", \"write_file\"]\n\
    ///      rules = [{ tool = \"bash\", action = \"ask\", approvers = 3 }]\n",
    /// )?;
    /// assert_eq!(facts.call_quorum(0, "bash"), 3);
    /// assert_eq!(facts.call_quorum(0, "write_file"), 1);
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn call_quorum(&self, mode: usize, tool: &str) -> u8 {
        let rule = self
            .deciding_rule(mode, tool)
            .filter(|(_, r)| r.action == "ask")
            .map_or(1, |(_, r)| r.approvers);
        self.plan_quorum(mode).max(rule)
    }

    /// Whether any mode or rule needs more than one approval ([`ConfigFacts::plan_quorum`],
    /// [`ConfigFacts::call_quorum`]).
    pub fn has_quorum(&self) -> bool {
        self.modes
            .iter()
            .any(|m| m.approvers > 1 || m.rules.iter().any(|r| r.approvers > 1))
    }

    /// The registered tools `mode` offers whose kit calls a rule with `action` decides, in
    /// [`ConfigFacts::tool_names`] order.
    pub fn ruled_tools(&self, mode: usize, action: &str) -> Vec<String> {
        self.tool_names()
            .into_iter()
            .filter(|t| self.rule_for(mode, t).is_some_and(|(_, a)| a == action))
            .collect()
    }

    /// Every tool name the kit calls in every mode: [`UNKNOWN_TOOL`], `submit_plan` and each
    /// registered tool (when not known: each tool some mode lists), but the task tools
    /// (`task_write`, `task_update`, `task_complete`, `task_check`): the kit calls those with
    /// arguments of its own ([`crate::testing::Call::Task`]), never with `{}`; and but
    /// `subagent`, whose call starts a child session the reference does not model (with `{}`
    /// it is refused before it runs).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// let names = facts.tool_names();
    /// assert!(names.contains(&"submit_plan".to_owned()));
    /// assert!(names.contains(&"write_file".to_owned()));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn tool_names(&self) -> Vec<String> {
        let mut names = vec![UNKNOWN_TOOL.to_owned(), SUBMIT_PLAN.to_owned()];
        let listed = self.modes.iter().flat_map(|m| m.tools.iter().flatten());
        let known: Vec<&String> = match &self.registered {
            Some(registered) => registered.iter().collect(),
            None => listed.collect(),
        };
        for name in known {
            if !names.contains(name)
                && !crate::tool::tasks::is_task_tool(name)
                && name != crate::subagent::SUBAGENT
            {
                names.push(name.clone());
            }
        }
        names
    }

    /// The `[[subagents]]` types, in config order.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[subagents]]\nid = \"explore\"\navailableTools = [\"read_file\"]\n\n[[modes]]\nid = \"build\"\n",
    /// )?;
    /// assert_eq!(facts.subagent_types()[0].id, "explore");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn subagent_types(&self) -> &[SubagentFacts] {
        &self.subagents
    }

    fn subagent_type(&self, id: &str) -> Option<&SubagentFacts> {
        self.subagents.iter().find(|t| t.id == id)
    }

    /// The same facts, with `names` as the registered tools that change nothing
    /// ([`crate::tool::ToolAccess::ReadOnly`]): the only tools a child started from a planning
    /// mode is offered. The [`super::Harness`] finds them in the controller's registry.
    pub fn with_read_only_tools(
        mut self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.read_only = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Whether a `subagent` call in `mode` naming `agent_type` starts a child: the mode offers
    /// `subagent`, a type has that id, and the mode's `subagents` list names it (every type,
    /// without a list). Any other such call is refused with an error result.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[subagents]]\nid = \"explore\"\n\n[[subagents]]\nid = \"scribe\"\n\n[[modes]]\nid = \"build\"\navailableTools = [\"read_file\", \"subagent\"]\nsubagents = [\"explore\"]\n",
    /// )?
    /// .with_tools(["read_file", "subagent"]);
    /// assert!(facts.may_start(0, "explore"));
    /// assert!(!facts.may_start(0, "scribe"), "not in the mode's list");
    /// assert!(!facts.may_start(0, "nobody"));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn may_start(&self, mode: usize, agent_type: &str) -> bool {
        self.offers(mode, crate::subagent::SUBAGENT) == Some(true)
            && self.subagent_type(agent_type).is_some()
            && self.modes.get(mode).is_some_and(|m| {
                m.subagents
                    .as_ref()
                    .is_none_or(|list| list.iter().any(|t| t == agent_type))
            })
    }

    /// The tools a child of `agent_type` started in `mode` is offered, in the order the
    /// controller offers them: those its type lists *and* `mode` offers, never `submit_plan`,
    /// the task tools or `subagent` (children nest one deep), and from a planning mode only the
    /// tools that change nothing. Empty for an unknown type.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[subagents]]\nid = \"scribe\"\navailableTools = [\"read_file\", \"write_file\"]\n\n[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_file\", \"subagent\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\navailableTools = [\"read_file\", \"subagent\"]\n",
    /// )?
    /// .with_tools(["read_file", "write_file", "subagent"])
    /// .with_writing_tools(["write_file"])
    /// .with_read_only_tools(["read_file", "subagent"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.child_tools(plan, "scribe"), ["read_file"], "read-only from a planning mode");
    /// assert_eq!(facts.child_tools(build, "scribe"), ["read_file"], "never more than the parent's mode");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn child_tools(&self, mode: usize, agent_type: &str) -> Vec<String> {
        let Some(kind) = self.subagent_type(agent_type) else {
            return Vec::new();
        };
        let offered: Vec<String> = match self.listed_offer(mode) {
            Some(listed) => listed,
            None => self
                .registered
                .iter()
                .flatten()
                .filter(|t| self.offers(mode, t) == Some(true))
                .cloned()
                .collect(),
        };
        let planning = self.is_planning(mode);
        offered
            .into_iter()
            .filter(|t| {
                kind.lists(t)
                    && t != SUBMIT_PLAN
                    && t != crate::subagent::SUBAGENT
                    && !crate::tool::tasks::is_task_tool(t)
                    && !(planning
                        && match &self.read_only {
                            Some(read_only) => !read_only.contains(t),
                            None => self.writing.contains(t),
                        })
            })
            .collect()
    }

    /// The rule of a child of `agent_type` in `mode` that decides a kit call of `tool`
    /// (arguments `{}`): among the parent mode's rules, then the type's `deny` and `ask`
    /// rules, then one `ask` rule on each tool the type's `requireApproval` covers (each tool
    /// the child is offered, for `true`), in that order, by the precedence of
    /// [`ConfigFacts::rule_for`]. Numbered as the call's record names it
    /// ([`crate::rules::RuleRecord`]): a mode's rule by its number in the mode's list, a type's
    /// by its number in the type's list, an `ask` of the type's `requireApproval` 0. `None`
    /// when none decides or the child is not offered `tool`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[subagents]]\nid = \"scribe\"\nrequireApproval = [\"write_file\"]\n\n[[modes]]\nid = \"build\"\navailableTools = [\"write_file\", \"subagent\"]\nrules = [{ tool = \"write_file\", action = \"allow\" }]\n",
    /// )?
    /// .with_tools(["write_file", "subagent"]);
    /// assert_eq!(facts.rule_for(0, "write_file"), Some((1, "allow")));
    /// assert_eq!(facts.child_rule_for(0, "scribe", "write_file"), Some((0, "ask".to_owned())), "the type's wait outranks the parent's allow");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn child_rule_for(
        &self,
        mode: usize,
        agent_type: &str,
        tool: &str,
    ) -> Option<(usize, String)> {
        let kind = self.subagent_type(agent_type)?;
        let child_tools = self.child_tools(mode, agent_type);
        if !child_tools.iter().any(|t| t == tool) {
            return None;
        }
        // Each rule with the number its record names it by.
        let mut rules: Vec<(usize, RuleFacts)> = self
            .modes
            .get(mode)?
            .rules
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, rule)| (i + 1, rule))
            .collect();
        rules.extend(
            kind.rules
                .iter()
                .cloned()
                .enumerate()
                .filter(|(_, r)| r.action != "allow")
                .map(|(i, rule)| (i + 1, rule)),
        );
        let ask = |tool: &String| {
            let rule = RuleFacts {
                tool: tool.clone(),
                pattern: false,
                action: "ask".to_owned(),
                approvers: 1,
            };
            (0, rule)
        };
        match &kind.require_approval {
            Approvals::None => {}
            Approvals::Tools(tools) => rules.extend(tools.iter().map(ask)),
            Approvals::All => rules.extend(child_tools.iter().map(ask)),
        }
        let mut best: Option<(usize, &RuleFacts)> = None;
        for (number, rule) in &rules {
            let on = rule.tool == tool || crate::tool::mcp::wildcard_covers(&rule.tool, tool);
            if !on || rule.pattern {
                continue;
            }
            if best.is_none_or(|(_, b)| rule.strength() > b.strength()) {
                best = Some((*number, rule));
            }
        }
        best.map(|(n, rule)| (n, rule.action.clone()))
    }

    /// Whether a child's call of `tool` (type `agent_type`, started in `mode`) waits for the
    /// user's approval by `requireApproval` when no rule decides it: the child is offered the
    /// tool and the parent mode's `requireApproval` or the type's covers it. An allowance of
    /// the parent's in force for the tool lets it run (the type's own waits are `ask` rules,
    /// which no allowance passes).
    pub fn child_requires_approval(&self, mode: usize, agent_type: &str, tool: &str) -> bool {
        tool != ASK_USER
            && self.child_tools(mode, agent_type).iter().any(|t| t == tool)
            && (self
                .modes
                .get(mode)
                .is_some_and(|m| m.require_approval.covers(tool))
                || self
                    .subagent_type(agent_type)
                    .is_some_and(|t| t.require_approval.covers(tool)))
    }

    /// The plans directory as configured (`plansDir`, default `.agent/plans`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert_eq!(facts.plans_dir(), ".agent/plans", "the default");
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn plans_dir(&self) -> &str {
        &self.plans_dir
    }

    /// The config text the facts were read from (or rendered for).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::testing::ConfigFacts;
    /// let facts = ConfigFacts::from_toml(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n",
    /// )?
    /// .with_tools(["read_file", "list_files", "write_file", "write_plan"])
    /// .with_writing_tools(["write_file"]);
    /// let (plan, build) = (0, 1);
    /// assert!(facts.text().contains("[[modes]]"));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_timeouts_are_read_as_the_format_writes_them() {
        assert_eq!(timeout_ms("90s"), Some(90_000));
        assert_eq!(timeout_ms("1h30m"), Some(5_400_000));
        assert_eq!(timeout_ms("1d2h3m4s"), Some(93_784_000));
        assert_eq!(timeout_ms("0h1s"), Some(1_000));
        for bad in ["", "5", "h", "30m1h", "1h1h", "0s", "5 m", "1w"] {
            assert_eq!(timeout_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_mode_s_deadline_and_on_timeout_are_read() {
        let facts = ConfigFacts::from_toml(
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\napprovalTimeout = \"24h\"\n\
             onTimeout = \"abort\"\n[[modes]]\nid = \"build\"\n",
        )
        .expect("facts");
        assert_eq!(facts.approval_timeout_ms(0), Some(86_400_000));
        assert_eq!(facts.on_timeout(0), TimeoutRule::Abort);
        assert_eq!(facts.approval_timeout_ms(1), None);
        assert_eq!(facts.on_timeout(1), TimeoutRule::Reject);
        assert!(facts.has_deadlines());
    }
}
