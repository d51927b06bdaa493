//! A rule outcome on a tool call, without I/O: whether a call of the current mode runs, waits
//! for the user, or is refused, by the mode's `rules` ([`crate::rules`]), its `requireApproval`
//! and the tools a decision always allows; and the audit record a rule's outcome leaves. The
//! driver (`src/session/drive.rs`) resolves the call's path arguments first (the one part that
//! reads the file system: [`crate::rules::resolve_paths`]) and hands them in with the call,
//! after it checked that the mode offers the tool (`availableTools`, which outranks every rule)
//! and that the arguments are well formed.
//!
//! The order, the guide's `rules` page in short:
//! 1. of the rules that match, `deny` beats `ask`, which beats `allow` ([`crate::mode::Mode::decide`]);
//! 2. a call no rule matches waits when `requireApproval` covers its tool, else it runs;
//! 3. an allowance in force in the mode ([`crate::allowance`], left by an "always allow":
//!    [`crate::Decision::always_allow`]) that covers the call lets through only a call that
//!    would wait by `requireApproval`: never one an `ask` rule asks about, never one a `deny`
//!    rule refuses (an allowance of the whole tool must not undo a rule written for some of its
//!    calls). Its audit record names the allowance.

use std::sync::Arc;

use super::call::CallRef;
use super::change::Change;
use super::state::State;
use crate::allowance::Allowance;
use crate::event::{DecidedRecord, DecisionOutcome};
use crate::exchange::{ToolCall, ToolOutput};
use crate::explain::{Check, Step};
use crate::hook::{HookDecision, HookRecord};
use crate::mode::{Mode, ModeGraph};
use crate::plan::PlanSubmission;
use crate::rules::{ResolvedPaths, RuleAction, RuleRecord};

use super::check::decision_id_for;
use super::decision::Decision;
use super::error::SessionError;
use super::next::Next;
use super::pending::PendingDecision;

/// How one tool call of the current mode is handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ruling {
    /// The call runs: with the `allow` rule that let it, when one decided.
    Run(Option<Box<RuleRecord>>),
    /// The call waits for the user's approval: with the `ask` rule that asked, when one did
    /// (else the mode's `requireApproval`).
    Ask(Option<Box<RuleRecord>>),
    /// A `deny` rule refused the call: it never runs, and the model is told why. (In a
    /// subagent, a call an `ask` rule holds is [`Ruling::Ask`] as anywhere: the child suspends
    /// and the call waits for the user in the parent's session, naming the child.)
    Deny(Box<RuleRecord>),
    /// No rule matched and the mode's `requireApproval` would hold the call, but this
    /// allowance covers it: it runs, and its audit record names the allowance.
    Allowed(Box<Allowance>),
    /// The call is refused, unasked, for this reason: it never runs, and the model is told
    /// why. Its arguments are refused before any rule applies (not a well-formed object, or
    /// not what the tool's input schema asks: the driver checks them, `Session::refusal`), or
    /// it writes outside an approved plan's files under `planScope = "enforce"`
    /// ([`super::scope::bind`]).
    Refused(String),
    /// The call writes outside the files of the plan approved for this mode (`planScope =
    /// "ask"`, [`super::scope::bind`]): it waits for the user's approval as drift, for this
    /// reason (which file is outside).
    Drift(String),
    /// A hook allowed a call that would have waited for approval ([`hooked`]): it runs, and
    /// its audit record names the hook.
    HookAllowed(Box<HookRecord>),
    /// A hook denied the call ([`hooked`]): it never runs, and the model is told the hook's
    /// reason.
    HookDenied(Box<HookRecord>),
}

/// `ruling` narrowed by the hooks' combined verdict `hook` (`None`: no hook applied), the one
/// place a hook's verdict meets the rules ([`crate::hook`]). A call the rules refuse stays
/// refused (a hook never widens), one a hook denies is denied, one a hook allows runs without
/// asking if it would have waited; an `ask` (a hook's failure among them) leaves the ruling as
/// it is. Under a quorum (`quorum`: the mode's `approvers` above 1, [`crate::quorum`]) a hook's
/// allow never counts toward it: the call waits for the people as it would have.
///
/// `managed`: the mode whose call it is, when its `rules` or `requireApproval` are the managed
/// config's ([`crate::mode::Mode::managed_approval`]): a hook's `allow` then does not let
/// through a call they hold.
pub(crate) fn hooked(
    ruling: Ruling,
    hook: Option<&HookRecord>,
    quorum: bool,
    managed: Option<&Mode>,
) -> Ruling {
    let Some(hook) = hook else {
        return ruling;
    };
    let held_by_managed = managed.is_some_and(|mode| match &ruling {
        Ruling::Ask(None) => mode.managed_approval(),
        Ruling::Ask(Some(_)) => mode.managed_rules(),
        _ => false,
    });
    if held_by_managed && matches!(hook.decision, HookDecision::Allow) {
        return ruling;
    }
    match (ruling, hook.decision) {
        (refused @ (Ruling::Deny(_) | Ruling::Refused(_) | Ruling::HookDenied(_)), _) => refused,
        (_, HookDecision::Deny) => Ruling::HookDenied(Box::new(hook.clone())),
        // An `ask` rule's quorum (`approvers` on the rule) holds too.
        (Ruling::Ask(Some(rule)), HookDecision::Allow) if rule.approvers.is_some() => {
            Ruling::Ask(Some(rule))
        }
        (Ruling::Ask(_) | Ruling::Drift(_), HookDecision::Allow) if !quorum => {
            Ruling::HookAllowed(Box::new(hook.clone()))
        }
        (ruling, _) => ruling,
    }
}

impl Change<'_> {
    /// The `HookDeniedPlan` input: the run suspends on the plan `submission` of the
    /// `submit_plan` call `tool_call_id` ([`Change::suspend_plan`]), and in the same change the
    /// plan, which hook `hook` denied, is rejected with the hook's reason as the feedback (the
    /// model revises), decided by `hook NAME` through the hook (`via`), the record naming the
    /// hook: what a person would see in the log for a tool call a hook denied. One change, so
    /// one save: no saved state has the plan waiting with the hook's deny lost.
    ///
    /// # Errors
    /// What the one check refuses ([`super::check::check`]); the driver computes the change on
    /// a copy ([`Input::may_refuse`](super::input::Input::may_refuse)), so nothing changes.
    pub(crate) fn hook_denied_plan(
        &mut self,
        run_id: Arc<str>,
        tool_call_id: String,
        submission: PlanSubmission,
        hook: Box<HookRecord>,
        lacking: &[String],
    ) -> Result<Next, SessionError> {
        let payload = self.suspend_plan(&run_id, &tool_call_id, submission, None);
        let Some(index) = self.state.pending.iter().position(|p| {
            matches!(p, PendingDecision::Plan(_)) && p.decision_id() == payload.decision_id
        }) else {
            // Not reached: the plan was suspended on just now.
            return Ok(Next::SuspendedOnPlan {
                run_id,
                tool_call_id,
                payload: Box::new(payload),
            });
        };
        let reason = hook.reason.as_deref().unwrap_or_default();
        let decision = Decision::reject_with(format!("Rejected by hook `{}`: {reason}", hook.hook))
            .decided_by(format!("hook {}", hook.hook))
            .via(crate::quorum::Via::Hook);
        let checked = super::check::check(&self.state.pending[index], &decision)?;
        self.decide(index, decision, checked, lacking, None, Some(hook))
    }
}

/// The result the model gets for a call hook `hook` denied.
pub(crate) fn hook_denied_result(hook: &HookRecord) -> String {
    refused_result(&format!(
        "hook `{}` denied it: {}",
        hook.hook,
        hook.reason.as_deref().unwrap_or("no reason given")
    ))
}

impl State {
    /// How `call` is handled by the current mode's rules, its `requireApproval` and the
    /// allowances of tools in force.
    /// Each step of the reasoning goes into `steps` ([`crate::explain`]).
    pub(super) fn ruling_by_mode(
        &self,
        graph: &ModeGraph,
        call: &ToolCall,
        paths: &ResolvedPaths,
        steps: &mut Vec<Step>,
    ) -> Ruling {
        let mode = graph.mode(self.mode);
        let verdict = mode.decide_explained(true, call, paths, steps);
        let rule = RuleRecord::of(&verdict, mode.rules(), mode.id()).map(Box::new);
        match (verdict.action, rule) {
            (RuleAction::Deny, Some(rule)) => Ruling::Deny(rule),
            // Only a rule denies an offered tool's call; anything else is in doubt: ask.
            (RuleAction::Deny, None) => Ruling::Ask(None),
            // An allowance stands in for `requireApproval` only, never for a rule.
            (RuleAction::Ask, None) if mode.managed_approval() => {
                steps.push(Step::new(
                    Check::Allowance,
                    "requireApproval here is the managed config's: no allowance stands in for it"
                        .to_owned(),
                ));
                Ruling::Ask(None)
            }
            (RuleAction::Ask, None) => match self
                .allowances_in(mode.id())
                .find(|a| a.covers(mode.id(), call, paths))
            {
                Some(allowance) => {
                    steps.push(Step::new(
                        Check::Allowance,
                        format!(
                            "allowance {} ({}) covers the call and stands in for requireApproval: it runs",
                            allowance.id, allowance.scope
                        ),
                    ));
                    Ruling::Allowed(Box::new(allowance.clone()))
                }
                None => Ruling::Ask(None),
            },
            (RuleAction::Ask, rule) => Ruling::Ask(rule),
            (RuleAction::Allow, rule) => Ruling::Run(rule),
        }
    }
}

/// The result the model gets for a call a `deny` rule refused.
pub(crate) fn denied_result(rule: &RuleRecord) -> String {
    refused_result(&rule.reason)
}

/// The result the model gets for a call refused for `reason` ([`Ruling::Refused`]).
pub(crate) fn refused_result(reason: &str) -> String {
    format!("Not executed: {reason}.")
}

impl Change<'_> {
    /// The audit record of a call decided without asking anyone, by a rule or an allowance:
    /// `outcome`, a decision id of its own, now, the tool and `args_sha256`; no `decidedBy`
    /// (the caller adds what decided).
    fn own_record(
        &mut self,
        call: &CallRef,
        args_sha256: String,
        outcome: DecisionOutcome,
    ) -> DecidedRecord {
        self.state.decisions += 1;
        DecidedRecord {
            sha256: Some(args_sha256),
            decided_at: Some(self.now_rfc3339()),
            tool_name: Some(call.name.clone()),
            ..DecidedRecord::new(
                &*call.run_id,
                &call.call_id,
                decision_id_for(self.state.decisions),
                outcome,
            )
        }
    }

    /// The audit record of a call rule `rule` decided on its own (`outcome`: approved for an
    /// `allow` rule, rejected for a `deny` rule): a decision id of its own, no `decidedBy`.
    fn rule_record(
        &mut self,
        call: &CallRef,
        args_sha256: String,
        outcome: DecisionOutcome,
        rule: Box<RuleRecord>,
    ) -> DecidedRecord {
        DecidedRecord {
            rule: Some(rule),
            ..self.own_record(call, args_sha256, outcome)
        }
    }

    /// Ends a call (started with `tool_start`) with `output` and its audit record `record`,
    /// which goes into the history: `tool_end` with both, the result in the conversation.
    fn finish_recorded_tool(&mut self, call: CallRef, output: ToolOutput, record: DecidedRecord) {
        self.state.history.push(record.clone());
        self.finish_tool(call, output, Some(record));
    }

    /// Ends a call (started with `tool_start`) that `allowance` ran without asking: `tool_end`
    /// with `output` and an audit record of its own (approved, a decision id of its own,
    /// `allowedBy` the allowance's id, `decidedBy` `allowance ID (SCOPE)`), the record in the
    /// history, the result in the conversation.
    pub(crate) fn finish_allowed_tool(
        &mut self,
        call: CallRef,
        args_sha256: String,
        output: ToolOutput,
        allowance: &Allowance,
    ) {
        let approved = DecisionOutcome::Approved;
        let record = DecidedRecord {
            decided_by: Some(allowance.decider()),
            allowed_by: Some(allowance.id.clone()),
            ..self.own_record(&call, args_sha256, approved)
        };
        self.finish_recorded_tool(call, output, record);
    }

    /// Ends a call (started with `tool_start`) whose outcome hook `hook` decided: `tool_end`
    /// with `output` and an audit record of its own (approved when the hook allowed it,
    /// rejected when it denied it; `decidedBy` `hook NAME`, the hook's record), the record in
    /// the history, the result in the conversation.
    pub(crate) fn finish_hooked_tool(
        &mut self,
        call: CallRef,
        args_sha256: String,
        output: ToolOutput,
        hook: Box<HookRecord>,
    ) {
        let outcome = match hook.decision {
            HookDecision::Allow => DecisionOutcome::Approved,
            HookDecision::Deny | HookDecision::Ask => DecisionOutcome::Rejected,
        };
        let record = DecidedRecord {
            decided_by: Some(format!("hook {}", hook.hook)),
            via: Some(crate::quorum::Via::Hook),
            hook: Some(hook),
            ..self.own_record(&call, args_sha256, outcome)
        };
        self.finish_recorded_tool(call, output, record);
    }

    /// Ends a call approved earlier that rule `rule` refuses as it is about to run (the rules,
    /// or where its paths lead, changed while it waited): a `deny` rule, or an `ask` rule over a
    /// call only an allowance approved, unseen. It never runs and the model is told why. The approval's audit record (`approval`, in the history since the decision was
    /// saved) stays as it is, with its `decidedBy` and the `ask` rule that asked; the refusal
    /// gets a record of its own, appended (`rejected`, with the deny rule: [`Change::finish_ruled_tool`]).
    pub(crate) fn refuse_approved_tool(
        &mut self,
        call: CallRef,
        approval: &DecidedRecord,
        rule: Box<RuleRecord>,
    ) {
        // Refused, the call does not run; what the user typed with their approval still
        // reaches the model.
        let output = ToolOutput::error(super::rejection::with_approval_feedback(
            denied_result(&rule),
            approval.feedback.as_deref(),
        ));
        let args_sha256 = approval.sha256.clone().unwrap_or_default();
        // Rejected whatever the rule's action (an `ask` rule refuses a call an allowance
        // approved unseen: `Session::run_approved`).
        let outcome = DecisionOutcome::Rejected;
        let record = self.rule_record(&call, args_sha256, outcome, rule);
        self.finish_recorded_tool(call, output, record);
    }

    /// Ends a call (started with `tool_start`) whose outcome a rule decided: `tool_end` with
    /// `output` and the rule's audit record (approved when the rule allowed it, rejected when
    /// it denied it, or when an `ask` rule held a subagent's call), the record in the history,
    /// the result in the conversation.
    pub(crate) fn finish_ruled_tool(
        &mut self,
        call: CallRef,
        args_sha256: String,
        output: ToolOutput,
        rule: Box<RuleRecord>,
    ) {
        // An `ask` rule's call settled without anyone asked was refused: a subagent's, which
        // cannot ask the user (`Session::ruling_by_rules`).
        let outcome = match rule.action {
            RuleAction::Deny | RuleAction::Ask => DecisionOutcome::Rejected,
            RuleAction::Allow => DecisionOutcome::Approved,
        };
        let record = self.rule_record(&call, args_sha256, outcome, rule);
        self.finish_recorded_tool(call, output, record);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::machine::check::check;
    use crate::machine::decision::Decision;
    use crate::machine::input::{Asked, Input, Suspend};
    use crate::machine::next::Next;
    use crate::machine::rig::{Rig, call};

    fn rule(number: usize, action: RuleAction) -> Box<RuleRecord> {
        Box::new(RuleRecord {
            mode_id: "build".to_owned(),
            number,
            action,
            rule: format!("{action:?} write_file"),
            reason: format!("rule {number} of mode `build`"),
            approvers: None,
            agent_type: None,
        })
    }

    /// A run in `build` whose model replied with one call, `w1` to `write_file`: the run's id
    /// and the reply's position.
    fn a_reply_calling_write_file(rig: &mut Rig) -> (Arc<str>, usize) {
        rig.state.mode = rig.mode("build");
        let run = rig.start("write");
        let Next::RunToolCalls { at, .. } = rig.reply(
            &run,
            "",
            vec![call("w1", "write_file", json!({"path": "a"}))],
        ) else {
            panic!("a reply with calls runs them");
        };
        (run, at)
    }

    /// A call an `ask` rule made wait, approved by alice, that a `deny` rule refuses as it is
    /// about to run: the approval's record stays as it was saved (approved, by alice, the `ask`
    /// rule that asked), and the refusal is a record of its own, appended.
    #[test]
    fn a_refused_approved_call_appends_its_refusal_and_keeps_the_approval() {
        let mut rig = Rig::new();
        let (run, at) = a_reply_calling_write_file(&mut rig);
        let suspend = Suspend::ToolCalls {
            run_id: run.clone(),
            at,
            asked: vec![Asked::at(0, Some(rule(2, RuleAction::Ask)))],
            suspended: Vec::new(),
            children: Vec::new(),
        };
        rig.handle(Input::Suspend(suspend)).expect("suspends");
        let decision = Decision::approve().decided_by("alice");
        let checked = check(&rig.state.pending[0], &decision).expect("checks");
        let next = rig
            .handle(Input::Decide {
                index: 0,
                decision,
                checked,
                lacking: Vec::new(),
            })
            .expect("approved");
        let Next::RunApproved { mut calls, .. } = next else {
            panic!("the only call is decided: {next:?}");
        };
        let (approved, record) = calls.pop().expect("the approved call");
        let saved = rig.state.history.clone();
        assert_eq!(saved.last(), Some(&record));
        rig.take_kinds();
        let counted = rig.state.decisions;
        let refused = Input::RefusedApproved {
            call: CallRef::new(
                run.clone(),
                approved.tool_call_id().to_owned(),
                approved.tool_name().to_owned(),
            ),
            record,
            rule: rule(1, RuleAction::Deny),
        };
        rig.handle(refused).expect("refused");
        // What was saved is kept as it was: an audit record is never rewritten.
        assert_eq!(rig.state.history[..saved.len()], saved[..]);
        let approval = &rig.state.history[saved.len() - 1];
        assert_eq!(approval.outcome, Some(DecisionOutcome::Approved));
        assert_eq!(approval.decided_by.as_deref(), Some("alice"));
        assert_eq!(
            approval.rule.as_ref().map(|r| (r.number, r.action)),
            Some((2, RuleAction::Ask)),
            "the rule that asked"
        );
        assert_eq!(rig.state.history.len(), saved.len() + 1);
        let refusal = rig.state.history.last().expect("the refusal's record");
        assert_eq!(refusal.outcome, Some(DecisionOutcome::Rejected));
        assert_eq!(
            refusal.rule.as_ref().map(|r| (r.number, r.action)),
            Some((1, RuleAction::Deny))
        );
        assert_eq!(refusal.tool_call_id, "w1");
        assert_eq!(refusal.tool_name.as_deref(), Some("write_file"));
        assert_eq!(refusal.sha256, approval.sha256);
        assert_ne!(refusal.decision_id, approval.decision_id);
        // The refusal is the next decision, counted, at the time it was made.
        assert_eq!(rig.state.decisions, counted + 1);
        assert_eq!(refusal.decision_id, decision_id_for(counted + 1));
        assert!(refusal.decided_at.is_some());
        assert_eq!(
            refusal.decided_at, approval.decided_at,
            "the rig's clock stands still"
        );
        assert_eq!(refusal.decided_by, None, "no person decided the refusal");
        // The model is told why, and `tool_end` carries the refusal's record.
        let ended: Vec<_> = rig
            .events
            .iter()
            .filter_map(|e| match e {
                crate::event::Event::ToolEnd { decision, .. } => Some(decision.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ended, [Some(refusal.clone())]);
        assert_eq!(rig.take_kinds(), ["tool_end"]);
        let (id, result) = rig.results().pop().expect("a result");
        assert_eq!(id, "w1");
        assert_eq!(result, "Not executed: rule 1 of mode `build`.");
    }

    /// A call a rule decided ends with the rule's record (approved for `allow`, rejected for
    /// `deny`), counted as a decision, and its result in the conversation.
    #[test]
    fn a_ruled_call_ends_with_the_rules_record_and_its_result() {
        for (action, outcome, text) in [
            (RuleAction::Allow, DecisionOutcome::Approved, "written"),
            (RuleAction::Deny, DecisionOutcome::Rejected, "denied"),
        ] {
            let mut rig = Rig::new();
            let (run, at) = a_reply_calling_write_file(&mut rig);
            let start = Input::ToolStart {
                run_id: run.clone(),
                at,
                index: 0,
                waits_for_approval: false,
            };
            rig.handle(start).expect("starts");
            let counted = rig.state.decisions;
            let ruled = Input::RuledToolResult {
                call: CallRef::new(run.clone(), "w1", "write_file"),
                args_sha256: "sha".to_owned(),
                output: ToolOutput::ok(text),
                rule: rule(3, action),
            };
            rig.handle(ruled).expect("ends");
            let record = rig.state.history.last().expect("the rule's record");
            assert_eq!(record.outcome, Some(outcome), "{action:?}");
            assert_eq!(record.tool_call_id, "w1");
            assert_eq!(record.sha256.as_deref(), Some("sha"));
            assert_eq!(record.rule.as_ref().map(|r| r.number), Some(3));
            assert_eq!(rig.state.decisions, counted + 1);
            let results: Vec<String> = rig.results().into_iter().map(|r| r.1).collect();
            assert_eq!(results, [text], "{action:?}");
        }
    }
}
