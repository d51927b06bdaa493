//! `import opencode` (issue 42): OpenCode's `opencode.json(c)` agents and `.opencode/agent/*.md`
//! files as a modes TOML that passes `check`, whose `explain` gives the verdicts OpenCode
//! documents (`permission.edit` `allow`/`ask`/`deny`, `tools` switched off), with everything
//! not carried over (bash patterns, webfetch, temperature, `{file:...}` prompts) reported.

use std::sync::Arc;

use agent_controller::explain::Outcome;
use agent_controller::import::{ImportError, Imported, SourceFile, opencode, read_opencode};
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{AgentController, ToolRegistry, config};
use serde_json::json;

use crate::common::{Workspace, fixture, read_fixture};

/// The errors `check` would print for `toml` (none: it passes).
fn check_errors(toml: &str) -> Vec<String> {
    let tools = ToolRegistry::with_workspace_tools();
    let mut errors = config::check_with_tools(toml, "modes.toml", |t| tools.knows(t));
    errors.extend(config::rule_errors(toml, "modes.toml", &tools));
    errors.iter().map(ToString::to_string).collect()
}

/// What `explain` says of `tool` with `args` in mode `mode` of the imported `toml`.
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

fn table(toml: &str, key: &str, id: &str) -> toml::Table {
    let parsed: toml::Table = toml.parse().expect("toml");
    parsed[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}"))
        .iter()
        .map(|t| t.as_table().expect("table").clone())
        .find(|t| t["id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("no {key} `{id}` in\n{toml}"))
}

fn strings(value: &toml::Value) -> Vec<&str> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_str().expect("string"))
        .collect()
}

#[test]
fn an_opencode_project_imports_as_modes_that_pass_check_and_keep_the_documented_verdicts() {
    let imported: Imported = read_opencode(&fixture("import/opencode")).expect("imported");
    let toml = &imported.toml;
    assert!(
        check_errors(toml).is_empty(),
        "{:?}\n{toml}",
        check_errors(toml)
    );
    let outcome = verdicts(toml);
    let write = |path: &str| json!({ "path": path, "content": "x" });

    // `permission.edit`: the agent's `allow` beats the config's `ask`; `deny` refuses; an agent
    // without its own asks as the config says.
    assert_eq!(
        outcome("build", "write_file", write("src/a.rs")),
        Outcome::Allow
    );
    assert_eq!(
        outcome("security-auditor", "write_file", write("src/a.rs")),
        Outcome::Deny
    );
    assert_eq!(
        outcome("docs-writer", "write_file", write("docs/a.md")),
        Outcome::Ask
    );
    // `tools: { write: false, edit: false }`: the tool is not offered at all.
    assert_eq!(
        outcome("plan", "write_file", write("src/a.rs")),
        Outcome::Unavailable
    );
    assert_eq!(
        outcome("plan", "read_file", json!({"path": "src/a.rs"})),
        Outcome::Allow
    );

    // Modes and subagent types by `mode`: primary, subagent, and `all` (the default) both.
    let build = table(toml, "modes", "build");
    assert!(!build.contains_key("instructions"), "{build:?}");
    assert_eq!(
        build["defaultModelId"].as_str(),
        Some("anthropic/claude-sonnet-4-20250514"),
        "the config's `model` is the primary agents' default"
    );
    let plan = table(toml, "modes", "plan");
    assert_eq!(
        plan["defaultModelId"].as_str(),
        Some("anthropic/claude-haiku-4-20250514")
    );
    assert!(!strings(&plan["availableTools"]).contains(&"write_file"));
    let reviewer = table(toml, "subagents", "code-reviewer");
    assert!(
        reviewer["instructions"]
            .as_str()
            .expect("present")
            .starts_with("You are a code reviewer.")
    );
    assert!(!strings(&reviewer["availableTools"]).contains(&"write_file"));
    let review = table(toml, "subagents", "review");
    assert!(
        review["instructions"]
            .as_str()
            .expect("present")
            .starts_with("You are in code review mode."),
        "the Markdown body is the prompt"
    );
    assert_eq!(
        review["description"].as_str(),
        Some("Reviews code for quality and best practices")
    );
    table(toml, "modes", "docs-writer");
    table(toml, "subagents", "docs-writer");
    let parsed: toml::Table = toml.parse().expect("toml");
    assert!(
        parsed["modes"]
            .as_array()
            .expect("present")
            .iter()
            .all(|m| m["id"].as_str() != Some("code-reviewer")),
        "a subagent is no mode"
    );
    assert_eq!(parsed["defaultModeId"].as_str(), Some("build"));

    // What cannot be carried over: reported as comments and in the list, each saying why.
    let reported = |needle: &str| {
        let line = imported
            .not_carried
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("`{needle}` is not reported: {:#?}", imported.not_carried));
        assert!(toml.contains(&format!("# - {line}")), "{line}");
        line.clone()
    };
    let push = reported("git push");
    assert!(push.contains("no shell tool"), "{push}");
    assert!(reported("{file:./prompts/build.txt}").contains("agent `build`"));
    assert!(reported("temperature").contains("agent `plan`"));
    reported("webfetch");
    reported("theme");
}

#[test]
fn a_single_opencode_json_file_and_a_single_agent_file_import_too() {
    let config = SourceFile::new(
        "opencode.json",
        r#"{"agent": {"docs": {"mode": "primary", "prompt": "Write docs.", "permission": {"edit": "ask"}}}, "default_agent": "docs"}"#,
    );
    let imported = opencode(Some(&config), &[]).expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    let docs = table(&imported.toml, "modes", "docs");
    assert_eq!(strings(&docs["requireApproval"]), ["write_file"]);

    let agent = SourceFile::new(
        "explainer.md",
        "---\ndescription: Explains code without changing it\nmode: primary\n---\n\nExplain the code.\n",
    );
    let imported = opencode(None, &[agent]).expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    assert_eq!(
        table(&imported.toml, "modes", "explainer")["instructions"].as_str(),
        Some("Explain the code.")
    );

    // Only a subagent: OpenCode's built-in build agent starts it, and so does a mode `build`.
    let agent = SourceFile::new(
        ".opencode/agent/reviewer.md",
        "---\ndescription: Reviews changes\nmode: subagent\n---\nReview.\n",
    );
    let imported = opencode(None, &[agent]).expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    table(&imported.toml, "modes", "build");
    table(&imported.toml, "subagents", "reviewer");
    assert!(
        imported
            .not_carried
            .iter()
            .any(|l| l.contains("built-in build agent"))
    );
}

#[test]
fn malformed_huge_or_other_formats_are_errors_at_their_place_and_nothing_is_made() {
    let err = |origin: &str, text: &str| {
        opencode(Some(&SourceFile::new(origin, text)), &[]).expect_err("refused")
    };
    // A missing comma's place (right after the value it should follow), in JSONC with comments.
    let e = err(
        "opencode.jsonc",
        "{\n  // agents\n  \"agent\": {\n    \"a\": { \"mode\": \"primary\" }\n    \"b\": {}\n  }\n}\n",
    );
    assert!(
        matches!(
            e,
            ImportError::Malformed {
                line: 4,
                column: 31,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().starts_with("opencode.jsonc:4:31: "), "{e}");
    // A value of the wrong type, at its line.
    let e = err(
        "opencode.json",
        "{\n  \"agent\": {\n    \"a\": { \"tools\": { \"write\": \"no\" } }\n  }\n}\n",
    );
    assert!(matches!(e, ImportError::Malformed { line: 3, .. }), "{e}");
    // Roo Code's YAML, Claude Code's settings: another format.
    let e = err(".roomodes", &read_fixture("import/roomodes.yaml"));
    assert!(matches!(e, ImportError::Malformed { .. }), "{e}");
    let e = err(
        "settings.json",
        &read_fixture("import/claude/.claude/settings.json"),
    );
    assert!(matches!(e, ImportError::Empty { .. }), "{e}");
    assert!(e.to_string().contains("no agent"), "{e}");
    // Too large, as one file or all together.
    let huge = format!(
        "{{\"agent\": {{}}, \"x\": \"{}\"}}",
        "a".repeat(agent_controller::import::MAX_IMPORT_BYTES)
    );
    assert!(matches!(
        err("big.json", &huge),
        ImportError::TooLarge { .. }
    ));
    // A Markdown agent without frontmatter, or with a broken one at the file's own line.
    let md = |text: &str| opencode(None, &[SourceFile::new("a.md", text)]).expect_err("refused");
    let e = md("Just a prompt.\n");
    assert!(matches!(e, ImportError::Malformed { line: 1, .. }), "{e}");
    let e = md("---\ndescription: ok\nmode: [primary\n---\nbody\n");
    assert!(
        matches!(e, ImportError::Malformed { line: 3..=4, .. }),
        "{e}"
    );
    let e = md("---\ndescription: never closed\n");
    assert!(matches!(e, ImportError::Malformed { .. }), "{e}");
    // A directory that holds neither a config nor agent files.
    let empty = tempfile::tempdir().expect("tempdir");
    assert!(read_opencode(empty.path()).is_err());
}

/// The CLI reads a project directory, prints the TOML (which `check` passes) and reports on
/// stderr; a malformed file is exit 2 with nothing on stdout.
#[cfg(feature = "cli")]
#[test]
fn import_opencode_prints_a_config_check_passes() {
    let stderr = crate::common::cli::import_round_trip(
        "opencode",
        &fixture("import/opencode"),
        "not carried over: agent `plan`",
        "opencode.json",
        "{\"agent\": {",
    );
    assert!(stderr.contains("opencode.json:1:"), "{stderr}");
}

/// Two agents whose names rename to the same id (`code.review`, `code/review`) stay two, the
/// second with a `-2`-style suffix, each rename reported; a name valid as it is
/// (`code-review`) keeps its id.
#[test]
fn agents_renamed_to_the_same_id_stay_distinct_and_are_reported() {
    let config = SourceFile::new(
        "opencode.json",
        read_fixture("import/same-ids/opencode.json"),
    );
    let imported = opencode(Some(&config), &[]).expect("imported");
    assert!(check_errors(&imported.toml).is_empty(), "{}", imported.toml);
    let parsed: toml::Table = imported.toml.parse().expect("toml");
    let ids = |key: &str| -> Vec<String> {
        parsed[key]
            .as_array()
            .expect("array")
            .iter()
            .map(|t| t["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let mut modes = ids("modes");
    modes.sort();
    assert_eq!(
        modes,
        ["code-review-2", "code-review-3"],
        "{}",
        imported.toml
    );
    assert_eq!(ids("subagents"), ["code-review"], "{}", imported.toml);
    for name in ["code.review", "code/review"] {
        assert!(
            imported
                .not_carried
                .iter()
                .any(|l| l.contains(&format!("agent `{name}` is named `code-review-"))),
            "{name}: {:?}",
            imported.not_carried
        );
    }
    assert!(
        !imported.not_carried.iter().any(|l| l.contains("left out")),
        "{:?}",
        imported.not_carried
    );
}
