//! [`OpenAiModel`]: a [`LanguageModel`] for OpenAI-compatible chat-completions endpoints
//! (OpenAI itself, and the local servers people run: Ollama, llama.cpp's `llama-server`, vLLM).
//! Needs the cargo feature `openai`.
//!
//! Built on [`async_openai`]'s typed chat-completions requests and stream chunks; the HTTP
//! transport with its retries and the server-sent-events reader are the ones the Anthropic
//! provider uses too (`model::http`, and a reader that reads a stream in one pass and bounds
//! each event while it arrives). Every call streams (`"stream": true`): text deltas are passed
//! to an optional callback as they arrive, and tool-call deltas (an id and a name first, then
//! argument fragments split across chunks) are put back together by their `index`.
//!
//! What a call sends, from the [`ModelRequest`] the controller builds:
//! - one `system` message, first: the mode's system prompt, then the controller's notices (such
//!   as the mode change after a manual switch) in the order they happened, since strict chat
//!   templates (Qwen3.5's, Gemma's, Mistral's) refuse a `system` message anywhere else; the notice
//!   of an approved plan's hand-over is in the approval result instead;
//! - the rest of the conversation in order, where every user message but the first follows an
//!   assistant message: where a run ended without the model's reply (a failed call, a plan
//!   rejected without feedback, a cancelled run), [`RUN_ENDED_REPLY`] stands in for it, since
//!   strict templates (Gemma's, Mistral's) want user and assistant turns to alternate;
//! - only the current mode's tools, with their JSON Schemas (no `tools` key when it has none);
//! - the model of the mode's `defaultModelId` (`openai/MODEL`), else the default model the
//!   caller set (the CLI's `--model openai/MODEL`), else `$OPENAI_MODEL`.
//!
//! Only a failure a retry can fix is retried (408, 429, 502, 503, 504, 529, and a connection refused,
//! reset or timed out), as the [`RetryPolicy`] says: by default 4 attempts in at most 60 s, with a
//! backoff from 500 ms or the server's `Retry-After` (at most 30 s). Any other status (a 400, a
//! 401, a 500 such as a chat template's refusal) is reported at once. Failures become a
//! [`ModelError`] that says what to fix (missing key, unreachable endpoint, HTTP status with the
//! server's message, malformed or cut-off stream); the run then ends with reason `failed` and the
//! session keeps its mode and any pending plan.

use std::collections::BTreeMap;
use std::fmt;

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestToolMessage,
    ChatCompletionRequestUserMessage, ChatCompletionStreamOptions, ChatCompletionTool,
    ChatCompletionTools, CreateChatCompletionRequest, CreateChatCompletionStreamResponse,
    FinishReason, FunctionCall, FunctionObject,
};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use super::{LanguageModel, Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse};
use crate::event::TokenUsage;
use crate::tool::{ToolCall, ToolSpec};

pub use super::http::RetryPolicy;
use super::http::{self, HttpModel, HttpProvider, HttpSettings, PartialCall, chain, truncate};
use super::sse::{EventStream, SseError, StreamError};

/// The provider prefix of model ids this model serves: `openai/MODEL`.
pub const PROVIDER: &str = "openai";

/// The environment variable holding the API key.
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The environment variable holding the endpoint's base URL (up to and including `/v1`).
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

/// The environment variable naming the model used when neither the mode nor the caller names one.
pub const MODEL_ENV: &str = "OPENAI_MODEL";

/// The base URL used when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// How much of an error response's body is read, at most.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The most tool calls one reply may hold. A reply with more fails with
/// [`ModelErrorKind::MalformedResponse`] as soon as the next call starts, and none of its calls
/// runs (a hostile-model trial sent 300,000 calls of 2 bytes each: 1.7 GB of memory and a 75 MB
/// record with 300,000 decisions).
pub const MAX_TOOL_CALLS: usize = 128;

/// OpenAI-compatible endpoints as an [`HttpProvider`]: the name and environment variables
/// above; no settings of their own.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAi;

impl HttpProvider for OpenAi {
    const NAME: &'static str = PROVIDER;
    const API_KEY_ENV: &'static str = API_KEY_ENV;
    const BASE_URL_ENV: &'static str = BASE_URL_ENV;
    const MODEL_ENV: &'static str = MODEL_ENV;
    const DEFAULT_BASE_URL: &'static str = DEFAULT_BASE_URL;
    const MISSING_KEY_HINT: &'static str = "export OPENAI_API_KEY=sk-... (or point OPENAI_BASE_URL at a local OpenAI-compatible server such as http://localhost:11434/v1)";
    const SETTINGS_NAME: &'static str = "OpenAiSettings";
    const MODEL_NAME: &'static str = "OpenAiModel";
}

/// Where and how to reach the endpoint: [`HttpSettings`] for [`OpenAi`]. Build with
/// [`HttpSettings::from_env`] or [`HttpSettings::new`], then adjust with the setters.
pub type OpenAiSettings = HttpSettings<OpenAi>;

/// A [`LanguageModel`] talking to an OpenAI-compatible `/chat/completions` endpoint, streaming.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use agent_controller::{AgentController, config, model::openai::OpenAiModel};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // OPENAI_API_KEY (and optionally OPENAI_BASE_URL, OPENAI_MODEL) from the environment.
/// let model = OpenAiModel::from_env()?;
/// let controller = AgentController::builder(config::load("config/modes.toml")?, Arc::new(model)).build()?;
/// # Ok(()) }
/// ```
pub type OpenAiModel = HttpModel<OpenAi>;

impl OpenAiModel {
    /// Sends `body` to `/chat/completions`, retrying as the policy says; a response with a
    /// failing status becomes the error of its kind, with the server's message.
    async fn send(&self, body: Vec<u8>) -> Result<reqwest::Response, ModelError> {
        let response = self
            .post("/chat/completions", &body, |r, key| r.bearer_auth(key))
            .await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = http::read_bounded(response, MAX_ERROR_BODY).await;
        Err(self.status_error(status, &text))
    }

    /// The error for an HTTP response with a failing `status` and body `text`: OpenAI's error
    /// object (`{"error": {...}}`) when the body holds one, else the text itself.
    fn status_error(&self, status: reqwest::StatusCode, text: &str) -> ModelError {
        let api = serde_json::from_str::<ErrorBody>(text)
            .ok()
            .map(|body| body.error)
            .unwrap_or_else(|| ApiError {
                message: truncate(text.trim(), 500),
                ..ApiError::default()
            });
        let kind = error_kind(status.as_u16(), api.code.as_deref());
        let hint = match status.as_u16() {
            401 | 403 => format!(" (check {API_KEY_ENV})"),
            404 => {
                " (check the model name and the base URL, which must end in /v1 for most servers)"
                    .to_owned()
            }
            429 => " (rate limited or out of quota)".to_owned(),
            _ => String::new(),
        };
        let base = self.settings.base_url();
        self.error(kind, format!("{base} answered HTTP {status}: {api}{hint}"))
            .with_source(api)
    }
}

/// An error response's body: `{"error": {"message": ..., "type": ..., "param": ..., "code": ...}}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ApiError,
}

/// The server's error object. Servers differ in what they put in it (llama.cpp's `code` is a
/// number), so every field but the message is taken as any JSON and shown as text.
#[derive(Debug, Default, Deserialize, thiserror::Error)]
struct ApiError {
    #[serde(default)]
    message: String,
    #[serde(rename = "type", default, deserialize_with = "text_or_none")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "text_or_none")]
    param: Option<String>,
    #[serde(default, deserialize_with = "text_or_none")]
    code: Option<String>,
}

impl fmt::Display for ApiError {
    /// `TYPE: MESSAGE (param: PARAM) (code: CODE)`, leaving out what is missing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(kind) = &self.kind {
            write!(f, "{kind}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(param) = &self.param {
            write!(f, " (param: {param})")?;
        }
        if let Some(code) = &self.code {
            write!(f, " (code: {code})")?;
        }
        Ok(())
    }
}

/// A JSON string as it is, `null` as `None`, any other value as its JSON text.
fn text_or_none<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Null => None,
        Value::String(text) => Some(text),
        other => Some(other.to_string()),
    })
}

/// The kind of a failed request: from the HTTP status, and from OpenAI's error code where the
/// status is shared (a 400 is a context-length error only when its code says so).
fn error_kind(status: u16, code: Option<&str>) -> ModelErrorKind {
    match (status, code) {
        (_, Some("context_length_exceeded")) => ModelErrorKind::ContextLength,
        (401 | 403, _) | (_, Some("invalid_api_key")) => ModelErrorKind::Authentication,
        // The server gave up waiting for the request: a transport problem.
        (408, _) => ModelErrorKind::Transport,
        (429, _) | (_, Some("rate_limit_exceeded" | "insufficient_quota")) => {
            ModelErrorKind::RateLimited
        }
        _ => ModelErrorKind::Other,
    }
}

/// The assistant message sent between a user message and the user message or tool results
/// before it, where a run ended without the model's reply.
pub const RUN_ENDED_REPLY: &str = "(The run ended here, without a reply.)";

/// The chat-completions request for `request` with model `model`, streaming.
fn chat_request(model: String, request: &ModelRequest<'_>) -> CreateChatCompletionRequest {
    // Strict chat templates (Qwen3.5's, Gemma's, Mistral's) refuse a `system` message anywhere
    // but first, so the controller's notices (a manual mode switch) join the leading system
    // message, in the order they happened, after the mode's instructions.
    let mut system = request.system_prompt.to_owned();
    let mut conversation = Vec::with_capacity(request.messages.len());
    for message in request.messages {
        match message {
            Message::System { content } => {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(content);
            }
            Message::User { content } => {
                // Strict templates (Gemma's, Mistral's) want user and assistant turns to
                // alternate: a run that ended without the model's reply (a failed call, a plan
                // rejected without feedback, a cancelled run) gets one that says so.
                if conversation
                    .last()
                    .is_some_and(|m| !matches!(m, ChatCompletionRequestMessage::Assistant(_)))
                {
                    conversation.push(wire_assistant(RUN_ENDED_REPLY, &[]));
                }
                conversation.push(ChatCompletionRequestMessage::User(
                    ChatCompletionRequestUserMessage::from(content.as_str()),
                ));
            }
            Message::Assistant {
                content,
                tool_calls,
            } => conversation.push(wire_assistant(content, tool_calls)),
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => conversation.push(ChatCompletionRequestMessage::Tool(
                ChatCompletionRequestToolMessage {
                    content: content.as_str().into(),
                    tool_call_id: tool_call_id.clone(),
                },
            )),
        }
    }
    let mut messages = Vec::with_capacity(conversation.len() + 1);
    if !system.is_empty() {
        messages.push(ChatCompletionRequestMessage::System(
            ChatCompletionRequestSystemMessage::from(system),
        ));
    }
    messages.extend(conversation);
    let tools: Vec<ChatCompletionTools> = request.tools.iter().map(wire_tool).collect();
    CreateChatCompletionRequest {
        model,
        messages,
        tools: (!tools.is_empty()).then_some(tools),
        stream: Some(true),
        // The last chunk then carries the call's token usage (`model_end`).
        stream_options: Some(ChatCompletionStreamOptions {
            include_usage: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn wire_tool(spec: &ToolSpec) -> ChatCompletionTools {
    ChatCompletionTools::Function(ChatCompletionTool {
        function: FunctionObject {
            name: spec.name.to_string(),
            description: Some(spec.description.clone()),
            parameters: Some(spec.input_schema.clone()),
            strict: None,
        },
    })
}

/// Tool-call arguments as the wire carries them: a JSON text. Arguments that did not parse as
/// JSON were kept as the raw string ([`StreamState::finish`]) and go back unchanged.
fn wire_arguments(args: &Value) -> String {
    match args {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// An assistant message: its text (no `content` key when empty) and its tool calls.
fn wire_assistant(content: &str, tool_calls: &[ToolCall]) -> ChatCompletionRequestMessage {
    let calls: Vec<ChatCompletionMessageToolCalls> = tool_calls
        .iter()
        .map(|call| {
            ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                id: call.id.clone(),
                function: FunctionCall {
                    name: call.name.clone(),
                    arguments: wire_arguments(&call.args),
                },
            })
        })
        .collect();
    let mut assistant = ChatCompletionRequestAssistantMessage::from(content);
    if content.is_empty() {
        assistant.content = None;
    }
    assistant.tool_calls = (!calls.is_empty()).then_some(calls);
    ChatCompletionRequestMessage::Assistant(assistant)
}

/// The reply being put together from stream chunks (choice 0 only: we never ask for more).
#[derive(Debug, Default)]
struct StreamState {
    text: String,
    calls: BTreeMap<u32, PartialCall>,
    finish: Option<FinishReason>,
    usage: Option<TokenUsage>,
    chunks: usize,
    /// Bytes of text and tool calls' ids, names and arguments so far, counted as they arrive
    /// (a sum over the calls at every chunk would grow with the square of a reply of many
    /// calls).
    bytes: usize,
    /// Whether a call past [`MAX_TOOL_CALLS`] started (it is not kept).
    too_many_calls: bool,
}

impl StreamState {
    /// Bytes of text and tool calls' ids, names and arguments so far.
    fn bytes(&self) -> usize {
        self.bytes
    }

    /// Folds one chunk in; returns its text delta, if any.
    fn push(&mut self, chunk: CreateChatCompletionStreamResponse) -> Option<String> {
        self.chunks += 1;
        if let Some(usage) = chunk.usage {
            self.usage = Some(TokenUsage {
                prompt_tokens: usage.prompt_tokens.into(),
                completion_tokens: usage.completion_tokens.into(),
                total_tokens: usage.total_tokens.into(),
            });
        }
        let choice = chunk.choices.into_iter().find(|c| c.index == 0)?;
        if let Some(reason) = choice.finish_reason {
            self.finish = Some(reason);
        }
        for delta in choice.delta.tool_calls.unwrap_or_default() {
            if !self.calls.contains_key(&delta.index) && self.calls.len() >= MAX_TOOL_CALLS {
                self.too_many_calls = true;
                continue;
            }
            let call = self.calls.entry(delta.index).or_default();
            if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
                self.bytes += id.len();
                call.id = id;
            }
            if let Some(function) = delta.function {
                if let Some(name) = function.name {
                    self.bytes += name.len();
                    // Names come whole in the first delta; some servers repeat them.
                    if !call.name.ends_with(&name) {
                        call.name.push_str(&name);
                    }
                }
                if let Some(fragment) = function.arguments {
                    self.bytes += fragment.len();
                    call.arguments.push_str(&fragment);
                }
            }
        }
        let text = choice.delta.content.filter(|t| !t.is_empty())?;
        self.bytes += text.len();
        self.text.push_str(&text);
        Some(text)
    }

    /// The finished reply.
    ///
    /// # Errors
    /// When the stream ended before the model said it was done (no `finish_reason`: a cut-off
    /// stream), or held no chunk at all.
    fn finish(self) -> Result<ModelResponse, String> {
        if self.chunks == 0 {
            return Err("the stream ended without a single chunk".to_owned());
        }
        match self.finish {
            None => {
                return Err(format!(
                    "the stream ended before the model finished (no finish_reason after {} chunks)",
                    self.chunks
                ));
            }
            Some(FinishReason::Length) if !self.calls.is_empty() => {
                return Err(
                    "the model hit its output token limit in the middle of a tool call".to_owned(),
                );
            }
            // The provider withheld part of the reply: tool calls in it are not what the model
            // asked for, so none of them runs.
            Some(FinishReason::ContentFilter) if !self.calls.is_empty() => {
                return Err(
                    "the provider's content filter stopped the reply in the middle of its tool calls"
                        .to_owned(),
                );
            }
            Some(_) => {}
        }
        // As the wire names it (`stop`, `tool_calls`, ...).
        let finish_reason = serde_json::to_value(self.finish)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned));
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| call.finish(index, "call_"))
            .collect();
        Ok(ModelResponse {
            text: self.text,
            tool_calls,
            finish_reason,
            usage: self.usage,
        })
    }
}

impl OpenAiModel {
    /// Sends `body` and folds the streamed chunks into a reply, passing text deltas on; fails
    /// once the reply, or one event, passes [`OpenAiSettings::max_reply_bytes`]. The stream
    /// ends at `data: [DONE]` (or the end of the body); `keepalive` events are skipped.
    async fn stream_reply(
        &self,
        body: Vec<u8>,
        request: &ModelRequest<'_>,
    ) -> Result<StreamState, ModelError> {
        let base = self.settings.base_url();
        let max = self.settings.max_reply_bytes;
        let mut events = EventStream::new(self.send(body).await?, max);
        let mut state = StreamState::default();
        while let Some(event) = events.next().await.map_err(|e| match e {
            StreamError::Transport(e) => self.error(
                ModelErrorKind::Transport,
                format!("the event stream from {base} broke: {}", chain(&e)),
            ),
            StreamError::Sse(SseError::TooLarge(max)) => self.error(
                ModelErrorKind::MalformedResponse,
                format!("an event of the stream from {base} is larger than {max} bytes"),
            ),
            StreamError::Sse(e) => self.error(
                ModelErrorKind::MalformedResponse,
                format!("malformed stream from {base}: {e}"),
            ),
        })? {
            if event.data == "[DONE]" {
                break;
            }
            if event.name == "keepalive" {
                continue;
            }
            let chunk: CreateChatCompletionStreamResponse = serde_json::from_str(&event.data)
                .map_err(|e| {
                    self.error(
                        ModelErrorKind::MalformedResponse,
                        format!(
                            "malformed response from {base}: {e}; got: {}",
                            truncate(&event.data, 200)
                        ),
                    )
                    .with_source(e)
                })?;
            if let Some(delta) = state.push(chunk) {
                request.text.send(&delta);
            }
            if state.too_many_calls {
                return Err(self.error(
                    ModelErrorKind::MalformedResponse,
                    format!(
                        "the reply from {base} has more than {MAX_TOOL_CALLS} tool calls; none of them runs"
                    ),
                ));
            }
            if state.bytes() > max {
                return Err(self.error(
                    ModelErrorKind::MalformedResponse,
                    format!("the reply from {base} is larger than {max} bytes"),
                ));
            }
        }
        Ok(state)
    }
}

#[async_trait]
impl LanguageModel for OpenAiModel {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let model = self.settings.resolve_model(request.model_id)?;
        let body = serde_json::to_vec(&chat_request(model, &request))
            .map_err(|e| ModelError::new(format!("{PROVIDER}: cannot write the request: {e}")))?;
        let deadline = self.settings.reply_timeout;
        let state = tokio::time::timeout(deadline, self.stream_reply(body, &request))
            .await
            .map_err(|_| {
                ModelError::new(format!(
                    "{PROVIDER}: no complete reply from {} within {} s",
                    self.settings.base_url(),
                    deadline.as_secs_f64()
                ))
                .with_kind(ModelErrorKind::Transport)
            })??;
        state.finish().map_err(|message| {
            ModelError::new(format!(
                "{PROVIDER}: malformed stream from {}: {message}",
                self.settings.base_url()
            ))
            .with_kind(ModelErrorKind::MalformedResponse)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(value: Value) -> CreateChatCompletionStreamResponse {
        let mut base = json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"
        });
        if let (Some(base), Some(extra)) = (base.as_object_mut(), value.as_object()) {
            base.extend(extra.clone());
        }
        serde_json::from_value(base).expect("a valid chunk")
    }

    #[test]
    fn tool_call_arguments_split_across_chunks_are_joined_by_index() {
        let mut state = StreamState::default();
        for c in [
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                {"index": 0, "id": "call_a", "type": "function", "function": {"name": "submit_plan", "arguments": ""}},
            ]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 1, "id": "call_b", "function": {"name": "read_file", "arguments": "{}"}},
                {"index": 0, "function": {"arguments": "th\": \"x.md\"}"}},
            ]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ] {
            state.push(chunk(c));
        }
        let reply = state.finish().expect("finished");
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].id, "call_a");
        assert_eq!(reply.tool_calls[0].name, "submit_plan");
        assert_eq!(reply.tool_calls[0].args, json!({"path": "x.md"}));
        assert_eq!(reply.tool_calls[1].name, "read_file");
    }

    /// Found by a hostile-model trial: names (5,000 fragments, 20 MB) and ids were not counted.
    #[test]
    fn names_and_ids_count_against_the_reply_bytes_and_calls_are_limited() {
        let mut state = StreamState::default();
        for _ in 0..3 {
            state.push(chunk(
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "id": "id_12345", "function": {"name": "abcd", "arguments": "{}"}},
                ]}}]}),
            ));
        }
        // id 8 + name 4 + arguments 2, three times (a repeated name is not kept, but counted).
        assert_eq!(state.bytes(), 42);
        assert!(!state.too_many_calls);
        let mut state = StreamState::default();
        let calls: Vec<Value> = (0..=MAX_TOOL_CALLS)
            .map(|i| json!({"index": i, "id": format!("c{i}"), "function": {"name": "f", "arguments": "{}"}}))
            .collect();
        state.push(chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}),
        ));
        assert!(state.too_many_calls);
        assert_eq!(state.calls.len(), MAX_TOOL_CALLS);
    }

    #[test]
    fn a_stream_without_finish_reason_is_an_error() {
        let mut state = StreamState::default();
        state.push(chunk(
            json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        ));
        let err = state.finish().expect_err("cut off");
        assert!(err.contains("no finish_reason"), "{err}");
        assert!(StreamState::default().finish().is_err());
    }

    /// Found by a hostile-model trial: a reply the content filter stopped still ran its calls.
    #[test]
    fn tool_calls_in_a_reply_the_content_filter_stopped_are_an_error() {
        let mut state = StreamState::default();
        state.push(chunk(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c1", "type": "function",
             "function": {"name": "write_file", "arguments": "{\"path\": \"a.txt\"}"}}
        ]}, "finish_reason": "content_filter"}]}),
        ));
        let err = state.finish().expect_err("filtered");
        assert!(err.contains("content filter"), "{err}");
    }

    #[test]
    fn arguments_that_are_not_json_stay_raw_and_go_back_unchanged() {
        let mut state = StreamState::default();
        state.push(chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c", "function": {"name": "submit_plan", "arguments": "{\"path\": "}},
        ]}, "finish_reason": "tool_calls"}]})));
        let reply = state.finish().expect("finished");
        assert_eq!(reply.tool_calls[0].args, json!("{\"path\": "));
        assert_eq!(wire_arguments(&reply.tool_calls[0].args), "{\"path\": ");
        assert_eq!(wire_arguments(&json!({"a": 1})), "{\"a\":1}");
    }

    #[test]
    fn a_missing_key_for_openai_itself_is_refused_but_local_servers_need_none() {
        let err = OpenAiModel::new(OpenAiSettings::from_vars(|_| None)).expect_err("no key");
        assert!(err.message.contains("OPENAI_API_KEY is not set"), "{err}");
        assert!(OpenAiModel::new(OpenAiSettings::new("http://127.0.0.1:9/v1")).is_ok());
    }

    #[test]
    fn the_mode_model_wins_then_the_default_then_the_environment() {
        let env =
            OpenAiSettings::from_vars(|name| (name == MODEL_ENV).then(|| "env-model".to_owned()));
        assert_eq!(env.resolve_model(None).expect("env"), "env-model");
        let flag = env.clone().default_model("openai/flag-model");
        assert_eq!(flag.resolve_model(None).expect("flag"), "flag-model");
        assert_eq!(
            flag.resolve_model(Some("openai/meta-llama/Llama-3.1-8B"))
                .expect("mode"),
            "meta-llama/Llama-3.1-8B"
        );
        let none = OpenAiSettings::new("http://x/v1");
        assert!(
            none.resolve_model(None)
                .expect_err("none")
                .message
                .contains("OPENAI_MODEL")
        );
    }
}
