//! The OpenAI-compatible model against a loopback server speaking the real wire format: streamed
//! `chat.completion.chunk` events over server-sent events, tool-call arguments split across
//! chunks. The whole plan -> approve -> build cycle runs through HTTP, and what we send is checked
//! request by request.
#![cfg(feature = "openai")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_controller::model::openai::{OpenAiModel, OpenAiSettings, RetryPolicy};
use agent_controller::tool::submit_plan::APPROVED_RESULT;
use agent_controller::{
    AgentController, Decision, Event, ModelError, RunOutcome, SessionOptions, ToolRegistry, config,
    model::ModelErrorKind,
};
use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use crate::common;
use common::openai_server::{
    Reply, ScriptedServer, call, call_in, calls, chunk, roles, text_in, tool_names,
};

/// A reply with one call whose arguments arrive in `fragments`.
fn call_reply(id: &str, name: &str, fragments: &[&str]) -> Reply {
    calls([call_in(id, name, fragments)])
}

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

/// A failure a retry can fix (408, 429, 502, 503, 504, a broken connection) is sent this many
/// times in all before it is reported: the default policy's count, with the tests' short waits.
const ATTEMPTS: usize = 4;

/// The default retry policy with waits short enough for tests.
fn fast_retries() -> RetryPolicy {
    RetryPolicy::default().backoff(Duration::from_millis(1), Duration::from_millis(5))
}

fn failing(reply: Reply) -> Vec<Reply> {
    vec![reply; ATTEMPTS]
}

fn raw(body: impl Into<String>) -> Reply {
    Reply::Raw(ResponseTemplate::new(200).set_body_raw(body.into(), "text/event-stream"))
}

struct Harness {
    server: ScriptedServer,
    controller: AgentController,
    events: Arc<Mutex<Vec<Event>>>,
    _workspace: tempfile::TempDir,
}

impl Harness {
    async fn new(replies: Vec<Reply>) -> Self {
        let server = ScriptedServer::start(replies).await;
        let base = server.base_url();
        Self::with_base(server, &base)
    }

    fn with_base(server: ScriptedServer, base: &str) -> Self {
        Self::with_settings(server, settings(base))
    }

    fn with_settings(server: ScriptedServer, settings: OpenAiSettings) -> Self {
        let workspace = tempfile::tempdir().expect("tempdir");
        let model = OpenAiModel::new(settings).expect("new");
        let graph = config::parse(CONFIG, "modes.toml").expect("parse");
        let controller = AgentController::builder(graph, Arc::new(model))
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(workspace.path())
            .build()
            .expect("build");
        Self {
            server,
            controller,
            events: Arc::new(Mutex::new(Vec::new())),
            _workspace: workspace,
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
            .expect("value")
    }

    async fn bodies(&self) -> Vec<Value> {
        self.server.bodies().await
    }

    fn kinds(&self) -> Vec<&'static str> {
        self.events
            .lock()
            .expect("lock")
            .iter()
            .map(Event::kind)
            .collect()
    }
}

#[tokio::test]
async fn the_whole_plan_approve_build_cycle_runs_through_http() {
    let h = Harness::new(vec![
        call_reply(
            "call_write",
            "write_plan",
            &[
                r#"{"path": "dark-mo"#,
                r##"de.md", "content": "# Add dark mode\n\n## Steps\n1. Add a toggle"##,
                r#".\n2. Test it.\n"}"#,
            ],
        ),
        call_reply(
            "call_submit",
            "submit_plan",
            &[r#"{"pa"#, r#"th": ".agent/plans/dark"#, r#"-mode.md"}"#],
        ),
        text_in(&["Implementing ", "the approved ", "plan."]),
    ])
    .await;
    let mut session = h.session("plan").await;

    let outcome = session
        .send_message("Add dark mode")
        .await
        .expect("send_message");
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        payload,
    } = outcome
    else {
        panic!("expected a suspension, got {outcome:?}");
    };
    assert_eq!(tool_call_id, "call_submit");
    assert_eq!(payload.submission.title, "Add dark mode");
    assert_eq!(
        payload.submission.plan,
        "## Steps\n1. Add a toggle.\n2. Test it."
    );
    assert_eq!(&*payload.target_mode_id, "build");

    let outcome = session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("resume");
    assert_eq!(
        outcome,
        RunOutcome::Completed {
            run_id: run_id.clone(),
            text: "Implementing the approved plan.".to_owned()
        }
    );
    assert_eq!(session.mode().id(), "build");

    let bodies = h.bodies().await;
    assert_eq!(bodies.len(), 3, "three model calls");
    for body in &bodies {
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["stream"], true);
    }
    let requests = h
        .server
        .server
        .received_requests()
        .await
        .expect("received_requests");
    assert_eq!(
        requests[0].headers.get("authorization").expect("get"),
        "Bearer sk-test"
    );

    // Plan mode: its instructions first, its tools only.
    let first = &bodies[0];
    assert_eq!(roles(first), ["system", "user"]);
    let system = first["messages"][0]["content"].as_str().expect("as_str");
    assert!(system.contains("You are planning."), "{system}");
    assert_eq!(
        tool_names(first),
        ["read_file", "list_files", "write_plan", "submit_plan"]
    );
    let submit = &first["tools"][3]["function"];
    assert_eq!(submit["parameters"]["required"], json!(["path"]));
    assert!(
        submit["description"]
            .as_str()
            .expect("as_str")
            .contains("build"),
        "the submit_plan description names the hand-over target"
    );

    // The joined write_plan arguments went back as one JSON text, with the tool's result.
    let second = &bodies[1];
    assert_eq!(roles(second), ["system", "user", "assistant", "tool"]);
    let call = &second["messages"][2]["tool_calls"][0];
    assert_eq!(call["id"], "call_write");
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().expect("as_str"))
        .expect("from_str");
    assert_eq!(args["path"], "dark-mode.md");
    assert_eq!(second["messages"][3]["tool_call_id"], "call_write");

    // Build mode after the hand-over: its instructions, its tools, the approval and the notice.
    let third = &bodies[2];
    let system = third["messages"][0]["content"].as_str().expect("as_str");
    assert!(
        system.contains("Implement the approved plan step by step."),
        "{system}"
    );
    assert!(!system.contains("You are planning."));
    assert_eq!(
        tool_names(third),
        ["read_file", "list_files", "write_file", "write_plan"]
    );
    // The approval result carries the notice of the change and the approved plan; the only
    // system message is the first.
    assert_eq!(roles(third).iter().filter(|r| **r == "system").count(), 1);
    let last = third["messages"]
        .as_array()
        .expect("as_array")
        .last()
        .expect("last");
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_submit");
    let result = last["content"].as_str().expect("as_str");
    assert!(result.starts_with(APPROVED_RESULT), "{result}");
    assert!(
        result.contains("Mode changed") && result.contains("`build`"),
        "{result}"
    );
    assert!(
        result.contains("# Add dark mode\n\n## Steps\n1. Add a toggle.\n2. Test it."),
        "{result}"
    );

    let kinds = h.kinds();
    let changed = kinds
        .iter()
        .position(|k| *k == "mode_changed")
        .expect("position");
    let suspended = kinds
        .iter()
        .position(|k| *k == "tool_suspended")
        .expect("position");
    assert!(suspended < changed);
    assert_eq!(kinds.last(), Some(&"agent_end"));
}

#[tokio::test]
async fn a_call_to_a_tool_outside_the_mode_gets_an_error_result_over_http() {
    let h = Harness::new(vec![
        call_reply(
            "call_1",
            "write_file",
            &[r#"{"path": "x", "content": "y"}"#],
        ),
        text_in(&["Sorry."]),
    ])
    .await;
    let mut session = h.session("plan").await;
    let outcome = session.send_message("Plan it").await.expect("send_message");
    assert!(matches!(outcome, RunOutcome::Completed { .. }));
    let bodies = h.bodies().await;
    let result = &bodies[1]["messages"][3];
    assert_eq!(result["role"], "tool");
    let content = result["content"].as_str().expect("as_str");
    assert!(
        content.contains("`write_file` is not available in mode `plan`"),
        "{content}"
    );
    assert!(!h._workspace.path().join("x").exists());
}

/// Runs one message against a server that answers `replies`; returns the failure message.
async fn failure(replies: Vec<Reply>) -> (String, Harness) {
    let (error, h) = failed_with(replies).await;
    (error.to_string(), h)
}

/// Runs one message against a server that answers `replies`; returns the run's typed error.
async fn failed_with(replies: Vec<Reply>) -> (ModelError, Harness) {
    let h = Harness::new(replies).await;
    let mut session = h.session("plan").await;
    let outcome = session.send_message("Plan it").await.expect("send_message");
    let RunOutcome::Failed { error, .. } = outcome else {
        panic!("expected a failure, got {outcome:?}");
    };
    assert_eq!(session.mode().id(), "plan", "the mode stays");
    assert!(session.pending_plan().is_none());
    let ends: Vec<Value> = h
        .events
        .lock()
        .expect("lock")
        .iter()
        .filter(|e| e.kind() == "agent_end")
        .map(|e| serde_json::to_value(e).expect("to_value"))
        .collect();
    assert_eq!(ends.last().expect("last")["reason"], "failed");
    (error, h)
}

fn api_error(status: u16, code: &str) -> Reply {
    Reply::Raw(ResponseTemplate::new(status).set_body_json(json!({
        "error": {"message": "refused", "type": "invalid_request_error", "param": null, "code": code}
    })))
}

#[tokio::test]
async fn a_failed_run_carries_the_model_error_kind_a_host_can_match() {
    let (error, _) = failed_with(failing(api_error(429, "rate_limit_exceeded"))).await;
    assert_eq!(error.kind(), ModelErrorKind::RateLimited, "{error}");
    assert!(error.message().contains("HTTP 429"), "{error}");
    let source = std::error::Error::source(&error).expect("the provider error is the source");
    assert!(source.to_string().contains("refused"), "{source}");

    let (error, _) = failed_with(vec![api_error(401, "invalid_api_key")]).await;
    assert_eq!(error.kind(), ModelErrorKind::Authentication, "{error}");

    let (error, _) = failed_with(vec![api_error(400, "context_length_exceeded")]).await;
    assert_eq!(error.kind(), ModelErrorKind::ContextLength, "{error}");

    let (error, _) = failed_with(vec![api_error(400, "invalid_value")]).await;
    assert_eq!(error.kind(), ModelErrorKind::Other, "{error}");

    let body = "data: {\"id\": \"x\", \"choices\": [\n\ndata: [DONE]\n\n";
    let (error, _) = failed_with(vec![raw(body)]).await;
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");
}

#[tokio::test]
async fn a_rate_limit_reaches_the_host_through_the_umbrella_error_by_kind() {
    async fn host(h: &Harness) -> agent_controller::Result<()> {
        let mut session = h.session("plan").await;
        if let RunOutcome::Failed { error, .. } = session.send_message("Plan it").await? {
            return Err(error.into());
        }
        Ok(())
    }
    let h = Harness::new(failing(api_error(429, "rate_limit_exceeded"))).await;
    let error = host(&h).await.expect_err("the run fails");
    assert!(
        matches!(&error, agent_controller::Error::Model(e) if e.kind() == ModelErrorKind::RateLimited),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_http_401_is_a_clear_error_naming_the_key() {
    let (message, h) = failure(vec![Reply::Raw(ResponseTemplate::new(401).set_body_json(json!({
        "error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}
    })))])
    .await;
    assert_eq!(h.bodies().await.len(), 1, "a 4xx is not retried");
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
}

#[tokio::test]
async fn an_http_500_is_a_clear_error_with_the_servers_text_sent_once() {
    // llama.cpp answers 500 for a chat template that refuses the conversation: no retry fixes it.
    let (message, h) = failure(failing(Reply::Status(
        500,
        "System message must be at the beginning.".into(),
    )))
    .await;
    assert_eq!(h.bodies().await.len(), 1, "a 500 is reported, not retried");
    assert!(message.contains("HTTP 500"), "{message}");
    assert!(
        message.contains("System message must be at the beginning."),
        "{message}"
    );
}

#[tokio::test]
async fn a_status_a_retry_cannot_fix_is_sent_once() {
    for status in [400, 401, 403, 404, 409, 422, 500, 501, 505] {
        let (error, h) = failed_with(failing(api_error(status, "nope"))).await;
        assert_eq!(h.server.served(), 1, "HTTP {status}: {error}");
        assert!(
            error.message().contains(&format!("HTTP {status}")),
            "{error}"
        );
    }
}

#[tokio::test]
async fn a_status_a_retry_can_fix_is_retried_up_to_the_attempt_count() {
    for status in [408, 429, 502, 503, 504] {
        let (error, h) = failed_with(failing(api_error(status, "busy"))).await;
        assert_eq!(h.server.served(), ATTEMPTS, "HTTP {status}: {error}");
        assert!(
            error.message().contains(&format!("HTTP {status}")),
            "{error}"
        );
    }
}

#[tokio::test]
async fn a_503_then_a_reply_succeeds_with_two_requests() {
    let h = Harness::new(vec![
        Reply::Status(503, "loading model".into()),
        text_in(&["Here."]),
    ])
    .await;
    let mut session = h.session("plan").await;
    let outcome = session.send_message("Plan it").await.expect("send_message");
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "Here."),
        "{outcome:?}"
    );
    let bodies = h.bodies().await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0], bodies[1], "the same request, sent again");
}

fn rate_limited(retry_after: &str) -> Reply {
    Reply::Raw(
        ResponseTemplate::new(429)
            .insert_header("retry-after", retry_after)
            .set_body_json(json!({"error": {"message": "slow down", "type": "requests",
                "param": null, "code": "rate_limit_exceeded"}})),
    )
}

#[tokio::test]
async fn a_429_with_retry_after_waits_as_the_server_asks_then_succeeds() {
    let h = Harness::new(vec![rate_limited("1"), text_in(&["Done."])]).await;
    let mut session = h.session("plan").await;
    let started = Instant::now();
    let outcome = session.send_message("Plan it").await.expect("send_message");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(h.server.served(), 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}, not the 1 s the server asked for",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_retry_after_past_the_cap_is_cut_and_the_total_time_is_bounded() {
    // An hour asked for: the wait is cut to the policy's cap (20 ms here).
    let server = ScriptedServer::start(vec![rate_limited("3600"), text_in(&["Done."])]).await;
    let base = server.base_url();
    let policy = fast_retries().max_retry_after(Duration::from_millis(20));
    let h = Harness::with_settings(server, settings(&base).retry_policy(policy));
    let started = Instant::now();
    one_call(&h).await.expect("the retry succeeds");
    assert_eq!(h.server.served(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    // No retry starts when its wait would end past the total time allowed.
    let server = ScriptedServer::start(vec![rate_limited("5"), text_in(&["Done."])]).await;
    let base = server.base_url();
    let policy = fast_retries().max_elapsed(Duration::from_secs(2));
    let h = Harness::with_settings(server, settings(&base).retry_policy(policy));
    let error = one_call(&h).await.expect_err("not retried");
    assert_eq!(h.server.served(), 1);
    assert_eq!(error.kind(), ModelErrorKind::RateLimited, "{error}");
}

#[tokio::test]
async fn a_401_is_sent_once_and_is_an_authentication_error() {
    let (error, h) = failed_with(failing(api_error(401, "invalid_api_key"))).await;
    assert_eq!(h.server.served(), 1);
    assert_eq!(error.kind(), ModelErrorKind::Authentication, "{error}");
}

#[tokio::test]
async fn a_connection_dropped_before_the_response_is_retried_then_reported() {
    // A listener that accepts every connection and closes it at once, counting them.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("local_addr").port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        // One more than expected, so a fifth attempt would be counted.
        for stream in listener.incoming().take(ATTEMPTS + 1).flatten() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    let server = ScriptedServer::start(Vec::new()).await;
    let h = Harness::with_base(server, &format!("http://127.0.0.1:{port}/v1"));
    let error = one_call(&h).await.expect_err("nothing answers");
    assert_eq!(error.kind(), ModelErrorKind::Transport, "{error}");
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        ATTEMPTS,
        "{error}"
    );
}

#[tokio::test]
async fn a_response_that_times_out_is_retried_then_reported() {
    let slow = Reply::Raw(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)));
    let server = ScriptedServer::start(failing(slow)).await;
    let base = server.base_url();
    let settings = settings(&base).read_timeout(Duration::from_millis(100));
    let h = Harness::with_settings(server, settings);
    let error = one_call(&h).await.expect_err("every attempt times out");
    assert_eq!(error.kind(), ModelErrorKind::Transport, "{error}");
    assert_eq!(h.server.served(), ATTEMPTS, "{error}");
}

/// Settings for the endpoint at `base`, with the tests' short retry waits.
fn settings(base: &str) -> OpenAiSettings {
    OpenAiSettings::new(base)
        .api_key("sk-test")
        .default_model("openai/test-model")
        .retry_policy(fast_retries())
}

/// One run of one message; the model error if it failed.
async fn one_call(h: &Harness) -> Result<(), ModelError> {
    let mut session = h.session("plan").await;
    match session.send_message("Plan it").await.expect("send_message") {
        RunOutcome::Failed { error, .. } => Err(error),
        _ => Ok(()),
    }
}

#[tokio::test]
async fn a_malformed_chunk_is_a_clear_error() {
    let body = "data: {\"id\": \"x\", \"choices\": [\n\ndata: [DONE]\n\n";
    let (message, _) = failure(vec![raw(body)]).await;
    assert!(message.contains("malformed"), "{message}");
}

#[tokio::test]
async fn a_stream_cut_off_before_finish_reason_is_an_error_not_a_reply() {
    let body = format!(
        "data: {}\n\n",
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "submit_plan", "arguments": "{\"pa"}}]}),
            None
        )
    );
    let (message, _) = failure(vec![raw(body)]).await;
    assert!(message.contains("no finish_reason"), "{message}");
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_clear_error() {
    // A port that was just free: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("local_addr")
        .port();
    let server = ScriptedServer::start(Vec::new()).await;
    let h = Harness::with_base(server, &format!("http://127.0.0.1:{port}/v1"));
    let mut session = h.session("plan").await;
    let outcome = session.send_message("Plan it").await.expect("send_message");
    let RunOutcome::Failed { error, .. } = outcome else {
        panic!("expected a failure, got {outcome:?}");
    };
    assert_eq!(error.kind(), ModelErrorKind::Transport, "{error}");
    let message = error.to_string();
    assert!(message.contains("cannot reach"), "{message}");
    assert!(message.contains(&port.to_string()), "{message}");
}

#[tokio::test]
async fn a_failed_model_call_leaves_the_session_usable() {
    let mut replies = failing(Reply::Status(503, "try later".into()));
    replies.push(text_in(&["Back again."]));
    let h = Harness::new(replies).await;
    let mut session = h.session("plan").await;
    assert!(matches!(
        session.send_message("Plan it").await.expect("send_message"),
        RunOutcome::Failed { .. }
    ));
    let outcome = session
        .send_message("Plan it again")
        .await
        .expect("send_message");
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "Back again."),
        "{outcome:?}"
    );
    // The second call carries the whole conversation, the failed turn's user message included,
    // with a stand-in for the reply that never came (user and assistant turns alternate).
    let bodies = h.bodies().await;
    assert_eq!(
        roles(&bodies[ATTEMPTS]),
        ["system", "user", "assistant", "user"]
    );
    assert_eq!(
        bodies[ATTEMPTS]["messages"][2]["content"],
        agent_controller::model::openai::RUN_ENDED_REPLY
    );
}

#[tokio::test]
async fn a_model_failure_after_a_rejection_keeps_the_mode_and_the_next_plan_can_be_approved() {
    let submit = || {
        call_reply(
            "call_submit",
            "submit_plan",
            &[r#"{"path": ".agent/plans/p.md"}"#],
        )
    };
    let mut replies = vec![submit()];
    replies.push(Reply::Status(500, "boom".into()));
    replies.extend([submit(), text_in(&["Building."])]);
    let h = Harness::new(replies).await;
    let plans = h.controller.plans_dir().to_owned();
    std::fs::create_dir_all(&plans).expect("create_dir_all");
    std::fs::write(plans.join("p.md"), "# P\n\nDo it.\n").expect("write");
    let mut session = h.session("plan").await;
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = session.send_message("Plan").await.expect("send_message")
    else {
        panic!("expected a suspension");
    };
    let outcome = session
        .resume(&run_id, &tool_call_id, Decision::reject_with("more tests"))
        .await
        .expect("resume");
    assert!(matches!(outcome, RunOutcome::Failed { .. }), "{outcome:?}");
    assert_eq!(session.mode().id(), "plan");
    // The decision was applied once: it cannot be applied again.
    assert!(
        session
            .resume(&run_id, &tool_call_id, Decision::approve())
            .await
            .is_err()
    );
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = session
        .send_message("Plan again")
        .await
        .expect("send_message")
    else {
        panic!("expected a new suspension");
    };
    session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("resume");
    assert_eq!(session.mode().id(), "build");
}

/// Strict chat templates (Qwen3.5's, Gemma's, Mistral's) refuse a `system` message anywhere but
/// first: after a manual switch the next request still has one system message, first, and it
/// carries the new mode's instructions and the notice of the change.
#[tokio::test]
async fn a_manual_switch_sends_one_leading_system_message_with_the_notice() {
    let h = Harness::new(vec![text_in(&["Looked."]), text_in(&["Building."])]).await;
    let mut session = h.session("plan").await;
    session.send_message("Look around").await.expect("first");
    assert!(session.switch_mode("build").await.expect("switch_mode"));
    session.send_message("Now build").await.expect("second");
    let bodies = h.bodies().await;
    let second = &bodies[1];
    let roles = roles(second);
    assert_eq!(
        roles.iter().filter(|r| **r == "system").count(),
        1,
        "{roles:?}"
    );
    assert_eq!(roles[0], "system");
    let system = second["messages"][0]["content"].as_str().expect("as_str");
    assert!(
        system.contains("Implement the approved plan step by step."),
        "{system}"
    );
    assert!(
        system.contains("Mode changed: you are now in the Build mode (`build`)"),
        "{system}"
    );
}

/// A plan approved to the second listed target over HTTP: the model hears the chosen mode in
/// the approval result, and its next request carries that mode's instructions and tools.
#[tokio::test]
async fn a_plan_approved_to_a_chosen_target_continues_there_over_http() {
    const CHOICE: &str = r#"
[[modes]]
id = "plan"
instructions = "You are planning."
transitionsTo = ["build", "build-auto"]
availableTools = ["write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
instructions = "Ask before each edit."
availableTools = ["read_file"]

[[modes]]
id = "build-auto"
instructions = "Edit without asking."
availableTools = ["read_file", "write_file"]
"#;
    let server = ScriptedServer::start(vec![
        call_reply(
            "call_write",
            "write_plan",
            &[r##"{"path": "p.md", "content": "# Ship it\n\n1. Do it.\n"}"##],
        ),
        call_reply(
            "call_submit",
            "submit_plan",
            &[r#"{"path": ".agent/plans/p.md"}"#],
        ),
        text_in(&["Editing."]),
    ])
    .await;
    let workspace = tempfile::tempdir().expect("tempdir");
    let settings = OpenAiSettings::new(server.base_url())
        .api_key("sk-test")
        .default_model("openai/test-model");
    let controller = AgentController::builder(
        config::parse(CHOICE, "modes.toml").expect("parse"),
        Arc::new(OpenAiModel::new(settings).expect("new")),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(workspace.path())
    .build()
    .expect("build");
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    let RunOutcome::Suspended { payload, .. } = session.send_message("Ship it").await.expect("run")
    else {
        panic!("suspends");
    };
    assert_eq!(
        payload.target_mode_ids,
        ["build".into(), "build-auto".into()]
    );
    session
        .decide(&payload.decision_id, Decision::approve().to("build-auto"))
        .await
        .expect("approve");
    assert_eq!(session.mode().id(), "build-auto");
    let bodies = server.bodies().await;
    assert_eq!(bodies.len(), 3);
    let planning = bodies[0]["messages"][0]["content"]
        .as_str()
        .expect("system");
    assert!(
        planning.contains("`build-auto`"),
        "the planning prompt names the choice: {planning}"
    );
    let last = &bodies[2];
    let system = last["messages"][0]["content"].as_str().expect("system");
    assert!(system.contains("Edit without asking."), "{system}");
    assert_eq!(tool_names(last), ["read_file", "write_file"]);
    let result = last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_submit")
        .and_then(|m| m["content"].as_str())
        .expect("the approval result");
    assert!(result.starts_with(APPROVED_RESULT), "{result}");
    assert!(result.contains("`build-auto`"), "{result}");
}

/// A reply larger than `max_reply_bytes` (text and tool-call arguments together) is refused as
/// malformed when it passes the bound, not collected without end (found by a hostile-model
/// trial: 16 MB of arguments took 55 s and 100 MB did not finish).
#[tokio::test]
async fn a_reply_larger_than_the_bound_is_refused() {
    let huge = format!(
        "{{\"path\": \"a.txt\", \"content\": \"{}\"}}",
        "x".repeat(4096)
    );
    let server = ScriptedServer::start(vec![calls([call("c1", "write_file", &huge)])]).await;
    let base = server.base_url();
    let settings = settings(&base).max_reply_bytes(1024);
    let h = Harness::with_settings(server, settings);
    let error = one_call(&h).await.expect_err("too large");
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");
    assert!(error.message().contains("1024 bytes"), "{error}");
}

/// Found by a hostile-model trial: 300,000 calls of `{}` were 600 counted bytes (1.7 GB of
/// memory, a 75 MB record). A reply has at most `MAX_TOOL_CALLS` calls: one more is a clear
/// model error and none of them runs; exactly that many is taken.
#[tokio::test]
async fn a_reply_with_more_tool_calls_than_the_limit_is_refused_and_nothing_runs() {
    use agent_controller::model::openai::MAX_TOOL_CALLS;
    let many = |n: usize| {
        calls((0..n).map(|i| {
            call(
                &format!("c{i}"),
                "read_file",
                &format!("{{\"path\": \"f{i}.txt\"}}"),
            )
        }))
    };
    let server = ScriptedServer::start(vec![many(MAX_TOOL_CALLS + 1)]).await;
    let base = server.base_url();
    let h = Harness::with_settings(server, settings(&base));
    let error = one_call(&h).await.expect_err("too many calls");
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");
    assert!(
        error.message().contains("more than 128 tool calls"),
        "{error}"
    );
    let events = h.events.lock().expect("events").clone();
    assert!(
        !events.iter().any(|e| matches!(e, Event::ToolStart { .. })),
        "{events:?}"
    );

    let server = ScriptedServer::start(vec![many(MAX_TOOL_CALLS), text_in(&["done"])]).await;
    let base = server.base_url();
    let h = Harness::with_settings(server, settings(&base));
    one_call(&h).await.expect("exactly the limit");
}

/// Found by a hostile-model trial: a tool name sent in 5,000 fragments (20 MB) was taken, since
/// only text and arguments counted against `max_reply_bytes`. Names and ids count too.
#[tokio::test]
async fn tool_names_and_ids_count_against_the_reply_bound() {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    chunks.push(chunk(
        json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
            "function": {"name": "n".repeat(600), "arguments": ""}}]}),
        None,
    ));
    chunks.push(chunk(
        json!({"tool_calls": [{"index": 0, "function": {"name": "m".repeat(600)}}]}),
        None,
    ));
    chunks.push(chunk(json!({}), Some("tool_calls")));
    let server = ScriptedServer::start(vec![Reply::Raw(common::openai_server::sse(&chunks))]).await;
    let base = server.base_url();
    let h = Harness::with_settings(server, settings(&base).max_reply_bytes(1024));
    let error = one_call(&h).await.expect_err("too large");
    assert_eq!(error.kind(), ModelErrorKind::MalformedResponse, "{error}");
    assert!(error.message().contains("1024 bytes"), "{error}");
}

/// The whole model call has a deadline, whatever the server trickles: past `reply_timeout` it
/// ends as a transport error even while each read is within `read_timeout`.
#[tokio::test]
async fn a_reply_that_does_not_finish_in_time_ends_the_call() {
    let slow = Reply::Raw(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)));
    let server = ScriptedServer::start(failing(slow)).await;
    let base = server.base_url();
    let settings = settings(&base)
        .read_timeout(Duration::from_secs(30))
        .reply_timeout(Duration::from_millis(200));
    let h = Harness::with_settings(server, settings);
    let started = std::time::Instant::now();
    let error = one_call(&h).await.expect_err("deadline");
    assert_eq!(error.kind(), ModelErrorKind::Transport, "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

/// Issue 19, item 7: one large `data:` event took time with the square of its size (2 MiB of
/// text in one event: 18 s). Read in one pass now (the unit tests of `model::sse` count the
/// bytes examined); here a 3 MiB text in one event, within the default bound, arrives whole.
#[tokio::test]
async fn one_large_event_is_read_whole() {
    let text = "large reply ".repeat(256 * 1024);
    let reply = Reply::Raw(common::openai_server::sse(&[chunk(
        json!({"role": "assistant", "content": text}),
        Some("stop"),
    )]));
    let server = ScriptedServer::start(vec![reply]).await;
    let base = server.base_url();
    let h = Harness::with_settings(server, settings(&base));
    let mut session = h.session("plan").await;
    let outcome = session.send_message("Plan it").await.expect("send_message");
    let RunOutcome::Completed { text: got, .. } = outcome else {
        panic!("expected the reply, got {outcome:?}");
    };
    assert_eq!(got.len(), text.len());
    assert!(got == text, "the text arrives unchanged");
}

/// Issue 19, item 7: the reply bound was checked only after a whole event was parsed, so a
/// server sending one endless event held the call (and its memory grew) until the deadline.
/// The bound holds while the event arrives: an endless `data:` line, or endless `data:` lines
/// without the blank line that ends an event, fail the call at the bound while the server is
/// still sending, and the connection is dropped.
#[tokio::test]
async fn an_endless_event_is_refused_at_the_bound_while_it_still_arrives() {
    let max = 1 << 20;
    for (start, piece) in [
        (
            "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"",
            "x",
        ),
        ("", "data: {\"choices\": []}\n"),
    ] {
        let mut endless = common::endless::EndlessServer::start(start, piece);
        let unused = ScriptedServer::start(Vec::new()).await;
        let settings = settings(&format!("{}/v1", endless.base))
            .max_reply_bytes(max)
            // Far past the time reading to the bound takes: without the bound while reading,
            // the call would end here, as a transport error.
            .reply_timeout(Duration::from_secs(120));
        let h = Harness::with_settings(unused, settings);
        let error = one_call(&h).await.expect_err("refused");
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
