//! The `[[mcpServers]]` table of a config: the MCP servers whose tools modes may offer, and the
//! rules for the `SERVER__TOOL` names that refer to them.
//!
//! Only the text is checked here (every server has a valid, unique id and exactly one of
//! `command` or `url`; every `SERVER__TOOL` name a mode lists names a configured server and fits
//! the tool-name rules of the model providers; a `SERVER__*` wildcard in a planning mode names a
//! `trusted` server). Starting the servers and asking them for their tools is the job of
//! [`crate::tool::mcp::McpTools`] (feature `mcp`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigError, ConfigErrorKind, Source};
use crate::deadline::ApprovalTimeout;
use crate::mode::{Mode, ToolRef};
use crate::tool::mcp::{
    DEFAULT_MCP_TIMEOUT, MAX_TOOL_NAME_CHARS, McpServer, McpTransport, is_valid_server_id,
    is_valid_tool_name, split_mcp_name,
};

/// One `[[mcpServers]]` entry as written.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "McpServer"))]
pub(crate) struct RawMcpServer {
    /// The server id: its tools are named `ID__TOOL`. ASCII letters, digits, `-` and `_`,
    /// without `__` and not ending in `_`; unique.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "String", pattern(r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$"))
    )]
    id: Spanned<String>,
    /// The program to start (stdio transport), found on `PATH` like a shell would.
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>", length(min = 1)))]
    command: Option<Spanned<String>>,
    /// The program's arguments (with `command` only).
    #[cfg_attr(feature = "schema", schemars(with = "Option<Vec<String>>"))]
    args: Option<Spanned<Vec<String>>>,
    /// Environment variables set for the program, on top of the host's (with `command` only).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<std::collections::BTreeMap<String, String>>")
    )]
    env: Option<Spanned<BTreeMap<String, String>>>,
    /// The server's streamable HTTP endpoint (`http://127.0.0.1:8000/mcp`), instead of
    /// `command`.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<String>", pattern(r"^https?://"))
    )]
    url: Option<Spanned<String>>,
    /// Whether the server's tool annotations (`readOnlyHint`) count: only a trusted server's
    /// read-only tools are offered by a `SERVER__*` wildcard in a planning mode. Default false.
    trusted: Option<bool>,
    /// How long starting the server, and each tool call, may take (`"30s"`, `"2m"`; default
    /// 60s): past it the call ends with an error result.
    #[cfg_attr(feature = "schema", schemars(with = "Option<super::schema::Duration>"))]
    timeout: Option<Spanned<String>>,
}

impl RawMcpServer {
    /// The id as written.
    pub(crate) fn id_text(&self) -> &str {
        self.id.get_ref()
    }
}

/// The validated servers of `raw`, pushing an error at its line and column for each entry that
/// is not valid (and leaving that entry out).
pub(crate) fn validate_servers(
    raw: Vec<RawMcpServer>,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> Vec<McpServer> {
    let err = |span: Range<usize>, message: String| {
        ConfigError::at(ConfigErrorKind::InvalidMcpServer, source, span, message)
    };
    let mut seen: HashMap<String, ()> = HashMap::new();
    let mut servers = Vec::with_capacity(raw.len());
    for entry in raw {
        let id = entry.id.get_ref().clone();
        let before = errors.len();
        if !is_valid_server_id(&id) {
            errors.push(err(
                entry.id.span(),
                format!(
                    "MCP server id `{id}` is invalid: use ASCII letters, digits, `-` and `_`, without `__` and not starting or ending in `_` (its tools are named `ID__TOOL`)"
                ),
            ));
        } else if seen.insert(id.clone(), ()).is_some() {
            errors.push(ConfigError::at(
                ConfigErrorKind::DuplicateMcpServer,
                source,
                entry.id.span(),
                format!("duplicate MCP server id `{id}`: another server already uses it"),
            ));
        }
        let id_span = entry.id.span();
        let transport = match (entry.command, entry.url) {
            (Some(command), None) => {
                if command.get_ref().trim().is_empty() {
                    errors.push(err(
                        command.span(),
                        format!("MCP server `{id}` has an empty command"),
                    ));
                }
                Some(McpTransport::Stdio {
                    command: command.into_inner(),
                    args: entry.args.map(Spanned::into_inner).unwrap_or_default(),
                    env: entry.env.map(Spanned::into_inner).unwrap_or_default(),
                })
            }
            (None, Some(url)) => {
                let text = url.get_ref();
                if !(text.starts_with("http://") || text.starts_with("https://"))
                    || text.len() <= "https://".len()
                {
                    errors.push(err(
                        url.span(),
                        format!("MCP server `{id}` has url `{text}`, which is not an http:// or https:// URL"),
                    ));
                }
                for (key, span) in [
                    ("args", entry.args.as_ref().map(Spanned::span)),
                    ("env", entry.env.as_ref().map(Spanned::span)),
                ] {
                    if let Some(span) = span {
                        errors.push(err(
                            span,
                            format!("MCP server `{id}` sets `{key}`, which only a `command` takes: its url is not a program"),
                        ));
                    }
                }
                Some(McpTransport::Http {
                    url: url.into_inner(),
                })
            }
            (Some(_), Some(url)) => {
                errors.push(err(
                    url.span(),
                    format!("MCP server `{id}` sets both `command` and `url`: set one (`command` starts a program, `url` reaches a running server)"),
                ));
                None
            }
            (None, None) => {
                errors.push(err(
                    id_span,
                    format!("MCP server `{id}` sets neither `command` nor `url`: set one (`command` starts a program, `url` reaches a running server)"),
                ));
                None
            }
        };
        let timeout = match entry.timeout {
            None => DEFAULT_MCP_TIMEOUT,
            Some(text) => match text.get_ref().parse::<ApprovalTimeout>() {
                Ok(timeout) => timeout.duration(),
                Err(e) => {
                    errors.push(err(text.span(), format!("MCP server `{id}` timeout: {e}")));
                    DEFAULT_MCP_TIMEOUT
                }
            },
        };
        if let (Some(transport), true) = (transport, errors.len() == before) {
            servers.push(
                McpServer::new(id, transport)
                    .trusted(entry.trusted.unwrap_or(false))
                    .timeout(timeout),
            );
        }
    }
    servers
}

/// The errors of the `SERVER__TOOL` names among `refs`: a server `servers` lacks, a tool part
/// that does not fit the providers' tool-name rules, and a `SERVER__*` wildcard in a planning
/// mode whose server is not trusted. `servers_valid` is false when some `[[mcpServers]]` entry
/// was refused already: its id's references are not reported again.
pub(crate) fn reference_errors(
    refs: &[ToolRef],
    modes: &[Mode],
    servers: &[McpServer],
    server_ids_written: &[String],
    source: &Source<'_>,
) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    for r in refs {
        let Some((server_id, tool)) = split_mcp_name(&r.name) else {
            continue;
        };
        let mode = &modes[r.mode.index()];
        let key = if r.in_approval {
            "requireApproval"
        } else {
            "availableTools"
        };
        let at = |kind, message: String| {
            let at = source.position(r.span.clone());
            ConfigError::placed_at(kind, source.origin, at.location, at.snippet(), message)
        };
        let Some(server) = servers.iter().find(|s| s.id() == server_id) else {
            // An entry refused for another reason is reported there.
            if !server_ids_written.iter().any(|w| w == server_id) {
                let known: Vec<String> = servers.iter().map(|s| format!("`{}`", s.id())).collect();
                errors.push(at(
                    ConfigErrorKind::UnknownMcpServer,
                    format!(
                        "mode `{}` lists `{}` in {key}, but no [[mcpServers]] entry has id `{server_id}` ({})",
                        mode.id(),
                        r.name,
                        if known.is_empty() {
                            "the config defines no MCP servers".to_owned()
                        } else {
                            format!("MCP servers: {}", known.join(", "))
                        }
                    ),
                ));
            }
            continue;
        };
        if tool == "*" {
            if mode.is_planning() && !server.is_trusted() && !r.in_approval {
                errors.push(at(
                    ConfigErrorKind::UntrustedWildcard,
                    format!(
                        "planning mode `{}` lists `{}`, a wildcard of MCP server `{server_id}`, which is not trusted: a planning mode offers an untrusted server's tools only by name (list each read-only tool), or mark the server `trusted = true` to offer its tools annotated read-only",
                        mode.id(),
                        r.name
                    ),
                ));
            }
            continue;
        }
        if !is_valid_tool_name(&r.name) {
            errors.push(at(
                ConfigErrorKind::InvalidMcpToolName,
                format!(
                    "mode `{}` lists `{}` in {key}, which no model can call: a tool name has 1 to {MAX_TOOL_NAME_CHARS} ASCII letters, digits, `_` and `-` (a server's tool whose name does not fit is offered under its mapped name: `check --connect` lists them)",
                    mode.id(),
                    r.name
                ),
            ));
        }
    }
    errors
}
