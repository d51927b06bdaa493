//! The MCP client (feature `mcp`): the tools of the `[[mcpServers]]` a config names, offered per
//! mode like any other [`Tool`], through [`rmcp`], the official Rust SDK.
//!
//! [`McpTools::start`] starts the servers a graph's modes need
//! ([`crate::ModeGraph::needed_mcp_servers`])
//! as child processes (stdio) or reaches them over streamable HTTP, asks each for its tools
//! (`tools/list`), and makes each an [`McpTool`] named `SERVER__TOOL`
//! ([`super::mcp_tool_name`]); [`McpTools::register`] adds them to a [`ToolRegistry`].
//! A mode offers one when its `availableTools` lists it by name, or lists the `SERVER__*`
//! wildcard; a planning mode offers through a wildcard only the tools that change nothing, and
//! an MCP tool changes nothing ([`ToolAccess::ReadOnly`]) only when its server is `trusted` and
//! the tool is annotated `readOnlyHint: true`.
//!
//! Every reply of a server is hostile: tool names that no provider accepts are mapped, and two
//! tools mapped to one name are both refused; descriptions and results are cut at
//! [`MAX_DESCRIPTION_CHARS`] and [`MAX_RESULT_BYTES`]; an input schema larger than
//! [`MAX_SCHEMA_BYTES`] refuses its tool. A server that does not start, stops, sends no reply
//! within its `timeout` or sends something that is not a result gives the call an error result
//! saying so: the run goes on. A server that stopped is not started again in this process, so
//! no call is sent twice and nothing runs that the user did not see. A server's notifications
//! are ignored as they are read, each only counted ([`McpTools::ignored_notifications`]): a
//! server that floods them costs the host no memory.
//!
//! An MCP server is a process with its own file access: the workspace jail
//! ([`crate::jail`]) covers only this crate's own tools. The workspace is given to each server
//! as its root (MCP roots), which a server may or may not honour.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
// Roots are deprecated by SEP-2577 but still what servers such as the reference filesystem
// server read their allowed directories from.
use rmcp::model::JsonRpcMessage;
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ListRootsResult, Root,
    RootsCapabilities,
};
use rmcp::service::{
    RequestContext, RoleClient, RunningService, RxJsonRpcMessage, ServiceError, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::{McpServer, McpTransport, mcp_tool_name, split_mcp_name, wildcard_covers};
use crate::tool::{Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry};

/// The most bytes of a tool result the model gets; the rest is cut with a note (like
/// [`crate::tool::fs::MAX_READ_BYTES`]).
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

/// The most characters of a tool's description the model gets.
pub const MAX_DESCRIPTION_CHARS: usize = 4_000;

/// The largest input schema (as JSON) a tool may have; a tool with a larger one is refused.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// The most tools taken from one server; the rest are refused.
pub const MAX_TOOLS_PER_SERVER: usize = 512;

/// The most pages of `tools/list` read from one server; a server with more gets a line in
/// [`ServerReport::refused`] saying the rest were not read.
const MAX_LIST_PAGES: usize = 64;

/// The most bytes of a server's stderr kept to explain why it stopped.
const STDERR_TAIL_BYTES: usize = 2_000;

/// The most characters of a server's error message passed on.
const MAX_ERROR_CHARS: usize = 2_000;

/// Why an MCP server cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server did not start, or did not answer `initialize` and `tools/list`.
    #[error("MCP server `{server}` did not start: {reason}")]
    Start {
        /// The server id.
        server: String,
        /// Why, with the end of its stderr when it wrote any.
        reason: String,
    },
}

/// A tool of an MCP server the model was offered, as `check --connect` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedTool {
    /// The name the model calls it by (`SERVER__TOOL`, mapped).
    pub name: String,
    /// The name the server gave it.
    pub remote_name: String,
    /// What it may change, as this crate counts it.
    pub access: ToolAccess,
}

/// What starting one server gave: its tools, the tools refused and why, or why it failed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerReport {
    /// The server id.
    pub id: String,
    /// Its tools, or why it could not be used.
    pub tools: Result<Vec<ListedTool>, McpError>,
    /// The server's tools left out, each with why (a name that no provider accepts and maps
    /// onto another tool's, an input schema too large, ..., or the pages of `tools/list` past
    /// the 64th, which are not read).
    pub refused: Vec<String>,
}

/// The started MCP servers of a graph and their tools; dropping it (or [`McpTools::shutdown`])
/// stops them.
pub struct McpTools {
    servers: Vec<Arc<Connection>>,
    tools: Vec<Arc<McpTool>>,
    reports: Vec<ServerReport>,
    /// The names listed by name in a mode of a server that failed to start: registered as
    /// tools whose every call reports the failure.
    unavailable: Vec<Arc<McpTool>>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTools")
            .field("servers", &self.reports)
            .finish_non_exhaustive()
    }
}

impl McpTools {
    /// Starts `servers`, all at once, each given `workspace` as its root, and lists their
    /// tools. `listed` are the `SERVER__TOOL` names the modes list by name
    /// ([`crate::ModeGraph::mcp_tool_names`]): for a server that fails, each of its names is
    /// registered as a tool whose every call is an error result saying why (the failure is in
    /// [`McpTools::reports`]). The servers a graph's sessions need are
    /// [`crate::ModeGraph::needed_mcp_servers`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(graph: agent_controller::ModeGraph) -> Result<(), agent_controller::tool::ToolError> {
    /// use agent_controller::ToolRegistry;
    /// use agent_controller::tool::mcp::McpTools;
    /// let mcp = McpTools::start(graph.needed_mcp_servers(), graph.mcp_tool_names(), ".".as_ref()).await;
    /// let mut tools = ToolRegistry::with_workspace_tools();
    /// mcp.register(&mut tools)?;
    /// # Ok(()) }
    /// ```
    pub async fn start<'a>(
        servers: impl IntoIterator<Item = &'a McpServer>,
        listed: impl IntoIterator<Item = &'a str>,
        workspace: &Path,
    ) -> Self {
        let servers: Vec<McpServer> = servers.into_iter().cloned().collect();
        let listed: Vec<String> = listed.into_iter().map(str::to_owned).collect();
        let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
        // All at once: each is a process or a connection of its own.
        let handles: Vec<_> = servers
            .iter()
            .map(|server| tokio::spawn(Connection::start(server.clone(), root.clone())))
            .collect();
        let mut started = Vec::with_capacity(handles.len());
        for handle in handles {
            match handle.await {
                Ok(output) => started.push(output),
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
        let mut out = McpTools {
            servers: Vec::new(),
            tools: Vec::new(),
            reports: Vec::new(),
            unavailable: Vec::new(),
        };
        for (connection, listing) in started {
            let connection = Arc::new(connection);
            match listing {
                Ok(remote) => {
                    let (tools, mut refused) = tools_of(&connection, remote.tools);
                    if remote.unread_pages {
                        refused.push(format!(
                            "the tools past page {MAX_LIST_PAGES} of `tools/list`: the server lists more pages than are read, so those tools were not read"
                        ));
                    }
                    out.reports.push(ServerReport {
                        id: connection.server.id().to_owned(),
                        tools: Ok(tools
                            .iter()
                            .map(|t| ListedTool {
                                name: t.name.clone(),
                                remote_name: t.remote_name.clone(),
                                access: t.access,
                            })
                            .collect()),
                        refused,
                    });
                    out.tools.extend(tools);
                }
                Err(reason) => {
                    let error = McpError::Start {
                        server: connection.server.id().to_owned(),
                        reason,
                    };
                    for name in &listed {
                        if split_mcp_name(name).is_some_and(|(s, _)| s == connection.server.id())
                            && !out.unavailable.iter().any(|t| &t.name == name)
                        {
                            out.unavailable.push(Arc::new(McpTool {
                                connection: connection.clone(),
                                name: name.clone(),
                                remote_name: String::new(),
                                description: format!("Unavailable: {error}."),
                                input_schema: serde_json::json!({"type": "object"}),
                                access: ToolAccess::Writes,
                            }));
                        }
                    }
                    out.reports.push(ServerReport {
                        id: connection.server.id().to_owned(),
                        tools: Err(error),
                        refused: Vec::new(),
                    });
                }
            }
            out.servers.push(connection);
        }
        out
    }

    /// What starting each server gave, in config order.
    pub fn reports(&self) -> &[ServerReport] {
        &self.reports
    }

    /// How many notifications the server `server` (its id) has sent so far; `None` for an id
    /// that is not one of the servers. The host acts on none of them (log messages are not
    /// shown, progress does not extend a call's timeout, a changed tool list is not read again:
    /// the tools are listed once, at the start), so each is dropped as it is read, before the
    /// SDK would give it a task of its own: a server that floods them (a trial saw 1.37 GB
    /// in 21 s) holds no memory of the host's.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn demo(graph: agent_controller::ModeGraph) {
    /// use agent_controller::tool::mcp::McpTools;
    /// let mcp = McpTools::start(graph.needed_mcp_servers(), graph.mcp_tool_names(), ".".as_ref()).await;
    /// for report in mcp.reports() {
    ///     let ignored = mcp.ignored_notifications(&report.id).unwrap_or(0);
    ///     println!("{}: {ignored} notifications ignored", report.id);
    /// }
    /// # }
    /// ```
    pub fn ignored_notifications(&self, server: &str) -> Option<u64> {
        self.servers
            .iter()
            .find(|c| c.server.id() == server)
            .map(|c| c.ignored.load(Ordering::Relaxed))
    }

    /// The tools of the servers that started (without the stand-ins of those that did not).
    pub fn tools(&self) -> impl Iterator<Item = &Arc<McpTool>> + '_ {
        self.tools.iter()
    }

    /// Adds every tool to `registry`: the servers' tools, and for a server that did not start a
    /// stand-in for each name a mode lists, whose calls report the failure.
    ///
    /// # Errors
    /// [`ToolError::Duplicate`] when a name is registered already (a tool of your own named
    /// like an MCP tool).
    pub fn register(&self, registry: &mut ToolRegistry) -> Result<(), ToolError> {
        for tool in self.tools.iter().chain(&self.unavailable) {
            registry.register(tool.clone())?;
        }
        Ok(())
    }

    /// Whether a started server offers a tool named `name` (`SERVER__TOOL`): a name a mode
    /// lists that no server offers is a tool the config expects and the server lacks.
    pub fn offers(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name)
    }

    /// The tools a wildcard `pattern` (`SERVER__*`) covers among the started ones.
    pub fn covered_by(&self, pattern: &str) -> impl Iterator<Item = &Arc<McpTool>> + '_ {
        let pattern = pattern.to_owned();
        self.tools
            .iter()
            .filter(move |t| wildcard_covers(&pattern, &t.name))
    }

    /// Stops every server (closes its connection; a child process is killed once it does not
    /// exit) and waits for them.
    pub async fn shutdown(self) {
        for server in &self.servers {
            let service = server.state.lock().ok().and_then(|mut s| s.service.take());
            if let Some(service) = service {
                let _ = service.cancel().await;
            }
        }
    }
}

/// The client side this crate shows a server: its name, and the workspace as its one root.
#[derive(Clone)]
struct Client {
    root: PathBuf,
}

#[allow(deprecated)]
impl ClientHandler for Client {
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, rmcp::ErrorData> {
        Ok(ListRootsResult::new(vec![
            Root::new(file_uri(&self.root)).with_name("workspace"),
        ]))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(RootsCapabilities::default());
        ClientConfig::new(
            capabilities,
            Implementation::new("agent-controller", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// `file://` and the path, each byte outside the unreserved characters and `/` escaped.
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(byte as char);
        } else {
            let _ = write!(uri, "%{byte:02X}");
        }
    }
    uri
}

/// One server: its config, its connection while it runs, the end of its stderr.
struct Connection {
    server: McpServer,
    state: Mutex<State>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The notifications the server sent, each dropped as it was read ([`Quiet`]).
    ignored: Arc<AtomicU64>,
}

struct State {
    service: Option<RunningService<RoleClient, Client>>,
    /// Why the server stopped, once it did.
    stopped: Option<String>,
}

impl Connection {
    /// Starts `server` and lists its tools, within its timeout.
    async fn start(server: McpServer, root: PathBuf) -> (Connection, Result<ToolList, String>) {
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let ignored = Arc::new(AtomicU64::new(0));
        let timeout = server.call_timeout();
        let started = tokio::time::timeout(
            timeout,
            connect(&server, root, stderr.clone(), ignored.clone()),
        )
        .await;
        let (service, listing) = match started {
            Err(_) => (
                None,
                Err(format!(
                    "no reply to `initialize` and `tools/list` within {}",
                    shown_duration(timeout)
                )),
            ),
            Ok(Err(reason)) => (None, Err(reason)),
            Ok(Ok((service, tools))) => (Some(service), Ok(tools)),
        };
        let connection = Connection {
            server,
            state: Mutex::new(State {
                service,
                stopped: None,
            }),
            stderr,
            ignored,
        };
        let listing = listing.map_err(|reason| format!("{reason}{}", connection.stderr_tail()));
        (connection, listing)
    }

    /// The end of the server's stderr, as ` (stderr: ...)`, or nothing.
    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().map(|b| b.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&tail);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends: {text}")
        }
    }

    /// Calls the server's tool `remote` with `args`, within the server's timeout.
    async fn call(&self, remote: &str, args: serde_json::Map<String, Value>) -> ToolOutput {
        let id = self.server.id().to_owned();
        let peer = {
            let Ok(mut state) = self.state.lock() else {
                return ToolOutput::error(format!("MCP server `{id}` is not available"));
            };
            if let Some(why) = &state.stopped {
                return ToolOutput::error(format!(
                    "MCP server `{id}` stopped earlier ({why}); it is not started again in this session, so the call was not sent"
                ));
            }
            match &state.service {
                Some(service) if service.is_closed() => {
                    let why = "its connection closed".to_owned();
                    state.stopped = Some(why.clone());
                    return ToolOutput::error(format!(
                        "MCP server `{id}` stopped ({why}{}); the call was not sent",
                        self.stderr_tail()
                    ));
                }
                Some(service) => service.peer().clone(),
                None => {
                    return ToolOutput::error(format!(
                        "MCP server `{id}` did not start; the call was not sent"
                    ));
                }
            }
        };
        let timeout = self.server.call_timeout();
        let request = CallToolRequestParams::new(remote.to_owned()).with_arguments(args);
        let reply = tokio::time::timeout(timeout, peer.call_tool(request)).await;
        match reply {
            Err(_) => ToolOutput::error(format!(
                "MCP server `{id}` sent no reply to `{remote}` within {}: the call was cancelled, and whether the tool did anything is unknown",
                shown_duration(timeout)
            )),
            Ok(Ok(result)) => result_output(&id, result),
            Ok(Err(error)) => {
                let closed = matches!(
                    error,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) || peer.is_transport_closed();
                if closed {
                    let why = "its connection closed during a call".to_owned();
                    if let Ok(mut state) = self.state.lock() {
                        state.stopped = Some(why.clone());
                    }
                    ToolOutput::error(format!(
                        "MCP server `{id}` stopped during the call of `{remote}` ({why}{}): whether the tool did anything is unknown; the server is not started again in this session",
                        self.stderr_tail()
                    ))
                } else if matches!(error, ServiceError::UnexpectedResponse) {
                    ToolOutput::error(format!(
                        "MCP server `{id}` answered the call of `{remote}` with something that is not a tool result"
                    ))
                } else {
                    ToolOutput::error(format!(
                        "MCP server `{id}` did not run `{remote}`: {}",
                        bounded_chars(&error.to_string(), MAX_ERROR_CHARS)
                    ))
                }
            }
        }
    }
}

/// Connects to `server` and lists its tools.
async fn connect(
    server: &McpServer,
    root: PathBuf,
    stderr: Arc<Mutex<Vec<u8>>>,
    ignored: Arc<AtomicU64>,
) -> Result<(RunningService<RoleClient, Client>, ToolList), String> {
    let client = Client { root: root.clone() };
    let service = match server.transport() {
        McpTransport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .envs(env)
                .current_dir(&root)
                .kill_on_drop(true);
            let (transport, child_stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot run `{command}`: {e}"))?;
            if let Some(mut child_stderr) = child_stderr {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = child_stderr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        if let Ok(mut tail) = stderr.lock() {
                            tail.extend_from_slice(&buf[..n]);
                            let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                            tail.drain(..excess);
                        }
                    }
                });
            }
            client
                .serve(Quiet::new(transport, ignored))
                .await
                .map_err(|e| bounded_chars(&format!("initialize failed: {e}"), MAX_ERROR_CHARS))?
        }
        McpTransport::Http { url } => {
            // Err means another provider is installed already, which reqwest then uses.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.as_str());
            client
                .serve(Quiet::new(transport, ignored))
                .await
                .map_err(|e| bounded_chars(&format!("initialize failed: {e}"), MAX_ERROR_CHARS))?
        }
    };
    // Page by page, so a server that pages without end (or lists too much) is cut short.
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let page = service
            .peer()
            .list_tools(Some(params))
            .await
            .map_err(|e| bounded_chars(&format!("tools/list failed: {e}"), MAX_ERROR_CHARS))?;
        tools.extend(page.tools);
        cursor = page.next_cursor;
        if cursor.is_none() || tools.len() > MAX_TOOLS_PER_SERVER {
            break;
        }
    }
    // Pages left unread past the last one read: their tools are missing, and the report says so.
    let unread_pages = cursor.is_some() && tools.len() <= MAX_TOOLS_PER_SERVER;
    Ok((
        service,
        ToolList {
            tools,
            unread_pages,
        },
    ))
}

/// A server's transport that drops the server's notifications as they are read, counting
/// them ([`McpTools::ignored_notifications`]): the SDK's service loop gives each notification
/// that reaches it a task of its own, so a server that floods them would grow the host's
/// memory without bound, for messages the host does not act on. Requests (`roots/list`),
/// replies and errors pass as they are.
struct Quiet<T> {
    inner: T,
    ignored: Arc<AtomicU64>,
}

impl<T> Quiet<T> {
    fn new(inner: T, ignored: Arc<AtomicU64>) -> Self {
        Self { inner, ignored }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Quiet<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    /// The next message that is not a notification. Cancel-safe as the inner `receive` is:
    /// a notification dropped before the future is dropped is only counted.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            if matches!(message, JsonRpcMessage::Notification(_)) {
                self.ignored.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// What `tools/list` gave, page by page.
struct ToolList {
    /// The tools of the pages read.
    tools: Vec<rmcp::model::Tool>,
    /// The server offered more pages after the [`MAX_LIST_PAGES`] read.
    unread_pages: bool,
}

/// The server's tools as [`McpTool`]s, and the ones refused, each with why.
fn tools_of(
    connection: &Arc<Connection>,
    remote: Vec<rmcp::model::Tool>,
) -> (Vec<Arc<McpTool>>, Vec<String>) {
    let server = &connection.server;
    let mut refused = Vec::new();
    let mut by_name: HashMap<String, Vec<McpTool>> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for (i, tool) in remote.into_iter().enumerate() {
        let remote_name = tool.name.to_string();
        let shown = crate::display::neutralize_line(&remote_name).into_owned();
        if i >= MAX_TOOLS_PER_SERVER {
            refused.push(format!(
                "`{shown}`: the server offers more than {MAX_TOOLS_PER_SERVER} tools"
            ));
            continue;
        }
        let Some(name) = mcp_tool_name(server.id(), &remote_name) else {
            refused.push(format!("`{shown}`: an empty name"));
            continue;
        };
        let input_schema = Value::Object((*tool.input_schema).clone());
        // Providers refuse a request whose tool takes anything but an object: one such tool
        // would fail every model call of the mode.
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            refused.push(format!(
                "`{shown}`: its input schema is not of type `object`, as MCP requires"
            ));
            continue;
        }
        let schema_len = serde_json::to_string(&input_schema).map_or(usize::MAX, |s| s.len());
        if schema_len > MAX_SCHEMA_BYTES {
            refused.push(format!(
                "`{shown}`: its input schema has {schema_len} bytes, more than {MAX_SCHEMA_BYTES}"
            ));
            continue;
        }
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let access = if server.is_trusted() && read_only {
            ToolAccess::ReadOnly
        } else {
            ToolAccess::Writes
        };
        let description = tool.description.as_deref().unwrap_or_default();
        let description = format!(
            "{} (MCP server `{}`)",
            bounded_chars(description, MAX_DESCRIPTION_CHARS),
            server.id()
        );
        if !by_name.contains_key(&name) {
            order.push(name.clone());
        }
        by_name.entry(name.clone()).or_default().push(McpTool {
            connection: connection.clone(),
            name,
            remote_name,
            description,
            input_schema,
            access,
        });
    }
    let mut tools = Vec::new();
    for name in order {
        let mut same = by_name.remove(&name).unwrap_or_default();
        if same.len() == 1 {
            tools.extend(same.pop().map(Arc::new));
        } else {
            let names: Vec<String> = same
                .iter()
                .map(|t| format!("`{}`", crate::display::neutralize_line(&t.remote_name)))
                .collect();
            refused.push(format!(
                "{}: all map to the tool name `{name}`, so which one a call means would be a guess",
                names.join(", ")
            ));
        }
    }
    (tools, refused)
}

/// A tool result as text for the model: the text blocks in order, other blocks named, the
/// structured result when there is no text; at most [`MAX_RESULT_BYTES`].
fn result_output(server: &str, result: rmcp::model::CallToolResult) -> ToolOutput {
    let mut text = String::new();
    for block in &result.content {
        if text.len() > MAX_RESULT_BYTES {
            break;
        }
        let value = serde_json::to_value(block).unwrap_or(Value::Null);
        if !text.is_empty() {
            text.push('\n');
        }
        match value["type"].as_str() {
            Some("text") => text.push_str(value["text"].as_str().unwrap_or_default()),
            Some("resource") => match value["resource"]["text"].as_str() {
                Some(body) => text.push_str(body),
                None => text.push_str("[a binary resource, not shown]"),
            },
            Some("resource_link") => {
                let _ = write!(
                    text,
                    "[a resource link: {}]",
                    value["uri"].as_str().unwrap_or_default()
                );
            }
            Some(kind) => {
                let _ = write!(text, "[{} content, not shown]", bounded_chars(kind, 40));
            }
            None => text.push_str("[content of no known type, not shown]"),
        }
    }
    if text.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    let text = bounded_bytes(text, MAX_RESULT_BYTES);
    if result.is_error == Some(true) {
        ToolOutput::error(if text.is_empty() {
            format!("MCP server `{server}` reported an error without a message")
        } else {
            text
        })
    } else {
        ToolOutput::ok(text)
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with a note of how many were cut.
fn bounded_bytes(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    let _ = write!(
        text,
        "\n… ({} of {total} bytes not shown: the result is cut at {max} bytes)",
        total - cut
    );
    text
}

/// `text` cut to at most `max` characters, with `…` where it was cut.
fn bounded_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// `60s`, `1.5s`, `200ms`.
fn shown_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// One tool of an MCP server, offered as `SERVER__TOOL`.
pub struct McpTool {
    connection: Arc<Connection>,
    name: String,
    remote_name: String,
    description: String,
    input_schema: Value,
    access: ToolAccess,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("remote_name", &self.remote_name)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// The name the server gave the tool (the model calls it by [`Tool::name`]).
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    /// The id of its server.
    pub fn server(&self) -> &str {
        self.connection.server.id()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn input_schema(&self) -> Value {
        self.input_schema.clone()
    }

    fn access(&self) -> ToolAccess {
        self.access
    }

    fn origin(&self) -> Option<String> {
        Some(self.connection.server.origin())
    }

    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        if self.remote_name.is_empty() {
            return ToolOutput::error(format!("{}; the call was not sent", self.description));
        }
        let Value::Object(args) = args else {
            return ToolOutput::error("the arguments must be a JSON object");
        };
        tokio::select! {
            output = self.connection.call(&self.remote_name, args.clone()) => output,
            () = ctx.cancel.cancelled() => ToolOutput::error("cancelled"),
        }
    }
}
