//! An approved plan's files in the kit (issue 40): the one plan that declares them, how they
//! bind a write in the mode the plan hands over to, and the explorer's operations on them.
//!
//! The kit's ordinary plans ([`super::plan_text`] `0..PLAN_COUNT`) declare no files and bind
//! nothing once approved, so which of them waits or was approved never splits a state of the
//! walk. One more plan, [`SCOPED_PLAN`], declares [`PLAN_FILES`]; only the explicit operation
//! [`Op::submit_scoped`] submits it, and the explorer tries that operation (and the writes it
//! makes a difference to) only where a config can grant such a plan's files at all
//! ([`scope_operations`]). Only the states reached through it carry a plan's allowance or a
//! write waiting as drift.

use super::facts::ConfigFacts;
use super::reference::{Call, CallPath, Op, PLAN_COUNT, PlanFile, ReferenceSession, Subject, Then};
use crate::allowance::AllowanceScope;

/// The one file the plan that declares its files declares ([`SCOPED_PLAN`]): where
/// [`CallPath::Src`] leads, so a kit write there lies inside them and every other one outside.
pub const PLAN_FILES: &str = "src/a.txt";

/// The number of the kit's one valid plan file that declares its files: a `## Files` section
/// naming [`PLAN_FILES`]. It comes after the ordinary plans (`0..PLAN_COUNT`), which declare
/// none; [`Op::submit_scoped`] submits it.
pub const SCOPED_PLAN: u8 = PLAN_COUNT;

/// Whether valid plan file `k` declares its files: only [`SCOPED_PLAN`] does; the others have
/// no `## Files` section and bind nothing once approved.
///
/// # Examples
/// ```
/// use agent_controller::testing::{SCOPED_PLAN, plan_declares_files, plan_text};
/// assert!(plan_declares_files(SCOPED_PLAN) && plan_text(SCOPED_PLAN).contains("## Files"));
/// assert!(!plan_declares_files(1) && !plan_text(1).contains("## Files"));
/// ```
pub fn plan_declares_files(k: u8) -> bool {
    k == SCOPED_PLAN
}

/// The `## Files` section that ends plan file `k` (empty where it declares none): its one item
/// names [`PLAN_FILES`] in a code span, with prose after it, which binds nothing.
pub(super) fn files_section(k: u8) -> String {
    if plan_declares_files(k) {
        format!("\n## Files\n\n- `{PLAN_FILES}` — the file the kit writes\n")
    } else {
        String::new()
    }
}

/// Whether plan file `k` is one a harness provides: an ordinary one or [`SCOPED_PLAN`].
pub(super) fn is_plan_file(k: u8) -> bool {
    k < PLAN_COUNT || plan_declares_files(k)
}

/// How the files of the plan approved for the current mode bind one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Bound {
    /// Every path it writes lies inside the files: the plan's allowance (this id) stands in
    /// for `requireApproval`, as any allowance does.
    Inside(String),
    /// Outside them, under `planScope = "ask"`: it waits for approval as drift, whatever else
    /// would let it run.
    Drift,
    /// Outside them, under `planScope = "enforce"`: refused unasked.
    Refused,
}

/// How the plan's allowance `grant` (its id; `None`: no plan binds the current mode) binds a
/// call of `tool` with `path`, `enforces` under `planScope = "enforce"`: `None` where nothing
/// binds it or the tool writes nothing. A write lies inside the files when its tool writes the
/// file at its `path` ([`ConfigFacts::path_writers`]) and that path leads to [`PLAN_FILES`];
/// any other write (no `path`, a tool that says nothing of where it writes) is outside.
pub(super) fn bound(
    facts: &ConfigFacts,
    grant: Option<&str>,
    enforces: bool,
    tool: &str,
    path: Option<CallPath>,
) -> Option<Bound> {
    let grant = grant?;
    if !facts.writing_tools().iter().any(|t| t == tool) {
        return None;
    }
    let inside =
        facts.path_writers().iter().any(|t| t == tool) && path.is_some_and(CallPath::in_plan_files);
    Some(match (inside, enforces) {
        (true, _) => Bound::Inside(grant.to_owned()),
        (false, false) => Bound::Drift,
        (false, true) => Bound::Refused,
    })
}

impl Op {
    /// A user message on which the model submits the kit's one plan that declares its files
    /// ([`SCOPED_PLAN`], naming [`PLAN_FILES`]): approved, they bind the mode it hands over to
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

/// Whether an approved plan's files bind the current mode of `reference` (an allowance of
/// scope `plan` in force there).
pub(super) fn scoped(reference: &ReferenceSession) -> bool {
    let mode = reference.facts().id(reference.mode());
    reference
        .allowances()
        .iter()
        .any(|a| a.scope == AllowanceScope::Plan && a.mode == mode)
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

/// Whether a call of `tool` in `at` is one the reference model leaves out: a tool that
/// suspends to ask ([`super::Ask::of_tool`]: the kit's confirmation tool) and writes, while an
/// approved plan's files bind the mode. It would wait as drift, and once approved run and
/// suspend again, which the reference does not follow; neither the walk nor the random cases
/// make such a call.
pub(super) fn unmodelled_call(at: &ReferenceSession, tool: &str) -> bool {
    super::Ask::of_tool(tool).is_some()
        && at.facts().writing_tools().iter().any(|t| t == tool)
        && scoped(at)
}
