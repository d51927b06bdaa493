//! What the core and the hosts, tools and models exchange: a tool call ([`ToolCall`]), its result
//! ([`ToolOutput`]), the check of a value against a tool's JSON Schema ([`input`], also for
//! the answer to a suspended call), a message of the conversation ([`Message`]) and the name of the built-in
//! plan tool ([`SUBMIT_PLAN`]). It sits beneath the rules (`src/machine/`) and the layers
//! around them (`tool`, `model`, `store`) and imports none of them, so both sides name the same
//! types without naming each other. Each type is re-exported where users know it:
//! [`crate::tool::ToolCall`], [`crate::tool::ToolOutput`], [`crate::model::Message`],
//! [`crate::tool::submit_plan::SUBMIT_PLAN`].

pub mod args;
pub mod input;
pub(crate) mod tasks;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The name of the built-in plan tool.
pub const SUBMIT_PLAN: &str = "submit_plan";

/// The name of the built-in question tool (its suspensions are of kind `question`).
pub const ASK_USER: &str = "ask_user";

/// One tool call the model made: its id (unique within the run), the tool name and the arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The id the model gave the call; results are addressed by it.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments, a JSON object.
    pub args: Value,
}

impl ToolCall {
    /// A call of tool `name` with id `id` and arguments `args` (a JSON object).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolCall;
    /// let call = ToolCall::new("call_1", "read_file", serde_json::json!({ "path": "a.txt" }));
    /// assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "read_file"));
    /// assert_eq!(call.args["path"], "a.txt");
    /// ```
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            args,
        }
    }
}

/// The result of executing a tool: text for the model, and whether it reports an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// The text the model receives.
    pub content: String,
    /// Whether the content reports a failure.
    pub is_error: bool,
    /// Set by [`ToolOutput::suspend`]: the call waits for the user's answer instead of ending.
    /// Never sent to the model nor saved: inside a run the controller turns it into a waiting
    /// decision; outside one, `content` is the readable fallback.
    #[serde(skip)]
    pub(crate) suspension: Option<Box<ToolSuspension>>,
}

/// What a tool suspends its call with ([`ToolOutput::suspend`]): a payload for the user (any
/// JSON) and the JSON Schema of the answer it accepts, checked with the checker the crate uses
/// for tool arguments ([`crate::tool::input::mismatch`]) before the tool's
/// [`resume`](crate::tool::Tool::resume) step sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSuspension {
    /// What the user is shown (for `ask_user`: the question and its options).
    pub payload: Value,
    /// The JSON Schema an answer must fit.
    pub answer_schema: Value,
}

impl ToolOutput {
    /// A successful result with `content`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolOutput;
    /// let output = ToolOutput::ok("3 files");
    /// assert_eq!((output.content.as_str(), output.is_error), ("3 files", false));
    /// ```
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            suspension: None,
        }
    }

    /// An error result with `content`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolOutput;
    /// let output = ToolOutput::error("no such file: a.txt");
    /// assert!(output.is_error);
    /// ```
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            suspension: None,
        }
    }

    /// Ends the call by *suspending* it: inside a run the run waits, as for a plan, until the
    /// user answers with a value that fits `answer_schema` (a JSON Schema); the tool's
    /// [`resume`](crate::tool::Tool::resume) step then turns the answer into the call's result.
    /// `fallback` is the readable text a caller outside a run (no session: `Tool::execute`
    /// called directly) gets as the content.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ToolOutput;
    /// use serde_json::json;
    /// let output = ToolOutput::suspend(
    ///     "Deploy to staging? (needs a yes or no)",
    ///     json!({ "target": "staging" }),
    ///     json!({ "type": "boolean" }),
    /// );
    /// assert_eq!(output.content, "Deploy to staging? (needs a yes or no)");
    /// assert_eq!(output.suspension().unwrap().payload["target"], "staging");
    /// ```
    pub fn suspend(fallback: impl Into<String>, payload: Value, answer_schema: Value) -> Self {
        Self {
            content: fallback.into(),
            is_error: false,
            suspension: Some(Box::new(ToolSuspension {
                payload,
                answer_schema,
            })),
        }
    }

    /// What the call suspended with ([`ToolOutput::suspend`]), or `None` for a result.
    pub fn suspension(&self) -> Option<&ToolSuspension> {
        self.suspension.as_deref()
    }
}

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
    /// A tool result. The results of an assistant message's calls follow it in the order of
    /// its calls before each model call, whatever order they came in.
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
