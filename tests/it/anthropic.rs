//! The Anthropic Messages provider against a scripted Messages server (wiremock) that replays
//! event sequences as the real API streams them: `event:`/`data:` lines, `message_start`,
//! content blocks with `text_delta` and `input_json_delta`, `ping`s, `message_delta` with the
//! `stop_reason`, `message_stop`; HTTP errors with the API's error bodies, and `error` events
//! mid-stream. Every request body is recorded and checked.
#![cfg(feature = "anthropic")]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::endless::EndlessServer;
use agent_controller::model::anthropic::{
    API_VERSION, AnthropicModel, AnthropicSettings, RetryPolicy,
};
use agent_controller::tool::submit_plan::APPROVED_RESULT;
use agent_controller::{
    AgentController, Decision, Event, ModelError, RunOutcome, SessionOptions, ToolRegistry, config,
    model::ModelErrorKind,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const CONFIG: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
instructions = "You are planning. Write the plan with write_plan, then call submit_plan."
transitionsTo = "build"
availableTools = ["read_file", "list_files", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
default = true
instructions = "Implement the approved plan step by step."
"#;

const MODEL: &str = "claude-test";

/// Attempts of the default retry policy (the tests' waits are short).
const ATTEMPTS: usize = 4;

// --- The scripted Messages server -----------------------------------------------------------

/// One streamed event: its `event:` name and its `data:` JSON.
type Ev = (&'static str, Value);

fn message_start() -> Ev {
    (
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
            "content": [], "model": MODEL, "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 472, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 2}
        }}),
    )
}

fn ping() -> Ev {
    ("ping", json!({"type": "ping"}))
}

fn text_block(index: usize, parts: &[&str]) -> Vec<Ev> {
    let mut events = vec![(
        "content_block_start",
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "text", "text": ""}}),
    )];
    for part in parts {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": part}}),
        ));
    }
    events.push(block_stop(index));
    events
}

fn block_stop(index: usize) -> Ev {
    (
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

/// A `tool_use` block whose input arrives in exactly these `input_json_delta` fragments (the
/// real API starts with an empty one).
fn tool_block(index: usize, id: &str, name: &str, fragments: &[&str]) -> Vec<Ev> {
    let mut events = vec![(
        "content_block_start",
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
    )];
    for fragment in std::iter::once(&"").chain(fragments) {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "input_json_delta", "partial_json": fragment}}),
        ));
    }
    events.push(block_stop(index));
    events
}

fn message_end(stop_reason: &str) -> Vec<Ev> {
    vec![
        (
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": {"output_tokens": 89}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

/// A whole reply: `message_start`, a ping, the blocks, `message_delta` and `message_stop`.
fn reply(blocks: Vec<Vec<Ev>>, stop_reason: &str) -> ResponseTemplate {
    let mut events = vec![message_start(), ping()];
    events.extend(blocks.into_iter().flatten());
    events.extend(message_end(stop_reason));
    sse(&events)
}

/// The events as the API writes them: `event: NAME`, `data: JSON`, a blank line.
fn sse_body(events: &[Ev]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

fn sse(events: &[Ev]) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(sse_body(events), "text/event-stream")
}

fn text(parts: &[&str]) -> ResponseTemplate {
    reply(vec![text_block(0, parts)], "end_turn")
}

/// A reply of tool calls `(id, name, input fragments)`, after a short text.
fn tools(calls: &[(&str, &str, &[&str])]) -> ResponseTemplate {
    let mut blocks = vec![text_block(0, &["Let me do that."])];
    for (i, (id, name, fragments)) in calls.iter().enumerate() {
        blocks.push(tool_block(i + 1, id, name, fragments));
    }
    reply(blocks, "tool_use")
}

/// An HTTP error with the API's error body.
fn api_error(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "type": "error", "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"
    }))
}

/// Answers each `POST /v1/messages` with the next response of the script.
struct Script {
    replies: Mutex<VecDeque<ResponseTemplate>>,
    served: Arc<AtomicUsize>,
}

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.served.fetch_add(1, Ordering::SeqCst);
        self.replies
            .lock()
            .expect("lock")
            .pop_front()
            .unwrap_or_else(|| api_error(500, "api_error", "script exhausted"))
    }
}

struct Harness {
    server: MockServer,
    served: Arc<AtomicUsize>,
    controller: AgentController,
    events: Arc<Mutex<Vec<Event>>>,
    workspace: tempfile::TempDir,
}

fn settings(base: &str) -> AnthropicSettings {
    AnthropicSettings::new(base)
        .api_key("sk-ant-test")
        .default_model(format!("anthropic/{MODEL}"))
        .retry_policy(
            RetryPolicy::default().backoff(Duration::from_millis(1), Duration::from_millis(5)),
        )
}

impl Harness {
    async fn new(replies: Vec<ResponseTemplate>) -> Self {
        Self::with(CONFIG, replies, |s| s).await
    }

    async fn with(
        config_text: &str,
        replies: Vec<ResponseTemplate>,
        adjust: impl FnOnce(AnthropicSettings) -> AnthropicSettings,
    ) -> Self {
        let server = MockServer::start().await;
        let served = Arc::new(AtomicUsize::new(0));
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(Script {
                replies: Mutex::new(replies.into()),
                served: served.clone(),
            })
            .mount(&server)
            .await;
        let workspace = tempfile::tempdir().expect("tempdir");
        let model = AnthropicModel::new(adjust(settings(&server.uri()))).expect("model");
        let controller = AgentController::builder(
            config::parse(config_text, "modes.toml").expect("parse"),
            Arc::new(model),
        )
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(workspace.path())
        .build()
        .expect("build");
        Self {
            server,
            served,
            controller,
            events: Arc::new(Mutex::new(Vec::new())),
            workspace,
        }
    }

    async fn session(&self, mode: &str) -> agent_controller::Session {
        let sink = self.events.clone();
        self.controller
            .start_session(
                SessionOptions::new()
                    .mode(mode)
                    .on_event(move |e| sink.lock().expect("lock").push(e.clone())),
            )
            .await
            .expect("session")
    }

    async fn bodies(&self) -> Vec<Value> {
        self.server
            .received_requests()
            .await
            .expect("recording")
            .iter()
            .map(|r| r.body_json().expect("a JSON body"))
            .collect()
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    fn events(&self) -> Vec<Value> {
        self.events
            .lock()
            .expect("lock")
            .iter()
            .map(|e| serde_json::to_value(e).expect("event"))
            .collect()
    }

    /// One run of one message in plan mode; the model error if it failed.
    async fn one_call(&self) -> Result<RunOutcome, ModelError> {
        let mut session = self.session("plan").await;
        match session.send_message("Plan it").await.expect("send_message") {
            RunOutcome::Failed { error, .. } => {
                assert_eq!(session.mode().id(), "plan", "the mode stays");
                Err(error)
            }
            other => Ok(other),
        }
    }
}

fn roles(body: &Value) -> Vec<&str> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().expect("role"))
        .collect()
}

fn tool_names(body: &Value) -> Vec<&str> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().expect("name"))
                .collect()
        })
        .unwrap_or_default()
}

/// The blocks of the last turn of a request.
fn last_turn(body: &Value) -> &Vec<Value> {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|t| t["content"].as_array())
        .expect("a last turn with blocks")
}

/// `(tool_use_id, content)` of the `tool_result` blocks of a turn.
fn results(blocks: &[Value]) -> Vec<(&str, &str)> {
    blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            (
                b["tool_use_id"].as_str().expect("id"),
                b["content"].as_str().expect("content"),
            )
        })
        .collect()
}

// --- Replies ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_text_reply_streams_its_deltas_and_the_request_has_anthropics_shape() {
    let h = Harness::new(vec![text(&["Hel", "lo ", "there."])]).await;
    let outcome = h.one_call().await.expect("completed");
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "Hello there."),
        "{outcome:?}"
    );
    let events = h.events();
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().expect("text"))
        .collect();
    assert_eq!(deltas, ["Hel", "lo ", "there."]);
    let end = events
        .iter()
        .find(|e| e["type"] == "model_end")
        .expect("model_end");
    assert_eq!(end["finishReason"], "end_turn");
    assert_eq!(end["usage"]["promptTokens"], 472);
    assert_eq!(end["usage"]["completionTokens"], 89);

    let requests = h.server.received_requests().await.expect("requests");
    assert_eq!(requests.len(), 1);
    let headers = &requests[0].headers;
    assert_eq!(headers.get("x-api-key").expect("x-api-key"), "sk-ant-test");
    assert_eq!(
        headers.get("anthropic-version").expect("version"),
        API_VERSION
    );
    assert_eq!(API_VERSION, "2023-06-01");
    assert!(headers.get("authorization").is_none());

    let body = &h.bodies().await[0];
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 8192);
    let system = body["system"].as_str().expect("a top-level system");
    assert!(system.contains("You are planning."), "{system}");
    assert_eq!(roles(body), ["user"]);
    assert_eq!(
        body["messages"][0]["content"],
        json!([{"type": "text", "text": "Plan it"}])
    );
    assert_eq!(
        tool_names(body),
        ["read_file", "list_files", "write_plan", "submit_plan"]
    );
    let submit = &body["tools"][3];
    assert_eq!(submit["input_schema"]["required"], json!(["path"]));
    assert!(
        submit["description"]
            .as_str()
            .expect("description")
            .contains("build")
    );
    assert!(submit.get("function").is_none() && submit.get("parameters").is_none());
}

#[tokio::test]
async fn one_tool_call_runs_and_its_result_goes_back_with_its_id() {
    let h = Harness::new(vec![
        tools(&[("toolu_01A", "list_files", &[r#"{"path": "."}"#])]),
        text(&["Nothing here."]),
    ])
    .await;
    std::fs::write(h.workspace.path().join("hello.txt"), "hi").expect("write");
    h.one_call().await.expect("completed");
    let bodies = h.bodies().await;
    assert_eq!(bodies.len(), 2);
    let second = &bodies[1];
    assert_eq!(roles(second), ["user", "assistant", "user"]);
    let assistant = second["messages"][1]["content"].as_array().expect("blocks");
    assert_eq!(
        assistant[0],
        json!({"type": "text", "text": "Let me do that."})
    );
    assert_eq!(
        assistant[1],
        json!({"type": "tool_use", "id": "toolu_01A", "name": "list_files", "input": {"path": "."}})
    );
    let turn = last_turn(second);
    let results = results(turn);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "toolu_01A");
    assert!(results[0].1.contains("hello.txt"), "{}", results[0].1);
    assert!(second.get("system").is_some());
    assert_eq!(
        bodies[0]["tools"], second["tools"],
        "the same tools, in the same order"
    );
}

#[tokio::test]
async fn parallel_tool_calls_are_answered_in_call_order_in_one_user_turn() {
    let h = Harness::new(vec![
        tools(&[
            ("toolu_b", "read_file", &[r#"{"path": "b.txt"}"#]),
            ("toolu_a", "read_file", &[r#"{"path": "a.txt"}"#]),
            ("toolu_c", "read_file", &[r#"{"path": "missing.txt"}"#]),
        ]),
        text(&["Read them."]),
    ])
    .await;
    std::fs::write(h.workspace.path().join("a.txt"), "AAA").expect("write");
    std::fs::write(h.workspace.path().join("b.txt"), "BBB").expect("write");
    h.one_call().await.expect("completed");
    let bodies = h.bodies().await;
    let second = &bodies[1];
    assert_eq!(roles(second), ["user", "assistant", "user"]);
    let ids: Vec<&str> = second["messages"][1]["content"]
        .as_array()
        .expect("blocks")
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["toolu_b", "toolu_a", "toolu_c"]);
    let turn = last_turn(second);
    let results = results(turn);
    let result_ids: Vec<&str> = results.iter().map(|r| r.0).collect();
    assert_eq!(result_ids, ids, "one result per call, in call order");
    assert!(results[0].1.contains("BBB") && results[1].1.contains("AAA"));
    assert_eq!(turn[2]["is_error"], true, "{turn:?}");
    assert_eq!(turn.len(), 3, "only the results: {turn:?}");
}

#[tokio::test]
async fn a_tool_call_split_over_many_input_json_deltas_is_put_back_together() {
    let args =
        json!({"path": "split.md", "content": "# Split plan\n\nÜnïcode \"quoted\" steps.\n"})
            .to_string();
    let chars: Vec<char> = args.chars().collect();
    let fragments: Vec<String> = chars.chunks(3).map(|c| c.iter().collect()).collect();
    let fragments: Vec<&str> = fragments.iter().map(String::as_str).collect();
    assert!(fragments.len() > 20);
    let h = Harness::new(vec![
        tools(&[("toolu_w", "write_plan", &fragments)]),
        text(&["Written."]),
    ])
    .await;
    h.one_call().await.expect("completed");
    let plan = std::fs::read_to_string(h.controller.plans_dir().join("split.md")).expect("plan");
    assert_eq!(plan, "# Split plan\n\nÜnïcode \"quoted\" steps.\n");
    let bodies = h.bodies().await;
    let call = &bodies[1]["messages"][1]["content"][1];
    assert_eq!(call["input"]["path"], "split.md");
}

#[tokio::test]
async fn a_refusal_ends_the_reply_with_its_reason_and_runs_no_tool_call() {
    let h = Harness::new(vec![reply(
        vec![text_block(0, &["I can't help with that."])],
        "refusal",
    )])
    .await;
    let outcome = h.one_call().await.expect("completed");
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "I can't help with that."),
        "{outcome:?}"
    );
    let events = h.events();
    let end = events
        .iter()
        .find(|e| e["type"] == "model_end")
        .expect("model_end");
    assert_eq!(end["finishReason"], "refusal");

    // A refusal in the middle of a tool call: the call is not what the model meant; none runs.
    let h = Harness::new(vec![reply(
        vec![tool_block(
            0,
            "toolu_r",
            "write_plan",
            &[r##"{"path": "r.md", "content": "# R"##],
        )],
        "refusal",
    )])
    .await;
    let error = h.one_call().await.expect_err("refused mid-call");
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");
    assert!(error.message().contains("refusal"), "{error}");
    assert!(!h.events().iter().any(|e| e["type"] == "tool_start"));
    assert!(!h.controller.plans_dir().join("r.md").exists());
}

// --- Errors ----------------------------------------------------------------------------------

#[tokio::test]
async fn an_overloaded_api_529_is_retried_then_reported_as_overloaded_with_its_message() {
    let overloaded =
        || api_error(529, "overloaded_error", "Overloaded").insert_header("retry-after", "0");
    let h = Harness::new((0..ATTEMPTS).map(|_| overloaded()).collect()).await;
    let error = h.one_call().await.expect_err("overloaded");
    assert_eq!(error.kind(), ModelErrorKind::Overloaded, "{error}");
    assert_eq!(h.served(), ATTEMPTS, "{error}");
    assert!(error.message().contains("HTTP 529"), "{error}");
    assert!(
        error.message().contains("overloaded_error: Overloaded"),
        "{error}"
    );

    // Overloaded once, then a reply: two requests, and the run completes.
    let h = Harness::new(vec![overloaded(), text(&["Back."])]).await;
    h.one_call().await.expect("completed after a retry");
    assert_eq!(h.served(), 2);
}

#[tokio::test]
async fn an_error_event_mid_stream_fails_the_call_by_its_kind_without_a_retry() {
    let mut events = vec![message_start(), ping()];
    events.extend(text_block(0, &["Partial"]));
    events.push((
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let h = Harness::new(vec![sse(&events), text(&["never asked"])]).await;
    let error = h.one_call().await.expect_err("error event");
    assert_eq!(error.kind(), ModelErrorKind::Overloaded, "{error}");
    assert!(error.message().contains("Overloaded"), "{error}");
    assert_eq!(h.served(), 1, "the stream had begun: not retried");
}

#[tokio::test]
async fn http_errors_carry_their_kind_and_the_providers_message() {
    let cases = [
        (
            api_error(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            )
            .insert_header("retry-after", "0"),
            ModelErrorKind::RateLimited,
            "per-minute rate limit",
            ATTEMPTS,
        ),
        (
            api_error(
                400,
                "invalid_request_error",
                "max_tokens: 999999 > 64000, which is the maximum allowed",
            ),
            ModelErrorKind::InvalidRequest,
            "max_tokens: 999999 > 64000",
            1,
        ),
        (
            api_error(
                400,
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
            ModelErrorKind::ContextLength,
            "prompt is too long",
            1,
        ),
        (
            api_error(401, "authentication_error", "invalid x-api-key"),
            ModelErrorKind::Authentication,
            "invalid x-api-key",
            1,
        ),
        (
            api_error(
                403,
                "permission_error",
                "Your API key does not have permission to use the specified resource.",
            ),
            ModelErrorKind::Authentication,
            "does not have permission",
            1,
        ),
        (
            api_error(500, "api_error", "Internal server error"),
            ModelErrorKind::Other,
            "Internal server error",
            1,
        ),
    ];
    for (response, kind, message, attempts) in cases {
        let h = Harness::new(vec![response; ATTEMPTS]).await;
        let error = h.one_call().await.expect_err("fails");
        assert_eq!(error.kind(), kind, "{error}");
        assert!(error.message().contains(message), "{error}");
        assert_eq!(h.served(), attempts, "{error}");
        if kind == ModelErrorKind::Authentication {
            assert!(error.message().contains("ANTHROPIC_API_KEY"), "{error}");
        }
    }
}

#[tokio::test]
async fn a_reply_cut_off_mid_stream_is_an_error_not_a_reply() {
    let mut events = vec![message_start()];
    events.extend(tool_block(
        0,
        "toolu_cut",
        "write_plan",
        &[r#"{"path": "cut.md", "con"#],
    ));
    let h = Harness::new(vec![sse(&events)]).await;
    let error = h.one_call().await.expect_err("cut off");
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");
    assert!(error.message().contains("no message_stop"), "{error}");
    assert!(!h.events().iter().any(|e| e["type"] == "tool_start"));

    // Cut in the middle of an event line.
    let body =
        sse_body(&[message_start()]) + "event: content_block_start\ndata: {\"type\": \"content_bl";
    let h = Harness::new(vec![
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"),
    ])
    .await;
    let error = h.one_call().await.expect_err("cut off");
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");

    // Stopped without a stop_reason.
    let h = Harness::new(vec![sse(&[
        message_start(),
        ("message_stop", json!({"type": "message_stop"})),
    ])])
    .await;
    let error = h.one_call().await.expect_err("no stop_reason");
    assert!(error.message().contains("stop_reason"), "{error}");
}

#[tokio::test]
async fn a_reply_over_the_bound_and_a_reply_past_the_deadline_are_refused() {
    let big = "x".repeat(4096);
    let h = Harness::with(CONFIG, vec![text(&[&big])], |s| s.max_reply_bytes(1024)).await;
    let error = h.one_call().await.expect_err("too large");
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");
    assert!(error.message().contains("1024 bytes"), "{error}");

    let slow = text(&["late"]).set_delay(Duration::from_secs(5));
    let h = Harness::with(CONFIG, vec![slow], |s| {
        s.reply_timeout(Duration::from_millis(200))
    })
    .await;
    let started = std::time::Instant::now();
    let error = h.one_call().await.expect_err("deadline");
    assert_eq!(error.kind(), ModelErrorKind::Transport, "{error}");
    assert!(started.elapsed() < Duration::from_secs(4));
}

/// Issue 36, item 8: the `input` of a `tool_use` block's `content_block_start` counts toward the
/// reply bound, as the deltas do (20 blocks of 4 MB each were accepted, 359 MB at the peak, and
/// sent back whole in the next request). Each event here is within the bound; together they are
/// not. Within the bound, the same blocks make a reply whose calls carry their input.
#[tokio::test]
async fn tool_inputs_given_whole_at_the_block_start_count_toward_the_reply_bound() {
    let max = 4096;
    let path = "p".repeat(1000);
    let blocks = |count: usize| {
        let mut events = vec![message_start()];
        for index in 0..count {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": format!("toolu_{index}"),
                                         "name": "read_file", "input": {"path": path}}}),
            ));
            events.push(block_stop(index));
        }
        events.extend(message_end("tool_use"));
        sse(&events)
    };
    // Three inputs of about 1,000 bytes: within the bound, read as the calls' arguments.
    let h = Harness::with(CONFIG, vec![blocks(3), text(&["done"])], |s| {
        s.max_reply_bytes(max)
    })
    .await;
    h.one_call().await.expect("within the bound");
    let bodies = h.bodies().await;
    let sent: Vec<&Value> = bodies[1]["messages"][1]["content"]
        .as_array()
        .expect("the assistant turn")
        .iter()
        .map(|block| &block["input"]["path"])
        .collect();
    assert_eq!(sent, vec![&json!(path); 3], "{bodies:?}");
    // Five: each event within the bound, the reply not.
    let h = Harness::with(CONFIG, vec![blocks(5)], |s| s.max_reply_bytes(max)).await;
    let error = h.one_call().await.expect_err("over the bound");
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");
    assert!(
        error
            .message()
            .contains(&format!("larger than {max} bytes")),
        "{error}"
    );
    assert_eq!(h.served(), 1, "refused, not retried");
}

/// Issue 19, item 7: one large `data:` event is read in one pass (the unit tests of
/// `model::sse` count the bytes examined); a 3 MiB text in one event, within the default
/// bound, arrives whole.
#[tokio::test]
async fn one_large_event_is_read_whole() {
    let text = "large reply ".repeat(256 * 1024);
    let h = Harness::new(vec![self::text(&[&text])]).await;
    let outcome = h.one_call().await.expect("the reply");
    let RunOutcome::Completed { text: got, .. } = outcome else {
        panic!("expected the reply, got {outcome:?}");
    };
    assert_eq!(got.len(), text.len());
    assert!(got == text, "the text arrives unchanged");
}

/// Issue 19, item 7: the bound holds while an event arrives. An endless `data:` line, or
/// endless `data:` lines without the blank line that ends an event (which grew without bound
/// before), fail the call at the bound while the server is still sending.
#[tokio::test]
async fn an_endless_event_is_refused_at_the_bound_while_it_still_arrives() {
    let max = 1 << 20;
    for (start, piece) in [
        (
            "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"",
            "x",
        ),
        ("event: ping\n", "data: {\"type\": \"ping\"}\n"),
    ] {
        let mut endless = EndlessServer::start(start, piece);
        let base = endless.base.clone();
        let h = Harness::with(CONFIG, Vec::new(), move |_| {
            settings(&base)
                .max_reply_bytes(max)
                // Far past the time reading to the bound takes: without the bound while
                // reading, the call would end here, as a transport error.
                .reply_timeout(Duration::from_secs(120))
        })
        .await;
        let error = h.one_call().await.expect_err("refused");
        assert_eq!(
            error.kind(),
            ModelErrorKind::MalformedResponse,
            "{start:?}: {error}"
        );
        assert!(
            error
                .message()
                .contains(&format!("larger than {max} bytes")),
            "{error}"
        );
        assert!(
            endless.hung_up().await.is_some(),
            "the reader stopped reading"
        );
    }
}

// --- The hand-over ---------------------------------------------------------------------------

#[tokio::test]
async fn plan_submit_approve_and_the_next_request_is_in_build_mode_with_the_approval_result() {
    let h = Harness::new(vec![
        tools(&[(
            "toolu_write",
            "write_plan",
            &[
                r#"{"path": "dark-mo"#,
                r##"de.md", "content": "# Add dark mode\n\n## Steps\n1. Add a toggle"##,
                r#".\n2. Test it.\n"}"#,
            ],
        )]),
        tools(&[(
            "toolu_submit",
            "submit_plan",
            &[r#"{"pa"#, r#"th": ".agent/plans/dark"#, r#"-mode.md"}"#],
        )]),
        text(&["Implementing ", "the approved plan."]),
    ])
    .await;
    let mut session = h.session("plan").await;
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        payload,
    } = session.send_message("Add dark mode").await.expect("send")
    else {
        panic!("expected a suspension");
    };
    assert_eq!(tool_call_id, "toolu_submit");
    assert_eq!(payload.submission.title, "Add dark mode");
    let outcome = session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("resume");
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "Implementing the approved plan."),
        "{outcome:?}"
    );
    assert_eq!(session.mode().id(), "build");

    let bodies = h.bodies().await;
    assert_eq!(bodies.len(), 3);
    for body in &bodies[..2] {
        assert!(
            body["system"]
                .as_str()
                .expect("system")
                .contains("You are planning.")
        );
        assert_eq!(
            body["tools"], bodies[0]["tools"],
            "plan mode's tools, same order"
        );
    }
    let third = &bodies[2];
    let system = third["system"].as_str().expect("system");
    assert!(
        system.contains("Implement the approved plan step by step."),
        "{system}"
    );
    assert!(!system.contains("You are planning."), "{system}");
    assert_eq!(
        tool_names(third),
        ["read_file", "list_files", "write_file", "write_plan"]
    );
    // Turns alternate, starting with the user; no system role anywhere in messages.
    assert_eq!(
        roles(third),
        ["user", "assistant", "user", "assistant", "user"]
    );
    let turn = last_turn(third);
    let results = results(turn);
    assert_eq!(results.len(), 1, "{turn:?}");
    assert_eq!(results[0].0, "toolu_submit");
    assert!(
        results[0].1.starts_with(APPROVED_RESULT),
        "{}",
        results[0].1
    );
    assert!(
        results[0].1.contains("Mode changed") && results[0].1.contains("`build`"),
        "{}",
        results[0].1
    );
    assert!(
        results[0].1.contains("1. Add a toggle.\n2. Test it."),
        "{}",
        results[0].1
    );
    // The write_plan result answered its call in the turn before.
    let earlier = third["messages"][2]["content"].as_array().expect("blocks");
    assert_eq!(results_of(earlier), ["toolu_write"]);
}

fn results_of(blocks: &[Value]) -> Vec<&str> {
    results(blocks).into_iter().map(|r| r.0).collect()
}

#[tokio::test]
async fn a_manual_switch_notice_is_a_user_turn_text_block_not_a_system_message() {
    let h = Harness::new(vec![text(&["Looked."]), text(&["Building."])]).await;
    let mut session = h.session("plan").await;
    session.send_message("Look around").await.expect("first");
    assert!(session.switch_mode("build").await.expect("switch"));
    session.send_message("Now build").await.expect("second");
    let bodies = h.bodies().await;
    let second = &bodies[1];
    assert_build_system(second);
    assert_eq!(roles(second), ["user", "assistant", "user"]);
    let turn = last_turn(second);
    assert_eq!(turn.len(), 2, "{turn:?}");
    let notice = turn[0]["text"].as_str().expect("notice");
    assert!(
        notice.contains("Mode changed: you are now in the Build mode (`build`)"),
        "{notice}"
    );
    assert_eq!(turn[1], json!({"type": "text", "text": "Now build"}));
}

/// The system prompt of a build-mode request holds the build instructions, and no notice.
fn assert_build_system(body: &Value) {
    let system = body["system"].as_str().expect("system");
    assert!(
        system.contains("Implement the approved plan step by step."),
        "{system}"
    );
    assert!(!system.contains("Mode changed"), "{system}");
}
