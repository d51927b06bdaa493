//! Subagent types: the `[[subagents]]` of a config, which a mode's `subagent` tool starts as
//! child runs (the guide's page `subagents`).
//!
//! A child never does more than its parent: its tools are those its type lists *and* the
//! parent's current mode offers, the parent mode's `requireApproval` and rules apply in it (with
//! the type's own on top, which can only add waits and refusals), a child started from a
//! planning mode is read-only, and no child gets the task tools, `submit_plan`, or `subagent`
//! beyond the depth limit. The session runs a child ([`crate::session`]); this module holds the
//! limits (it names no other module of the crate); the type as the config describes it is
//! [`crate::mode::subagent::SubagentType`], the tool [`crate::tool::subagent`].
//!
//! # Examples
//! ```
//! let graph = agent_controller::config::parse(
//!     r#"
//! [[subagents]]
//! id = "explore"
//! description = "Reads the code and reports what it found."
//! instructions = "Explore; change nothing."
//! availableTools = ["read_file", "list_files"]
//!
//! [[modes]]
//! id = "build"
//! availableTools = ["read_file", "list_files", "write_file", "subagent"]
//! subagents = ["explore"]
//! "#,
//!     "modes.toml",
//! )?;
//! let explore = graph.subagent("explore").expect("a type");
//! assert_eq!(explore.instructions(), "Explore; change nothing.");
//! let build = graph.default_mode_id();
//! assert_eq!(graph.subagents_of(build).len(), 1);
//! # Ok::<(), agent_controller::ConfigError>(())
//! ```

/// The name of the built-in tool that starts a subagent.
pub const SUBAGENT: &str = "subagent";

/// Most characters a `subagent` call's `task` may have: a longer one is refused before any
/// child starts.
pub const MAX_TASK_CHARS: usize = 100_000;

/// Most characters of a `subagent` call's `description`.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;

/// How deep subagents nest by default: a child may not start subagents of its own
/// ([`crate::controller::AgentControllerBuilder::subagent_depth`]).
pub const DEFAULT_DEPTH: usize = 1;

/// How many `subagent` calls of one reply run at once by default; the rest wait their turn
/// ([`crate::controller::AgentControllerBuilder::subagent_concurrency`]).
pub const DEFAULT_CONCURRENCY: usize = 4;

/// Most `subagent` calls of one reply that start at all: past it each gets an error result.
pub const MAX_PER_REPLY: usize = 16;

/// The model calls a child may make by default, whatever its parent's limit
/// ([`crate::controller::AgentControllerBuilder::subagent_max_steps`]).
pub const DEFAULT_MAX_STEPS: usize = 25;

/// How far subagents may go: how deep they nest, how many of one reply run at once, and how
/// many model calls a child may make. Set on the controller's builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SubagentLimits {
    /// How deep children nest: at depth `depth` a child is not offered `subagent`.
    pub(crate) depth: usize,
    /// How many `subagent` calls of one reply run at once.
    pub(crate) concurrency: usize,
    /// The model calls a child's run may make.
    pub(crate) max_steps: usize,
}

impl Default for SubagentLimits {
    fn default() -> Self {
        Self {
            depth: DEFAULT_DEPTH,
            concurrency: DEFAULT_CONCURRENCY,
            max_steps: DEFAULT_MAX_STEPS,
        }
    }
}

/// The subagent a pending decision or a decided record comes from: a child's call that waits
/// for the user reaches the parent's session as one of its pending decisions, with this beside
/// it (`subagent` in its JSON). `None` on the parent's own.
///
/// # Examples
/// ```
/// let origin = agent_controller::subagent::SubagentOrigin {
///     agent_type: "explore".to_owned(),
///     child_id: "s1.run_1.sub1_0".to_owned(),
///     tool_call_id: "call_1".to_owned(),
///     decision_id: "decision_1".to_owned(),
/// };
/// let json = serde_json::to_value(&origin).unwrap();
/// assert_eq!(json["agentType"], "explore");
/// assert_eq!(json["toolCallId"], "call_1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SubagentOrigin {
    /// The subagent's type (`agentType` of the `subagent` call).
    pub agent_type: String,
    /// The child run's id (as in `subagent_started`).
    pub child_id: String,
    /// The id of the parent's `subagent` call that started the child.
    pub tool_call_id: String,
    /// The decision's id in the child (the parent's is the decision's own `decisionId`).
    pub decision_id: String,
}
