//! The testing kit against history bugs planted as a user would plant them: a session store
//! wrapped from outside the crate, each with one bug that shows only after a restart, a
//! decision, or both (issue 25, item 4). The exploration must catch each, not the random test
//! by chance: it replays every decision that changes the session in a process restarted before
//! and after each decision on its path.
//!
//! Each test prints what caught the bug, in how long, and the counterexample
//! (`cargo test --all-features --test it kit_plants:: -- --nocapture`).
#![cfg(feature = "testing")]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agent_controller::store::{PendingListing, SessionRecord};
use agent_controller::testing::{Check, CheckError, CheckReport};
use agent_controller::{
    MemoryStore, SessionStore, ToolRegistry, event::DecisionOutcome, store::StoreError,
};

/// A plan goes to `build` or `build-auto`; `build` asks before `write_file`.
const TARGETS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/configs/valid/targets-list.toml"
);

/// The one bug a [`Planted`] store has.
#[derive(Clone, Copy, Debug)]
enum Bug {
    /// A plan approved in a restored session is saved in the wrong mode: the other target.
    ApprovalToTheOtherTargetAfterRestart,
    /// A plan rejected in a restored session is saved in its target mode, as if approved.
    RejectionSwitchesAfterRestart,
    /// A record read with a plan pending is cached (for a review page, say) and served on
    /// every later read: after a restart that follows an approval decided in a restored
    /// session, the approved plan is pending again.
    StaleReadCache,
    /// A save that empties the always-allowed tools keeps the ones saved before (a "merge"
    /// save): a manual switch's end of an always-allow does not survive a restart.
    KeepsAlwaysAllowed,
}

/// A [`MemoryStore`] with one planted [`Bug`].
struct Planted {
    inner: MemoryStore,
    bug: Bug,
    /// Sessions read from the store (restored after a restart), with the record read.
    read: Mutex<HashMap<String, SessionRecord>>,
    /// The last always-allowed tools saved per session ([`Bug::KeepsAlwaysAllowed`]).
    allowed: Mutex<HashMap<String, Vec<String>>>,
}

impl Planted {
    fn new(bug: Bug) -> Self {
        Self {
            inner: MemoryStore::new(),
            bug,
            read: Mutex::default(),
            allowed: Mutex::default(),
        }
    }

    /// The plan decided by `record`, if it decides the plan the restored record waited on.
    fn decided_after_restart(
        &self,
        record: &SessionRecord,
    ) -> Option<(DecisionOutcome, Vec<String>)> {
        let read = self.read.lock().expect("lock");
        let before = read.get(&record.session_id)?.pending.as_ref()?;
        let decided = record.history.last()?;
        if record.pending.is_some() || decided.tool_call_id != before.tool_call_id {
            return None;
        }
        let targets = before
            .suspend_payload
            .target_mode_ids
            .iter()
            .map(ToString::to_string)
            .collect();
        Some((decided.outcome?, targets))
    }
}

#[agent_controller::async_trait]
impl SessionStore for Planted {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        if matches!(self.bug, Bug::StaleReadCache)
            && let Some(cached) = self.read.lock().expect("lock").get(id)
            && cached.pending.is_some()
        {
            return Ok(Some(cached.clone()));
        }
        let record = self.inner.load(id).await?;
        if let Some(record) = &record {
            self.read
                .lock()
                .expect("lock")
                .insert(id.to_owned(), record.clone());
        }
        Ok(record)
    }

    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        let mut record = record.clone();
        match self.bug {
            Bug::ApprovalToTheOtherTargetAfterRestart => {
                if let Some((DecisionOutcome::Approved, targets)) =
                    self.decided_after_restart(&record)
                    && let Some(other) = targets.iter().find(|t| **t != record.mode_id)
                {
                    record.mode_id = other.clone();
                }
            }
            Bug::RejectionSwitchesAfterRestart => {
                if let Some((DecisionOutcome::Rejected, targets)) =
                    self.decided_after_restart(&record)
                    && let Some(first) = targets.first()
                {
                    record.mode_id = first.clone();
                }
            }
            Bug::StaleReadCache => {}
            Bug::KeepsAlwaysAllowed => {
                let mut allowed = self.allowed.lock().expect("lock");
                let kept = allowed.entry(record.session_id.clone()).or_default();
                if record.always_allowed.is_empty() {
                    record.always_allowed = kept.clone();
                } else {
                    *kept = record.always_allowed.clone();
                }
            }
        }
        self.inner.save(&record, expected).await
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.read.lock().expect("lock").remove(id);
        self.inner.delete(id).await
    }

    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        self.inner.list_pending(now_ms).await
    }

    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.inner.expire(before).await
    }
}

/// Runs the check with the planted store; the bug must be caught by the exploration. Prints
/// what caught it, how long it took and the counterexample.
fn caught(bug: Bug) -> CheckReport {
    let started = Instant::now();
    let cases = 32;
    let result = Check::new(TARGETS)
        .cases(cases)
        .seed(25)
        .without_regressions()
        .run(|setup| {
            setup
                .builder()
                .tools(ToolRegistry::with_workspace_tools())
                .store(Arc::new(Planted::new(bug)))
                .build()
        });
    let report = match result {
        Err(CheckError::Failed(report)) => *report,
        other => panic!("{bug:?} was not caught: {other:?}"),
    };
    let found = report
        .exploration
        .counterexample
        .as_ref()
        .unwrap_or_else(|| panic!("{bug:?}: the exploration missed it:\n{report}"));
    println!(
        "{bug:?}: caught by the exploration after {} transitions ({} states) in {:.1?}; \
         edge walk: {}/{} edges diverged; random test ({cases} cases): {}\n{found}",
        report.exploration.transitions,
        report.exploration.states,
        started.elapsed(),
        report.edges.missed.len(),
        report.edges.total(),
        if report.counterexample.is_some() {
            "caught it too"
        } else {
            "missed it"
        },
    );
    report
}

/// The counterexample's operations, by their kind.
fn kinds(report: &CheckReport) -> Vec<String> {
    report
        .exploration
        .counterexample
        .iter()
        .flat_map(|c| &c.ops)
        .map(|op| {
            let text = format!("{op:?}");
            text.split([' ', '(', '{'])
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn an_approval_that_lands_on_the_wrong_mode_after_a_restart_is_caught() {
    let report = caught(Bug::ApprovalToTheOtherTargetAfterRestart);
    assert!(
        kinds(&report).ends_with(&["Message", "Restart", "Decide", "Restart"].map(String::from)),
        "{report}"
    );
    let found = report.exploration.counterexample.expect("found");
    assert_eq!(
        (
            found.divergence.expected.as_str(),
            found.divergence.actual.as_str()
        ),
        ("build", "build-auto"),
        "{found}"
    );
}

#[test]
fn a_rejection_that_switches_mode_after_a_restart_is_caught() {
    let report = caught(Bug::RejectionSwitchesAfterRestart);
    assert!(
        kinds(&report).ends_with(&["Message", "Restart", "Decide", "Restart"].map(String::from)),
        "{report}"
    );
}

#[test]
fn a_stale_record_that_serves_an_approved_plan_again_is_caught() {
    let report = caught(Bug::StaleReadCache);
    assert!(
        kinds(&report).ends_with(&["Message", "Restart", "Decide", "Restart"].map(String::from)),
        "{report}"
    );
    // Restored from the stale record: back in the planning mode, the plan pending again.
    let found = report.exploration.counterexample.expect("found");
    assert_eq!(
        (
            found.divergence.expected.as_str(),
            found.divergence.actual.as_str()
        ),
        ("build", "plan"),
        "{found}"
    );
}

#[test]
fn an_always_allow_that_survives_a_manual_switch_is_caught() {
    let report = caught(Bug::KeepsAlwaysAllowed);
    let ops = kinds(&report);
    let decides_a_tool_call = report
        .exploration
        .counterexample
        .iter()
        .flat_map(|c| &c.ops)
        .any(|op| {
            matches!(
                op,
                agent_controller::testing::Op::Decide {
                    on: agent_controller::testing::Subject::ToolCall { .. },
                    ..
                }
            )
        });
    assert!(
        decides_a_tool_call && ops.iter().any(|k| k == "Switch"),
        "{report}"
    );
    assert_eq!(ops.last().map(String::as_str), Some("Restart"), "{report}");
    let found = report.exploration.counterexample.expect("found");
    // The restored session holds the tool's allowance (read back from the kept always-allowed
    // list) in the mode switched to; the allowances in force, compared first, show it.
    assert!(
        found
            .divergence
            .actual
            .contains("(mode): write_file in mode"),
        "{found}"
    );
}

#[test]
fn the_config_passes_with_a_store_without_a_bug() {
    let report = Check::new(TARGETS)
        .cases(16)
        .seed(25)
        .without_regressions()
        .run(|setup| {
            setup
                .builder()
                .tools(ToolRegistry::with_workspace_tools())
                .store(Arc::new(MemoryStore::new()))
                .build()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{report}");
}

// ---------------------------------------------------------------------------------------------
// A controller the user built (issue 25, round 2, item 2)

/// The user's harness loads the config its own way and, by a bug of its own, drops the
/// `requireApproval` of `build`: a controller-level bug planted from outside the crate, in a
/// graph handed to `Setup::builder_for`. The kit keeps its spies and catches it at once: a
/// `write_file` in `build` ran without waiting for approval.
#[test]
fn a_controller_level_bug_planted_from_outside_is_caught() {
    let started = Instant::now();
    let result = Check::new(TARGETS)
        .cases(16)
        .seed(25)
        .without_regressions()
        .run(|setup| {
            let text = std::fs::read_to_string(TARGETS).expect("config");
            let graph = agent_controller::config::parse(
                &text.replace("requireApproval = [\"write_file\"]", ""),
                "targets-list.toml",
            )?;
            let model = setup.model();
            setup
                .builder_for(graph, model)
                .tools(ToolRegistry::with_workspace_tools())
                .build()
        });
    let report = match result {
        Err(CheckError::Failed(report)) => *report,
        other => panic!("the planted graph was not caught: {other:?}"),
    };
    let found = report
        .exploration
        .counterexample
        .clone()
        .expect("the exploration finds it");
    println!(
        "graph without requireApproval: caught by the exploration after {} transitions in {:.1?}\n{found}",
        report.exploration.transitions,
        started.elapsed()
    );
    assert_eq!(
        found.ops,
        [agent_controller::testing::Op::call("write_file")]
    );
    assert!(found.divergence.expected.contains("Suspended"), "{found}");
}

/// A controller built without the `Setup` (the crate's own builder, the kit's model) cannot be
/// observed: the check refuses it before anything runs and says what to do, instead of reporting
/// the tool calls it cannot see as divergences.
#[test]
fn a_controller_the_kit_cannot_observe_is_refused_with_what_to_do() {
    let result = Check::new(TARGETS)
        .cases(4)
        .without_regressions()
        .run(|setup| {
            let ws = setup.workspace().to_owned();
            agent_controller::AgentController::builder(setup.graph().clone(), setup.model())
                .tools(ToolRegistry::with_workspace_tools())
                .workspace(ws)
                .build()
        });
    let error = result.expect_err("refused");
    let text = error.to_string();
    assert!(
        matches!(
            &error,
            CheckError::Setup(agent_controller::testing::HarnessError::Unobservable(_))
        ),
        "{text}"
    );
    assert!(
        text.contains("not registered through the kit's spy") && text.contains("setup.observe"),
        "{text}"
    );
    // Its own workspace: refused too, naming it.
    let elsewhere = tempfile::tempdir().expect("dir");
    let error = Check::new(TARGETS)
        .cases(4)
        .without_regressions()
        .run(|setup| {
            setup
                .builder()
                .tools(ToolRegistry::with_workspace_tools())
                .workspace(elsewhere.path())
                .build()
        })
        .expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("not in the kit's temporary workspace"),
        "{error}"
    );
}

/// A builder the user made (their graph, model, tools and step limit) passed through
/// `Setup::observe` is checked like one the kit made.
#[test]
fn a_builder_the_user_made_is_checked_through_observe() {
    let report = Check::new(TARGETS)
        .cases(8)
        .seed(25)
        .max_states(40)
        .without_regressions()
        .run(|setup| {
            let graph = agent_controller::config::load(TARGETS)?;
            let yours = agent_controller::AgentController::builder(graph, setup.model())
                .tools(ToolRegistry::with_workspace_tools())
                .max_steps(12);
            setup.observe(yours).build()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.is_ok(), "{report}");
}

/// A model layer that answers by itself (never passing requests on to the kit's model) shows as
/// a divergence that says so.
#[test]
fn a_model_layer_that_never_passes_requests_on_is_named_in_the_divergence() {
    struct Answers;
    #[agent_controller::async_trait]
    impl agent_controller::LanguageModel for Answers {
        async fn generate(
            &self,
            _request: agent_controller::ModelRequest<'_>,
        ) -> Result<agent_controller::ModelResponse, agent_controller::ModelError> {
            Ok(agent_controller::ModelResponse {
                text: "cached".to_owned(),
                ..Default::default()
            })
        }
    }
    let error = Check::new(TARGETS)
        .cases(4)
        .max_states(2)
        .without_regressions()
        .run(|setup| {
            setup
                .builder_with(Arc::new(Answers))
                .tools(ToolRegistry::with_workspace_tools())
                .build()
        })
        .expect_err("diverges");
    assert!(
        error
            .to_string()
            .contains("no model call reached the kit's model"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// Deadlines (issue 25, round 2, item 1)

/// A plan waits a day (`plan`), a `write_file` in `build` an hour.
const DEADLINES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/configs/deadlines.toml"
);

#[test]
fn the_deadline_config_passes_with_and_without_a_store() {
    for store in [false, true] {
        let started = Instant::now();
        let cases = std::env::var("KIT_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(32);
        let report = Check::new(DEADLINES)
            .cases(cases)
            .seed(25)
            .without_regressions()
            .run(|setup| {
                let builder = setup.builder().tools(ToolRegistry::with_workspace_tools());
                if store {
                    builder.store(Arc::new(MemoryStore::new())).build()
                } else {
                    builder.build()
                }
            })
            .unwrap_or_else(|e| panic!("store {store}: {e}"));
        println!("store {store}: {report} in {:.1?}", started.elapsed());
    }
}

// ---------------------------------------------------------------------------------------------
// Round 2 of plants (issue 25, round 2, item 4): new bugs planted from outside the crate, in a
// model layer, a tool layer or a store wrapper, one at a time. Each test says what caught it, in
// how long, and the shrunk counterexample; `src/guide/testing.md` has the table.

use agent_controller::model::{Message, ModelRequest, ModelResponse};
use agent_controller::testing::{Op, Setup};
use agent_controller::tool::{ToolContext, ToolOutput};
use agent_controller::{AgentController, ConfigError, LanguageModel, ModelError, Tool};

/// What the check found on a planted bug, by part, for the table.
fn found(
    name: &str,
    result: &Result<CheckReport, CheckError>,
    took: std::time::Duration,
) -> String {
    let report = match result {
        Ok(report) => report,
        Err(CheckError::Failed(report)) => &**report,
        Err(e) => panic!("{name}: the check did not run: {e}"),
    };
    let exploration = match &report.exploration.counterexample {
        Some(_) => format!(
            "caught by the exploration after {} transitions ({} states)",
            report.exploration.transitions, report.exploration.states
        ),
        None => format!(
            "missed by the exploration ({} transitions)",
            report.exploration.transitions
        ),
    };
    let random = match report.failed_case {
        Some(n) => format!("random case {n} of {} failed", report.cases),
        None => format!("{} random cases passed", report.cases),
    };
    let shrunk = report
        .exploration
        .counterexample
        .as_ref()
        .or(report.counterexample.as_ref())
        .map_or_else(|| "none".to_owned(), ToString::to_string);
    format!(
        "{name}: {exploration}; edge walk: {}/{} edges diverged; {random}; {took:.1?}\n{shrunk}",
        report.edges.missed.len(),
        report.edges.total()
    )
}

/// Runs the check of `config` on the controller `build` makes (with the workspace tools and,
/// when `store` gives one, that store); prints and returns what it found.
fn plant(
    name: &str,
    config: &str,
    build: impl Fn(Setup) -> Result<AgentController, ConfigError>,
) -> Result<CheckReport, CheckError> {
    let started = Instant::now();
    let result = Check::new(config)
        .cases(64)
        .seed(25)
        .without_regressions()
        .run(build);
    println!("{}", found(name, &result, started.elapsed()));
    result
}

fn exploration_found(
    result: &Result<CheckReport, CheckError>,
) -> agent_controller::testing::Counterexample {
    match result {
        Err(CheckError::Failed(report)) => report
            .exploration
            .counterexample
            .clone()
            .unwrap_or_else(|| panic!("the exploration missed it:\n{report}")),
        other => panic!("not caught: {other:?}"),
    }
}

/// A model layer with one planted bug in what it passes on.
struct Layer {
    inner: Arc<dyn LanguageModel>,
    bug: LayerBug,
}

#[derive(Clone, Copy, Debug)]
enum LayerBug {
    /// Drops the last tool result from the conversation (an off-by-one in a history trimmer).
    DropsLastToolResult,
    /// Offers one tool more than the mode does (a layer adding the host's own `web_search`).
    OffersAnExtraTool,
    /// Drops system messages (a layer that keeps only the first system prompt): the notice of a
    /// manual switch is lost.
    DropsSystemMessages,
}

#[agent_controller::async_trait]
impl LanguageModel for Layer {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut messages: Vec<Message> = request.messages.to_vec();
        let mut tools = request.tools.to_vec();
        match self.bug {
            LayerBug::DropsLastToolResult => {
                if let Some(last) = messages
                    .iter()
                    .rposition(|m| matches!(m, Message::Tool { .. }))
                {
                    messages.remove(last);
                }
            }
            LayerBug::OffersAnExtraTool => {
                if let Some(first) = tools.first().cloned() {
                    tools.push(agent_controller::tool::ToolSpec {
                        name: Arc::from("web_search"),
                        ..first
                    });
                }
            }
            LayerBug::DropsSystemMessages => {
                messages.retain(|m| !matches!(m, Message::System { .. }));
            }
        }
        let mut passed = request.clone();
        passed.messages = &messages;
        passed.tools = &tools;
        self.inner.generate(passed).await
    }
}

fn with_layer(setup: Setup, bug: LayerBug) -> Result<AgentController, ConfigError> {
    let model = Arc::new(Layer {
        inner: setup.model(),
        bug,
    });
    setup
        .builder_with(model)
        .tools(ToolRegistry::with_workspace_tools())
        .build()
}

#[test]
fn a_model_layer_that_drops_the_last_tool_result_is_caught() {
    let result = plant("model layer drops the last tool result", TARGETS, |setup| {
        with_layer(setup, LayerBug::DropsLastToolResult)
    });
    let found = exploration_found(&result);
    // The approval result carries the plan and the notice: the next mode never gets them.
    assert!(
        matches!(found.ops.last(), Some(Op::Decide { .. })),
        "{found}"
    );
    assert!(
        found.divergence.to_string().contains("ModelCalled"),
        "{found}"
    );
}

#[test]
fn a_model_layer_that_offers_an_extra_tool_is_caught() {
    let result = plant("model layer offers an extra tool", TARGETS, |setup| {
        with_layer(setup, LayerBug::OffersAnExtraTool)
    });
    let found = exploration_found(&result);
    assert!(found.divergence.actual.contains("web_search"), "{found}");
}

#[test]
fn a_model_layer_that_drops_the_switch_notice_is_caught() {
    let result = plant("model layer drops system messages", TARGETS, |setup| {
        with_layer(setup, LayerBug::DropsSystemMessages)
    });
    let found = exploration_found(&result);
    assert!(
        found.ops.iter().any(|op| matches!(op, Op::Switch(_))),
        "{found}"
    );
    assert!(
        found.divergence.expected.contains("told_mode_change: true"),
        "{found}"
    );
}

/// A tool layer that hands the tool another mode id than the session's (a layer that "fixes up"
/// contexts): the kit's spy sits outside the user's layers, so it sees the call the session
/// made, not what the layer passes on; and the workspace tools do not read the mode id. A blind
/// spot, documented; this test shows the check passing on it.
#[test]
fn a_tool_layer_that_swaps_the_mode_id_is_not_seen() {
    struct SwapsMode(Arc<dyn Tool>);
    #[agent_controller::async_trait]
    impl Tool for SwapsMode {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn description(&self) -> String {
            self.0.description()
        }
        fn input_schema(&self) -> serde_json::Value {
            self.0.input_schema()
        }
        fn access(&self) -> agent_controller::tool::ToolAccess {
            self.0.access()
        }
        async fn execute(&self, args: &serde_json::Value, ctx: &ToolContext<'_>) -> ToolOutput {
            let mut swapped = ctx.clone();
            swapped.mode_id = if ctx.mode_id == "build" {
                "plan"
            } else {
                "build"
            };
            self.0.execute(args, &swapped).await
        }
    }
    let result = plant("tool layer swaps the mode id", TARGETS, |setup| {
        let mut tools = ToolRegistry::new();
        for tool in ToolRegistry::with_workspace_tools().iter() {
            tools
                .register(Arc::new(SwapsMode(tool.clone())))
                .expect("distinct names");
        }
        setup.builder().tools(tools).build()
    });
    assert!(
        result.as_ref().is_ok_and(CheckReport::is_ok),
        "the kit saw it after all: update the blind spots: {result:?}"
    );
}

/// A store wrapper with one planted bug.
struct Store {
    inner: Arc<MemoryStore>,
    bug: StoreBug,
    /// Every record saved, per session, oldest first ([`StoreBug::LoadsThePreviousVersion`]).
    saved: Mutex<HashMap<String, Vec<SessionRecord>>>,
}

#[derive(Clone, Copy, Debug)]
enum StoreBug {
    /// `load` returns the version before the latest (a read replica one write behind).
    LoadsThePreviousVersion,
    /// `list_pending` leaves out the newest pending decision (an off-by-one in paging).
    ListingSkipsTheNewest,
    /// The deadline is not stored (a schema without a `deadlineAtMs` column): a restored plan
    /// or tool call waits for ever, and an expired one can still be approved.
    DropsDeadlines,
    /// An outcome is stored as `approved: bool` (anything but a rejection is `true`): an expiry
    /// reads back as an approval.
    OutcomeAsABool,
}

impl Store {
    fn new(bug: StoreBug) -> Self {
        Self::over(Arc::new(MemoryStore::new()), bug)
    }

    /// A handle on `inner`'s data (another host's, for the conformance suite).
    fn over(inner: Arc<MemoryStore>, bug: StoreBug) -> Self {
        Self {
            inner,
            bug,
            saved: Mutex::default(),
        }
    }
}

#[agent_controller::async_trait]
impl SessionStore for Store {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        if matches!(self.bug, StoreBug::LoadsThePreviousVersion) {
            let saved = self.saved.lock().expect("lock");
            if let Some([.., previous, _]) = saved.get(id).map(Vec::as_slice) {
                return Ok(Some(previous.clone()));
            }
        }
        self.inner.load(id).await
    }

    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        let mut record = record.clone();
        match self.bug {
            StoreBug::DropsDeadlines => {
                if let Some(plan) = &mut record.pending {
                    plan.suspend_payload.terms.deadline_at_ms = None;
                }
                for call in &mut record.pending_tool_calls {
                    call.suspend_payload.terms.deadline_at_ms = None;
                }
            }
            StoreBug::OutcomeAsABool => {
                let as_bool = |d: &mut agent_controller::event::DecidedRecord| {
                    if d.outcome.is_some_and(|o| o != DecisionOutcome::Rejected) {
                        d.outcome = Some(DecisionOutcome::Approved);
                    }
                };
                record.history.iter_mut().for_each(as_bool);
                record.last_decided.iter_mut().for_each(as_bool);
            }
            StoreBug::LoadsThePreviousVersion | StoreBug::ListingSkipsTheNewest => {}
        }
        self.inner.save(&record, expected).await?;
        self.saved
            .lock()
            .expect("lock")
            .entry(record.session_id.clone())
            .or_default()
            .push(record);
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.delete(id).await
    }

    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        let mut listing = self.inner.list_pending(now_ms).await?;
        if matches!(self.bug, StoreBug::ListingSkipsTheNewest) {
            listing.pending.pop();
        }
        Ok(listing)
    }

    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.inner.expire(before).await
    }
}

fn with_store(setup: Setup, bug: StoreBug) -> Result<AgentController, ConfigError> {
    setup
        .builder()
        .tools(ToolRegistry::with_workspace_tools())
        .store(Arc::new(Store::new(bug)))
        .build()
}

#[test]
fn a_store_that_loads_the_previous_version_is_caught() {
    let result = plant("store loads the previous version", TARGETS, |setup| {
        with_store(setup, StoreBug::LoadsThePreviousVersion)
    });
    let found = exploration_found(&result);
    assert_eq!(found.ops.last(), Some(&Op::Restart), "{found}");
}

/// `Check` never lists pending decisions (a session is driven by its own ids), so it cannot see
/// this one; the store conformance suite does.
#[test]
fn a_store_whose_listing_skips_the_newest_is_caught_by_the_conformance_suite_not_by_check() {
    let result = plant("store listing skips the newest", TARGETS, |setup| {
        with_store(setup, StoreBug::ListingSkipsTheNewest)
    });
    assert!(result.as_ref().is_ok_and(CheckReport::is_ok), "{result:?}");
    let started = Instant::now();
    let data = Arc::new(MemoryStore::new());
    let conformance = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(agent_controller::testing::store_conformance(move || {
            Store::over(data.clone(), StoreBug::ListingSkipsTheNewest)
        }));
    let failure = conformance.expect_err("the conformance suite catches it");
    println!(
        "store listing skips the newest: caught by store_conformance in {:.1?}\n{failure}",
        started.elapsed()
    );
    let report = &failure.0;
    let failed: Vec<&str> = report.failures().map(|c| c.name).collect();
    // The waiting subagent's check lists its one session, the newest: it catches it too.
    assert_eq!(failed, ["list_pending", "a waiting subagent"], "{failure}");
}

#[test]
fn a_store_that_drops_deadlines_is_caught_an_expired_plan_could_still_be_approved() {
    let result = plant("store drops deadlines", DEADLINES, |setup| {
        with_store(setup, StoreBug::DropsDeadlines)
    });
    let found = exploration_found(&result);
    assert_eq!(found.ops.last(), Some(&Op::Restart), "{found}");
    assert!(found.divergence.to_string().contains("deadline"), "{found}");
}

#[test]
fn a_store_that_reads_an_expiry_back_as_an_approval_is_caught() {
    let result = plant("store keeps outcomes as a bool", DEADLINES, |setup| {
        with_store(setup, StoreBug::OutcomeAsABool)
    });
    let found = exploration_found(&result);
    assert!(
        found.ops.iter().any(|op| matches!(op, Op::Wait(_))),
        "{found}"
    );
    assert_eq!(found.ops.last(), Some(&Op::DecideAgain), "{found}");
    assert!(found.divergence.expected.contains("Expired"), "{found}");
}

/// The reference model of `onTimeout`: an expiry under `reject` ends the run `completed`, under
/// `abort` `aborted`; either way the plan counts as not approved (its result says it expired)
/// and the mode stays. (Sessions refuse `abort` until they apply it: a check of such a config
/// stops at the controller's build, so this is the reference alone.)
#[test]
fn the_reference_ends_an_expired_run_as_on_timeout_says() {
    use agent_controller::testing::{ConfigFacts, ReferenceSession, ResultKind, Trace, Until};
    for (rule, end) in [
        ("reject", agent_controller::event::RunState::Completed),
        ("abort", agent_controller::event::RunState::Aborted),
    ] {
        let text = format!(
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\napprovalTimeout = \"90s\"\n\
             onTimeout = \"{rule}\"\n\n[[modes]]\nid = \"build\"\n"
        );
        let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
        let mut reference = ReferenceSession::new(facts, Some(0));
        reference.apply(&Op::submit(0));
        let deadline = reference.pending().and_then(|p| p.deadline);
        assert_eq!(
            deadline,
            Some(agent_controller::testing::CLOCK_START_MS + 90_000)
        );
        reference.apply(&Op::Wait(Until::JustBefore));
        assert!(reference.pending().is_some() && !reference.is_due());
        reference.apply(&Op::Wait(Until::Deadline));
        assert!(reference.is_due());
        let step = reference.apply(&Op::approve());
        assert_eq!(
            step.expected.outcome,
            agent_controller::testing::Outcome::Refused(
                agent_controller::testing::Refusal::Expired
            ),
            "{rule}"
        );
        assert!(
            matches!(
                step.expected.trace.as_slice(),
                [
                    Trace::RunStarted { .. },
                    Trace::ToolEnded {
                        result: ResultKind::Expired,
                        ..
                    },
                    Trace::RunEnded { reason, .. },
                ] if *reason == end
            ),
            "{rule}: {:?}",
            step.expected.trace
        );
        assert_eq!(reference.mode(), 0, "{rule}: the mode stays");
        assert_eq!(reference.run().map(|(_, s)| s), Some(end), "{rule}");
    }
}

/// A controller on a clock of its own cannot be checked against deadlines (the kit moves time
/// to and past each one on its clock): refused before anything runs, saying what to do.
#[test]
fn a_controller_on_another_clock_is_refused_for_a_config_with_deadlines() {
    let error = Check::new(DEADLINES)
        .cases(4)
        .without_regressions()
        .run(|setup| {
            setup
                .builder()
                .tools(ToolRegistry::with_workspace_tools())
                .clock(std::time::SystemTime::now)
                .build()
        })
        .expect_err("refused");
    assert!(
        matches!(
            &error,
            CheckError::Setup(agent_controller::testing::HarnessError::Unobservable(_))
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("do not call .clock(...)"),
        "{error}"
    );
}

/// `impl SessionStore for STORE` whose `load`, `delete`, `list_pending` and `expire` pass through
/// to the store in its field `INNER`, followed by the methods given (at least `save`, which the
/// trait requires): a planted store writes out only what it does differently.
macro_rules! passing_through {
    ($store:ident . $inner:tt { $($methods:tt)* }) => {
        #[agent_controller::async_trait]
        impl SessionStore for $store {
            async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
                self.$inner.load(id).await
            }
            async fn delete(&self, id: &str) -> Result<bool, StoreError> {
                self.$inner.delete(id).await
            }
            async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
                self.$inner.list_pending(now_ms).await
            }
            async fn expire(&self, before: u64) -> Result<usize, StoreError> {
                self.$inner.expire(before).await
            }
            $($methods)*
        }
    };
}

/// Planted bug "a workspace allowance applied in another workspace": a store that keys its
/// workspace allowances by nothing, and hands every one to whichever workspace asks.
struct ForgetsWorkspace(MemoryStore);

passing_through! {
    ForgetsWorkspace.0 {
        async fn save(
            &self,
            record: &SessionRecord,
            expected: Option<u64>,
        ) -> Result<(), StoreError> {
            self.0.save(record, expected).await
        }
        async fn save_workspace_allowance(
            &self,
            allowance: &agent_controller::allowance::Allowance,
        ) -> Result<(), StoreError> {
            self.0.save_workspace_allowance(allowance).await
        }
        async fn list_workspace_allowances(
            &self,
            _workspace: Option<&std::path::Path>,
        ) -> Result<Vec<agent_controller::allowance::Allowance>, StoreError> {
            // The bug: the workspace asked for is ignored.
            self.0.list_workspace_allowances(None).await
        }
        async fn revoke_workspace_allowance(&self, id: &str) -> Result<bool, StoreError> {
            self.0.revoke_workspace_allowance(id).await
        }
    }
}

#[tokio::test]
async fn the_kit_catches_a_workspace_allowance_applied_in_another_workspace() {
    use agent_controller::testing::{ConformanceOutcome, StoreConformance};
    let started = Instant::now();
    let shared = Arc::new(ForgetsWorkspace(MemoryStore::new()));
    let open = shared.clone();
    let failure = StoreConformance::new(move || open.clone())
        .run()
        .await
        .expect_err("the planted bug is caught");
    let report = &failure.0;
    let caught = report
        .checks
        .iter()
        .find(|c| c.name == "workspace allowances keyed by workspace and config")
        .expect("the check ran");
    let ConformanceOutcome::Failed(why) = &caught.outcome else {
        panic!("not caught: {report}");
    };
    assert!(why.contains("another workspace"), "{why}");
    println!(
        "caught by the store conformance check `{}` in {:?}: {why}",
        caught.name,
        started.elapsed()
    );
    // The correct store passes the same check.
    let correct = Arc::new(MemoryStore::new());
    StoreConformance::new(move || correct.clone())
        .run()
        .await
        .expect("the memory store conforms");

    // And a session never applies what such a store hands it for another workspace: the
    // driver keeps only the allowances keyed by its own workspace and config.
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let graph = agent_controller::config::parse(
        "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
        "modes.toml",
    )
    .expect("config");
    let allowance = agent_controller::allowance::Allowance::new(
        agent_controller::allowance::AllowanceScope::Workspace,
        "",
        "build",
        "write_file",
    )
    .in_workspace(
        std::fs::canonicalize(a.path()).expect("a"),
        &graph.fingerprint(),
    );
    shared
        .save_workspace_allowance(&allowance)
        .await
        .expect("saved");
    let model = agent_controller::model::scripted::ReplayModel::new([
        agent_controller::model::scripted::ReplayModel::call(
            "call_1",
            "write_file",
            serde_json::json!({ "path": "x.txt", "content": "x" }),
        ),
    ]);
    let in_b = agent_controller::AgentController::builder(graph, Arc::new(model))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(b.path())
        .store(shared.clone())
        .build()
        .expect("controller");
    let mut session = in_b
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    assert!(
        session.allowances().is_empty(),
        "{:?}",
        session.allowances()
    );
    let outcome = session.send_message("write").await.expect("run");
    assert!(
        matches!(
            outcome,
            agent_controller::RunOutcome::ToolCallsSuspended { .. }
        ),
        "{outcome:?}"
    );
    assert!(!b.path().join("x.txt").exists());
}

// ---------------------------------------------------------------------------------------------
// Allowances with a scope (issue 23, item 2): bugs the property tests and the exploration catch
// through the allowances in force, compared after every step.

use agent_controller::allowance::{Allowance, AllowanceScope};
use agent_controller::testing::{Harness, Subject, check_other_workspace};

/// Planted bug "a workspace allowance applied in another workspace", past the session's own
/// check: a store whose allowance table has no workspace column (rows keyed by config, mode,
/// tool and pattern) and rebuilds each row for the workspace asked about, so another
/// workspace's allowance comes back as this one's, with this one's id.
#[derive(Default)]
struct RelabelsWorkspace {
    inner: MemoryStore,
    kept: Mutex<Vec<Allowance>>,
}

passing_through! {
    RelabelsWorkspace.inner {
        async fn save(
            &self,
            record: &SessionRecord,
            expected: Option<u64>,
        ) -> Result<(), StoreError> {
            self.inner.save(record, expected).await
        }
        async fn save_workspace_allowance(&self, allowance: &Allowance) -> Result<(), StoreError> {
            let mut kept = self.kept.lock().expect("lock");
            if !kept.iter().any(|a| a.id == allowance.id) {
                kept.push(allowance.clone());
            }
            Ok(())
        }
        async fn list_workspace_allowances(
            &self,
            workspace: Option<&std::path::Path>,
        ) -> Result<Vec<Allowance>, StoreError> {
            let kept = self.kept.lock().expect("lock").clone();
            Ok(kept
                .into_iter()
                .map(|a| match workspace {
                    // The bug: the row has no workspace, so it gets the one asked about (its
                    // path and the directory there, so the library's own check of the directory
                    // passes).
                    Some(asked) => {
                        let fingerprint = a.config_fingerprint.clone().unwrap_or_default();
                        match agent_controller::workspace::WorkspaceRecord::of(asked) {
                            Ok(here) => a.in_directory(&here, &fingerprint),
                            Err(_) => a.in_workspace(asked, &fingerprint),
                        }
                    }
                    None => a,
                })
                .collect())
        }
        async fn revoke_workspace_allowance(&self, id: &str) -> Result<bool, StoreError> {
            let mut kept = self.kept.lock().expect("lock");
            let before = kept.len();
            kept.retain(|a| a.id != id);
            Ok(kept.len() != before)
        }
    }
}

/// Two harnesses over `store`, each in a temporary workspace of its own.
fn two_workspaces(store: Arc<dyn SessionStore>) -> (Harness, Harness) {
    let graph = agent_controller::config::load(TARGETS).expect("config");
    let text = std::fs::read_to_string(TARGETS).expect("config");
    let facts = Arc::new(agent_controller::testing::ConfigFacts::from_toml(&text).expect("facts"));
    let build = |setup: Setup| {
        setup
            .builder()
            .tools(ToolRegistry::with_workspace_tools())
            .store(store.clone())
            .build()
    };
    let first = Harness::new(graph.clone(), facts.clone(), build).expect("the first workspace");
    let second = Harness::new(graph, facts, build).expect("the second workspace");
    (first, second)
}

#[test]
fn a_store_that_hands_a_workspace_allowance_to_another_workspace_is_caught() {
    let started = Instant::now();
    let (mut first, mut second) = two_workspaces(Arc::new(RelabelsWorkspace::default()));
    let found = check_other_workspace(&mut first, &mut second, 64, 23)
        .expect_err("the planted bug is caught");
    println!(
        "store hands a workspace allowance to another workspace: caught by check_other_workspace in {:.1?}\n{found}",
        started.elapsed()
    );
    // Shrunk: a workspace allowance given in the first workspace, then the second's new
    // session starts with it.
    let gave = found.first.iter().any(|op| {
        matches!(
            op,
            Op::Decide {
                on: Subject::ToolCall {
                    always_allow: true,
                    scope: Some(AllowanceScope::Workspace),
                    ..
                },
                ..
            }
        )
    });
    assert!(gave, "{found}");
    assert_eq!(found.second.as_deref(), Some(&[][..]), "{found}");
    assert_eq!(found.divergence.op, "start", "{found}");
    assert!(found.divergence.expected.contains("[]"), "{found}");
    assert!(
        found
            .divergence
            .actual
            .contains("(workspace): write_file in mode `build`"),
        "{found}"
    );
    // The same check passes on the memory store.
    let (mut first, mut second) = two_workspaces(Arc::new(MemoryStore::new()));
    let kept = check_other_workspace(&mut first, &mut second, 64, 23)
        .unwrap_or_else(|found| panic!("{found}"));
    assert!(kept > 0);
}

/// Planted bug "a session allowance survives into another mode": a store that saves each
/// allowance of scope `session` under the mode the session is in when saved (a "current
/// mode" column filled from the record), so after a switch and a restart it runs the other
/// mode's calls unasked.
struct MovesSessionAllowances(MemoryStore);

passing_through! {
    MovesSessionAllowances.0 {
        async fn save(
            &self,
            record: &SessionRecord,
            expected: Option<u64>,
        ) -> Result<(), StoreError> {
            let mut record = record.clone();
            for allowance in &mut record.allowances {
                if allowance.scope == AllowanceScope::Session {
                    allowance.mode_id = record.mode_id.clone();
                }
            }
            self.0.save(&record, expected).await
        }
    }
}

#[test]
fn a_session_allowance_that_survives_into_another_mode_is_caught() {
    let result = plant("store moves session allowances", TARGETS, |setup| {
        setup
            .builder()
            .tools(ToolRegistry::with_workspace_tools())
            .store(Arc::new(MovesSessionAllowances(MemoryStore::new())))
            .build()
    });
    let found = exploration_found(&result);
    let gave = found.ops.iter().any(|op| {
        matches!(
            op,
            Op::Decide {
                on: Subject::ToolCall {
                    scope: Some(AllowanceScope::Session),
                    ..
                },
                ..
            }
        )
    });
    assert!(gave, "{found}");
    assert!(
        found.ops.iter().any(|op| matches!(op, Op::Switch(_))),
        "{found}"
    );
    assert_eq!(found.ops.last(), Some(&Op::Restart), "{found}");
    // Restored after the switch: the session allowance of `build` is now another mode's.
    assert!(
        found
            .divergence
            .expected
            .contains("(session): write_file in mode `build`"),
        "{found}"
    );
    assert!(
        found
            .divergence
            .actual
            .contains("(session): write_file in mode")
            && !found.divergence.actual.contains("in mode `build`"),
        "{found}"
    );
}

// ---------------------------------------------------------------------------------------------
// Revocations and narrowed allowances (issue 23): bugs the kit catches now that it revokes
// allowances and narrows them to paths.

use agent_controller::testing::{Aspect, ReferenceSession, RevokeChoice};

/// Planted bug "a revoked workspace allowance still applies": a store whose
/// `revoke_workspace_allowance` says it revoked the allowance and keeps it (a soft delete its
/// listing does not filter), so every later session of the workspace still has it.
#[derive(Default)]
struct IgnoresRevocations(MemoryStore);

passing_through! {
    IgnoresRevocations.0 {
        async fn save(
            &self,
            record: &SessionRecord,
            expected: Option<u64>,
        ) -> Result<(), StoreError> {
            self.0.save(record, expected).await
        }
        async fn save_workspace_allowance(&self, allowance: &Allowance) -> Result<(), StoreError> {
            self.0.save_workspace_allowance(allowance).await
        }
        async fn list_workspace_allowances(
            &self,
            workspace: Option<&std::path::Path>,
        ) -> Result<Vec<Allowance>, StoreError> {
            self.0.list_workspace_allowances(workspace).await
        }
        async fn revoke_workspace_allowance(&self, _id: &str) -> Result<bool, StoreError> {
            // The bug: marked revoked, still listed.
            Ok(true)
        }
    }
}

fn with_workspace_store(
    setup: Setup,
    store: Arc<dyn SessionStore>,
) -> Result<AgentController, ConfigError> {
    setup
        .builder()
        .tools(ToolRegistry::with_workspace_tools())
        .store(store)
        .build()
}

#[test]
fn a_store_that_ignores_revocations_is_caught() {
    // Revoked, then a new session: it must not have the allowance (the session itself dropped
    // it at once, so only a later session shows the bug).
    let graph = agent_controller::config::load(TARGETS).expect("config");
    let text = std::fs::read_to_string(TARGETS).expect("config");
    let facts = Arc::new(agent_controller::testing::ConfigFacts::from_toml(&text).expect("facts"));
    let store: Arc<dyn SessionStore> = Arc::new(IgnoresRevocations::default());
    let mut harness = Harness::new(graph, facts, |setup| {
        with_workspace_store(setup, store.clone())
    })
    .expect("a harness");
    let reference = ReferenceSession::new(harness.facts().clone(), None).with_restarts(true);
    let ops = [
        Op::call("write_file"),
        Op::always_allow_tool_for(0, AllowanceScope::Workspace),
        Op::Revoke(RevokeChoice::First),
        Op::NewSession,
    ];
    let (at, divergence) = harness
        .run(&reference, &ops)
        .expect_err("the planted bug is caught");
    println!("store ignores revocations, by hand: after op {at:?}: {divergence}");
    assert_eq!(at, Some(3), "the new session: {divergence}");
    assert_eq!(divergence.aspect, Aspect::Allowances, "{divergence}");
    assert!(divergence.expected.contains("[]"), "{divergence}");
    assert!(
        divergence
            .actual
            .contains("(workspace): write_file in mode `build`"),
        "{divergence}"
    );
    // The check finds it too: the kit revokes a sequence's workspace allowances before the next
    // one starts, whose new session still has the revoked one, and says so.
    let result = plant("store ignores revocations", TARGETS, |setup| {
        with_workspace_store(setup, Arc::new(IgnoresRevocations::default()))
    });
    let found = exploration_found(&result);
    assert_eq!(found.divergence.op, "start", "{found}");
    assert_eq!(found.divergence.aspect, Aspect::Allowances, "{found}");
    assert!(
        found
            .divergence
            .actual
            .contains("a new session still has revoked workspace allowances")
            && found
                .divergence
                .actual
                .contains("(workspace): write_file in mode `build`"),
        "{found}"
    );
}

/// Planted bug "a narrowed allowance applied to a call its pattern does not match": a store
/// whose record of a session's allowances has no room for the pattern (`allow`), so a session
/// restored from it allows every call of the tool, `.env` included, where the session that gave
/// it allowed only paths under `src/`.
struct DropsPatterns(MemoryStore);

passing_through! {
    DropsPatterns.0 {
        async fn save(
            &self,
            record: &SessionRecord,
            expected: Option<u64>,
        ) -> Result<(), StoreError> {
            let mut record = record.clone();
            for allowance in &mut record.allowances {
                allowance.pattern = None;
            }
            self.0.save(&record, expected).await
        }
    }
}

#[test]
fn a_store_that_drops_the_pattern_of_an_allowance_is_caught() {
    let result = plant("store drops allowance patterns", TARGETS, |setup| {
        with_workspace_store(setup, Arc::new(DropsPatterns(MemoryStore::new())))
    });
    let found = exploration_found(&result);
    let narrowed = found.ops.iter().any(|op| {
        matches!(
            op,
            Op::Decide {
                on: Subject::ToolCall { narrowed: true, .. },
                ..
            }
        )
    });
    assert!(narrowed, "{found}");
    assert_eq!(found.ops.last(), Some(&Op::Restart), "{found}");
    // Restored: the allowance of `src/**` is one of the whole tool.
    assert_eq!(found.divergence.aspect, Aspect::Allowances, "{found}");
    assert!(
        found
            .divergence
            .expected
            .contains("write_file path `src/**` in mode `build`"),
        "{found}"
    );
    assert!(
        found
            .divergence
            .actual
            .contains(": write_file in mode `build`"),
        "{found}"
    );
}

/// Issue 36, item 21: `max_states(50)` on a large config reported "explored 204 states (the
/// bound)": the bound counts the states explored (their operations tried), while the figure
/// was every state reached. The report names the states explored as the bound, and the states
/// reached beside it.
#[test]
fn the_bound_of_the_exploration_is_reported_as_what_it_counts() {
    let max = 2;
    let report = Check::new(TARGETS)
        .cases(2)
        .seed(36)
        .max_states(max)
        .without_regressions()
        .run(|setup| {
            setup
                .builder()
                .tools(ToolRegistry::with_workspace_tools())
                .build()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(report.is_ok(), "{report}");
    let exploration = &report.exploration;
    assert!(!exploration.complete, "{report}");
    assert!(exploration.states > max, "more were reached: {report}");
    let text = report.to_string();
    assert!(
        text.contains(&format!("explored {max} states (the bound)")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{} states reached", exploration.states)),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 37: the kit drives free-text and multi-select questions and a tool of the user's own
// that suspends, with answers taken and refused.

/// `build` offers `ask_user` and the kit's own suspending tool beside a write that waits.
const ASKS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/configs/asks.toml"
);

/// A model layer that "tidies" the model's tool calls and loses `selectionMode`: a question
/// with several options to pick becomes one with a single pick.
struct DropsSelectionMode(Arc<dyn LanguageModel>);

#[agent_controller::async_trait]
impl LanguageModel for DropsSelectionMode {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut response = self.0.generate(request).await?;
        for call in &mut response.tool_calls {
            if let Some(args) = call.args.as_object_mut() {
                args.remove("selectionMode");
            }
        }
        Ok(response)
    }
}

#[test]
fn a_model_layer_that_turns_a_multi_select_question_into_a_single_select_is_caught() {
    use agent_controller::testing::{Ask, ConfirmTool};
    let result = plant("model layer drops selectionMode", ASKS, |setup| {
        let model = Arc::new(DropsSelectionMode(setup.model()));
        let mut tools = ToolRegistry::with_workspace_tools();
        tools.register(Arc::new(ConfirmTool)).expect("a free name");
        setup.builder_with(model).tools(tools).build()
    });
    let found = exploration_found(&result);
    // The question waits as a single select: its payload (and its hash) is not the one asked.
    assert_eq!(
        found.ops.last(),
        Some(&Op::ask_with(Ask::MultiSelect)),
        "{found}"
    );
}
