//! Every transition of the mode state machine, tested against the reference model of
//! `agent_controller::testing` (issue 3):
//!
//! - random operation sequences on the reference model and a real session, compared after every
//!   step (`session_follows_the_reference_model`);
//! - every edge of every shipped and generated config, reached by a shortest path from the
//!   default mode and fired (`every_edge_of_the_shipped_configs_is_exercised` prints
//!   `edges covered: N/N`);
//! - every reachable state of every shipped config and every operation from each
//!   (`every_state_of_the_shipped_configs_is_explored` prints `N states, M transitions`, beside
//!   the random test's case count);
//! - the one-call check (`testing::Check`) with your model and tool layers, invariants and a
//!   step limit;
//! - the loader on generated, broken, mangled and arbitrary input.
//!
//! Run with `cargo test --all-features --test transitions`; `PROPTEST_CASES=10000` for a long run.
#![cfg(feature = "testing")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_controller::store::FileStore;
use agent_controller::testing::{
    self, Check, CheckError, ConfigFacts, EdgeReport, Harness, Mutation, Op, ReferenceSession,
    Setup,
};
use agent_controller::{
    AgentController, ConfigError, LanguageModel, SessionError, SessionOptions, ToolRegistry,
    config, config::ConfigErrorKind,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::FileFailurePersistence;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};

fn manifest_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The tools of the controller under test: the workspace tools the CLI registers.
fn tool_names() -> Vec<String> {
    ToolRegistry::with_workspace_tools()
        .names()
        .map(str::to_owned)
        .collect()
}

fn build(setup: Setup) -> Result<AgentController, ConfigError> {
    setup
        .builder()
        .tools(ToolRegistry::with_workspace_tools())
        .build()
}

/// Failures found once are replayed first on every later run (committed).
const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/proptest-regressions/transitions.txt"
);

/// A share of the case count (`PROPTEST_CASES`, default 256): the main properties run all of
/// it, the slower walks over whole configs a fraction, so `PROPTEST_CASES=10000` stays in minutes.
fn cases(divisor: u32) -> u32 {
    let total = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256u32);
    (total / divisor).max(1)
}

/// The proptest config of this file: `cases` cases, failures saved to [`REGRESSIONS`].
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
        max_shrink_iters: 20_000,
        ..ProptestConfig::default()
    }
}

fn harness_for(facts: &Arc<ConfigFacts>, origin: &str) -> Harness {
    let graph = config::parse(facts.text(), origin).expect("a valid config");
    Harness::new(graph, facts.clone(), build).expect("a harness")
}

// ---------------------------------------------------------------------------------------------
// The reference model against the real session.

/// The reference side: a generated config, a start mode, and the rules; with `RESTARTS`, process
/// restarts among the operations.
struct SessionRules<const RESTARTS: bool>;

impl<const RESTARTS: bool> ReferenceStateMachine for SessionRules<RESTARTS> {
    type State = ReferenceSession;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<ReferenceSession> {
        testing::valid_configs(&tool_names())
            .prop_flat_map(|spec| {
                // With restarts the sessions are stored in a `FileStore`, which keeps workspace
                // allowances; without, there is no store.
                let store = if RESTARTS {
                    testing::WorkspaceStore::Keeps
                } else {
                    testing::WorkspaceStore::None
                };
                let facts = Arc::new(
                    spec.facts()
                        .with_registry(&ToolRegistry::with_workspace_tools())
                        .with_workspace_store(store),
                );
                let n = facts.len();
                (Just(facts), 0..=n)
            })
            .prop_map(|(facts, start)| {
                let named = (start < facts.len()).then_some(start);
                ReferenceSession::new(facts, named).with_restarts(RESTARTS)
            })
            .boxed()
    }

    fn transitions(state: &ReferenceSession) -> BoxedStrategy<Op> {
        state.ops()
    }

    fn preconditions(state: &ReferenceSession, op: &Op) -> bool {
        state.can_apply(op)
    }

    fn apply(mut state: ReferenceSession, op: &Op) -> ReferenceSession {
        state.apply(op);
        state
    }
}

/// The real side: an `AgentController` with the workspace tools, driven by the harness; with
/// `STORE`, saving sessions in a `FileStore` (kept in the temporary directory beside it).
struct RealSession<const STORE: bool>;

impl<const STORE: bool> StateMachineTest for RealSession<STORE> {
    type SystemUnderTest = (Harness, Option<tempfile::TempDir>);
    type Reference = SessionRules<STORE>;

    fn init_test(reference: &ReferenceSession) -> Self::SystemUnderTest {
        let graph = config::parse(reference.facts().text(), "generated.toml").expect("valid");
        let store_dir = STORE.then(|| tempfile::tempdir().expect("a store directory"));
        let store = store_dir
            .as_ref()
            .map(|dir| FileStore::open(dir.path()).expect("a file store"));
        let mut harness = Harness::new(graph, reference.facts().clone(), |setup: Setup| {
            let builder = setup.builder().tools(ToolRegistry::with_workspace_tools());
            let builder = match store {
                Some(store) => builder.store(Arc::new(store)),
                None => builder,
            };
            builder.build()
        })
        .expect("a harness");
        if let Err(divergence) = harness.start(reference) {
            panic!("{divergence}");
        }
        (harness, store_dir)
    }

    fn apply(
        (mut harness, store_dir): Self::SystemUnderTest,
        reference: &ReferenceSession,
        _op: Op,
    ) -> Self::SystemUnderTest {
        if let Err(divergence) = harness.step(reference) {
            panic!("{divergence}");
        }
        (harness, store_dir)
    }
}

prop_state_machine! {
    #![proptest_config(config(cases(1)))]

    #[test]
    fn session_follows_the_reference_model(sequential 1..40 => RealSession<false>);
}

prop_state_machine! {
    #![proptest_config(config(cases(16)))]

    #[test]
    fn a_stored_session_follows_the_reference_model_across_restarts(
        sequential 1..40 => RealSession<true>
    );
}

#[tokio::test]
async fn a_session_refuses_to_start_in_an_unknown_mode() {
    let graph = config::load(manifest_path("config/modes.toml")).expect("the shipped config");
    let controller = AgentController::builder(
        graph,
        Arc::new(agent_controller::model::scripted::ScriptedModel::new()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .build()
    .expect("a controller");
    let err = controller
        .start_session(SessionOptions::new().mode("Plan"))
        .await
        .expect_err("ids are case-sensitive");
    assert!(
        matches!(&err, SessionError::UnknownMode { id, .. } if id == "Plan"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("unknown mode `Plan`: did you mean `plan`? (mode ids are case-sensitive)"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// The exhaustive edge walk.

fn shipped_configs() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest_path("tests/fixtures/configs/valid"))
        .expect("the valid fixtures")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| p.file_name().is_some_and(|n| n != "expected.toml"))
        .collect();
    files.sort();
    files.insert(0, manifest_path("config/modes.toml"));
    files
}

/// The subagent edges of the config `text` of case `name` (see the count's comment in
/// [`every_edge_of_the_shipped_configs_is_exercised`]).
fn subagent_edges(expected: &toml::Table, name: &str, text: &str) -> usize {
    let config: toml::Table = toml::from_str(text).expect("a shipped config is TOML");
    let waiting: Vec<&str> = config
        .get("subagents")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| {
            t.get("requireApproval")
                .and_then(toml::Value::as_array)
                .is_some_and(|tools| !tools.is_empty())
        })
        .filter_map(|t| t.get("id").and_then(toml::Value::as_str))
        .collect();
    let Some(modes) = expected
        .get(name)
        .and_then(|case| case.get("subagents"))
        .and_then(toml::Value::as_table)
    else {
        return 0;
    };
    modes
        .values()
        .map(|types| {
            let types = types.as_array().expect("a list of types");
            let waits = types
                .iter()
                .any(|t| t.as_str().is_some_and(|t| waiting.contains(&t)));
            2 + if waits { 3 } else { 0 }
        })
        .sum()
}

/// Per rule action, the tools a rule with it decides.
type RuleActions = Vec<(String, Vec<String>)>;

/// The case's `rules`: for each mode, each action some rule has, with the tools it decides.
fn case_rules(expected: &toml::Table, name: &str) -> Vec<(String, RuleActions)> {
    let Some(rules) = expected
        .get(name)
        .and_then(|c| c.get("rules"))
        .and_then(toml::Value::as_table)
    else {
        return Vec::new();
    };
    rules
        .iter()
        .map(|(mode, actions)| {
            let actions = actions
                .as_table()
                .expect("actions")
                .iter()
                .map(|(action, tools)| {
                    let tools = tools
                        .as_array()
                        .expect("tools")
                        .iter()
                        .map(|t| t.as_str().expect("a tool").to_owned())
                        .collect();
                    (action.clone(), tools)
                })
                .collect();
            (mode.clone(), actions)
        })
        .collect()
}

#[test]
fn every_edge_of_the_shipped_configs_is_exercised() {
    let expected: toml::Table = toml::from_str(
        &std::fs::read_to_string(manifest_path("tests/fixtures/configs/valid/expected.toml"))
            .expect("expected.toml"),
    )
    .expect("expected.toml is TOML");
    let mut total = EdgeReport {
        edges: Vec::new(),
        missed: Vec::new(),
    };
    let mut expected_total = 0;
    for path in shipped_configs() {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_owned();
        let text = std::fs::read_to_string(&path).expect("a shipped config");
        let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
        let mut harness = harness_for(&facts, &path.display().to_string());
        let n = facts.len();
        let planning: Vec<usize> = (0..n).filter(|m| facts.is_planning(*m)).collect();
        // An approval edge per listed target (one where `transitionsTo` names one mode), and
        // four ways not to approve, per planning mode.
        let approvals: usize = planning
            .iter()
            .map(|m| facts.transition_targets(*m).len())
            .sum();
        // Per mode where a tool call waits for approval (with the controller's tools): an
        // approved, a rejected and an always-allowed call, and a manual switch to every other
        // mode that ends the always-allow.
        let waiting = (0..n)
            .filter(|m| !harness.facts().approval_tools(*m).is_empty())
            .count();
        // Per mode and rule action: one edge when a rule with that action decides a call of
        // one of its tools (the kit's calls have no arguments: a rule without a pattern), as
        // the case's `rules` lists them.
        let ruled: usize = case_rules(&expected, &name)
            .iter()
            .map(|(mode, actions)| {
                let m = facts.index_of(mode).expect("a mode of the case");
                for (action, tools) in actions {
                    assert_eq!(
                        &harness.facts().ruled_tools(m, action),
                        tools,
                        "{name}: {mode} {action}"
                    );
                }
                actions.len()
            })
            .sum();
        // Per mode that offers `ask_user` (one that lists it, or a planning mode with no list)
        // and has no `deny` rule on it:
        // a question answered, declined and aborted; expired with an `approvalTimeout`;
        // answered beside a call that waits for approval where one does; and from a planning
        // mode, answered before a plan approved to each of its targets.
        let questions: usize = (0..n)
            .filter(|m| harness.facts().offers(*m, "ask_user") == Some(true))
            .filter(|m| {
                harness
                    .facts()
                    .rule_for(*m, "ask_user")
                    .is_none_or(|(_, action)| action != "deny")
            })
            .map(|m| {
                3 + usize::from(facts.approval_timeout_ms(m).is_some())
                    + usize::from(!harness.facts().approval_tools(m).is_empty())
                    + if facts.is_planning(m) {
                        facts.transition_targets(m).len()
                    } else {
                        0
                    }
            })
            .sum();
        // Per mode that may start subagent types (the case's `subagents`): a call naming no
        // type refused, and a child that answers; where a type it may start names a tool in
        // its `requireApproval` (a child's call that waits), that call approved, rejected and
        // aborted. (No fixture's child asks, nor waits beside a call of its parent's.)
        let subagents = subagent_edges(&expected, &name, &text);
        expected_total += n * (n - 1)
            + 4 * planning.len()
            + approvals
            + waiting * (3 + n - 1)
            + ruled
            + questions
            + subagents;

        // The relation's approval edges are the hand-overs the fixture file names: every target
        // of `approve_to` where the case lists a choice, else the one of `approve`.
        if let Some(case) = expected.get(&name) {
            let approve: Vec<(String, String)> = testing::edges(&facts)
                .into_iter()
                .filter(|e| e.cause == testing::Cause::Approve)
                .map(|e| (e.from, e.to))
                .collect();
            let choices = case.get("approve_to").and_then(toml::Value::as_table);
            // A case without planning modes (`require-approval-all.toml`) has no `approve`.
            let none = toml::Table::new();
            let mut want: Vec<(String, String)> = case
                .get("approve")
                .map_or(&none, |a| a.as_table().expect("an approve table"))
                .iter()
                .flat_map(|(from, to)| {
                    let targets: Vec<String> = match choices.and_then(|c| c.get(from)) {
                        Some(list) => list
                            .as_array()
                            .expect("an approve_to list")
                            .iter()
                            .map(|t| t.as_str().unwrap_or_default().to_owned())
                            .collect(),
                        None => vec![to.as_str().unwrap_or_default().to_owned()],
                    };
                    targets.into_iter().map(move |t| (from.clone(), t))
                })
                .collect();
            let mut got = approve.clone();
            want.sort();
            got.sort();
            assert_eq!(got, want, "{name}: approval edges");
        }

        let report = testing::walk_edges(&mut harness);
        println!("{name}: {report}");
        total.merge(report);
    }
    println!("{total}");
    assert_eq!(total.total(), expected_total, "the relation has every edge");
    assert!(total.is_complete(), "{total}");
}

proptest! {
    #![proptest_config(config(cases(5)))]

    #[test]
    fn every_edge_of_generated_configs_is_exercised(spec in testing::valid_configs(&tool_names())) {
        let facts = Arc::new(spec.facts());
        let mut harness = harness_for(&facts, "generated.toml");
        let report = testing::walk_edges(&mut harness);
        prop_assert!(report.is_complete(), "{}\n{}", report, spec.to_toml());
    }
}

// ---------------------------------------------------------------------------------------------
// The one-call helper on shipped configs and on controllers wired wrong.

#[test]
fn every_state_of_the_shipped_configs_is_explored() {
    // Issue 14, fault 6: random cases leave (state, operation) pairs unvisited; the walk visits
    // every one, on the real controller beside the reference.
    for path in shipped_configs() {
        let text = std::fs::read_to_string(&path).expect("a shipped config");
        let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
        let mut harness = harness_for(&facts, &path.display().to_string());
        let exploration = testing::explore(&mut harness);
        println!(
            "{}: explored {exploration}; random: {} cases",
            path.display(),
            cases(1)
        );
        assert!(exploration.is_ok(), "{}: {exploration}", path.display());
        // Every mode is reached, each with and without a run behind it.
        assert!(exploration.states >= 2 * facts.len(), "{exploration}");
    }
}

#[test]
fn every_state_of_a_stored_session_is_explored_across_restarts() {
    // With `requireApproval` (targets-list.toml): the waiting tool calls, the decisions taken on
    // them and the always-allowed tools come back from the store in every state.
    for name in [
        "config/modes.toml",
        "tests/fixtures/configs/valid/targets-list.toml",
    ] {
        let path = manifest_path(name);
        let graph = config::load(&path).expect("the shipped config");
        let text = std::fs::read_to_string(&path).expect("the shipped config");
        let facts = Arc::new(ConfigFacts::from_toml(&text).expect("facts"));
        let store_dir = tempfile::tempdir().expect("a store directory");
        let store = Arc::new(FileStore::open(store_dir.path()).expect("a file store"));
        let mut harness = Harness::new(graph, facts, |setup: Setup| {
            setup
                .builder()
                .tools(ToolRegistry::with_workspace_tools())
                .store(store.clone())
                .build()
        })
        .expect("a harness");
        let exploration = testing::explore(&mut harness);
        println!("{name} with a store: explored {exploration}");
        assert!(exploration.is_ok(), "{name}: {exploration}");
        let edges = testing::walk_edges(&mut harness);
        println!("{name} with a store: {edges}");
        assert!(edges.is_complete(), "{name}: {edges}");
    }
}

#[test]
fn check_controller_passes_on_the_shipped_configs() {
    for path in shipped_configs() {
        // The helper on each shipped config; the rules themselves get the full case count in
        // session_follows_the_reference_model.
        let check = Check::new(&path).cases(cases(8)).without_regressions();
        match check.run(build) {
            Ok(report) => println!("{report}"),
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

#[test]
fn a_step_limit_of_one_is_no_divergence() {
    // Issue 14, fault 4: the reference knows step limits (one model call per message or
    // decision: a refused tool call fails the run for want of a second).
    let report = Check::new(manifest_path("config/modes.toml"))
        .cases(cases(4))
        .without_regressions()
        .run(|setup| {
            setup
                .builder()
                .tools(ToolRegistry::with_workspace_tools())
                .max_steps(1)
                .build()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    println!("max_steps(1): {report}");
}

/// A model layer of the user's: counts the calls and passes them on, leaving out the
/// mode-change notices of manual switches when `drop_manual_notices` (a deliberate bug).
struct Layer {
    inner: Arc<dyn LanguageModel>,
    calls: Arc<std::sync::atomic::AtomicUsize>,
    drop_manual_notices: bool,
}

#[async_trait::async_trait]
impl LanguageModel for Layer {
    async fn generate(
        &self,
        request: agent_controller::model::ModelRequest<'_>,
    ) -> Result<agent_controller::model::ModelResponse, agent_controller::model::ModelError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if !self.drop_manual_notices {
            return self.inner.generate(request).await;
        }
        let messages: Vec<agent_controller::model::Message> = request
            .messages
            .iter()
            .filter(|m| {
                !matches!(m, agent_controller::model::Message::System { content } if content.contains("switched by the user"))
            })
            .cloned()
            .collect();
        // Covariant in its lifetime: the request may borrow the shorter list.
        let mut request: agent_controller::model::ModelRequest<'_> = request;
        request.messages = &messages;
        self.inner.generate(request).await
    }
}

fn layered(
    drop_manual_notices: bool,
) -> (
    Arc<std::sync::atomic::AtomicUsize>,
    Result<testing::CheckReport, CheckError>,
) {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let result = Check::new(manifest_path("config/modes.toml"))
        .cases(cases(8))
        .seed(11)
        .without_regressions()
        .run(move |setup| {
            let model = Arc::new(Layer {
                inner: setup.model(),
                calls: counter.clone(),
                drop_manual_notices,
            });
            setup
                .builder_with(model)
                .tools(ToolRegistry::with_workspace_tools())
                .build()
        });
    (calls, result)
}

#[test]
fn your_model_layer_is_driven_by_the_check() {
    // Issue 14, fault 3: the builder handed to the user no longer holds the kit's model.
    let (calls, result) = layered(false);
    let report = result.unwrap_or_else(|e| panic!("{e}"));
    assert!(report.is_ok());
    assert!(
        calls.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the layer was never called"
    );
}

#[test]
fn a_model_layer_that_drops_manual_switch_notices_is_caught() {
    // Issue 14, fault 2: every mode change needs a notice, manual ones included.
    let (_, result) = layered(true);
    match result {
        Err(CheckError::Failed(report)) => {
            println!("caught: {report}");
            let found = report
                .exploration
                .counterexample
                .as_ref()
                .expect("the exploration finds it");
            assert!(
                found.divergence.expected.contains("told_mode_change: true"),
                "{found}"
            );
            assert!(
                found.ops.iter().any(|op| matches!(op, Op::Switch(_))),
                "{found}"
            );
        }
        other => panic!("the dropped notice passed: {other:?}"),
    }
}

#[test]
fn your_invariants_run_after_every_step() {
    let steps = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = steps.clone();
    let result = Check::new(manifest_path("config/modes.toml"))
        .cases(cases(16))
        .seed(12)
        .without_regressions()
        .invariant(move |session, reference| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            // A rule of the user's that is wrong: a plan is never pending.
            match (session.pending_plan(), reference.pending()) {
                (Some(_), _) => Err("a plan is pending".to_owned()),
                _ => Ok(()),
            }
        })
        .run(build);
    match result {
        Err(CheckError::Failed(report)) => {
            let found = report
                .exploration
                .counterexample
                .as_ref()
                .expect("the exploration finds it");
            assert_eq!(
                found.divergence.aspect,
                testing::Aspect::Invariant,
                "{found}"
            );
            assert_eq!(
                found.ops,
                vec![Op::switch("plan"), Op::submit(0)],
                "{found}"
            );
        }
        other => panic!("the invariant never failed: {other:?}"),
    }
    assert!(steps.load(std::sync::atomic::Ordering::SeqCst) > 0);
}

#[test]
fn check_controller_reports_a_controller_without_the_configs_tools() {
    let result = testing::check_controller(manifest_path("config/modes.toml"), |setup: Setup| {
        setup.builder().build()
    });
    match result {
        Err(CheckError::Setup(e)) => assert!(e.to_string().contains("read_file"), "{e}"),
        other => panic!("expected a setup error, got {other:?}"),
    }
}

#[test]
fn check_controller_reports_an_invalid_config() {
    let path = manifest_path("tests/fixtures/configs/invalid/self-transition.toml");
    match testing::check_controller(&path, build) {
        Err(CheckError::Config(e)) => assert_eq!(e.kind(), ConfigErrorKind::SelfTransition),
        other => panic!("expected a config error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The loader.

/// Where an error on `text` points must be a line of it (or the line after its last newline).
fn assert_names_a_line(text: &str, error: &ConfigError) -> Result<(), TestCaseError> {
    let location = error.location();
    prop_assert!(location.is_some(), "no location: {error}");
    let line = location.map_or(0, |l| l.line);
    let lines = text.split('\n').count();
    prop_assert!(
        line >= 1 && line <= lines,
        "line {line} of {lines}: {error}"
    );
    prop_assert!(error.to_string().contains(&format!(":{line}:")), "{error}");
    Ok(())
}

/// One edit of a config's text.
#[derive(Debug, Clone)]
enum Edit {
    Delete(Index, usize),
    Insert(Index, char),
    DuplicateLine(Index),
    SwapLines(Index, Index),
    Truncate(Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    let noise = prop_oneof![
        proptest::sample::select(vec![
            '[', ']', '"', '=', '\n', '#', '\'', '{', ',', '\\', 'é', '\u{0}'
        ]),
        any::<char>(),
    ];
    prop_oneof![
        (any::<Index>(), 1..12usize).prop_map(|(at, len)| Edit::Delete(at, len)),
        (any::<Index>(), noise).prop_map(|(at, c)| Edit::Insert(at, c)),
        any::<Index>().prop_map(Edit::DuplicateLine),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        any::<Index>().prop_map(Edit::Truncate),
    ]
}

fn apply_edit(text: &str, edit: &Edit) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut lines: Vec<&str> = text.split('\n').collect();
    match edit {
        Edit::Delete(at, len) if !chars.is_empty() => {
            let start = at.index(chars.len());
            let end = (start + len).min(chars.len());
            chars[..start].iter().chain(&chars[end..]).collect()
        }
        Edit::Insert(at, c) => {
            let at = at.index(chars.len() + 1);
            let mut out: String = chars[..at].iter().collect();
            out.push(*c);
            out.extend(&chars[at..]);
            out
        }
        Edit::DuplicateLine(at) => {
            let i = at.index(lines.len());
            lines.insert(i, lines[i]);
            lines.join("\n")
        }
        Edit::SwapLines(a, b) => {
            let (a, b) = (a.index(lines.len()), b.index(lines.len()));
            lines.swap(a, b);
            lines.join("\n")
        }
        Edit::Truncate(at) => chars[..at.index(chars.len() + 1)].iter().collect(),
        Edit::Delete(..) => String::new(),
    }
}

proptest! {
    #![proptest_config(config(cases(1)))]

    #[test]
    fn generated_configs_load_and_mean_what_they_say(spec in testing::valid_configs(&tool_names())) {
        let text = spec.to_toml();
        let graph = config::parse(&text, "generated.toml")
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(config::check(&text, "generated.toml").is_empty());
        let registry = ToolRegistry::with_workspace_tools();
        prop_assert!(graph.check_tools(|t| registry.knows(t)).is_ok());

        let facts = spec.facts();
        let read = ConfigFacts::from_toml(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&read, &facts, "the text says what the spec says");
        prop_assert_eq!(graph.len(), facts.len());
        prop_assert_eq!(graph.default_mode_id().index(), facts.default_mode());
        for id in graph.ids() {
            let m = id.index();
            prop_assert_eq!(graph.mode(id).id(), facts.id(m));
            prop_assert_eq!(graph.transition_target(id).index(), facts.transition_target(m));
            prop_assert_eq!(graph.mode(id).is_planning(), facts.is_planning(m));
            // `requireApproval` (issue 12): the loader and the reference agree on every tool.
            for tool in facts.clone().with_tools(tool_names()).tool_names() {
                prop_assert_eq!(
                    graph.mode(id).requires_approval(&tool),
                    facts.modes()[m].require_approval.covers(&tool),
                    "{} in {}", tool, facts.id(m)
                );
            }
        }
        prop_assert_eq!(graph.plans_dir(), Path::new(facts.plans_dir()));
    }

    #[test]
    fn each_mutation_gives_its_error_kind(broken in testing::invalid_configs(&tool_names())) {
        let errors = config::check(&broken.text, "broken.toml");
        let kinds: Vec<ConfigErrorKind> = errors.iter().map(ConfigError::kind).collect();
        prop_assert_eq!(kinds, vec![broken.kind], "{}\n{}", broken.mutation, broken.text);
        let err = config::parse(&broken.text, "broken.toml").err();
        prop_assert_eq!(err.as_ref().map(ConfigError::kind), Some(broken.kind));
        if let Some(err) = &err {
            assert_names_a_line(&broken.text, err)?;
        }
    }

    #[test]
    fn the_loader_never_panics_on_arbitrary_text(text in any::<String>()) {
        if let Err(e) = config::parse(&text, "arbitrary.toml") {
            assert_names_a_line(&text, &e)?;
        }
        for e in config::check(&text, "arbitrary.toml") {
            assert_names_a_line(&text, &e)?;
        }
    }

    #[test]
    fn the_loader_never_panics_on_toml_like_text(
        text in "(\\[\\[?modes\\]\\]?\n|id = \"[a-z]{0,3}\"\n|default = (true|1)\n|transitionsTo = \"[a-z]{0,3}\"\n|availableTools = \\[\"submit_plan\"\\]\n|defaultModeId = \"[a-z]?\"\n|[a-zA-Z=\"\\[\\]{}, \n#]{0,8}){0,12}"
    ) {
        if let Err(e) = config::parse(&text, "tomlish.toml") {
            assert_names_a_line(&text, &e)?;
        }
    }

    #[test]
    fn the_loader_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let path = dir.path().join("bytes.toml");
        std::fs::write(&path, &bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        match (config::load(&path), std::str::from_utf8(&bytes)) {
            (Ok(_), _) => {}
            (Err(e), Ok(text)) => assert_names_a_line(text, &e)?,
            (Err(e), Err(bad)) => {
                // Not UTF-8: an error at the line of the first bad byte, not a bare I/O error.
                prop_assert_eq!(e.kind(), ConfigErrorKind::NotUtf8);
                let before = &bytes[..bad.valid_up_to()];
                let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
                prop_assert_eq!(e.location().map(|l| l.line), Some(line));
            }
        }
    }

    #[test]
    fn the_loader_never_panics_on_mangled_configs(
        spec in testing::valid_configs(&tool_names()),
        edits in proptest::collection::vec(edit(), 1..4),
    ) {
        let text = edits.iter().fold(spec.to_toml(), |text: String, e| apply_edit(&text, e));
        if let Err(e) = config::parse(&text, "mangled.toml") {
            assert_names_a_line(&text, &e)?;
        }
    }
}

#[test]
fn every_mutation_is_generated() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let strategy = testing::invalid_configs(&tool_names());
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..400 {
        let broken = strategy.new_tree(&mut runner).expect("a value").current();
        seen.insert(broken.mutation);
    }
    for mutation in Mutation::ALL {
        assert!(seen.contains(&mutation), "{mutation} never generated");
    }
}
