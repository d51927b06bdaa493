//! The explorer's operations on an approved plan's files (issue 40). The kit's one plan that
//! declares files, and how they bind a write in the mode the plan hands over to, live beside
//! the reference session that rules on them ([`super::reference`]).
//!
//! The kit's ordinary plans ([`super::plan_text`] `0..PLAN_COUNT`) declare no files and bind
//! nothing once approved, so which of them waits or was approved never splits a state of the
//! walk. One more plan, [`SCOPED_PLAN`], declares [`super::PLAN_FILES`]; only the explicit
//! operation [`Op::submit_scoped`] submits it, and the explorer tries that operation (and the
//! writes it makes a difference to) only where a config can grant such a plan's files at all
//! ([`scope_operations`]). Only the states reached through it carry a plan's allowance or a
//! write waiting as drift.

use super::facts::ConfigFacts;
use super::reference::{
    Call, CallPath, Op, PlanFile, ReferenceSession, SCOPED_PLAN, Subject, Then,
};

impl Op {
    /// A user message on which the model submits the kit's one plan that declares its files
    /// ([`SCOPED_PLAN`], naming [`super::PLAN_FILES`]): approved, they bind the mode it hands over to
    /// by the planning mode's `planScope`.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use agent_controller::testing::{ConfigFacts, Op, ReferenceSession, plan_declares_files};
    /// let facts = Arc::new(ConfigFacts::from_toml("[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\ndefault = true\n")?);
    /// let plan = facts.index_of("plan").unwrap();
    /// let mut session = ReferenceSession::new(facts.clone(), Some(plan));
    /// session.apply(&Op::submit_scoped());
    /// assert!(session.pending().is_some_and(|p| plan_declares_files(p.plan)));
    /// # Ok::<(), agent_controller::testing::FactsError>(())
    /// ```
    pub fn submit_scoped() -> Self {
        Self::submit_file(PlanFile::Valid(SCOPED_PLAN))
    }
}

/// The first tool that writes the file at its `path` offered in a mode some mode hands over
/// to: the tool whose writes an approved plan's files can bind. `None` where there is none.
fn bound_writer(facts: &ConfigFacts) -> Option<String> {
    let targets: Vec<usize> = (0..facts.len())
        .filter(|&m| facts.offers(m, crate::tool::SUBMIT_PLAN) == Some(true))
        .flat_map(|m| facts.transition_targets(m))
        .collect();
    facts
        .path_writers()
        .iter()
        .find(|w| targets.iter().any(|&t| facts.offers(t, w) == Some(true)))
        .cloned()
}

/// The explorer's operations on an approved plan's files: the submission of the plan that
/// declares them ([`Op::submit_scoped`]) and, unless `narrowed` (the tool the walk narrows
/// allowances of) already has them, a write inside those files and one outside, of the first
/// tool that writes at its `path` in a mode some mode hands over to. None at all where no
/// such tool exists: there no plan's files bind anything the walk could write.
pub(super) fn scope_operations(facts: &ConfigFacts, narrowed: Option<&str>) -> Vec<Op> {
    let Some(writer) = bound_writer(facts) else {
        return Vec::new();
    };
    let mut ops = vec![Op::submit_scoped()];
    if narrowed != Some(writer.as_str()) {
        for path in [CallPath::Src, CallPath::WalksOut] {
            ops.push(Op::Message {
                calls: vec![Call::ToolAt(writer.clone(), path)],
                then: Then::Text,
            });
        }
    }
    ops
}

/// Whether a write waits as drift in `reference`.
pub(super) fn drifting(reference: &ReferenceSession) -> bool {
    reference.waiting().iter().any(|w| w.drift)
}

/// Whether `op` answers a write waiting as drift in `at` with an "always allow" (of any scope,
/// narrowed or not). The explorer does not try it: each allowance it gives outlives the plan's
/// (a `session` or `workspace` one, or a `mode` one until the mode changes) and would split
/// every later state by the allowances in force, as the first version of this coverage did
/// (`config/modes.toml` from 15 states to 148). An "always allow" is walked on the calls that
/// wait by `requireApproval` or a rule; on a drift, the random cases try it.
pub(super) fn always_allows_drift(at: &ReferenceSession, op: &Op) -> bool {
    match op {
        Op::Decide {
            on:
                Subject::ToolCall {
                    call,
                    always_allow: true,
                    ..
                },
            ..
        } => at.waiting().get(*call).is_some_and(|w| w.drift),
        _ => false,
    }
}
