//! Events as an async stream beside callbacks: the same events in the same order, unsubscribing
//! by dropping, `agent_start` when a suspended run resumes (also in another process), and
//! `text_delta` / `model_end` from a streaming provider.

use crate::common;

use std::sync::{Arc, Mutex};

use agent_controller::model::scripted::ReplayModel;
use agent_controller::store::SessionStore;
use agent_controller::{
    AgentController, Decision, Event, LanguageModel, MemoryStore, ModelError, ModelRequest,
    ModelResponse, RunOutcome, SessionOptions, ToolRegistry, event::RunState,
};
use common::{PLAN_BUILD, Recorder, Workspace, graph, kinds, replay};
use serde_json::json;

fn plan_then_build(ws: &Workspace) -> Arc<ReplayModel> {
    let path = ws.plan("p.md", "# P\n\n1. x\n");
    replay(vec![
        ReplayModel::call("c1", "submit_plan", json!({ "path": path })),
        ReplayModel::text("building"),
    ])
}

#[tokio::test]
async fn a_stream_gets_the_same_events_as_a_callback_in_the_same_order() {
    let ws = Workspace::new();
    let controller = common::controller(PLAN_BUILD, &ws, plan_then_build(&ws));
    let recorder = Recorder::default();
    let (options, mut stream) = recorder.options().mode("plan").event_stream();
    let mut session = controller.start_session(options).await.expect("session");
    let mut late = session.events();
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = session.send_message("go").await.expect("run")
    else {
        panic!("suspends")
    };
    session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("approve");
    drop(session);
    let mut streamed = Vec::new();
    while let Some(event) = stream.next().await {
        streamed.push(event);
    }
    let called = recorder.take();
    assert_eq!(streamed, called);
    assert_eq!(
        kinds(&streamed),
        [
            "session_started",
            "agent_start",
            "tool_start",
            "tool_suspended",
            "agent_end",
            "agent_start",
            "tool_end",
            "mode_changed",
            "assistant_message",
            "plan_report",
            "agent_end"
        ]
    );
    // A stream made later sees everything from then on, and ends with the session.
    let mut later = Vec::new();
    while let Some(event) = late.next().await {
        later.push(event);
    }
    assert_eq!(later, called[1..]);
}

#[tokio::test]
async fn dropping_a_stream_or_a_subscription_unsubscribes_and_detach_keeps_it() {
    let ws = Workspace::new();
    let model = replay(vec![
        ReplayModel::text("one"),
        ReplayModel::text("two"),
        ReplayModel::text("three"),
    ]);
    let controller = common::controller(PLAN_BUILD, &ws, model);
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::new(Mutex::new(0usize));
    let sink = seen.clone();
    let subscription = session.subscribe(move |e| sink.lock().expect("lock").push(e.kind()));
    let count = kept.clone();
    session
        .subscribe(move |_| *count.lock().expect("lock") += 1)
        .detach();
    let stream = session.events();
    assert_eq!(session.subscriber_count(), 3);
    session.send_message("1").await.expect("run");
    assert_eq!(seen.lock().expect("lock").len(), 3);
    drop(subscription);
    drop(stream);
    assert_eq!(session.subscriber_count(), 1, "only the detached callback");
    session.send_message("2").await.expect("run");
    assert_eq!(
        seen.lock().expect("lock").len(),
        3,
        "no events after the drop"
    );
    assert_eq!(
        *kept.lock().expect("lock"),
        6,
        "the detached callback stays"
    );
}

#[tokio::test]
async fn a_run_resumed_in_another_process_starts_again_before_its_events() {
    let ws = Workspace::new();
    let store = Arc::new(MemoryStore::new());
    let build = |model| {
        AgentController::builder(graph(PLAN_BUILD), model)
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(ws.path())
            .store(store.clone())
            .build()
            .expect("controller")
    };
    let model = plan_then_build(&ws);
    let first = build(model.clone());
    let mut session = first
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    session.send_message("go").await.expect("run");
    let id = session.id().to_owned();
    drop(session);
    // "Another process": a new controller over the same store.
    let second = build(model);
    let (options, mut events) = SessionOptions::new().event_stream();
    let mut restored = second.restore_session(&id, options).await.expect("restore");
    let pending = restored.pending_plan().cloned().expect("pending");
    restored
        .resume(
            pending.run_id(),
            pending.tool_call_id(),
            Decision::approve(),
        )
        .await
        .expect("approve");
    let first_event = events.try_next().expect("an event");
    assert_eq!(
        first_event,
        Event::AgentStart {
            session_id: restored.id().into(),
            run_id: pending.run_id().into(),
            mode_id: "plan".into()
        }
    );
}

#[cfg(feature = "openai")]
mod openai {
    use agent_controller::event::TokenUsage;
    use agent_controller::model::openai::{OpenAiModel, OpenAiSettings};
    use serde_json::Value;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "test-model",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
        })
    }

    #[tokio::test]
    async fn streamed_text_arrives_as_text_delta_events_with_session_and_run_ids_then_usage() {
        let mut body = String::new();
        let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        for part in ["Hel", "lo, ", "world."] {
            chunks.push(chunk(json!({ "content": part }), None));
        }
        chunks.push(chunk(json!({}), Some("stop")));
        chunks.push(json!({
            "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "test-model", "choices": [],
            "usage": { "prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17 }
        }));
        for c in chunks {
            body.push_str(&format!("data: {c}\n\n"));
        }
        body.push_str("data: [DONE]\n\n");
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
            .mount(&server)
            .await;
        let settings = OpenAiSettings::new(format!("{}/v1", server.uri()))
            .api_key("sk-test")
            .default_model("openai/test-model");
        let controller = AgentController::builder(
            graph(PLAN_BUILD),
            Arc::new(OpenAiModel::new(settings).expect("model")),
        )
        .tools(ToolRegistry::with_workspace_tools())
        .build()
        .expect("controller");
        let mut session = controller
            .start_session(SessionOptions::new().id("s-1"))
            .await
            .expect("session");
        let mut events = session.events();
        session.send_message("Hi").await.expect("run");
        drop(session);
        let mut got = Vec::new();
        while let Some(event) = events.next().await {
            got.push(event);
        }
        let text_delta = |text: &str| Event::TextDelta {
            session_id: "s-1".into(),
            run_id: "run_1".into(),
            text: text.into(),
        };
        assert_eq!(
            got,
            [
                Event::AgentStart {
                    session_id: "s-1".into(),
                    run_id: "run_1".into(),
                    mode_id: "build".into()
                },
                text_delta("Hel"),
                text_delta("lo, "),
                text_delta("world."),
                Event::ModelEnd {
                    session_id: "s-1".into(),
                    run_id: "run_1".into(),
                    finish_reason: Some("stop".into()),
                    usage: Some(TokenUsage {
                        prompt_tokens: 12,
                        completion_tokens: 5,
                        total_tokens: 17
                    })
                },
                Event::AssistantMessage {
                    session_id: "s-1".into(),
                    run_id: "run_1".into(),
                    text: "Hello, world.".into()
                },
                Event::AgentEnd {
                    session_id: "s-1".into(),
                    run_id: "run_1".into(),
                    reason: agent_controller::event::RunState::Completed
                },
            ]
        );
        assert_eq!(
            serde_json::to_value(&got[1]).expect("json"),
            json!({"type": "text_delta", "sessionId": "s-1", "runId": "run_1", "text": "Hel"})
        );
        let requests = server.received_requests().await.expect("requests");
        let sent: Value = serde_json::from_slice(&requests[0].body).expect("json");
        assert_eq!(sent["stream_options"]["include_usage"], true);
    }
}

/// A model that cancels the run it is called for, then never answers.
struct CancelsItsRun;

#[agent_controller::async_trait]
impl agent_controller::LanguageModel for CancelsItsRun {
    async fn generate(
        &self,
        request: agent_controller::ModelRequest<'_>,
    ) -> Result<agent_controller::ModelResponse, agent_controller::ModelError> {
        request.cancel.cancel();
        std::future::pending().await
    }
}

/// How the last run ended, as the `agent_end` event, the session, the outcome and the stored
/// record say it: one enum, one set of names.
async fn assert_run_ended(
    session: &agent_controller::Session,
    recorder: &Recorder,
    store: &MemoryStore,
    outcome: Option<&RunOutcome>,
    expected: RunState,
) {
    let events = recorder.take();
    let Some(end) = events.iter().rev().find(|e| e.kind() == "agent_end") else {
        panic!("no agent_end in {:?}", kinds(&events))
    };
    let Event::AgentEnd { reason, .. } = end else {
        panic!("{end:?}")
    };
    assert_eq!(*reason, expected);
    assert_eq!(session.run_state().map(|(_, state)| state), Some(expected));
    if let Some(outcome) = outcome {
        assert_eq!(outcome.state(), expected);
    }
    let stored = store
        .load(session.id())
        .await
        .expect("load")
        .expect("saved");
    assert_eq!(stored.run.map(|run| run.state), Some(expected));
    let (event, record) = (
        serde_json::to_value(end).expect("json"),
        serde_json::to_value(expected).expect("json"),
    );
    assert_eq!(
        event["reason"], record,
        "the event and the record use one name"
    );
}

#[tokio::test]
async fn agent_end_session_outcome_and_record_name_how_a_run_ended_alike() {
    let ws = Workspace::new();
    let store = Arc::new(MemoryStore::new());
    // Suspended, then completed after the approval, then failed (the script is exhausted).
    let controller = AgentController::builder(graph(PLAN_BUILD), plan_then_build(&ws))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("plan it").await.expect("run");
    let expected = RunState::Suspended;
    assert_run_ended(&session, &recorder, &store, Some(&outcome), expected).await;
    let (run_id, call_id) = {
        let pending = session.pending_plan().expect("pending");
        (
            pending.run_id().to_owned(),
            pending.tool_call_id().to_owned(),
        )
    };
    let outcome = session
        .resume(&run_id, &call_id, Decision::approve())
        .await
        .expect("approve");
    assert_run_ended(
        &session,
        &recorder,
        &store,
        Some(&outcome),
        RunState::Completed,
    )
    .await;
    let outcome = session.send_message("more").await.expect("run");
    assert_run_ended(
        &session,
        &recorder,
        &store,
        Some(&outcome),
        RunState::Failed,
    )
    .await;

    // Aborted: a suspension cancelled by the host, and a run cancelled while the model works.
    let controller = AgentController::builder(graph(PLAN_BUILD), plan_then_build(&ws))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    session.send_message("plan it").await.expect("run");
    assert!(session.abort().await.expect("abort"));
    assert_run_ended(&session, &recorder, &store, None, RunState::Aborted).await;
    let controller = AgentController::builder(graph(PLAN_BUILD), Arc::new(CancelsItsRun))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    let outcome = session.send_message("go").await.expect("run");
    assert_run_ended(
        &session,
        &recorder,
        &store,
        Some(&outcome),
        RunState::Aborted,
    )
    .await;
}

/// `model_end` follows a reply that carries a finish reason or token usage, either one alone
/// included (providers differ: some never report usage), and is left out when it has neither.
#[tokio::test]
async fn model_end_follows_a_reply_with_a_finish_reason_or_usage_alone() {
    let usage = agent_controller::event::TokenUsage {
        prompt_tokens: 3,
        completion_tokens: 2,
        total_tokens: 5,
    };
    let reply = |finish_reason: Option<&str>,
                 usage: Option<agent_controller::event::TokenUsage>| {
        let mut reply = ReplayModel::text("done");
        reply.finish_reason = finish_reason.map(str::to_owned);
        reply.usage = usage;
        reply
    };
    let cases = [
        (Some("stop"), None),
        (None, Some(usage)),
        (Some("length"), Some(usage)),
        (None, None),
    ];
    for (finish_reason, usage) in cases {
        let ws = Workspace::new();
        let model = replay(vec![reply(finish_reason, usage)]);
        let controller = common::controller(PLAN_BUILD, &ws, model);
        let recorder = Recorder::default();
        let mut session = controller
            .start_session(recorder.options())
            .await
            .expect("session");
        session.send_message("go").await.expect("run");
        let ends: Vec<Event> = recorder
            .take()
            .into_iter()
            .filter(|e| e.kind() == "model_end")
            .collect();
        let expected: Vec<Event> = if finish_reason.is_none() && usage.is_none() {
            Vec::new()
        } else {
            vec![Event::ModelEnd {
                session_id: session.id().into(),
                run_id: "run_1".into(),
                finish_reason: finish_reason.map(str::to_owned),
                usage,
            }]
        };
        assert_eq!(
            ends, expected,
            "finish reason {finish_reason:?}, usage {usage:?}"
        );
    }
}

/// Streams each reply's text as one `text_delta` before returning it, as a streaming provider
/// does.
struct Streaming(ReplayModel);

#[async_trait::async_trait]
impl LanguageModel for Streaming {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let text = request.text;
        let reply = self.0.generate(request).await?;
        if !reply.text.is_empty() {
            text.send(&reply.text);
        }
        Ok(reply)
    }
}

/// Every kind an [`Event`] can be, as [`Event::kind`] names them.
const EVERY_KIND: [&str; 14] = [
    "session_started",
    "agent_start",
    "text_delta",
    "model_end",
    "assistant_message",
    "tool_start",
    "tool_suspended",
    "tool_end",
    "mode_changed",
    "tool_suspension_cancelled",
    "agent_end",
    "tasks_updated",
    "plan_report",
    "error",
];

/// [`PLAN_BUILD`] with a build mode that offers a task tool: an approved plan's steps seed the
/// task list (`tasks_updated`).
const PLAN_BUILD_TASKS: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
default = true
availableTools = ["read_file", "write_file", "task_update"]
"#;

/// A host that multiplexes two sessions on one subscriber tells their events apart by
/// `sessionId` alone: both number their runs `run_1`, and every kind of event carries it, in
/// Rust and in JSON.
#[tokio::test]
async fn two_sessions_events_are_told_apart_by_session_id_on_every_kind() {
    let ws = Workspace::new();
    let path = ws.plan("p.md", "# P\n\n1. x\n");
    let mut building = ReplayModel::text("building");
    building.finish_reason = Some("stop".into());
    let first = ReplayModel::new([
        ReplayModel::call("c1", "submit_plan", json!({ "path": path })),
        building,
    ]);
    first.push(Err(ModelError::new("the provider is down")));
    let second = ReplayModel::new([ReplayModel::call(
        "c1",
        "submit_plan",
        json!({ "path": path }),
    )]);
    let controller = common::controller(PLAN_BUILD_TASKS, &ws, replay(vec![]));
    // One subscriber for both sessions, as a server forwarding events to its clients has.
    let host = Recorder::default();
    let mut a = controller
        .start_session(
            host.options()
                .id("session-a")
                .mode("plan")
                .model(Arc::new(Streaming(first))),
        )
        .await
        .expect("session a");
    let mut b = controller
        .start_session(
            host.options()
                .id("session-b")
                .mode("plan")
                .model(Arc::new(Streaming(second))),
        )
        .await
        .expect("session b");
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = a.send_message("go").await.expect("run a")
    else {
        panic!("a suspends")
    };
    assert!(matches!(
        b.send_message("go").await.expect("run b"),
        RunOutcome::Suspended { .. }
    ));
    a.resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("approve a");
    assert!(b.switch_mode("build").await.expect("switch b"));
    a.send_message("again").await.expect("a fails in the open");

    let events = host.take();
    let of = |id: &str| -> Vec<&Event> { events.iter().filter(|e| e.session_id() == id).collect() };
    let (of_a, of_b) = (of("session-a"), of("session-b"));
    assert_eq!(of_a.len() + of_b.len(), events.len(), "{events:?}");
    for event in &events {
        let json = serde_json::to_value(event).expect("json");
        assert_eq!(json["sessionId"], event.session_id(), "{json}");
    }
    let run_1_starts = |events: &[&Event]| {
        events
            .iter()
            .filter(|e| matches!(e, Event::AgentStart { run_id, .. } if &**run_id == "run_1"))
            .count()
    };
    assert!(run_1_starts(&of_a) > 0 && run_1_starts(&of_b) > 0);
    let mut seen: Vec<&str> = events.iter().map(Event::kind).collect();
    seen.sort_unstable();
    seen.dedup();
    let mut every = EVERY_KIND.to_vec();
    every.sort_unstable();
    assert_eq!(seen, every, "every kind of event was seen");
    assert!(
        of_b.iter().any(|e| e.kind() == "tool_suspension_cancelled")
            && !of_a.iter().any(|e| e.kind() == "tool_suspension_cancelled"),
        "the cancellation is session b's alone"
    );
}
