//! The rules of deciding: the one place a decision is checked against what it decides
//! ([`check`], [`check_pin`]) and where the ids a host gives are resolved to it ([`named`],
//! [`with_id`]). Pure: no I/O, no clock.

use super::decision::{Decision, DecisionAction};
use super::error::{SessionError, expired_error};
use super::pending::PendingDecision;
use crate::comment::{self, QuotedComment};
use crate::event::DecidedRecord;
use crate::mode::ModeId;
use crate::plan::{self, PlanSubmission};

/// What a decision checked by [`check`] resolves to, so that nothing is
/// validated twice: the mode an approved plan hands over to and the user's edit, captured.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The plan's hand-over target an approval names (the first target when it names none).
    pub(crate) target: Option<ModeId>,
    /// The edited plan, captured under the plan limits.
    pub(crate) edited: Option<PlanSubmission>,
    /// The comments of a rejection, resolved to the lines they quote.
    pub(crate) comments: Vec<QuotedComment>,
    /// The steps an approval of some of the plan's steps approves, checked against the plan
    /// shown ([`Decision::steps`]).
    pub(crate) steps: Option<super::steps::StepChoice>,
}

/// Checks that `decision` may be applied to `pending`, and resolves what it names; changes
/// nothing. The rules, in the order they apply:
///
/// - A plan takes no `alwaysAllow`, `scope` or `allow`; a tool call no `targetModeId`, no
///   edited plan, no `alwaysAllow` with a rejection, no `scope` or `allow` without
///   `alwaysAllow`, no `alwaysAllow` at a call an `ask` rule made wait
///   ([`crate::event::ToolCallPayload::allowance_refusal`]), and no `allow` pattern that does
///   not compile ([`SessionError::MalformedDecision`]).
/// - A pinned `sha256` must be what was shown ([`check_pin`]).
/// - A plan: a `targetModeId` or an edit goes with an approval only
///   ([`SessionError::MalformedDecision`]); the target must be one the plan lists
///   ([`SessionError::TargetNotAllowed`]); the edit obeys the plan limits
///   ([`SessionError::EditedPlan`]: validated here, once); `steps` go with an approval of the
///   plan shown, not with an edit, and name its steps ([`SessionError::PlanSteps`]); an
///   approval must still be possible
///   under the current config ([`SessionError::ConfigChanged`]).
///
/// # Errors
/// As above.
pub(crate) fn check(
    pending: &PendingDecision,
    decision: &Decision,
) -> Result<Checked, SessionError> {
    let malformed = |what: &str| Err(SessionError::MalformedDecision(what.to_owned()));
    let rejected = decision.action == DecisionAction::Rejected;
    if let PendingDecision::Suspension(suspended) = pending {
        check_suspension(suspended, decision)?;
        if let Some(given) = &decision.sha256 {
            check_pin(pending, given)?;
        }
        if let Some(answer) = decision.answer.as_deref()
            && let Some(reason) = suspended.payload.answer_mismatch(answer)
        {
            return Err(SessionError::InvalidAnswer {
                decision_id: suspended.decision_id().to_owned(),
                reason,
            });
        }
        return Ok(Checked {
            target: None,
            edited: None,
            comments: Vec::new(),
            steps: None,
        });
    }
    if decision.action == DecisionAction::Answered || decision.answer.is_some() {
        let what = match pending {
            PendingDecision::Plan(_) => "a plan",
            _ => "a tool call waiting for approval",
        };
        return Err(SessionError::MalformedDecision(format!(
            "{} is {what}, not a question: an answer (`\"action\": \"answered\"`, `answer`) goes with a call its tool suspended; approve or reject it",
            pending.decision_id()
        )));
    }
    match pending {
        PendingDecision::Plan(_) if decision.always_allow => {
            return malformed(
                "a plan decision takes no `alwaysAllow`: it goes with the approval of a tool call",
            );
        }
        PendingDecision::ToolCall(_) if decision.to.is_some() => {
            return malformed(
                "a tool-call decision names no target mode: `targetModeId` goes with a plan",
            );
        }
        PendingDecision::ToolCall(_) if decision.plan.is_some() => {
            return malformed(
                "a tool-call decision carries no edited plan: `plan` goes with a plan",
            );
        }
        PendingDecision::ToolCall(_) if decision.always_allow && rejected => {
            return malformed(
                "a rejection cannot always allow the tool: `alwaysAllow` goes with an approval",
            );
        }
        PendingDecision::ToolCall(_) if !decision.comments.is_empty() => {
            return malformed(
                "a tool-call decision carries no plan comments: `comments` go with a plan",
            );
        }
        PendingDecision::ToolCall(_) if decision.steps.is_some() => {
            return malformed(
                "a tool-call decision names no steps: `steps` go with the approval of a plan",
            );
        }
        PendingDecision::ToolCall(_) if decision.model.is_some() => {
            return malformed(
                "a tool-call decision names no model: `model` goes with the approval of a plan",
            );
        }
        PendingDecision::Plan(_) if decision.scope.is_some() || decision.allow.is_some() => {
            return malformed(
                "a plan decision takes no `scope` or `allow`: they go with the `alwaysAllow` of a tool call",
            );
        }
        PendingDecision::ToolCall(_)
            if !decision.always_allow && (decision.scope.is_some() || decision.allow.is_some()) =>
        {
            return malformed(
                "`scope` and `allow` describe an allowance: they go with `\"alwaysAllow\": true`",
            );
        }
        PendingDecision::ToolCall(_)
            if decision.scope == Some(crate::allowance::AllowanceScope::Plan) =>
        {
            return malformed(
                "scope `plan` is given by approving a plan that declares its files, not by an \
                 always allow: use `mode`, `session` or `workspace`",
            );
        }
        PendingDecision::ToolCall(call) if decision.always_allow => {
            if let Some(refusal) = call.payload.allowance_refusal() {
                return Err(SessionError::MalformedDecision(refusal));
            }
            if let Some(Err(why)) = decision.allow.as_ref().map(|p| p.matcher()) {
                return Err(SessionError::MalformedDecision(format!(
                    "the allowance's pattern `allow` is not valid: {why}"
                )));
            }
        }
        _ => {}
    }
    if let Some(given) = &decision.sha256 {
        check_pin(pending, given)?;
    }
    let PendingDecision::Plan(plan) = pending else {
        return Ok(Checked {
            target: None,
            edited: None,
            comments: Vec::new(),
            steps: None,
        });
    };
    if rejected && decision.to.is_some() {
        return malformed("a rejection names no target mode: `targetModeId` goes with an approval");
    }
    if rejected && decision.plan.is_some() {
        return malformed("a rejection carries no edited plan: `plan` goes with an approval");
    }
    if rejected && decision.model.is_some() {
        return malformed("a rejection names no model: `model` goes with an approval");
    }
    if rejected && decision.steps.is_some() {
        return malformed(
            "a rejection names no steps: `steps` go with an approval (of only those steps)",
        );
    }
    if decision.steps.is_some() && decision.plan.is_some() {
        return malformed(
            "an approval of some steps approves steps of the plan shown: edit the plan (`plan`) or name its `steps`, not both",
        );
    }
    if !rejected && !decision.comments.is_empty() {
        return malformed(
            "an approval carries no plan comments: `comments` go with a rejection (the model revises)",
        );
    }
    let comments = comment::quote_all(&plan.payload.submission, &decision.comments)
        .map_err(SessionError::PlanComment)?;
    let Some(target) = plan.chosen_target(decision.to.as_deref()) else {
        return Err(SessionError::TargetNotAllowed {
            given: decision.to.clone().unwrap_or_default(),
            allowed: plan
                .payload
                .target_mode_ids
                .iter()
                .map(ToString::to_string)
                .collect(),
        });
    };
    let edited = match &decision.plan {
        Some(text) => Some(
            plan::capture_plan(&plan.payload.submission.path, text.as_bytes())
                .map_err(SessionError::EditedPlan)?,
        ),
        None => None,
    };
    let steps = match &decision.steps {
        Some(chosen) => Some(
            super::steps::choose(&plan.payload.submission.plan, chosen)
                .map_err(SessionError::PlanSteps)?,
        ),
        None => None,
    };
    if let (false, Some(reason)) = (rejected, &plan.stale) {
        return Err(SessionError::ConfigChanged(reason.clone()));
    }
    Ok(Checked {
        target: Some(target),
        edited,
        comments,
        steps,
    })
}

/// Checks a decision on a call its tool suspended: it is answered (with an `answer`) or
/// declined (a rejection, with feedback at most); none of the parts of a plan's or a tool
/// call's decision go with it.
fn check_suspension(
    suspended: &super::pending::PendingSuspension,
    decision: &Decision,
) -> Result<(), SessionError> {
    let malformed = |what: String| Err(SessionError::MalformedDecision(what));
    let name = suspended.tool_name();
    match (decision.action, &decision.answer) {
        (DecisionAction::Answered, Some(_)) | (DecisionAction::Rejected, None) => {}
        (DecisionAction::Answered, None) => {
            return malformed(format!(
                "an answer to `{name}` needs its `answer`: `{{\"action\": \"answered\", \"answer\": ...}}`"
            ));
        }
        (_, Some(_)) => {
            return malformed(format!(
                "`answer` goes with `\"action\": \"answered\"`, not with `{}`",
                decision.action
            ));
        }
        _ => {
            return malformed(format!(
                "`{name}` waits for an answer, not an approval: answer it (`\"action\": \"answered\"`), or reject it to decline"
            ));
        }
    }
    if decision.to.is_some()
        || decision.plan.is_some()
        || decision.model.is_some()
        || !decision.comments.is_empty()
        || decision.steps.is_some()
    {
        return malformed(format!(
            "a decision on `{name}`'s suspension names no target mode, edited plan, model, comments or steps: they go with a plan"
        ));
    }
    if decision.always_allow || decision.scope.is_some() || decision.allow.is_some() {
        return malformed(format!(
            "a decision on `{name}`'s suspension gives no allowance: `alwaysAllow`, `scope` and `allow` go with a tool call"
        ));
    }
    Ok(())
}

/// Checks a `sha256` pin (what the user saw) against [`PendingDecision::sha256`], ignoring ASCII
/// case: the one place a pin is compared.
///
/// # Errors
/// [`SessionError::Sha256Mismatch`] for a plan, [`SessionError::ArgsSha256Mismatch`] for a tool
/// call.
pub(crate) fn check_pin(pending: &PendingDecision, given: &str) -> Result<(), SessionError> {
    if given.eq_ignore_ascii_case(pending.sha256()) {
        return Ok(());
    }
    let (expected, given) = (pending.sha256().to_owned(), given.to_owned());
    Err(match pending {
        PendingDecision::ToolCall(c) => SessionError::ArgsSha256Mismatch {
            decision_id: c.payload.decision_id.clone(),
            expected,
            given,
        },
        PendingDecision::Plan(_) => SessionError::Sha256Mismatch { expected, given },
        PendingDecision::Suspension(s) => SessionError::PayloadSha256Mismatch {
            decision_id: s.payload.decision_id.clone(),
            expected,
            given,
        },
    })
}

/// The position in `pending` of what `run_id` / `tool_call_id` name: the first one not decided
/// yet where a model reused the ids (so the current plan can always be decided). `history` is
/// the session's settled decisions, `runs` how many runs it started.
///
/// # Errors
/// [`SessionError::AlreadyDecided`] (or [`SessionError::Expired`]) when what they name was
/// decided, [`SessionError::UnknownToolCall`] when the run waits on something else,
/// [`SessionError::NotSuspended`] for a run that waits on nothing, [`SessionError::UnknownRun`]
/// for a run never started.
pub(crate) fn named(
    pending: &[PendingDecision],
    history: &[DecidedRecord],
    runs: u64,
    run_id: &str,
    tool_call_id: &str,
) -> Result<usize, SessionError> {
    let names = |p: &PendingDecision| p.run_id() == run_id && p.tool_call_id() == tool_call_id;
    if let Some(index) = pending.iter().position(|p| names(p) && p.is_waiting()) {
        return Ok(index);
    }
    if pending.iter().any(names) {
        return Err(SessionError::AlreadyDecided(tool_call_id.to_owned()));
    }
    let decided = history
        .iter()
        .rfind(|d| d.run_id == run_id && d.tool_call_id == tool_call_id);
    let started = run_id
        .strip_prefix("run_")
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| n >= 1 && n <= runs);
    Err(match decided {
        Some(decided) => expired_error(decided)
            .unwrap_or_else(|| SessionError::AlreadyDecided(tool_call_id.to_owned())),
        None if pending.iter().any(|p| p.run_id() == run_id) => SessionError::UnknownToolCall {
            run_id: run_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        },
        None if started => SessionError::NotSuspended(run_id.to_owned()),
        None => SessionError::UnknownRun(run_id.to_owned()),
    })
}

/// The position in `pending` of the decision with id `decision_id`.
///
/// # Errors
/// [`SessionError::AlreadyDecided`] (or [`SessionError::Expired`]) for a decision settled
/// before (in `history`) or decided while others wait, [`SessionError::UnknownDecision`] for
/// one the session never gave out.
pub(crate) fn with_id(
    pending: &[PendingDecision],
    history: &[DecidedRecord],
    decision_id: &str,
) -> Result<usize, SessionError> {
    if let Some(index) = pending.iter().position(|p| p.decision_id() == decision_id) {
        if !pending[index].is_waiting() {
            return Err(SessionError::AlreadyDecided(decision_id.to_owned()));
        }
        return Ok(index);
    }
    match history.iter().find(|d| d.decision_id == decision_id) {
        Some(decided) => Err(expired_error(decided)
            .unwrap_or_else(|| SessionError::AlreadyDecided(decision_id.to_owned()))),
        None => Err(SessionError::UnknownDecision(decision_id.to_owned())),
    }
}

/// `decision_<n>`: the controller's id of the session's `n`-th submitted plan.
pub(crate) fn decision_id_for(n: u64) -> String {
    format!("decision_{n}")
}

/// The checks a host may run on what waits before it decides (the core's one place a decision
/// is checked).
impl PendingDecision {
    /// Checks a `sha256` pin (what the user saw) against [`PendingDecision::sha256`], ignoring
    /// ASCII case; changes nothing. A host can call it before it shows anything.
    ///
    /// # Errors
    /// [`SessionError::Sha256Mismatch`] for a plan, [`SessionError::ArgsSha256Mismatch`] for a
    /// tool call.
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
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let pending = &session.pending()[0];
    /// assert!(pending.check_sha256(&payload.submission.sha256.to_uppercase()).is_ok());
    /// assert!(pending.check_sha256(&"0".repeat(64)).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn check_sha256(&self, given: &str) -> Result<(), SessionError> {
        check_pin(self, given)
    }

    /// Checks that `decision` may be applied to what waits; changes nothing. This is the one
    /// place a decision is checked: [`crate::Session::decide`] and [`crate::Session::resume`]
    /// call it, and a host may call it first (to refuse a flag before it shows a prompt).
    ///
    /// - Any: a pinned `sha256` must be [`PendingDecision::sha256`].
    /// - A plan: no `alwaysAllow`; a `targetModeId` (with an approval only) must be one the plan
    ///   lists; an edited plan (with an approval only) obeys the plan limits; a `model` goes
    ///   with an approval only; `comments` go with a rejection only, each on a line of the plan
    ///   shown; `steps` go with an approval of the plan shown (not an edit), each naming one of
    ///   its steps once; an approval must still be possible under the current config.
    /// - A tool call: no `targetModeId`, no edited plan, no `model`, no `comments`, no
    ///   `alwaysAllow` with a rejection, nor on a call an `ask` rule made wait
    ///   ([`crate::event::ToolCallPayload::rule`]).
    ///
    /// # Errors
    /// [`SessionError::MalformedDecision`], [`SessionError::Sha256Mismatch`],
    /// [`SessionError::ArgsSha256Mismatch`], [`SessionError::TargetNotAllowed`],
    /// [`SessionError::EditedPlan`], [`SessionError::PlanComment`] (a comment on a line the plan
    /// lacks, a blank one, too many), [`SessionError::PlanSteps`] (steps the plan lacks, named
    /// twice, none), [`SessionError::ConfigChanged`]. A model the approval names
    /// ([`Decision::model`]) is not checked here: the session asks the host's chooser when it
    /// applies the approval ([`SessionError::UnknownModel`], from [`crate::Session::decide`]).
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
    /// # let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
    /// # let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else { unreachable!() };
    /// let pending = &session.pending()[0];
    /// assert!(pending.check(&Decision::approve()).is_ok());
    /// assert!(pending.check(&Decision::approve().to("review")).is_err(), "not a target of the plan");
    /// assert!(pending.check(&Decision::reject().with_plan("# edited")).is_err(), "an edit with a rejection");
    /// # Ok(())
    /// # }
    /// ```
    pub fn check(&self, decision: &Decision) -> Result<(), SessionError> {
        check(self, decision).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::{SuspendPayload, ToolCallPayload};
    use crate::machine::pending::{PendingPlan, PendingToolCall};

    fn plan(stale: Option<&str>) -> PendingDecision {
        PendingDecision::Plan(PendingPlan {
            run_id: Arc::from("run_1"),
            tool_call_id: "c1".to_owned(),
            target: ModeId::from_index(1),
            targets: vec![ModeId::from_index(1), ModeId::from_index(2)],
            payload: SuspendPayload {
                submission: PlanSubmission {
                    path: "plans/a.md".to_owned(),
                    title: "A".to_owned(),
                    plan: "1. Step.".to_owned(),
                    sha256: "ab12".to_owned(),
                },
                target_mode_id: "build".into(),
                target_mode_ids: vec!["build".into(), "build-auto".into()],
                decision_id: "decision_1".to_owned(),
                revision: 1,
                previous_sha256: None,
                diff: None,
                terms: Default::default(),
                comments: Vec::new(),
                scope: None,
                plan_scope: Default::default(),
                steps: Vec::new(),
                review: None,
            },
            stale: stale.map(str::to_owned),
        })
    }

    fn call(n: u64, decided: Option<DecidedRecord>) -> PendingDecision {
        PendingDecision::ToolCall(PendingToolCall {
            run_id: Arc::from("run_2"),
            tool_call_id: format!("c{n}"),
            payload: ToolCallPayload {
                decision_id: format!("decision_{n}"),
                tool_name: "write_file".to_owned(),
                args: serde_json::json!({}),
                args_sha256: "cd34".to_owned(),
                terms: Default::default(),
                rule: None,
                locations: Vec::new(),
                drift: None,
                subagent: None,
                review: None,
            },
            decided,
        })
    }

    fn record(run_id: &str, tool_call_id: &str, decision_id: &str) -> DecidedRecord {
        DecidedRecord::new(
            run_id,
            tool_call_id,
            decision_id,
            crate::event::DecisionOutcome::Rejected,
        )
    }

    #[test]
    fn a_pin_is_compared_ignoring_case_and_names_what_was_shown() {
        assert_eq!(check_pin(&plan(None), "AB12"), Ok(()));
        assert_eq!(
            check_pin(&plan(None), "ffff"),
            Err(SessionError::Sha256Mismatch {
                expected: "ab12".to_owned(),
                given: "ffff".to_owned(),
            })
        );
        assert_eq!(
            check_pin(&call(1, None), "ab12"),
            Err(SessionError::ArgsSha256Mismatch {
                decision_id: "decision_1".to_owned(),
                expected: "cd34".to_owned(),
                given: "ab12".to_owned(),
            })
        );
    }

    #[test]
    fn a_plan_approval_resolves_its_target_and_its_edit_once() {
        let checked = check(&plan(None), &Decision::approve().to("build-auto")).expect("ok");
        assert_eq!(checked.target, Some(ModeId::from_index(2)));
        let edit = Decision::approve().with_plan("# B\n\n1. Other.\n");
        let checked = check(&plan(None), &edit).expect("ok");
        assert_eq!(checked.edited.map(|e| e.title), Some("B".to_owned()));
        assert!(matches!(
            check(&plan(None), &Decision::approve().to("review")),
            Err(SessionError::TargetNotAllowed { .. })
        ));
        assert!(matches!(
            check(&plan(None), &Decision::approve().with_plan("  \n")),
            Err(SessionError::EditedPlan(_))
        ));
    }

    #[test]
    fn each_kind_refuses_the_parts_of_the_other() {
        let malformed =
            |r: Result<Checked, SessionError>| matches!(r, Err(SessionError::MalformedDecision(_)));
        assert!(malformed(check(
            &plan(None),
            &Decision::approve().always_allow()
        )));
        assert!(malformed(check(
            &plan(None),
            &Decision::reject().to("build")
        )));
        assert!(malformed(check(
            &call(1, None),
            &Decision::approve().to("build")
        )));
        assert!(malformed(check(
            &call(1, None),
            &Decision::approve().with_plan("# A")
        )));
        assert!(malformed(check(
            &call(1, None),
            &Decision::reject().always_allow()
        )));
        assert!(check(&call(1, None), &Decision::approve().always_allow()).is_ok());
    }

    #[test]
    fn a_plan_decision_refuses_a_scope_or_a_pattern_each_on_its_own() {
        // JSON may carry `scope` or `allow` without `alwaysAllow` (the builders set it): on a
        // plan, either one alone is refused.
        let decision = |json: serde_json::Value| -> Decision {
            serde_json::from_value(json).expect("a decision")
        };
        let scope_only = decision(serde_json::json!({"action": "approved", "scope": "session"}));
        let allow_only = decision(serde_json::json!({
            "action": "rejected",
            "allow": {"path": "src/**"},
        }));
        for decision in [scope_only, allow_only] {
            assert!(
                matches!(
                    check(&plan(None), &decision),
                    Err(SessionError::MalformedDecision(ref why)) if why.contains("plan decision takes no")
                ),
                "{decision:?}"
            );
        }
        assert!(check(&plan(None), &Decision::approve()).is_ok());
    }

    #[test]
    fn a_stale_plan_can_be_rejected_not_approved() {
        let stale = plan(Some("its target is gone"));
        assert_eq!(
            check(&stale, &Decision::approve()).map(drop),
            Err(SessionError::ConfigChanged("its target is gone".to_owned()))
        );
        assert!(check(&stale, &Decision::reject()).is_ok());
    }

    #[test]
    fn ids_resolve_to_what_waits_first_then_to_the_history() {
        let decided = record("run_2", "c1", "decision_1");
        let pending = [call(1, Some(decided.clone())), call(2, None)];
        assert_eq!(named(&pending, &[], 2, "run_2", "c2"), Ok(1));
        assert_eq!(
            named(&pending, &[], 2, "run_2", "c1"),
            Err(SessionError::AlreadyDecided("c1".to_owned()))
        );
        assert!(matches!(
            named(&pending, &[], 2, "run_2", "c9"),
            Err(SessionError::UnknownToolCall { .. })
        ));
        assert_eq!(
            named(&[], &[], 2, "run_1", "c1"),
            Err(SessionError::NotSuspended("run_1".to_owned()))
        );
        assert_eq!(
            named(&[], &[], 2, "run_3", "c1"),
            Err(SessionError::UnknownRun("run_3".to_owned()))
        );
        let history = [record("run_1", "c1", "decision_0")];
        assert_eq!(
            named(&[], &history, 2, "run_1", "c1"),
            Err(SessionError::AlreadyDecided("c1".to_owned()))
        );
        // Another call of the run, or the call of another run, was decided: not this one.
        let others = [
            (
                "run_1",
                "c9",
                SessionError::NotSuspended("run_1".to_owned()),
            ),
            (
                "run_2",
                "c1",
                SessionError::NotSuspended("run_2".to_owned()),
            ),
            ("run_0", "c1", SessionError::UnknownRun("run_0".to_owned())),
        ];
        for (run, call, refusal) in others {
            assert_eq!(named(&[], &history, 2, run, call), Err(refusal));
        }
        assert_eq!(with_id(&pending, &[], "decision_2"), Ok(1));
        assert_eq!(
            with_id(&pending, &[], "decision_1"),
            Err(SessionError::AlreadyDecided("decision_1".to_owned()))
        );
        assert_eq!(
            with_id(&pending, &history, "decision_0"),
            Err(SessionError::AlreadyDecided("decision_0".to_owned()))
        );
        assert_eq!(
            with_id(&pending, &[], "decision_9"),
            Err(SessionError::UnknownDecision("decision_9".to_owned()))
        );
    }

    /// Survivors of the core's mutation run (src/guide/testing.md): each refusal below is the
    /// only one that catches its decision, and each part is accepted where it belongs.
    #[test]
    fn comments_and_a_model_go_with_a_plan_and_an_ask_rule_refuses_always_allow() {
        let malformed =
            |r: Result<Checked, SessionError>| matches!(r, Err(SessionError::MalformedDecision(_)));
        // A tool call takes no plan comments and names no model.
        assert!(malformed(check(
            &call(1, None),
            &Decision::approve().comment(1, "why")
        )));
        assert!(malformed(check(
            &call(1, None),
            &Decision::approve().model("m")
        )));
        // Comments go with the rejection of a plan, never with its approval.
        let rejected = check(&plan(None), &Decision::reject().comment(3, "why")).expect("ok");
        assert_eq!(
            rejected
                .comments
                .iter()
                .map(|c| (c.line, c.text.as_str(), c.quote.as_str()))
                .collect::<Vec<_>>(),
            [(3, "why", "1. Step.")]
        );
        assert!(malformed(check(
            &plan(None),
            &Decision::approve().comment(3, "why")
        )));
        // A call an `ask` rule made wait is approved, but not always allowed.
        let mut asked = call(1, None);
        let PendingDecision::ToolCall(waiting) = &mut asked else {
            unreachable!("a call");
        };
        waiting.payload.rule = Some(Box::new(crate::rules::RuleRecord {
            mode_id: "build".to_owned(),
            number: 1,
            action: crate::rules::RuleAction::Ask,
            rule: "ask write_file".to_owned(),
            reason: "rule 1 of mode `build`".to_owned(),
            approvers: None,
            agent_type: None,
        }));
        assert!(check(&asked, &Decision::approve()).is_ok());
        let Err(SessionError::MalformedDecision(why)) =
            check(&asked, &Decision::approve().always_allow())
        else {
            panic!("an ask rule's call is never always allowed");
        };
        assert!(why.contains("rule 1 of mode `build`"), "{why}");
    }
}
