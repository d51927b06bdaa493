//! The kit against bugs planted in the controller: each fault of issue 14 that a correct
//! controller cannot show, planted from outside (a model layer, a graph with wider tool lists),
//! so the controller itself carries no test-only switches.

use std::collections::HashSet;

use super::*;
use crate::config::ConfigError;
use crate::event::RunState;
use crate::mode::ModeGraph;
use crate::model::{LanguageModel, Message, ModelError, ModelRequest, ModelResponse};
use crate::tool::tasks::TaskStatus;
use crate::tool::{ToolRegistry, ToolSpec};

const MODES: &str = "config/modes.toml";

/// A correct controller: the kit's setup with the workspace tools.
fn build_correct(setup: Setup) -> Result<AgentController, ConfigError> {
    setup
        .builder()
        .tools(ToolRegistry::with_workspace_tools())
        .build()
}

/// A controller with the workspace tools whose model is `wrap` around the kit's model.
fn build_around_model<M: LanguageModel + 'static>(
    setup: Setup,
    wrap: impl FnOnce(Arc<dyn LanguageModel>) -> M,
) -> Result<AgentController, ConfigError> {
    let model = Arc::new(wrap(setup.model()));
    setup
        .builder_with(model)
        .tools(ToolRegistry::with_workspace_tools())
        .build()
}

/// A controller with the workspace tools that runs over the config `text` (named `name`)
/// instead of the checked one, while its model sees what a correct controller offers.
fn build_over(setup: Setup, text: &str, name: &str) -> Result<AgentController, ConfigError> {
    let graph = config::parse(text, name).expect("the planted config");
    let model = setup.model();
    setup
        .builder_for(graph, model)
        .tools(ToolRegistry::with_workspace_tools())
        .build()
}

/// `model`'s answer to `request` with `messages` in place of the request's.
async fn generate_with_messages(
    model: &dyn LanguageModel,
    request: ModelRequest<'_>,
    messages: Vec<Message>,
) -> Result<ModelResponse, ModelError> {
    model
        .generate(ModelRequest {
            messages: &messages,
            ..request
        })
        .await
}

/// The counterexample the exploration of a failed check found.
fn explored(report: &CheckReport) -> &Counterexample {
    report
        .exploration
        .counterexample
        .as_ref()
        .expect("the exploration finds it")
}

/// The counterexample the exploration of a failed check found, which must differ from the
/// reference in `aspect`.
fn explored_in(report: &CheckReport, aspect: Aspect) -> &Counterexample {
    let found = explored(report);
    assert_eq!(found.divergence.aspect, aspect, "{found}");
    found
}

/// Applies `op` to `reference` and the same step to `harness`'s controller, which must agree;
/// returns what the reference expects of the step.
fn step_both(harness: &mut Harness, reference: &mut ReferenceSession, op: Op) -> Expected {
    let step = reference.apply(&op).clone();
    harness
        .step(reference)
        .unwrap_or_else(|d| panic!("the controller differs: {d}"));
    step.expected
}

/// A decision on the pending plan's text, with no `sha256`.
fn decide_plan(
    revision: Revision,
    plan: Option<EditedPlan>,
    action: crate::run::DecisionAction,
    feedback: Feedback,
) -> Op {
    Op::Decide {
        on: Subject::Plan {
            json: false,
            revision,
            to: None,
            plan,
        },
        action,
        feedback,
        sha256: ShaChoice::Omitted,
    }
}

/// Planted bug "no notice after a manual switch": the system message that tells the model of
/// a manual switch never reaches it (an approval's notice, in the approval result, still does).
struct DropsManualNotice(Arc<dyn LanguageModel>);

#[async_trait::async_trait]
impl LanguageModel for DropsManualNotice {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let messages = request
            .messages
            .iter()
            .filter(|m| !matches!(m, Message::System { .. }))
            .cloned()
            .collect();
        generate_with_messages(&*self.0, request, messages).await
    }
}

fn build_without_manual_notice(setup: Setup) -> Result<AgentController, ConfigError> {
    build_around_model(setup, DropsManualNotice)
}

/// Planted bug "a tool the mode does not offer is executed": the controller runs over the same
/// modes without their `availableTools` lists (so it executes every registered tool anywhere),
/// while its model is offered only the tools the config lists, as a correct controller would.
struct OffersListedTools {
    listed: ModeGraph,
    model: Arc<dyn LanguageModel>,
}

#[async_trait::async_trait]
impl LanguageModel for OffersListedTools {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mode = self
            .listed
            .get(request.mode_id)
            .map(|m| self.listed.mode(m));
        let listed = mode.and_then(|m| m.available_tools());
        let tools: Vec<ToolSpec> = request
            .tools
            .iter()
            .filter(|t| listed.is_none_or(|names| names.contains(&t.name)))
            .cloned()
            .collect();
        self.model
            .generate(ModelRequest {
                tools: &tools,
                ..request
            })
            .await
    }
}

/// A builder for the planted bug above, over the config `text`.
fn running_refused_tools(setup: Setup, text: &str) -> crate::controller::AgentControllerBuilder {
    let unlisted: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("availableTools"))
        .map(|line| format!("{line}\n"))
        .collect();
    let graph = config::parse(&unlisted, "unlisted.toml").expect("the config without tool lists");
    let model = Arc::new(OffersListedTools {
        listed: setup.graph().clone(),
        model: setup.model(),
    });
    setup.builder_for(graph, model)
}

fn build_running_refused_tools(setup: Setup) -> Result<AgentController, ConfigError> {
    let text = std::fs::read_to_string(MODES).expect("the shipped config");
    running_refused_tools(setup, &text)
        .tools(declared_read_only(ToolRegistry::with_workspace_tools()))
        .build()
}

/// For the planted bug above: `tools`, each declaring it only reads, so that a planning mode
/// whose tool list was dropped offers them all (a planning mode without `availableTools` offers
/// no tool that writes).
fn declared_read_only(tools: ToolRegistry) -> ToolRegistry {
    let mut lying = ToolRegistry::new();
    for tool in tools.iter() {
        lying
            .register(Arc::new(DeclaresReadOnly(tool.clone())))
            .expect("the names were distinct");
    }
    lying
}

/// A tool that says it only reads, whatever it does.
struct DeclaresReadOnly(Arc<dyn crate::tool::Tool>);

#[async_trait::async_trait]
impl crate::tool::Tool for DeclaresReadOnly {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn description(&self) -> String {
        self.0.description()
    }
    fn input_schema(&self) -> serde_json::Value {
        self.0.input_schema()
    }
    fn access(&self) -> crate::tool::ToolAccess {
        crate::tool::ToolAccess::ReadOnly
    }
    async fn execute(
        &self,
        args: &serde_json::Value,
        ctx: &crate::tool::ToolContext<'_>,
    ) -> crate::tool::ToolOutput {
        self.0.execute(args, ctx).await
    }
}

/// Planted bug "an edited approval hands over the submitted plan": the approval result of an
/// edited plan reaches the model with the submitted plan's text (read from the file it was
/// submitted from) between the markers, as a controller that ignored the edit would send it.
struct HandsOverSubmitted(Arc<dyn LanguageModel>);

/// `result` with the submitted plan in place of the edit, for the approval result of an edit.
fn submitted_instead_of_edit(result: &str) -> Option<String> {
    use crate::tool::submit_plan::{APPROVED_PLAN_BEGIN, APPROVED_PLAN_END};
    let marker = "the plan submitted from `";
    let path_at = result.find(marker)? + marker.len();
    let path = result[path_at..].split('`').next()?;
    let submitted = std::fs::read_to_string(path).ok()?;
    let begin = format!("{APPROVED_PLAN_BEGIN}\n");
    let from = result.find(&begin)? + begin.len();
    let to = result.rfind(&format!("\n{APPROVED_PLAN_END} "))?;
    Some(format!(
        "{}{}{}",
        &result[..from],
        submitted.trim_end(),
        &result[to..]
    ))
}

#[async_trait::async_trait]
impl LanguageModel for HandsOverSubmitted {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let messages = request
            .messages
            .iter()
            .map(|m| {
                let mut m = m.clone();
                if let Message::Tool { content, .. } = &mut m
                    && let Some(replaced) = submitted_instead_of_edit(content)
                {
                    *content = replaced;
                }
                m
            })
            .collect();
        generate_with_messages(&*self.0, request, messages).await
    }
}

fn build_handing_over_submitted(setup: Setup) -> Result<AgentController, ConfigError> {
    build_around_model(setup, HandsOverSubmitted)
}

/// The report of the check of `config` (`cases` random cases from `seed`, no regression file),
/// which must catch the bug planted by `build`.
fn caught<F>(config: &str, cases: u32, seed: u64, build: F) -> CheckReport
where
    F: Fn(Setup) -> Result<AgentController, ConfigError>,
{
    let check = Check::new(config).cases(cases).seed(seed);
    failed(&check.without_regressions(), build)
}

/// The report of `check` (no regression file) of a correct controller, which must pass.
fn passed(check: Check) -> CheckReport {
    check
        .without_regressions()
        .run(build_correct)
        .unwrap_or_else(|e| panic!("a correct controller passes: {e:?}"))
}

fn failed<F>(check: &Check, build: F) -> CheckReport
where
    F: Fn(Setup) -> Result<AgentController, ConfigError>,
{
    match check.run(build) {
        Err(CheckError::Failed(report)) => *report,
        other => panic!("the planted bug was not caught: {other:?}"),
    }
}

#[test]
fn a_tool_run_in_a_mode_that_does_not_offer_it_is_caught() {
    // Fault 1: `write_file` is offered only by `build`, which has no tool list; the old kit
    // never called it in `plan` and judged "not executed" by the error flag.
    let report = caught(MODES, 64, 1, build_running_refused_tools);
    let found = explored_in(&report, Aspect::Events);
    assert!(found.divergence.actual.contains("ToolRan"), "{found}");
    assert!(
        found.divergence.actual.contains("mode: \"plan\""),
        "{found}"
    );
    // The random test finds it too, with this seed or one of the next (the sequences a seed
    // gives change whenever the operations a state offers do: an approved plan's allowance
    // brings revocations in).
    let random = (1..=6).find(|seed| {
        caught(MODES, 64, *seed, build_running_refused_tools)
            .counterexample
            .is_some()
    });
    assert!(random.is_some(), "the random test finds it too");
}

#[test]
fn a_missing_notice_after_a_manual_switch_is_caught() {
    // Fault 2: after a manual switch the last message before the model call is the user's.
    let report = caught(MODES, 64, 2, build_without_manual_notice);
    let found = explored_in(&report, Aspect::Events);
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
    let check = Check::new(MODES).cases(64).seed(3).without_regressions();
    let report = failed(&check, build_without_manual_notice);
    assert!(!report.edges.is_complete(), "{report}");
    let random = report.counterexample.clone().expect("the random test ran");
    let text = report.to_string();
    assert!(text.contains("seed 3"), "{text}");
    assert!(!text.contains("Mode("), "modes by id: {text}");
    assert!(text.contains("item "), "the first differing item: {text}");
    assert_eq!(
        failed(&check, build_without_manual_notice).counterexample,
        Some(random),
        "same seed, same case"
    );
}

#[test]
fn failures_are_kept_in_the_regression_file() {
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("regressions.txt");
    failed(
        &Check::new(MODES).cases(64).seed(4).regressions(&file),
        build_without_manual_notice,
    );
    let kept = std::fs::read_to_string(&file).expect("the regression file");
    assert!(kept.lines().any(|l| l.starts_with("cc ")), "{kept}");
}

#[test]
fn the_shrunk_failure_keeps_no_needless_step() {
    // Fault 5: the steps that change nothing (a switch to the current mode, a blank answer, a
    // refused decision) and the steps the failure does not need are removed.
    let (graph, facts) = loaded(MODES);
    let mut harness = Harness::new(graph, facts, build_without_manual_notice).expect("a harness");
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
availableTools = ["submit_plan", "ask_user"]

[[modes]]
id = "build"
default = true
availableTools = ["scribble", "ask_user"]
"#;

/// The kit's check of [`SCRIBBLE_MODES`] with `scribble` registered; with `planted`, against
/// a controller that runs tools where the modes do not offer them.
fn scribble_check(
    runs: &Arc<AtomicUsize>,
    planted: bool,
) -> (tempfile::TempDir, Result<CheckReport, CheckError>) {
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
            let (builder, tools) = if planted {
                (
                    running_refused_tools(setup, SCRIBBLE_MODES),
                    declared_read_only(tools),
                )
            } else {
                (setup.builder(), tools)
            };
            builder.tools(tools).build().map_err(|e| e.to_string())
        });
    (dir, result)
}

#[test]
fn the_kit_runs_your_tools_where_they_are_offered() {
    // Fault 1: with a correct controller the old kit never ran the user's tools at all.
    let runs = Arc::new(AtomicUsize::new(0));
    let (_dir, result) = scribble_check(&runs, false);
    let report = result.expect("a correct controller passes");
    assert!(report.is_ok());
    assert!(runs.load(Ordering::SeqCst) > 0, "scribble never ran");
}

#[test]
fn a_user_tool_that_writes_and_then_fails_outside_its_mode_is_caught() {
    // Fault 1: "not executed" was judged by the error flag, and scribble reports an error.
    let runs = Arc::new(AtomicUsize::new(0));
    let (_dir, result) = scribble_check(&runs, true);
    let Err(CheckError::Failed(report)) = result else {
        panic!("not caught: {result:?}");
    };
    // The shortest counterexample is `scribble` run in `plan`, whose list leaves it out. Both
    // modes list `ask_user`, which the planted graph's modes (no lists) offer too, so the one
    // divergence the planted graph has is the fault planted.
    let found = explored(&report);
    assert!(found.divergence.actual.contains("scribble"), "{found}");
    assert!(
        found.divergence.actual.contains("mode: \"plan\""),
        "{found}"
    );
}

#[test]
fn the_reference_hands_an_edited_approval_on_with_both_hashes() {
    // Issue 12: an edited approval hands the edit to the next mode; the record names the plan
    // shown and the edit approved.
    let text = std::fs::read_to_string(MODES).expect("the shipped config");
    let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
    let mut reference = ReferenceSession::new(facts, None);
    reference.apply(&Op::switch("plan"));
    reference.apply(&Op::submit(0));
    let step = reference.apply(&Op::approve_edited(1)).clone();
    assert_eq!(step.expected.outcome, Outcome::Run(RunState::Completed));
    let decided = step.expected.trace.iter().find_map(|t| match t {
        Trace::ToolEnded { decided, .. } => decided.clone(),
        _ => None,
    });
    assert_eq!(
        decided,
        Some(Decided {
            sha256: plan_sha256(0),
            approved_sha256: Some(edited_plan_sha256(1)),
            rule: None,
        })
    );
    let handed = step.expected.trace.iter().find_map(|t| match t {
        Trace::ModelCalled { handed_plan, .. } => handed_plan.clone(),
        _ => None,
    });
    assert_eq!(handed.as_deref(), Some(edited_plan_text(1).trim_end()));
    assert_eq!(reference.facts().id(reference.mode()), "build");
    // A blank edit and an edit with a rejection are refused and change nothing.
    reference.apply(&Op::switch("plan"));
    reference.apply(&Op::submit(2));
    let blank = decide_plan(
        Revision::Text,
        Some(EditedPlan::Blank),
        crate::run::DecisionAction::Approved,
        Feedback::Omitted,
    );
    let step = reference.apply(&blank).clone();
    assert_eq!(step.expected.outcome, Outcome::Refused(Refusal::EditedPlan));
    let rejected = decide_plan(
        Revision::Text,
        Some(EditedPlan::Text(0)),
        crate::run::DecisionAction::Rejected,
        Feedback::Omitted,
    );
    let step = reference.apply(&rejected).clone();
    assert_eq!(
        step.expected.outcome,
        Outcome::Refused(Refusal::MalformedDecision)
    );
    assert!(reference.pending().is_some(), "still pending");
}

#[test]
fn an_edited_approval_that_hands_over_the_submitted_plan_is_caught() {
    // Issue 12: the next mode must receive the user's edit, not the plan as submitted.
    // Up to 256 random cases (the search stops at the first failure): the shipped config's
    // modes offer task tools and several shapes of question too, which thin out the messages
    // that reach an edited approval (seed 6 needed more than 128 once they came).
    let report = caught(MODES, 256, 1, build_handing_over_submitted);
    let found = explored_in(&report, Aspect::Events);
    assert!(
        found.divergence.expected.contains("Plan 1, edited"),
        "{found}"
    );
    assert!(found.divergence.actual.contains("handed_plan"), "{found}");
    assert!(
        found.ops.iter().any(|op| matches!(
            op,
            Op::Decide {
                on: Subject::Plan {
                    plan: Some(EditedPlan::Text(_)),
                    ..
                },
                ..
            }
        )),
        "{found}"
    );
    let random = report.counterexample.expect("the random test finds it too");
    assert!(random.to_string().contains("edited"), "{random}");
}

// ---------------------------------------------------------------------------------------------
// Tool calls that wait for approval (issue 12): bugs planted from outside as above.

/// `build` waits for `write_file` (`requireApproval`); `plan` hands over to `build` or
/// `build-auto`.
const APPROVALS: &str = "tests/fixtures/configs/valid/targets-list.toml";

/// The graph of [`APPROVALS`], and the facts the kit reads of it.
fn approvals() -> (ModeGraph, Arc<ConfigFacts>) {
    loaded(APPROVALS)
}

/// The config at `path` (relative to the crate) and its facts.
fn loaded(path: &str) -> (ModeGraph, Arc<ConfigFacts>) {
    let graph = config::load(path).expect("config");
    let text = std::fs::read_to_string(path).expect("config");
    let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
    (graph, facts)
}

/// `text` without its `requireApproval` lines.
fn without_approvals(text: &str) -> String {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("requireApproval"))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Planted bug "a waiting tool runs before its approval": the controller runs over the same
/// modes without their `requireApproval` (so it executes the call at once), while the model
/// sees exactly what a correct controller offers.
fn build_running_before_approval(setup: Setup) -> Result<AgentController, ConfigError> {
    let text = std::fs::read_to_string(APPROVALS).expect("the fixture");
    build_over(setup, &without_approvals(&text), "no-approvals.toml")
}

#[test]
fn a_tool_run_before_its_approval_is_caught() {
    let report = caught(APPROVALS, 64, 5, build_running_before_approval);
    let found = explored_in(&report, Aspect::Outcome);
    // The shortest counterexample: one call to `write_file` in `build`, which ran at once.
    assert_eq!(found.start, "build", "{found}");
    assert_eq!(found.ops, vec![Op::call("write_file")], "{found}");
    assert!(found.divergence.expected.contains("Suspended"), "{found}");
    assert!(!report.edges.is_complete(), "the edge walk misses it too");
    assert!(
        report.counterexample.is_some(),
        "the random test finds it too"
    );
}

/// Planted bug "always-allow outlives a manual switch": a session store that keeps the
/// session's always-allowed tools when a save empties them (only a manual switch does), so a
/// restored session still runs them without asking.
#[derive(Debug, Default)]
struct KeepsAlwaysAllowed {
    inner: crate::store::MemoryStore,
    allowed: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
}

#[async_trait::async_trait]
impl crate::store::SessionStore for KeepsAlwaysAllowed {
    async fn load(
        &self,
        session_id: &str,
    ) -> Result<Option<crate::store::SessionRecord>, crate::store::StoreError> {
        self.inner.load(session_id).await
    }

    async fn save(
        &self,
        record: &crate::store::SessionRecord,
        expected: Option<u64>,
    ) -> Result<(), crate::store::StoreError> {
        let mut record = record.clone();
        {
            let mut allowed = self
                .allowed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let kept = allowed.entry(record.session_id.clone()).or_default();
            if record.always_allowed.is_empty() {
                record.always_allowed = kept.clone();
            } else {
                *kept = record.always_allowed.clone();
            }
        }
        self.inner.save(&record, expected).await
    }

    async fn delete(&self, session_id: &str) -> Result<bool, crate::store::StoreError> {
        self.inner.delete(session_id).await
    }

    async fn list_pending(
        &self,
        now_ms: u64,
    ) -> Result<crate::store::PendingListing, crate::store::StoreError> {
        self.inner.list_pending(now_ms).await
    }

    async fn expire(&self, before: u64) -> Result<usize, crate::store::StoreError> {
        self.inner.expire(before).await
    }
}

fn build_keeping_always_allowed(setup: Setup) -> Result<AgentController, ConfigError> {
    setup
        .builder()
        .tools(ToolRegistry::with_workspace_tools())
        .store(Arc::new(KeepsAlwaysAllowed::default()))
        .build()
}

#[test]
fn an_always_allow_kept_after_a_manual_switch_is_caught() {
    let report = caught(APPROVALS, 64, 6, build_keeping_always_allowed);
    // The edge walk restarts after every edge when the controller has a store: the
    // always-allow ended by a switch is back after the restart.
    let missed: Vec<String> = report
        .edges
        .missed
        .iter()
        .map(|(edge, miss)| format!("{edge}: {miss}"))
        .collect();
    assert!(!missed.is_empty(), "{report}");
    for miss in &missed {
        assert!(miss.contains("manual_ends_always_allow"), "{miss}");
        // The allowances in force are compared first: the restored session holds the tool's
        // allowance (read back from the kept always-allowed list) in the mode switched to.
        assert!(
            miss.contains("expected: allowances in force: []")
                && miss.contains("(mode): write_file in mode"),
            "{miss}"
        );
    }
    // The same controller without the bug passes.
    Check::new(APPROVALS)
        .cases(16)
        .seed(6)
        .without_regressions()
        .run(|setup| {
            setup
                .builder()
                .tools(ToolRegistry::with_workspace_tools())
                .store(Arc::new(crate::store::MemoryStore::new()))
                .build()
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Planted bug "a rejected tool call runs": a model layer that, seeing the result of a
/// rejected tool call, runs the tool anyway (through the kit's spy, as the controller's own
/// call would be seen), as a controller that executes before answering "not approved" does.
struct RunsRejected {
    inner: Arc<dyn LanguageModel>,
    tools: Vec<Arc<dyn crate::tool::Tool>>,
    workspace: std::path::PathBuf,
    seen: std::sync::Mutex<usize>,
}

#[async_trait::async_trait]
impl LanguageModel for RunsRejected {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let fresh: Vec<String> = {
            let mut seen = self
                .seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if request.messages.len() < *seen {
                *seen = 0; // a new session
            }
            let fresh = request.messages[*seen..]
                .iter()
                .filter_map(|m| match m {
                    Message::Tool {
                        tool_name, content, ..
                    } if content.starts_with(crate::machine::rejection::TOOL_REJECTED_RESULT) => {
                        Some(tool_name.clone())
                    }
                    _ => None,
                })
                .collect();
            *seen = request.messages.len();
            fresh
        };
        for name in fresh {
            if let Some(tool) = self.tools.iter().find(|t| t.name() == name) {
                let extensions = crate::extensions::Extensions::default();
                let ctx = crate::tool::ToolContext {
                    workspace: &self.workspace,
                    plans_dir: &self.workspace,
                    mode_id: request.mode_id,
                    session_id: "",
                    run_id: "",
                    tool_call_id: "",
                    cancel: tokio_util::sync::CancellationToken::new(),
                    extensions: &extensions,
                    pending_plans: &(),
                    protected_paths: &[],
                };
                tool.execute(&serde_json::json!({}), &ctx).await;
            }
        }
        self.inner.generate(request).await
    }
}

fn build_running_rejected(setup: Setup) -> Result<AgentController, ConfigError> {
    let spy = setup.spy();
    let registry = ToolRegistry::with_workspace_tools();
    let tools = registry
        .names()
        .filter_map(|n| registry.get(n).cloned())
        .map(|tool| spy(tool))
        .collect();
    let model = Arc::new(RunsRejected {
        inner: setup.model(),
        tools,
        workspace: setup.workspace().to_owned(),
        seen: std::sync::Mutex::new(0),
    });
    setup.builder_with(model).tools(registry).build()
}

#[test]
fn a_rejected_tool_call_that_runs_is_caught() {
    let report = caught(APPROVALS, 64, 7, build_running_rejected);
    let found = explored_in(&report, Aspect::Events);
    assert!(
        found
            .ops
            .iter()
            .any(|op| matches!(op, Op::Decide { on: Subject::ToolCall { .. }, action, .. } if *action == crate::run::DecisionAction::Rejected)),
        "{found}"
    );
    assert!(found.divergence.actual.contains("ToolRan"), "{found}");
    assert!(
        found
            .divergence
            .actual
            .contains(super::harness::STRAY_EXECUTION),
        "{found}"
    );
}

#[test]
fn the_reference_waits_for_every_tool_call_and_runs_the_approved_ones_last() {
    // Issue 12: every waiting call of a reply at once, each its own decision; the run carries
    // on after the last one (rejected results first, then the approved calls in the model's
    // order); always-allow until a manual switch. The real controller agrees step by step.
    let text = std::fs::read_to_string(APPROVALS).expect("the fixture");
    let graph = config::parse(&text, APPROVALS).expect("the fixture");
    let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let mut reference = ReferenceSession::new(harness.facts().clone(), None);
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let suspended = |id: &str, decision: &str| Trace::ToolCallSuspended {
        tool_call_id: id.to_owned(),
        tool: "write_file".to_owned(),
        decision_id: decision.to_owned(),
        args_sha256: tool_args_sha256(),
        rule: None,
        drift: false,
    };
    let ran = |id: &str, tool: &str| Trace::ToolRan {
        tool_call_id: id.to_owned(),
        tool: tool.to_owned(),
        mode: "build".to_owned(),
        allowed_by: None,
        rule: None,
        hooked: false,
    };

    let expected = step(
        &mut reference,
        Op::calls(["write_file", "write_file", "read_file"]),
    );
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    assert_eq!(
        expected.trace[2..],
        [
            ran("call_3", "read_file"),
            suspended("call_1", "decision_1"),
            suspended("call_2", "decision_2"),
            Trace::RunEnded {
                run: 1,
                reason: RunState::Suspended
            },
        ]
    );
    // One decision of two: saved, nothing runs yet; deciding it again is refused.
    let expected = step(&mut reference, Op::reject_tool(1, Some("use another path")));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    assert!(expected.trace.is_empty(), "{:?}", expected.trace);
    let expected = step(&mut reference, Op::approve_tool(1));
    assert_eq!(expected.outcome, Outcome::Refused(Refusal::AlreadyDecided));
    // The last one: the rejection's result with the feedback, then the approved call runs.
    let expected = step(&mut reference, Op::always_allow_tool(0));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Completed));
    assert_eq!(
        expected.trace[1..3],
        [
            Trace::ToolEnded {
                tool_call_id: "call_2".to_owned(),
                is_error: true,
                result: ResultKind::ToolRejectedWithFeedback,
                decided: Some(Decided {
                    sha256: tool_args_sha256(),
                    approved_sha256: None,
                    rule: None,
                }),
            },
            ran("call_1", "write_file"),
        ]
    );
    assert_eq!(reference.always_allowed(), ["write_file".to_owned()]);
    // Always allowed: the next call runs at once, its record naming the allowance (the
    // decision that gave it) and taking a decision id of its own.
    let expected = step(&mut reference, Op::call("write_file"));
    let allowed = Trace::ToolRan {
        tool_call_id: "call_4".to_owned(),
        tool: "write_file".to_owned(),
        mode: "build".to_owned(),
        allowed_by: Some("decision_1".to_owned()),
        rule: None,
        hooked: false,
    };
    assert!(expected.trace.contains(&allowed), "{:?}", expected.trace);
    // A switch to the current mode is no switch; a manual switch ends the always-allow.
    step(&mut reference, Op::switch("build"));
    assert_eq!(reference.always_allowed(), ["write_file".to_owned()]);
    step(&mut reference, Op::switch("plan"));
    step(&mut reference, Op::switch("build"));
    assert!(reference.always_allowed().is_empty());
    let expected = step(&mut reference, Op::call("write_file"));
    assert!(expected.trace.contains(&suspended("call_5", "decision_4")));
    // An abort: the waiting call never runs.
    let expected = step(&mut reference, Op::Abort);
    assert_eq!(expected.outcome, Outcome::Aborted(true));
    assert!(
        !expected
            .trace
            .iter()
            .any(|t| matches!(t, Trace::ToolRan { .. }))
    );
}

#[test]
fn the_reference_ends_an_always_allow_at_the_plan_approval_and_decides_a_replys_calls_at_once() {
    // Issue 19, item 3 and trust round 4, M2: "always allow" on one of three waiting calls of
    // a tool approves that call only; the other two are each decided (here approved by hand),
    // and the approved plan's switch ends the allowance, so the build mode's call of the tool
    // waits. The real controller agrees step by step.
    let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_file\", \"submit_plan\"]\nrequireApproval = [\"write_file\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\nrequireApproval = [\"write_file\"]\n";
    let graph = config::parse(text, "modes.toml").expect("config");
    let facts = Arc::new(ConfigFacts::from_toml(text).expect("facts"));
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let mut reference = ReferenceSession::new(harness.facts().clone(), Some(0));
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let ran = |id: &str, allowed_by: Option<&str>| Trace::ToolRan {
        tool_call_id: id.to_owned(),
        tool: "write_file".to_owned(),
        mode: "plan".to_owned(),
        allowed_by: allowed_by.map(str::to_owned),
        rule: None,
        hooked: false,
    };
    let expected = step(
        &mut reference,
        Op::calls(["write_file", "write_file", "write_file"]),
    );
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    assert_eq!(reference.waiting().len(), 3);
    let expected = step(&mut reference, Op::always_allow_tool(0));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    let undecided =
        |r: &ReferenceSession| r.waiting().iter().filter(|w| w.decided.is_none()).count();
    assert_eq!(undecided(&reference), 2, "the other two are asked about");
    step(&mut reference, Op::approve_tool(1));
    let expected = step(&mut reference, Op::approve_tool(2));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Completed));
    let ran_calls: Vec<&Trace> = expected
        .trace
        .iter()
        .filter(|t| matches!(t, Trace::ToolRan { .. }))
        .collect();
    assert_eq!(
        ran_calls,
        [
            &ran("call_1", None),
            &ran("call_2", None),
            &ran("call_3", None),
        ]
    );
    assert!(reference.waiting().is_empty());
    assert_eq!(reference.always_allowed(), ["write_file".to_owned()]);
    let expected = step(&mut reference, Op::submit(0));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    step(&mut reference, Op::approve());
    assert_eq!(reference.mode(), 1);
    assert!(reference.always_allowed().is_empty());
    let expected = step(&mut reference, Op::call("write_file"));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    assert_eq!(reference.waiting().len(), 1);
}

#[test]
fn the_reference_ends_a_run_at_its_revision_limit() {
    // Issue 19, item 7: a rejection with feedback beyond the run's limit of revisions
    // (`max_revisions`, 1 here) ends the run as failed without calling the model; a new
    // message counts from zero. The real controller agrees step by step.
    let (graph, facts) = loaded(MODES);
    let mut harness = Harness::new(graph, facts, |setup: Setup| {
        setup
            .builder()
            .tools(ToolRegistry::with_workspace_tools())
            .max_revisions(1)
            .build()
    })
    .expect("a harness");
    assert_eq!(harness.facts().max_revisions(), 1);
    let plan = harness.facts().index_of("plan");
    let mut reference = ReferenceSession::new(harness.facts().clone(), plan);
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let revise = |k: u8| {
        decide_plan(
            Revision::Resubmit(k),
            None,
            crate::run::DecisionAction::Rejected,
            Feedback::Text("more detail".to_owned()),
        )
    };
    for _ in 0..2 {
        let expected = step(&mut reference, Op::submit(0));
        assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
        // The one revision the limit allows: the model resubmits.
        let expected = step(&mut reference, revise(1));
        assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
        // One more would exceed it: the run fails, no model call.
        let expected = step(&mut reference, revise(2));
        assert_eq!(expected.outcome, Outcome::Run(RunState::Failed));
        assert!(
            !expected
                .trace
                .iter()
                .any(|t| matches!(t, Trace::ModelCalled { .. })),
            "{:?}",
            expected.trace
        );
        assert!(reference.pending().is_none());
    }
}

#[test]
fn a_failed_check_reads_the_same_with_debug_as_with_display() {
    // Issue 25: `?` in a test printed a 10 KB single-line Debug of `CheckReport`.
    let err = Check::new(MODES)
        .cases(16)
        .seed(3)
        .without_regressions()
        .run(build_without_manual_notice)
        .expect_err("the planted bug");
    let debug = format!("{err:?}");
    assert_eq!(debug, err.to_string());
    assert!(!debug.contains("CheckReport {"), "{debug}");
    assert!(debug.lines().count() > 3, "{debug}");
}

#[test]
fn an_edge_walk_failure_prints_its_path_and_a_replay_command_and_replays() {
    // Issue 25: an edge-walk failure printed as "not exercised", with no path to reproduce it.
    let check = Check::new(MODES).cases(16).seed(3).without_regressions();
    let report = failed(&check, build_without_manual_notice);
    let (edge, miss) = report.edges.missed.first().expect("an edge diverges");
    let Miss::Diverged(found) = miss else {
        panic!("{edge}: {miss}")
    };
    assert!(!found.ops.is_empty(), "the path to the edge: {found}");
    let text = report.to_string();
    assert!(
        text.contains(&format!("diverged at edge {edge}:")),
        "{text}"
    );
    assert!(text.contains("  1. "), "the path: {text}");
    let test =
        "testing::tests::an_edge_walk_failure_prints_its_path_and_a_replay_command_and_replays";
    assert_eq!(report.test.as_deref(), Some(test));
    assert!(
        text.contains(&format!("cargo test {test} -- --exact")),
        "{text}"
    );
    assert!(
        text.contains(&format!("PROPTEST_RNG_SEED=3 cargo test {test}")),
        "{text}"
    );
    // The path replays: the divergence again on the planted bug, none on a correct controller.
    let again = check
        .replay(found, build_without_manual_notice)
        .expect("replayed");
    assert_eq!(again.map(|d| d.aspect), Some(found.divergence.aspect));
    let fixed = check.replay(found, build_correct).expect("replayed");
    assert_eq!(fixed, None);
}

/// Planted bug "something outlives a session": a model layer that, from its 40th call on,
/// drops the system notices (a counter of the controller, not of the session), so a case
/// fails only after the cases before it, and passes alone on a fresh controller.
struct DropsNoticesLate {
    inner: Arc<dyn LanguageModel>,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl LanguageModel for DropsNoticesLate {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < 40 {
            return self.inner.generate(request).await;
        }
        DropsManualNotice(self.inner.clone())
            .generate(request)
            .await
    }
}

#[test]
fn a_random_failure_that_does_not_replay_keeps_its_seed_ops_and_the_results_so_far() {
    // Issue 25: such a failure ended with "the property test stopped", dropping all of it.
    let report = caught(MODES, 256, 5, |setup| {
        build_around_model(setup, |inner| DropsNoticesLate {
            inner,
            calls: AtomicUsize::new(0),
        })
    });
    assert!(!report.replays, "{report}");
    let found = report.counterexample.as_ref().expect("kept");
    assert!(!found.ops.is_empty(), "{report}");
    let text = report.to_string();
    assert!(text.contains("seed 5"), "{text}");
    assert!(text.contains("passed when replayed alone"), "{text}");
    assert!(text.contains("  1. "), "the ops: {text}");
    assert!(text.contains("explored "), "the results so far: {text}");
    assert!(text.contains("differs after"), "the divergence: {text}");
}

#[test]
fn each_check_keeps_its_own_regression_file_named_by_the_test_or_the_config() {
    let check = Check::new(MODES);
    assert_eq!(
        check.regression_file(test_name().as_deref()),
        Some(PathBuf::from(format!(
            "{REGRESSIONS_DIR}/testing-tests-each_check_keeps_its_own_regression_file_named_by_the_test_or_the_config.txt"
        )))
    );
    assert_eq!(
        check.regression_file(None),
        Some(PathBuf::from(format!("{REGRESSIONS_DIR}/modes.toml.txt")))
    );
    assert_eq!(
        check
            .clone()
            .regressions("r.txt")
            .regression_file(Some("t")),
        Some(PathBuf::from("r.txt"))
    );
    assert_eq!(check.without_regressions().regression_file(Some("t")), None);
}

#[test]
fn realistic_configs_stay_in_their_limits_read_well_and_ask_before_writing() {
    use proptest::strategy::ValueTree;
    let tools = ["read_file", "list_files", "write_file", "run_tests"];
    let limits = ConfigLimits::new(2..=4).writing_tools(["write_file", "run_tests"]);
    let strategy = realistic_configs(&tools, limits);
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut writes, mut reads) = (0, 0);
    for _ in 0..200 {
        let spec = strategy.new_tree(&mut runner).expect("a config").current();
        assert!((2..=4).contains(&spec.modes.len()), "{spec:?}");
        crate::config::parse(&spec.to_toml(), "generated.toml").expect("valid");
        for mode in &spec.modes {
            assert!(
                mode.id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                mode.id
            );
            if let Some(name) = &mode.name {
                assert!(
                    name.chars()
                        .all(|c| c.is_ascii_alphabetic() || c == '-' || c.is_ascii_digit()),
                    "{name}"
                );
            }
            if let Approvals::Tools(names) = &mode.require_approval {
                for name in names {
                    if name == "write_file" || name == "run_tests" {
                        writes += 1;
                    } else {
                        reads += 1;
                    }
                }
            }
        }
    }
    assert!(writes > 5 * reads.max(1), "writes {writes}, reads {reads}");
}

#[test]
fn max_states_bounds_the_exploration_and_says_so() {
    let report = passed(Check::new(MODES).max_states(2).cases(4).seed(1));
    assert!(!report.exploration.complete, "{report}");
    let full = passed(Check::new(MODES).cases(4).seed(1));
    assert!(full.exploration.complete);
    assert!(
        report.exploration.transitions < full.exploration.transitions,
        "{report}\n{full}"
    );
    assert!(report.to_string().contains("more states were not explored"));
}

/// A config whose modes have rules: in `build` a deny rule (`read_file`), an allow rule over
/// `requireApproval` (`list_files`) and a path rule no kit call matches (`write_file` waits by
/// `requireApproval`); in `plan` an ask rule (`list_files`).
const RULES: &str = "tests/fixtures/configs/valid/rules.toml";

/// `text` without the lines of its rules whose action is `action`.
fn without_rules(text: &str, action: &str) -> String {
    text.lines()
        .filter(|line| !line.contains(&format!("action = \"{action}\"")))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
fn a_config_with_rules_passes_and_its_rule_edges_are_walked() {
    let report = passed(Check::new(RULES).cases(32).seed(7));
    let causes: Vec<String> = report
        .edges
        .edges
        .iter()
        .map(|e| format!("{e}"))
        .filter(|e| e.contains("rule_"))
        .collect();
    assert_eq!(
        causes,
        [
            "plan --rule_ask--> plan",
            "build --rule_deny--> build",
            "build --rule_allow--> build",
        ]
    );
    assert!(report.edges.is_complete(), "{:?}", report.edges.missed);
}

#[test]
fn a_deny_rule_ignored_is_caught() {
    // Planted bug: the controller runs over the config without its deny rules.
    let report = caught(RULES, 32, 8, |setup| {
        let text = std::fs::read_to_string(RULES).expect("the fixture");
        build_over(setup, &without_rules(&text, "deny"), "no-deny.toml")
    });
    let found = explored(&report);
    assert_eq!(found.start, "build", "{found}");
    assert_eq!(found.ops, vec![Op::call("read_file")], "{found}");
    assert!(found.divergence.expected.contains("Denied"), "{found}");
    assert!(!report.edges.is_complete(), "the edge walk misses it too");
}

#[test]
fn an_always_allow_that_passes_an_ask_rule_is_caught() {
    // Planted bug: the ask rule on `list_files` in `plan` is read as `requireApproval`, so an
    // "always allow" on its call is taken and lets later calls through.
    let report = caught(RULES, 64, 9, |setup| {
        let text = std::fs::read_to_string(RULES).expect("the fixture");
        let text = text.replace(
            "rules = [{ tool = \"list_files\", action = \"ask\" }]",
            "requireApproval = [\"list_files\"]",
        );
        build_over(setup, &text, "asked-by-approval.toml")
    });
    let found = explored(&report);
    // The call waits in `plan`, but as `requireApproval`'s, not as the ask rule's.
    assert!(found.ops.contains(&Op::call("list_files")), "{found}");
    assert!(
        found.divergence.expected.contains("rule: Some(1)"),
        "{found}"
    );
}

/// A controller with the workspace tools over the session store `store`.
fn build_on_store(
    store: Arc<dyn crate::store::SessionStore>,
) -> impl Fn(Setup) -> Result<AgentController, ConfigError> {
    move |setup| {
        setup
            .builder()
            .tools(ToolRegistry::with_workspace_tools())
            .store(store.clone())
            .build()
    }
}

#[test]
fn the_reference_keeps_each_allowance_for_its_scope_and_the_session_agrees() {
    // Issue 23, item 2: `mode` ends at the switch, `session` stays but applies in its own mode
    // only, `workspace` stays into a new session of the same workspace. The real controller
    // agrees step by step (allowances in force compared after each).
    use crate::allowance::AllowanceScope;
    let (graph, facts) = approvals();
    let store: Arc<dyn crate::store::SessionStore> = Arc::new(crate::store::MemoryStore::new());
    let mut harness = Harness::new(graph, facts, build_on_store(store)).expect("a harness");
    assert_eq!(harness.facts().workspace_store(), WorkspaceStore::Keeps);
    let mut reference = ReferenceSession::new(harness.facts().clone(), None).with_restarts(true);
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let scopes = |reference: &ReferenceSession| -> Vec<AllowanceScope> {
        reference.allowances().iter().map(|a| a.scope).collect()
    };
    // `session`: kept across switches, applying in its own mode only.
    step(&mut reference, Op::call("write_file"));
    step(
        &mut reference,
        Op::always_allow_tool_for(0, AllowanceScope::Session),
    );
    step(&mut reference, Op::switch("build-auto"));
    assert!(reference.always_allowed().is_empty());
    assert_eq!(scopes(&reference), [AllowanceScope::Session]);
    step(&mut reference, Op::switch("build"));
    let ran = step(&mut reference, Op::call("write_file"));
    assert_eq!(ran.outcome, Outcome::Run(RunState::Completed));
    assert_eq!(allowed_by(&ran), [Some("decision_1".to_owned())]);
    step(&mut reference, Op::Restart);
    assert_eq!(scopes(&reference), [AllowanceScope::Session]);
    // A new session keeps none of it; `mode` ends at the switch.
    step(&mut reference, Op::NewSession);
    assert!(reference.allowances().is_empty());
    step(&mut reference, Op::call("write_file"));
    step(
        &mut reference,
        Op::always_allow_tool_for(0, AllowanceScope::Mode),
    );
    assert_eq!(scopes(&reference), [AllowanceScope::Mode]);
    step(&mut reference, Op::switch("build-auto"));
    step(&mut reference, Op::switch("build"));
    assert!(reference.allowances().is_empty());
    // `workspace`: into a later session of the same workspace, where it runs the call unasked.
    step(&mut reference, Op::call("write_file"));
    step(
        &mut reference,
        Op::always_allow_tool_for(0, AllowanceScope::Workspace),
    );
    step(&mut reference, Op::NewSession);
    assert_eq!(scopes(&reference), [AllowanceScope::Workspace]);
    let ran = step(&mut reference, Op::call("write_file"));
    assert_eq!(ran.outcome, Outcome::Run(RunState::Completed));
    assert_eq!(
        allowed_by(&ran),
        [Some(ModelAllowance::workspace_id("build", "write_file"))]
    );
}

/// A `write_file` call, then an "always allow" of `scope` for it, stepped on both `reference`
/// and `harness`; returns what the reference expects of the decision.
fn always_allow_a_write(
    harness: &mut Harness,
    reference: &mut ReferenceSession,
    scope: crate::allowance::AllowanceScope,
) -> Expected {
    step_both(harness, reference, Op::call("write_file"));
    step_both(harness, reference, Op::always_allow_tool_for(0, scope))
}

#[test]
fn a_workspace_allowance_without_a_store_is_refused_and_one_a_store_drops_allows_nothing() {
    use crate::allowance::AllowanceScope;
    let (graph, facts) = approvals();
    let mut harness = Harness::new(graph.clone(), facts.clone(), build_correct).expect("a harness");
    assert_eq!(harness.facts().workspace_store(), WorkspaceStore::None);
    let mut reference = ReferenceSession::new(harness.facts().clone(), None);
    harness.start(&reference).expect("the start");
    let refused = always_allow_a_write(&mut harness, &mut reference, AllowanceScope::Workspace);
    assert_eq!(refused.outcome, Outcome::Refused(Refusal::Store));
    assert_eq!(reference.waiting().len(), 1, "nothing changed");
    // A store that keeps no workspace allowance (the trait's default): the decision stands.
    let store: Arc<dyn crate::store::SessionStore> = Arc::new(KeepsAlwaysAllowed::default());
    let mut harness = Harness::new(graph, facts, build_on_store(store)).expect("a harness");
    assert_eq!(harness.facts().workspace_store(), WorkspaceStore::Drops);
    let mut reference = ReferenceSession::new(harness.facts().clone(), None).with_restarts(true);
    harness.start(&reference).expect("the start");
    let decided = always_allow_a_write(&mut harness, &mut reference, AllowanceScope::Workspace);
    assert_eq!(decided.outcome, Outcome::Run(RunState::Completed));
    assert!(reference.allowances().is_empty());
    let asked = step_both(&mut harness, &mut reference, Op::call("write_file"));
    assert_eq!(asked.outcome, Outcome::Run(RunState::Suspended));
}

/// Issue 23, item 2: random sequences (every allowance scope, restarts, new sessions) on a
/// controller in one workspace, each followed by a session of a second controller over the
/// same store in another workspace (another temporary directory), which must start with none
/// of the first's workspace allowances and ask before every call that waits, in every mode.
#[test]
fn a_workspace_allowance_never_applies_in_another_workspace() {
    let (graph, facts) = approvals();
    let store: Arc<dyn crate::store::SessionStore> = Arc::new(crate::store::MemoryStore::new());
    let mut first = Harness::new(graph.clone(), facts.clone(), build_on_store(store.clone()))
        .expect("the first workspace");
    let mut second =
        Harness::new(graph, facts, build_on_store(store)).expect("the second workspace");
    assert_ne!(
        first.controller().workspace(),
        second.controller().workspace()
    );
    let kept = check_other_workspace(&mut first, &mut second, 48, 23)
        .unwrap_or_else(|found| panic!("{found}"));
    assert!(kept > 0, "no case kept a workspace allowance");
}

/// The calls of one reply, each to `tool` with `path` (`None`: `{}`).
fn calls_at(tool: &str, paths: &[Option<CallPath>]) -> Op {
    let calls = paths
        .iter()
        .map(|path| match path {
            Some(path) => Call::ToolAt(tool.to_owned(), *path),
            None => Call::Tool(tool.to_owned()),
        })
        .collect();
    Op::Message {
        calls,
        then: Then::Text,
    }
}

/// An approval of the waiting call at `call` with an "always allow" of `scope`, narrowed to
/// [`NARROWING`] when `narrowed`; `always_allow: false` leaves the scope and pattern without one.
fn allow_at(
    call: usize,
    always_allow: bool,
    scope: Option<crate::allowance::AllowanceScope>,
    narrowed: bool,
) -> Op {
    Op::Decide {
        on: Subject::ToolCall {
            call,
            always_allow,
            scope,
            narrowed,
            by_id: false,
        },
        action: crate::run::DecisionAction::Approved,
        feedback: Feedback::Omitted,
        sha256: ShaChoice::Omitted,
    }
}

/// What each call an allowance ran in a step names as its allowance (`allowedBy`).
fn allowed_by(expected: &Expected) -> Vec<Option<String>> {
    expected
        .trace
        .iter()
        .filter_map(|t| match t {
            Trace::ToolRan { allowed_by, .. } => Some(allowed_by.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_narrowed_allowance_covers_only_calls_that_lead_into_src_and_the_session_agrees() {
    // Issue 23: an "always allow" narrowed to `src/**` approves no other waiting call, runs a
    // later call whose path leads into `src/` (naming itself), and asks about `.env`, about
    // `src/../.env` (the text under `src/`, the path outside) and about a call without a path.
    let (graph, facts) = loaded(APPROVALS);
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let paths = harness.facts().path_tools().to_vec();
    assert!(paths.iter().any(|t| t == "write_file"), "{paths:?}");
    assert!(!paths.iter().any(|t| t == "write_plan"), "{paths:?}");
    let mut reference = ReferenceSession::new(harness.facts().clone(), None);
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let both = step(
        &mut reference,
        calls_at(
            "write_file",
            &[Some(CallPath::Src), Some(CallPath::Outside)],
        ),
    );
    let hashes: Vec<String> = both
        .trace
        .iter()
        .filter_map(|t| match t {
            Trace::ToolCallSuspended { args_sha256, .. } => Some(args_sha256.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        hashes,
        [CallPath::Src.args_sha256(), CallPath::Outside.args_sha256()]
    );
    // A pattern goes with an "always allow" only.
    let refused = step(&mut reference, allow_at(0, false, None, true));
    assert_eq!(
        refused.outcome,
        Outcome::Refused(Refusal::MalformedDecision)
    );
    step(&mut reference, Op::always_allow_narrowed(0));
    assert!(
        reference.waiting()[1].decided.is_none(),
        "the other still waits"
    );
    assert!(reference.always_allowed().is_empty(), "not the whole tool");
    let kept = reference.allowances();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].pattern.as_deref(), Some(NARROWING));
    let done = step(&mut reference, Op::approve_tool(1));
    assert_eq!(done.outcome, Outcome::Run(RunState::Completed));
    let ran = step(
        &mut reference,
        calls_at("write_file", &[Some(CallPath::Src)]),
    );
    assert_eq!(ran.outcome, Outcome::Run(RunState::Completed));
    assert_eq!(allowed_by(&ran), [Some("decision_1".to_owned())]);
    for path in [Some(CallPath::Outside), Some(CallPath::WalksOut), None] {
        let asked = step(&mut reference, calls_at("write_file", &[path]));
        assert_eq!(asked.outcome, Outcome::Run(RunState::Suspended), "{path:?}");
        step(&mut reference, Op::Abort);
    }
}

#[test]
fn a_revoked_allowance_allows_nothing_and_a_revoked_workspace_one_leaves_the_store() {
    // Issue 23: `revoke_allowance` ends an allowance at once; a workspace one is revoked in the
    // store too, so neither a restart nor a new session has it; an id nobody gave changes
    // nothing and returns `false`. The real controller agrees step by step.
    use crate::allowance::AllowanceScope;
    let (graph, facts) = loaded(APPROVALS);
    let store: Arc<dyn crate::store::SessionStore> = Arc::new(crate::store::MemoryStore::new());
    let mut harness = Harness::new(graph, facts, build_on_store(store)).expect("a harness");
    let mut reference = ReferenceSession::new(harness.facts().clone(), None).with_restarts(true);
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let scopes = |reference: &ReferenceSession| -> Vec<AllowanceScope> {
        reference.allowances().iter().map(|a| a.scope).collect()
    };
    // A narrowed `session` allowance on the first call (it approves only that one), a
    // `workspace` one on the second.
    step(
        &mut reference,
        calls_at("write_file", &[Some(CallPath::Src), None]),
    );
    step(
        &mut reference,
        allow_at(0, true, Some(AllowanceScope::Session), true),
    );
    step(
        &mut reference,
        Op::always_allow_tool_for(1, AllowanceScope::Workspace),
    );
    assert_eq!(
        scopes(&reference),
        [AllowanceScope::Session, AllowanceScope::Workspace]
    );
    let unknown = step(&mut reference, Op::Revoke(RevokeChoice::Unknown));
    assert_eq!(unknown.outcome, Outcome::Revoked(false));
    assert_eq!(reference.allowances().len(), 2, "nothing changed");
    let revoked = step(&mut reference, Op::Revoke(RevokeChoice::Last));
    assert_eq!(revoked.outcome, Outcome::Revoked(true));
    assert_eq!(scopes(&reference), [AllowanceScope::Session]);
    // A call without a path: the narrowed one does not cover it, the workspace one is gone.
    let asked = step(&mut reference, Op::call("write_file"));
    assert_eq!(asked.outcome, Outcome::Run(RunState::Suspended));
    step(&mut reference, Op::Restart);
    assert_eq!(
        scopes(&reference),
        [AllowanceScope::Session],
        "not from the store"
    );
    let first = step(&mut reference, Op::Revoke(RevokeChoice::First));
    assert_eq!(first.outcome, Outcome::Revoked(true));
    step(&mut reference, Op::Restart);
    assert!(reference.allowances().is_empty());
    step(&mut reference, Op::NewSession);
    assert!(reference.allowances().is_empty(), "nor in a new session");
    let asked = step(
        &mut reference,
        calls_at("write_file", &[Some(CallPath::Src)]),
    );
    assert_eq!(asked.outcome, Outcome::Run(RunState::Suspended));
}

/// The hostile review's finding 1 and trust round 4, M2, library and reference alike: an
/// "always allow" approved the reply's other call of its tool unseen. It approves the call it
/// is given at only: the other write waits, revoked or not, so deciding the third call does not
/// resume the run. A workspace allowance that a store drops: the decision that gave it stands,
/// and the other write still waits.
#[test]
fn a_revoke_takes_back_what_the_allowance_approved_in_the_reply() {
    use crate::allowance::AllowanceScope;
    let undecided = |reference: &ReferenceSession| {
        reference
            .waiting()
            .iter()
            .filter(|w| w.decided.is_none())
            .count()
    };
    // Two writes and a read wait; the first write is always allowed with `scope`.
    let allowed_in_a_reply = |harness: &mut Harness, scope| {
        let mut reference = ReferenceSession::new(harness.facts().clone(), None)
            .with_restarts(harness.controller().store().is_some());
        harness.start(&reference).expect("the start");
        step_both(
            harness,
            &mut reference,
            Op::calls(["write_file", "write_file", "read_file"]),
        );
        step_both(harness, &mut reference, Op::always_allow_tool_for(0, scope));
        assert_eq!(
            undecided(&reference),
            2,
            "the second write is asked about, not approved with it"
        );
        reference
    };
    let (graph, facts) = loaded("tests/fixtures/configs/valid/require-approval-all.toml");
    let mut harness = Harness::new(graph.clone(), facts.clone(), build_correct).expect("a harness");
    let mut reference = allowed_in_a_reply(&mut harness, AllowanceScope::Session);
    let revoked = step_both(
        &mut harness,
        &mut reference,
        Op::Revoke(RevokeChoice::First),
    );
    assert_eq!(revoked.outcome, Outcome::Revoked(true));
    assert_eq!(undecided(&reference), 2, "the second write still waits");
    let decided = step_both(&mut harness, &mut reference, Op::approve_tool(2));
    assert_eq!(decided.outcome, Outcome::Run(RunState::Suspended));
    assert_eq!(undecided(&reference), 1);

    let store: Arc<dyn crate::store::SessionStore> = Arc::new(KeepsAlwaysAllowed::default());
    let mut harness = Harness::new(graph, facts, build_on_store(store)).expect("a harness");
    assert_eq!(harness.facts().workspace_store(), WorkspaceStore::Drops);
    let mut reference = allowed_in_a_reply(&mut harness, AllowanceScope::Workspace);
    assert!(reference.allowances().is_empty(), "the store dropped it");
    let decided = step_both(&mut harness, &mut reference, Op::approve_tool(2));
    assert_eq!(decided.outcome, Outcome::Run(RunState::Suspended));
    assert_eq!(undecided(&reference), 1, "the second write still waits");
}

/// A config whose modes offer `ask_user` (one by its list, the planning one for lack of one),
/// beside a write that waits for approval and an `approvalTimeout`.
const QUESTIONS: &str = "tests/fixtures/configs/questions.toml";

#[test]
fn the_kit_covers_questions_answered_refused_declined_expired_and_cancelled() {
    let report = passed(Check::new(QUESTIONS).cases(24).seed(37));
    let causes: Vec<Cause> = report.edges.edges.iter().map(|e| e.cause).collect();
    for cause in [
        Cause::AnswerQuestion,
        Cause::DeclineQuestion,
        Cause::AbortQuestion,
        Cause::ExpireQuestion,
        Cause::AnswerBesideTool,
        Cause::AnswerThenApprove,
    ] {
        assert!(causes.contains(&cause), "{cause} among {causes:?}");
    }
    assert!(report.edges.is_complete(), "{report}");
    // The explorer answers, declines and refuses answers in every state a question waits in:
    // a question beside a waiting call, answered or not, is a state of its own.
    assert!(report.exploration.states > 20, "{report}");
}

/// A host's `ask_user` behind a layer that rebuilds each output from its text and error
/// flag, and so loses the suspension: the question never waits.
struct Rebuilt(Arc<dyn crate::tool::Tool>);

#[async_trait::async_trait]
impl crate::tool::Tool for Rebuilt {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn description(&self) -> String {
        self.0.description()
    }
    fn input_schema(&self) -> serde_json::Value {
        self.0.input_schema()
    }
    fn access(&self) -> crate::tool::ToolAccess {
        self.0.access()
    }
    async fn execute(
        &self,
        args: &serde_json::Value,
        ctx: &crate::tool::ToolContext<'_>,
    ) -> crate::tool::ToolOutput {
        let output = self.0.execute(args, ctx).await;
        if output.is_error {
            crate::tool::ToolOutput::error(output.content)
        } else {
            crate::tool::ToolOutput::ok(output.content)
        }
    }
}

#[test]
fn a_tool_layer_that_loses_a_questions_suspension_is_caught() {
    let report = caught(QUESTIONS, 16, 3, |setup: Setup| {
        let mut tools = ToolRegistry::with_workspace_tools();
        tools
            .register(Arc::new(Rebuilt(Arc::new(crate::tool::ask_user::AskUser))))
            .expect("a free name");
        setup.builder().tools(tools).build()
    });
    // The shortest counterexample: one question in `build`, which never waited.
    let found = explored_in(&report, Aspect::Outcome);
    assert_eq!(found.ops, vec![Op::ask()], "{found}");
    assert!(found.divergence.expected.contains("Suspended"), "{found}");
}

/// The shipped pair with the task tools listed in `plan` (`build`, with no list, offers them
/// too), so an approved plan's numbered steps seed `build`'s task list.
const TASKS: &str = "tests/fixtures/configs/tasks.toml";

#[test]
fn a_config_that_lists_the_task_tools_passes_and_its_other_edges_are_walked() {
    let report = passed(Check::new(TASKS).cases(16).seed(1));
    assert!(report.edges.is_complete(), "{report}");
    let causes: Vec<Cause> = report.edges.edges.iter().map(|e| e.cause).collect();
    assert!(causes.contains(&Cause::AnswerQuestion), "{causes:?}");
}

/// Issue 37: a builder that registers the crate's `submit_plan` is checked as one that does
/// not: the config offers it the same, a run never executes it, and the kit walks its plans.
#[test]
fn a_builder_that_registers_submit_plan_passes_the_kit() {
    let check = Check::new("config/modes.toml").cases(16).seed(37);
    let report = check
        .without_regressions()
        .run(|setup: Setup| {
            let mut tools = ToolRegistry::with_workspace_tools();
            tools
                .register(Arc::new(crate::tool::submit_plan::SubmitPlan))
                .expect("the crate's submit_plan");
            setup.builder().tools(tools).build()
        })
        .unwrap_or_else(|e| panic!("a controller with the registered submit_plan passes: {e:?}"));
    assert!(report.edges.is_complete(), "{report}");
    let causes: Vec<Cause> = report.edges.edges.iter().map(|e| e.cause).collect();
    assert!(causes.contains(&Cause::Approve), "{causes:?}");
}

/// Issue 38: the kit drives the task tools. Step by step beside the real session on the
/// config that lists them in `plan` (`build`, with no list, offers them too): a valid list,
/// a refused list (two in progress, a repeated id), an unknown id, an update that puts another
/// task in progress, a completion and a check; then a plan approved into `build` seeds its list
/// with the plan's numbered steps. After each step the session's list is the reference's.
#[test]
fn the_kit_drives_the_task_tools_and_compares_the_list_a_plan_approval_seeds() {
    let text = std::fs::read_to_string(TASKS).expect("the fixture");
    let graph = config::parse(&text, TASKS).expect("the fixture");
    let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let plan = harness.facts().index_of("plan").expect("plan");
    let mut reference = ReferenceSession::new(harness.facts().clone(), Some(plan));
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let listed = |reference: &ReferenceSession| -> Vec<(String, TaskStatus)> {
        reference
            .tasks()
            .iter()
            .map(|t| (t.id.clone(), t.status))
            .collect()
    };
    let task = |call| Op::Message {
        calls: vec![Call::Task(call)],
        then: Then::Text,
    };
    let ended = |expected: &Expected| -> Vec<bool> {
        expected
            .trace
            .iter()
            .filter_map(|t| match t {
                Trace::ToolEnded { is_error, .. } => Some(*is_error),
                _ => None,
            })
            .collect()
    };
    // Nothing to update yet: an unknown id is refused, and so is a list with two in progress.
    assert_eq!(ended(&step(&mut reference, task(TaskCall::Start))), [true]);
    assert_eq!(
        ended(&step(&mut reference, task(TaskCall::WriteTwoInProgress))),
        [true]
    );
    assert_eq!(
        ended(&step(&mut reference, task(TaskCall::WriteRepeatedIds))),
        [true]
    );
    assert!(reference.tasks().is_empty());
    assert_eq!(ended(&step(&mut reference, task(TaskCall::Write))), [false]);
    let (one, two) = ("step_1".to_owned(), "step_2".to_owned());
    assert_eq!(
        listed(&reference),
        [
            (one.clone(), TaskStatus::InProgress),
            (two.clone(), TaskStatus::Pending)
        ]
    );
    // `step_2` in progress puts `step_1` back to pending.
    assert_eq!(ended(&step(&mut reference, task(TaskCall::Start))), [false]);
    assert_eq!(
        listed(&reference),
        [
            (one.clone(), TaskStatus::Pending),
            (two.clone(), TaskStatus::InProgress)
        ]
    );
    assert_eq!(
        ended(&step(&mut reference, task(TaskCall::Complete))),
        [false]
    );
    assert_eq!(
        ended(&step(&mut reference, task(TaskCall::UpdateUnknown))),
        [true]
    );
    assert_eq!(ended(&step(&mut reference, task(TaskCall::Check))), [false]);
    assert_eq!(
        listed(&reference),
        [
            (one.clone(), TaskStatus::Completed),
            (two.clone(), TaskStatus::InProgress)
        ]
    );
    // An approved plan's numbered steps become `build`'s list, all pending.
    step(&mut reference, Op::submit(2));
    step(&mut reference, Op::approve());
    let seeded: Vec<(String, String, TaskStatus)> = reference
        .tasks()
        .iter()
        .map(|t| (t.id.clone(), t.content.clone(), t.status))
        .collect();
    assert_eq!(
        seeded,
        [
            (one, "Do step 2.".to_owned(), TaskStatus::Pending),
            (two, "Test it.".to_owned(), TaskStatus::Pending)
        ]
    );
}

/// A host tool that takes `task_write`'s name and says it wrote the list, but keeps none.
struct ForgetfulTaskWrite;

#[async_trait::async_trait]
impl crate::tool::Tool for ForgetfulTaskWrite {
    fn name(&self) -> &str {
        crate::tool::tasks::TASK_WRITE
    }
    fn description(&self) -> String {
        crate::tool::tasks::TaskWrite.description()
    }
    fn input_schema(&self) -> serde_json::Value {
        crate::tool::tasks::TaskWrite.input_schema()
    }
    fn access(&self) -> crate::tool::ToolAccess {
        crate::tool::ToolAccess::ReadOnly
    }
    async fn execute(
        &self,
        _: &serde_json::Value,
        _: &crate::tool::ToolContext<'_>,
    ) -> crate::tool::ToolOutput {
        crate::tool::ToolOutput::ok("Task list written.")
    }
}

#[test]
fn a_task_write_that_keeps_no_list_is_caught() {
    let report = caught(TASKS, 16, 38, |setup: Setup| {
        let mut tools = ToolRegistry::with_workspace_tools();
        tools
            .register(Arc::new(ForgetfulTaskWrite))
            .expect("a free name");
        setup.builder().tools(tools).build()
    });
    let found = explored(&report);
    assert!(
        found
            .ops
            .iter()
            .any(|op| matches!(op, Op::Message { calls, .. } if calls.iter().any(|c| matches!(c, Call::Task(_))))),
        "{found}"
    );
}

/// A config whose `build` offers `ask_user` and the kit's own suspending tool (`kit_confirm`)
/// beside a write that waits for approval.
const ASKS: &str = "tests/fixtures/configs/asks.toml";

/// The workspace tools and the kit's own suspending tool.
fn tools_with_confirm() -> ToolRegistry {
    let mut tools = ToolRegistry::with_workspace_tools();
    tools.register(Arc::new(ConfirmTool)).expect("a free name");
    tools
}

fn build_with_confirm(setup: Setup) -> Result<AgentController, ConfigError> {
    setup.builder().tools(tools_with_confirm()).build()
}

/// What the answers of the generated scenarios (`sessions`, 256 sequences) to each kind of
/// waiting call did: the kinds whose answer was taken, and those whose answer was refused
/// for not fitting.
fn answers_generated(config: &str) -> (HashSet<Ask>, HashSet<Ask>) {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let tools = tools_with_confirm();
    let text = std::fs::read_to_string(config).expect("the config");
    let facts = Arc::new(
        ConfigFacts::from_toml(&text)
            .expect("facts")
            .with_tools(tools.names().map(str::to_owned).collect::<Vec<_>>())
            .with_writing_tools(super::facts::writing_tools(&tools)),
    );
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[37; 32]),
    );
    let (mut taken, mut refused) = (HashSet::new(), HashSet::new());
    for _ in 0..256 {
        let (mut reference, ops, _) = sessions(&facts, 24, false)
            .new_tree(&mut runner)
            .expect("a sequence")
            .current();
        for op in &ops {
            let asked = match op {
                Op::Decide {
                    on:
                        Subject::Question {
                            call,
                            answer: Some(_),
                            ..
                        },
                    action: crate::run::DecisionAction::Answered,
                    ..
                } => reference.waiting().get(*call).and_then(|w| w.asks),
                _ => None,
            };
            let outcome = reference.apply(op).expected.outcome;
            match (asked, outcome) {
                (Some(ask), Outcome::Refused(Refusal::InvalidAnswer)) => refused.insert(ask),
                (Some(ask), Outcome::Run(_)) => taken.insert(ask),
                _ => false,
            };
        }
    }
    (taken, refused)
}

#[test]
fn the_generated_scenarios_answer_every_kind_of_question_and_a_tool_of_ones_own() {
    let (taken, refused) = answers_generated(ASKS);
    for ask in Ask::ALL {
        assert!(
            taken.contains(&ask),
            "an answer to {ask:?} taken: {taken:?}"
        );
    }
    // A free-text question takes any text: only an answer of the wrong type is refused.
    for ask in Ask::ALL {
        assert!(
            refused.contains(&ask),
            "an answer to {ask:?} refused: {refused:?}"
        );
    }
}

#[test]
fn the_kit_drives_free_text_multi_select_and_custom_tool_answers() {
    let report = Check::new(ASKS)
        .cases(24)
        .seed(37)
        .without_regressions()
        .run(build_with_confirm)
        .unwrap_or_else(|e| panic!("a correct controller passes: {e:?}"));
    assert!(report.edges.is_complete(), "{report}");
    // The explorer asks each shape: a waiting multi-select question, free-text question and
    // confirmation are states of their own.
    let ops = operations(&report_facts(ASKS), false);
    for ask in [Ask::MultiSelect, Ask::FreeText, Ask::Confirm] {
        assert!(ops.contains(&Op::ask_with(ask)), "{ask:?} among {ops:?}");
    }
}

/// The facts of `config` with the workspace tools and the kit's own suspending tool.
fn report_facts(config: &str) -> ConfigFacts {
    let tools = tools_with_confirm();
    ConfigFacts::from_toml(&std::fs::read_to_string(config).expect("the config"))
        .expect("facts")
        .with_tools(tools.names().map(str::to_owned).collect::<Vec<_>>())
        .with_writing_tools(super::facts::writing_tools(&tools))
}

/// The kit's own suspending tool with a planted bug: its answer schema lost `required` and
/// `additionalProperties`, so an object without `confirm` is taken.
struct LaxConfirm;

#[async_trait::async_trait]
impl crate::tool::Tool for LaxConfirm {
    fn name(&self) -> &str {
        ConfirmTool.name()
    }
    fn description(&self) -> String {
        ConfirmTool.description()
    }
    fn input_schema(&self) -> serde_json::Value {
        ConfirmTool.input_schema()
    }
    async fn execute(
        &self,
        args: &serde_json::Value,
        ctx: &crate::tool::ToolContext<'_>,
    ) -> crate::tool::ToolOutput {
        let mut output = ConfirmTool.execute(args, ctx).await;
        if let Some(suspension) = output.suspension.as_mut() {
            suspension.answer_schema = serde_json::json!({ "type": "object" });
        }
        output
    }
    async fn resume(
        &self,
        args: &serde_json::Value,
        answer: &serde_json::Value,
        ctx: &crate::tool::ToolContext<'_>,
    ) -> crate::tool::ToolOutput {
        ConfirmTool.resume(args, answer, ctx).await
    }
}

#[test]
fn a_custom_tool_that_takes_an_answer_its_schema_should_refuse_is_caught() {
    let report = caught(ASKS, 16, 3, |setup: Setup| {
        let mut tools = ToolRegistry::with_workspace_tools();
        tools.register(Arc::new(LaxConfirm)).expect("a free name");
        setup.builder().tools(tools).build()
    });
    let found = explored_in(&report, Aspect::Outcome);
    assert!(
        found.divergence.expected.contains("InvalidAnswer"),
        "{found}"
    );
}

/// A config with two subagent types: `plan` may start `explore` (read-only there), `build`
/// both; a child's write waits by `build`'s `requireApproval` (explore) or by its type's own
/// (scribe, an `ask` rule in the child).
const SUBAGENTS: &str = "tests/fixtures/configs/subagents.toml";

/// A `subagent` call starting `agent_type`, whose child does `child`.
fn start(agent_type: &str, child: ChildStep) -> Call {
    Call::Subagent(SubagentCall::Start {
        agent_type: agent_type.to_owned(),
        child,
    })
}

/// A message on which the model makes `calls`, then answers.
fn message(calls: Vec<Call>) -> Op {
    Op::Message {
        calls,
        then: Then::Text,
    }
}

#[test]
fn the_reference_runs_children_and_refuses_bad_subagent_calls_and_the_session_agrees() {
    let (graph, facts) = loaded(SUBAGENTS);
    let mut harness = Harness::new(graph, facts, build_correct).expect("a harness");
    let mut reference = ReferenceSession::new(harness.facts().clone(), None);
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let ended = |expected: &Expected| -> Vec<ResultKind> {
        expected
            .trace
            .iter()
            .filter_map(|t| match t {
                Trace::ToolEnded { result, .. } => Some(*result),
                _ => None,
            })
            .collect()
    };
    let child_tools = |expected: &Expected| -> Vec<Vec<String>> {
        expected
            .trace
            .iter()
            .filter_map(|t| match t {
                Trace::ChildModelCalled { tools, .. } => Some(tools.clone()),
                _ => None,
            })
            .collect()
    };
    // A known type answers at once: its answer is the call's result, and the run goes on.
    let answered = step(
        &mut reference,
        message(vec![start("explore", ChildStep::Answers)]),
    );
    assert_eq!(answered.outcome, Outcome::Run(RunState::Completed));
    assert_eq!(ended(&answered), [ResultKind::SubagentAnswer]);
    assert_eq!(
        child_tools(&answered),
        [["ask_user", "list_files", "read_file", "write_file"]],
        "build's tools, never subagent"
    );
    // An unknown type and an empty task: refused, and the session goes on.
    for refused in [
        SubagentCall::UnknownType,
        SubagentCall::EmptyTask("explore".to_owned()),
    ] {
        let done = step(&mut reference, message(vec![Call::Subagent(refused)]));
        assert_eq!(done.outcome, Outcome::Run(RunState::Completed));
        assert_eq!(ended(&done), [ResultKind::Other]);
        assert!(child_tools(&done).is_empty(), "no child started");
    }
    // The scribe's `list_files` is denied in the child: refused there, the child answers.
    let denied = step(
        &mut reference,
        message(vec![start(
            "scribe",
            ChildStep::Calls("list_files".to_owned()),
        )]),
    );
    assert_eq!(ended(&denied), [ResultKind::SubagentAnswer]);
    assert!(
        !denied
            .trace
            .iter()
            .any(|t| matches!(t, Trace::ChildToolRan { .. }))
    );
    // In `plan` a type its list leaves out is refused, and `explore`'s child reads only.
    step(&mut reference, Op::switch("plan"));
    let forbidden = step(
        &mut reference,
        message(vec![start("scribe", ChildStep::Answers)]),
    );
    assert_eq!(ended(&forbidden), [ResultKind::Other]);
    let read_only = step(
        &mut reference,
        message(vec![start(
            "explore",
            ChildStep::Calls("write_file".to_owned()),
        )]),
    );
    assert_eq!(child_tools(&read_only)[0], ["ask_user", "read_file"]);
    assert_eq!(ended(&read_only), [ResultKind::SubagentAnswer]);
}

#[test]
fn a_childs_wait_suspends_the_parent_beside_its_own_and_survives_a_restart() {
    let (graph, facts) = loaded(SUBAGENTS);
    let store: Arc<dyn crate::store::SessionStore> = Arc::new(crate::store::MemoryStore::new());
    let mut harness = Harness::new(graph, facts, build_on_store(store)).expect("a harness");
    let mut reference = ReferenceSession::new(harness.facts().clone(), None).with_restarts(true);
    harness.start(&reference).expect("the start");
    let mut step = |reference: &mut ReferenceSession, op| step_both(&mut harness, reference, op);
    let children = |reference: &ReferenceSession| -> Vec<Option<String>> {
        reference
            .waiting()
            .iter()
            .map(|w| w.child.as_ref().map(|c| c.agent_type.clone()))
            .collect()
    };
    // The scribe's write waits by its type's requireApproval, an `ask` rule of the child's
    // (its record's number 0: the type's requireApproval, not a rule of build's nor of the
    // type's list), beside build's own write, which waits by build's requireApproval: one
    // suspension.
    let suspended = step(
        &mut reference,
        message(vec![
            start("scribe", ChildStep::Calls("write_file".to_owned())),
            Call::Tool("write_file".to_owned()),
        ]),
    );
    assert_eq!(suspended.outcome, Outcome::Run(RunState::Suspended));
    assert_eq!(children(&reference), [Some("scribe".to_owned()), None]);
    assert_eq!(reference.waiting()[0].rule, Some(0));
    assert!(suspended.trace.iter().any(|t| matches!(
        t,
        Trace::ChildWaits { origin, .. } if origin.agent_type == "scribe"
    )));
    // Restored from the store, both still wait; approved, both writes run, the child answers.
    step(&mut reference, Op::Restart);
    assert_eq!(children(&reference).len(), 2);
    step(&mut reference, Op::approve_tool(1));
    let done = step(&mut reference, Op::approve_tool(0));
    assert_eq!(done.outcome, Outcome::Run(RunState::Completed));
    assert!(done.trace.iter().any(|t| matches!(
        t,
        Trace::ChildToolRan { tool, resumed: false, .. } if tool == "write_file"
    )));
    // The explorer's child writes by build's requireApproval: rejected, it never runs.
    let waits = step(
        &mut reference,
        message(vec![start(
            "explore",
            ChildStep::Calls("write_file".to_owned()),
        )]),
    );
    assert_eq!(waits.outcome, Outcome::Run(RunState::Suspended));
    assert_eq!(reference.waiting()[0].rule, None);
    let rejected = step(&mut reference, Op::reject_tool(0, Some("not now")));
    assert_eq!(rejected.outcome, Outcome::Run(RunState::Completed));
    assert!(
        !rejected
            .trace
            .iter()
            .any(|t| matches!(t, Trace::ChildToolRan { .. }))
    );
    // A child's question, answered; and one aborted.
    step(
        &mut reference,
        message(vec![start(
            "explore",
            ChildStep::Calls(crate::tool::ASK_USER.to_owned()),
        )]),
    );
    assert!(reference.waiting()[0].asks.is_some());
    let answered = step(&mut reference, Op::answer_question(0));
    assert!(
        answered
            .trace
            .iter()
            .any(|t| matches!(t, Trace::ChildToolRan { resumed: true, .. }))
    );
    step(
        &mut reference,
        message(vec![start(
            "explore",
            ChildStep::Calls("write_file".to_owned()),
        )]),
    );
    let aborted = step(&mut reference, Op::Abort);
    assert_eq!(aborted.outcome, Outcome::Aborted(true));
    assert!(reference.waiting().is_empty());
}

#[test]
fn the_kit_covers_subagents_answered_refused_waiting_and_beside_the_parents_wait() {
    let report = passed(Check::new(SUBAGENTS).cases(32).seed(38));
    let causes: Vec<Cause> = report.edges.edges.iter().map(|e| e.cause).collect();
    for cause in [
        Cause::SubagentAnswers,
        Cause::SubagentRefused,
        Cause::ApproveChildTool,
        Cause::RejectChildTool,
        Cause::AnswerChildQuestion,
        Cause::ChildBesideTool,
        Cause::AbortChild,
    ] {
        assert!(causes.contains(&cause), "{cause} among {causes:?}");
    }
    assert!(report.edges.is_complete(), "{report}");
}

/// Planted bug "a child is offered more than its parent's mode": a model layer that offers
/// each child (a request whose system prompt is a subagent's) every tool it has seen offered
/// to a parent, in any mode.
struct WidensChildren {
    model: Arc<dyn LanguageModel>,
    seen: std::sync::Mutex<Vec<ToolSpec>>,
}

#[async_trait::async_trait]
impl LanguageModel for WidensChildren {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let child = request.system_prompt.starts_with("You are a subagent");
        let tools: Vec<ToolSpec> = {
            let mut seen = self.seen.lock().expect("the lock");
            let mut tools = request.tools.to_vec();
            if child {
                tools.extend(
                    seen.iter()
                        .filter(|t| !request.tools.iter().any(|o| o.name == t.name))
                        .cloned(),
                );
            } else {
                for tool in request.tools {
                    if !seen.iter().any(|t| t.name == tool.name) {
                        seen.push(tool.clone());
                    }
                }
            }
            tools
        };
        self.model
            .generate(ModelRequest {
                tools: &tools,
                ..request
            })
            .await
    }
}

#[test]
fn a_child_offered_a_tool_its_parents_mode_lacks_is_caught() {
    let report = caught(SUBAGENTS, 16, 38, |setup: Setup| {
        build_around_model(setup, |model| WidensChildren {
            model,
            seen: std::sync::Mutex::default(),
        })
    });
    let found = explored_in(&report, Aspect::Events);
    assert!(
        found
            .ops
            .iter()
            .any(|op| matches!(op, Op::Message { calls, .. } if calls.iter().any(|c| matches!(c, Call::Subagent(_))))),
        "{found}"
    );
    assert!(
        found.divergence.expected.contains("ChildModelCalled"),
        "{found}"
    );
}

/// `text` without the `rules` of its subagent types (their lines before the first
/// `[[modes]]`).
fn without_type_rules(text: &str) -> String {
    let modes = text.find("[[modes]]").unwrap_or(text.len());
    let (types, rest) = text.split_at(modes);
    let types: String = types
        .lines()
        .filter(|line| !line.trim_start().starts_with("rules"))
        .map(|line| format!("{line}\n"))
        .collect();
    format!("{types}{rest}")
}

#[test]
fn a_child_whose_types_deny_rule_is_lost_is_caught() {
    // The host's graph forgets the scribe's `deny` rule on `list_files`: its child lists.
    let report = caught(SUBAGENTS, 16, 38, |setup: Setup| {
        let text = std::fs::read_to_string(SUBAGENTS).expect("the config");
        build_over(setup, &without_type_rules(&text), "lost.toml")
    });
    // The shortest counterexample starts a scribe in `build`: its write waits by the wrong
    // rule (the lost `deny` was rule 1), or its `list_files` runs.
    let found = explored_in(&report, Aspect::Events);
    assert!(
        matches!(
            found.ops.last(),
            Some(Op::Message { calls, .. })
                if matches!(&calls[..], [Call::Subagent(SubagentCall::Start { agent_type, .. })] if agent_type == "scribe")
        ),
        "{found}"
    );
}

/// A harness over [`RULES`] (built by `build`) and a reference in `mode` whose hook answers
/// `script`, both started.
fn hooked_session(
    build: impl FnOnce(Setup) -> Result<AgentController, ConfigError>,
    mode: &str,
    script: HookScript,
) -> (Harness, ReferenceSession) {
    let (graph, facts) = loaded(RULES);
    let mut harness = Harness::new(graph, facts, build).expect("a harness");
    let start = harness.facts().index_of(mode);
    let reference = ReferenceSession::new(harness.facts().clone(), start).with_hooks(script);
    harness.start(&reference).expect("the start");
    (harness, reference)
}

/// The result of call `id` in `trace`, when it ended without running.
fn ended_as(trace: &[Trace], id: &str) -> Option<ResultKind> {
    trace.iter().find_map(|t| match t {
        Trace::ToolEnded {
            tool_call_id,
            result,
            ..
        } if tool_call_id == id => Some(*result),
        _ => None,
    })
}

#[test]
fn a_hook_narrows_and_never_widens_in_the_reference_and_the_controller() {
    // In `build`: `read_file` is denied by a rule, `write_file` waits (`requireApproval`),
    // `list_files` runs by an allow rule.
    let script = HookScript::default()
        .tool("read_file", HookAnswer::Allow)
        .tool("write_file", HookAnswer::Allow)
        .tool("list_files", HookAnswer::Deny);
    let (mut harness, mut reference) = hooked_session(build_correct, "build", script);
    let op = Op::calls(["read_file", "write_file", "list_files"]);
    let expected = step_both(&mut harness, &mut reference, op);
    assert_eq!(expected.outcome, Outcome::Run(RunState::Completed));
    let trace = &expected.trace;
    // The hook's allow does not pass the deny rule.
    assert_eq!(
        ended_as(trace, "call_1"),
        Some(ResultKind::Denied),
        "{trace:?}"
    );
    // It runs the call that would wait, and its record names the hook.
    assert!(
        trace.iter().any(|t| matches!(t, Trace::ToolRan { tool_call_id, hooked: true, rule: None, .. } if tool_call_id == "call_2")),
        "{trace:?}"
    );
    // Its deny refuses a call an allow rule would run.
    assert_eq!(
        ended_as(trace, "call_3"),
        Some(ResultKind::HookDenied),
        "{trace:?}"
    );

    // Ask, and a hook that fails, are as without hooks: the call waits.
    for answer in [HookAnswer::Ask, HookAnswer::Error] {
        let script = HookScript::default().tool("write_file", answer);
        let (mut harness, mut reference) = hooked_session(build_correct, "build", script);
        let expected = step_both(&mut harness, &mut reference, Op::call("write_file"));
        assert_eq!(
            expected.outcome,
            Outcome::Run(RunState::Suspended),
            "{answer:?}"
        );
        assert_eq!(reference.waiting().len(), 1, "{answer:?}");
    }
}

#[test]
fn a_hook_rejects_a_plan_and_never_approves_one() {
    // Deny: the plan is rejected at once with the hook's reason as feedback; the model goes on.
    let script = HookScript::default().plan(HookAnswer::Deny);
    let (mut harness, mut reference) = hooked_session(build_correct, "plan", script);
    let expected = step_both(&mut harness, &mut reference, Op::submit(0));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Completed));
    assert_eq!(
        ended_as(&expected.trace, "call_1"),
        Some(ResultKind::RejectedWithFeedback),
        "{:?}",
        expected.trace
    );
    assert!(reference.pending().is_none());
    // Allow is no objection: the plan waits for a person.
    let script = HookScript::default().plan(HookAnswer::Allow);
    let (mut harness, mut reference) = hooked_session(build_correct, "plan", script);
    let expected = step_both(&mut harness, &mut reference, Op::submit(0));
    assert_eq!(expected.outcome, Outcome::Run(RunState::Suspended));
    assert!(reference.pending().is_some());
}

#[test]
fn a_hook_allow_that_widens_a_denied_call_is_caught() {
    // Planted bug: the controller reads `read_file`'s deny rule as an ask rule, so the hook's
    // allow lets the call through; the kit expects it refused by the rule.
    let widening = |setup: Setup| {
        let text = std::fs::read_to_string(RULES).expect("the fixture");
        let text = text.replace(
            "{ tool = \"read_file\", action = \"deny\" }",
            "{ tool = \"read_file\", action = \"ask\" }",
        );
        build_over(setup, &text, "hook-widens.toml")
    };
    let script = HookScript::default().tool("read_file", HookAnswer::Allow);
    let (mut harness, mut reference) = hooked_session(widening, "build", script);
    reference.apply(&Op::call("read_file"));
    let found = harness.step(&reference).expect_err("the planted bug");
    assert!(found.expected.contains("Denied"), "{found}");
    assert!(found.actual.contains("hooked: true"), "{found}");
}

#[test]
fn a_hook_deny_that_still_runs_the_tool_is_caught() {
    // Planted bug: the controller never hears the kit's hook, so the call its hook denies
    // runs (an allow rule lets `list_files` run); the kit expects it refused by the hook.
    let deaf = |setup: Setup| build_correct(setup.deaf());
    let script = HookScript::default().tool("list_files", HookAnswer::Deny);
    let (mut harness, mut reference) = hooked_session(deaf, "build", script);
    reference.apply(&Op::call("list_files"));
    let found = harness.step(&reference).expect_err("the planted bug");
    assert!(found.expected.contains("HookDenied"), "{found}");
    assert!(found.actual.contains("ToolRan"), "{found}");
}

#[test]
fn a_tool_that_suspends_itself_is_never_given_a_hook_verdict() {
    // The controller asks its hooks before any call of the reply runs; a tool that suspends
    // itself (`ask_user`, the kit's `kit_confirm`) is not scripted: the kit's hook has no say
    // on it, so it asks whatever the script names, in the reference and in the controller.
    let script = HookScript::default()
        .tool(CONFIRM_TOOL, HookAnswer::Deny)
        .tool(crate::tool::ASK_USER, HookAnswer::Allow)
        .tool("read_file", HookAnswer::Deny);
    assert_eq!(script.on_tool(CONFIRM_TOOL), None);
    assert_eq!(script.on_tool(crate::tool::ASK_USER), None);
    let graph = config::load(ASKS).expect("config");
    let facts = Arc::new(report_facts(ASKS));
    for ask in [Ask::Confirm, Ask::Select] {
        let mut harness =
            Harness::new(graph.clone(), facts.clone(), build_with_confirm).expect("a harness");
        let mut reference =
            ReferenceSession::new(harness.facts().clone(), None).with_hooks(script.clone());
        harness.start(&reference).expect("the start");
        let asked = step_both(&mut harness, &mut reference, Op::ask_with(ask));
        assert_eq!(asked.outcome, Outcome::Run(RunState::Suspended), "{ask:?}");
        assert_eq!(reference.waiting()[0].asks, Some(ask));
        // Beside it, a plain tool's deny still refuses its call.
        step_both(&mut harness, &mut reference, Op::Abort);
        let denied = step_both(&mut harness, &mut reference, Op::call("read_file"));
        assert!(
            denied.trace.iter().any(|t| matches!(
                t,
                Trace::ToolEnded {
                    result: ResultKind::HookDenied,
                    ..
                }
            )),
            "{:?}",
            denied.trace
        );
    }
}

mod quorum;
/// The kit on an approved plan's files (issue 40).
mod scope;
