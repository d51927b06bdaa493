//! Hooks (issue 41, first part): a hook in code and a hook by command, consulted on each tool
//! call the mode offers and its rules do not refuse and on each submitted plan, before it runs
//! or waits. Allow runs a call that would wait; deny refuses it (or rejects a plan) with the
//! reason; ask, and any failure (an error, a panic, a command that hangs, floods, answers twice
//! or crashes), leaves the rules' path. A hook never widens: a tool the mode does not offer, or
//! a call a `deny` rule refuses, never reaches it.

use crate::common;

use std::sync::{Arc, Mutex};

use agent_controller::event::DecisionOutcome;
use agent_controller::hook::{
    Hook, HookDecision, HookError, HookRequest, HookSubject, HookVerdict,
};
use agent_controller::model::scripted::ReplayModel;
use agent_controller::{AgentController, Event, RunOutcome, ToolRegistry, config};
use common::{Recorder, Workspace, replay, tool_results};
use serde_json::json;

const BUILD: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
rules = [{ tool = "write_file", path = "secret/**", action = "deny" }]

[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
"#;

/// A hook that answers `verdict` (or panics, or fails) and remembers what it was asked.
struct Scripted {
    answer: Answer,
    seen: Arc<Mutex<Vec<HookRequest>>>,
}

#[derive(Clone)]
enum Answer {
    Verdict(HookVerdict),
    Fail,
    Panic,
}

#[agent_controller::async_trait]
impl Hook for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn decide(&self, request: &HookRequest) -> Result<HookVerdict, HookError> {
        self.seen.lock().expect("lock").push(request.clone());
        match &self.answer {
            Answer::Verdict(v) => Ok(v.clone()),
            Answer::Fail => Err(HookError::new("policy server unreachable")),
            Answer::Panic => panic!("the hook fell over"),
        }
    }
}

fn write(id: &str, path: &str) -> agent_controller::ModelResponse {
    ReplayModel::call(
        id,
        "write_file",
        json!({ "path": path, "content": "hello" }),
    )
}

fn controller_with(
    ws: &Workspace,
    model: Arc<ReplayModel>,
    hook: Option<Scripted>,
    text: &str,
) -> AgentController {
    let mut builder =
        AgentController::builder(config::parse(text, "modes.toml").expect("config"), model)
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(ws.path());
    if let Some(hook) = hook {
        builder = builder.hook(hook);
    }
    builder.build().expect("controller")
}

fn hook_events(events: &[Event]) -> Vec<(String, HookDecision, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::HookDecided {
                tool_name, hook, ..
            } => Some((tool_name.clone(), hook.decision, hook.error.clone())),
            _ => None,
        })
        .collect()
}

/// Runs one `write_file` call of `path` in `build` under a hook answering `answer`: the
/// outcome, the session's tool results, its audit records, the events, what the hook saw.
async fn run_write(
    answer: Answer,
    path: &str,
) -> (
    RunOutcome,
    Vec<(String, String)>,
    Vec<agent_controller::event::DecidedRecord>,
    Vec<Event>,
    Vec<HookRequest>,
    Workspace,
) {
    let ws = Workspace::new();
    let model = replay(vec![write("w1", path), ReplayModel::text("done")]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = Scripted {
        answer,
        seen: seen.clone(),
    };
    let controller = controller_with(&ws, model, Some(hook), BUILD);
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("build"))
        .await
        .expect("session");
    let outcome = session.send_message("write it").await.expect("runs");
    let results = tool_results(session.messages());
    let history = session.decision_history().to_vec();
    let seen = seen.lock().expect("lock").clone();
    (outcome, results, history, recorder.take(), seen, ws)
}

#[tokio::test]
async fn a_hook_that_allows_runs_a_call_that_would_wait_and_records_itself() {
    let (outcome, results, history, events, seen, ws) =
        run_write(Answer::Verdict(HookVerdict::Allow), "a.txt").await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(ws.path().join("a.txt").exists(), "the call ran");
    assert_eq!(results.len(), 1);
    let record = history.last().expect("the hook's record");
    assert_eq!(record.outcome, Some(DecisionOutcome::Approved));
    assert_eq!(record.decided_by.as_deref(), Some("hook scripted"));
    assert_eq!(
        record.hook.as_ref().map(|h| h.decision),
        Some(HookDecision::Allow)
    );
    assert_eq!(record.tool_name.as_deref(), Some("write_file"));
    let args = json!({ "path": "a.txt", "content": "hello" });
    assert_eq!(
        record.sha256.as_deref(),
        Some(&*agent_controller::jcs::sha256(&args))
    );
    assert!(record.decided_at.is_some());
    assert_eq!(
        hook_events(&events),
        [("write_file".to_owned(), HookDecision::Allow, None)]
    );
    // The hook saw what the approver would: the mode, the tool, the arguments and their hash.
    let [request] = &seen[..] else {
        panic!("asked once: {seen:?}")
    };
    assert_eq!(request.mode_id, "build");
    assert_eq!(request.workspace, ws.path());
    match &request.subject {
        HookSubject::ToolCall {
            tool_name,
            args: shown,
            args_sha256,
            ..
        } => {
            assert_eq!(tool_name, "write_file");
            assert_eq!(shown, &args);
            assert_eq!(args_sha256, &agent_controller::jcs::sha256(&args));
        }
        other => panic!("a tool call: {other:?}"),
    }
}

#[tokio::test]
async fn a_hook_that_denies_refuses_the_call_with_its_reason() {
    let (outcome, results, history, events, _, ws) = run_write(
        Answer::Verdict(HookVerdict::deny("no writes today")),
        "a.txt",
    )
    .await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(!ws.path().join("a.txt").exists(), "the call never ran");
    assert_eq!(
        results,
        [(
            "w1".to_owned(),
            "Not executed: hook `scripted` denied it: no writes today.".to_owned()
        )]
    );
    let record = history.last().expect("the hook's record");
    assert_eq!(record.outcome, Some(DecisionOutcome::Rejected));
    assert_eq!(
        record.hook.as_ref().and_then(|h| h.reason.as_deref()),
        Some("no writes today")
    );
    assert_eq!(hook_events(&events).len(), 1);
}

#[tokio::test]
async fn a_hook_that_asks_fails_or_panics_leaves_the_call_waiting() {
    for (answer, error) in [
        (Answer::Verdict(HookVerdict::Ask), None),
        (Answer::Fail, Some("policy server unreachable")),
        (Answer::Panic, Some("the hook panicked")),
    ] {
        let (outcome, results, history, events, _, ws) = run_write(answer, "a.txt").await;
        assert!(
            matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
            "the call waits for a person: {outcome:?}"
        );
        assert!(!ws.path().join("a.txt").exists());
        assert!(results.is_empty());
        assert!(history.is_empty(), "nothing decided yet");
        assert_eq!(
            hook_events(&events),
            [(
                "write_file".to_owned(),
                HookDecision::Ask,
                error.map(str::to_owned)
            )],
            "the failure is in the event"
        );
    }
}

/// A hook never widens: a call a `deny` rule refuses, and a tool the mode does not offer, never
/// reach it, so its `allow` cannot let them through.
#[tokio::test]
async fn a_hook_never_sees_what_the_rules_refuse() {
    let (_, results, _, events, seen, ws) =
        run_write(Answer::Verdict(HookVerdict::Allow), "secret/key").await;
    assert!(!ws.path().join("secret/key").exists());
    assert!(results[0].1.starts_with("Not executed: "), "{results:?}");
    assert!(seen.is_empty(), "the hook was not asked");
    assert!(hook_events(&events).is_empty());

    let ws = Workspace::new();
    let model = replay(vec![
        ReplayModel::call("l1", "list_files", json!({})),
        ReplayModel::text("done"),
    ]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = Scripted {
        answer: Answer::Verdict(HookVerdict::Allow),
        seen: seen.clone(),
    };
    let controller = controller_with(&ws, model, Some(hook), BUILD);
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new().mode("build"))
        .await
        .expect("session");
    session.send_message("list").await.expect("runs");
    let results = tool_results(session.messages());
    assert!(results[0].1.contains("not available"), "{results:?}");
    assert!(seen.lock().expect("lock").is_empty());
}

const PLAN: &str = "# Add a greeting\n\n1. Write hello.txt\n";

async fn submit_under(answer: Answer) -> (RunOutcome, agent_controller::Session, Vec<Event>) {
    let ws = Workspace::new();
    let path = ws.plan("greet.md", PLAN);
    let model = replay(vec![
        ReplayModel::call("p1", "submit_plan", json!({ "path": path })),
        ReplayModel::text("revising"),
    ]);
    let hook = Scripted {
        answer,
        seen: Arc::new(Mutex::new(Vec::new())),
    };
    let controller = controller_with(&ws, model, Some(hook), BUILD);
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("plan it").await.expect("runs");
    std::mem::forget(ws);
    (outcome, session, recorder.take())
}

/// On a plan a hook may reject (its reason is the feedback) or have no say; its `allow` is no
/// objection, never an approval: the plan still waits for a person.
#[tokio::test]
async fn a_plan_hook_rejects_with_feedback_and_never_approves() {
    let (outcome, session, events) =
        submit_under(Answer::Verdict(HookVerdict::deny("no step tests it"))).await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(session.mode().id(), "plan", "no hand-over");
    let record = session.decision_history().last().expect("the rejection");
    assert_eq!(record.outcome, Some(DecisionOutcome::Rejected));
    assert_eq!(record.decided_by.as_deref(), Some("hook scripted"));
    let results = tool_results(session.messages());
    assert!(
        results[0].1.contains("no step tests it"),
        "the model gets the reason: {results:?}"
    );
    assert_eq!(
        hook_events(&events),
        [("submit_plan".to_owned(), HookDecision::Deny, None)]
    );

    for answer in [
        Answer::Verdict(HookVerdict::Allow),
        Answer::Verdict(HookVerdict::Ask),
        Answer::Panic,
    ] {
        let (outcome, session, _) = submit_under(answer).await;
        assert!(
            matches!(outcome, RunOutcome::Suspended { .. }),
            "the plan waits for a person: {outcome:?}"
        );
        assert!(session.decision_history().is_empty());
    }
}

/// A memory store that notes, of each record it saves, whether a plan waits in it and how many
/// decisions its history holds.
/// A session in `plan` over `store` whose model submits [`PLAN`] once, under a hook that denies
/// it ("no step tests it"): by the time it returns the plan is rejected and the run has ended.
async fn plan_denied_by_hook(
    ws: &Workspace,
    store: Arc<dyn agent_controller::store::SessionStore>,
) -> agent_controller::Session {
    let path = ws.plan("greet.md", PLAN);
    let model = replay(vec![
        ReplayModel::call("p1", "submit_plan", json!({ "path": path })),
        ReplayModel::text("revising"),
    ]);
    let hook = Scripted {
        answer: Answer::Verdict(HookVerdict::deny("no step tests it")),
        seen: Arc::new(Mutex::new(Vec::new())),
    };
    let controller =
        AgentController::builder(config::parse(BUILD, "modes.toml").expect("config"), model)
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(ws.path())
            .store(store)
            .hook(hook)
            .build()
            .expect("controller");
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    session.send_message("plan it").await.expect("runs");
    session
}

#[derive(Default)]
struct Noting {
    inner: agent_controller::store::MemoryStore,
    saved: Mutex<Vec<(bool, usize)>>,
}

#[agent_controller::async_trait]
impl agent_controller::store::SessionStore for Noting {
    async fn load(
        &self,
        id: &str,
    ) -> Result<Option<agent_controller::store::SessionRecord>, agent_controller::store::StoreError>
    {
        self.inner.load(id).await
    }
    async fn save(
        &self,
        record: &agent_controller::store::SessionRecord,
        expected: Option<u64>,
    ) -> Result<(), agent_controller::store::StoreError> {
        self.inner.save(record, expected).await?;
        let noted = (record.pending.is_some(), record.history.len());
        self.saved.lock().expect("lock").push(noted);
        Ok(())
    }
    async fn delete(&self, id: &str) -> Result<bool, agent_controller::store::StoreError> {
        self.inner.delete(id).await
    }
    async fn list_pending(
        &self,
        now_ms: u64,
    ) -> Result<agent_controller::store::PendingListing, agent_controller::store::StoreError> {
        self.inner.list_pending(now_ms).await
    }
    async fn expire(&self, before: u64) -> Result<usize, agent_controller::store::StoreError> {
        self.inner.expire(before).await
    }
}

/// A plan a hook denies is suspended on and rejected in one save: no record the store ever
/// holds has the plan waiting for a person with the hook's deny lost, so a future dropped at any
/// await leaves either the run as it was before the plan or the plan rejected, whole.
#[tokio::test]
async fn a_plan_a_hook_denies_is_never_saved_waiting() {
    let ws = Workspace::new();
    let store = Arc::new(Noting::default());
    let session = plan_denied_by_hook(&ws, store.clone()).await;
    let saved = store.saved.lock().expect("lock").clone();
    assert!(
        saved.iter().all(|(waiting, _)| !waiting),
        "a save with the plan waiting: {saved:?}"
    );
    let first = saved
        .iter()
        .position(|(_, decided)| *decided == 1)
        .expect("the rejection is saved");
    assert!(
        saved[..first].iter().all(|(_, decided)| *decided == 0),
        "{saved:?}"
    );
    let record = session.decision_history().last().expect("the rejection");
    assert_eq!(record.outcome, Some(DecisionOutcome::Rejected));
    assert_eq!(record.how(), agent_controller::event::DecidedHow::Hook);
    assert_eq!(record.decided_by.as_deref(), Some("hook scripted"));
}

/// `log SESSION` prints the session's decisions from its stored record, in order, with how
/// each was taken: here a hook's allow, then a rule's deny.
#[tokio::test]
async fn the_log_prints_a_sessions_decisions_in_order_with_how_each_was_taken() {
    let ws = Workspace::new();
    let store_dir = tempfile::tempdir().expect("store dir");
    let store = Arc::new(agent_controller::FileStore::open(store_dir.path()).expect("store"));
    let model = replay(vec![
        agent_controller::ModelResponse {
            tool_calls: vec![
                agent_controller::ToolCall::new(
                    "w1",
                    "write_file",
                    json!({ "path": "a.txt", "content": "x" }),
                ),
                agent_controller::ToolCall::new(
                    "w2",
                    "write_file",
                    json!({ "path": "secret/k", "content": "x" }),
                ),
            ],
            ..Default::default()
        },
        ReplayModel::text("done"),
    ]);
    let hook = Scripted {
        answer: Answer::Verdict(HookVerdict::Allow),
        seen: Arc::new(Mutex::new(Vec::new())),
    };
    let controller =
        AgentController::builder(config::parse(BUILD, "modes.toml").expect("config"), model)
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(ws.path())
            .store(store)
            .hook(hook)
            .build()
            .expect("controller");
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new().mode("build"))
        .await
        .expect("session");
    session.send_message("write").await.expect("runs");
    let id = session.id().to_owned();
    drop(session);
    let store_arg = store_dir.path().to_str().expect("utf-8").to_owned();
    let out = common::cli::output(
        common::cli::command(ws.path(), &["log", &id, "--store", &store_arg, "--json"]),
        "",
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let lines = common::json_lines(&out);
    let how: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["toolCallId"].as_str().unwrap_or_default(),
                l["how"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(how, [("w1", "hook"), ("w2", "rule")]);
    assert_eq!(lines[0]["decidedBy"], "hook scripted");
    assert_eq!(lines[0]["via"], "hook", "the channel: a hook");
    let text = common::cli::output(
        common::cli::command(ws.path(), &["log", &id, "--store", &store_arg]),
        "",
    );
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let first = text.lines().next().expect("a line");
    assert!(
        first.contains("\tapproved\thook\thook\thook scripted\twrite_file "),
        "{first}"
    );
    let unknown = common::cli::output(
        common::cli::command(ws.path(), &["log", "nope", "--store", &store_arg]),
        "",
    );
    assert_eq!(unknown.status.code(), Some(common::cli::INVALID));
}

/// A plan a hook denies is logged as the hook's decision, as a tool call's is: `how` and `via`
/// say hook, the record names the hook and its reason, and the text log does not read as if a
/// person rejected it.
#[tokio::test]
async fn the_log_says_a_hook_rejected_a_plan_and_names_it() {
    let ws = Workspace::new();
    let store_dir = tempfile::tempdir().expect("store dir");
    let store = Arc::new(agent_controller::FileStore::open(store_dir.path()).expect("store"));
    let session = plan_denied_by_hook(&ws, store).await;
    let record = session.decision_history().last().expect("the rejection");
    assert_eq!(record.how(), agent_controller::event::DecidedHow::Hook);
    let id = session.id().to_owned();
    drop(session);
    let store_arg = store_dir.path().to_str().expect("utf-8").to_owned();
    let out = common::cli::output(
        common::cli::command(ws.path(), &["log", &id, "--store", &store_arg, "--json"]),
        "",
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let lines = common::json_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["toolCallId"], "p1");
    assert_eq!(lines[0]["outcome"], "rejected");
    assert_eq!(lines[0]["how"], "hook", "{lines:?}");
    assert_eq!(lines[0]["via"], "hook");
    assert_eq!(lines[0]["decidedBy"], "hook scripted");
    assert_eq!(lines[0]["hook"]["hook"], "scripted", "{lines:?}");
    assert_eq!(lines[0]["hook"]["decision"], "deny");
    assert_eq!(lines[0]["hook"]["reason"], "no step tests it");
    let text = common::cli::output(
        common::cli::command(ws.path(), &["log", &id, "--store", &store_arg]),
        "",
    );
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let first = text.lines().next().expect("a line");
    assert!(
        first.contains("\trejected\thook\thook\thook scripted\tsubmit_plan "),
        "{first}"
    );
    assert!(first.trim_end().ends_with("no step tests it"), "{first}");
}

/// Every hook is bounded in time, where the driver asks it: a hook a host registered that never
/// answers counts as ask (the rules' path: a person decides) within its bound, saying it timed
/// out, and is stopped; it never holds the run for ever. So is a hook still asking when the run
/// is cancelled.
mod bounded {
    use super::*;
    use crate::common::dropped::{SetOnDrop, is_set_soon};
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    /// A hook a host registered that never answers: `started` is notified when it is asked,
    /// `stopped` set once its answer is dropped.
    #[derive(Default)]
    struct NeverAnswers {
        started: Arc<tokio::sync::Notify>,
        stopped: Arc<AtomicBool>,
    }

    #[agent_controller::async_trait]
    impl Hook for NeverAnswers {
        fn name(&self) -> &str {
            "never"
        }

        async fn decide(&self, _: &HookRequest) -> Result<HookVerdict, HookError> {
            let _stopped = SetOnDrop(self.stopped.clone());
            self.started.notify_one();
            std::future::pending().await
        }
    }

    /// A session in `mode` under `hook` whose model answers `script`, with its recorder.
    async fn session_under(
        ws: &Workspace,
        hook: impl Hook,
        script: Vec<agent_controller::ModelResponse>,
        mode: &str,
    ) -> (agent_controller::Session, Recorder) {
        let controller = AgentController::builder(
            config::parse(BUILD, "modes.toml").expect("config"),
            replay(script),
        )
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .hook(hook)
        .build()
        .expect("controller");
        let recorder = Recorder::default();
        let session = controller
            .start_session(recorder.options().mode(mode))
            .await
            .expect("session");
        (session, recorder)
    }

    /// A host's hook declares no `timeout`: it has the default, 10s. Past it, the call goes on
    /// as a failed hook's does (ask: it waits for a person), the event saying it timed out.
    #[tokio::test]
    async fn a_host_hook_that_never_answers_counts_as_ask_within_the_default_and_is_stopped() {
        let ws = Workspace::new();
        let hook = NeverAnswers::default();
        let stopped = hook.stopped.clone();
        let (mut session, recorder) = session_under(
            &ws,
            hook,
            vec![write("w1", "a.txt"), ReplayModel::text("done")],
            "build",
        )
        .await;
        let started = Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(30), session.send_message("write"))
            .await
            .expect("the hook held the run past 30s: it is not bounded")
            .expect("runs");
        let took = started.elapsed();
        assert!(
            matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
            "the call waits for a person: {outcome:?}"
        );
        assert!(!ws.path().join("a.txt").exists());
        assert!(session.decision_history().is_empty(), "nothing decided");
        let events = hook_events(&recorder.take());
        let [(tool, HookDecision::Ask, Some(error))] = &events[..] else {
            panic!("one failed hook, counted as ask: {events:?}")
        };
        assert_eq!(tool, "write_file");
        assert!(error.contains("timed out after 10s"), "{error}");
        assert!(
            took >= Duration::from_secs(10) && took < Duration::from_secs(20),
            "bounded by the default 10s: {took:?}"
        );
        // Its answer is dropped, not left running behind the run.
        assert!(is_set_soon(&stopped).await, "the hook was stopped");
    }

    /// A host's hook that never answers within its own `timeout` (1s).
    struct NeverWithin1s(NeverAnswers);

    #[agent_controller::async_trait]
    impl Hook for NeverWithin1s {
        fn name(&self) -> &str {
            "never"
        }

        fn timeout(&self) -> Duration {
            Duration::from_secs(1)
        }

        async fn decide(&self, request: &HookRequest) -> Result<HookVerdict, HookError> {
            self.0.decide(request).await
        }
    }

    /// A hook's own `timeout` bounds it: past it a plan goes on as under a failed hook (no
    /// objection: it waits for a person), the event saying it timed out after 1s.
    #[tokio::test]
    async fn a_plan_hook_that_never_answers_counts_as_ask_within_its_own_timeout() {
        let ws = Workspace::new();
        let hook = NeverWithin1s(NeverAnswers::default());
        let stopped = hook.0.stopped.clone();
        let path = ws.plan("greet.md", PLAN);
        let (mut session, recorder) = session_under(
            &ws,
            hook,
            vec![
                ReplayModel::call("p1", "submit_plan", json!({ "path": path })),
                ReplayModel::text("revising"),
            ],
            "plan",
        )
        .await;
        let started = Instant::now();
        let outcome =
            tokio::time::timeout(Duration::from_secs(30), session.send_message("plan it"))
                .await
                .expect("the hook held the run past 30s: it is not bounded")
                .expect("runs");
        let took = started.elapsed();
        assert!(
            matches!(outcome, RunOutcome::Suspended { .. }),
            "the plan waits for a person: {outcome:?}"
        );
        assert!(session.decision_history().is_empty(), "nothing decided");
        let events = hook_events(&recorder.take());
        let [(tool, HookDecision::Ask, Some(error))] = &events[..] else {
            panic!("one failed hook, counted as ask: {events:?}")
        };
        assert_eq!(tool, "submit_plan");
        assert!(error.contains("timed out after 1s"), "{error}");
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(8),
            "bounded by the hook's own 1s, not the default: {took:?}"
        );
        assert!(is_set_soon(&stopped).await, "the hook was stopped");
    }

    /// A run cancelled while a hook decides stops the hook too.
    #[tokio::test]
    async fn a_hook_still_asking_when_the_run_is_cancelled_is_stopped() {
        let ws = Workspace::new();
        let hook = NeverAnswers::default();
        let (started, stopped) = (hook.started.clone(), hook.stopped.clone());
        let path = ws.plan("greet.md", PLAN);
        let (mut session, _) = session_under(
            &ws,
            hook,
            vec![
                ReplayModel::call("p1", "submit_plan", json!({ "path": path })),
                ReplayModel::text("revising"),
            ],
            "plan",
        )
        .await;
        let handle = session.cancel_handle();
        let canceller = tokio::spawn(async move {
            started.notified().await;
            handle.cancel()
        });
        tokio::time::timeout(Duration::from_secs(30), session.send_message("plan it"))
            .await
            .expect("the cancelled run is back")
            .expect("runs");
        assert!(canceller.await.expect("task"), "a run was in progress");
        assert!(is_set_soon(&stopped).await, "the hook was stopped");
    }
}
