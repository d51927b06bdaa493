//! Models plug in through [`LanguageModel`]: given the current mode's system prompt, its tools and
//! the conversation, return text and tool calls.

#[cfg(feature = "anthropic")]
pub mod anthropic;
mod chooser;
mod finish;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub mod http;
#[cfg(feature = "openai")]
pub mod openai;
pub mod reviewer;
pub mod scripted;
mod spec;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod sse;

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use tokio_util::sync::CancellationToken;

use crate::event::TokenUsage;
use crate::extensions::Extensions;
use crate::tool::{ToolCall, ToolSpec};

pub use crate::exchange::Message;
pub use chooser::{ModelChooser, SpecChooser};
pub use finish::Finish;
pub use spec::{ModelSpec, ModelSpecError};

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
    /// Where a streaming model sends its reply text as it arrives; each piece reaches the
    /// session's subscribers at once as a `text_delta` event (with the session and run ids).
    pub text: TextSink<'a>,
}

/// The extensions of a request built with [`ModelRequest::new`]: none.
static NO_EXTENSIONS: Extensions = Extensions::new();

impl<'a> ModelRequest<'a> {
    /// A request for a model call outside a session, so a host can unit-test its model:
    /// `messages` as the conversation, and otherwise empty ids (`""`), no preferred model, an
    /// empty system prompt, no tools, a fresh cancellation token, no extensions and a text
    /// sink that drops every piece. Set the rest with the `with_` methods.
    ///
    /// To script a whole conversation through a session instead (the replies a model gives,
    /// and what it was asked), use [`scripted::ReplayModel`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{LanguageModel, model::Message, ModelError, ModelRequest, ModelResponse};
    ///
    /// struct Shout;
    ///
    /// #[agent_controller::async_trait]
    /// impl LanguageModel for Shout {
    ///     async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
    ///         match request.messages.last() {
    ///             Some(Message::User { content }) => Ok(ModelResponse::text(content.to_uppercase())),
    ///             _ => Err(ModelError::new("nothing to answer")),
    ///         }
    ///     }
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let messages = [Message::User { content: "hello".into() }];
    /// let request = ModelRequest::new(&messages).with_mode_id("build").with_system_prompt("Be loud.");
    /// assert_eq!(request.mode_id, "build");
    /// assert_eq!(Shout.generate(request).await.unwrap(), ModelResponse::text("HELLO"));
    /// assert!(Shout.generate(ModelRequest::new(&[])).await.is_err());
    /// # });
    /// ```
    pub fn new(messages: &'a [Message]) -> Self {
        Self {
            session_id: "",
            run_id: "",
            mode_id: "",
            model_id: None,
            system_prompt: "",
            tools: &[],
            messages,
            cancel: CancellationToken::new(),
            extensions: &NO_EXTENSIONS,
            text: TextSink::none(),
        }
    }

    /// The same request in session `session_id`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelRequest;
    /// assert_eq!(ModelRequest::new(&[]).with_session_id("s1").session_id, "s1");
    /// ```
    pub fn with_session_id(mut self, session_id: &'a str) -> Self {
        self.session_id = session_id;
        self
    }

    /// The same request in run `run_id`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelRequest;
    /// assert_eq!(ModelRequest::new(&[]).with_run_id("run_2").run_id, "run_2");
    /// ```
    pub fn with_run_id(mut self, run_id: &'a str) -> Self {
        self.run_id = run_id;
        self
    }

    /// The same request in mode `mode_id`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelRequest;
    /// assert_eq!(ModelRequest::new(&[]).with_mode_id("plan").mode_id, "plan");
    /// ```
    pub fn with_mode_id(mut self, mode_id: &'a str) -> Self {
        self.mode_id = mode_id;
        self
    }

    /// The same request with `model_id` as the mode's preferred model.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelRequest;
    /// assert_eq!(ModelRequest::new(&[]).with_model_id("gpt-4o").model_id, Some("gpt-4o"));
    /// assert_eq!(ModelRequest::new(&[]).model_id, None);
    /// ```
    pub fn with_model_id(mut self, model_id: &'a str) -> Self {
        self.model_id = Some(model_id);
        self
    }

    /// The same request with `system_prompt`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelRequest;
    /// assert_eq!(ModelRequest::new(&[]).with_system_prompt("Plan first.").system_prompt, "Plan first.");
    /// ```
    pub fn with_system_prompt(mut self, system_prompt: &'a str) -> Self {
        self.system_prompt = system_prompt;
        self
    }

    /// The same request offering `tools`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ModelRequest, tool::ToolAccess, tool::ToolSpec};
    /// let tools = [ToolSpec {
    ///     name: "read_file".into(),
    ///     description: "Reads a file".into(),
    ///     input_schema: serde_json::json!({ "type": "object" }),
    ///     access: ToolAccess::ReadOnly,
    /// }];
    /// let request = ModelRequest::new(&[]).with_tools(&tools);
    /// assert_eq!(&*request.tools[0].name, "read_file");
    /// ```
    pub fn with_tools(mut self, tools: &'a [ToolSpec]) -> Self {
        self.tools = tools;
        self
    }

    /// The same request with `cancel` as its cancellation token (cancel it to test that a
    /// model stops).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelRequest;
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let request = ModelRequest::new(&[]).with_cancel(token.clone());
    /// token.cancel();
    /// assert!(request.cancel.is_cancelled());
    /// ```
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// The same request with the host's `extensions`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ModelRequest, extensions::Extensions};
    /// struct ApiKey(&'static str);
    /// let mut extensions = Extensions::new();
    /// extensions.insert(ApiKey("sk-test"));
    /// let request = ModelRequest::new(&[]).with_extensions(&extensions);
    /// assert_eq!(request.extensions.get::<ApiKey>().map(|k| k.0), Some("sk-test"));
    /// ```
    pub fn with_extensions(mut self, extensions: &'a Extensions) -> Self {
        self.extensions = extensions;
        self
    }

    /// The same request sending streamed reply text to `text`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelRequest;
    /// use agent_controller::model::TextSink;
    /// let seen = std::sync::Mutex::new(String::new());
    /// let deliver = |piece: &str| seen.lock().unwrap().push_str(piece);
    /// let request = ModelRequest::new(&[]).with_text(TextSink::new(&deliver));
    /// request.text.send("streamed");
    /// assert_eq!(*seen.lock().unwrap(), "streamed");
    /// ```
    pub fn with_text(mut self, text: TextSink<'a>) -> Self {
        self.text = text;
        self
    }
}

/// Where a streaming model sends pieces of its reply text ([`ModelRequest::text`]).
///
/// # Examples
/// ```
/// use agent_controller::model::TextSink;
/// let seen = std::sync::Mutex::new(String::new());
/// let deliver = |text: &str| seen.lock().unwrap().push_str(text);
/// let sink = TextSink::new(&deliver);
/// sink.send("Hel");
/// sink.send("lo");
/// assert_eq!(*seen.lock().unwrap(), "Hello");
/// TextSink::none().send("goes nowhere");
/// ```
#[derive(Clone, Copy)]
pub struct TextSink<'a> {
    deliver: &'a (dyn Fn(&str) + Send + Sync),
}

impl std::fmt::Debug for TextSink<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TextSink")
    }
}

impl<'a> TextSink<'a> {
    /// A sink that hands every piece to `deliver`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::TextSink;
    /// let seen = std::sync::Mutex::new(Vec::new());
    /// let deliver = |piece: &str| seen.lock().unwrap().push(piece.to_owned());
    /// TextSink::new(&deliver).send("Hi");
    /// assert_eq!(*seen.lock().unwrap(), ["Hi"]);
    /// ```
    pub fn new(deliver: &'a (dyn Fn(&str) + Send + Sync)) -> Self {
        Self { deliver }
    }

    /// A sink that drops every piece (for calling a model outside a session).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::TextSink;
    /// let sink = TextSink::none();
    /// sink.send("dropped"); // goes nowhere, and does not fail
    /// ```
    pub fn none() -> TextSink<'static> {
        TextSink { deliver: &|_| {} }
    }

    /// Sends a piece of reply text; empty pieces are skipped.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::TextSink;
    /// let count = std::sync::atomic::AtomicUsize::new(0);
    /// let deliver = |_: &str| { count.fetch_add(1, std::sync::atomic::Ordering::Relaxed); };
    /// let sink = TextSink::new(&deliver);
    /// sink.send("a");
    /// sink.send(""); // skipped
    /// assert_eq!(count.load(std::sync::atomic::Ordering::Relaxed), 1);
    /// ```
    pub fn send(&self, text: &str) {
        if !text.is_empty() {
            (self.deliver)(text);
        }
    }
}

/// A model's reply: text and zero or more tool calls (several are parallel calls of one step),
/// and what the provider says about the call (finish reason, token usage), when it says it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// Reply text.
    pub text: String,
    /// Tool calls; empty when the model is done.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, ...) as the provider names it,
    /// if it says; [`ModelResponse::finish`] reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Tokens the call used, if the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

impl ModelResponse {
    /// Why the model stopped, in the crate's vocabulary ([`Finish::from_reason`] of
    /// [`ModelResponse::finish_reason`]); `None` when the provider did not say.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ModelResponse, model::Finish};
    /// let mut reply = ModelResponse::text("The answer is");
    /// assert_eq!(reply.finish(), None);
    /// reply.finish_reason = Some("length".into());
    /// assert_eq!(reply.finish(), Some(Finish::MaxTokens));
    /// ```
    pub fn finish(&self) -> Option<Finish> {
        self.finish_reason.as_deref().map(Finish::from_reason)
    }

    /// A reply of `text` alone: no tool calls, no finish reason, no usage (the model is done).
    ///
    /// For tests of a host's model; to script a whole conversation, use
    /// [`scripted::ReplayModel`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelResponse;
    /// let reply = ModelResponse::text("done");
    /// assert_eq!(reply.text, "done");
    /// assert!(reply.tool_calls.is_empty());
    /// ```
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// A reply that makes `calls` (several are parallel calls of one step), with no text.
    /// Add text with [`ModelResponse::with_text`].
    ///
    /// For tests of a host's model; to script a whole conversation, use
    /// [`scripted::ReplayModel`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ModelResponse, ToolCall};
    /// let call = ToolCall::new("call_1", "read_file", serde_json::json!({ "path": "README.md" }));
    /// let reply = ModelResponse::tool_calls([call.clone()]).with_text("Reading it.");
    /// assert_eq!(reply.tool_calls, [call]);
    /// assert_eq!(reply.text, "Reading it.");
    /// ```
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Self {
            tool_calls: calls.into_iter().collect(),
            ..Self::default()
        }
    }

    /// The same reply with `text` as its text.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ModelResponse, ToolCall};
    /// let reply = ModelResponse::tool_calls([ToolCall::new("c1", "list_files", serde_json::json!({}))]).with_text("Looking.");
    /// assert_eq!((reply.text.as_str(), reply.tool_calls.len()), ("Looking.", 1));
    /// ```
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }
}

/// What kind of failure a [`ModelError`] is, for a host that reacts differently to each (wait
/// and retry on [`ModelErrorKind::RateLimited`], ask for a key on
/// [`ModelErrorKind::Authentication`], ...).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[strum(parse_err_ty = crate::names::UnknownName, parse_err_fn = crate::names::UnknownName::of::<Self>)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(inline, schema_with = "crate::names::schema::<ModelErrorKind>")
)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The provider refused the credentials (HTTP 401 or 403, or no key where one is needed).
    Authentication,
    /// The provider is rate limiting or the quota is used up (HTTP 429).
    RateLimited,
    /// The provider could not be reached, or the connection broke.
    Transport,
    /// The provider answered with something that is not a valid reply (bad JSON, a stream cut
    /// off before the model finished).
    MalformedResponse,
    /// The conversation does not fit the model's context window.
    ContextLength,
    /// The provider is overloaded for the moment (Anthropic's HTTP 529 or `overloaded_error`);
    /// a later call may succeed.
    Overloaded,
    /// The provider refused the request as malformed or not allowed (HTTP 400 with
    /// Anthropic's `invalid_request_error`), other than a context-length error.
    InvalidRequest,
    /// The run reached its limit of model calls (see
    /// [`crate::controller::AgentControllerBuilder::max_steps`]); no model call failed.
    StepLimit,
    /// The run reached its limit of plan revisions (see
    /// [`crate::controller::AgentControllerBuilder::max_revisions`]): a rejection with feedback would
    /// have asked for one more; no model call failed.
    RevisionLimit,
    /// Anything else (a server error, an unknown model, a bad request).
    Other,
}

impl ModelErrorKind {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A failed model call (network, provider error, malformed output) or a run that reached its
/// step limit: a [`ModelErrorKind`], a message for people, and the underlying error as
/// [`std::error::Error::source`] where there is one. The run ends with reason `failed`
/// ([`crate::RunOutcome::Failed`] carries this error) and the session stays consistent.
///
/// Two errors are equal when kind and message are; sources are not compared.
///
/// # Examples
/// ```
/// use agent_controller::{ModelError, model::ModelErrorKind};
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
/// let error = ModelError::new("cannot reach the server").with_kind(ModelErrorKind::Transport).with_source(io);
/// assert_eq!(error.kind(), ModelErrorKind::Transport);
/// assert_eq!(error.to_string(), "model call failed: cannot reach the server");
/// let source = std::error::Error::source(&error).unwrap();
/// assert!(source.downcast_ref::<std::io::Error>().is_some());
/// ```
#[derive(Debug, Clone)]
pub struct ModelError {
    kind: ModelErrorKind,
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            ModelErrorKind::StepLimit | ModelErrorKind::RevisionLimit => f.write_str(&self.message),
            _ => write!(f, "model call failed: {}", self.message),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The error itself, not the `Arc` around it, so a host can downcast it.
        self.source.as_deref().map(|e| e as _)
    }
}

impl PartialEq for ModelError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for ModelError {}

impl ModelError {
    /// An error of kind [`ModelErrorKind::Other`] with `message` and no source.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ModelError, model::ModelErrorKind};
    /// let error = ModelError::new("unknown model `gpt-9`");
    /// assert_eq!(error.kind(), ModelErrorKind::Other);
    /// assert_eq!(error.to_string(), "model call failed: unknown model `gpt-9`");
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            kind: ModelErrorKind::Other,
            message: message.into(),
            source: None,
        }
    }

    /// The same error with kind `kind`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ModelError, model::ModelErrorKind};
    /// let error = ModelError::new("slow down").with_kind(ModelErrorKind::RateLimited);
    /// assert_eq!(error.kind(), ModelErrorKind::RateLimited);
    /// ```
    pub fn with_kind(mut self, kind: ModelErrorKind) -> Self {
        self.kind = kind;
        self
    }

    /// The same error with `source` as its [`std::error::Error::source`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelError;
    /// let io = std::io::Error::other("reset by peer");
    /// let error = ModelError::new("the stream broke").with_source(io);
    /// let source = std::error::Error::source(&error).unwrap();
    /// assert_eq!(source.to_string(), "reset by peer");
    /// ```
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// What kind of failure this is.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{ModelError, model::ModelErrorKind};
    /// let error = ModelError::new("401").with_kind(ModelErrorKind::Authentication);
    /// match error.kind() {
    ///     ModelErrorKind::Authentication => {} // ask for a key
    ///     ModelErrorKind::RateLimited => unreachable!(),
    ///     _ => unreachable!(),
    /// }
    /// ```
    pub fn kind(&self) -> ModelErrorKind {
        self.kind
    }

    /// What went wrong, for people (without the `model call failed: ` prefix of `Display`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::ModelError;
    /// let error = ModelError::new("cannot reach the server");
    /// assert_eq!(error.message(), "cannot reach the server");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A language model the controller drives.
///
/// The trait is async through [`async_trait`](crate::async_trait): implement it with
/// `#[agent_controller::async_trait]` on the `impl` block.
///
/// # Examples
/// A model that answers every message with its last words, in every mode:
/// ```
/// use std::sync::Arc;
/// use agent_controller::{
///     AgentController, LanguageModel, model::Message, ModelError, ModelRequest, ModelResponse, RunOutcome,
///     SessionOptions,
/// };
///
/// struct Echo;
///
/// #[agent_controller::async_trait]
/// impl LanguageModel for Echo {
///     async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
///         let Some(Message::User { content }) = request.messages.last() else {
///             return Err(ModelError::new("nothing to answer"));
///         };
///         Ok(ModelResponse { text: format!("[{}] {content}", request.mode_id), ..Default::default() })
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"", "modes.toml")?;
/// let controller = AgentController::builder(graph, Arc::new(Echo)).build()?;
/// let mut session = controller.start_session(SessionOptions::new()).await?;
/// let outcome = session.send_message("hello").await?;
/// assert!(matches!(outcome, RunOutcome::Completed { text, .. } if text == "[build] hello"));
/// # Ok::<(), agent_controller::Error>(())
/// # }).unwrap();
/// ```
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
