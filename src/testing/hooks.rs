//! Hooks' verdicts as an input the kit generates ([`HookScript`]): for each case, a verdict
//! of the kit's own hook ([`KIT_HOOK`]) on each plain tool and on every submitted plan. The
//! harness registers the hook on the controller it checks ([`super::Setup::observe`]), and
//! the hook answers what the case's script says; the reference model predicts, in its own
//! terms, what each verdict does:
//!
//! - a call the mode does not offer, or that a `deny` rule refuses, stays refused whatever
//!   the hook says (a hook narrows, it never widens);
//! - `deny`: the call never runs, its result names the hook ([`super::ResultKind::HookDenied`]);
//!   a plan is rejected with the hook's reason as the feedback and the model revises;
//! - `allow`: a call that would wait runs without asking, its record names the hook
//!   ([`super::Trace::ToolRan`]'s `hooked`); a plan still waits for a person;
//! - `ask`, and a hook that fails (`error`): as without hooks.
//!
//! The kit scripts the plain tools only, and the top session's calls only: `submit_plan`, the
//! task tools, `subagent` and the tools that suspend (`ask_user`, [`super::CONFIRM_TOOL`]) are
//! not asked about (the hook has no say on them), nor a subagent's calls.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use super::ask::Ask;
use super::facts::ConfigFacts;
use crate::hook::{Hook, HookError, HookRequest, HookSubject, HookVerdict};
use crate::tool::SUBMIT_PLAN;

/// The name of the kit's hook: what a record's `decidedBy` names (`hook kit-hook`).
pub const KIT_HOOK: &str = "kit-hook";

/// The reason the kit's hook gives when it denies.
pub const KIT_HOOK_REASON: &str = "the kit's hook says no";

/// One verdict of the kit's hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookAnswer {
    /// [`HookVerdict::Allow`].
    Allow,
    /// [`HookVerdict::Deny`] with [`KIT_HOOK_REASON`].
    Deny,
    /// [`HookVerdict::Ask`]: no say.
    Ask,
    /// The hook fails ([`HookError`]): counted as ask.
    Error,
}

impl HookAnswer {
    /// Whether it decides as `allow` (a failure counts as ask).
    pub fn allows(self) -> bool {
        self == HookAnswer::Allow
    }

    /// Whether it decides as `deny`.
    pub fn denies(self) -> bool {
        self == HookAnswer::Deny
    }
}

/// What the kit's hook answers in one case: a verdict per plain tool, and one on every
/// submitted plan; `None` where it has no say (it is not asked: no `hook_decided`).
///
/// # Examples
/// ```
/// use agent_controller::testing::{HookAnswer, HookScript};
/// let script = HookScript::default()
///     .tool("read_file", HookAnswer::Allow)
///     .plan(HookAnswer::Deny);
/// assert_eq!(script.on_tool("read_file"), Some(HookAnswer::Allow));
/// assert_eq!(script.on_tool("write_file"), None);
/// assert_eq!(script.on_plan(), Some(HookAnswer::Deny));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct HookScript {
    tools: BTreeMap<String, HookAnswer>,
    plan: Option<HookAnswer>,
}

impl HookScript {
    /// The same script, answering `answer` on each call of `tool` (a plain tool: see
    /// [`is_scripted_tool`]; another is never asked about).
    pub fn tool(mut self, tool: impl Into<String>, answer: HookAnswer) -> Self {
        self.tools.insert(tool.into(), answer);
        self
    }

    /// The same script, answering `answer` on each submitted plan.
    pub fn plan(mut self, answer: HookAnswer) -> Self {
        self.plan = Some(answer);
        self
    }

    /// The verdict on a call of `tool`, when the hook is asked about it.
    pub fn on_tool(&self, tool: &str) -> Option<HookAnswer> {
        self.tools
            .get(tool)
            .copied()
            .filter(|_| is_scripted_tool(tool))
    }

    /// The verdict on a submitted plan, when the hook is asked about plans.
    pub fn on_plan(&self) -> Option<HookAnswer> {
        self.plan
    }

    /// Whether the hook has a say on anything.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.plan.is_none()
    }
}

/// Whether the kit's hook is asked about calls of `tool`: a plain tool, not `submit_plan`, a
/// task tool, `subagent` or a tool that suspends.
pub fn is_scripted_tool(tool: &str) -> bool {
    tool != SUBMIT_PLAN
        && tool != crate::subagent::SUBAGENT
        && !crate::tool::tasks::is_task_tool(tool)
        && Ask::of_tool(tool).is_none()
}

/// A verdict, mostly `ask` (no say) so the paths without hooks stay common.
fn answer() -> impl Strategy<Value = Option<HookAnswer>> {
    prop_oneof![
        4 => Just(None),
        2 => Just(Some(HookAnswer::Ask)),
        2 => Just(Some(HookAnswer::Allow)),
        2 => Just(Some(HookAnswer::Deny)),
        1 => Just(Some(HookAnswer::Error)),
    ]
}

/// The scripts the random test generates over `facts`: a verdict (or none) per plain tool
/// of the config, and one on plans.
pub(crate) fn scripts(facts: &ConfigFacts) -> BoxedStrategy<HookScript> {
    let tools: Vec<String> = facts
        .tool_names()
        .into_iter()
        .filter(|t| is_scripted_tool(t))
        .collect();
    let n = tools.len();
    (prop::collection::vec(answer(), n), answer())
        .prop_map(move |(answers, plan)| HookScript {
            tools: tools
                .iter()
                .zip(answers)
                .filter_map(|(t, a)| Some((t.clone(), a?)))
                .collect(),
            plan,
        })
        .boxed()
}

/// The kit's hook: answers what the current case's script says (the harness sets it when it
/// starts a session).
#[derive(Debug, Clone, Default)]
pub(crate) struct ScriptedHook {
    pub(crate) script: Arc<Mutex<HookScript>>,
}

impl ScriptedHook {
    fn answer_on(&self, request: &HookRequest) -> Option<HookAnswer> {
        // A subagent's session (`PARENT.RUN.subN_M`) is not scripted.
        if request.session_id.contains(".sub") {
            return None;
        }
        let script = self.script.lock().unwrap_or_else(|e| e.into_inner());
        match &request.subject {
            HookSubject::Plan { .. } => script.on_plan(),
            subject => script.on_tool(subject.tool_name()),
        }
    }
}

#[async_trait::async_trait]
impl Hook for ScriptedHook {
    fn name(&self) -> &str {
        KIT_HOOK
    }

    fn applies_to(&self, request: &HookRequest) -> bool {
        self.answer_on(request).is_some()
    }

    async fn decide(&self, request: &HookRequest) -> Result<HookVerdict, HookError> {
        match self.answer_on(request) {
            Some(HookAnswer::Allow) => Ok(HookVerdict::Allow),
            Some(HookAnswer::Deny) => Ok(HookVerdict::deny(KIT_HOOK_REASON)),
            Some(HookAnswer::Error) => Err(HookError::new("the kit's hook fails, as scripted")),
            Some(HookAnswer::Ask) | None => Ok(HookVerdict::Ask),
        }
    }
}
