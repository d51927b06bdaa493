//! Quorum and the audit trail's channel: a mode's `approvers = N` needs N approvals by distinct
//! identities before a plan or a waiting tool call is approved ([`Approval`], kept on the pending
//! decision's terms, [`crate::event::WaitTerms::approvals`]), and every decision records the
//! channel it came through ([`Via`]: the terminal, `decide`, ACP, HTTP, a hook, a reviewer, a
//! deadline). The rule itself lives in the state machine (`src/machine/quorum.rs`), one path for
//! every host.
//!
//! An identity is a name the host gives ([`crate::Decision::decided_by`]): the CLI's `decide
//! --as NAME` (self-declared: any user of the store can type any name), the terminal's user
//! name, the token's name in `serve` (authenticated), the client's name over ACP.

use serde::{Deserialize, Serialize};

/// Which channel a decision came through, as a host sets it ([`crate::Decision::via`]) or the
/// controller does itself (a hook, a deadline). Kept in the decision's audit record
/// ([`crate::event::DecidedRecord::via`]) and in each quorum approval ([`Approval::via`]).
///
/// # Examples
/// ```
/// use agent_controller::quorum::Via;
/// assert_eq!(serde_json::to_value(Via::Decide)?, serde_json::json!("decide"));
/// assert_eq!(Via::Http.to_string(), "http");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::Display)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum Via {
    /// At a terminal prompt (`run`, `continue`, the terminal host).
    Terminal,
    /// By the CLI's `decide` command.
    Decide,
    /// Over the Agent Client Protocol (an editor's permission request).
    Acp,
    /// Over `serve`'s HTTP API or its page.
    Http,
    /// A hook answered (in code or by command, [`crate::hook`]).
    Hook,
    /// A reviewer answered.
    Reviewer,
    /// The deadline passed (`approvalTimeout`).
    Timeout,
}

/// One approval given toward a quorum (`approvers = N`) while the decision still waits: who,
/// when (the controller's clock, RFC 3339), through which channel, and the sha256 of what they
/// approved (the plan's `sha256`, a tool call's `argsSha256`).
///
/// # Examples
/// ```
/// use agent_controller::quorum::{Approval, Via};
/// let approval: Approval = serde_json::from_value(serde_json::json!({
///     "by": "alice", "at": "2026-12-07T02:00:00Z", "via": "decide", "sha256": "ab12"
/// }))?;
/// assert_eq!(approval.by, "alice");
/// assert_eq!(approval.via, Some(Via::Decide));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// The identity that approved (as the host named it, trimmed).
    pub by: String,
    /// When, as RFC 3339 in UTC with seconds.
    pub at: String,
    /// Through which channel; `None` when the host did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    /// The sha256 of what was approved (the plan's `sha256`, a tool call's `argsSha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// Why a decision under a quorum was refused (inside [`crate::SessionError::Quorum`]); nothing
/// changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuorumError {
    /// An approval without an identity: under a quorum each approval must name who gives it
    /// ([`crate::Decision::decided_by`]).
    #[error(
        "this decision needs {needed} approvals by distinct people: say who approves (`decidedBy`, `decide --as NAME`)"
    )]
    NoIdentity {
        /// How many approvals are needed.
        needed: u8,
    },
    /// A second approval by the same identity.
    #[error(
        "`{by}` has already approved this decision: it needs {needed} approvals by distinct people ({have} so far)"
    )]
    SameIdentity {
        /// The identity that approved twice.
        by: String,
        /// How many approvals are needed.
        needed: u8,
        /// How many were given so far.
        have: usize,
    },
    /// An always-allow (an allowance) asked for under a quorum: it is not offered there.
    #[error(
        "always-allow is not offered under a quorum (approvers = {needed}): approve this call alone"
    )]
    AllowanceUnderQuorum {
        /// How many approvals are needed.
        needed: u8,
    },
    /// An edited plan approved under a quorum: the others approved the text shown, so an edit
    /// is refused (reject with feedback for a revision instead).
    #[error(
        "an edited plan cannot be approved under a quorum (approvers = {needed}): the approvals are of the plan shown; reject with feedback to have it revised"
    )]
    EditUnderQuorum {
        /// How many approvals are needed.
        needed: u8,
    },
}

/// The identity of an approval as the quorum counts it: the name trimmed, `None` when blank.
pub(crate) fn identity(decided_by: Option<&str>) -> Option<&str> {
    decided_by.map(str::trim).filter(|s| !s.is_empty())
}
