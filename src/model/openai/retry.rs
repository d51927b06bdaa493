//! The HTTP transport under `async-openai`'s client: it applies the shared [`RetryPolicy`]
//! ([`crate::model::http`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use reqwest::Response;

use crate::model::http::{self, RetryPolicy};

/// The HTTP transport under `async-openai`'s client: sends each request with `reqwest` and
/// retries it as the [`RetryPolicy`] says. It replaces `async-openai`'s own retry layer, which
/// retries every 5xx.
#[derive(Clone)]
pub(super) struct RetryingTransport {
    http: reqwest::Client,
    policy: RetryPolicy,
}

impl RetryingTransport {
    pub(super) fn new(http: reqwest::Client, policy: RetryPolicy) -> Self {
        Self { http, policy }
    }

    /// Sends the request until it succeeds, fails in a way a retry cannot fix, or the policy is
    /// used up ([`http::send`]).
    async fn send(self, request: HttpRequestFactory) -> Result<Response, OpenAIError> {
        http::send(&self.http, &self.policy, || request.build()).await
    }
}

impl tower_service::Service<HttpRequestFactory> for RetryingTransport {
    type Response = Response;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<Response, OpenAIError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), OpenAIError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: HttpRequestFactory) -> Self::Future {
        Box::pin(self.clone().send(request))
    }
}
