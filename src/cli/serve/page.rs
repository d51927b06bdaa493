//! The approval page of `serve` (`GET /`, its script and style under `/assets/`): plain HTML, JS
//! and CSS compiled into the binary (`include_str!`), no build step, nothing fetched from
//! elsewhere. The page holds no data, so it needs no token: it asks for one, keeps it in
//! `sessionStorage`, and calls the API with it (`GET /v1/pending`, the events read with `fetch`,
//! the decision route). It draws every text of a decision from the entry's `shown` object, which
//! the library made ([`agent_controller::store::PendingSummary::shown`]): hidden and control
//! characters arrive as their escapes, and the script writes text with `textContent` only.
//!
//! Every answer here carries a Content-Security-Policy that allows the page's own script and
//! style and nothing else (no inline script, no other origin, no frames), `nosniff`, no
//! referrer, and no CORS header.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use super::Server;

/// The page.
const HTML: &str = include_str!("page/index.html");
/// Its script.
const JS: &str = include_str!("page/page.js");
/// Its style.
const CSS: &str = include_str!("page/page.css");

/// What the page may load and run: its own script, style and API; no inline script or style
/// attribute, no plugin, no frame around it, no form posted elsewhere.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page's routes, outside the token check (they hold no data).
pub(crate) fn routes() -> Router<Arc<Server>> {
    Router::new()
        .route(
            "/",
            get(|| async { asset(HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/assets/page.js",
            get(|| async { asset(JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/assets/page.css",
            get(|| async { asset(CSS, "text/css; charset=utf-8") }),
        )
}

/// `body` as `content_type`, with the page's security headers.
fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// What `GET /v1/pending` lists (a pending entry, an unreadable record): `item` as `pending
/// --json` prints it, and `shown`, its texts as a person must read them
/// ([`PendingSummary::shown`], [`UnreadableRecord::shown`]). Written straight to JSON, with no
/// tree built between.
///
/// [`PendingSummary::shown`]: agent_controller::store::PendingSummary::shown
/// [`UnreadableRecord::shown`]: agent_controller::store::UnreadableRecord::shown
#[derive(Serialize)]
pub(crate) struct WithShown<'a, T, S> {
    #[serde(flatten)]
    pub(crate) item: &'a T,
    pub(crate) shown: S,
}
