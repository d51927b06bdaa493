//! Models plug in through [`LanguageModel`]: given the current mode's system prompt, its tools and
//! the conversation, return text and tool calls.

#[cfg(feature = "openai")]
pub mod openai;
pub mod scripted;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use tokio_util::sync::CancellationToken;

use crate::extensions::Extensions;
use crate::tool::{ToolCall, ToolSpec};

/// One message of a session's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "role",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Message {
    /// A notice from the controller, such as a mode change.
    System {
        /// The notice text.
        content: String,
    },
    /// A user message.
    User {
        /// The message text.
        content: String,
    },
    /// A model reply: text and the tool calls it made.
    Assistant {
        /// Reply text (may be empty when the model only calls tools).
        content: String,
        /// Tool calls, in the order the model made them.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool result.
    Tool {
        /// The call this answers.
        tool_call_id: String,
        /// The tool name.
        tool_name: String,
        /// The result text.
        content: String,
        /// Whether the result reports an error.
        is_error: bool,
    },
}

/// What a model call sees: the session, run and mode it runs in, the mode's system prompt and
/// tools, the conversation, a cancellation token, and the host's extensions.
///
/// Built by the run loop for every model call; `#[non_exhaustive]` so fields can be added.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ModelRequest<'a> {
    /// The id of the session the call belongs to.
    pub session_id: &'a str,
    /// The id of the run the call belongs to (unique within the session).
    pub run_id: &'a str,
    /// The id of the mode the call runs in.
    pub mode_id: &'a str,
    /// The mode's preferred model (`defaultModelId`), if any.
    pub model_id: Option<&'a str>,
    /// The system prompt: the mode's instructions, built once per mode.
    pub system_prompt: &'a str,
    /// The tools the model may call in this mode, and only those.
    pub tools: &'a [ToolSpec],
    /// The conversation so far, oldest first.
    pub messages: &'a [Message],
    /// Cancelled when the host cancels the run ([`crate::session::CancelHandle`]). The run loop
    /// stops waiting for the call at once either way (the call's future is dropped); a model
    /// may watch the token to stop work that outlives its future (a spawned task, a request to
    /// a server that bills by the token).
    pub cancel: CancellationToken,
    /// The host's state for this session ([`crate::SessionOptions::extension`]).
    pub extensions: &'a Extensions,
}

/// A model's reply: text and zero or more tool calls (several are parallel calls of one step).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// Reply text.
    pub text: String,
    /// Tool calls; empty when the model is done.
    pub tool_calls: Vec<ToolCall>,
}

/// A failed model call (network, provider error, malformed output); the run ends with reason
/// `error` and the session stays consistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model call failed: {message}")]
pub struct ModelError {
    /// What went wrong.
    pub message: String,
}

impl ModelError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A language model the controller drives.
#[async_trait]
pub trait LanguageModel: Send + Sync {
    /// Produces the next reply for `request`.
    ///
    /// # Errors
    /// [`ModelError`] when no reply can be produced.
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError>;
}

#[async_trait]
impl<M: LanguageModel + ?Sized> LanguageModel for Arc<M> {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        (**self).generate(request).await
    }
}
