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
    assert!(
        found.divergence.to_string().contains("always allowed"),
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
