//! Whose lists a check reads: a mode's or a subagent type's. Both have `availableTools`,
//! `requireApproval` and `rules`, checked by the same functions; they differ in how an error
//! names them, and in that a subagent type may only narrow what its parent's mode allows.

use std::fmt;

/// The mode or subagent type whose lists are being checked, by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner<'a> {
    /// A `[[modes]]` entry.
    Mode(&'a str),
    /// A `[[subagents]]` entry: its child runs within its parent's mode, so its lists only
    /// narrow that mode (no `allow` rule).
    SubagentType(&'a str),
}

impl Owner<'_> {
    /// Whether the owner's rules may `allow` a call: a mode's may; a subagent type's may not, as
    /// it would widen what the parent's mode allows.
    pub(super) fn may_allow(self) -> bool {
        matches!(self, Owner::Mode(_))
    }
}

impl fmt::Display for Owner<'_> {
    /// As error messages name it: ``mode `build` `` or ``subagent type `explore` ``.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Mode(id) => write!(f, "mode `{id}`"),
            Owner::SubagentType(id) => write!(f, "subagent type `{id}`"),
        }
    }
}
