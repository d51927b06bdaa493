//! The MCP servers of a config, for the commands that run a session (`run`, `decide`,
//! `continue`) and for `check --connect`: started once per process on a runtime of their own
//! ([`McpTools`]), so they outlive the command's runtime and stop with the process.

use std::path::Path;
use std::sync::OnceLock;

use agent_controller::display::neutralize_line;
use agent_controller::tool::mcp::McpTools;
use agent_controller::{ModeGraph, ToolRegistry};

use crate::cli::exit::Failure;

/// The runtime the servers' connections live on, and the servers; started once.
static SERVERS: OnceLock<(tokio::runtime::Runtime, McpTools)> = OnceLock::new();

/// Starts the MCP servers `graph`'s modes need, each given `workspace` as its root, and adds
/// their tools to `tools`; warnings on stderr for a server that did not start (its listed tools
/// report it when called), a tool refused, and a listed tool no server offers. Nothing is
/// started for a graph that needs no server.
///
/// `named` tells whether the user named the config (`--config`): the workspace's own
/// `config/modes.toml` may come from a cloned repository, and its `[[mcpServers]]` are programs
/// that would run with the user's rights, so they are started only from a config the user
/// named.
///
/// # Errors
/// A config not named that needs servers (exit 2); a runtime that cannot be built.
pub(crate) fn start(
    graph: &ModeGraph,
    workspace: &Path,
    named: bool,
    tools: &mut ToolRegistry,
) -> Result<(), Failure> {
    let needed = graph.needed_mcp_servers();
    if needed.is_empty() {
        return Ok(());
    }
    if !named {
        return Err(Failure::invalid(format!(
            "the workspace's config defines [[mcpServers]] ({}): each is a program that runs with your rights, so they start only from a config you name: pass --config",
            needed
                .iter()
                .map(|s| format!("`{}`", s.id()))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mcp = started(graph, workspace)?;
    for report in mcp.reports() {
        match &report.tools {
            Ok(_) => {}
            Err(e) => note!(
                "warning: {}; its tools answer every call with this error",
                neutralize_line(&e.to_string())
            ),
        }
        for refused in &report.refused {
            note!(
                "warning: MCP server `{}` tool refused: {}",
                report.id,
                neutralize_line(refused)
            );
        }
    }
    for (mode, name) in missing(graph, mcp) {
        note!("warning: mode `{mode}` lists `{name}`, which its MCP server does not offer");
    }
    mcp.register(tools).map_err(Failure::invalid)
}

/// The servers of `graph`, started on first use.
pub(crate) fn started(graph: &ModeGraph, workspace: &Path) -> Result<&'static McpTools, Failure> {
    if let Some((_, mcp)) = SERVERS.get() {
        return Ok(mcp);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mcp")
        .enable_all()
        .build()
        .map_err(Failure::runtime)?;
    let mcp = runtime.block_on(McpTools::start(
        graph.needed_mcp_servers(),
        graph.mcp_tool_names(),
        workspace,
    ));
    Ok(&SERVERS.get_or_init(|| (runtime, mcp)).1)
}

/// The `SERVER__TOOL` names a mode lists by name that a started server does not offer, with
/// the mode's id.
pub(crate) fn missing(graph: &ModeGraph, mcp: &McpTools) -> Vec<(String, String)> {
    let started: Vec<&str> = mcp
        .reports()
        .iter()
        .filter(|r| r.tools.is_ok())
        .map(|r| r.id.as_str())
        .collect();
    let mut missing = Vec::new();
    for mode in graph.modes() {
        for name in mode.available_tools().unwrap_or_default() {
            let Some((server, _)) = agent_controller::tool::mcp::split_mcp_name(name) else {
                continue;
            };
            if started.contains(&server) && !name.ends_with('*') && !mcp.offers(name) {
                missing.push((mode.id().to_owned(), name.to_string()));
            }
        }
    }
    missing
}
