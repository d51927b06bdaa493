//! What the HTTP providers share (features `openai`, `anthropic`): which failed requests are sent
//! again, how often and how long apart ([`RetryPolicy`]), the loop that applies it to a request,
//! and the HTTP client with its timeouts.
//!
//! A retry is worth it only where the same request can succeed later: a timeout (408), a rate
//! limit (429), a gateway or an overloaded server (502, 503, 504, and Anthropic's 529), a
//! connection that could not be made, was reset or timed out. Everything else fails the same way
//! every time (a 400 for a bad request, a 401 for a bad key, a 500 for a chat template that
//! refuses the conversation), so it is reported at once.

use std::future::Future;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Request, Response, StatusCode};

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
