//! An [Agent Client Protocol](https://agentclientprotocol.com) agent over the public API:
//! editors (Zed, JetBrains IDEs, Neovim, Emacs, ...) drive sessions, modes and approvals
//! (feature `acp`; the CLI's `agent-controller acp`). The guide's [ACP page](crate::guide::acp)
//! says what an editor shows.
//!
//! A host like the terminal one: it holds no rule of its own. Each ACP session is one library
//! [`Session`] in the controller [`AcpAgent::new`]'s function builds for the
//! session's `cwd`; modes are ACP session modes and the `mode` config option; a submitted plan
//! and a tool call that waits for approval are `session/request_permission`, whose answer is a
//! [`Decision`](crate::Decision) pinned to what the request showed.
//!
//! # Examples
//! ```no_run
//! use std::sync::Arc;
//! use agent_controller::acp::AcpAgent;
//! use agent_controller::model::scripted::ScriptedModel;
//! use agent_controller::{AgentController, ToolRegistry, config};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = AcpAgent::new(|workspace: &std::path::Path| {
//!     let graph = config::load("config/modes.toml")?;
//!     let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
//!         .tools(ToolRegistry::with_workspace_tools())
//!         .workspace(workspace)
//!         .build()?;
//!     Ok(controller)
//! });
//! agent.serve_stdio().await?;
//! # Ok(())
//! # }
//! ```

mod lines;
#[cfg(feature = "mcp")]
mod mcp;
mod model;
mod options;
mod permission;
mod plan;
mod question;
mod slot;
mod turn;
mod update;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse, ContentBlock,
    EmbeddedResourceResource, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities,
    SessionConfigOption, SessionId, SessionInfo, SessionListCapabilities, SessionModeState,
    SessionResumeCapabilities, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::{Agent, Client, Lines};
use futures_util::SinkExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::acp::model::session_options;
use crate::acp::options::{MODE_OPTION, MODEL_OPTION};
use crate::acp::slot::Slot;
use crate::acp::update::{Updates, mode_state};
use crate::controller::AgentController;
use crate::session::{Session, SessionError, SessionErrorKind, SessionOptions};
use crate::store::SessionStore;

pub use agent_client_protocol::Error;

/// The most bytes one JSON-RPC message may have by default (16 MiB): a longer line is dropped
/// and answered with a parse error.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The most sessions one `session/list` answer holds by default; the rest follow behind its
/// `nextCursor` ([`AcpAgent::list_page_size`]).
pub const DEFAULT_LIST_PAGE_SIZE: usize = 100;

/// What builds the controller of a session: given the session's workspace (the `cwd` of
/// `session/new` or `session/load`), the controller whose config, model, tools and store the
/// session runs with. An error refuses the session, with the error's text.
pub type OpenController = dyn Fn(&Path) -> Result<AgentController, Box<dyn std::error::Error + Send + Sync>>
    + Send
    + Sync;

/// What prepares the controller of a session of an agent that takes the client's MCP servers
/// ([`AcpAgent::with_mcp`]): given the session's workspace, the builder of the controller the
/// session runs with (its config, model, tools and store), not built yet: the agent adds the
/// client's servers' tools and builds it. An error refuses the session, with the error's
/// text, before any server starts.
#[cfg(feature = "mcp")]
pub type OpenBuilder = dyn Fn(
        &Path,
    ) -> Result<
        crate::controller::AgentControllerBuilder,
        Box<dyn std::error::Error + Send + Sync>,
    > + Send
    + Sync;

/// How the agent builds a session's controller.
enum Open {
    /// Without the client's MCP servers: a session given some is refused.
    Plain(Arc<OpenController>),
    /// With them: the builder first, then the servers, then the controller.
    #[cfg(feature = "mcp")]
    WithMcp(Arc<OpenBuilder>),
}

/// What a session keeps as long as it lives besides its controller: the client's MCP servers,
/// which stop when it goes.
#[cfg(feature = "mcp")]
pub(crate) type SessionServers = Option<crate::tool::mcp::McpTools>;
#[cfg(not(feature = "mcp"))]
pub(crate) type SessionServers = ();

/// An ACP agent: [`AcpAgent::serve`] answers one client over a byte stream (stdio for an
/// editor) until the client goes.
pub struct AcpAgent {
    open: Open,
    load_session: bool,
    max_message_bytes: usize,
    decided_by: Arc<str>,
    /// The store `session/list` lists, and the one workspace it lists, if only one.
    list: Option<(Arc<dyn SessionStore>, Option<PathBuf>)>,
    list_page_size: usize,
}

impl std::fmt::Debug for AcpAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpAgent")
            .field("load_session", &self.load_session)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("decided_by", &self.decided_by)
            .field("list_sessions", &self.list.is_some())
            .field("list_page_size", &self.list_page_size)
            .finish_non_exhaustive()
    }
}

impl AcpAgent {
    /// An agent whose sessions run in the controllers `open` builds, one per session, for the
    /// session's workspace. Sessions are loaded (`session/load`, advertised as `loadSession`)
    /// only after [`AcpAgent::load_session`]. A session the client gives MCP servers
    /// (`mcpServers`) is refused, saying so: `AcpAgent::with_mcp` (feature `mcp`) takes them.
    pub fn new(
        open: impl Fn(&Path) -> Result<AgentController, Box<dyn std::error::Error + Send + Sync>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self::with_open(Open::Plain(Arc::new(open)))
    }

    /// An agent that takes the MCP servers the client gives a session (`mcpServers` of
    /// `session/new` and `session/load`, stdio ones: ACP has every agent take those), as
    /// editors pass the servers their user configured. For each session it calls `open` with
    /// the session's workspace for the controller's builder, then starts the servers in the
    /// workspace, all at once, adds their tools ([`AgentControllerBuilder::mcp_tools`]: named
    /// `NAME__TOOL`, gated per mode like a config's MCP tools, the guide's MCP page) and builds
    /// the controller. The servers stop when the agent's connection ends.
    ///
    /// Refused with the reason, before any server starts: an HTTP or SSE server (this agent's
    /// `mcpCapabilities` name neither), a name that is not a valid server id, a name given
    /// twice, a name the config's `[[mcpServers]]` uses (its tools are the config's), and
    /// whatever `open` refuses. A server that does not start leaves its tools out, and the
    /// session opens without them. Like a config's servers, the client's are not trusted:
    /// their tools count as tools that write.
    ///
    /// [`AgentControllerBuilder::mcp_tools`]: crate::controller::AgentControllerBuilder::mcp_tools
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use agent_controller::acp::AcpAgent;
    /// use agent_controller::model::scripted::ScriptedModel;
    /// use agent_controller::{AgentController, ToolRegistry, config};
    ///
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let agent = AcpAgent::with_mcp(|workspace| {
    ///     let graph = config::load("config/modes.toml")?;
    ///     let builder = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///         .tools(ToolRegistry::with_workspace_tools())
    ///         .workspace(workspace);
    ///     Ok(builder)
    /// });
    /// agent.serve_stdio().await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "mcp")]
    pub fn with_mcp(
        open: impl Fn(
            &Path,
        ) -> Result<
            crate::controller::AgentControllerBuilder,
            Box<dyn std::error::Error + Send + Sync>,
        > + Send
        + Sync
        + 'static,
    ) -> Self {
        Self::with_open(Open::WithMcp(Arc::new(open)))
    }

    fn with_open(open: Open) -> Self {
        Self {
            open,
            load_session: false,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            decided_by: Arc::from("acp-client"),
            list: None,
            list_page_size: DEFAULT_LIST_PAGE_SIZE,
        }
    }

    /// Whether `session/load` restores stored sessions: give `true` when the controllers have
    /// a store.
    pub fn load_session(mut self, load: bool) -> Self {
        self.load_session = load;
        self
    }

    /// Lists the sessions of `store` for `session/list` (advertised as
    /// `sessionCapabilities.list`): give the store the controllers save in. With `workspace`
    /// (a directory, canonicalized here), only that workspace's sessions are listed: an agent
    /// that opens sessions in one directory lists no other's. Sessions are listed newest
    /// first, those of the request's `cwd` when it gives one
    /// ([`SessionStore::list_sessions`]), [`AcpAgent::list_page_size`] at a time; a stored
    /// record that cannot be read is left out (and logged), a session without a recorded
    /// workspace too (ACP needs its `cwd`).
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use agent_controller::acp::AcpAgent;
    /// use agent_controller::model::scripted::ScriptedModel;
    /// use agent_controller::{AgentController, FileStore, SessionStore, ToolRegistry, config};
    ///
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(".agent/sessions")?);
    /// let kept = store.clone();
    /// let agent = AcpAgent::new(move |workspace: &std::path::Path| {
    ///     let graph = config::load("config/modes.toml")?;
    ///     Ok(AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    ///         .tools(ToolRegistry::with_workspace_tools())
    ///         .workspace(workspace)
    ///         .store(kept.clone())
    ///         .build()?)
    /// })
    /// .load_session(true)
    /// .list_sessions(store, None);
    /// agent.serve_stdio().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_sessions(mut self, store: Arc<dyn SessionStore>, workspace: Option<&Path>) -> Self {
        let only = workspace.map(|w| w.canonicalize().unwrap_or_else(|_| w.to_path_buf()));
        self.list = Some((store, only));
        self
    }

    /// The most sessions one `session/list` answer holds ([`DEFAULT_LIST_PAGE_SIZE`] unless
    /// set; at least 1): the rest follow behind its `nextCursor`.
    pub fn list_page_size(mut self, size: usize) -> Self {
        self.list_page_size = size.max(1);
        self
    }

    /// The most bytes one message may have ([`DEFAULT_MAX_MESSAGE_BYTES`] unless set).
    pub fn max_message_bytes(mut self, max: usize) -> Self {
        self.max_message_bytes = max;
        self
    }

    /// Who the decisions made through the client are recorded as (`decidedBy`; default
    /// `acp-client`), followed by the client's name in parentheses when its `initialize` gave
    /// one (`clientInfo.name`: `alice (Zed)`). The identity a quorum counts (`approvers`,
    /// [`crate::quorum`]); each decision's record says it came through ACP (`via`).
    pub fn decided_by(mut self, name: impl Into<String>) -> Self {
        self.decided_by = Arc::from(name.into());
        self
    }

    /// Serves one client on stdin and stdout.
    ///
    /// # Errors
    /// As [`AcpAgent::serve`].
    pub async fn serve_stdio(self) -> Result<(), Error> {
        self.serve(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves one client: newline-delimited JSON-RPC 2.0 read from `input`, written to
    /// `output`, until `input` ends. Then every session's run in progress is cancelled and
    /// nothing pending is approved: with a store, plans and tool calls waiting for a decision
    /// stay pending (decide them with `decide`; after a later `session/load` the editor's next
    /// prompt sets them aside as its feedback).
    ///
    /// # Errors
    /// When the connection fails (reading or writing fails).
    pub async fn serve(
        self,
        input: impl AsyncRead + Send + Unpin + 'static,
        output: impl AsyncWrite + Send + Unpin + 'static,
    ) -> Result<(), Error> {
        let incoming =
            lines::bounded_lines(tokio::io::BufReader::new(input), self.max_message_bytes);
        let outgoing = futures_util::sink::unfold(output, async |mut output, line: String| {
            output.write_all(line.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await?;
            Ok::<_, std::io::Error>(output)
        });
        let transport = Lines::new(Box::pin(outgoing), Box::pin(incoming));
        let state = Arc::new(State {
            agent: self,
            sessions: Mutex::new(HashMap::new()),
            loading: Mutex::new(HashSet::new()),
            turns: Mutex::new(Vec::new()),
            elicits: AtomicBool::new(false),
            client: Mutex::new(None),
        });
        let (s8, s9, s10) = (state.clone(), state.clone(), state.clone());
        let (s1, s2, s3, s4, s5, s6, s7) = (
            state.clone(),
            state.clone(),
            state.clone(),
            state.clone(),
            state.clone(),
            state.clone(),
            state.clone(),
        );
        let result = Agent
            .v1()
            .name("agent-controller")
            .on_receive_request(
                async move |request: InitializeRequest, responder, _cx| {
                    responder.respond(s1.initialize(request))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: NewSessionRequest, responder, cx| {
                    let state = s2.clone();
                    spawn(&s2, async move {
                        let _ = responder.respond_with_result(state.new_session(request, cx).await);
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: LoadSessionRequest, responder, cx| {
                    let state = s3.clone();
                    spawn(&s3, async move {
                        // After the answer the agent sends nothing of a turn: what waits for
                        // a decision stays pending until the editor's next prompt, which is
                        // the feedback that sets it aside (the guide's "After a load").
                        let result = state.load_session(request, cx).await;
                        let _ = responder.respond_with_result(result);
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: ResumeSessionRequest, responder, cx| {
                    let state = s8.clone();
                    spawn(&s8, async move {
                        let result = state.resume_session(request, cx).await;
                        let _ = responder.respond_with_result(result);
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: ListSessionsRequest, responder, _cx| {
                    let state = s10.clone();
                    spawn(&s10, async move {
                        let _ = responder.respond_with_result(state.list_sessions(request).await);
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: CloseSessionRequest, responder, _cx| {
                    let state = s9.clone();
                    spawn(&s9, async move {
                        let result = state.close_session(&request.session_id).await;
                        let _ = responder.respond_with_result(result);
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: PromptRequest, responder, _cx| match s4.start_prompt(request) {
                    Ok(turn) => {
                        spawn(&s4, async move {
                            let _ =
                                responder.respond_with_result(turn.await.map(PromptResponse::new));
                        });
                        Ok(())
                    }
                    Err(error) => responder.respond_with_error(error),
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: SetSessionModeRequest, responder, _cx| {
                    let state = s5.clone();
                    spawn(&s5, async move {
                        let result = state
                            .switch(&request.session_id, &request.mode_id.0)
                            .await
                            .map(|()| SetSessionModeResponse::new());
                        let _ = responder.respond_with_result(result);
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: SetSessionConfigOptionRequest, responder, _cx| {
                    let state = s6.clone();
                    spawn(&s6, async move {
                        let _ = responder.respond_with_result(state.set_option(request).await);
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |notification: CancelNotification, _cx| {
                    if let Some(slot) = s7.slot(&notification.session_id) {
                        slot.cancel();
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(transport, async |cx: ConnectionTo<Client>| {
                cx.incoming_closed().await;
                Ok(())
            })
            .await;
        state.close().await;
        result
    }
}

/// The connection's state: its sessions by id, and the tasks its requests started.
struct State {
    agent: AcpAgent,
    sessions: Mutex<HashMap<String, Arc<Slot>>>,
    /// The ids of the sessions a `session/load` is opening (until it adopts or fails).
    loading: Mutex<HashSet<String>>,
    turns: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The client advertised elicitation forms (`clientCapabilities.elicitation.form` of
    /// `initialize`): questions are asked with `elicitation/create`.
    elicits: AtomicBool,
    /// The client's name (`clientInfo.name` of `initialize`), neutralized and bounded: part of
    /// the identity its decisions are recorded under ([`AcpAgent::decided_by`]).
    client: Mutex<Option<String>>,
}

/// A `session/load` under way for one session id ([`State::begin_load`]): a second load of it
/// meanwhile is refused, as one of an open session is; dropped, the id is free again.
struct Loading<'a> {
    loading: &'a Mutex<HashSet<String>>,
    id: String,
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        let mut loading = self.loading.lock().unwrap_or_else(PoisonError::into_inner);
        loading.remove(&self.id);
    }
}

/// Runs a request's work off the dispatch loop, so `session/cancel` and the answers to the
/// agent's own requests get through while it waits.
fn spawn(state: &State, work: impl Future<Output = ()> + Send + 'static) {
    let handle = tokio::spawn(work);
    let mut turns = state.turns.lock().unwrap_or_else(PoisonError::into_inner);
    turns.retain(|t| !t.is_finished());
    turns.push(handle);
}

/// A JSON-RPC "invalid params" error with this message.
fn invalid(message: impl std::fmt::Display) -> Error {
    Error::invalid_params().data(message.to_string())
}

/// ACP's "resource not found" (`-32002`, data `{"sessionId": ID}`) for the session `id` the
/// client named.
fn unknown_session(id: &str) -> Error {
    agent_client_protocol::v1::schema::Error::session_not_found(id.to_owned()).into()
}

/// A session operation's error as the JSON-RPC error that says what happened (the guide's
/// "Bad input"): a session the store does not hold is ACP's resource-not-found (`-32002`); the
/// client's bad input (an unknown mode or decision, an id or decision that cannot be used, a
/// workspace that is not the session's) invalid params (`-32602`); a request the session's
/// state does not allow now (decided already, expired, changed by another writer or process)
/// an invalid request (`-32600`); only the agent's own failure (its store) an internal error
/// (`-32603`).
pub(crate) fn session_error(error: SessionError) -> Error {
    match (&error, error.kind()) {
        (SessionError::UnknownSession(id), _) => unknown_session(id),
        (_, SessionErrorKind::Store) => Error::internal_error().data(error.to_string()),
        (
            _,
            SessionErrorKind::Conflict
            | SessionErrorKind::WrongState
            | SessionErrorKind::AlreadyDecided
            | SessionErrorKind::Expired,
        ) => Error::invalid_request().data(error.to_string()),
        _ => invalid(error),
    }
}

impl State {
    fn slot(&self, id: &SessionId) -> Option<Arc<Slot>> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.get(&*id.0).cloned()
    }

    /// Marks session `id` as being loaded, or refuses when it is open or being loaded already:
    /// the check and the mark are one step, so two loads sent at once cannot both open it (the
    /// second would replace the first in `sessions`, leaving a session running unreachable).
    fn begin_load(&self, id: &SessionId) -> Result<Loading<'_>, Error> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let mut loading = self.loading.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.contains_key(&*id.0) || !loading.insert(id.0.to_string()) {
            return Err(
                Error::invalid_request().data(format!("session `{}` is open already", id.0))
            );
        }
        Ok(Loading {
            loading: &self.loading,
            id: id.0.to_string(),
        })
    }

    fn known(&self, id: &SessionId) -> Result<Arc<Slot>, Error> {
        self.slot(id).ok_or_else(|| unknown_session(&id.0))
    }

    fn initialize(&self, request: InitializeRequest) -> InitializeResponse {
        let elicits = request
            .client_capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.supports_form());
        self.elicits.store(elicits, Ordering::Relaxed);
        // Hostile text: one line, at most 64 characters, blank for none.
        let client = request.client_info.as_ref().map(|info| {
            crate::display::neutralize_line(info.name.trim())
                .chars()
                .take(64)
                .collect::<String>()
        });
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) =
            client.filter(|c| !c.trim().is_empty());
        // `session/resume` opens a stored session, as `session/load` does.
        let resume = self.agent.load_session.then(SessionResumeCapabilities::new);
        let list = self
            .agent
            .list
            .as_ref()
            .map(|_| SessionListCapabilities::new());
        let sessions = SessionCapabilities::new()
            .close(SessionCloseCapabilities::new())
            .resume(resume)
            .list(list);
        let capabilities = AgentCapabilities::new()
            .load_session(self.agent.load_session)
            .session_capabilities(sessions)
            .prompt_capabilities(PromptCapabilities::new().embedded_context(true));
        InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(
                Implementation::new("agent-controller", env!("CARGO_PKG_VERSION"))
                    .title("agent-controller"),
            )
    }

    /// The controller for a session in `cwd`, with the MCP servers the client gave, started
    /// (refused by an agent made with [`AcpAgent::new`]), which the session keeps.
    async fn controller(
        &self,
        cwd: &Path,
        servers: &[agent_client_protocol::v1::schema::McpServer],
    ) -> Result<(AgentController, SessionServers), Error> {
        if !cwd.is_absolute() {
            return Err(invalid(format!(
                "cwd must be an absolute path, not `{}`",
                cwd.display()
            )));
        }
        let cannot = |e: &dyn std::fmt::Display| {
            invalid(format!("cannot open a session in `{}`: {e}", cwd.display()))
        };
        match &self.agent.open {
            Open::Plain(open) => {
                if !servers.is_empty() {
                    return Err(invalid(
                        "MCP servers are not taken by this agent (built with AcpAgent::new; \
                         AcpAgent::with_mcp takes them): give the session no mcpServers",
                    ));
                }
                #[cfg_attr(not(feature = "mcp"), allow(clippy::let_unit_value))]
                let kept = SessionServers::default();
                Ok((open(cwd).map_err(|e| cannot(&e))?, kept))
            }
            #[cfg(feature = "mcp")]
            Open::WithMcp(open) => {
                let servers = mcp::client_servers(servers).map_err(invalid)?;
                let builder = open(cwd).map_err(|e| cannot(&e))?;
                mcp::check_names(&servers, builder.modes()).map_err(invalid)?;
                if servers.is_empty() {
                    return Ok((builder.build().map_err(|e| cannot(&e))?, None));
                }
                let started =
                    crate::tool::mcp::McpTools::start(&servers, std::iter::empty(), cwd).await;
                let controller = builder
                    .mcp_tools(&started)
                    .map_err(|e| cannot(&e))?
                    .build()
                    .map_err(|e| cannot(&e))?;
                Ok((controller, Some(started)))
            }
        }
    }

    fn updates(
        &self,
        cx: ConnectionTo<Client>,
        controller: &AgentController,
        session: &Session,
    ) -> Updates {
        Updates {
            cx,
            session_id: SessionId::new(session.id().to_owned()),
            mode: Arc::new(Mutex::new(session.mode().id().to_owned())),
            graph: controller.modes().clone(),
            controller: controller.clone(),
            workspace: controller.workspace().to_path_buf(),
            plans_dir: controller.modes().plans_dir().to_path_buf(),
            ids: Arc::default(),
            seen: Arc::default(),
            // A restored session's waiting questions: their `tool_suspended` was before.
            questions: Arc::new(Mutex::new(
                session
                    .pending()
                    .iter()
                    .filter_map(crate::session::PendingDecision::as_suspension)
                    .map(|s| s.tool_call_id().to_owned())
                    .collect(),
            )),
        }
    }

    /// Keeps `session` as an ACP session, its events going to the client.
    fn adopt(
        &self,
        mut session: Session,
        controller: &AgentController,
        updates: Updates,
        servers: SessionServers,
    ) -> Arc<Slot> {
        let sink = updates.clone();
        session
            .subscribe(move |event| sink.on_event(event))
            .detach();
        let slot = Arc::new(Slot::new(
            session,
            controller.modes().clone(),
            controller.store().is_some(),
            updates,
            servers,
        ));
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.insert(slot.updates.session_id.0.to_string(), slot.clone());
        slot
    }

    async fn new_session(
        &self,
        request: NewSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<NewSessionResponse, Error> {
        let (controller, servers) = self.controller(&request.cwd, &request.mcp_servers).await?;
        let session = controller
            .start_session(SessionOptions::new())
            .await
            .map_err(session_error)?;
        let mode = session.mode_id();
        let options = session_options(controller.modes(), &session);
        let updates = self.updates(cx, &controller, &session);
        let slot = self.adopt(session, &controller, updates, servers);
        Ok(NewSessionResponse::new(slot.updates.session_id.clone())
            .modes(mode_state(&slot.graph, mode))
            .config_options(options))
    }

    /// `session/load`: the stored session, its conversation replayed before the answer.
    async fn load_session(
        &self,
        request: LoadSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse, Error> {
        let (modes, options) = self
            .open_stored(
                &request.session_id,
                &request.cwd,
                &request.mcp_servers,
                cx,
                true,
            )
            .await?;
        Ok(LoadSessionResponse::new()
            .modes(modes)
            .config_options(options))
    }

    /// `session/resume`: the stored session, as `session/load` opens it but without the replay.
    async fn resume_session(
        &self,
        request: ResumeSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<ResumeSessionResponse, Error> {
        let (modes, options) = self
            .open_stored(
                &request.session_id,
                &request.cwd,
                &request.mcp_servers,
                cx,
                false,
            )
            .await?;
        Ok(ResumeSessionResponse::new()
            .modes(modes)
            .config_options(options))
    }

    /// Opens stored session `id` in `cwd` with the client's MCP `servers` (started only once
    /// the session and its workspace are checked), replaying its conversation when `replay`;
    /// returns its modes and config options.
    async fn open_stored(
        &self,
        id: &SessionId,
        cwd: &Path,
        servers: &[agent_client_protocol::v1::schema::McpServer],
        cx: ConnectionTo<Client>,
        replay: bool,
    ) -> Result<(SessionModeState, Vec<SessionConfigOption>), Error> {
        if !self.agent.load_session {
            return Err(Error::method_not_found()
                .data("loading a session needs a store: start the agent with --store"));
        }
        // Held until the session is adopted (or the load fails).
        let _loading = self.begin_load(id)?;
        if !servers.is_empty() {
            // The session, its workspace among it, is checked before any of the client's
            // servers starts in `cwd`.
            let (probe, _) = self.controller(cwd, &[]).await?;
            probe
                .restore_session(&id.0, SessionOptions::new())
                .await
                .map_err(session_error)?;
        }
        let (controller, servers) = self.controller(cwd, servers).await?;
        let session = controller
            .restore_session(&id.0, SessionOptions::new())
            .await
            .map_err(session_error)?;
        let updates = self.updates(cx, &controller, &session);
        if replay {
            updates.replay(&session);
        }
        let mode = session.mode_id();
        let options = session_options(controller.modes(), &session);
        let slot = self.adopt(session, &controller, updates, servers);
        Ok((mode_state(&slot.graph, mode), options))
    }

    /// `session/list`: the store's sessions (of the request's `cwd`, and of the agent's one
    /// workspace when it has one), newest first, a page at a time. Refused without a store
    /// (method not found), for a `cwd` that is not absolute or a cursor the agent did not give
    /// (invalid params); a record that cannot be read is left out and logged.
    async fn list_sessions(
        &self,
        request: ListSessionsRequest,
    ) -> Result<ListSessionsResponse, Error> {
        let Some((store, only)) = &self.agent.list else {
            return Err(Error::method_not_found()
                .data("listing sessions needs a store: start the agent with --store"));
        };
        let asked = match &request.cwd {
            Some(cwd) if !cwd.is_absolute() => {
                return Err(invalid(format!(
                    "cwd must be an absolute path, not `{}`",
                    cwd.display()
                )));
            }
            // Recorded workspaces are canonical: so is what they are compared with.
            Some(cwd) => Some(cwd.canonicalize().unwrap_or_else(|_| cwd.clone())),
            None => None,
        };
        let workspace = match (asked, only) {
            (Some(asked), Some(only)) if &asked != only => {
                return Ok(ListSessionsResponse::new(Vec::new()));
            }
            (asked, only) => asked.or_else(|| only.clone()),
        };
        let mut listing = store
            .list_sessions(workspace.as_deref())
            .await
            .map_err(|e| Error::internal_error().data(e.to_string()))?;
        for bad in &listing.unreadable {
            tracing::warn!(
                session = %bad.session_id,
                location = %bad.location,
                reason = %bad.reason,
                "a stored session that cannot be read is not listed"
            );
        }
        // ACP names each session's `cwd`, an absolute path.
        listing
            .sessions
            .retain(|s| s.workspace.as_deref().is_some_and(Path::is_absolute));
        let page = listing
            .page(request.cursor.as_deref(), self.agent.list_page_size)
            .map_err(invalid)?;
        let sessions = page
            .sessions
            .into_iter()
            .filter_map(|s| {
                let mut meta = serde_json::Map::new();
                let ours = serde_json::json!({ "modeId": s.mode_id, "pending": s.pending });
                meta.insert("agentController".to_owned(), ours);
                let updated = s.updated_at_rfc3339();
                let info = SessionInfo::new(s.session_id, s.workspace?)
                    .title(s.title)
                    .updated_at(updated)
                    .meta(meta);
                Some(info)
            })
            .collect();
        Ok(ListSessionsResponse::new(sessions).next_cursor(page.next_cursor))
    }

    /// `session/close`: the session's run in progress is cancelled and its open permission
    /// request given up (nothing approved; with a store what waits stays pending), the session
    /// settled and its MCP servers stopped; later requests for it find no session.
    async fn close_session(&self, id: &SessionId) -> Result<CloseSessionResponse, Error> {
        let slot = {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions
                .remove(&*id.0)
                .ok_or_else(|| unknown_session(&id.0))?
        };
        slot.cancel();
        // Taken once the cancelled run let go of it.
        if let Err(error) = slot.session.lock().await.settle().await {
            tracing::warn!(%error, "a closed session could not be settled");
        }
        #[cfg(feature = "mcp")]
        slot.stop_servers().await;
        Ok(CloseSessionResponse::new())
    }

    /// Starts the turn of a prompt: refused for an unknown session and while another prompt of
    /// the session runs.
    fn start_prompt(
        &self,
        request: PromptRequest,
    ) -> Result<
        impl Future<Output = Result<agent_client_protocol::v1::schema::StopReason, Error>> + use<>,
        Error,
    > {
        let slot = self.known(&request.session_id)?;
        let text = prompt_text(&request.prompt);
        if text.trim().is_empty() {
            return Err(invalid("the prompt has no text"));
        }
        if !slot.begin_turn() {
            return Err(Error::invalid_request().data(format!(
                "a prompt is already running in session `{}`: wait for it, or cancel it",
                request.session_id.0
            )));
        }
        let elicits = self.elicits.load(Ordering::Relaxed);
        // Who decides: the agent's name for its user, with the client's name when it gave one
        // (`alice (Zed)`), so each decision and quorum approval names both.
        let client = self
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let decided_by = match client {
            Some(client) => Arc::from(format!("{} ({client})", self.agent.decided_by)),
            None => self.agent.decided_by.clone(),
        };
        Ok(turn::prompt(slot, text, decided_by, elicits))
    }

    /// A manual switch of the session to `mode_id` (`session/set_mode`, or the `mode` config
    /// option): a pending plan or tool call counts as not approved, and the model is told. A
    /// run in progress is stopped first, as `session/cancel` stops it (its prompt ends
    /// `cancelled`), so no call of it runs in the mode the user left; nothing stops for an
    /// unknown mode (refused) or the mode the session is in.
    async fn switch(&self, id: &SessionId, mode_id: &str) -> Result<(), Error> {
        let slot = self.known(id)?;
        if slot.graph.get(mode_id).is_some() && slot.updates.mode_id() != mode_id {
            slot.stop_running();
        }
        let mut session = slot.session.lock().await;
        if session.mode().id() == mode_id {
            // Already there: nothing changes, and what waits for the user keeps waiting.
            return Ok(());
        }
        session.switch_mode(mode_id).await.map_err(session_error)?;
        slot.stop_asking();
        Ok(())
    }

    async fn set_option(
        &self,
        request: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, Error> {
        if &*request.config_id.0 == MODEL_OPTION {
            let slot = self.known(&request.session_id)?;
            let value = request.value.as_value_id().map(|v| &*v.0);
            let options = model::set_model(&slot, value).await?;
            return Ok(SetSessionConfigOptionResponse::new(options));
        }
        if &*request.config_id.0 != MODE_OPTION {
            return Err(invalid(format!(
                "unknown config option `{}`: the options are `{MODE_OPTION}` and, where \
                 several models are configured, `{MODEL_OPTION}`",
                request.config_id.0
            )));
        }
        let Some(mode) = request.value.as_value_id() else {
            return Err(invalid("the `mode` option takes a mode id"));
        };
        self.switch(&request.session_id, &mode.0).await?;
        let slot = self.known(&request.session_id)?;
        let session = slot.session.lock().await;
        Ok(SetSessionConfigOptionResponse::new(session_options(
            &slot.graph,
            &session,
        )))
    }

    /// The client is gone: every run in progress is cancelled, every open permission request
    /// given up (nothing approved), and every session settled, so a store records how each
    /// run ended.
    async fn close(&self) {
        let slots: Vec<Arc<Slot>> = {
            let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.values().cloned().collect()
        };
        for slot in &slots {
            slot.cancel();
        }
        let turns = std::mem::take(&mut *self.turns.lock().unwrap_or_else(PoisonError::into_inner));
        for turn in turns {
            let _ = turn.await;
        }
        for slot in &slots {
            if let Err(error) = slot.session.lock().await.settle().await {
                tracing::warn!(%error, "a session could not be settled");
            }
        }
        // The client's MCP servers, all at once: each is asked to exit, then stopped.
        #[cfg(feature = "mcp")]
        futures_util::future::join_all(slots.iter().map(|slot| slot.stop_servers())).await;
    }
}

/// The text of a prompt: its text blocks, and the text of embedded resources, in order.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut text = String::new();
    for block in blocks {
        let piece = match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::ResourceLink(link) => format!("[{}]({})", link.name, link.uri),
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(contents) => {
                    format!("{}:\n{}", contents.uri, contents.text)
                }
                _ => continue,
            },
            _ => continue,
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&piece);
    }
    text
}

// `SinkExt` is used by `Lines` through the boxed sink.
#[allow(unused_imports)]
use SinkExt as _;
