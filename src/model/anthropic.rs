//! [`AnthropicModel`]: a [`LanguageModel`] for Anthropic's Messages API (Claude models). Needs
//! the cargo feature `anthropic`.
//!
//! A thin provider over `reqwest` (already in the tree of the `openai` feature): it shares the
//! OpenAI provider's HTTP client, timeouts and [`RetryPolicy`] ([`crate::model::http`]), and
//! reads the server-sent events itself. Every call streams (`"stream": true`): `message_start`,
//! then content blocks (`content_block_start`, `content_block_delta` with `text_delta` or
//! `input_json_delta`, `content_block_stop`), `message_delta` with the `stop_reason`, and
//! `message_stop`. Text deltas reach [`ModelRequest::text`] as they arrive; a tool call's
//! arguments are put back together from its `input_json_delta`s by the block's `index`.
//!
//! What a call sends (`POST {ANTHROPIC_BASE_URL}/v1/messages`, headers `x-api-key` and
//! `anthropic-version: 2023-06-01`), from the [`ModelRequest`] the controller builds:
//! - the mode's system prompt in the top-level `system` field, and nothing else there;
//! - the conversation as alternating `user` and `assistant` turns: the controller's notices
//!   (such as the mode change after a manual switch) are text blocks of the user turn at the
//!   place they happened, never a system message (the API has no system role in `messages`);
//!   the notice of an approved plan's hand-over is in the approval result instead;
//! - every `tool_use` answered by exactly one `tool_result` with its id, in the order of the
//!   calls, all in the one user turn that follows it (a call without a result gets an error
//!   result saying so; a result without a call is left out), the turn's text after them;
//! - where a run ended without the model's reply (a failed call, a plan rejected without
//!   feedback, a cancelled run), the assistant turn [`RUN_ENDED_REPLY`] before the next user
//!   message;
//! - only the current mode's tools (`name`, `description`, `input_schema`), in the order the
//!   mode lists them, the same in every call of the mode (prompt caching keys on them);
//! - the model of the mode's `defaultModelId` (`anthropic/MODEL`), else the default model the
//!   caller set (the CLI's `--model anthropic/MODEL`), else `$ANTHROPIC_MODEL`; and
//!   `max_tokens` ([`AnthropicSettings::max_tokens`]).
//!
//! Failures a retry can fix are retried as the [`RetryPolicy`] says (408, 429, 502, 503, 504,
//! 529 and broken connections, after the server's `retry-after` where it gives one); others are
//! reported at once. Every failure is a [`ModelError`] of a [`ModelErrorKind`] with the
//! provider's message: 401/403 [`ModelErrorKind::Authentication`], 429
//! [`ModelErrorKind::RateLimited`], 529 and a mid-stream `overloaded_error`
//! [`ModelErrorKind::Overloaded`], 400 [`ModelErrorKind::InvalidRequest`] (or
//! [`ModelErrorKind::ContextLength`] for a prompt that is too long), a cut-off or malformed
//! stream [`ModelErrorKind::MalformedResponse`].

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

pub use super::http::RetryPolicy;
use super::http::{self, HttpModel, HttpProvider, HttpSettings, PartialCall, truncate};
use super::sse::{EventStream, SseError, StreamError};
use super::{LanguageModel, Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse};
use crate::event::TokenUsage;
use crate::tool::ToolSpec;

/// The provider prefix of model ids this model serves: `anthropic/MODEL`.
pub const PROVIDER: &str = "anthropic";

/// The environment variable holding the API key (sent as `x-api-key`).
pub const API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The environment variable holding the API's base URL (without `/v1`).
pub const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";

/// The environment variable naming the model used when neither the mode nor the caller names one.
pub const MODEL_ENV: &str = "ANTHROPIC_MODEL";

/// The base URL used when `ANTHROPIC_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header every request carries.
pub const API_VERSION: &str = "2023-06-01";

/// The most tool calls one reply may hold; one more fails the call with
/// [`ModelErrorKind::MalformedResponse`] and none of them runs (as in the OpenAI provider).
pub const MAX_TOOL_CALLS: usize = 128;

/// The assistant turn sent between a user message and the user turn before it, where a run
/// ended without the model's reply.
pub const RUN_ENDED_REPLY: &str = "(The run ended here, without a reply.)";

/// The text of an assistant turn that had neither text nor tool calls (the API refuses an empty
/// turn).
const EMPTY_REPLY: &str = "(no reply)";

/// The result sent for a tool call the conversation holds no result for.
const MISSING_RESULT: &str = "error: this tool call has no result";

/// The most bytes of an error response's body read for its message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Anthropic's Messages API as an [`HttpProvider`]: the name and environment variables above,
/// and what only it has, `max_tokens` ([`AnthropicSettings::max_tokens`]).
#[derive(Debug, Clone, Copy)]
pub struct Anthropic {
    max_tokens: u32,
}

impl Default for Anthropic {
    fn default() -> Self {
        Self { max_tokens: 8192 }
    }
}

impl HttpProvider for Anthropic {
    const NAME: &'static str = PROVIDER;
    const API_KEY_ENV: &'static str = API_KEY_ENV;
    const BASE_URL_ENV: &'static str = BASE_URL_ENV;
    const MODEL_ENV: &'static str = MODEL_ENV;
    const DEFAULT_BASE_URL: &'static str = DEFAULT_BASE_URL;
    const MISSING_KEY_HINT: &'static str =
        "export ANTHROPIC_API_KEY=sk-ant-... (or point ANTHROPIC_BASE_URL at a proxy)";
    const SETTINGS_NAME: &'static str = "AnthropicSettings";
    const MODEL_NAME: &'static str = "AnthropicModel";
}

/// Where and how to reach the Messages API: [`HttpSettings`] for [`Anthropic`] (the base URL
/// without `/v1`: requests go to `{base_url}/v1/messages`). Build with
/// [`HttpSettings::from_env`] or [`HttpSettings::new`], then adjust with the setters.
///
/// # Examples
/// ```
/// use agent_controller::model::anthropic::AnthropicSettings;
/// let settings = AnthropicSettings::from_vars(|name| match name {
///     "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:8080/".to_owned()),
///     "ANTHROPIC_API_KEY" => Some("sk-ant-test".to_owned()),
///     _ => None,
/// })
/// .default_model("anthropic/claude-sonnet-4-5");
/// assert_eq!(settings.base_url(), "http://127.0.0.1:8080");
/// assert!(settings.has_api_key());
/// assert_eq!(settings.resolve_model(Some("anthropic/claude-opus-4-1")).unwrap(), "claude-opus-4-1");
/// assert_eq!(settings.resolve_model(None).unwrap(), "claude-sonnet-4-5");
/// assert!(settings.resolve_model(Some("openai/gpt-4.1")).is_err());
/// ```
pub type AnthropicSettings = HttpSettings<Anthropic>;

impl HttpSettings<Anthropic> {
    /// The most tokens the model may write in one reply (`max_tokens`, which the API requires;
    /// default 8192).
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.provider.max_tokens = tokens.max(1);
        self
    }
}

/// A [`LanguageModel`] talking to Anthropic's Messages API (`/v1/messages`), streaming.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use agent_controller::{AgentController, config, model::anthropic::AnthropicModel};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL, ANTHROPIC_MODEL) from the environment.
/// let model = AnthropicModel::from_env()?;
/// let controller = AgentController::builder(config::load("config/modes.toml")?, Arc::new(model)).build()?;
/// # Ok(()) }
/// ```
pub type AnthropicModel = HttpModel<Anthropic>;

impl AnthropicModel {
    /// Sends `body`, retrying as the policy says; a response with a failing status becomes
    /// the error of its kind, with the provider's message.
    async fn send(&self, body: Vec<u8>) -> Result<reqwest::Response, ModelError> {
        let response = self
            .post("/v1/messages", &body, |r, key| {
                r.header("x-api-key", key)
                    .header("anthropic-version", API_VERSION)
            })
            .await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_owned());
        let text = http::read_bounded(response, MAX_ERROR_BODY).await;
        Err(self.status_error(status, &text, retry_after.as_deref()))
    }

    /// The error for an HTTP response with a failing `status` and body `text`.
    fn status_error(
        &self,
        status: reqwest::StatusCode,
        text: &str,
        retry_after: Option<&str>,
    ) -> ModelError {
        let api = serde_json::from_str::<ErrorBody>(text)
            .ok()
            .map(|b| b.error);
        let (error_type, message) = match &api {
            Some(e) => (e.kind.as_str(), e.message.clone()),
            None => ("", truncate(text.trim(), 500)),
        };
        let kind = error_kind(status.as_u16(), error_type, &message);
        let mut hint = match kind {
            ModelErrorKind::Authentication => format!(" (check {API_KEY_ENV})"),
            ModelErrorKind::RateLimited => " (rate limited)".to_owned(),
            ModelErrorKind::Overloaded => " (the API is overloaded; try again later)".to_owned(),
            _ if status.as_u16() == 404 => {
                " (check the model name and the base URL, which must not end in /v1)".to_owned()
            }
            _ => String::new(),
        };
        if let Some(after) = retry_after {
            hint.push_str(&format!(" (retry-after: {} s)", truncate(after, 40)));
        }
        let what = if error_type.is_empty() {
            message
        } else {
            format!("{error_type}: {message}")
        };
        self.error(
            kind,
            format!(
                "{} answered HTTP {status}: {what}{hint}",
                self.settings.base_url()
            ),
        )
    }

    /// Reads the event stream of `response` into a reply, passing text deltas on; fails once
    /// the reply, or one event, passes [`AnthropicSettings::max_reply_bytes`].
    async fn stream_reply(
        &self,
        response: reqwest::Response,
        request: &ModelRequest<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let base = self.settings.base_url().to_owned();
        let max = self.settings.max_reply_bytes;
        let malformed = |message: String| {
            self.error(
                ModelErrorKind::MalformedResponse,
                format!("malformed stream from {base}: {message}"),
            )
        };
        let mut events = EventStream::new(response, max);
        let mut state = StreamState::default();
        while let Some(event) = events.next().await.map_err(|e| match e {
            StreamError::Transport(e) => self.settings.transport_error(e),
            StreamError::Sse(SseError::TooLarge(max)) => self.error(
                ModelErrorKind::MalformedResponse,
                format!("an event of the stream from {base} is larger than {max} bytes"),
            ),
            StreamError::Sse(e) => malformed(e.to_string()),
        })? {
            let data = event.data;
            let event: StreamEvent = serde_json::from_str(&data)
                .map_err(|e| malformed(format!("{e}; got: {}", truncate(&data, 200))))?;
            match state.push(event) {
                Step::Text(text) => request.text.send(&text),
                Step::Continue => {}
                Step::Stop => return state.finish().map_err(malformed),
                Step::Error(error) => {
                    let kind = error_kind(0, &error.kind, &error.message);
                    return Err(self.error(
                        kind,
                        format!(
                            "the stream from {base} reported an error: {}: {}",
                            error.kind, error.message
                        ),
                    ));
                }
            }
            if state.too_many_calls {
                return Err(self.error(
                    ModelErrorKind::MalformedResponse,
                    format!(
                        "the reply from {base} has more than {MAX_TOOL_CALLS} tool calls; none of them runs"
                    ),
                ));
            }
            if state.bytes > max {
                return Err(self.error(
                    ModelErrorKind::MalformedResponse,
                    format!("the reply from {base} is larger than {max} bytes"),
                ));
            }
        }
        Err(malformed(if state.events == 0 {
            "the stream ended without a single event".to_owned()
        } else {
            format!(
                "the stream ended before the model finished (no message_stop after {} events)",
                state.events
            )
        }))
    }
}

/// The kind of an error from its HTTP status (0 for an `error` event in the stream), the API's
/// error type and its message.
fn error_kind(status: u16, error_type: &str, message: &str) -> ModelErrorKind {
    match (status, error_type) {
        (401 | 403, _) | (_, "authentication_error" | "permission_error") => {
            ModelErrorKind::Authentication
        }
        (429, _) | (_, "rate_limit_error") => ModelErrorKind::RateLimited,
        (529, _) | (_, "overloaded_error") => ModelErrorKind::Overloaded,
        (408, _) | (_, "timeout_error") => ModelErrorKind::Transport,
        (400 | 413, _) | (_, "invalid_request_error" | "request_too_large") => {
            if message.contains("prompt is too long") || message.contains("context window") {
                ModelErrorKind::ContextLength
            } else {
                ModelErrorKind::InvalidRequest
            }
        }
        _ => ModelErrorKind::Other,
    }
}

/// An error response's body: `{"type": "error", "error": {"type": ..., "message": ...}}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ApiError,
}

/// The API's error object, in an error response or an `error` event.
#[derive(Debug, Deserialize)]
struct ApiError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// One event of the stream, by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Block,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<Usage>,
    },
    MessageStop,
    Error {
        error: ApiError,
    },
    /// `ping`, `content_block_stop`, and event types added later.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    /// `thinking`, `redacted_thinking` and block types added later: not part of the reply.
    #[serde(other)]
    Other,
}

// The variants are the wire's names (`text_delta`, `input_json_delta`).
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    /// `thinking_delta`, `signature_delta`, `citations_delta`, ...
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

/// What one event means for the caller.
enum Step {
    Text(String),
    Continue,
    Stop,
    Error(ApiError),
}

/// The reply being put together from the stream's events.
#[derive(Debug, Default)]
struct StreamState {
    text: String,
    calls: BTreeMap<usize, PartialCall>,
    stop_reason: Option<String>,
    input_tokens: u64,
    output_tokens: Option<u64>,
    events: usize,
    /// Bytes of text and tool calls' ids, names and arguments (deltas, and inputs given whole
    /// at a block's start) so far.
    bytes: usize,
    /// Whether a call past [`MAX_TOOL_CALLS`] started (it is not kept).
    too_many_calls: bool,
}

impl StreamState {
    fn usage(&mut self, usage: Usage) {
        let input = usage.input_tokens.unwrap_or(0)
            + usage.cache_creation_input_tokens.unwrap_or(0)
            + usage.cache_read_input_tokens.unwrap_or(0);
        if usage.input_tokens.is_some() {
            self.input_tokens = input;
        }
        if let Some(output) = usage.output_tokens {
            self.output_tokens = Some(output);
        }
    }

    /// Folds one event in.
    fn push(&mut self, event: StreamEvent) -> Step {
        self.events += 1;
        match event {
            StreamEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.usage(usage);
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                Block::Text { text } => return self.push_text(text),
                Block::ToolUse { id, name, input } => {
                    if !self.calls.contains_key(&index) && self.calls.len() >= MAX_TOOL_CALLS {
                        self.too_many_calls = true;
                        return Step::Continue;
                    }
                    // The input given whole at the start counts as the deltas would.
                    self.bytes += id.len() + name.len() + input.as_ref().map_or(0, json_len);
                    let call = self.calls.entry(index).or_default();
                    call.id = id;
                    call.name = name;
                    call.input = input;
                }
                Block::Other => {}
            },
            StreamEvent::ContentBlockDelta { index, delta } => match delta {
                Delta::TextDelta { text } => return self.push_text(text),
                Delta::InputJsonDelta { partial_json } => {
                    self.bytes += partial_json.len();
                    if let Some(call) = self.calls.get_mut(&index) {
                        call.arguments.push_str(&partial_json);
                    }
                }
                Delta::Other => {}
            },
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = usage {
                    self.usage(usage);
                }
            }
            StreamEvent::MessageStop => return Step::Stop,
            StreamEvent::Error { error } => return Step::Error(error),
            StreamEvent::Other => {}
        }
        Step::Continue
    }

    fn push_text(&mut self, text: String) -> Step {
        if text.is_empty() {
            return Step::Continue;
        }
        self.bytes += text.len();
        self.text.push_str(&text);
        Step::Text(text)
    }

    /// The finished reply, once `message_stop` came.
    ///
    /// # Errors
    /// No `stop_reason`; tool calls in a reply cut by `max_tokens`, a refusal or the context
    /// window (they are not what the model meant to send, so none of them runs).
    fn finish(self) -> Result<ModelResponse, String> {
        let Some(reason) = self.stop_reason else {
            return Err("message_stop came without a stop_reason".to_owned());
        };
        if !self.calls.is_empty() {
            match reason.as_str() {
                "max_tokens" | "model_context_window_exceeded" => {
                    return Err(format!(
                        "the model stopped ({reason}) in the middle of its tool calls"
                    ));
                }
                "refusal" => {
                    return Err(
                        "the model refused (stop_reason: refusal) in the middle of its tool calls; none of them runs"
                            .to_owned(),
                    );
                }
                _ => {}
            }
        }
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| call.finish(index, "toolu_"))
            .collect();
        let usage = self.output_tokens.map(|output| TokenUsage {
            prompt_tokens: self.input_tokens,
            completion_tokens: output,
            total_tokens: self.input_tokens + output,
        });
        Ok(ModelResponse {
            text: self.text,
            tool_calls,
            finish_reason: Some(reason),
            usage,
        })
    }
}

/// How many bytes `value` takes as compact JSON, counted without writing it out.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// A turn of the wire conversation being built.
struct Turn {
    role: &'static str,
    /// `tool_result` blocks (user turns only; they come first).
    results: Vec<Value>,
    /// Every other block, in order.
    blocks: Vec<Value>,
    /// Whether a user turn holds a user message or a tool result (not only notices).
    answered: bool,
}

impl Turn {
    fn user() -> Self {
        Self {
            role: "user",
            results: Vec::new(),
            blocks: Vec::new(),
            answered: false,
        }
    }

    fn into_value(self) -> Value {
        let mut content = self.results;
        content.extend(self.blocks);
        json!({ "role": self.role, "content": content })
    }
}

fn text_block(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

/// The input of a `tool_use` block: the call's arguments when they are an object (the API takes
/// no other); arguments kept raw (not JSON, or refused) go back as `{"arguments": RAW}`.
fn wire_input(args: &Value) -> Value {
    match args {
        Value::Object(_) => args.clone(),
        Value::String(raw) => json!({ "arguments": raw }),
        other => json!({ "arguments": other }),
    }
}

/// The `tool_result` blocks answering `calls`, one per call in their order, from `results`
/// (the first result with each id; a call with none gets an error result saying so).
fn answer_calls(calls: &[(String, String)], results: &mut Vec<(String, Value)>) -> Vec<Value> {
    calls
        .iter()
        .map(
            |(id, _name)| match results.iter().position(|(r, _)| r == id) {
                Some(at) => results.remove(at).1,
                None => json!({
                    "type": "tool_result", "tool_use_id": id, "is_error": true,
                    "content": MISSING_RESULT,
                }),
            },
        )
        .collect()
}

/// The `messages` of a Messages request for `messages`: alternating turns, first a user turn.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<Value> = Vec::new();
    // The calls of the last assistant turn, waiting for their results, and the results so far.
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut results: Vec<(String, Value)> = Vec::new();
    let mut user = Turn::user();
    let close = |turns: &mut Vec<Value>,
                 user: &mut Turn,
                 calls: &mut Vec<(String, String)>,
                 results: &mut Vec<(String, Value)>| {
        user.results = answer_calls(calls, results);
        calls.clear();
        results.clear();
        let turn = std::mem::replace(user, Turn::user());
        if !turn.results.is_empty() || !turn.blocks.is_empty() {
            turns.push(turn.into_value());
        }
    };
    for message in messages {
        match message {
            Message::System { content } => {
                if !content.is_empty() {
                    user.blocks.push(text_block(content));
                }
            }
            Message::User { content } => {
                if user.answered {
                    // A run ended without the model's reply: say so rather than run two user
                    // messages together.
                    close(&mut turns, &mut user, &mut calls, &mut results);
                    turns.push(
                        json!({"role": "assistant", "content": [text_block(RUN_ENDED_REPLY)]}),
                    );
                }
                if !content.is_empty() {
                    user.blocks.push(text_block(content));
                }
                user.answered = true;
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let mut block = json!({
                    "type": "tool_result", "tool_use_id": tool_call_id, "content": content,
                });
                if *is_error {
                    block["is_error"] = Value::Bool(true);
                }
                results.push((tool_call_id.clone(), block));
                user.answered = true;
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                close(&mut turns, &mut user, &mut calls, &mut results);
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(text_block(content));
                }
                for call in tool_calls {
                    blocks.push(json!({
                        "type": "tool_use", "id": call.id, "name": call.name,
                        "input": wire_input(&call.args),
                    }));
                    calls.push((call.id.clone(), call.name.clone()));
                }
                if blocks.is_empty() {
                    blocks.push(text_block(EMPTY_REPLY));
                }
                turns.push(json!({"role": "assistant", "content": blocks}));
            }
        }
    }
    close(&mut turns, &mut user, &mut calls, &mut results);
    turns
}

fn wire_tool(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name.to_string(),
        "description": spec.description,
        "input_schema": spec.input_schema,
    })
}

/// The Messages request body for `request` with model `model`, streaming.
fn messages_request(model: &str, max_tokens: u32, request: &ModelRequest<'_>) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "messages": wire_messages(request.messages),
        "stream": true,
    });
    if !request.system_prompt.is_empty() {
        body["system"] = Value::String(request.system_prompt.to_owned());
    }
    if !request.tools.is_empty() {
        body["tools"] = Value::Array(request.tools.iter().map(wire_tool).collect());
    }
    body
}

#[async_trait]
impl LanguageModel for AnthropicModel {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let model = self.settings.resolve_model(request.model_id)?;
        let body = messages_request(&model, self.settings.provider.max_tokens, &request);
        let body = serde_json::to_vec(&body)
            .map_err(|e| ModelError::new(format!("{PROVIDER}: cannot write the request: {e}")))?;
        let deadline = self.settings.reply_timeout;
        let call = async {
            let response = self.send(body).await?;
            self.stream_reply(response, &request).await
        };
        tokio::time::timeout(deadline, call).await.map_err(|_| {
            self.error(
                ModelErrorKind::Transport,
                format!(
                    "no complete reply from {} within {} s",
                    self.settings.base_url(),
                    deadline.as_secs_f64()
                ),
            )
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: "read_file".to_owned(),
            args: json!({"path": id}),
        }
    }

    fn result(id: &str) -> Message {
        Message::Tool {
            tool_call_id: id.to_owned(),
            tool_name: "read_file".to_owned(),
            content: format!("result {id}"),
            is_error: false,
        }
    }

    fn user(text: &str) -> Message {
        Message::User {
            content: text.to_owned(),
        }
    }

    #[test]
    fn every_tool_use_gets_exactly_one_result_in_call_order_in_one_user_turn() {
        let messages = [
            user("go"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("a"), call("b"), call("c")],
            },
            result("c"),
            result("a"),
            result("a"),
            result("stray"),
            Message::System {
                content: "notice".to_owned(),
            },
        ];
        let wire = wire_messages(&messages);
        assert_eq!(wire.len(), 3, "{wire:#?}");
        let content = wire[2]["content"].as_array().expect("content");
        let ids: Vec<_> = content
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().expect("id"))
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(content[0]["content"], "result a");
        assert_eq!(content[1]["is_error"], true, "b had no result");
        assert_eq!(content[3], text_block("notice"), "text after the results");
        assert_eq!(content.len(), 4);
    }

    #[test]
    fn a_user_message_after_an_unanswered_one_gets_the_run_ended_reply() {
        let wire = wire_messages(&[user("one"), user("two")]);
        let roles: Vec<_> = wire
            .iter()
            .map(|t| t["role"].as_str().expect("role"))
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(wire[1]["content"][0]["text"], RUN_ENDED_REPLY);
        // A notice before a user message joins its turn; no stand-in.
        let notice = Message::System {
            content: "Mode changed".to_owned(),
        };
        let wire = wire_messages(&[notice, user("go")]);
        assert_eq!(wire.len(), 1);
        assert_eq!(wire[0]["content"][1]["text"], "go");
    }

    #[test]
    fn raw_arguments_go_back_inside_an_object() {
        assert_eq!(json_len(&json!({"a": [1, "é"]})), r#"{"a":[1,"é"]}"#.len());
        assert_eq!(wire_input(&json!({"a": 1})), json!({"a": 1}));
        assert_eq!(wire_input(&json!("{\"pa")), json!({"arguments": "{\"pa"}));
    }

    #[test]
    fn error_kinds_follow_status_and_type() {
        for (status, kind, message, expected) in [
            (401, "", "", ModelErrorKind::Authentication),
            (403, "permission_error", "", ModelErrorKind::Authentication),
            (429, "rate_limit_error", "", ModelErrorKind::RateLimited),
            (529, "overloaded_error", "", ModelErrorKind::Overloaded),
            (0, "overloaded_error", "", ModelErrorKind::Overloaded),
            (
                400,
                "invalid_request_error",
                "max_tokens: too large",
                ModelErrorKind::InvalidRequest,
            ),
            (
                400,
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
                ModelErrorKind::ContextLength,
            ),
            (500, "api_error", "", ModelErrorKind::Other),
        ] {
            assert_eq!(
                error_kind(status, kind, message),
                expected,
                "{status} {kind} {message}"
            );
        }
    }

    #[test]
    fn a_missing_key_for_anthropic_itself_is_refused() {
        let err = AnthropicModel::new(AnthropicSettings::from_vars(|_| None)).expect_err("no key");
        assert_eq!(err.kind(), ModelErrorKind::Authentication);
        assert!(
            err.message().contains("ANTHROPIC_API_KEY is not set"),
            "{err}"
        );
    }
}
