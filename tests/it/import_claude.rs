//! `import claude` (issue 42): Claude Code's `.claude/settings.json` permissions and
//! `.claude/agents/*.md` subagents as a modes TOML that passes `check`, whose `explain` gives
//! the verdicts Claude Code documents (deny beats ask beats allow; edits ask in the `default`
//! mode; `Read(./.env)` refused), with what has no tool here (Bash, WebFetch, MCP) reported.

use std::sync::Arc;

use agent_controller::explain::Outcome;
use agent_controller::import::{ImportError, SourceFile, claude_code, read_claude_code};
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{AgentController, ToolRegistry, config};
use serde_json::json;

use crate::common::{Workspace, fixture, read_fixture};

fn check_errors(toml: &str) -> Vec<String> {
    let tools = ToolRegistry::with_workspace_tools();
    let mut errors = config::check_with_tools(toml, "modes.toml", |t| tools.knows(t));
    errors.extend(config::rule_errors(toml, "modes.toml", &tools));
    errors.iter().map(ToString::to_string).collect()
}

fn verdicts(toml: &str) -> impl Fn(&str, &str, serde_json::Value) -> Outcome {
    let graph = config::parse(toml, "modes.toml").expect("parses");
    let ws = Workspace::new();
    let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .build()
        .expect("controller");
    move |mode, tool, args| {
        let _keep = &ws;
        controller
            .explain(mode, tool, args)
            .expect("explained")
            .outcome
    }
}

fn subagent(toml: &str, id: &str) -> toml::Table {
    let parsed: toml::Table = toml.parse().expect("toml");
    parsed["subagents"]
        .as_array()
        .expect("subagents")
        .iter()
        .map(|t| t.as_table().expect("table").clone())
        .find(|t| t["id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("no subagent `{id}` in\n{toml}"))
}

fn settings(text: &str) -> Vec<SourceFile> {
    vec![SourceFile::new(".claude/settings.json", text)]
}

#[test]
fn a_claude_code_project_imports_as_a_mode_that_passes_check_and_keeps_the_documented_verdicts() {
    let imported = read_claude_code(&fixture("import/claude")).expect("imported");
    let toml = &imported.toml;
    assert!(
        check_errors(toml).is_empty(),
        "{:?}\n{toml}",
        check_errors(toml)
    );
    let outcome = verdicts(toml);
    let write = |path: &str| json!({ "path": path, "content": "x" });
    let read = |path: &str| json!({ "path": path });

    // `ask: ["Edit(docs/**)"]` asks; `allow: ["Edit(src/**)"]` runs; any other edit asks, as
    // Claude Code's `default` mode does; `deny: ["Edit(/config/production.json)"]` refuses.
    assert_eq!(
        outcome("build", "write_file", write("docs/guide.md")),
        Outcome::Ask
    );
    assert_eq!(
        outcome("build", "write_file", write("src/main.rs")),
        Outcome::Allow
    );
    assert_eq!(
        outcome("build", "write_file", write("README.md")),
        Outcome::Ask
    );
    assert_eq!(
        outcome("build", "write_file", write("config/production.json")),
        Outcome::Deny
    );
    // `deny: ["Read(./.env)", "Read(./.env.*)", "Read(./secrets/**)"]`; other reads run.
    assert_eq!(outcome("build", "read_file", read(".env")), Outcome::Deny);
    assert_eq!(
        outcome("build", "read_file", read(".env.local")),
        Outcome::Deny
    );
    assert_eq!(
        outcome("build", "read_file", read("secrets/a/key.pem")),
        Outcome::Deny
    );
    assert_eq!(
        outcome("build", "read_file", read("src/main.rs")),
        Outcome::Allow
    );
    // A path the model spells around the rule still leads to `.env`.
    assert_eq!(
        outcome("build", "read_file", read("src/../.env")),
        Outcome::Deny
    );

    // Subagents: tools mapped (Read -> read_file, Glob -> list_files, Edit -> write_file), a
    // missing `tools` inherits every tool, the body is the system prompt.
    let reviewer = subagent(toml, "code-reviewer");
    let tools: Vec<&str> = reviewer["availableTools"]
        .as_array()
        .expect("present")
        .iter()
        .map(|v| v.as_str().expect("present"))
        .collect();
    assert_eq!(tools, ["read_file", "list_files"]);
    assert!(
        reviewer["instructions"]
            .as_str()
            .expect("present")
            .starts_with("You are a senior code reviewer")
    );
    assert!(!reviewer.contains_key("defaultModelId"), "model: inherit");
    let debugger = subagent(toml, "debugger");
    assert!(
        debugger["availableTools"]
            .as_array()
            .expect("present")
            .iter()
            .any(|t| t.as_str() == Some("write_file"))
    );
    assert!(!subagent(toml, "test-runner").contains_key("availableTools"));

    // Reported, never dropped: each with why.
    let reported = |needle: &str| {
        let line = imported
            .not_carried
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("`{needle}` is not reported: {:#?}", imported.not_carried));
        assert!(toml.contains(&format!("# - {line}")), "{line}");
        line.clone()
    };
    let rm = reported("Bash(rm:*)");
    assert!(rm.contains("no shell tool"), "{rm}");
    assert!(rm.contains("deny"), "{rm}");
    reported("Bash(git diff:*)");
    reported("WebFetch(domain:docs.anthropic.com)");
    assert!(reported("Read(~/.zshrc)").contains("outside the workspace"));
    reported("mcp__github__delete_repository");
    reported("additionalDirectories");
    reported("model `sonnet`");
    assert!(reported("`Grep`").contains("code-reviewer"));
}

#[test]
fn deny_beats_ask_beats_allow_as_claude_code_documents() {
    let imported = claude_code(
        &settings(
            r#"{"permissions": {
                "allow": ["Edit", "Read"],
                "ask": ["Edit(docs/**)"],
                "deny": ["Edit(docs/secret.md)", "Read(*.pem)"],
                "defaultMode": "acceptEdits"
            }}"#,
        ),
        &[],
    )
    .expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    let outcome = verdicts(&imported.toml);
    let write = |path: &str| json!({ "path": path, "content": "x" });
    assert_eq!(
        outcome("build", "write_file", write("docs/secret.md")),
        Outcome::Deny
    );
    assert_eq!(
        outcome("build", "write_file", write("docs/a.md")),
        Outcome::Ask
    );
    assert_eq!(
        outcome("build", "write_file", write("src/a.rs")),
        Outcome::Allow
    );
    // A slash-less pattern matches at any depth (gitignore's rule).
    assert_eq!(
        outcome("build", "read_file", json!({"path": "certs/a/key.pem"})),
        Outcome::Deny
    );

    // A catch-all ask beats every allow on the tool, in Claude Code as here: the allow that
    // could never decide is left out and reported.
    let imported = claude_code(
        &settings(r#"{"permissions": {"allow": ["Edit(src/**)"], "ask": ["Edit"]}}"#),
        &[],
    )
    .expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    assert_eq!(
        verdicts(&imported.toml)("build", "write_file", write("src/a.rs")),
        Outcome::Ask
    );
    assert!(
        imported
            .not_carried
            .iter()
            .any(|l| l.contains("Edit(src/**)") && l.contains("never")),
        "{:#?}",
        imported.not_carried
    );
}

#[test]
fn plan_as_the_default_mode_is_a_planning_mode_that_hands_over() {
    let imported = claude_code(
        &settings(r#"{"permissions": {"defaultMode": "plan", "deny": ["Read(./.env)"]}}"#),
        &[],
    )
    .expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    let graph = config::parse(&imported.toml, "modes.toml").expect("parses");
    assert_eq!(graph.default_mode().id(), "plan");
    assert!(graph.default_mode().is_planning());
    let outcome = verdicts(&imported.toml);
    assert_eq!(
        outcome("plan", "write_file", json!({"path": "a", "content": ""})),
        Outcome::Unavailable
    );
    assert_eq!(
        outcome("plan", "read_file", json!({"path": ".env"})),
        Outcome::Deny
    );
}

#[test]
fn malformed_huge_or_other_formats_are_errors_at_their_place() {
    let e = claude_code(
        &settings("{\n  \"permissions\": {\n    \"allow\": [\"Read\",]\n  }\n}\n"),
        &[],
    )
    .expect_err("trailing comma: not JSON");
    assert!(matches!(e, ImportError::Malformed { line: 3, .. }), "{e}");
    assert!(e.to_string().starts_with(".claude/settings.json:3:"), "{e}");
    let e = claude_code(&settings("{\"permissions\": {\"allow\": \"Read\"}}"), &[])
        .expect_err("a string, not a list");
    assert!(matches!(e, ImportError::Malformed { .. }), "{e}");
    // OpenCode's config, Roo Code's modes: another format.
    let e = claude_code(
        &settings(&read_fixture("import/opencode/opencode.jsonc")),
        &[],
    )
    .expect_err("JSONC");
    assert!(matches!(e, ImportError::Malformed { .. }), "{e}");
    let e = claude_code(&settings(&read_fixture("import/roomodes.json")), &[]).expect_err("roo");
    assert!(matches!(e, ImportError::Empty { .. }), "{e}");
    // A subagent without its `name`, a broken frontmatter at the file's own line.
    let agent = |text: &str| {
        claude_code(&[], &[SourceFile::new(".claude/agents/a.md", text)]).expect_err("refused")
    };
    let e = agent("---\ndescription: no name\n---\nbody\n");
    assert!(e.to_string().contains("name"), "{e}");
    let e = agent("---\nname: a\ndescription: x\ntools: [Read\n---\nbody\n");
    assert!(
        matches!(e, ImportError::Malformed { line: 4..=5, .. }),
        "{e}"
    );
    let huge = format!(
        "{{\"permissions\": {{\"allow\": [\"{}\"]}}}}",
        "a".repeat(agent_controller::import::MAX_IMPORT_BYTES)
    );
    assert!(matches!(
        claude_code(&settings(&huge), &[]).expect_err("huge"),
        ImportError::TooLarge { .. }
    ));
}

/// Hostile text (an escape sequence in a rule, a line break in a subagent's name) cannot break
/// out of a comment or a string: the output still passes `check`, the name is an id here.
#[test]
fn hostile_text_stays_inside_its_comment_and_its_string() {
    let imported = claude_code(
        &settings(
            r#"{"permissions": {"deny": ["Edit(docs/\u001b[2J\n[[modes]]\nid = \"x\"/**)"]}}"#,
        ),
        &[SourceFile::new(
            ".claude/agents/a.md",
            "---\nname: \"evil\\n[[modes]]\"\ndescription: d\n---\nbody\n",
        )],
    )
    .expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    let graph = config::parse(&imported.toml, "modes.toml").expect("parses");
    assert_eq!(graph.len(), 1, "{}", imported.toml);
    assert!(!imported.toml.contains('\u{1b}'));
    assert!(
        imported
            .not_carried
            .iter()
            .any(|l| l.contains("is named `evil---modes`")),
        "{:#?}",
        imported.not_carried
    );
}

/// The CLI finds `.claude/` in the directory given, prints the TOML (which `check` passes) and
/// reports on stderr; a malformed file is exit 2 with nothing on stdout.
#[cfg(feature = "cli")]
#[test]
fn import_claude_prints_a_config_check_passes() {
    let stderr = crate::common::cli::import_round_trip(
        "claude",
        &fixture("import/claude"),
        "not carried over: deny rule `Bash(rm:*)`",
        "settings.json",
        "{\"permissions\": [",
    );
    assert!(!stderr.is_empty());
}

/// A repository's agent folder is hostile: a symlink in it (to a file outside, say) is not
/// followed but reported, and the rest imports.
#[cfg(unix)]
#[test]
fn a_symlinked_agent_file_is_skipped_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let agents = dir.path().join(".claude/agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    let outside = tempfile::NamedTempFile::new().expect("outside");
    std::fs::write(
        outside.path(),
        "---\nname: secret\ndescription: SECRET TEXT\n---\nSECRET\n",
    )
    .expect("write");
    std::os::unix::fs::symlink(outside.path(), agents.join("link.md")).expect("symlink");
    std::fs::write(
        agents.join("ok.md"),
        "---\nname: ok\ndescription: fine\n---\nbody\n",
    )
    .expect("write");
    let imported = read_claude_code(dir.path()).expect("imported");
    assert!(!imported.toml.contains("SECRET"), "{}", imported.toml);
    subagent(&imported.toml, "ok");
    assert!(
        imported
            .not_carried
            .iter()
            .any(|l| l.contains("link.md") && l.contains("not a regular file")),
        "{:#?}",
        imported.not_carried
    );
}

/// Two subagents whose names rename to the same id (`code.review`, `code/review`) stay two,
/// the second with a `-2`-style suffix, each rename reported; a name valid as it is
/// (`code-review`) keeps its id.
#[test]
fn subagents_renamed_to_the_same_id_stay_distinct_and_are_reported() {
    let agents: Vec<SourceFile> = ["code-review.md", "code-review-2.md", "code-review-3.md"]
        .into_iter()
        .map(|name| {
            SourceFile::new(
                format!(".claude/agents/{name}"),
                read_fixture(&format!("import/same-ids/{name}")),
            )
        })
        .collect();
    let imported = claude_code(&[], &agents).expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    assert_eq!(
        subagent(&imported.toml, "code-review")["description"].as_str(),
        Some("Valid as it is")
    );
    let dot = subagent(&imported.toml, "code-review-2");
    let slash = subagent(&imported.toml, "code-review-3");
    assert_eq!(dot["description"].as_str(), Some("Reviews code"));
    assert_eq!(slash["description"].as_str(), Some("Reviews code too"));
    for (name, id) in [
        ("code.review", "code-review-2"),
        ("code/review", "code-review-3"),
    ] {
        assert!(
            imported
                .not_carried
                .iter()
                .any(|l| l.contains(&format!("subagent `{name}` is named `{id}`"))),
            "{name}: {:?}",
            imported.not_carried
        );
    }
}
