//! MCP servers and the names of their tools: what a config's `[[mcpServers]]` describes
//! ([`McpServer`]), and the rules for the `SERVER__TOOL` names that refer to them. The client
//! that starts the servers and offers their tools, `McpTools`, needs the feature `mcp`.
//!
//! An MCP server is a process (or a service) with its own file access: the workspace jail
//! ([`crate::jail`]) covers only this crate's own tools. See the guide's MCP chapter.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "mcp")]
mod client;

#[cfg(feature = "mcp")]
pub use self::client::{
    ListedTool, MAX_DESCRIPTION_CHARS, MAX_RESULT_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_SERVER,
    McpError, McpTool, McpTools, ServerReport,
};

/// What separates the server id from the tool name in an MCP tool's name: `fs__read_text_file`.
pub const MCP_SEPARATOR: &str = "__";

/// The most characters a tool name may have: what both OpenAI and Anthropic accept.
pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// How long a call to an MCP server may take when its `timeout` is not set: 60 seconds.
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(60);

/// How the controller reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A child process spoken to over its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables set on top of the host's.
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint's URL (`http://` or `https://`).
        url: String,
    },
}

/// A validated `[[mcpServers]]` entry: an id, a transport, whether its annotations count, and
/// the timeout of its start and of each call.
///
/// # Examples
/// ```
/// use agent_controller::tool::mcp::{McpServer, McpTransport};
/// let server = McpServer::stdio("fs", "node", ["server.js", "."]).trusted(true);
/// assert_eq!(server.id(), "fs");
/// assert!(server.is_trusted());
/// assert!(matches!(server.transport(), McpTransport::Stdio { command, .. } if command == "node"));
/// assert_eq!(McpServer::http("web", "http://127.0.0.1:8000/mcp").id(), "web");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    id: Arc<str>,
    transport: McpTransport,
    trusted: bool,
    timeout: Duration,
}

impl McpServer {
    /// A server reached by `transport`, untrusted, with the default timeout.
    pub fn new(id: impl Into<Arc<str>>, transport: McpTransport) -> Self {
        Self {
            id: id.into(),
            transport,
            trusted: false,
            timeout: DEFAULT_MCP_TIMEOUT,
        }
    }

    /// A server started as `command` with `args`, untrusted, with the default timeout.
    pub fn stdio<I, S>(id: impl Into<Arc<str>>, command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            id: id.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: BTreeMap::new(),
            },
            trusted: false,
            timeout: DEFAULT_MCP_TIMEOUT,
        }
    }

    /// A server reached at the streamable HTTP endpoint `url`, untrusted, with the default
    /// timeout.
    pub fn http(id: impl Into<Arc<str>>, url: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            transport: McpTransport::Http { url: url.into() },
            trusted: false,
            timeout: DEFAULT_MCP_TIMEOUT,
        }
    }

    /// The same server, trusted or not: see [`McpServer::is_trusted`].
    pub fn trusted(mut self, trusted: bool) -> Self {
        self.trusted = trusted;
        self
    }

    /// The same server with `timeout` for its start and for each call.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same server (stdio only) with the environment variable `key` set to `value`.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio { env, .. } = &mut self.transport {
            env.insert(key.into(), value.into());
        }
        self
    }

    /// The id its tools are named by (`ID__TOOL`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How it is reached.
    pub fn transport(&self) -> &McpTransport {
        &self.transport
    }

    /// What runs this server's tools, as an allowance of one records it
    /// ([`crate::tool::Tool::origin`]): `mcp stdio COMMAND ARGS` (the arguments as JSON) or `mcp
    /// http URL`; the environment is left out (it may hold secrets, and the store keeps this).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::tool::mcp::McpServer;
    /// let server = McpServer::stdio("fs", "node", ["server.js", "."]);
    /// assert_eq!(server.origin(), r#"mcp stdio node ["server.js","."]"#);
    /// ```
    pub fn origin(&self) -> String {
        match &self.transport {
            McpTransport::Stdio { command, args, .. } => format!(
                "mcp stdio {command} {}",
                serde_json::to_string(args).unwrap_or_default()
            ),
            McpTransport::Http { url } => format!("mcp http {url}"),
        }
    }

    /// Whether its tool annotations count: a tool of a trusted server annotated
    /// `readOnlyHint: true` is [`crate::tool::ToolAccess::ReadOnly`]; every other MCP tool
    /// [`crate::tool::ToolAccess::Writes`].
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }

    /// How long its start, and each call, may take.
    pub fn call_timeout(&self) -> Duration {
        self.timeout
    }
}

/// Whether `id` can be a server id: ASCII letters, digits, `-` and `_`, without `__`, not
/// starting or ending in `_` (so `ID__TOOL` splits at the first `__` without doubt).
///
/// # Examples
/// ```
/// use agent_controller::tool::mcp::is_valid_server_id;
/// assert!(is_valid_server_id("fs"));
/// assert!(is_valid_server_id("my_fs-2"));
/// assert!(!is_valid_server_id("a__b"));
/// assert!(!is_valid_server_id("fs_"));
/// assert!(!is_valid_server_id(""));
/// ```
pub fn is_valid_server_id(id: &str) -> bool {
    !id.is_empty()
        && !id.contains(MCP_SEPARATOR)
        && !id.starts_with('_')
        && !id.ends_with('_')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `name` fits the tool-name rules of the model providers: 1 to
/// [`MAX_TOOL_NAME_CHARS`] ASCII letters, digits, `_` and `-`.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The server id and the tool part of an MCP tool name (`fs__read_text_file` ->
/// `("fs", "read_text_file")`, `fs__*` -> `("fs", "*")`), or `None` for a name without `__`.
///
/// # Examples
/// ```
/// use agent_controller::tool::mcp::split_mcp_name;
/// assert_eq!(split_mcp_name("fs__read_text_file"), Some(("fs", "read_text_file")));
/// assert_eq!(split_mcp_name("fs__*"), Some(("fs", "*")));
/// assert_eq!(split_mcp_name("read_file"), None);
/// ```
pub fn split_mcp_name(name: &str) -> Option<(&str, &str)> {
    name.split_once(MCP_SEPARATOR)
}

/// Whether `pattern` is a `SERVER__*` wildcard that covers the tool `name`.
///
/// # Examples
/// ```
/// use agent_controller::tool::mcp::wildcard_covers;
/// assert!(wildcard_covers("fs__*", "fs__write_file"));
/// assert!(!wildcard_covers("fs__*", "fsx__write_file"));
/// assert!(!wildcard_covers("fs__write_file", "fs__write_file"));
/// ```
pub fn wildcard_covers(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) if prefix.ends_with(MCP_SEPARATOR) => {
            name.len() > prefix.len() && name.starts_with(prefix)
        }
        _ => false,
    }
}

/// The name an MCP server's tool `tool` is offered under: `SERVER__TOOL`, with every character
/// the providers refuse in a tool name replaced by `_`, and cut to [`MAX_TOOL_NAME_CHARS`]
/// characters. `None` when nothing of the tool's own name is left.
///
/// # Examples
/// ```
/// use agent_controller::tool::mcp::mcp_tool_name;
/// assert_eq!(mcp_tool_name("fs", "read_text_file").as_deref(), Some("fs__read_text_file"));
/// assert_eq!(mcp_tool_name("web", "search.v2").as_deref(), Some("web__search_v2"));
/// assert_eq!(mcp_tool_name("fs", "").as_deref(), None);
/// assert_eq!(mcp_tool_name("fs", &"x".repeat(100)).unwrap().len(), 64);
/// ```
pub fn mcp_tool_name(server: &str, tool: &str) -> Option<String> {
    if tool.is_empty() {
        return None;
    }
    let mapped: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{server}{MCP_SEPARATOR}{mapped}");
    if name.len() > MAX_TOOL_NAME_CHARS {
        // ASCII only by now: cutting at a byte is cutting at a character.
        name.truncate(MAX_TOOL_NAME_CHARS);
    }
    (name.len() > server.len() + MCP_SEPARATOR.len()).then_some(name)
}
