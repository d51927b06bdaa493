//! The routes of `serve` (JSON, camelCase): each takes the request apart, calls the library, and
//! answers with what it returned; the rules are the library's. A path id that is no id is 404
//! before anything is read; a body that is not JSON, or not what the route takes, is 422 with
//! the reason; a body over the bound is 413.

use std::path::PathBuf;
use std::sync::Arc;

use agent_controller::allowance::Allowance;
use agent_controller::plan_report::PlanReport;
use agent_controller::session::{SessionErrorKind, SessionHandle};
use agent_controller::store::{
    PendingCursor, PendingEntry, ShownPending, UnreadableRecord, check_session_id,
};
use agent_controller::{Decision, SessionError};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::page::WithShown;
use super::{BODY_LIMIT, BODY_TIMEOUT, Server};

/// The most pending decisions one `GET /v1/pending` answers with.
const MAX_PAGE: usize = 1000;

/// The page size of `GET /v1/pending` without `limit`.
const DEFAULT_PAGE: usize = 100;

/// Every route, the token checked on all but `GET /healthz` and the page ([`super::page`]).
pub(crate) fn router(server: Arc<Server>) -> Router {
    let api = Router::new()
        .route("/v1/pending", get(pending))
        .route("/v1/sessions", post(start_session))
        .route("/v1/sessions/{session_id}", get(session))
        .route("/v1/sessions/{session_id}/messages", post(message))
        .route("/v1/sessions/{session_id}/cancel", post(cancel))
        .route(
            "/v1/sessions/{session_id}/decisions/{decision_id}",
            post(decide),
        )
        .route("/v1/sessions/{session_id}/events", get(session_events))
        .route("/v1/events", get(events))
        .route("/v1/openapi.json", get(openapi))
        // Inside the token check: a request without a token is answered before its body is
        // read.
        .route_layer(middleware::from_fn(body_in_time))
        .route_layer(middleware::from_fn_with_state(server.clone(), authorize));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .merge(super::page::routes())
        .merge(api)
        .fallback(|| async { failure(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        .with_state(server)
}

/// Who made the request: the name of the token's holder, if it has one.
#[derive(Clone)]
struct Caller(Option<String>);

/// 401 without a token of the server's, before anything is read.
async fn authorize(
    State(server): State<Arc<Server>>,
    mut request: Request,
    next: Next,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match server.tokens.holder(header) {
        Some(name) => {
            let caller = Caller(name.map(str::to_owned));
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        None => {
            let mut response = failure(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "send `Authorization: Bearer TOKEN` with a token of this server",
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            response
        }
    }
}

/// Reads a request's body whole before the route does, within [`BODY_TIMEOUT`]: a client that
/// sends its body slower than that (`Content-Length: 1000`, then a byte a minute) is answered
/// 408 and its connection closed, instead of holding the connection and a task for ever. A
/// request without a body (an event stream's `GET`) passes at once: a stream is never timed.
/// A body over the bound is 413, as the route's own read says it.
async fn body_in_time(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    // The same parts, so the read keeps the router's body limit.
    let whole = Bytes::from_request(Request::from_parts(parts.clone(), body), &());
    match tokio::time::timeout(BODY_TIMEOUT, whole).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Ok(Err(rejection)) => rejection.into_response(),
        Err(_) => {
            let mut response = failure(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                &format!(
                    "the request's body did not all come within {} seconds",
                    BODY_TIMEOUT.as_secs()
                ),
            );
            response.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            response
        }
    }
}

/// An error answer: `{"error": {"kind": ..., "message": ...}}`.
fn failure(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({ "error": { "kind": kind, "message": message } });
    (status, axum::Json(body)).into_response()
}

/// A session error as its answer: the status its kind calls for.
fn refused(error: &SessionError) -> Response {
    let status = match error.kind() {
        SessionErrorKind::NotFound => StatusCode::NOT_FOUND,
        SessionErrorKind::InvalidInput => StatusCode::UNPROCESSABLE_ENTITY,
        SessionErrorKind::AlreadyDecided
        | SessionErrorKind::Expired
        | SessionErrorKind::Mismatch
        | SessionErrorKind::WrongState
        | SessionErrorKind::Conflict
        | SessionErrorKind::Workspace => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let body = json!({ "error": error });
    (status, axum::Json(body)).into_response()
}

/// 404 for a path id that is no id (nothing is read).
fn no_such(what: &str) -> Response {
    failure(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("no such {what}"),
    )
}

/// Whether `id` can be a session id ([`check_session_id`]).
fn is_session_id(id: &str) -> bool {
    check_session_id(id).is_ok()
}

/// Whether `id` can be a decision id: what the controller gives out, `decision_N`, or a
/// subagent's decision id (`...` of ASCII letters, digits, `_`, `-`, `.`, `:`), at most 200.
fn is_decision_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
}

/// A JSON body, or why it is not one (answered 422, [`unprocessable`]).
fn json_body(body: &Bytes) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))
}

/// A body of type `T`, or why not (answered 422, [`unprocessable`]).
fn typed_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    let value = json_body(body)?;
    serde_json::from_value(value).map_err(|e| format!("the body is not what this route takes: {e}"))
}

/// 422 saying why.
fn unprocessable(why: &str) -> Response {
    failure(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", why)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// `GET /v1/pending`: every pending decision of the store, oldest first, as `pending --json`
/// lists each, a page at a time (`limit`, `cursor`; `nextCursor` while more follow), and the
/// records that cannot be read which the page met (`unreadable`, as `pending --json` says them).
async fn pending(
    State(server): State<Arc<Server>>,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return failure(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            "the query takes `limit` (1 to 1000) and `cursor`",
        );
    };
    let limit = query.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return failure(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            "`limit` is 1 to 1000",
        );
    }
    let after = match query.cursor.as_deref().map(str::parse::<PendingCursor>) {
        None => None,
        Some(Ok(cursor)) => Some(cursor),
        Some(Err(_)) => {
            return failure(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_input",
                "`cursor` is not one this server gave",
            );
        }
    };
    let controller = match server.controller(&server.root) {
        Ok(controller) => controller,
        Err(e) => return refused(&e),
    };
    let page = match controller.pending_entries_page(after.as_ref(), limit).await {
        Ok(page) => page,
        Err(e) => return refused(&e),
    };
    for unread in &page.unread_allowances {
        warn_unread_allowances(&unread.session_id, &unread.reason);
    }
    for record in &page.unreadable {
        crate::cli::pending::warn_unreadable(
            &record.session_id,
            Some(&record.location),
            &record.reason,
        );
    }
    let body = PendingBody {
        pending: page
            .pending
            .iter()
            .map(|entry| WithShown {
                item: entry,
                shown: entry.summary.shown(),
            })
            .collect(),
        unreadable: page
            .unreadable
            .iter()
            .map(|record| WithShown {
                item: record,
                shown: record.shown(),
            })
            .collect(),
        next_cursor: page.next_cursor.as_ref().map(ToString::to_string),
    };
    axum::Json(body).into_response()
}

/// `GET /v1/pending`'s answer: the page's entries, the records that cannot be read (as
/// `pending --json` says them: never dropped in silence), and the next page's cursor.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PendingBody<'a> {
    pending: Vec<WithShown<'a, PendingEntry, ShownPending>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unreadable: Vec<WithShown<'a, UnreadableRecord, UnreadableRecord>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// `POST /v1/sessions/{sessionId}/decisions/{decisionId}`: the decision JSON `decide --json`
/// takes, an approval pinned to what it approves (`sha256`, [`Decision::check_pinned`]); 200
/// with the decision once saved ([`agent_controller::session::DecisionTaken`]), the run
/// carried on in the background.
async fn decide(
    State(server): State<Arc<Server>>,
    Path((session_id, decision_id)): Path<(String, String)>,
    axum::Extension(caller): axum::Extension<Caller>,
    body: Bytes,
) -> Response {
    if !is_session_id(&session_id) {
        return no_such("session");
    }
    if !is_decision_id(&decision_id) {
        return no_such("decision");
    }
    let mut data = match json_body(&body) {
        Ok(data) => data,
        Err(why) => return unprocessable(&why),
    };
    // Over HTTP who decided is the token's name, never what the body claims: a named token's
    // name replaces it (below), and an unnamed token gives none, so one token cannot approve
    // twice under two names and meet a quorum alone.
    if caller.0.is_none()
        && let Some(fields) = data.as_object_mut()
    {
        fields.remove("decidedBy");
    }
    // A person approves what the page showed them, never whatever waits now (a plan revised
    // since). What is no decision object (a bare answer) is read, or refused, below.
    if let Ok(decision) = Decision::from_json(&data)
        && let Err(e) = decision.check_pinned()
    {
        return refused(&e);
    }
    let handle = match server.session(&session_id).await {
        Ok(handle) => handle,
        Err(e) => return refused(&e),
    };
    match handle
        .decide_json_via(
            &decision_id,
            &data,
            caller.0.as_deref(),
            agent_controller::quorum::Via::Http,
        )
        .await
    {
        // The run goes on in the session's task; the handle stops it on shutdown.
        Ok((taken, _run)) => axum::Json(taken).into_response(),
        Err(e) => refused(&e),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewSession {
    mode_id: Option<String>,
    message: String,
    workspace: Option<PathBuf>,
}

/// `POST /v1/sessions`: starts a session (`modeId` optional, `workspace` optional and under
/// `--workspace`) and its first run, in the background; 201 with the session.
async fn start_session(State(server): State<Arc<Server>>, body: Bytes) -> Response {
    let new: NewSession = match typed_body(&body) {
        Ok(new) => new,
        Err(why) => return unprocessable(&why),
    };
    let workspace = match &new.workspace {
        None => server.root.clone(),
        Some(dir) => match confined(&server.root, dir) {
            Some(dir) => dir,
            None => {
                return failure(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_input",
                    "`workspace` must be an existing directory under the server's --workspace",
                );
            }
        },
    };
    let controller = match server.controller(&workspace) {
        Ok(controller) => controller,
        Err(e) => return refused(&e),
    };
    // The model the session runs with, recorded as `run --model` records it: `decide`,
    // `continue` and this server carry the session on with it.
    let mut options = agent_controller::SessionOptions::new()
        .metadata(crate::cli::setup::model_metadata(server.model_spec()));
    if let Some(mode) = &new.mode_id {
        options = options.mode(mode.clone());
    }
    let session = match controller.start_session(options).await {
        Ok(session) => session,
        // A mode the config lacks is a body this route does not take.
        Err(e) if e.kind() == SessionErrorKind::NotFound => return unprocessable(&e.to_string()),
        Err(e) => return refused(&e),
    };
    let handle = SessionHandle::new(session);
    server.keep(&handle).await;
    // The run goes on in the session's task; the handle stops it on shutdown.
    if let Err(e) = handle.send_message(new.message).await {
        return refused(&e);
    }
    (StatusCode::CREATED, axum::Json(handle.view())).into_response()
}

/// `dir` (relative to `root`, or absolute) when it is an existing directory under `root`.
fn confined(root: &std::path::Path, dir: &std::path::Path) -> Option<PathBuf> {
    let dir = root.join(dir).canonicalize().ok()?;
    (dir.starts_with(root) && dir.is_dir()).then_some(dir)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMessage {
    message: String,
}

/// `POST /v1/sessions/{id}/messages`: sends a message, starting a run in the background; 202
/// with the session.
async fn message(
    State(server): State<Arc<Server>>,
    Path(session_id): Path<String>,
    body: Bytes,
) -> Response {
    if !is_session_id(&session_id) {
        return no_such("session");
    }
    let new: NewMessage = match typed_body(&body) {
        Ok(new) => new,
        Err(why) => return unprocessable(&why),
    };
    let handle = match server.session(&session_id).await {
        Ok(handle) => handle,
        Err(e) => return refused(&e),
    };
    match handle.send_message(new.message).await {
        // The run goes on in the session's task; the handle stops it on shutdown.
        Ok(_run) => (StatusCode::ACCEPTED, axum::Json(handle.view())).into_response(),
        Err(e) => refused(&e),
    }
}

/// `GET /v1/sessions/{id}`: the session's mode, latest run and what waits, the allowances in
/// force in its mode and the report of its last run of an approved plan (`planReport`, absent
/// before one ended).
async fn session(State(server): State<Arc<Server>>, Path(session_id): Path<String>) -> Response {
    if !is_session_id(&session_id) {
        return no_such("session");
    }
    let handle = match server.session(&session_id).await {
        Ok(handle) => handle,
        Err(e) => return refused(&e),
    };
    let view = match handle.reload().await {
        Ok(view) => view,
        Err(e) => return refused(&e),
    };
    let mut body = json!(view);
    let (in_force, report) = stored_extras(&server, &session_id).await;
    body["allowancesInForce"] = json!(in_force);
    if let Some(report) = report {
        body["planReport"] = json!(report);
    }
    axum::Json(body).into_response()
}

/// What the record of stored session `id` adds to its view: the allowances in force in its
/// mode now ([`agent_controller::session::allowances_in_force`]) and the report of its last
/// run of an approved plan (the record's `planReport`). Allowances that cannot be read are
/// none, with a warning on stderr; a record that cannot be read gives neither.
async fn stored_extras(server: &Server, id: &str) -> (Vec<Allowance>, Option<PlanReport>) {
    let store = &*server.setup.store;
    let warn = |e: &dyn std::fmt::Display| warn_unread_allowances(id, &e.to_string());
    match store.load(id).await {
        Ok(Some(record)) => {
            let in_force = agent_controller::session::allowances_in_force(store, &record)
                .await
                .unwrap_or_else(|e| {
                    warn(&e);
                    Vec::new()
                });
            (in_force, record.plan_report)
        }
        Ok(None) => (Vec::new(), None),
        Err(e) => {
            warn(&e);
            (Vec::new(), None)
        }
    }
}

/// The `warning:` line of a session whose allowances cannot be read.
fn warn_unread_allowances(id: &str, reason: &str) {
    note!(
        "warning: serve: the allowances of session {} cannot be read, not listed: {}",
        agent_controller::display::neutralize_line(id),
        agent_controller::display::neutralize_line(reason)
    );
}

/// `POST /v1/sessions/{id}/cancel`: cancels the run in progress (or the next one).
async fn cancel(State(server): State<Arc<Server>>, Path(session_id): Path<String>) -> Response {
    if !is_session_id(&session_id) {
        return no_such("session");
    }
    match server.session(&session_id).await {
        Ok(handle) => axum::Json(json!({ "wasRunning": handle.cancel() })).into_response(),
        Err(e) => refused(&e),
    }
}

/// The id after which a reconnecting client missed events (`Last-Event-ID`).
fn last_event_id(headers: &HeaderMap) -> Option<u64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// `GET /v1/events`: every event, as Server-Sent Events.
async fn events(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    let stream = server.feed.stream(last_event_id(&headers), None);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `GET /v1/sessions/{id}/events`: the events of one session, as Server-Sent Events; 404 for
/// a session no store holds, as `GET /v1/sessions/{id}` is.
async fn session_events(
    State(server): State<Arc<Server>>,
    Path(session_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !is_session_id(&session_id) {
        return no_such("session");
    }
    if let Err(e) = server.known(&session_id).await {
        return refused(&e);
    }
    let stream = server
        .feed
        .stream(last_event_id(&headers), Some(session_id));
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `GET /v1/openapi.json`: the API as an OpenAPI document.
async fn openapi() -> Response {
    axum::Json(super::openapi::document()).into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::future::Future;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Poll;
    use std::time::Duration;

    use agent_controller::event::RunState;
    use agent_controller::model::scripted::ScriptedModel;
    use agent_controller::model::{ModelError, ModelRequest, ModelResponse};
    use agent_controller::{LanguageModel, MemoryStore, SessionStore};

    use super::super::{Setup, auth, feed};
    use super::*;

    #[test]
    fn ids_that_are_no_ids_are_refused() {
        assert!(is_decision_id("decision_12"));
        assert!(!is_decision_id("../x"));
        assert!(!is_decision_id(""));
        assert!(!is_session_id("a/b"));
    }

    const PLAN_BUILD: &str = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n";

    /// The scripted model, whose calls wait once it is `armed`: each says it was called
    /// (`called`) and never answers (a run in its model call until it is cancelled).
    struct Gated {
        inner: ScriptedModel,
        armed: AtomicBool,
        called: tokio::sync::Notify,
    }

    impl Gated {
        /// The scripted model, not armed yet.
        fn new() -> Arc<Self> {
            Arc::new(Self {
                inner: ScriptedModel::new(),
                armed: AtomicBool::new(false),
                called: tokio::sync::Notify::new(),
            })
        }
    }

    #[agent_controller::async_trait]
    impl LanguageModel for Gated {
        async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
            if self.armed.load(Ordering::Acquire) {
                self.called.notify_one();
                std::future::pending::<()>().await;
            }
            self.inner.generate(request).await
        }
    }

    /// A server over a memory store in a workspace of its own, its model `model`.
    fn server(dir: &std::path::Path, model: Arc<Gated>) -> (Arc<Server>, Arc<dyn SessionStore>) {
        let root = dir.canonicalize().expect("canonical");
        let config = root.join("modes.toml");
        std::fs::write(&config, PLAN_BUILD).expect("config");
        let (graph, tools) = crate::cli::setup::load(&config).expect("loads");
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let setup = Setup {
            graph,
            tools,
            model,
            model_spec: "scripted".parse().expect("a spec"),
            config,
            store: store.clone(),
            lease: Duration::from_secs(60),
        };
        let server = Server {
            setup,
            root,
            controllers: Mutex::new(HashMap::new()),
            sessions: tokio::sync::Mutex::new(HashMap::new()),
            tokens: auth::Tokens::from_env().expect("tokens"),
            feed: feed::Feed::new(),
        };
        (Arc::new(server), store)
    }

    async fn json_of(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    /// Issue 39: the server keeps a session's handle only while something holds it (a
    /// request, a run in progress): with many sessions touched one after the other, the
    /// handles kept stay few, and a session let go is served again from the store.
    #[tokio::test]
    async fn the_handles_kept_stay_few_however_many_sessions_are_touched() {
        let dir = tempfile::tempdir().expect("a workspace");
        let model = Gated::new();
        let (server, _store) = server(dir.path(), model);
        let mut ids = Vec::new();
        for n in 0..40 {
            let body = json!({ "modeId": "plan", "message": format!("Plan {n}") }).to_string();
            let started = start_session(State(server.clone()), Bytes::from(body)).await;
            assert_eq!(started.status(), StatusCode::CREATED);
            let id = json_of(started).await["sessionId"]
                .as_str()
                .expect("an id")
                .to_owned();
            // Its first run ends (a plan waits), and the request that looked is done.
            let looked = super::session(State(server.clone()), Path(id.clone())).await;
            assert_eq!(looked.status(), StatusCode::OK);
            drop(server.session(&id).await.expect("served").lock().await);
            ids.push(id);
        }
        let kept = server.sessions.lock().await.len();
        assert!(kept <= 2, "{kept} handles kept for 40 sessions");
        // The first, let go long ago, is served again from the store, plan waiting.
        let again = super::session(State(server.clone()), Path(ids[0].clone())).await;
        assert_eq!(again.status(), StatusCode::OK);
        let view = json_of(again).await;
        assert_eq!(view["pending"].as_array().map(Vec::len), Some(1), "{view}");
    }

    /// Issue 39: a client that hangs up after its decision is saved, before the handler takes
    /// the run the decision carries on (axum drops the handler's future): on shutdown that run
    /// is still cancelled and waited for, and saved `aborted`, not left going untracked.
    #[tokio::test]
    async fn a_run_whose_client_hung_up_after_the_save_is_stopped_on_shutdown() {
        let dir = tempfile::tempdir().expect("a workspace");
        let model = Gated::new();
        let (server, store) = server(dir.path(), model.clone());
        let body = json!({ "modeId": "plan", "message": "Add dark mode" }).to_string();
        let started = start_session(State(server.clone()), Bytes::from(body)).await;
        assert_eq!(started.status(), StatusCode::CREATED);
        let id = json_of(started).await["sessionId"]
            .as_str()
            .expect("an id")
            .to_owned();
        let handle = server.session(&id).await.expect("kept");
        drop(handle.lock().await); // the first run has ended: its plan waits
        let waiting = handle.view().pending;
        assert_eq!(waiting.len(), 1, "{waiting:?}");
        let decision_id = waiting[0].decision_id.clone();
        let decision = json!({ "action": "approved", "sha256": waiting[0].sha256 }).to_string();

        model.armed.store(true, Ordering::Release);
        let mut request = Box::pin(decide(
            State(server.clone()),
            Path((id.clone(), decision_id)),
            axum::Extension(Caller(None)),
            Bytes::from(decision),
        ));
        // Polled one step at a time until the decision is saved, and never after: the handler
        // is where a hung-up client leaves it, past the save, before it took the run.
        let saved = |store: Arc<dyn SessionStore>, id: String| async move {
            let record = store.load(&id).await.expect("loads").expect("stored");
            record.mode_id == "build"
        };
        let mut polls = 0;
        while !saved(store.clone(), id.clone()).await {
            let step = std::future::poll_fn(|cx| Poll::Ready(request.as_mut().poll(cx))).await;
            assert!(step.is_pending(), "answered before the decision was saved");
            tokio::time::sleep(Duration::from_millis(5)).await;
            polls += 1;
            assert!(polls < 2_000, "the decision is never saved");
        }
        tokio::time::timeout(Duration::from_secs(30), model.called.notified())
            .await
            .expect("the build run calls the model");
        drop(request);

        tokio::time::timeout(Duration::from_secs(30), server.stop_runs())
            .await
            .expect("shutdown ends");
        let record = store.load(&id).await.expect("loads").expect("stored");
        let run = record.run.expect("a run");
        assert_eq!(
            run.state,
            RunState::Aborted,
            "the run the decision carried on"
        );
        assert_eq!(record.mode_id, "build");
    }
}
