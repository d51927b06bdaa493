//! Why a model stopped replying, in one vocabulary for every provider: the one place the
//! providers' finish reasons (OpenAI-compatible `finish_reason`, Anthropic's `stop_reason`)
//! are read.

use serde::{Deserialize, Serialize};

/// Why the model stopped its reply, whatever the provider calls it ([`Finish::from_reason`]).
///
/// # Examples
/// ```
/// use agent_controller::model::Finish;
/// assert_eq!(Finish::from_reason("length"), Finish::MaxTokens); // OpenAI-compatible
/// assert_eq!(Finish::from_reason("max_tokens"), Finish::MaxTokens); // Anthropic
/// assert_eq!(Finish::from_reason("content_filter"), Finish::Refusal);
/// assert_eq!(Finish::from_reason("end_turn"), Finish::Stop);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// The model was done (OpenAI `stop`; Anthropic `end_turn`, `stop_sequence`,
    /// `pause_turn`).
    Stop,
    /// The model asked for tool calls (OpenAI `tool_calls`, `function_call`; Anthropic
    /// `tool_use`).
    ToolCalls,
    /// The reply was cut at the token limit (OpenAI `length`; Anthropic `max_tokens`,
    /// `model_context_window_exceeded`).
    MaxTokens,
    /// The provider or the model refused to go on (OpenAI `content_filter`, `refusal`;
    /// Anthropic `refusal`).
    Refusal,
    /// A reason this crate does not know: taken as the model being done.
    Other,
}

impl Finish {
    /// The finish a provider's reason text stands for: OpenAI-compatible `finish_reason`s and
    /// Anthropic `stop_reason`s (their names do not clash). An unknown text is
    /// [`Finish::Other`].
    pub fn from_reason(reason: &str) -> Self {
        match reason {
            "stop" | "end_turn" | "stop_sequence" | "pause_turn" => Finish::Stop,
            "tool_calls" | "function_call" | "tool_use" => Finish::ToolCalls,
            "length" | "max_tokens" | "model_context_window_exceeded" => Finish::MaxTokens,
            "content_filter" | "refusal" => Finish::Refusal,
            _ => Finish::Other,
        }
    }
}
