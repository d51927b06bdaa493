//! A scripted OpenAI-compatible chat-completions server for tests: it answers each
//! `POST /v1/chat/completions` with the next reply of a script (streamed as server-sent events,
//! the way real servers stream), and records every request body.
//!
//! A model that behaves badly on purpose is a script: tool calls with chosen ids (repeated ids
//! too), chosen names and raw argument strings (not necessarily JSON), plain text, HTTP errors.
//!
//! From library tests: `ScriptedServer::start(script).await`, then [`ScriptedServer::model`]
//! (feature `openai`) is the real `OpenAiModel` pointed at it. From CLI tests (synchronous):
//! [`ScriptedServer::start_blocking`], then run the binary with `--model openai/test-model` and
//! [`ScriptedServer::env`] (`OPENAI_BASE_URL`, `OPENAI_API_KEY`). The server runs on its own
//! thread, so a test may block on the child process while it answers.
#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The model name the scripted server reports, and tests pass as `openai/test-model`.
pub const TEST_MODEL: &str = "test-model";

/// One tool call of a scripted reply.
#[derive(Debug, Clone)]
pub struct Call {
    /// The tool-call id the "model" sends (repeat it across replies to test id reuse).
    pub id: String,
    /// The tool name (need not exist).
    pub name: String,
    /// The raw argument text, sent in these fragments (joined, it need not be JSON).
    pub fragments: Vec<String>,
}

/// A call to `name` with id `id` and the raw argument text `arguments`, streamed in fragments
/// of 8 characters (so every test also exercises joining fragments).
pub fn call(id: &str, name: &str, arguments: &str) -> Call {
    let chars: Vec<char> = arguments.chars().collect();
    let fragments = chars
        .chunks(8)
        .map(|c| c.iter().collect::<String>())
        .collect();
    Call {
        id: id.to_owned(),
        name: name.to_owned(),
        fragments,
    }
}

/// A call whose arguments arrive in exactly these fragments.
pub fn call_in(id: &str, name: &str, fragments: &[&str]) -> Call {
    Call {
        id: id.to_owned(),
        name: name.to_owned(),
        fragments: fragments.iter().map(|f| (*f).to_owned()).collect(),
    }
}

/// `submit_plan` with `{"path": path}` under id `id`.
pub fn submit(id: &str, path: &str) -> Call {
    call(id, "submit_plan", &json!({ "path": path }).to_string())
}

/// One reply of the script.
#[derive(Debug, Clone)]
pub enum Reply {
    /// An assistant message with these tool calls (parallel calls when several).
    Calls(Vec<Call>),
    /// An assistant message with this text, streamed in the given parts.
    Text(Vec<String>),
    /// An HTTP error status with this body.
    Status(u16, String),
    /// Any response at all (malformed streams and the like).
    Raw(ResponseTemplate),
}

/// A reply with one tool call.
pub fn calls(calls: impl IntoIterator<Item = Call>) -> Reply {
    Reply::Calls(calls.into_iter().collect())
}

/// A reply with the text `text` (in one part).
pub fn text(text: &str) -> Reply {
    Reply::Text(vec![text.to_owned()])
}

/// A reply with text streamed in `parts`.
pub fn text_in(parts: &[&str]) -> Reply {
    Reply::Text(parts.iter().map(|p| (*p).to_owned()).collect())
}

/// One `chat.completion.chunk` with a delta for choice 0.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": TEST_MODEL,
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }]
    })
}

/// A streamed reply: `data: {chunk}` events, then `data: [DONE]`.
pub fn sse(chunks: &[Value]) -> ResponseTemplate {
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

impl Reply {
    /// The HTTP response for this reply.
    pub fn response(&self) -> ResponseTemplate {
        match self {
            Reply::Calls(calls) => {
                let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
                for (index, call) in calls.iter().enumerate() {
                    chunks.push(chunk(
                        json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                            "function": {"name": call.name, "arguments": ""}}]}),
                        None,
                    ));
                    for fragment in &call.fragments {
                        chunks.push(chunk(
                            json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                            None,
                        ));
                    }
                }
                chunks.push(chunk(json!({}), Some("tool_calls")));
                sse(&chunks)
            }
            Reply::Text(parts) => {
                let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
                for part in parts {
                    chunks.push(chunk(json!({ "content": part }), None));
                }
                chunks.push(chunk(json!({}), Some("stop")));
                sse(&chunks)
            }
            Reply::Status(status, body) => ResponseTemplate::new(*status).set_body_string(body),
            Reply::Raw(template) => template.clone(),
        }
    }
}

/// Answers with the script's replies in order; a 500 "script exhausted" once it runs out.
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    served: Arc<Served>,
}

/// How many requests the server answered, and a condition variable told of each: a test waits
/// for the model call itself ([`ScriptedServer::wait_served`]), not for time to pass.
#[derive(Default)]
struct Served {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Served {
    fn add(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.changed.notify_all();
    }

    fn get(&self) -> usize {
        *self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until at least `n` requests were answered (true) or `patience` passed (false).
    fn wait(&self, n: usize, patience: Duration) -> bool {
        let count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        let (count, _) = self
            .changed
            .wait_timeout_while(count, patience, |count| *count < n)
            .unwrap_or_else(|e| e.into_inner());
        *count >= n
    }
}

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.served.add();
        match self.replies.lock().expect("lock").pop_front() {
            Some(reply) => reply.response(),
            None => ResponseTemplate::new(500).set_body_string("script exhausted"),
        }
    }
}

/// The scripted server. Dropping it stops it.
pub struct ScriptedServer {
    pub server: MockServer,
    served: Arc<Served>,
}

impl ScriptedServer {
    /// Starts a server that answers with `script`, one reply per request.
    pub async fn start(script: Vec<Reply>) -> Self {
        let server = MockServer::start().await;
        let served = Arc::new(Served::default());
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Script {
                replies: Mutex::new(script.into()),
                served: served.clone(),
            })
            .mount(&server)
            .await;
        Self { server, served }
    }

    /// [`ScriptedServer::start`] from synchronous code (CLI tests).
    pub fn start_blocking(script: Vec<Reply>) -> Self {
        block_on(Self::start(script))
    }

    /// The base URL, up to and including `/v1` (what `OPENAI_BASE_URL` takes).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// The environment a CLI run with `--model openai/test-model` needs to reach this server.
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            ("OPENAI_BASE_URL", self.base_url()),
            ("OPENAI_API_KEY", "sk-test".to_owned()),
        ]
    }

    /// How many requests the server answered so far.
    pub fn served(&self) -> usize {
        self.served.get()
    }

    /// Blocks until the server answered at least `n` requests; fails the test when it has not
    /// within [`super::wait::PATIENCE`]. Woken by each request, so it waits for the model call
    /// itself, however loaded the machine is.
    pub fn wait_served(&self, n: usize) {
        assert!(
            self.served.wait(n, super::wait::PATIENCE),
            "the model server answered {} of the {n} requests awaited",
            self.served()
        );
    }

    /// A handle that waits for this server's requests from another thread
    /// ([`Watcher::wait_served`]).
    pub fn watcher(&self) -> Watcher {
        Watcher(self.served.clone())
    }

    /// Every request body received, in order, as JSON.
    pub async fn bodies(&self) -> Vec<Value> {
        self.server
            .received_requests()
            .await
            .expect("request recording is on")
            .iter()
            .map(|r| r.body_json().expect("a JSON request body"))
            .collect()
    }

    /// The `tool` message contents of the `n`-th request (0-based), in order.
    pub async fn tool_results(&self, n: usize) -> Vec<String> {
        let bodies = self.bodies().await;
        bodies[n]["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// [`ScriptedServer::bodies`] from synchronous code.
    pub fn bodies_blocking(&self) -> Vec<Value> {
        block_on(self.bodies())
    }

    /// The real `OpenAiModel` pointed at this server (key `sk-test`, model `test-model`).
    #[cfg(feature = "openai")]
    pub fn model(&self) -> agent_controller::model::openai::OpenAiModel {
        use agent_controller::model::openai::{OpenAiModel, OpenAiSettings};
        let settings = OpenAiSettings::new(self.base_url())
            .api_key("sk-test")
            .default_model(format!("openai/{TEST_MODEL}"));
        OpenAiModel::new(settings).expect("an OpenAiModel for the scripted server")
    }
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

/// The roles of a request body's messages, in order.
pub fn roles(body: &Value) -> Vec<&str> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().expect("role"))
        .collect()
}

/// The tool names a request body offers, in order.
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().expect("name").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The content of every message with `role` in a request body.
pub fn contents<'a>(body: &'a Value, role: &str) -> Vec<&'a str> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == role)
        .filter_map(|m| m["content"].as_str())
        .collect()
}

/// Waits for a [`ScriptedServer`]'s requests from another thread (the server stays with the
/// test).
#[derive(Clone)]
pub struct Watcher(Arc<Served>);

impl Watcher {
    /// Blocks until the server answered at least `n` requests (true), or `patience` passed
    /// (false).
    pub fn wait_served(&self, n: usize, patience: Duration) -> bool {
        self.0.wait(n, patience)
    }
}
