//! The kit on an approved plan's files: the reference binds writes to them under each
//! `planScope`, the session agrees, the explorer visits those states, and planted bugs in the
//! scope rule are caught.

use super::*;

/// A config whose `plan` mode (`planScope = "enforce"`) hands over to `build`, where
/// `write_file` waits by `requireApproval`.
const PLAN_SCOPE: &str = "tests/fixtures/configs/valid/plan-scope.toml";

/// [`PLAN_SCOPE`]'s text with `planScope` set to `policy` (`None`: the key left out, `ask`).
fn plan_scope_text(policy: Option<&str>) -> String {
    let text = std::fs::read_to_string(PLAN_SCOPE).expect("the fixture");
    let line = "planScope = \"enforce\"\n";
    assert!(text.contains(line), "the fixture sets planScope");
    text.replace(
        line,
        &policy.map_or_else(String::new, |p| format!("planScope = \"{p}\"\n")),
    )
}

/// The outcome and trace of one write in `build` after a plan that declares its files was
/// approved, by `planScope`: the reference predicts, the real session agrees at every step.
#[test]
fn the_reference_binds_writes_to_the_approved_plans_files_under_each_plan_scope_and_the_session_agrees()
 {
    use crate::allowance::AllowanceScope;
    use crate::plan::PlanScopePolicy;
    for policy in [None, Some("enforce"), Some("off")] {
        let text = plan_scope_text(policy);
        let graph = config::parse(&text, "plan-scope.toml").expect("valid");
        let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
        let expected_policy = match policy {
            Some("enforce") => PlanScopePolicy::Enforce,
            Some("off") => PlanScopePolicy::Off,
            _ => PlanScopePolicy::Ask,
        };
        assert_eq!(facts.plan_scope(0), expected_policy);
        let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
        assert_eq!(harness.facts().path_writers(), ["write_file"]);
        let mut reference = ReferenceSession::new(harness.facts().clone(), Some(0));
        harness.start(&reference).expect("the start");
        let mut step =
            |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
        // A plan without a `## Files` section grants and binds nothing.
        step(&mut reference, Op::submit(0));
        step(&mut reference, Op::approve());
        assert!(reference.allowances().is_empty(), "{policy:?}");
        let asked = step(
            &mut reference,
            calls_at("write_file", &[Some(CallPath::Outside)]),
        );
        assert_eq!(asked.outcome, Outcome::Run(RunState::Suspended));
        assert!(
            !reference.waiting()[0].drift,
            "requireApproval asks, no drift"
        );
        step(&mut reference, Op::Abort);
        // The scoped plan declares `src/a.txt`; its approval (decision 3) grants it under ask and
        // enforce.
        step(&mut reference, Op::switch("plan"));
        step(&mut reference, Op::submit_scoped());
        assert_eq!(
            reference.pending().map(|p| p.decision_id.as_str()),
            Some("decision_3")
        );
        step(&mut reference, Op::approve());
        let granted = reference.allowances();
        if expected_policy == PlanScopePolicy::Off {
            assert!(granted.is_empty(), "off grants nothing");
        } else {
            assert_eq!(granted.len(), 1, "{granted:?}");
            assert_eq!(granted[0].scope, AllowanceScope::Plan);
            assert_eq!(
                (granted[0].mode.as_str(), granted[0].id.as_str()),
                ("build", "decision_3")
            );
            assert!(
                reference.always_allowed().is_empty(),
                "it allows files, not a tool"
            );
        }
        // Inside the files: it runs unasked, its record naming the plan's allowance.
        let inside = step(
            &mut reference,
            calls_at("write_file", &[Some(CallPath::Src)]),
        );
        if expected_policy == PlanScopePolicy::Off {
            assert_eq!(inside.outcome, Outcome::Run(RunState::Suspended));
            step(&mut reference, Op::Abort);
        } else {
            assert_eq!(inside.outcome, Outcome::Run(RunState::Completed));
            assert_eq!(allowed_by(&inside), [Some("decision_3".to_owned())]);
        }
        // Outside them (another path, a path that walks out of `src/`, no path at all).
        for path in [Some(CallPath::Outside), Some(CallPath::WalksOut), None] {
            let outside = step(&mut reference, calls_at("write_file", &[path]));
            let ran = outside
                .trace
                .iter()
                .any(|t| matches!(t, Trace::ToolRan { .. }));
            assert!(
                !ran,
                "{policy:?} {path:?}: a write outside the plan never runs unasked"
            );
            match expected_policy {
                PlanScopePolicy::Enforce => {
                    assert_eq!(outside.outcome, Outcome::Run(RunState::Completed));
                    assert!(
                        outside.trace.iter().any(|t| matches!(
                            t,
                            Trace::ToolEnded {
                                result: ResultKind::OutsidePlan,
                                is_error: true,
                                ..
                            }
                        )),
                        "{path:?}: {:?}",
                        outside.trace
                    );
                }
                _ => {
                    assert_eq!(outside.outcome, Outcome::Run(RunState::Suspended));
                    let drift = expected_policy == PlanScopePolicy::Ask;
                    assert_eq!(reference.waiting()[0].drift, drift, "{path:?}");
                    // Approved, a drift runs (the user saw which file).
                    let approved = step(&mut reference, Op::approve_tool(0));
                    assert_eq!(approved.outcome, Outcome::Run(RunState::Completed));
                }
            }
        }
        // A mode change ends the plan's allowance: back in build, a write inside waits again.
        step(&mut reference, Op::switch("plan"));
        step(&mut reference, Op::switch("build"));
        assert!(reference.allowances().is_empty());
        let again = step(
            &mut reference,
            calls_at("write_file", &[Some(CallPath::Src)]),
        );
        assert_eq!(again.outcome, Outcome::Run(RunState::Suspended));
        assert!(!reference.waiting()[0].drift);
        step(&mut reference, Op::Abort);
    }
}

#[test]
fn the_next_approved_plan_ends_the_earlier_plans_allowance_and_a_deny_rule_still_wins() {
    use crate::allowance::AllowanceScope;
    // `write_file` has a deny rule in `build`; the session goes back to `plan` by hand for
    // each next plan.
    let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\nplanScope = \"ask\"\n\n\
                [[modes]]\nid = \"build\"\ndefault = true\n\
                rules = [{ tool = \"write_file\", action = \"deny\" }]\n";
    let graph = config::parse(text, "deny.toml").expect("valid");
    let facts = Arc::new(ConfigFacts::from_toml(text).expect("facts"));
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let mut reference = ReferenceSession::new(harness.facts().clone(), Some(0));
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    step(&mut reference, Op::submit_scoped());
    step(&mut reference, Op::approve());
    assert_eq!(reference.allowances()[0].scope, AllowanceScope::Plan);
    // Inside the files, the deny rule still refuses.
    let denied = step(
        &mut reference,
        calls_at("write_file", &[Some(CallPath::Src)]),
    );
    assert!(denied.trace.iter().any(|t| matches!(
        t,
        Trace::ToolEnded {
            result: ResultKind::Denied,
            ..
        }
    )));
    // The next approved plan ends the first's allowance: the same plan again gives its own.
    step(&mut reference, Op::switch("plan"));
    step(&mut reference, Op::submit_scoped());
    step(&mut reference, Op::approve());
    let kept = reference.allowances();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        kept[0].id, "decision_3",
        "the second approval's, not the first's"
    );
    step(&mut reference, Op::switch("plan"));
    step(&mut reference, Op::submit(0));
    step(&mut reference, Op::approve());
    assert!(
        reference.allowances().is_empty(),
        "plan 0 declares no files"
    );
}

#[test]
fn a_write_outside_the_plan_that_is_not_refused_under_enforce_is_caught() {
    // Planted bug: the controller runs `plan` with `planScope = "ask"` where the config says
    // `enforce`, so a write outside the approved plan's files waits instead of being refused.
    let report = caught(PLAN_SCOPE, 32, 11, |setup| {
        build_over(setup, &plan_scope_text(Some("ask")), "ask.toml")
    });
    let found = explored(&report);
    assert!(found.ops.contains(&Op::approve()), "{found}");
    // The write outside is refused and the run goes on; the controller made it wait.
    assert!(
        found
            .ops
            .last()
            .is_some_and(|op| matches!(op, Op::Message { .. })),
        "{found}"
    );
    assert_eq!(found.divergence.aspect, Aspect::Outcome, "{found}");
    assert!(found.divergence.actual.contains("Suspended"), "{found}");
}

#[test]
fn a_controller_whose_approved_plan_grants_and_binds_nothing_is_caught() {
    // Planted bug: the controller runs `plan` with `planScope = "off"` where the config asks:
    // the approval gives no allowance of scope `plan`, so writes outside the files run.
    let report = caught(MODES, 32, 12, |setup| {
        let text = std::fs::read_to_string(MODES).expect("the config");
        let text = text.replacen(
            "transitionsTo = \"build\"\n",
            "transitionsTo = \"build\"\nplanScope = \"off\"\n",
            1,
        );
        assert!(text.contains("planScope"));
        build_over(setup, &text, "off.toml")
    });
    let found = explored(&report);
    assert!(found.ops.contains(&Op::submit_scoped()), "{found}");
    assert!(found.divergence.expected.contains("(plan)"), "{found}");
}

#[test]
fn the_explorer_visits_the_states_an_approved_plans_files_bind_and_drift_in() {
    // `config/modes.toml` asks (the default): a write outside the files drifts.
    let (graph, facts) = loaded(MODES);
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let asked = explore(&mut harness);
    assert!(asked.is_ok(), "{asked}");
    assert!(asked.scoped > 0 && asked.drifting > 0, "{asked:?}");
    // Under `enforce` nothing drifts: a write outside is refused.
    let (graph, facts) = loaded(PLAN_SCOPE);
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let enforced = explore(&mut harness);
    assert!(enforced.is_ok(), "{enforced}");
    assert!(enforced.scoped > 0, "{enforced:?}");
    assert_eq!(enforced.drifting, 0, "{enforced:?}");
}

#[test]
fn only_the_scoped_plan_declares_files_so_the_ordinary_submissions_split_no_state() {
    for k in 0..PLAN_COUNT {
        assert!(!plan_declares_files(k), "plan {k}");
        assert!(!plan_text(k).contains("## Files"), "plan {k}");
    }
    assert!(plan_declares_files(SCOPED_PLAN));
    assert!(
        plan_text(SCOPED_PLAN).contains(&format!("- `{PLAN_FILES}`")),
        "{}",
        plan_text(SCOPED_PLAN)
    );
    assert_eq!(
        Op::submit_scoped(),
        Op::submit_file(PlanFile::Valid(SCOPED_PLAN))
    );
}

/// Whether `op` submits the plan that declares its files.
fn submits_scoped(op: &Op) -> bool {
    matches!(op, Op::Message { calls, .. } if calls.iter().any(|c| matches!(
        c,
        Call::SubmitPlan(PlanFile::Valid(k)) if plan_declares_files(*k)
    )))
}

#[test]
fn the_explorer_submits_the_scoped_plan_once_and_only_where_a_target_mode_writes_at_a_path() {
    let registry = ToolRegistry::with_workspace_tools();
    // `config/modes.toml`: `plan` hands over to `build`, which offers `write_file`.
    let text = std::fs::read_to_string(MODES).expect("the config");
    let facts = ConfigFacts::from_toml(&text)
        .expect("facts")
        .with_registry(&registry);
    let ops = operations(&facts, false);
    assert_eq!(ops.iter().filter(|op| submits_scoped(op)).count(), 1);
    assert!(ops.contains(&Op::submit_scoped()));
    for path in [CallPath::Src, CallPath::WalksOut] {
        let write = Op::Message {
            calls: vec![Call::ToolAt("write_file".to_owned(), path)],
            then: Then::Text,
        };
        assert!(ops.contains(&write), "{path:?}");
    }
    // A target mode that writes nothing at a path (nor does the mode it could be switched to by
    // hand matter: only a hand-over binds): no scoped plan, no writes for it.
    let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"review\"\n\n\
                [[modes]]\nid = \"review\"\ndefault = true\navailableTools = [\"read_file\"]\n\n\
                [[modes]]\nid = \"build\"\n";
    let facts = ConfigFacts::from_toml(text)
        .expect("facts")
        .with_registry(&registry);
    let ops = operations(&facts, false);
    assert!(!ops.iter().any(submits_scoped), "{ops:?}");
    assert!(
        !ops.iter().any(|op| matches!(
            op,
            Op::Message { calls, .. } if calls.iter().any(|c| matches!(c, Call::ToolAt(..)))
        )),
        "{ops:?}"
    );
}

#[test]
fn the_explorer_reaches_no_scoped_state_where_no_target_mode_writes_at_a_path() {
    let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"review\"\n\n\
                [[modes]]\nid = \"review\"\ndefault = true\navailableTools = [\"read_file\"]\n";
    let graph = config::parse(text, "review.toml").expect("valid");
    let facts = Arc::new(ConfigFacts::from_toml(text).expect("facts"));
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let walked = explore(&mut harness);
    assert!(walked.is_ok(), "{walked}");
    assert_eq!((walked.scoped, walked.drifting), (0, 0), "{walked:?}");
}

#[test]
fn a_write_outside_the_plan_that_runs_under_enforce_is_caught() {
    // Planted bug: the controller runs `plan` with `planScope = "off"` where the config says
    // `enforce`, and `build` asks for nothing: a write outside the approved plan's files runs
    // where it must be refused unasked.
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("enforce.toml");
    let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\nplanScope = \"enforce\"\n\n\
                [[modes]]\nid = \"build\"\ndefault = true\n";
    std::fs::write(&path, text).expect("the config");
    let path = path.to_str().expect("a UTF-8 path");
    let report = caught(path, 32, 13, |setup| {
        build_over(setup, &text.replace("enforce", "off"), "off.toml")
    });
    let found = explored(&report);
    assert!(found.ops.contains(&Op::submit_scoped()), "{found}");
    assert!(found.ops.contains(&Op::approve()), "{found}");
    // The first step that differs: the approval grants the plan's allowance, which would
    // refuse the write; the planted controller grants nothing.
    assert_eq!(found.ops.last(), Some(&Op::approve()), "{found}");
    assert!(found.divergence.expected.contains("(plan)"), "{found}");
}

/// A write of a tool the mode does not offer is refused as not offered, and the approved plan's
/// files do not bind it: a plan submitted beside it waits as a plan. (`draft` lists
/// `submit_plan` without `transitionsTo`, so its approved plan hands over to `a`, the first
/// mode, which plans but offers no writing tool.) The reference once bound that call as drift
/// and refused the plan beside it, while the controller suspended on the plan.
#[test]
fn a_write_the_mode_does_not_offer_holds_back_no_plan_beside_it() {
    let text = "[[modes]]\nid = \"a\"\ndefault = true\ntransitionsTo = \"draft\"\n\
                availableTools = [\"read_file\", \"submit_plan\"]\n\n\
                [[modes]]\nid = \"draft\"\n\
                availableTools = [\"read_file\", \"write_file\", \"submit_plan\"]\n";
    let graph = config::parse(text, "modes.toml").expect("valid");
    let facts = Arc::new(ConfigFacts::from_toml(text).expect("facts"));
    let store: Arc<dyn crate::store::SessionStore> = Arc::new(crate::store::MemoryStore::new());
    let mut harness = Harness::new(graph, facts, super::build_on_store(store)).expect("a harness");
    let mut reference = ReferenceSession::new(harness.facts().clone(), None).with_restarts(true);
    harness.start(&reference).expect("the start");
    let a = harness.facts().index_of("a").expect("mode a");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    step(&mut reference, Op::switch("draft"));
    step(
        &mut reference,
        Op::submit_file(PlanFile::Valid(crate::testing::SCOPED_PLAN)),
    );
    step(&mut reference, Op::approve());
    assert_eq!(reference.mode(), a, "the plan hands over to the first mode");
    assert!(
        !reference.allowances().is_empty(),
        "the plan's files are allowed in `a`"
    );
    let both = Op::Message {
        calls: vec![
            Call::SubmitPlan(PlanFile::Valid(0)),
            Call::Tool("write_file".to_owned()),
        ],
        then: Then::Text,
    };
    let expected = step(&mut reference, both);
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    assert!(reference.pending().is_some(), "the plan waits");
}
