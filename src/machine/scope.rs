//! The approved plan's files, bound in the mode it handed over to, without I/O: approving a
//! plan that declares its files (its `## Files` section, [`crate::plan::PlanScope`]) gives that
//! mode an allowance of scope `plan` ([`State::grant_plan_scope`]), and each call of a tool
//! that writes is ruled against it ([`bind`]) after the mode's rules and other allowances
//! ([`super::ruling`]).
//!
//! By the planning mode's `planScope` ([`PlanScopePolicy`]), fixed when the plan was submitted:
//! - `ask` (the default): a write whose every path lies inside the files runs without asking
//!   where `requireApproval` would hold it (the allowance stands in, as any allowance, for
//!   `requireApproval` only: an `ask` rule still asks, a `deny` rule still refuses); a write
//!   outside them waits for approval as drift ([`Ruling::Drift`]), whatever else would let it
//!   run, saying which file is outside;
//! - `enforce`: the same inside; a write outside is refused unasked, and the model told why;
//! - `off`: nothing is given, nothing bound (the files are only shown).
//!
//! A call of a tool that writes ([`crate::tool::ToolAccess::Writes`]) whose written paths
//! cannot be located (the tool names none: an MCP tool, or a path the jail refuses) counts as
//! outside. Paths compare exactly ([`crate::plan::PlanScope::contains`]). A read-only tool or a
//! plan tool is not bound.

use super::ruling::Ruling;
use super::state::State;
use crate::allowance::{Allowance, AllowanceScope, EVERY_WRITING_TOOL, PlanGrant};
use crate::exchange::ToolCall;
use crate::explain::{Check, Step};
use crate::mode::ModeGraph;
use crate::plan::{PlanScope, PlanScopePolicy};
use crate::rules::{ResolvedPath, ResolvedPaths};

/// Where the paths a call writes lie, as the driver located them: each written argument and
/// where it leads ([`crate::tool::Tool::written_path_args`], resolved as the rules resolve
/// paths). Empty for a call of a tool that writes but locates none.
pub(crate) type Written = Vec<(String, ResolvedPath)>;

impl State {
    /// The allowance an approved plan gave mode `mode_id`, if one is in force there.
    pub(crate) fn plan_grant_in(&self, mode_id: &str) -> Option<&Allowance> {
        self.allowances
            .iter()
            .find(|a| a.scope == AllowanceScope::Plan && a.mode_id == mode_id && a.plan.is_some())
    }

    /// Gives mode `mode_id` the allowance of the plan approved by decision `decision_id`
    /// (approved text's sha256 `sha256`, declared files `files`, bound by `policy`), in place
    /// of any earlier plan's; nothing under `off` or for a plan without a `## Files` section.
    pub(crate) fn grant_plan_scope(
        &mut self,
        mode_id: &str,
        decision_id: &str,
        sha256: &str,
        files: Option<PlanScope>,
        policy: PlanScopePolicy,
        decided: (Option<String>, Option<String>),
    ) {
        self.allowances.retain(|a| a.scope != AllowanceScope::Plan);
        let Some(files) = files else {
            return;
        };
        if policy == PlanScopePolicy::Off {
            return;
        }
        let mut allowance = Allowance::new(
            AllowanceScope::Plan,
            decision_id,
            mode_id,
            EVERY_WRITING_TOOL,
        );
        allowance.decision_id = decision_id.to_owned();
        (allowance.decided_by, allowance.decided_at) = decided;
        allowance.plan = Some(PlanGrant {
            sha256: sha256.to_owned(),
            files,
            plan_scope: policy,
        });
        self.allowances.push(allowance);
    }
}

/// Why `written` is not all inside `grant`'s files, for the approver and the model; `None`
/// when every written path lies inside them.
fn outside(grant: &PlanGrant, decision_id: &str, written: &Written) -> Option<String> {
    let files = grant.files.entries().join(", ");
    let files = if files.is_empty() {
        "none".to_owned()
    } else {
        files
    };
    let plan = format!("the plan approved by {decision_id} declares: {files}");
    if written.is_empty() {
        return Some(format!(
            "the files this call writes cannot be located, so it counts as a write outside the approved plan ({plan})"
        ));
    }
    written.iter().find_map(|(arg, at)| match at {
        ResolvedPath::Inside(path) if grant.files.contains(path) => None,
        ResolvedPath::Inside(path) => Some(format!(
            "`{path}` is outside the approved plan ({plan})"
        )),
        ResolvedPath::Doubtful(why) | ResolvedPath::NotAString(why) => Some(format!(
            "where `{arg}` leads is in doubt ({why}), so it counts as a write outside the approved plan ({plan})"
        )),
    })
}

/// `ruling` (the mode's rules and allowances on a call of a tool that writes, its written
/// paths at `written`), bound by the approved plan's allowance `grant`: inside the files, the
/// allowance stands in for `requireApproval`; outside them, under `ask` the call waits as
/// drift and under `enforce` it is refused. A `deny` rule's refusal, and a refusal of the
/// arguments, stand.
pub(crate) fn bind(ruling: Ruling, grant: &Allowance, written: &Written) -> Ruling {
    let Some(plan) = &grant.plan else {
        return ruling;
    };
    if matches!(ruling, Ruling::Deny(_) | Ruling::Refused(_)) {
        return ruling;
    }
    match outside(plan, &grant.decision_id, written) {
        None => match ruling {
            Ruling::Ask(None) => Ruling::Allowed(Box::new(grant.clone())),
            other => other,
        },
        Some(why) => match plan.plan_scope {
            PlanScopePolicy::Enforce => Ruling::Refused(format!(
                "{why}, and this mode refuses writes outside it (planScope `enforce`): write only the files the plan declares, or ask the user to approve a plan that declares this one"
            )),
            PlanScopePolicy::Ask | PlanScopePolicy::Off => Ruling::Drift(why),
        },
    }
}

impl State {
    /// How `call`, whose path arguments lie at `paths`, is handled in the current mode of
    /// `graph` (which offers its tool: the driver checked). Pure.
    /// `written`: where the paths it writes lie, for a call of a tool that writes
    /// ([`Written`]); `None` for a tool that writes nothing. An approved plan's
    /// files bind it ([`bind`]).
    /// Each step of the reasoning goes into `steps` ([`crate::explain`]).
    pub(crate) fn ruling(
        &self,
        graph: &ModeGraph,
        call: &ToolCall,
        paths: &ResolvedPaths,
        written: Option<&Written>,
        steps: &mut Vec<Step>,
    ) -> Ruling {
        let ruling = self.ruling_by_mode(graph, call, paths, steps);
        let mode = graph.mode(self.mode);
        let ruled = match (written, self.plan_grant_in(mode.id())) {
            (Some(written), Some(grant)) => {
                let bound = match bind(ruling.clone(), grant, written) {
                    // A managed requireApproval: the plan's allowance does not stand in for it.
                    Ruling::Allowed(_) if graph.mode(self.mode).managed_approval() => {
                        ruling.clone()
                    }
                    bound => bound,
                };
                steps.push(Step::new(
                    Check::PlanScope,
                    plan_scope_finding(&ruling, &bound),
                ));
                bound
            }
            _ => ruling,
        };
        // Under a quorum no allowance (nor an approved plan's files) stands in for the people:
        // the call waits for its approvals ([`crate::quorum`]).
        match ruled {
            Ruling::Allowed(allowance) if mode.approvers() > 1 => {
                steps.push(Step::new(
                    Check::Allowance,
                    format!(
                        "allowance {} would let it run, but the mode needs {} approvals by distinct people (approvers): it waits",
                        allowance.id,
                        mode.approvers()
                    ),
                ));
                Ruling::Ask(None)
            }
            other => other,
        }
    }
}

/// What binding `ruling` by an approved plan's files made of it (`bound`), in a sentence.
fn plan_scope_finding(ruling: &Ruling, bound: &Ruling) -> String {
    match bound {
        Ruling::Drift(why) => format!("{why}: it waits for approval as drift"),
        Ruling::Refused(why) if !matches!(ruling, Ruling::Refused(_)) => why.clone(),
        Ruling::Allowed(by) if !matches!(ruling, Ruling::Allowed(_)) => format!(
            "every path it writes lies inside the files of the plan approved by {}: the plan's allowance stands in for requireApproval",
            by.decision_id
        ),
        _ => "the approved plan's files change nothing here".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{RuleAction, RuleRecord};

    fn grant(policy: PlanScopePolicy) -> Allowance {
        let mut state = State::new(crate::mode::ModeId::from_index(0));
        let files = PlanScope::of("## Files\n- `src/theme.rs`\n- `src/ui/**`\n")
            .expect("accepted")
            .expect("declared");
        state.grant_plan_scope(
            "build",
            "decision_1",
            "ab",
            Some(files),
            policy,
            (None, None),
        );
        state.plan_grant_in("build").expect("granted").clone()
    }

    fn at(path: &str) -> Written {
        vec![("path".to_owned(), ResolvedPath::Inside(path.to_owned()))]
    }

    fn deny() -> Ruling {
        Ruling::Deny(Box::new(RuleRecord {
            mode_id: "build".into(),
            number: 1,
            action: RuleAction::Deny,
            rule: "deny write_file".into(),
            reason: "no".into(),
            approvers: None,
            agent_type: None,
        }))
    }

    #[test]
    fn inside_the_files_the_plan_allowance_stands_in_for_require_approval_only() {
        let grant = grant(PlanScopePolicy::Ask);
        let ruled = bind(Ruling::Ask(None), &grant, &at("src/ui/button.rs"));
        assert!(matches!(&ruled, Ruling::Allowed(a) if a.scope == AllowanceScope::Plan));
        assert_eq!(bind(deny(), &grant, &at("src/theme.rs")), deny());
        assert_eq!(
            bind(Ruling::Run(None), &grant, &at("src/theme.rs")),
            Ruling::Run(None)
        );
    }

    #[test]
    fn outside_the_files_ask_holds_as_drift_and_enforce_refuses() {
        let ask = grant(PlanScopePolicy::Ask);
        let Ruling::Drift(why) = bind(Ruling::Run(None), &ask, &at("src/main.rs")) else {
            panic!("drift");
        };
        assert!(
            why.contains("`src/main.rs` is outside the approved plan"),
            "{why}"
        );
        assert!(why.contains("src/theme.rs, src/ui/**"), "{why}");
        // A look-alike of a declared path is another path.
        assert!(matches!(
            bind(Ruling::Ask(None), &ask, &at("src/th\u{435}me.rs")),
            Ruling::Drift(_)
        ));
        // Nothing located: outside.
        assert!(matches!(
            bind(Ruling::Ask(None), &ask, &Vec::new()),
            Ruling::Drift(why) if why.contains("cannot be located")
        ));
        let enforce = grant(PlanScopePolicy::Enforce);
        let Ruling::Refused(why) = bind(Ruling::Run(None), &enforce, &at("src/main.rs")) else {
            panic!("refused");
        };
        assert!(why.contains("planScope `enforce`"), "{why}");
        assert_eq!(bind(deny(), &enforce, &at("src/main.rs")), deny());
    }

    #[test]
    fn off_or_no_files_section_grants_nothing() {
        let mut state = State::new(crate::mode::ModeId::from_index(0));
        let files = PlanScope::of("## Files\n- `a`\n").expect("ok");
        state.grant_plan_scope(
            "build",
            "d",
            "ab",
            files,
            PlanScopePolicy::Off,
            (None, None),
        );
        assert!(state.plan_grant_in("build").is_none());
        state.grant_plan_scope("build", "d", "ab", None, PlanScopePolicy::Ask, (None, None));
        assert!(state.plan_grant_in("build").is_none());
    }
}
