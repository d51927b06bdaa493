//! A subagent type as the config describes it (`[[subagents]]`): what the parent's model
//! reads to choose it, what the child is told, and what it may use, within what its parent's
//! mode allows (the guide's page `subagents`).

use std::sync::Arc;

use super::RequireApproval;
use crate::rules::Rules;

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

    /// The type's own rules, on top of the parent mode's: `deny` and `ask` only (the config
    /// refuses a type's `allow` rule, which would loosen what the parent's mode asks for).
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
