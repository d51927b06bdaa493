//! The kit's model of a quorum (`approvers = N`, [`crate::testing::quorum`]): the reference
//! predicts it, the real session agrees, and a controller that ignores it is caught.

use super::*;
use crate::run::DecisionAction;

/// Plans of `plan` and waiting calls of `build` need two approvals; `careful`'s `ask` rule on
/// `write_file` three.
const QUORUM: &str = "tests/fixtures/configs/quorum.toml";

/// A harness over [`QUORUM`] (built by `build`) and a reference in `mode` whose hook answers
/// `script`, both started.
fn quorum_session(
    build: impl FnOnce(Setup) -> Result<AgentController, ConfigError>,
    mode: &str,
    script: HookScript,
) -> (Harness, ReferenceSession) {
    let (graph, facts) = loaded(QUORUM);
    let mut harness = Harness::new(graph, facts, build).expect("a harness");
    let start = harness.facts().index_of(mode);
    let reference = ReferenceSession::new(harness.facts().clone(), start).with_hooks(script);
    harness.start(&reference).expect("the start");
    (harness, reference)
}

/// The identity the step's own host call decides as.
fn decided_by(step: &Step) -> Option<String> {
    match &step.action {
        Action::Resume { decision, .. } | Action::Decide { decision, .. } => {
            decision.decided_by.clone()
        }
        Action::ResumeJson { data, .. } => data["decidedBy"].as_str().map(str::to_owned),
        _ => None,
    }
}

#[test]
fn the_facts_read_a_modes_and_an_ask_rules_approvers() {
    let facts = ConfigFacts::from_toml(&std::fs::read_to_string(QUORUM).expect("fixture"))
        .expect("facts")
        .with_tools(vec!["read_file".to_owned(), "write_file".to_owned()]);
    assert!(facts.has_quorum());
    assert_eq!(facts.plan_quorum(0), 2);
    assert_eq!(facts.call_quorum(1, "write_file"), 2);
    assert_eq!(
        facts.call_quorum(2, "write_file"),
        3,
        "the rule's, above the mode's 1"
    );
    assert_eq!(facts.plan_quorum(2), 1);
    assert_eq!(facts.call_quorum(2, "read_file"), 1);
    let rules =
        ConfigFacts::from_toml(&std::fs::read_to_string(RULES).expect("fixture")).expect("facts");
    assert!(!rules.has_quorum());
}

#[test]
fn an_approval_under_a_quorum_takes_distinct_identities_and_the_session_agrees() {
    let (mut harness, mut reference) = quorum_session(build_correct, "plan", HookScript::default());
    let mut step = |reference: &mut ReferenceSession, op: Op| {
        let step = reference.apply(&op).clone();
        harness
            .step(reference)
            .unwrap_or_else(|d| panic!("the controller differs: {d}"));
        step
    };
    step(&mut reference, Op::submit(0));
    // An edited plan is refused under the quorum, and nothing changes.
    let edited = decide_plan(
        Revision::Text,
        Some(EditedPlan::Text(0)),
        DecisionAction::Approved,
        Feedback::Omitted,
    );
    let refused = step(&mut reference, edited);
    assert_eq!(refused.expected.outcome, Outcome::Refused(Refusal::Quorum));
    assert!(reference.pending().is_some());
    // A plain approval is two: approver 1 first (approver 1 again is refused), the step's own
    // call as approver 2 hands over.
    let approved = step(&mut reference, Op::approve());
    assert_eq!(approved.quorum, Some(QuorumStep { needed: 2 }));
    assert_eq!(decided_by(&approved), Some(approver(2)));
    assert_eq!(reference.facts().id(reference.mode()), "build");
    // In `build`, a waiting write: always-allow is refused, a rejection by one rejects.
    step(&mut reference, Op::call("write_file"));
    let always = step(&mut reference, Op::always_allow_tool(0));
    assert_eq!(always.expected.outcome, Outcome::Refused(Refusal::Quorum));
    assert!(reference.always_allowed().is_empty());
    let rejected = step(&mut reference, Op::reject_tool(0, None));
    assert_eq!(rejected.quorum, None, "a rejection by one rejects");
    assert_ne!(rejected.expected.outcome, Outcome::Refused(Refusal::Quorum));
    // An approval of a waiting call takes two.
    step(&mut reference, Op::call("write_file"));
    let approved = step(&mut reference, Op::approve_tool(0));
    assert_eq!(approved.quorum, Some(QuorumStep { needed: 2 }));
    assert_eq!(approved.expected.outcome, Outcome::Run(RunState::Completed));
    // In `careful`, the `ask` rule's three.
    step(&mut reference, Op::switch("careful"));
    step(&mut reference, Op::call("write_file"));
    let approved = step(&mut reference, Op::approve_tool(0));
    assert_eq!(approved.quorum, Some(QuorumStep { needed: 3 }));
    assert_eq!(decided_by(&approved), Some(approver(3)));
}

#[test]
fn a_hooks_allow_never_counts_toward_a_quorum() {
    // In `build`, the hook allows `write_file`, which waits for two people all the same.
    let script = HookScript::default().tool("write_file", HookAnswer::Allow);
    let (mut harness, mut reference) = quorum_session(build_correct, "build", script);
    let expected = step_both(&mut harness, &mut reference, Op::call("write_file"));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    assert_eq!(reference.waiting().len(), 1);
}

#[test]
fn a_config_with_a_quorum_passes_the_kit() {
    let report = passed(Check::new(QUORUM).cases(24).seed(41));
    assert!(report.edges.is_complete(), "{report}");
}

#[test]
fn a_controller_that_ignores_the_quorum_is_caught() {
    // Planted bug: the controller runs the config without its `approvers`, so one approval
    // applies what needs two.
    let text = std::fs::read_to_string(QUORUM).expect("the fixture");
    let planted: String = text
        .lines()
        .filter(|line| !line.starts_with("approvers"))
        .map(|line| format!("{line}\n"))
        .collect::<String>()
        .replace(", approvers = 3", "");
    let report = caught(QUORUM, 16, 5, |setup| {
        build_over(setup, &planted, "no-quorum.toml")
    });
    let found = explored_in(&report, Aspect::Outcome);
    let expected = &found.divergence.expected;
    assert!(
        expected.contains("waiting") || expected.contains("Quorum"),
        "{found}"
    );
}
