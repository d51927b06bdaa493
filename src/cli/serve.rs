//! `serve`: an HTTP API over a session store, for deciding away from the terminal (a browser, a
//! phone, a chat relay): what waits, decisions, sessions and their events as Server-Sent Events.
//! A host over the public library ([`agent_controller::session::SessionHandle`],
//! [`agent_controller::AgentController::events`], [`agent_controller::store::PendingWatch`]):
//! every rule is the library's; this file sets up, [`api`] answers requests, [`auth`] checks
//! tokens, [`feed`] keeps the events for SSE, [`notify`] sends the webhooks (`--notify`),
//! [`openapi`] describes the API, [`page`] is the approval page, [`write_bound`] cuts off a
//! client that stops reading.

mod api;
mod auth;
mod feed;
mod notify;
mod openapi;
mod page;
mod write_bound;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_controller::model::{ModelSpec, SpecChooser};
use agent_controller::session::SessionHandle;
use agent_controller::store::{PendingWatch, SessionStore, open_store};
use agent_controller::{AgentController, LanguageModel, ModeGraph, SessionError, ToolRegistry};

use crate::cli::args::{DEFAULT_CONFIG, ServeArgs};
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{MODEL_KEY, check_workspace, load};

/// The most bytes a request body may have: four times the largest plan, so an edited plan
/// always fits.
pub(crate) const BODY_LIMIT: usize =
    4 * agent_controller::tool::submit_plan::MAX_PLAN_BYTES as usize;

/// How often the store is looked at for what other processes changed (a `decide` on the
/// command line, another `serve`).
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// How long a shutdown waits for the runs in progress to stop after they are cancelled.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// `serve`: binds, prints `listening on http://ADDR` as its first stdout line, and answers
/// until SIGTERM or Ctrl-C.
pub(crate) fn serve(args: ServeArgs) -> Outcome {
    let tokens = auth::Tokens::from_env().map_err(Failure::invalid)?;
    if !args.bind.ip().is_loopback() && tokens.generated() {
        return Err(Failure::invalid(format!(
            "--bind {} is not a loopback address: set AGENT_CONTROLLER_TOKEN (or AGENT_CONTROLLER_TOKENS) first; the token travels in clear over plain HTTP, so put a reverse proxy with TLS in front (see the guide's page on serve)",
            args.bind
        )));
    }
    let workspace = args.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    check_workspace(&workspace)?;
    let workspace = workspace.canonicalize().map_err(Failure::runtime)?;
    let config = match &args.config {
        Some(path) => path.clone(),
        None => workspace.join(DEFAULT_CONFIG),
    };
    let (graph, tools) = load(&config)?;
    let model = open_model(&args.model).map_err(Failure::invalid)?;
    let store = open_store(&args.store).map_err(Failure::runtime)?;
    let setup = Setup {
        graph,
        tools,
        model,
        model_spec: args.model.clone(),
        config: std::path::absolute(&config).unwrap_or(config),
        store: store.clone(),
        lease: args.lease,
    };
    let controller = setup.controller(&workspace, &setup.config, setup.model.clone())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Failure::runtime)?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .map_err(|e| Failure::runtime(format!("cannot bind {}: {e}", args.bind)))?;
        let bound = listener.local_addr().map_err(Failure::runtime)?;
        let feed = feed::Feed::new();
        feed.follow(controller.events());
        let watch = PendingWatch::new(store.clone(), WATCH_EVERY)
            .await
            .map_err(Failure::runtime)?;
        let base = match &args.public_url {
            Some(url) => url.clone(),
            None => format!("http://{bound}"),
        };
        let notifier =
            notify::Notifier::start(&args.notify, &base, store.clone()).map_err(Failure::invalid)?;
        feed.watch(watch, move |change| {
            if let Some(notifier) = &notifier {
                notifier.notify(change);
            }
        });
        let state_config = setup.config.clone();
        let setup_model_spec = setup.model_spec.clone();
        let state = Arc::new(Server {
            setup,
            root: workspace.clone(),
            controllers: Mutex::new(HashMap::from([(
                (
                    workspace,
                    state_config.clone(),
                    setup_model_spec.to_string(),
                ),
                controller,
            )])),
            sessions: tokio::sync::Mutex::new(HashMap::new()),
            tokens,
            feed,
        });
        let app = api::router(state.clone());
        // The handlers are in place before the address is told: a SIGTERM sent as soon as the
        // line is read stops the server gracefully instead of killing it.
        let signal = shutdown_signal();
        // On the signal the event streams end too: a client following them (an open page)
        // would otherwise hold the graceful shutdown for ever.
        let closing = state.feed.clone();
        let shutdown = async move {
            signal.await;
            closing.close();
        };
        say!("listening on http://{bound}");
        let _ = std::io::stdout().flush();
        if let Some(token) = state.tokens.shown_once() {
            note!("token: {token}");
            note!("(send it as `Authorization: Bearer TOKEN`; set AGENT_CONTROLLER_TOKEN to choose your own)");
        }
        serve_connections(listener, app, shutdown).await;
        state.stop_runs().await;
        Ok(Exit::Done)
    })
}

/// How long a client may take to send a request's headers: past it the connection is closed,
/// so a client that never finishes them (slowloris, no token needed) holds no connection.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's body, whole: past it the request is answered
/// 408 and the connection closed ([`api`]), so a client that sends it a byte a minute holds no
/// connection. Four times the largest plan (the body bound) comes in this time at about 1.2
/// Mbit/s.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a write to a client may wait without the client taking a byte of it: past it the
/// connection is closed ([`write_bound::WriteBound`]), so a client that stops reading an answer
/// (an event stream) holds no connection; one that reads, however slowly, is not cut off.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `app` on each connection `listener` accepts (HTTP/1.1, each request's headers within
/// [`HEADER_TIMEOUT`], each write taken within [`WRITE_TIMEOUT`]) until `shutdown` ends; then
/// takes no new connection, closes the idle ones, and waits for the requests in progress to be
/// answered. What `axum::serve` with its graceful shutdown does, with the bounds it lacks.
async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            // Ended connections are let go as they end, so the set stays as big as the open ones.
            Some(_) = connections.join_next() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, say: wait a little, and the others go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut closed = closed.clone();
        connections.spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let stream = write_bound::WriteBound::new(stream, WRITE_TIMEOUT);
            let connection =
                builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = async { drop(closed.wait_for(|closed| *closed).await) } => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    closing.send_replace(true);
    while connections.join_next().await.is_some() {}
}

/// SIGTERM or Ctrl-C. The handlers are registered when this is called, not when the future is
/// first polled.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    async move {
        let recv = |signal: Option<tokio::signal::unix::Signal>| async move {
            match signal {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = recv(terminate) => {}
            () = recv(interrupt) => {}
        }
    }
}

/// What every controller of the server is built from: one config, its tools, the model and the
/// store; one controller per workspace (under `--workspace`).
struct Setup {
    graph: ModeGraph,
    tools: ToolRegistry,
    /// The model of `--model`: new sessions run with it, and so do stored ones that record none.
    model: Arc<dyn LanguageModel>,
    model_spec: ModelSpec,
    config: PathBuf,
    store: Arc<dyn SessionStore>,
    lease: Duration,
}

impl Setup {
    /// A controller over `workspace` under the config in file `config` (the server's own, or
    /// the one a session ran under, read again).
    /// With `model`, the session's.
    fn controller(
        &self,
        workspace: &Path,
        config: &Path,
        model: Arc<dyn LanguageModel>,
    ) -> Result<AgentController, Failure> {
        let (graph, tools) = match config == self.config {
            true => (self.graph.clone(), self.tools.clone()),
            false => load(config)?,
        };
        let mut builder = AgentController::builder(graph, model)
            .tools(tools)
            .workspace(workspace)
            .protected_path(config);
        // Every layer file: the local one beside the config too.
        for file in crate::cli::setup::config_files(config) {
            builder = builder.protected_path(file);
        }
        builder
            .managed_watch(crate::cli::setup::watch(config))
            .model_chooser(SpecChooser)
            .store(self.store.clone())
            .lease_duration(self.lease)
            .build()
            .map_err(Failure::invalid)
    }
}

/// The server's state, shared by every request.
pub(crate) struct Server {
    setup: Setup,
    /// `--workspace`, canonical: every session works in it or beneath it.
    root: PathBuf,
    /// One controller per workspace a session works in, config it runs under and model it
    /// runs with.
    controllers: Mutex<HashMap<(PathBuf, PathBuf, String), AgentController>>,
    /// The handles of the sessions in use ([`SessionHandle::in_use`]: a request holds one, a
    /// run goes on), one per session, shared by every request that asks for it meanwhile.
    /// Every run a request starts is carried on by one of them, which stops it on shutdown
    /// ([`Server::stop_runs`]). A handle no longer in use is let go when the next is kept
    /// ([`Server::keep_among`]), so the map holds about as many as are in use, however many
    /// sessions were served; a session let go is restored from the store when asked for again.
    sessions: tokio::sync::Mutex<HashMap<String, SessionHandle>>,
    tokens: auth::Tokens,
    feed: feed::Feed,
}

impl Server {
    /// The model `--model` names: new sessions run with it.
    pub(crate) fn model_spec(&self) -> &ModelSpec {
        &self.setup.model_spec
    }

    /// The controller of `workspace` (canonical, under the root) under the server's config,
    /// built on first use; its events go to the feed.
    fn controller(&self, workspace: &Path) -> Result<AgentController, SessionError> {
        self.controller_under(workspace, &self.setup.config.clone(), None)
    }

    /// The controller of `workspace` under the config in file `config`, with the model `model`
    /// names (`--model`'s when `None`), built on first use; its events go to the feed.
    /// [`SessionError::UnknownModel`] when that model cannot be opened.
    fn controller_under(
        &self,
        workspace: &Path,
        config: &Path,
        model: Option<&ModelSpec>,
    ) -> Result<AgentController, SessionError> {
        let spec = model.unwrap_or(&self.setup.model_spec);
        let mut controllers = self
            .controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = (
            workspace.to_path_buf(),
            config.to_path_buf(),
            spec.to_string(),
        );
        if let Some(controller) = controllers.get(&key) {
            return Ok(controller.clone());
        }
        let model = match *spec == self.setup.model_spec {
            true => self.setup.model.clone(),
            false => open_model(spec).map_err(|reason| SessionError::UnknownModel {
                model: spec.to_string(),
                reason,
            })?,
        };
        let controller = self
            .setup
            .controller(workspace, config, model)
            .map_err(|f| SessionError::WorkspaceGone {
                session_id: String::new(),
                path: workspace.to_path_buf(),
                reason: f.message,
            })?;
        self.feed.follow(controller.events());
        controllers.insert(key, controller.clone());
        Ok(controller)
    }

    /// The shared handle of stored session `id`: the one a request made before, else restored
    /// from the store in its recorded workspace (which must lie under the root) and under its
    /// recorded config, as `decide` restores it: the file it ran under, read again where it
    /// still is (else the server's `--config`), refused ([`SessionError::ConfigWidened`]) when
    /// that config lets the session's modes do more than the one it ran under
    /// ([`agent_controller::store::ConfigCheck`]); with the model the session records
    /// (metadata `model`, as `run --model` and this server record it), as `decide` carries a
    /// session on, else `--model`'s. A recorded model that is no model spec, or that this
    /// server cannot open, is refused ([`SessionError::UnknownModel`]).
    async fn session(&self, id: &str) -> Result<SessionHandle, SessionError> {
        let mut sessions = self.sessions.lock().await;
        if let Some(handle) = sessions.get(id) {
            return Ok(handle.clone());
        }
        let record = self
            .setup
            .store
            .load(id)
            .await?
            .ok_or_else(|| SessionError::UnknownSession(id.to_owned()))?;
        let workspace = match &record.workspace {
            Some(recorded) if recorded.path.starts_with(&self.root) => recorded.path.clone(),
            Some(recorded) => {
                return Err(SessionError::WrongWorkspace {
                    session_id: id.to_owned(),
                    recorded: recorded.path.clone(),
                    actual: self.root.clone(),
                });
            }
            None => self.root.clone(),
        };
        let config = record
            .config
            .as_ref()
            .map(|c| PathBuf::from(&c.path))
            .filter(|path| path.is_absolute() && path.is_file())
            .unwrap_or_else(|| self.setup.config.clone());
        let model = match record.metadata.get(MODEL_KEY) {
            None => None,
            Some(named) => Some(
                named
                    .as_str()
                    .and_then(|text| text.parse::<ModelSpec>().ok())
                    .ok_or_else(|| SessionError::UnknownModel {
                        model: named.to_string(),
                        reason: "the session records it as the model it ran with, and it is no model spec".to_owned(),
                    })?,
            ),
        };
        let controller = self.controller_under(&workspace, &config, model.as_ref())?;
        let check = record.config_check(controller.modes());
        if check.widens() {
            return Err(SessionError::ConfigWidened {
                session_id: id.to_owned(),
                was: record.config.map(|c| c.path).unwrap_or_default(),
                wider: check.wider(),
            });
        }
        let session = controller
            .restore_session(id, agent_controller::SessionOptions::new())
            .await?;
        let handle = SessionHandle::new(session);
        Self::keep_among(&mut sessions, &handle);
        Ok(handle)
    }

    /// Keeps `handle` for later requests.
    async fn keep(&self, handle: &SessionHandle) {
        Self::keep_among(&mut *self.sessions.lock().await, handle);
    }

    /// Keeps `handle` in `sessions`, and lets go of every other handle there that is no longer
    /// in use ([`SessionHandle::in_use`]: no request holds it, no run goes on). Under the map's
    /// lock, where handles are handed out: a handle let go is one no task holds, so every task
    /// that holds a session still shares one handle.
    fn keep_among(sessions: &mut HashMap<String, SessionHandle>, handle: &SessionHandle) {
        sessions.retain(|_, kept| kept.in_use());
        sessions.insert(handle.id().to_owned(), handle.clone());
    }

    /// Whether session `id` is one a store holds (or this server serves):
    /// [`SessionError::UnknownSession`] when not.
    async fn known(&self, id: &str) -> Result<(), SessionError> {
        if self.sessions.lock().await.contains_key(id) {
            return Ok(());
        }
        match self.setup.store.load(id).await? {
            Some(_) => Ok(()),
            None => Err(SessionError::UnknownSession(id.to_owned())),
        }
    }

    /// On shutdown: cancels every run in progress of the sessions requests touched (each ends
    /// `aborted` and is saved) and waits for them, at most [`SHUTDOWN_GRACE`]. Through each
    /// session's handle ([`SessionHandle::cancel_and_wait`]), so a run is stopped too when the
    /// request that started it was dropped before it took the run (a client that hung up after
    /// its decision was saved).
    async fn stop_runs(&self) {
        let handles: Vec<SessionHandle> = self.sessions.lock().await.values().cloned().collect();
        let mut stopping = tokio::task::JoinSet::new();
        for handle in handles {
            stopping.spawn(async move { handle.cancel_and_wait().await });
        }
        if tokio::time::timeout(SHUTDOWN_GRACE, stopping.join_all())
            .await
            .is_err()
        {
            note!(
                "warning: serve: some runs had not stopped {} s after they were cancelled; they may not be saved as aborted",
                SHUTDOWN_GRACE.as_secs()
            );
        }
    }
}

/// The model `spec` names ([`ModelSpec::open`]: for `scripted`, one with nothing scripted);
/// why not when it cannot be opened.
fn open_model(spec: &ModelSpec) -> Result<Arc<dyn LanguageModel>, String> {
    spec.open().map_err(|e| e.message().to_owned())
}
