//! The kit against bugs planted in the controller (test builds only, `crate::run::planted`):
//! each fault of issue 14 that a correct controller cannot show.

use std::cell::Cell;
use std::thread::LocalKey;

use super::*;
use crate::config::ConfigError;
use crate::run::planted;
use crate::tool::ToolRegistry;

const MODES: &str = "config/modes.toml";

fn build(setup: Setup) -> Result<AgentController, ConfigError> {
    setup
        .builder()
        .tools(ToolRegistry::with_workspace_tools())
        .build()
}

/// Plants `bug` on this thread (the kit drives sessions on the calling thread) while it lives.
struct Planted(&'static LocalKey<Cell<bool>>);

impl Planted {
    fn new(bug: &'static LocalKey<Cell<bool>>) -> Self {
        bug.with(|b| b.set(true));
        Self(bug)
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        self.0.with(|b| b.set(false));
    }
}

fn failed(check: &Check) -> CheckReport {
    match check.run(build) {
        Err(CheckError::Failed(report)) => *report,
        other => panic!("the planted bug was not caught: {other:?}"),
    }
}

#[test]
fn a_tool_run_in_a_mode_that_does_not_offer_it_is_caught() {
    // Fault 1: `write_file` is offered only by `build`, which has no tool list; the old kit
    // never called it in `plan` and judged "not executed" by the error flag.
    let _bug = Planted::new(&planted::RUN_REFUSED_TOOLS);
    let report = failed(&Check::new(MODES).cases(64).seed(1).without_regressions());
    let found = report
        .exploration
        .counterexample
        .expect("the exploration finds it");
    assert_eq!(found.divergence.aspect, Aspect::Events, "{found}");
    assert!(found.divergence.actual.contains("ToolRan"), "{found}");
    assert!(
        found.divergence.actual.contains("mode: \"plan\""),
        "{found}"
    );
    assert!(
        report.counterexample.is_some(),
        "the random test finds it too"
    );
}

#[test]
fn a_missing_notice_after_a_manual_switch_is_caught() {
    // Fault 2: after a manual switch the last message before the model call is the user's.
    let _bug = Planted::new(&planted::NO_MANUAL_NOTICE);
    let report = failed(&Check::new(MODES).cases(64).seed(2).without_regressions());
    let found = report
        .exploration
        .counterexample
        .expect("the exploration finds it");
    assert_eq!(found.divergence.aspect, Aspect::Events, "{found}");
    assert!(
        found.divergence.expected.contains("told_mode_change: true"),
        "{found}"
    );
    assert!(
        found.ops.iter().any(|op| matches!(op, Op::Switch(_))),
        "{found}"
    );
}

#[test]
fn every_part_of_the_check_runs_and_reports_with_its_seed() {
    // Fault 5: an edge-walk miss does not stop the random test, the seed is printed and
    // replays the same failure, modes are named by id, and only the differing item is shown.
    let _bug = Planted::new(&planted::NO_MANUAL_NOTICE);
    let check = Check::new(MODES).cases(64).seed(3).without_regressions();
    let report = failed(&check);
    assert!(!report.edges.is_complete(), "{report}");
    let random = report.counterexample.clone().expect("the random test ran");
    let text = report.to_string();
    assert!(text.contains("seed 3"), "{text}");
    assert!(!text.contains("Mode("), "modes by id: {text}");
    assert!(text.contains("item "), "the first differing item: {text}");
    assert_eq!(
        failed(&check).counterexample,
        Some(random),
        "same seed, same case"
    );
}

#[test]
fn failures_are_kept_in_the_regression_file() {
    let _bug = Planted::new(&planted::NO_MANUAL_NOTICE);
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("regressions.txt");
    failed(&Check::new(MODES).cases(64).seed(4).regressions(&file));
    let kept = std::fs::read_to_string(&file).expect("the regression file");
    assert!(kept.lines().any(|l| l.starts_with("cc ")), "{kept}");
}

#[test]
fn the_shrunk_failure_keeps_no_needless_step() {
    // Fault 5: the steps that change nothing (a switch to the current mode, a blank answer, a
    // refused decision) and the steps the failure does not need are removed.
    let _bug = Planted::new(&planted::NO_MANUAL_NOTICE);
    let graph = config::load(MODES).expect("the shipped config");
    let text = std::fs::read_to_string(MODES).expect("the shipped config");
    let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
    let mut harness = Harness::new(graph, facts, build).expect("a harness");
    let initial = ReferenceSession::new(harness.facts().clone(), None);
    let ops = vec![
        Op::message(),
        Op::switch("build"),
        Op::Answer(Some(String::new())),
        Op::DecideUnknownRun,
        Op::switch("plan"),
        Op::message(),
    ];
    let (at, divergence) = harness.run(&initial, &ops).expect_err("the bug");
    assert_eq!(at, Some(5));
    let (ops, _) = without_unneeded_ops(&mut harness, &initial, ops, divergence);
    assert_eq!(ops, vec![Op::switch("plan"), Op::message()]);
}

/// A user tool that writes into the workspace and then reports an error, counting its runs.
struct Scribble(Arc<AtomicUsize>);

#[async_trait::async_trait]
impl crate::tool::Tool for Scribble {
    fn name(&self) -> &str {
        "scribble"
    }

    fn description(&self) -> String {
        "Writes a note, then fails.".to_owned()
    }

    fn input_schema(&self) -> serde_json::Value {
        serde_json::json!({ "type": "object" })
    }

    async fn execute(
        &self,
        _: &serde_json::Value,
        ctx: &crate::tool::ToolContext<'_>,
    ) -> crate::tool::ToolOutput {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        let _ = std::fs::write(ctx.workspace.join(format!("note-{n}.txt")), "scribbled");
        crate::tool::ToolOutput::error("scribble failed after writing")
    }
}

const SCRIBBLE_MODES: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["scribble"]
"#;

fn scribble_check(runs: &Arc<AtomicUsize>) -> (tempfile::TempDir, Result<CheckReport, CheckError>) {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("modes.toml");
    std::fs::write(&path, SCRIBBLE_MODES).expect("the config");
    let runs = runs.clone();
    let result = Check::new(&path)
        .cases(32)
        .seed(5)
        .without_regressions()
        .run(move |setup| {
            let mut tools = ToolRegistry::new();
            tools
                .register(Arc::new(Scribble(runs.clone())))
                .map_err(|e| e.to_string())?;
            setup
                .builder()
                .tools(tools)
                .build()
                .map_err(|e| e.to_string())
        });
    (dir, result)
}

#[test]
fn the_kit_runs_your_tools_where_they_are_offered() {
    // Fault 1: with a correct controller the old kit never ran the user's tools at all.
    let runs = Arc::new(AtomicUsize::new(0));
    let (_dir, result) = scribble_check(&runs);
    let report = result.expect("a correct controller passes");
    assert!(report.is_ok());
    assert!(runs.load(Ordering::SeqCst) > 0, "scribble never ran");
}

#[test]
fn a_user_tool_that_writes_and_then_fails_outside_its_mode_is_caught() {
    // Fault 1: "not executed" was judged by the error flag, and scribble reports an error.
    let _bug = Planted::new(&planted::RUN_REFUSED_TOOLS);
    let runs = Arc::new(AtomicUsize::new(0));
    let (_dir, result) = scribble_check(&runs);
    let Err(CheckError::Failed(report)) = result else {
        panic!("not caught: {result:?}");
    };
    let found = report
        .exploration
        .counterexample
        .expect("the exploration finds it");
    assert!(found.divergence.actual.contains("scribble"), "{found}");
    assert!(
        found.divergence.actual.contains("mode: \"plan\""),
        "{found}"
    );
}
