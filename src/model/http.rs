//! What the HTTP providers share (features `openai`, `anthropic`): which failed requests are sent
//! again, how often and how long apart ([`RetryPolicy`]), the loop that applies it to a request,
//! the HTTP client with its timeouts, and the settings every provider has ([`HttpSettings`]).
//!
//! A retry is worth it only where the same request can succeed later: a timeout (408), a rate
//! limit (429), a gateway or an overloaded server (502, 503, 504, and Anthropic's 529), a
//! connection that could not be made, was reset or timed out. Everything else fails the same way
//! every time (a 400 for a bad request, a 401 for a bad key, a 500 for a chat template that
//! refuses the conversation), so it is reported at once.

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Request, Response, StatusCode};

use super::{ModelError, ModelErrorKind};

/// How a failed model request is retried: which failures (see the module docs: 408, 429, 502,
/// 503, 504, 529 and transport errors, never other statuses), how many attempts, how long apart, and
/// the total time it may take.
///
/// The wait before retry `n` (1-based) is `initial_backoff * 2^(n-1)`, at most `max_backoff`,
/// unless the server says how long with `Retry-After` (delta-seconds): then that, at most
/// `max_retry_after`. No retry starts once the next wait would end past `max_elapsed` since the
/// first attempt: the last failure is reported instead.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use agent_controller::model::http::RetryPolicy;
/// let policy = RetryPolicy::default()
///     .max_attempts(2)
///     .backoff(Duration::from_millis(10), Duration::from_millis(50));
/// assert_eq!(policy.attempts(), 2);
/// assert_eq!(RetryPolicy::none().attempts(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    max_retry_after: Duration,
    max_elapsed: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts (3 retries), backoff 500 ms doubling up to 8 s, `Retry-After` honoured up to
    /// 30 s, 60 s in all.
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
            max_elapsed: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries: every request is sent once.
    pub fn none() -> Self {
        Self::default().max_attempts(1)
    }

    /// At most `attempts` requests in all, the first included (0 counts as 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The first wait is `initial`, doubling with each retry, never more than `max`.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max.max(initial);
        self
    }

    /// The longest wait a server's `Retry-After` can ask for; a longer one is cut to this.
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// No retry starts when its wait would end later than `max` after the first attempt.
    pub fn max_elapsed(mut self, max: Duration) -> Self {
        self.max_elapsed = max;
        self
    }

    /// The number of requests at most, the first included.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The wait before sending attempt `attempt + 1`, after attempt `attempt` (1-based) failed
    /// in a way a retry can fix, `elapsed` after the first attempt started; `retry_after` is
    /// the server's hint. `None`: no more attempts (the count or the time is used up).
    fn wait(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        elapsed: Duration,
    ) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let wait = match retry_after {
            Some(hint) => hint.min(self.max_retry_after),
            None => self
                .initial_backoff
                .saturating_mul(2_u32.saturating_pow(attempt - 1))
                .min(self.max_backoff),
        };
        (elapsed.saturating_add(wait) <= self.max_elapsed).then_some(wait)
    }
}

/// Whether an HTTP status is worth a retry: 408, 429, 502, 503, 504 and 529 (Anthropic's
/// "overloaded"). A 500 is not: llama.cpp answers 500 for a chat template that refuses the
/// conversation, and that never changes.
fn retryable_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 429 | 502 | 503 | 504 | 529)
}

/// Whether a transport error is worth a retry: no connection (refused, DNS, TLS), a timeout, or
/// a connection that broke before the response began (reset, or a keep-alive connection the
/// server had closed: reqwest reports these as request errors).
fn retryable_transport(error: &reqwest::Error) -> bool {
    error.is_connect() || error.is_timeout() || error.is_request()
}

/// The server's `Retry-After` as delta-seconds. The HTTP-date form is ignored (the backoff
/// applies instead).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    value.parse::<u64>().ok().map(Duration::from_secs)
}

/// Sends the request `build` makes until it succeeds, fails in a way a retry cannot fix, or
/// `policy` is used up; returns the last response (a failing status included: the caller turns
/// it into an error with the server's text) or the last transport error. `build` is called once
/// per attempt; its error ends the loop at once.
pub(crate) async fn send<E, F, Fut>(
    http: &reqwest::Client,
    policy: &RetryPolicy,
    mut build: F,
) -> Result<Response, E>
where
    E: From<reqwest::Error>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Request, E>>,
{
    let started = Instant::now();
    let mut attempt = 1;
    loop {
        let result = http.execute(build().await?).await;
        let hint = match &result {
            Ok(response) if retryable_status(response.status()) => retry_after(response.headers()),
            Err(error) if retryable_transport(error) => None,
            _ => return result.map_err(E::from),
        };
        let Some(wait) = policy.wait(attempt, hint, started.elapsed()) else {
            return result.map_err(E::from);
        };
        tracing::debug!(attempt, ?wait, "retrying the model request");
        drop(result);
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// Sends `body` (JSON) by POST to `url`, with the headers `headers` adds, retried as `policy`
/// says ([`send`]); returns the last response, a failing status included.
pub(crate) async fn post_json(
    http: &reqwest::Client,
    policy: &RetryPolicy,
    url: &str,
    body: &[u8],
    headers: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
) -> Result<Response, reqwest::Error> {
    send(http, policy, || {
        let request = headers(http.post(url))
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body.to_vec())
            .build();
        std::future::ready(request)
    })
    .await
}

/// What a transport error of a request to `base` says: that `base` cannot be reached (no
/// connection, a timeout), pointing at the variable `base_env` that sets it, or that the request
/// failed; with the error's sources.
pub(crate) fn transport_message(base: &str, base_env: &str, error: &reqwest::Error) -> String {
    if error.is_connect() || error.is_timeout() {
        format!(
            "cannot reach {base}: {} (is the server running? check {base_env})",
            chain(error)
        )
    } else {
        format!("request to {base} failed: {}", chain(error))
    }
}

/// The HTTP client of a provider: `connect_timeout` for the connection, `read_timeout` for each
/// wait for bytes. Installs the `ring` TLS provider as the process default when none is
/// installed yet (the client needs one for `https://` endpoints).
///
/// # Errors
/// The message, when the client cannot be built.
pub(crate) fn client(
    connect_timeout: Duration,
    read_timeout: Duration,
) -> Result<reqwest::Client, String> {
    // Err means another provider is installed already, which reqwest then uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .read_timeout(read_timeout)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {}", chain(&e)))
}

/// Reads at most `max` bytes of a response body, lossily as text (an error body).
pub(crate) async fn read_bounded(mut response: Response, max: usize) -> String {
    let mut body = Vec::new();
    while let Ok(Some(bytes)) = response.chunk().await {
        body.extend_from_slice(&bytes);
        if body.len() >= max {
            body.truncate(max);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// An error with its sources, `outer: inner: innermost`.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        source = inner.source();
    }
    text
}

/// `text` cut to `max_chars` characters, with `...` where it was cut.
pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// A provider [`HttpSettings`] are for: its name, its environment variables, its default
/// endpoint, and the settings only it has (the value itself). Implemented by
/// `model::openai::OpenAi` and `model::anthropic::Anthropic`.
pub trait HttpProvider: Clone + fmt::Debug + Default + Send + Sync + 'static {
    /// The provider's name, as model specs and `defaultModelId` write it (`openai` in
    /// `openai/gpt-4.1`).
    const NAME: &'static str;
    /// The environment variable holding the API key.
    const API_KEY_ENV: &'static str;
    /// The environment variable holding the endpoint's base URL.
    const BASE_URL_ENV: &'static str;
    /// The environment variable naming the model used when neither the mode nor the caller
    /// names one.
    const MODEL_ENV: &'static str;
    /// The base URL used when the base URL variable is not set.
    const DEFAULT_BASE_URL: &'static str;
    /// What a user whose API key is missing for the default endpoint is told, after
    /// "`API_KEY_ENV` is not set: ".
    const MISSING_KEY_HINT: &'static str;
    /// The settings' name in `Debug` output (`OpenAiSettings`).
    const SETTINGS_NAME: &'static str;
    /// The model's name in `Debug` output (`OpenAiModel`).
    const MODEL_NAME: &'static str;
}

/// A provider's model over HTTP: the client its [`HttpSettings`] describe, and the settings.
/// `OpenAiModel` and `AnthropicModel` are this for their provider `P`; each provider's module
/// adds what its requests and replies look like ([`crate::LanguageModel`]).
pub struct HttpModel<P: HttpProvider> {
    pub(crate) http: reqwest::Client,
    pub(crate) settings: HttpSettings<P>,
}

impl<P: HttpProvider> fmt::Debug for HttpModel<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(P::MODEL_NAME)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<P: HttpProvider> HttpModel<P> {
    /// A model for the endpoint `settings` describe.
    ///
    /// Installs the `ring` TLS provider as the process default when none is installed yet (the
    /// HTTP client needs one for `https://` endpoints).
    ///
    /// # Errors
    /// A [`ModelError`] of kind [`ModelErrorKind::Authentication`] when no API key is set for
    /// the provider's own endpoint (a local server or a proxy at another base URL may go
    /// without one), or one when the HTTP client cannot be built.
    pub fn new(settings: HttpSettings<P>) -> Result<Self, ModelError> {
        let http = settings.client()?;
        Ok(Self { http, settings })
    }

    /// A model configured from the environment ([`HttpSettings::from_env`]).
    ///
    /// # Errors
    /// As [`HttpModel::new`]: the API key variable unset while the base URL variable is unset
    /// too.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::new(HttpSettings::from_env())
    }

    /// The settings in use.
    pub fn settings(&self) -> &HttpSettings<P> {
        &self.settings
    }

    /// An error of `kind` from this provider ([`HttpSettings::error`]).
    pub(crate) fn error(&self, kind: ModelErrorKind, message: impl fmt::Display) -> ModelError {
        self.settings.error(kind, message)
    }

    /// POSTs the JSON `body` to `path` under the base URL ([`post_json`]), with the headers
    /// `auth` adds for the API key (empty when none is set); a transport failure becomes the
    /// provider's [`ModelErrorKind::Transport`] error. The response may have any status.
    pub(crate) async fn post(
        &self,
        path: &str,
        body: &[u8],
        auth: impl Fn(reqwest::RequestBuilder, &str) -> reqwest::RequestBuilder,
    ) -> Result<Response, ModelError> {
        let url = format!("{}{path}", self.settings.base_url());
        let key = self.settings.api_key.clone().unwrap_or_default();
        post_json(&self.http, &self.settings.retries, &url, body, |r| {
            auth(r, &key)
        })
        .await
        .map_err(|e| self.settings.transport_error(e))
    }
}

/// Where and how to reach a provider's HTTP API, the same for every provider: base URL, API
/// key, default model, timeouts, the reply bound and retries. `OpenAiSettings` and
/// `AnthropicSettings` are this for their provider `P`, which also holds what only that
/// provider has (Anthropic's `max_tokens`). Build with [`HttpSettings::from_env`] or
/// [`HttpSettings::new`], then adjust with the setters.
#[derive(Clone)]
pub struct HttpSettings<P: HttpProvider> {
    pub(crate) base_url: String,
    pub(crate) api_key: Option<String>,
    pub(crate) default_model: Option<String>,
    pub(crate) env_model: Option<String>,
    pub(crate) connect_timeout: Duration,
    pub(crate) read_timeout: Duration,
    pub(crate) reply_timeout: Duration,
    pub(crate) max_reply_bytes: usize,
    pub(crate) retries: RetryPolicy,
    pub(crate) provider: P,
}

impl<P: HttpProvider> fmt::Debug for HttpSettings<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(P::SETTINGS_NAME)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("default_model", &self.default_model)
            .field("env_model", &self.env_model)
            .field("provider", &self.provider)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

impl<P: HttpProvider> HttpSettings<P> {
    /// Settings for the endpoint at `base_url` (OpenAI: up to and including `/v1`, such as
    /// `http://localhost:11434/v1` for Ollama; Anthropic: without `/v1`), with no key and no
    /// default model.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            default_model: None,
            env_model: None,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            reply_timeout: Duration::from_secs(600),
            max_reply_bytes: 8 * 1024 * 1024,
            retries: RetryPolicy::default(),
            provider: P::default(),
        }
    }

    /// Settings from the environment, as the provider's own clients read it: the API key
    /// (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), the base URL (`OPENAI_BASE_URL`,
    /// `ANTHROPIC_BASE_URL`; default [`HttpProvider::DEFAULT_BASE_URL`]) and the last-resort
    /// model (`OPENAI_MODEL`, `ANTHROPIC_MODEL`). Empty variables count as unset.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Like [`HttpSettings::from_env`], reading variables through `var` (for tests and hosts
    /// with their own settings store).
    ///
    /// # Examples
    #[cfg_attr(feature = "openai", doc = "```")]
    #[cfg_attr(not(feature = "openai"), doc = "```ignore")]
    /// use agent_controller::model::openai::OpenAiSettings;
    /// let settings = OpenAiSettings::from_vars(|name| match name {
    ///     "OPENAI_BASE_URL" => Some("http://localhost:11434/v1/".to_owned()),
    ///     _ => None,
    /// });
    /// assert_eq!(settings.base_url(), "http://localhost:11434/v1");
    /// assert!(!settings.has_api_key());
    /// ```
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut settings =
            Self::new(var(P::BASE_URL_ENV).unwrap_or_else(|| P::DEFAULT_BASE_URL.to_owned()));
        settings.api_key = var(P::API_KEY_ENV);
        settings.env_model = var(P::MODEL_ENV);
        settings
    }

    /// Uses `key` as the API key (OpenAI: sent as `Authorization: Bearer KEY`; Anthropic: as
    /// `x-api-key`).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The model used in modes without a `defaultModelId` (the CLI's `--model PROVIDER/MODEL`);
    /// it wins over the model variable (`OPENAI_MODEL`, `ANTHROPIC_MODEL`). Takes `MODEL` or
    /// `PROVIDER/MODEL`.
    pub fn default_model(mut self, model: impl Into<String>) -> Self {
        let model = model.into();
        let model = match model
            .strip_prefix(P::NAME)
            .and_then(|m| m.strip_prefix('/'))
        {
            Some(rest) => rest.to_owned(),
            None => model,
        };
        self.default_model = Some(model);
        self
    }

    /// How long to wait for the connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long to wait for the next bytes of a response (default 300 s).
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// How long one model call may take in all, retries and streaming included (default 600 s):
    /// a server that keeps sending a little at a time cannot hold a run for ever. Past it the
    /// call fails with [`crate::model::ModelErrorKind::Transport`].
    pub fn reply_timeout(mut self, timeout: Duration) -> Self {
        self.reply_timeout = timeout;
        self
    }

    /// The largest reply taken, in bytes of text and tool calls' ids, names and arguments
    /// together (default 8 MiB); one event of the stream larger than that (its JSON, escapes
    /// included) is refused too. Either fails with [`crate::model::ModelErrorKind::MalformedResponse`]
    /// as soon as it passes the bound, while it arrives.
    pub fn max_reply_bytes(mut self, bytes: usize) -> Self {
        self.max_reply_bytes = bytes;
        self
    }

    /// How failed requests are retried (default [`RetryPolicy::default`]; tests use short
    /// waits, [`RetryPolicy::none`] turns retries off).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retries = policy;
        self
    }

    /// The retry policy in use.
    pub fn retries(&self) -> &RetryPolicy {
        &self.retries
    }

    /// The base URL requests go to, without a trailing slash.
    pub fn base_url(&self) -> &str {
        self.base_url.trim_end_matches('/')
    }

    /// Whether an API key is set.
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// Picks the model for a call in a mode whose `defaultModelId` is `mode_model`: that model
    /// when it names this provider (`PROVIDER/MODEL`, or a bare `MODEL`), else the default
    /// model, else the model variable (`OPENAI_MODEL`, `ANTHROPIC_MODEL`).
    ///
    /// # Errors
    /// A [`ModelError`] when the mode names another provider's model, or when no model is
    /// named anywhere.
    ///
    /// # Examples
    #[cfg_attr(feature = "openai", doc = "```")]
    #[cfg_attr(not(feature = "openai"), doc = "```ignore")]
    /// use agent_controller::model::openai::OpenAiSettings;
    /// let settings = OpenAiSettings::new("http://localhost:8080/v1").default_model("openai/qwen3");
    /// assert_eq!(settings.resolve_model(Some("openai/gpt-4.1")).unwrap(), "gpt-4.1");
    /// assert_eq!(settings.resolve_model(None).unwrap(), "qwen3");
    /// assert!(settings.resolve_model(Some("anthropic/claude")).is_err());
    /// ```
    pub fn resolve_model(&self, mode_model: Option<&str>) -> Result<String, ModelError> {
        let name = P::NAME;
        if let Some(id) = mode_model.map(str::trim).filter(|id| !id.is_empty()) {
            return match id.split_once('/') {
                Some((provider, model)) if provider == name && !model.is_empty() => {
                    Ok(model.to_owned())
                }
                Some((provider, _)) => Err(ModelError::new(format!(
                    "the mode's defaultModelId `{id}` names provider `{provider}`, but this run uses the `{name}` provider: use `{name}/MODEL`"
                ))),
                None => Ok(id.to_owned()),
            };
        }
        self.default_model
            .clone()
            .or_else(|| self.env_model.clone())
            .ok_or_else(|| {
                ModelError::new(format!(
                    "no model to call: set defaultModelId = \"{name}/MODEL\" in the mode, pass --model {name}/MODEL, or set {}",
                    P::MODEL_ENV
                ))
            })
    }

    /// The HTTP client these settings describe ([`client`]).
    ///
    /// # Errors
    /// A [`ModelError`] of kind [`ModelErrorKind::Authentication`] when no API key is set for
    /// the provider's own endpoint (a server at another base URL may go without one), or one
    /// when the client cannot be built.
    pub(crate) fn client(&self) -> Result<reqwest::Client, ModelError> {
        if self.api_key.is_none() && self.base_url() == P::DEFAULT_BASE_URL {
            return Err(ModelError::new(format!(
                "{} is not set: {}",
                P::API_KEY_ENV,
                P::MISSING_KEY_HINT
            ))
            .with_kind(ModelErrorKind::Authentication));
        }
        client(self.connect_timeout, self.read_timeout).map_err(ModelError::new)
    }

    /// An error of `kind` from this provider: `PROVIDER: message`.
    pub(crate) fn error(&self, kind: ModelErrorKind, message: impl fmt::Display) -> ModelError {
        ModelError::new(format!("{}: {message}", P::NAME)).with_kind(kind)
    }

    /// A transport error of a request to this provider ([`transport_message`]), keeping its
    /// source.
    pub(crate) fn transport_error(&self, error: reqwest::Error) -> ModelError {
        let message = transport_message(self.base_url(), P::BASE_URL_ENV, &error);
        self.error(ModelErrorKind::Transport, message)
            .with_source(error)
    }
}

/// A tool call being put together from a stream's deltas, in either provider.
#[derive(Debug, Default)]
pub(crate) struct PartialCall {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
    /// Anthropic's `input` of `content_block_start` (used when no delta follows).
    pub(crate) input: Option<serde_json::Value>,
}

impl PartialCall {
    /// The call, number `index` of its reply. Its arguments are parsed by the controller's
    /// rules (`tool::args`): arguments that are not JSON stay a raw string, and so do arguments
    /// the controller refuses (too deep, duplicate member names, unsafe integers); the tool
    /// reports the bad input to the model as an error result, and the model can try again.
    /// Without arguments: `input` when it is an object, else `{}`. A call without an id gets
    /// `{id_prefix}{index}`.
    pub(crate) fn finish(self, index: impl fmt::Display, id_prefix: &str) -> crate::tool::ToolCall {
        let arguments = self.arguments.trim();
        let args = if arguments.is_empty() {
            self.input
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| serde_json::Value::Object(serde_json::Map::new()))
        } else {
            crate::tool::args::parse(arguments)
                .unwrap_or_else(|_| serde_json::Value::String(self.arguments.clone()))
        };
        crate::tool::ToolCall {
            id: if self.id.is_empty() {
                format!("{id_prefix}{index}")
            } else {
                self.id
            },
            name: self.name,
            args,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_statuses_a_retry_can_fix_are_retried() {
        for status in [408, 429, 502, 503, 504, 529] {
            assert!(retryable_status(
                StatusCode::from_u16(status).expect("status")
            ));
        }
        for status in [400, 401, 403, 404, 409, 422, 500, 501, 505, 599, 200, 302] {
            assert!(
                !retryable_status(StatusCode::from_u16(status).expect("status")),
                "{status}"
            );
        }
    }

    #[test]
    fn waits_double_up_to_the_cap_and_stop_at_the_attempt_count() {
        let policy = RetryPolicy::default()
            .max_attempts(5)
            .backoff(Duration::from_millis(100), Duration::from_millis(300));
        let waits: Vec<_> = (1..=5)
            .map(|attempt| policy.wait(attempt, None, Duration::ZERO))
            .collect();
        let ms = |ms| Some(Duration::from_millis(ms));
        assert_eq!(waits, [ms(100), ms(200), ms(300), ms(300), None]);
        assert_eq!(RetryPolicy::none().wait(1, None, Duration::ZERO), None);
        assert_eq!(RetryPolicy::default().max_attempts(0).attempts(), 1);
        // A cap below the first wait is raised to it.
        let policy = RetryPolicy::default().backoff(Duration::from_millis(50), Duration::ZERO);
        assert_eq!(policy.wait(2, None, Duration::ZERO), ms(50));
    }

    #[test]
    fn retry_after_is_honoured_capped_and_bounded_by_the_total_time() {
        let policy = RetryPolicy::default()
            .max_retry_after(Duration::from_secs(5))
            .max_elapsed(Duration::from_secs(10));
        let secs = Duration::from_secs;
        assert_eq!(policy.wait(1, Some(secs(2)), secs(0)), Some(secs(2)));
        assert_eq!(policy.wait(1, Some(secs(3600)), secs(0)), Some(secs(5)));
        assert_eq!(policy.wait(1, Some(secs(3)), secs(8)), None, "past 10 s");
    }

    #[test]
    fn retry_after_reads_delta_seconds_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, " 7 ".parse().expect("value"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("value"),
        );
        assert_eq!(retry_after(&headers), None);
    }
}
