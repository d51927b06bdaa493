//! Hooks: code (or a command, `command`) a host registers to decide a tool call or a plan
//! before a person is asked, the way Claude Agent SDK's `PreToolUse` hooks, the OpenAI Agents
//! SDK's `needsApproval` and LangChain's `interrupt_on` let a harness decide first.
//!
//! A [`Hook`] is registered on the controller ([`crate::controller::AgentControllerBuilder::hook`])
//! or written in the config (`[[hooks]]`, run as a command: `command::CommandHook`, feature `command-hooks`). It is
//! consulted, in the driver, for each tool call of a mode's reply that the mode offers and its
//! rules do not refuse, and for each submitted plan, before the call runs or waits, with what the
//! approver would see ([`HookRequest`]). It answers a [`HookVerdict`]:
//!
//! - [`HookVerdict::Allow`]: a tool call that would wait for approval (`requireApproval`, an
//!   `ask` rule, drift outside an approved plan's files) runs without asking; its audit record
//!   names the hook. On a plan, allow means *no objection*: the plan still waits for a person
//!   (a hook never approves a plan).
//! - [`HookVerdict::Deny`]: the call never runs (the model gets the reason); a plan is rejected
//!   with the reason as its feedback, and the model revises.
//! - [`HookVerdict::Ask`]: no say; the rules' path (a call that would run runs, one that
//!   would wait waits).
//!
//! A hook narrows, it never widens: a call the mode does not offer, whose arguments are refused,
//! or that a `deny` rule refuses never reaches it, and a call allowed by a hook is ruled again
//! just before it runs. Of several hooks that apply, `deny` beats `ask`, which beats `allow`
//! (as Claude's hooks combine). A hook that fails (an error, a panic, a command that answers
//! nonsense, any hook still deciding past its [`Hook::timeout`]: a `[[hooks]]` entry's
//! `timeout`, else 10s) counts as `ask`, and the failure is logged and in its `hook_decided`
//! event: a broken hook never lets anything through, and a hung one never holds the run.
//!
//! The verdict is an input to the rules (the core's ruling, `src/machine/ruling.rs`, takes it): the core holds
//! the one rule path, the hook only answers.
//!
//! # Examples
//! ```
//! use agent_controller::hook::{Hook, HookError, HookRequest, HookSubject, HookVerdict};
//!
//! /// Refuses `rm -rf` in shell commands; has no say on anything else.
//! struct NoRmRf;
//!
//! #[agent_controller::async_trait]
//! impl Hook for NoRmRf {
//!     fn name(&self) -> &str {
//!         "no-rm-rf"
//!     }
//!
//!     async fn decide(&self, request: &HookRequest) -> Result<HookVerdict, HookError> {
//!         Ok(match &request.subject {
//!             HookSubject::ToolCall { args, .. }
//!                 if args["command"].as_str().is_some_and(|c| c.contains("rm -rf")) =>
//!             {
//!                 HookVerdict::deny("rm -rf is not allowed here")
//!             }
//!             _ => HookVerdict::Ask,
//!         })
//!     }
//! }
//! # let _ = NoRmRf;
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(feature = "command-hooks")]
pub mod command;

/// What a hook is asked about: a tool call or a plan, as the approver would see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "on", rename_all = "camelCase")]
#[non_exhaustive]
pub enum HookSubject {
    /// A tool call the mode offers and its rules do not refuse.
    #[serde(rename_all = "camelCase")]
    ToolCall {
        /// The model's tool-call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The call's arguments, as the approver sees them.
        args: serde_json::Value,
        /// The SHA-256 of the arguments' canonical JSON (RFC 8785): what an approval pins.
        args_sha256: String,
    },
    /// A plan submitted with `submit_plan`.
    #[serde(rename_all = "camelCase")]
    Plan {
        /// The model's `submit_plan` tool-call id.
        tool_call_id: String,
        /// The plan's path as the model gave it.
        path: String,
        /// The plan's title (first level-1 heading), or `""`.
        title: String,
        /// The plan's body, as the approver sees it.
        plan: String,
        /// The plan's SHA-256, as an approval pins it.
        sha256: String,
    },
}

impl HookSubject {
    /// `"toolCall"` or `"plan"`: the kind, as `[[hooks]]` names it in `on`.
    pub fn on(&self) -> HookOn {
        match self {
            HookSubject::ToolCall { .. } => HookOn::ToolCall,
            HookSubject::Plan { .. } => HookOn::Plan,
        }
    }

    /// The tool: the call's, or `submit_plan` for a plan.
    pub fn tool_name(&self) -> &str {
        match self {
            HookSubject::ToolCall { tool_name, .. } => tool_name,
            HookSubject::Plan { .. } => crate::tool::SUBMIT_PLAN,
        }
    }

    /// The model's tool-call id.
    pub fn tool_call_id(&self) -> &str {
        match self {
            HookSubject::ToolCall { tool_call_id, .. } | HookSubject::Plan { tool_call_id, .. } => {
                tool_call_id
            }
        }
    }
}

/// Which kind of subject a hook is consulted on (`on` in `[[hooks]]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HookOn {
    /// Tool calls.
    ToolCall,
    /// Submitted plans.
    Plan,
}

/// What a hook is given: where the subject comes from, and the subject. A command hook gets it
/// as one JSON object on stdin, its fields flat (`on`, `sessionId`, `runId`, `modeId`,
/// `workspace`, then the subject's fields).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct HookRequest {
    /// The session.
    pub session_id: String,
    /// The run.
    pub run_id: String,
    /// The mode the call or the plan was made in.
    pub mode_id: String,
    /// The workspace the session works in.
    pub workspace: PathBuf,
    /// The tool call or the plan.
    #[serde(flatten)]
    pub subject: HookSubject,
}

impl HookRequest {
    /// A request about `subject`, made in session `session_id`, run `run_id`, mode `mode_id`,
    /// in `workspace`.
    pub fn new(
        session_id: impl Into<String>,
        run_id: impl Into<String>,
        mode_id: impl Into<String>,
        workspace: impl Into<PathBuf>,
        subject: HookSubject,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            run_id: run_id.into(),
            mode_id: mode_id.into(),
            workspace: workspace.into(),
            subject,
        }
    }
}

/// A hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// Let a tool call that would wait run without asking; on a plan, no objection (the plan
    /// still waits for a person).
    Allow,
    /// Refuse the call (or reject the plan): the model gets `reason`.
    Deny {
        /// Why, for the model (and the audit record).
        reason: String,
    },
    /// No say: the rules' path.
    Ask,
}

impl HookVerdict {
    /// [`HookVerdict::Deny`] with `reason`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::hook::HookVerdict;
    /// assert_eq!(HookVerdict::deny("no"), HookVerdict::Deny { reason: "no".into() });
    /// ```
    pub fn deny(reason: impl Into<String>) -> Self {
        HookVerdict::Deny {
            reason: reason.into(),
        }
    }

    /// The verdict's decision, without its reason.
    pub fn decision(&self) -> HookDecision {
        match self {
            HookVerdict::Allow => HookDecision::Allow,
            HookVerdict::Deny { .. } => HookDecision::Deny,
            HookVerdict::Ask => HookDecision::Ask,
        }
    }
}

/// A hook's decision, as records and events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::Display)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum HookDecision {
    /// Allowed (a tool call ran without asking; a plan: no objection).
    Allow,
    /// Denied (a tool call refused; a plan rejected).
    Deny,
    /// No say, or the hook failed.
    Ask,
}

/// Why a hook could not answer: counted as [`HookVerdict::Ask`], and logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    message: String,
}

impl HookError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A policy consulted before a tool call runs or waits, and before a plan waits (module docs:
/// [`crate::hook`]). Register one with [`crate::controller::AgentControllerBuilder::hook`].
///
/// Implement it with `#[agent_controller::async_trait]` on the `impl` block. `decide` runs on the
/// session's runtime, in a task of its own: a panic in it is caught and counts as
/// [`HookVerdict::Ask`], and so does an answer still awaited past [`Hook::timeout`] or when the
/// run is cancelled, which is then dropped.
#[async_trait::async_trait]
pub trait Hook: Send + Sync + 'static {
    /// The hook's name, as records (`decidedBy`: `hook NAME`) and events name it.
    fn name(&self) -> &str;

    /// Whether the hook has a say on `request` at all (default: yes). A hook that does not
    /// apply is not consulted and leaves no event.
    fn applies_to(&self, request: &HookRequest) -> bool {
        let _ = request;
        true
    }

    /// How long the session waits for [`Hook::decide`] (default [`DEFAULT_HOOK_TIMEOUT`], 10s;
    /// one longer than [`MAX_HOOK_TIMEOUT`] is cut to it). Past it the answer is dropped (its
    /// task aborted) and counts as [`HookVerdict::Ask`], saying it timed out. A `[[hooks]]`
    /// command's is its entry's `timeout`.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use agent_controller::hook::{Hook, HookError, HookRequest, HookVerdict};
    ///
    /// /// Asks a policy server, which may take half a minute.
    /// struct PolicyServer;
    ///
    /// #[agent_controller::async_trait]
    /// impl Hook for PolicyServer {
    ///     fn name(&self) -> &str {
    ///         "policy"
    ///     }
    ///
    ///     fn timeout(&self) -> Duration {
    ///         Duration::from_secs(30)
    ///     }
    ///
    ///     async fn decide(&self, _: &HookRequest) -> Result<HookVerdict, HookError> {
    ///         Ok(HookVerdict::Ask)
    ///     }
    /// }
    /// assert_eq!(PolicyServer.timeout(), Duration::from_secs(30));
    /// ```
    fn timeout(&self) -> std::time::Duration {
        DEFAULT_HOOK_TIMEOUT
    }

    /// The verdict on `request`.
    ///
    /// # Errors
    /// Any [`HookError`]: it counts as [`HookVerdict::Ask`] (the rules' path), and is logged.
    async fn decide(&self, request: &HookRequest) -> Result<HookVerdict, HookError>;
}

/// What a hook (or several, combined) answered on one subject: kept in the decision's audit
/// record ([`crate::event::DecidedRecord::hook`]) and sent as `hook_decided`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HookRecord {
    /// The hook's name.
    pub hook: String,
    /// What it decided (`ask` when it failed).
    pub decision: HookDecision,
    /// Its reason, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why it could not answer, when it failed (then `decision` is `ask`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HookRecord {
    /// The record of `hook`'s answer `answer`: its verdict, or the error that counts as ask.
    pub(crate) fn of(hook: &str, answer: Result<HookVerdict, HookError>) -> Self {
        let (decision, reason, error) = match answer {
            Ok(HookVerdict::Deny { reason }) => (HookDecision::Deny, Some(reason), None),
            Ok(verdict) => (verdict.decision(), None, None),
            Err(e) => (HookDecision::Ask, None, Some(e.message)),
        };
        Self {
            hook: hook.to_owned(),
            decision,
            reason,
            error,
        }
    }
}

/// The verdict of several hooks' `records` on one subject: the first `deny`; else the first
/// `ask` (a failure among them); else the first `allow` (every hook that applies allowed);
/// `None` when no hook applied.
pub(crate) fn combine(records: Vec<HookRecord>) -> Option<HookRecord> {
    [HookDecision::Deny, HookDecision::Ask, HookDecision::Allow]
        .into_iter()
        .find_map(|d| records.iter().find(|r| r.decision == d).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(hook: &str, decision: HookDecision) -> HookRecord {
        HookRecord {
            hook: hook.to_owned(),
            decision,
            reason: None,
            error: None,
        }
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        use HookDecision::*;
        let got = |ds: &[HookDecision]| {
            combine(
                ds.iter()
                    .enumerate()
                    .map(|(i, d)| record(&i.to_string(), *d))
                    .collect(),
            )
            .map(|r| (r.hook, r.decision))
        };
        assert_eq!(got(&[]), None);
        assert_eq!(got(&[Allow, Allow]), Some(("0".into(), Allow)));
        assert_eq!(got(&[Allow, Ask]), Some(("1".into(), Ask)));
        assert_eq!(got(&[Allow, Ask, Deny]), Some(("2".into(), Deny)));
    }

    #[test]
    fn an_error_counts_as_ask_and_keeps_its_message() {
        let r = HookRecord::of("h", Err(HookError::new("boom")));
        assert_eq!(r.decision, HookDecision::Ask);
        assert_eq!(r.error.as_deref(), Some("boom"));
        let r = HookRecord::of("h", Ok(HookVerdict::deny("no")));
        assert_eq!(
            (r.decision, r.reason.as_deref()),
            (HookDecision::Deny, Some("no"))
        );
    }

    #[test]
    fn a_request_is_one_flat_object() {
        let request = HookRequest::new(
            "s1",
            "run_1",
            "build",
            "/w",
            HookSubject::ToolCall {
                tool_call_id: "c1".into(),
                tool_name: "write_file".into(),
                args: serde_json::json!({"path": "a"}),
                args_sha256: "abc".into(),
            },
        );
        let json = serde_json::to_value(&request).expect("serializes");
        assert_eq!(json["on"], "toolCall");
        assert_eq!(json["sessionId"], "s1");
        assert_eq!(json["toolName"], "write_file");
        assert_eq!(json["argsSha256"], "abc");
        assert_eq!(json["workspace"], "/w");
    }
}

/// The default `timeout` of a `[[hooks]]` command, of a hook a host registers
/// ([`Hook::timeout`]) and of a `command` review (a `model` review's is
/// [`crate::review::DEFAULT_MODEL_REVIEW_TIMEOUT`]): 10 seconds.
pub const DEFAULT_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The longest `timeout` a hook (a `[[hooks]]` command, or a host's [`Hook::timeout`]) or a
/// review may have: 10 minutes (a hook holds the run).
pub const MAX_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// One `[[hooks]]` entry of a config, validated: the command to run, what it is consulted on,
/// and its limits (`command::CommandHook` runs it, feature `command-hooks`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    pub(crate) command: Vec<String>,
    pub(crate) on: Vec<HookOn>,
    pub(crate) tools: Option<Vec<String>>,
    pub(crate) modes: Option<Vec<String>>,
    pub(crate) timeout: std::time::Duration,
}

impl HookConfig {
    /// The program and its arguments (`command`); never empty.
    pub fn command(&self) -> &[String] {
        &self.command
    }

    /// What the hook is consulted on (`on`).
    pub fn on(&self) -> &[HookOn] {
        &self.on
    }

    /// How long the command may take before it is killed and counts as ask (`timeout`).
    pub fn timeout(&self) -> std::time::Duration {
        self.timeout
    }

    /// The hook's name in records and events: its command, as written.
    pub fn name(&self) -> String {
        self.command.join(" ")
    }

    /// Whether the entry has a say on `request`: its `on`, its `tools` (the call's tool, or
    /// `submit_plan` for a plan) and its `modes` filters.
    ///
    /// # Examples
    /// ```
    /// # use agent_controller::hook::{HookRequest, HookSubject};
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\n[[hooks]]\non = \"toolCall\"\ntools = [\"write_file\"]\ncommand = [\"true\"]\n",
    ///     "modes.toml",
    /// )?;
    /// let hook = &graph.hooks()[0];
    /// let call = |tool: &str| HookRequest::new("s", "run_1", "build", ".", HookSubject::ToolCall {
    ///     tool_call_id: "c".into(), tool_name: tool.into(), args: serde_json::json!({}), args_sha256: String::new(),
    /// });
    /// assert!(hook.applies_to(&call("write_file")));
    /// assert!(!hook.applies_to(&call("read_file")));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn applies_to(&self, request: &HookRequest) -> bool {
        self.on.contains(&request.subject.on())
            && self
                .tools
                .as_ref()
                .is_none_or(|t| t.iter().any(|t| t == request.subject.tool_name()))
            && self
                .modes
                .as_ref()
                .is_none_or(|m| m.contains(&request.mode_id))
    }

    /// The paths in the workspace the command may run (its program and each argument that is
    /// a relative path, existing or not: a file the model could create there must not become
    /// the hook), joined to `workspace`: protected from the model's writes like the config, so
    /// a tool call cannot rewrite the hook to answer `allow`.
    ///
    /// # Examples
    /// ```
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"build\"\n[[hooks]]\non = \"plan\"\ncommand = [\"python3\", \"-u\", \"hooks/guard.py\"]\n",
    ///     "modes.toml",
    /// )?;
    /// let paths = graph.hooks()[0].script_paths(std::path::Path::new("/w"));
    /// assert!(paths.contains(&std::path::PathBuf::from("/w/hooks/guard.py")));
    /// assert!(!paths.iter().any(|p| p.ends_with("-u")));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn script_paths(&self, workspace: &std::path::Path) -> Vec<PathBuf> {
        self.command
            .iter()
            .filter(|part| !part.starts_with('-') && !part.is_empty())
            .filter(|part| std::path::Path::new(part).is_relative())
            .map(|part| workspace.join(part))
            .collect()
    }
}
