//! Cancel-safe runs: dropping the future of `send_message` / `resume` at every await point, and
//! cancelling a run from another task, leave the session consistent: every tool call has a
//! result, every `agent_end` pairs with an `agent_start`, a pending plan stays pending unless
//! its decision was saved, the store agrees with the session, and the next run works.

use crate::common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use agent_controller::model::{LanguageModel, ModelError, ModelRequest, ModelResponse};
use agent_controller::store::{
    MemoryStore, PendingListing, SessionRecord, SessionStore, StoreError,
};
use agent_controller::tool::submit_plan::APPROVED_RESULT;
use agent_controller::tool::{Tool, ToolCall, ToolContext, ToolOutput};
use agent_controller::{
    AgentController, Decision, Event, RunOutcome, Session, SessionOptions, ToolRegistry,
    event::DecisionOutcome, event::RunState, model::Message,
};
use async_trait::async_trait;
use common::{Recorder, Workspace, graph};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["slow", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["slow"]
"#;

const PLAN: &str = ".agent/plans/p.md";

/// Yields `n` times: `n` await points where a caller may drop the future.
async fn yields(n: usize) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

/// Conversation rules an OpenAI-compatible server enforces: after an assistant message with tool
/// calls come exactly the results of those calls (in any order), before any other message.
fn well_formed(messages: &[Message]) -> Result<(), String> {
    let mut i = 0;
    while i < messages.len() {
        if let Message::Assistant { tool_calls, .. } = &messages[i]
            && !tool_calls.is_empty()
        {
            let mut ids: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
            let mut j = i + 1;
            while let Some(Message::Tool { tool_call_id, .. }) = messages.get(j) {
                let Some(at) = ids.iter().position(|id| id == tool_call_id) else {
                    return Err(format!("message {j}: a result for no open call"));
                };
                ids.remove(at);
                j += 1;
            }
            if !ids.is_empty() {
                return Err(format!("message {i}: calls {ids:?} have no result"));
            }
            i = j;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// A model that yields twice per call and answers from the conversation: in `plan`, two `slow`
/// calls, then `submit_plan` with one more `slow` call after it; in `build`, one `slow` call,
/// then text. Every request it sees must be well formed.
#[derive(Default)]
struct Model {
    calls: AtomicUsize,
    malformed: Mutex<Vec<String>>,
}

#[async_trait]
impl LanguageModel for Model {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        if let Err(e) = well_formed(request.messages) {
            self.malformed.lock().expect("lock").push(e);
        }
        yields(2).await;
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let call = |name: &str, args: Value, k: usize| ToolCall {
            id: format!("m{n}_{k}"),
            name: name.to_owned(),
            args,
        };
        let replies_since_prompt = request
            .messages
            .iter()
            .rev()
            // Counted since the prompt or the last mode change (a notice, or an approval
            // result, which carries the notice of the hand-over).
            .take_while(|m| {
                !matches!(m, Message::User { .. } | Message::System { .. })
                    && !matches!(m, Message::Tool { content, .. } if content.starts_with(APPROVED_RESULT))
            })
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let tool_calls = match (request.mode_id, replies_since_prompt) {
            ("plan", 0) => vec![call("slow", json!({}), 0), call("slow", json!({}), 1)],
            ("plan", 1) => vec![
                call("submit_plan", json!({ "path": PLAN }), 0),
                call("slow", json!({}), 1),
            ],
            ("build", 0) => vec![call("slow", json!({}), 0)],
            _ => Vec::new(),
        };
        Ok(ModelResponse {
            text: if tool_calls.is_empty() {
                "done".to_owned()
            } else {
                String::new()
            },
            tool_calls,
            ..ModelResponse::default()
        })
    }
}

/// A tool that yields three times before it answers.
struct Slow;

#[async_trait]
impl Tool for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> String {
        "Takes a while.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object" })
    }
    async fn execute(&self, _: &Value, _: &ToolContext<'_>) -> ToolOutput {
        yields(3).await;
        ToolOutput::ok("slow result")
    }
}

/// A memory store whose saves and loads yield before and after their work.
#[derive(Default)]
struct YieldingStore(MemoryStore);

#[async_trait]
impl SessionStore for YieldingStore {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        yields(1).await;
        self.0.load(id).await
    }
    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        yields(1).await;
        let saved = self.0.save(record, expected).await;
        yields(1).await;
        saved
    }
    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.0.delete(id).await
    }
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        self.0.list_pending(now_ms).await
    }
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.0.expire(before).await
    }
}

struct Fixture {
    _ws: Workspace,
    model: Arc<Model>,
    store: Arc<YieldingStore>,
    recorder: Recorder,
    session: Session,
}

async fn fixture(with_store: bool) -> Fixture {
    let ws = Workspace::new();
    ws.plan("p.md", "# P\n\n1. x\n");
    let model = Arc::new(Model::default());
    let store = Arc::new(YieldingStore::default());
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Slow)).expect("register");
    let mut builder = AgentController::builder(graph(CONFIG), model.clone())
        .tools(tools)
        .workspace(ws.path());
    if with_store {
        builder = builder.store(store.clone());
    }
    let controller = builder.build().expect("controller");
    let recorder = Recorder::default();
    let session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    Fixture {
        _ws: ws,
        model,
        store,
        recorder,
        session,
    }
}

/// Polls `operation` up to `polls` times (yielding to other tasks after each poll unless
/// `drop_at_once`), then drops it; `Some` when it finished first.
async fn poll_then_drop<F: Future>(
    operation: F,
    polls: usize,
    drop_at_once: bool,
) -> Option<F::Output> {
    let mut operation = std::pin::pin!(operation);
    for i in 0..polls {
        let mut op: Pin<&mut F> = operation.as_mut();
        let polled = std::future::poll_fn(move |cx| Poll::Ready(op.as_mut().poll(cx))).await;
        if let Poll::Ready(out) = polled {
            return Some(out);
        }
        if !(drop_at_once && i + 1 == polls) {
            tokio::task::yield_now().await;
        }
    }
    None
}

/// Every event that names a run lies between that run's `agent_start` and `agent_end`, and
/// every `agent_end` closes an open `agent_start` of the same run.
fn assert_paired(events: &[Event]) {
    let mut open: Option<String> = None;
    for (i, event) in events.iter().enumerate() {
        let json = serde_json::to_value(event).expect("json");
        let run = json.get("runId").and_then(Value::as_str).map(str::to_owned);
        match event {
            Event::AgentStart { run_id, .. } => {
                assert_eq!(
                    open, None,
                    "event {i}: agent_start inside a run: {events:#?}"
                );
                open = Some(run_id.to_string());
            }
            Event::AgentEnd { run_id, .. } => {
                assert_eq!(open.as_deref(), Some(&**run_id), "event {i}: {events:#?}");
                open = None;
            }
            _ if run.is_some() => {
                assert_eq!(open, run, "event {i} outside its run: {events:#?}");
            }
            _ => {}
        }
    }
    assert_eq!(open, None, "a run was left open: {events:#?}");
}

/// The session after `settle` agrees with its store and holds a well-formed conversation.
async fn assert_consistent(f: &mut Fixture, with_store: bool, context: &str) {
    f.session.settle().await.expect("settle");
    let (run_state, pending) = (
        f.session.run_state().map(|(_, s)| s),
        f.session.pending_plan().is_some(),
    );
    assert_ne!(run_state, Some(RunState::Running), "{context}");
    assert_eq!(
        pending,
        run_state == Some(RunState::Suspended),
        "{context}: pending iff suspended"
    );
    well_formed(f.session.messages()).unwrap_or_else(|e| {
        if !pending {
            panic!("{context}: {e}: {:#?}", f.session.messages())
        }
    });
    if with_store {
        let record = f
            .store
            .load(f.session.id())
            .await
            .expect("load")
            .expect("saved");
        assert_eq!(record.version, f.session.version(), "{context}");
        assert_eq!(record.messages, f.session.messages(), "{context}");
        assert_eq!(record.mode_id, f.session.mode().id(), "{context}");
        assert_eq!(record.pending.is_some(), pending, "{context}");
        assert_eq!(record.run.map(|r| r.state), run_state, "{context}");
    }
}

/// After the drop: the session settles consistently, a pending plan can still be decided (or
/// a new message sent), every model request was well formed, and events pair up.
async fn check_after_drop(mut f: Fixture, with_store: bool, context: &str) {
    assert_consistent(&mut f, with_store, context).await;
    let next = match f.session.pending_plan().cloned() {
        Some(p) => {
            f.session
                .resume(p.run_id(), p.tool_call_id(), Decision::approve())
                .await
        }
        None => f.session.send_message("carry on").await,
    };
    let next = next.unwrap_or_else(|e| panic!("{context}: the next operation fails: {e}"));
    assert!(
        !matches!(next, RunOutcome::Failed { .. } | RunOutcome::Aborted { .. }),
        "{context}: {next:?}"
    );
    assert_consistent(&mut f, with_store, context).await;
    let malformed = f.model.malformed.lock().expect("lock").clone();
    assert!(malformed.is_empty(), "{context}: {malformed:?}");
    assert_paired(&f.recorder.take());
}

/// The run to suspension, the approval, and a message that replaces a pending plan: each is
/// dropped after 1, 2, ... polls until it finishes without being dropped.
#[derive(Clone, Copy, Debug)]
enum Step {
    SendToSuspension,
    Approve,
    MessageWhilePending,
}

async fn prepare(step: Step, with_store: bool) -> Fixture {
    let mut f = fixture(with_store).await;
    if !matches!(step, Step::SendToSuspension) {
        let outcome = f.session.send_message("plan it").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::Suspended { .. }),
            "{outcome:?}"
        );
    }
    f
}

async fn run_step(session: &mut Session, step: Step, polls: usize, at_once: bool) -> bool {
    match step {
        Step::SendToSuspension => poll_then_drop(session.send_message("plan it"), polls, at_once)
            .await
            .is_some(),
        Step::Approve => {
            let p = session.pending_plan().cloned().expect("pending");
            poll_then_drop(
                session.resume(p.run_id(), p.tool_call_id(), Decision::approve()),
                polls,
                at_once,
            )
            .await
            .is_some()
        }
        Step::MessageWhilePending => {
            poll_then_drop(session.send_message("something else"), polls, at_once)
                .await
                .is_some()
        }
    }
}

async fn drop_at_every_await_point(step: Step, with_store: bool) {
    let mut dropped = 0;
    for at_once in [false, true] {
        for polls in 1.. {
            let mut f = prepare(step, with_store).await;
            if run_step(&mut f.session, step, polls, at_once).await {
                break;
            }
            dropped += 1;
            let context = format!(
                "{step:?} dropped after {polls} polls (at once: {at_once}, store: {with_store})"
            );
            check_after_drop(f, with_store, &context).await;
        }
    }
    assert!(dropped >= 10, "{step:?}: only {dropped} await points");
}

#[tokio::test]
async fn dropping_a_run_to_suspension_at_every_await_point_keeps_the_session_consistent() {
    drop_at_every_await_point(Step::SendToSuspension, true).await;
    drop_at_every_await_point(Step::SendToSuspension, false).await;
}

#[tokio::test]
async fn dropping_an_approval_at_every_await_point_keeps_the_session_consistent() {
    drop_at_every_await_point(Step::Approve, true).await;
    drop_at_every_await_point(Step::Approve, false).await;
}

#[tokio::test]
async fn dropping_a_message_sent_while_a_plan_is_pending_keeps_the_session_consistent() {
    drop_at_every_await_point(Step::MessageWhilePending, true).await;
    drop_at_every_await_point(Step::MessageWhilePending, false).await;
}

#[tokio::test]
async fn a_dropped_run_gives_every_open_tool_call_a_result_and_ends_aborted() {
    // Dropped while the first `slow` call runs (the model yields twice, the tool three times):
    // the first drop, counting polls, after which that call has a result of its own.
    let mut f = fixture(true).await;
    for polls in 1..40 {
        f = fixture(true).await;
        assert!(!run_step(&mut f.session, Step::SendToSuspension, polls, false).await);
        if f.recorder.kinds().contains(&"tool_start") {
            break;
        }
    }
    // Ended at once (the save waits for `settle`).
    assert_eq!(
        f.session.run_state().map(|(_, s)| s),
        Some(RunState::Aborted)
    );
    f.session.settle().await.expect("settle");
    assert_eq!(f.session.run_state(), Some(("run_1", RunState::Aborted)));
    let results = common::tool_results(f.session.messages());
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].1.starts_with("Cancelled:"), "{results:?}");
    assert!(results[1].1.starts_with("Not executed:"), "{results:?}");
    let kinds: Vec<&str> = f.recorder.take().iter().map(Event::kind).collect();
    assert_eq!(
        kinds,
        [
            "session_started",
            "agent_start",
            "tool_start",
            "tool_end",
            "tool_start",
            "tool_end",
            "agent_end"
        ]
    );
    let stored = f
        .store
        .load(f.session.id())
        .await
        .expect("load")
        .expect("saved");
    assert_eq!(stored.run.map(|r| r.state), Some(RunState::Aborted));
}

/// Issue 20: once a host drops a run's future, the session says at once that the run ended
/// (aborted) and every tool call has its result, without waiting for the next operation or
/// `settle()`; the save waits for them. At every await point of a run (the model's calls, the
/// tools', the saves), with a store and without. With a store, the run's last await points are
/// those of the save of its suspension: dropped there, it reads suspended (the save landed or
/// is under way) or aborted (it did not land), never running (issue 36, item 20), and what
/// `settle()` learns agrees with what it read where the save had returned.
#[tokio::test]
async fn a_dropped_run_reads_as_ended_at_once() {
    for with_store in [true, false] {
        let mut states = Vec::new();
        for polls in 1.. {
            let mut f = fixture(with_store).await;
            if run_step(&mut f.session, Step::SendToSuspension, polls, false).await {
                break;
            }
            let context = format!("dropped after {polls} polls (store: {with_store})");
            let state = f.session.run_state().map(|(_, s)| s);
            assert_ne!(state, Some(RunState::Running), "{context}");
            if state == Some(RunState::Aborted) {
                well_formed(f.session.messages())
                    .unwrap_or_else(|e| panic!("{context}: {e}: {:#?}", f.session.messages()));
            }
            states.push((context.clone(), state));
            assert_consistent(&mut f, with_store, &context).await;
            assert_paired(&f.recorder.take());
        }
        if with_store {
            // The await points of the suspension's save, last.
            let saving = states
                .iter()
                .rev()
                .take_while(|(_, s)| *s == Some(RunState::Suspended))
                .count();
            assert!((1..=3).contains(&saving), "{states:?}");
            states.truncate(states.len() - saving);
        }
        // Dropped before the message was taken (while the session reloads what the store
        // has): no run started.
        let before = states.iter().take_while(|(_, s)| s.is_none()).count();
        assert!(before <= 3, "{states:?}");
        states.drain(..before);
        assert!(states.len() >= 8, "{states:?}");
        for (context, state) in states {
            assert_eq!(state, Some(RunState::Aborted), "{context}");
        }
    }
}

/// A tool that waits until the run is cancelled, and tells whether its token fired.
struct Waits {
    saw_cancel: Arc<AtomicBool>,
    started: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Tool for Waits {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> String {
        "Waits for ever.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object" })
    }
    async fn execute(&self, _: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let token = ctx.cancel.clone();
        let saw = self.saw_cancel.clone();
        // Work that outlives the tool's future sees the cancellation through its token.
        tokio::spawn(async move {
            token.cancelled().await;
            saw.store(true, Ordering::SeqCst);
        });
        self.started.notify_one();
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_run_cancelled_from_another_task_ends_aborted_and_the_session_carries_on() {
    let ws = Workspace::new();
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let mut tools = ToolRegistry::new();
    tools
        .register(Arc::new(Waits {
            saw_cancel: saw_cancel.clone(),
            started: started.clone(),
        }))
        .expect("register");
    let model = Arc::new(Model::default());
    let store = Arc::new(MemoryStore::new());
    let controller = AgentController::builder(graph(CONFIG), model.clone())
        .tools(tools)
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("build"))
        .await
        .expect("session");
    let handle = session.cancel_handle();
    // Not `cancel()`: with no run in progress it would cancel the run about to start.
    assert!(!handle.is_running(), "no run in progress");
    let canceller = tokio::spawn(async move {
        started.notified().await;
        assert!(handle.is_running());
        handle.cancel()
    });
    let outcome = session.send_message("build it").await.expect("run");
    assert!(canceller.await.expect("task"), "a run was in progress");
    assert_eq!(
        outcome,
        RunOutcome::Aborted {
            run_id: "run_1".into()
        }
    );
    tokio::task::yield_now().await;
    assert!(saw_cancel.load(Ordering::SeqCst), "the tool's token fired");
    assert_eq!(session.run_state(), Some(("run_1", RunState::Aborted)));
    assert!(
        matches!(session.messages().last(), Some(Message::Tool { content, is_error: true, .. }) if content.starts_with("Cancelled:"))
    );
    let stored = store
        .load(session.id())
        .await
        .expect("load")
        .expect("saved");
    assert_eq!(stored.messages, session.messages());
    assert!(!session.cancel_handle().is_running());
    let events = recorder.take();
    assert_eq!(
        events
            .iter()
            .rev()
            .take(2)
            .map(Event::kind)
            .collect::<Vec<_>>(),
        ["agent_end", "tool_end"],
        "{events:?}"
    );
    assert_paired(&events);
    assert!(model.malformed.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn tools_and_models_see_the_session_run_and_tool_call_ids_and_the_hosts_extensions() {
    #[derive(Debug)]
    struct Tenant(&'static str);
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);
    struct Probe(Arc<Seen>);
    #[async_trait]
    impl Tool for Probe {
        fn name(&self) -> &str {
            "slow"
        }
        fn description(&self) -> String {
            "Looks around.".to_owned()
        }
        fn input_schema(&self) -> Value {
            json!({ "type": "object" })
        }
        async fn execute(&self, _: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
            let tenant = ctx.extensions.get::<Tenant>().map_or("none", |t| t.0);
            self.0.0.lock().expect("lock").push(format!(
                "tool {} {} {} {tenant}",
                ctx.session_id, ctx.run_id, ctx.tool_call_id
            ));
            ToolOutput::ok("seen")
        }
    }
    struct ProbeModel(Arc<Seen>, Model);
    #[async_trait]
    impl LanguageModel for ProbeModel {
        async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
            let tenant = request.extensions.get::<Tenant>().map_or("none", |t| t.0);
            self.0.0.lock().expect("lock").push(format!(
                "model {} {} {tenant}",
                request.session_id, request.run_id
            ));
            self.1.generate(request).await
        }
    }
    let ws = Workspace::new();
    let seen = Arc::new(Seen::default());
    let mut tools = ToolRegistry::new();
    tools
        .register(Arc::new(Probe(seen.clone())))
        .expect("register");
    let controller = AgentController::builder(
        graph(CONFIG),
        Arc::new(ProbeModel(seen.clone(), Model::default())),
    )
    .tools(tools)
    .workspace(ws.path())
    .build()
    .expect("controller");
    let mut session = controller
        .start_session(
            SessionOptions::new()
                .id("s-7")
                .mode("build")
                .extension(Tenant("acme")),
        )
        .await
        .expect("session");
    session.send_message("go").await.expect("run");
    assert_eq!(
        *seen.0.lock().expect("lock"),
        [
            "model s-7 run_1 acme",
            "tool s-7 run_1 m0_0 acme",
            "model s-7 run_1 acme"
        ]
    );
}

#[tokio::test]
async fn session_metadata_is_persisted_and_read_back_after_a_restore() {
    let ws = Workspace::new();
    let store = Arc::new(MemoryStore::new());
    let controller = AgentController::builder(graph(CONFIG), Arc::new(Model::default()))
        .tools({
            let mut tools = ToolRegistry::new();
            tools.register(Arc::new(Slow)).expect("register");
            tools
        })
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller");
    let mut metadata = serde_json::Map::new();
    metadata.insert("userId".into(), json!("u-42"));
    metadata.insert("tags".into(), json!(["a", "b"]));
    let mut session = controller
        .start_session(
            SessionOptions::new()
                .mode("build")
                .metadata(metadata.clone()),
        )
        .await
        .expect("session");
    assert_eq!(session.metadata(), &metadata);
    session.send_message("go").await.expect("run");
    let record = store
        .load(session.id())
        .await
        .expect("load")
        .expect("saved");
    assert_eq!(record.metadata, metadata);
    let json = serde_json::to_value(&record).expect("json");
    assert_eq!(json["metadata"]["userId"], "u-42");
    let restored = controller
        .restore_session(session.id(), SessionOptions::new())
        .await
        .expect("restore");
    assert_eq!(restored.metadata(), &metadata);
    // A record written before metadata existed reads as empty metadata.
    let mut old = json.clone();
    old.as_object_mut().expect("object").remove("metadata");
    let old: SessionRecord = serde_json::from_value(old).expect("an old record still reads");
    assert!(old.metadata.is_empty());
}

/// Through the real OpenAI provider: a server that refuses, as OpenAI does with HTTP 400, a
/// conversation where an assistant message's tool calls lack results.
#[cfg(feature = "openai")]
mod openai {
    use std::collections::VecDeque;

    use agent_controller::model::openai::{OpenAiModel, OpenAiSettings};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

    use super::*;

    fn sse(chunks: &[Value]) -> ResponseTemplate {
        let mut body = String::new();
        for c in chunks {
            body.push_str(&format!("data: {c}\n\n"));
        }
        body.push_str("data: [DONE]\n\n");
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
    }

    fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "test-model",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
        })
    }

    /// Checks every request as OpenAI does, then answers from the script.
    struct Strict(Mutex<VecDeque<ResponseTemplate>>);

    impl Respond for Strict {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            let body: Value = serde_json::from_slice(&request.body).expect("json body");
            let messages = body["messages"].as_array().cloned().unwrap_or_default();
            let mut open: Vec<String> = Vec::new();
            for m in &messages {
                match m["role"].as_str() {
                    Some("tool") => {
                        let id = m["tool_call_id"].as_str().unwrap_or_default();
                        open.retain(|o| o != id);
                    }
                    _ if !open.is_empty() => {
                        return ResponseTemplate::new(400).set_body_json(json!({"error": {
                            "message": "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'.",
                            "type": "invalid_request_error", "param": "messages", "code": null
                        }}));
                    }
                    _ => {}
                }
                if let Some(calls) = m["tool_calls"].as_array() {
                    open = calls
                        .iter()
                        .filter_map(|c| c["id"].as_str().map(str::to_owned))
                        .collect();
                }
            }
            self.0
                .lock()
                .expect("lock")
                .pop_front()
                .unwrap_or_else(|| ResponseTemplate::new(500).set_body_string("script exhausted"))
        }
    }

    #[tokio::test]
    async fn the_request_after_a_cancelled_run_is_accepted_by_an_openai_compatible_server() {
        let call = sse(&[
            chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"index": 0, "id": "call_a", "type": "function", "function": {"name": "slow", "arguments": "{}"}},
                    {"index": 1, "id": "call_b", "type": "function", "function": {"name": "slow", "arguments": "{}"}}
                ]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
        ]);
        let text = sse(&[
            chunk(json!({"role": "assistant", "content": "Fine."}), None),
            chunk(json!({}), Some("stop")),
        ]);
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Strict(Mutex::new(vec![call, text].into())))
            .mount(&server)
            .await;
        let settings = OpenAiSettings::new(format!("{}/v1", server.uri()))
            .api_key("sk-test")
            .default_model("openai/test-model");
        let model = OpenAiModel::new(settings).expect("model");
        let ws = Workspace::new();
        let started = Arc::new(tokio::sync::Notify::new());
        let mut tools = ToolRegistry::new();
        tools
            .register(Arc::new(Waits {
                saw_cancel: Arc::new(AtomicBool::new(false)),
                started: started.clone(),
            }))
            .expect("register");
        let controller = AgentController::builder(graph(CONFIG), Arc::new(model))
            .tools(tools)
            .workspace(ws.path())
            .build()
            .expect("controller");
        let mut session = controller
            .start_session(SessionOptions::new().mode("build"))
            .await
            .expect("session");
        // Cancelled by dropping the run's future while the first tool call runs, as the CLI
        // does on Ctrl-C.
        tokio::select! {
            _ = session.send_message("build it") => panic!("the tool never finishes"),
            _ = started.notified() => {}
        }
        let outcome = session.send_message("never mind").await.expect("run");
        assert_eq!(
            outcome,
            RunOutcome::Completed {
                run_id: "run_2".into(),
                text: "Fine.".into()
            }
        );
        let requests = server.received_requests().await.expect("requests");
        let last: Value = serde_json::from_slice(&requests[1].body).expect("json");
        let roles: Vec<&str> = last["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter_map(|m| m["role"].as_str())
            .collect();
        // The cancelled run never got the model's reply: a stand-in keeps user and assistant
        // turns alternating (strict chat templates refuse a user turn after tool results).
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "tool",
                "tool",
                "assistant",
                "user"
            ]
        );
    }
}

// --- Issue 19, item 8: once the handle fired the run ends aborted; a cancel before the run ----
// --- starts takes effect ----------------------------------------------------------------------

const APPROVALS: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["slow", "write_file"]
requireApproval = ["write_file"]

[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["submit_plan"]
"#;

/// A tool that watches its cancel token, as the docs invite, and returns once it fires.
struct ReturnsOnCancel(Arc<tokio::sync::Notify>);

#[async_trait]
impl Tool for ReturnsOnCancel {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> String {
        "Stops when cancelled.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object" })
    }
    async fn execute(&self, _: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        self.0.notify_one();
        ctx.cancel.cancelled().await;
        ToolOutput::error("slow: stopped, the run was cancelled")
    }
}

/// A model that watches its cancel token and then returns an error, as a provider whose
/// request was cut off does.
struct ErrsOnCancel(Arc<tokio::sync::Notify>);

#[async_trait]
impl LanguageModel for ErrsOnCancel {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.0.notify_one();
        request.cancel.cancelled().await;
        Err(ModelError::new("the request was cancelled"))
    }
}

fn calls_reply(calls: Vec<ToolCall>) -> ModelResponse {
    ModelResponse {
        tool_calls: calls,
        ..ModelResponse::default()
    }
}

fn tool_call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        args,
    }
}

fn write_call(id: &str, path: &str) -> ToolCall {
    tool_call(id, "write_file", json!({ "path": path, "content": "x" }))
}

/// A controller on `APPROVALS` with `tool` as `slow`, the workspace tools and a store.
fn approvals_controller(
    ws: &Workspace,
    model: Arc<dyn LanguageModel>,
    tool: Arc<dyn Tool>,
) -> AgentController {
    let mut tools = ToolRegistry::with_workspace_tools();
    tools.register(tool).expect("register");
    AgentController::builder(graph(APPROVALS), model)
        .tools(tools)
        .workspace(ws.path())
        .store(Arc::new(MemoryStore::new()))
        .build()
        .expect("controller")
}

/// The (id, content) of every tool result of the conversation.
fn results(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

fn result_of<'a>(results: &'a [(String, String)], id: &str) -> &'a str {
    results
        .iter()
        .find(|(call, _)| call == id)
        .map(|(_, content)| content.as_str())
        .unwrap_or_else(|| panic!("no result for {id}: {results:#?}"))
}

#[tokio::test]
async fn a_model_that_returns_an_error_once_cancelled_ends_the_run_aborted_not_failed() {
    let ws = Workspace::new();
    let started = Arc::new(tokio::sync::Notify::new());
    let controller =
        approvals_controller(&ws, Arc::new(ErrsOnCancel(started.clone())), Arc::new(Slow));
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    let handle = session.cancel_handle();
    let (outcome, cancelled) = tokio::join!(session.send_message("build it"), async move {
        started.notified().await;
        handle.cancel()
    });
    assert!(cancelled, "the run was in progress");
    assert_eq!(
        outcome.expect("run"),
        RunOutcome::Aborted {
            run_id: "run_1".into()
        }
    );
    assert_eq!(session.run_state(), Some(("run_1", RunState::Aborted)));
    let events = recorder.take();
    assert!(
        !events.iter().any(|e| matches!(e, Event::Error { .. })),
        "{events:#?}"
    );
    assert_paired(&events);
}

#[tokio::test]
async fn a_tool_that_returns_once_cancelled_ends_the_run_aborted_and_no_later_call_waits_or_runs() {
    let ws = Workspace::new();
    let started = Arc::new(tokio::sync::Notify::new());
    let model = common::replay(vec![
        calls_reply(vec![
            tool_call("t1", "slow", json!({})),
            write_call("t2", "a.txt"),
        ]),
        ModelResponse {
            text: "never asked".to_owned(),
            ..ModelResponse::default()
        },
    ]);
    let controller = approvals_controller(
        &ws,
        model.clone(),
        Arc::new(ReturnsOnCancel(started.clone())),
    );
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    let handle = session.cancel_handle();
    let (outcome, cancelled) = tokio::join!(session.send_message("build it"), async move {
        started.notified().await;
        handle.cancel()
    });
    assert!(cancelled);
    assert_eq!(
        outcome.expect("run"),
        RunOutcome::Aborted {
            run_id: "run_1".into()
        }
    );
    assert!(session.pending().is_empty(), "nothing waits");
    let results = results(session.messages());
    // What the tool returned is kept; the call after it never started.
    assert_eq!(
        result_of(&results, "t1"),
        "slow: stopped, the run was cancelled"
    );
    assert!(
        result_of(&results, "t2").starts_with("Not executed:"),
        "{results:#?}"
    );
    assert_eq!(model.requests().len(), 1);
    assert!(!ws.path().join("a.txt").exists());
    assert_paired(&recorder.take());
}

#[tokio::test]
async fn a_call_waiting_for_approval_in_a_cancelled_run_is_not_approved_and_the_running_one_cancelled()
 {
    let ws = Workspace::new();
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let model = common::replay(vec![calls_reply(vec![
        write_call("t1", "a.txt"),
        tool_call("t2", "slow", json!({})),
        tool_call("t3", "slow", json!({})),
    ])]);
    let controller = approvals_controller(
        &ws,
        model.clone(),
        Arc::new(Waits {
            saw_cancel,
            started: started.clone(),
        }),
    );
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    let handle = session.cancel_handle();
    let (outcome, _) = tokio::join!(session.send_message("build it"), async move {
        started.notified().await;
        handle.cancel()
    });
    assert!(matches!(outcome.expect("run"), RunOutcome::Aborted { .. }));
    let results = results(session.messages());
    assert!(
        result_of(&results, "t1").starts_with("Not approved: the run was aborted"),
        "{results:#?}"
    );
    assert!(
        result_of(&results, "t2").starts_with("Cancelled:"),
        "{results:#?}"
    );
    assert!(
        result_of(&results, "t3").starts_with("Not executed:"),
        "{results:#?}"
    );
    // Each call started once and ended once.
    let events = recorder.take();
    for id in ["t1", "t2", "t3"] {
        let starts = events
            .iter()
            .filter(|e| matches!(e, Event::ToolStart { tool_call_id, .. } if tool_call_id == id))
            .count();
        let ends = events
            .iter()
            .filter(|e| matches!(e, Event::ToolEnd { tool_call_id, .. } if tool_call_id == id))
            .count();
        assert_eq!((starts, ends), (1, 1), "{id}: {events:#?}");
    }
    assert_paired(&events);
}

#[tokio::test]
async fn a_cancel_before_the_run_starts_aborts_that_run_without_calling_the_model() {
    let ws = Workspace::new();
    let model = common::replay(vec![ModelResponse {
        text: "hello".to_owned(),
        ..ModelResponse::default()
    }]);
    let controller = approvals_controller(&ws, model.clone(), Arc::new(Slow));
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    let handle = session.cancel_handle();
    // A host spawns the run and its user presses stop before the task ever ran.
    let task = tokio::spawn(async move {
        let outcome = session.send_message("build it").await;
        (session, outcome)
    });
    assert!(!handle.cancel(), "no run was in progress yet");
    let (mut session, outcome) = task.await.expect("task");
    assert_eq!(
        outcome.expect("run"),
        RunOutcome::Aborted {
            run_id: "run_1".into()
        }
    );
    assert!(model.requests().is_empty(), "the model was never called");
    assert!(
        matches!(session.messages(), [Message::User { content }] if content == "build it"),
        "the message is kept: {:#?}",
        session.messages()
    );
    assert_eq!(
        recorder.kinds(),
        ["session_started", "agent_start", "agent_end"]
    );
    // The cancel is used up by that run: the next one runs.
    let outcome = session.send_message("again").await.expect("run");
    assert_eq!(
        outcome,
        RunOutcome::Completed {
            run_id: "run_2".into(),
            text: "hello".into()
        }
    );
    assert!(!handle.is_running());
}

#[tokio::test]
async fn a_cancel_before_a_decision_resumes_the_run_keeps_the_decision_and_runs_nothing() {
    let ws = Workspace::new();
    let model = common::replay(vec![calls_reply(vec![
        write_call("t1", "a.txt"),
        write_call("t2", "b.txt"),
    ])]);
    let controller = approvals_controller(&ws, model.clone(), Arc::new(Slow));
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("write both").await.expect("run");
    assert!(matches!(outcome, RunOutcome::ToolCallsSuspended { .. }));
    let handle = session.cancel_handle();
    assert!(!handle.cancel());
    // A decision while the other call still waits resumes no run: the cancel waits too.
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("first");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    let outcome = session
        .decide("decision_2", Decision::approve())
        .await
        .expect("last");
    assert_eq!(
        outcome,
        RunOutcome::Aborted {
            run_id: "run_1".into()
        }
    );
    assert!(!ws.path().join("a.txt").exists() && !ws.path().join("b.txt").exists());
    assert_eq!(
        model.requests().len(),
        1,
        "no model call after the decision"
    );
    let decided: Vec<_> = session
        .decision_history()
        .iter()
        .map(|d| (d.decision_id.clone(), d.outcome))
        .collect();
    assert_eq!(
        decided,
        [
            ("decision_1".to_owned(), Some(DecisionOutcome::Approved)),
            ("decision_2".to_owned(), Some(DecisionOutcome::Approved)),
        ]
    );
    let results = results(session.messages());
    for id in ["t1", "t2"] {
        assert!(
            result_of(&results, id).starts_with("Not executed:"),
            "{results:#?}"
        );
    }
}

#[tokio::test]
async fn a_cancel_before_a_plan_is_approved_switches_the_mode_and_calls_no_model() {
    let ws = Workspace::new();
    ws.plan("p.md", "# P\n\n1. x\n");
    let model = common::replay(vec![calls_reply(vec![tool_call(
        "p1",
        "submit_plan",
        json!({ "path": PLAN }),
    )])]);
    let controller = approvals_controller(&ws, model.clone(), Arc::new(Slow));
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("plan it").await.expect("run");
    assert!(matches!(outcome, RunOutcome::Suspended { .. }));
    assert!(!session.cancel_handle().cancel());
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    assert_eq!(
        outcome,
        RunOutcome::Aborted {
            run_id: "run_1".into()
        }
    );
    assert_eq!(session.mode().id(), "build", "the approval counts");
    assert_eq!(
        model.requests().len(),
        1,
        "no model call after the approval"
    );
}

/// A controller whose model asks a question (`ask_1`) and calls `slow` (`slow_1`) in one reply;
/// `started` fires when `slow` runs.
fn asks_then_runs_slow(ws: &Workspace, started: Arc<tokio::sync::Notify>) -> AgentController {
    use agent_controller::model::scripted::ReplayModel;
    let mut tools = ToolRegistry::new();
    tools
        .register(Arc::new(Waits {
            saw_cancel: Arc::new(AtomicBool::new(false)),
            started,
        }))
        .expect("register");
    let reply = ModelResponse {
        tool_calls: vec![
            ToolCall {
                id: "ask_1".to_owned(),
                name: "ask_user".to_owned(),
                args: json!({ "question": "Which target?" }),
            },
            ToolCall {
                id: "slow_1".to_owned(),
                name: "slow".to_owned(),
                args: json!({}),
            },
        ],
        ..ModelResponse::default()
    };
    let model = Arc::new(ReplayModel::new([reply, ReplayModel::text("done")]));
    let config = "[[modes]]\nid = \"build\"\navailableTools = [\"ask_user\", \"slow\"]\n";
    AgentController::builder(graph(config), model)
        .tools(tools)
        .workspace(ws.path())
        .store(Arc::new(MemoryStore::new()))
        .build()
        .expect("controller")
}

/// The result the session gave tool call `id`.
fn session_result(session: &Session, id: &str) -> String {
    session
        .messages()
        .iter()
        .find_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } if tool_call_id == id => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{id} has a result: {:?}", session.messages()))
}

/// A question the model asked in a reply whose next call is cancelled while it runs: the model
/// is told the user did not answer (the run was aborted), never "Not approved", which is the
/// text for a call that waited for approval; the call cut off is the one cancelled.
#[tokio::test]
async fn a_question_asked_before_a_cancelled_call_is_not_answered_not_unapproved() {
    let ws = Workspace::new();
    let started = Arc::new(tokio::sync::Notify::new());
    let controller = asks_then_runs_slow(&ws, started.clone());
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let handle = session.cancel_handle();
    let canceller = tokio::spawn(async move {
        started.notified().await;
        handle.cancel()
    });
    let outcome = session.send_message("deploy").await.expect("run");
    assert!(canceller.await.expect("task"), "a run was in progress");
    assert!(matches!(outcome, RunOutcome::Aborted { .. }), "{outcome:?}");
    let asked = session_result(&session, "ask_1");
    assert!(
        asked.starts_with("Not answered: the run was aborted"),
        "{asked}"
    );
    let slow = session_result(&session, "slow_1");
    assert!(slow.starts_with("Cancelled:"), "{slow}");
    assert!(session.pending().is_empty());
}

/// The same when the run's future is dropped while the call after the question runs.
#[tokio::test]
async fn a_question_asked_before_a_dropped_call_is_not_answered() {
    let ws = Workspace::new();
    let started = Arc::new(tokio::sync::Notify::new());
    let controller = asks_then_runs_slow(&ws, started.clone());
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    tokio::select! {
        _ = session.send_message("deploy") => panic!("the run never ends: slow waits for ever"),
        () = started.notified() => {}
    }
    session.settle().await.expect("settle");
    assert_eq!(session.run_state().map(|(_, s)| s), Some(RunState::Aborted));
    let asked = session_result(&session, "ask_1");
    assert!(
        asked.starts_with("Not answered: the run was aborted"),
        "{asked}"
    );
    let slow = session_result(&session, "slow_1");
    assert!(slow.starts_with("Cancelled:"), "{slow}");
}
