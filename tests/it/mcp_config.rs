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

/// A registry that stands in for a trusted MCP server `fs`: two read-only tools and one that
/// writes, named as the client names a server's tools.
#[cfg(feature = "testing")]
fn stand_in_server() -> agent_controller::ToolRegistry {
    use agent_controller::{Tool, ToolContext, ToolOutput, tool::ToolAccess};
    struct StandIn(&'static str, ToolAccess);
    #[agent_controller::async_trait]
    impl Tool for StandIn {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> String {
            format!("{} (MCP server `fs`)", self.0)
        }
        fn input_schema(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn access(&self) -> ToolAccess {
            self.1
        }
        async fn execute(&self, _: &serde_json::Value, _: &ToolContext<'_>) -> ToolOutput {
            ToolOutput::ok(self.0)
        }
    }
    let mut tools = agent_controller::ToolRegistry::new();
    for (name, access) in [
        ("fs__read_text_file", ToolAccess::ReadOnly),
        ("fs__write_file", ToolAccess::Writes),
        ("fs__list_directory", ToolAccess::ReadOnly),
    ] {
        tools
            .register(std::sync::Arc::new(StandIn(name, access)))
            .expect("register");
    }
    tools
}

/// The property tests know MCP tools: the session follows the reference model on a config
/// whose modes offer a stand-in server's tools by name and by wildcard (a planning mode's
/// wildcard of a trusted server: its read-only tools only), with approval by name and by
/// wildcard, and a name the server lacks (never offered).
#[cfg(feature = "testing")]
#[test]
fn a_session_with_mcp_tools_follows_the_reference_model() {
    use agent_controller::testing::Check;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mcp.toml");
    std::fs::write(
        &path,
        r#"
[[mcpServers]]
id = "fs"
command = "stand-in"
trusted = true

[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["fs__list_directory", "fs__format_disk", "fs__*", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["fs__*"]
requireApproval = ["fs__*"]
"#,
    )
    .expect("config");
    let report = Check::new(&path)
        .cases(4)
        .max_states(30)
        .without_regressions()
        .run(|setup| setup.builder().tools(stand_in_server()).build())
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{report}");
}

#[test]
fn the_guides_config_is_valid() {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/guide/mcp.md"))
        .expect("guide");
    let start = guide.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = start + guide[start..].find("```").expect("its end");
    let graph = config::parse(&guide[start..end], "src/guide/mcp.md").expect("valid");
    assert_eq!(graph.mcp_servers()[0].id(), "fs");
    let build = graph.mode(graph.get("build").expect("build"));
    assert!(build.requires_approval("fs__move_file"));
}

#[cfg(feature = "cli")]
#[test]
fn verify_runs_an_mcp_config_with_its_tools_stubbed_or_absent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/guide/mcp.md"))
        .expect("guide");
    let start = guide.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = start + guide[start..].find("```").expect("its end");
    let path = dir.path().join("mcp.toml");
    std::fs::write(&path, &guide[start..end]).expect("config");
    for stubs in [
        &[][..],
        &[
            "--tool",
            "fs__read_text_file:read-only",
            "--tool",
            "fs__write_file",
        ][..],
    ] {
        let out = crate::common::agent_controller()
            .args(["verify", "--cases", "4"])
            .arg(&path)
            .args(stubs)
            .current_dir(dir.path())
            .output()
            .expect("verify");
        assert!(
            out.status.success(),
            "{stubs:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Review finding 5: the config fingerprint, which keys workspace allowances, left out the MCP
/// servers. Each part of a server that decides what its tools do (id, command, arguments,
/// environment, URL, trust) changes it now; the timeout does not, and a config without servers
/// is not one with them.
#[test]
fn the_fingerprint_counts_what_decides_what_an_mcp_tool_runs() {
    let modes = "[[modes]]\nid = \"build\"\ndefault = true\n";
    let fingerprint = |servers: &str| {
        config::parse(&format!("{servers}{modes}"), "modes.toml")
            .expect("valid")
            .fingerprint()
    };
    let base = fingerprint(SERVERS);
    assert_eq!(base, fingerprint(SERVERS), "the same config");
    assert_eq!(
        base,
        fingerprint(&SERVERS.replace("timeout = \"30s\"", "timeout = \"45s\"")),
        "a timeout decides no tool"
    );
    let changed = [
        SERVERS.replace("command = \"npx\"", "command = \"evil\""),
        SERVERS.replace("\".\"]", "\"/\"]"),
        SERVERS.replace("\"production\"", "\"development\""),
        SERVERS.replace("NODE_ENV", "NODE_OPTIONS"),
        SERVERS.replace("127.0.0.1:8000", "127.0.0.1:8001"),
        SERVERS.replace("trusted = true", "trusted = false"),
        SERVERS.replace("id = \"docs\"", "id = \"web\""),
        SERVERS[..SERVERS
            .find("[[mcpServers]]\nid = \"docs\"")
            .expect("second")]
            .to_owned(),
        String::new(),
    ];
    for (k, servers) in changed.iter().enumerate() {
        assert_ne!(base, fingerprint(servers), "change {k}: {servers}");
    }
}
