//! The MCP servers a client gives a session (`mcpServers` of `session/new` and `session/load`),
//! as [`McpServer`]s the session starts (feature `mcp`; [`super::AcpAgent::with_mcp`]).
//!
//! ACP has every agent take stdio servers; HTTP and SSE ones are what an agent advertises in
//! `mcpCapabilities`, and this one advertises neither, so they are refused. A server's name is
//! the `NAME` of its tools' `NAME__TOOL` names: it must be a valid server id
//! ([`crate::tool::mcp::is_valid_server_id`]) and used once. Like a config's servers, the
//! client's are not `trusted`: their tools count as tools that write, whatever they claim.

use std::collections::{BTreeMap, HashSet};

use agent_client_protocol::v1::schema::McpServer as ClientServer;

use crate::mode::ModeGraph;
use crate::tool::mcp::{McpServer, McpTransport, is_valid_server_id};

/// The servers `given` as the session starts them, or why one is refused (the first such, in
/// the order given), for the client to read.
pub(crate) fn client_servers(given: &[ClientServer]) -> Result<Vec<McpServer>, String> {
    let mut names = HashSet::new();
    let mut servers = Vec::with_capacity(given.len());
    for server in given {
        let ClientServer::Stdio(stdio) = server else {
            let name = match server {
                ClientServer::Http(http) => format!("`{}` (HTTP)", http.name),
                ClientServer::Sse(sse) => format!("`{}` (SSE)", sse.name),
                _ => "of a transport this agent does not know".to_owned(),
            };
            return Err(format!(
                "MCP server {name} is refused: this agent takes stdio servers only (its \
                 mcpCapabilities name neither http nor sse)"
            ));
        };
        let name = &stdio.name;
        if !is_valid_server_id(name) {
            return Err(format!(
                "MCP server name `{name}` is refused: its tools are named NAME__TOOL, so use \
                 ASCII letters, digits, `-` and `_`, without `__`"
            ));
        }
        if !names.insert(name.as_str()) {
            return Err(format!(
                "MCP server name `{name}` is given twice: each server's tools need a name of \
                 their own"
            ));
        }
        let Some(command) = stdio.command.to_str() else {
            return Err(format!(
                "MCP server `{name}`: its command is not UTF-8 text"
            ));
        };
        let env: BTreeMap<String, String> = stdio
            .env
            .iter()
            .map(|v| (v.name.clone(), v.value.clone()))
            .collect();
        let transport = McpTransport::Stdio {
            command: command.to_owned(),
            args: stdio.args.clone(),
            env,
        };
        servers.push(McpServer::new(name.as_str(), transport));
    }
    Ok(servers)
}

/// Refuses a client's server named like one of the config's `[[mcpServers]]` entries: the
/// config's `NAME__TOOL` names (in `availableTools`, `requireApproval`, rules) mean that
/// entry's program, not the client's.
pub(crate) fn check_names(servers: &[McpServer], graph: &ModeGraph) -> Result<(), String> {
    match servers.iter().find(|s| graph.mcp_server(s.id()).is_some()) {
        Some(clash) => Err(format!(
            "MCP server name `{0}` is refused: the config has an [[mcpServers]] entry `{0}`, \
             and the config's `{0}__TOOL` names mean that entry's tools; give the client's \
             server another name",
            clash.id()
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{
        EnvVariable, McpServerHttp, McpServerSse, McpServerStdio,
    };

    use super::*;

    fn stdio(name: &str) -> ClientServer {
        ClientServer::Stdio(McpServerStdio::new(name, "node").args(vec!["server.js".into()]))
    }

    #[test]
    fn a_stdio_server_is_started_as_given() {
        let given = ClientServer::Stdio(
            McpServerStdio::new("fs", "node")
                .args(vec!["server.js".into(), ".".into()])
                .env(vec![EnvVariable::new("TOKEN", "t")]),
        );
        let servers = client_servers(&[given]).expect("taken");
        assert_eq!(servers.len(), 1);
        assert_eq!(servers[0].id(), "fs");
        assert!(!servers[0].is_trusted(), "a client's server is not trusted");
        let McpTransport::Stdio { command, args, env } = servers[0].transport() else {
            panic!("stdio");
        };
        assert_eq!(command, "node");
        assert_eq!(args, &["server.js", "."]);
        assert_eq!(env.get("TOKEN").map(String::as_str), Some("t"));
    }

    #[test]
    fn other_transports_bad_names_and_names_given_twice_are_refused() {
        let http = ClientServer::Http(McpServerHttp::new("web", "http://127.0.0.1:1/mcp"));
        let sse = ClientServer::Sse(McpServerSse::new("old", "http://127.0.0.1:1/sse"));
        for (given, says) in [
            (
                vec![http],
                "`web` (HTTP) is refused: this agent takes stdio servers only",
            ),
            (vec![sse], "`old` (SSE) is refused"),
            (vec![stdio("a b")], "name `a b` is refused"),
            (vec![stdio("x__y")], "name `x__y` is refused"),
            (vec![stdio("")], "name `` is refused"),
            (vec![stdio("fs"), stdio("fs")], "`fs` is given twice"),
        ] {
            let refused = client_servers(&given).expect_err("refused");
            assert!(refused.contains(says), "{refused}");
        }
        assert_eq!(client_servers(&[]).map(|s| s.len()), Ok(0));
    }

    #[test]
    fn a_name_the_configs_servers_use_is_refused() {
        let graph = crate::config::parse(
            "[[mcpServers]]\nid = \"fs\"\ncommand = \"node\"\n\n[[modes]]\nid = \"build\"\n",
            "m.toml",
        )
        .expect("config");
        let given = client_servers(&[stdio("fs")]).expect("taken");
        let refused = check_names(&given, &graph).expect_err("refused");
        assert!(refused.contains("entry `fs`"), "{refused}");
        let other = client_servers(&[stdio("github")]).expect("taken");
        assert_eq!(check_names(&other, &graph), Ok(()));
    }
}
