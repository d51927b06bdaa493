//! Subagent types: the `[[subagents]]` of a config, which a mode's `subagent` tool starts as
//! child runs (the guide's page `subagents`).
//!
//! A child never does more than its parent: its tools are those its type lists *and* the
//! parent's current mode offers, the parent mode's `requireApproval` and rules apply in it (with
//! the type's own on top, which can only add waits and refusals), a child started from a
//! planning mode is read-only, and no child gets the task tools, `submit_plan`, or `subagent`
//! beyond the depth limit. The session runs a child ([`crate::session`]); this module holds the
//! type as the config describes it, and the tool's input limits.
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

use std::sync::Arc;

use crate::mode::RequireApproval;
use crate::rules::Rules;

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

/// One `[[subagents]]` entry, validated: what the parent's model reads to choose it, what the
/// child is told, and what it may use (within what its parent's mode allows).
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentType {
    pub(crate) id: Arc<str>,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) instructions: String,
    pub(crate) available_tools: Option<Vec<Arc<str>>>,
    pub(crate) require_approval: RequireApproval,
    pub(crate) rules: Rules,
    pub(crate) default_model_id: Option<String>,
}

impl SubagentType {
    /// The type's id (`agentType` in a `subagent` call).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The display name (the id when the config sets none).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the parent's model reads to choose this type.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The child's instructions (its system prompt).
    pub fn instructions(&self) -> &str {
        &self.instructions
    }

    /// The tools the type lists (`None`: every tool the parent's mode offers).
    pub fn available_tools(&self) -> Option<&[Arc<str>]> {
        self.available_tools.as_deref()
    }

    /// The type's own `requireApproval`, on top of the parent mode's.
    pub fn require_approval(&self) -> &RequireApproval {
        &self.require_approval
    }

    /// The type's own rules, on top of the parent mode's (its `deny` and `ask` rules apply; an
    /// `allow` rule cannot loosen what the parent's mode asks for, so it is not used).
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The model the child runs with (`defaultModelId`), else the parent's.
    pub fn default_model_id(&self) -> Option<&str> {
        self.default_model_id.as_deref()
    }

    /// Whether the type lets its child call `tool` (before the parent's mode is asked).
    pub(crate) fn lists(&self, tool: &str) -> bool {
        match &self.available_tools {
            None => true,
            Some(list) => list
                .iter()
                .any(|t| &**t == tool || crate::tool::mcp::wildcard_covers(t, tool)),
        }
    }
}

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

/// How a child run ended, as `subagent_ended` reports it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::AsRefStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum SubagentOutcome {
    /// The child's model gave its final text.
    Completed,
    /// The child's run failed (a model error, its step limit).
    Failed,
    /// The parent's run was cancelled while the child ran.
    Aborted,
    /// The child stopped at a call that needs the user (an approval or an answer), which a
    /// child cannot get yet.
    Refused,
}
