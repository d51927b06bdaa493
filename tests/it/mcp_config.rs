//! The `[[mcpServers]]` table and the `SERVER__TOOL` names of a config (issue 24): checked from
//! the text alone, each error at its line and column; no server is started.

use agent_controller::config::{self, ConfigErrorKind};
use agent_controller::tool::mcp::McpTransport;

const SERVERS: &str = r#"
[[mcpServers]]
id = "fs"
command = "npx"
args = ["@modelcontextprotocol/server-filesystem", "."]
env = { NODE_ENV = "production" }

[[mcpServers]]
id = "docs"
url = "http://127.0.0.1:8000/mcp"
trusted = true
timeout = "30s"
"#;

fn errors(modes: &str) -> Vec<(ConfigErrorKind, usize, usize, String)> {
    let text = format!("{SERVERS}{modes}");
    config::check(&text, "modes.toml")
        .into_iter()
        .map(|e| {
            let at = e.location().expect("located");
            (e.kind(), at.line, at.column, e.message().to_owned())
        })
        .collect()
}

#[test]
fn the_issues_config_is_valid_and_keeps_its_servers() {
    let text = format!(
        "{SERVERS}{}",
        r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["fs__read_text_file", "fs__list_directory", "docs__*", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["fs__*", "read_file"]
requireApproval = ["fs__write_file"]
"#
    );
    let graph = config::parse(&text, "modes.toml").expect("valid");
    let servers = graph.mcp_servers();
    assert_eq!(servers.len(), 2);
    assert!(
        matches!(servers[0].transport(), McpTransport::Stdio { command, args, env }
        if command == "npx" && args.len() == 2 && env["NODE_ENV"] == "production")
    );
    assert!(!servers[0].is_trusted());
    assert!(matches!(servers[1].transport(), McpTransport::Http { url } if url.ends_with("/mcp")));
    assert!(servers[1].is_trusted());
    assert_eq!(servers[1].call_timeout().as_secs(), 30);
    // The MCP names are checked against the servers, not the registry.
    assert!(
        graph
            .unknown_tools_among(&["read_file", "write_plan"])
            .is_empty()
    );
    let build = graph.mode(graph.get("build").expect("build"));
    assert!(build.requires_approval("fs__write_file"));
    assert!(!build.requires_approval("fs__read_text_file"));
    assert_eq!(graph.needed_mcp_servers().len(), 2);
}

#[test]
fn a_name_of_a_server_the_config_lacks_is_an_error_at_its_place() {
    let found =
        errors("[[modes]]\nid = \"build\"\navailableTools = [\"read_file\", \"git__status\"]\n");
    assert_eq!(found.len(), 1, "{found:?}");
    let (kind, line, column, message) = &found[0];
    assert_eq!(*kind, ConfigErrorKind::UnknownMcpServer);
    assert_eq!((*line, *column), (15, 32));
    assert!(
        message.contains("no [[mcpServers]] entry has id `git`"),
        "{message}"
    );
    assert!(message.contains("`fs`, `docs`"), "{message}");
}

#[test]
fn a_wildcard_of_an_untrusted_server_in_a_planning_mode_is_refused() {
    let found = errors(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"fs__*\", \"submit_plan\"]\n[[modes]]\nid = \"build\"\n",
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, ConfigErrorKind::UntrustedWildcard);
    assert_eq!((found[0].1, found[0].2), (16, 19));
    // A trusted server's wildcard is fine there (it offers only the read-only tools).
    assert!(errors(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"docs__*\", \"submit_plan\"]\n[[modes]]\nid = \"build\"\n",
    )
    .is_empty());
}

#[test]
fn a_tool_name_no_provider_accepts_is_an_error() {
    let long = format!("fs__{}", "x".repeat(61));
    let found = errors(&format!(
        "[[modes]]\nid = \"build\"\navailableTools = [\"fs__read.file\", \"{long}\"]\n"
    ));
    let kinds: Vec<_> = found.iter().map(|e| e.0).collect();
    assert_eq!(kinds, [ConfigErrorKind::InvalidMcpToolName; 2], "{found:?}");
}

#[test]
fn approval_of_a_tool_a_wildcard_offers_is_allowed_but_not_of_another_server() {
    assert!(errors("[[modes]]\nid = \"build\"\navailableTools = [\"fs__*\"]\nrequireApproval = [\"fs__write_file\", \"fs__*\"]\n").is_empty());
    let found = errors(
        "[[modes]]\nid = \"build\"\navailableTools = [\"fs__*\"]\nrequireApproval = [\"docs__search\"]\n",
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, ConfigErrorKind::ApprovalToolNotOffered);
}

#[test]
fn bad_server_entries_are_errors_at_their_place() {
    let cases: &[(&str, ConfigErrorKind, &str)] = &[
        (
            "[[mcpServers]]\nid = \"a__b\"\ncommand = \"x\"\n",
            ConfigErrorKind::InvalidMcpServer,
            "is invalid",
        ),
        (
            "[[mcpServers]]\nid = \"a\"\n",
            ConfigErrorKind::InvalidMcpServer,
            "neither `command` nor `url`",
        ),
        (
            "[[mcpServers]]\nid = \"a\"\ncommand = \"x\"\nurl = \"http://h/mcp\"\n",
            ConfigErrorKind::InvalidMcpServer,
            "both",
        ),
        (
            "[[mcpServers]]\nid = \"a\"\nurl = \"ftp://h\"\n",
            ConfigErrorKind::InvalidMcpServer,
            "not an http",
        ),
        (
            "[[mcpServers]]\nid = \"a\"\nurl = \"http://h/mcp\"\nargs = [\"x\"]\n",
            ConfigErrorKind::InvalidMcpServer,
            "only a `command` takes",
        ),
        (
            "[[mcpServers]]\nid = \"a\"\ncommand = \"x\"\ntimeout = \"soon\"\n",
            ConfigErrorKind::InvalidMcpServer,
            "timeout",
        ),
        (
            "[[mcpServers]]\nid = \"a\"\ncommand = \"x\"\n[[mcpServers]]\nid = \"a\"\ncommand = \"y\"\n",
            ConfigErrorKind::DuplicateMcpServer,
            "duplicate",
        ),
    ];
    for (servers, kind, says) in cases {
        let text = format!("{servers}[[modes]]\nid = \"build\"\n");
        let found = config::check(&text, "modes.toml");
        assert_eq!(found.len(), 1, "{servers}: {found:?}");
        assert_eq!(found[0].kind(), *kind, "{servers}");
        assert!(found[0].message().contains(says), "{servers}: {}", found[0]);
        assert!(found[0].location().is_some(), "{servers}");
    }
    // An unknown key is refused with its place, like anywhere in the config.
    let found = config::check(
        "[[mcpServers]]\nid = \"a\"\ncomand = \"x\"\n[[modes]]\nid = \"b\"\n",
        "modes.toml",
    );
    assert!(!found.is_empty());
    assert!(found[0].to_string().contains("comand"), "{}", found[0]);
}
