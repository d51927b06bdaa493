//! `import roo` (issue 42): Roo Code's `.roomodes` (YAML or JSON) as a modes TOML that passes
//! `check`, whose `explain` gives the verdict Roo Code documents (an `edit` group with a
//! `fileRegex` edits only the files it matches), with what could not be carried over reported,
//! never dropped.

use std::sync::Arc;

use agent_controller::explain::Outcome;
use agent_controller::import::{ImportError, roo_code};
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{AgentController, ToolRegistry, config};
use serde_json::json;

use crate::common::{Workspace, read_fixture};

fn imported(name: &str) -> agent_controller::import::Imported {
    roo_code(&read_fixture(&format!("import/{name}")), name).expect("imported")
}

#[test]
fn roo_modes_import_as_modes_that_pass_check_and_keep_the_documented_verdicts() {
    let yaml = imported("roomodes.yaml");
    let tools = ToolRegistry::with_workspace_tools();
    let mut errors = config::check_with_tools(&yaml.toml, "modes.toml", |t| tools.knows(t));
    errors.extend(config::rule_errors(&yaml.toml, "modes.toml", &tools));
    assert!(errors.is_empty(), "{errors:?}\n{}", yaml.toml);
    let graph = config::parse(&yaml.toml, "modes.toml").expect("parses");
    let docs = graph.mode(graph.get("docs-writer").expect("docs-writer"));
    assert_eq!(docs.name(), "📝 Documentation Writer");
    assert!(docs.instructions().contains("technical writer"));
    assert!(docs.instructions().contains("Focus on clarity"));

    let ws = Workspace::new();
    let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .tools(tools)
        .workspace(ws.path())
        .build()
        .expect("controller");
    let outcome = |mode: &str, tool: &str, args: serde_json::Value| {
        controller
            .explain(mode, tool, args)
            .expect("explained")
            .outcome
    };
    let write = |path: &str| json!({ "path": path, "content": "x" });
    // Only Markdown in docs-writer; only tests in test-engineer; reads everywhere.
    assert_eq!(
        outcome("docs-writer", "write_file", write("docs/guide.md")),
        Outcome::Ask
    );
    assert_eq!(
        outcome("docs-writer", "write_file", write("src/main.rs")),
        Outcome::Deny
    );
    assert_eq!(
        outcome("test-engineer", "write_file", write("src/__tests__/a.js")),
        Outcome::Ask
    );
    assert_eq!(
        outcome("test-engineer", "write_file", write("src/a.ts")),
        Outcome::Deny
    );
    assert_eq!(
        outcome("docs-writer", "read_file", json!({"path": "src/main.rs"})),
        Outcome::Allow
    );

    // The lookaround regex, the browser and command groups: reported, as comments and in the list.
    let lookaround = yaml
        .not_carried
        .iter()
        .find(|l| l.contains("no-env"))
        .expect("the lookaround regex is reported");
    assert!(
        lookaround.contains("every write of the mode asks"),
        "{lookaround}"
    );
    assert!(
        yaml.not_carried
            .iter()
            .any(|l| l.contains("`browser` group"))
    );
    assert!(
        yaml.not_carried
            .iter()
            .any(|l| l.contains("`command` group"))
    );
    for line in &yaml.not_carried {
        assert!(yaml.toml.contains(&format!("# - {line}")), "{line}");
    }
    assert_eq!(outcome("no-env", "write_file", write(".env")), Outcome::Ask);

    // The same mode written as JSON imports the same.
    let from_json = imported("roomodes.json");
    let docs_table = |toml: &str| {
        let table: toml::Table = toml.parse().expect("toml");
        table["modes"].as_array().expect("modes")[0].clone()
    };
    assert_eq!(docs_table(&from_json.toml), docs_table(&yaml.toml));
}

#[test]
fn a_malformed_file_or_another_format_is_an_error_at_its_place() {
    let err = roo_code(
        "customModes:\n  - slug: a\n    groups: [read\n",
        ".roomodes",
    )
    .expect_err("malformed");
    assert!(
        matches!(
            err,
            ImportError::Malformed { line: 4, .. } | ImportError::Malformed { line: 3, .. }
        ),
        "{err}"
    );
    let err = roo_code("[[modes]]\nid = \"build\"\n", "modes.toml").expect_err("TOML");
    assert!(matches!(err, ImportError::Malformed { .. }), "{err}");
    let err = roo_code("customModes: []\n", ".roomodes").expect_err("empty");
    assert!(matches!(err, ImportError::Empty { .. }), "{err}");
    let huge = "#".repeat(agent_controller::import::MAX_IMPORT_BYTES + 1);
    assert!(matches!(
        roo_code(&huge, "big").expect_err("huge"),
        ImportError::TooLarge { .. }
    ));
}

/// The CLI prints the TOML (which `check` passes) and reports on stderr what it did not carry
/// over; a malformed file is exit 2 with nothing on stdout.
#[cfg(feature = "cli")]
#[test]
fn import_roo_prints_a_config_check_passes() {
    use crate::common::cli;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join(".roomodes"),
        read_fixture("import/roomodes.yaml"),
    )
    .expect("write");
    let out = cli::bin(dir.path(), &["import", "roo", ".roomodes"], "");
    assert_eq!(out.status.code(), Some(0), "{}", cli::text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not carried over: mode `no-env`"),
        "{stderr}"
    );
    std::fs::write(dir.path().join("modes.toml"), &out.stdout).expect("write");
    let checked = cli::bin(dir.path(), &["check", "modes.toml"], "");
    assert_eq!(checked.status.code(), Some(0), "{}", cli::text(&checked));
    std::fs::write(dir.path().join("bad"), "customModes: {").expect("write");
    let bad = cli::bin(dir.path(), &["import", "roo", "bad"], "");
    assert_eq!(bad.status.code(), Some(2));
    assert!(bad.stdout.is_empty());
}

/// Slugs that are no mode id here (`.`, `/`, non-ASCII letters) are renamed by the rule the
/// OpenCode and Claude imports use, each rename reported (a TOML comment and on stderr); two
/// slugs that rename to the same id stay two modes, and a slug valid as it is keeps its id.
#[cfg(feature = "cli")]
#[test]
fn roo_slugs_that_are_no_mode_id_are_renamed_distinct_reported_and_pass_check() {
    use crate::common::cli;
    let roo = read_fixture("import/roomodes-ids.yaml");
    let imported = roo_code(&roo, ".roomodes").expect("imported");
    let graph = config::parse(&imported.toml, "modes.toml").expect("parses");
    let id_of = |name: &str| {
        graph
            .modes()
            .iter()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("mode {name}\n{}", imported.toml))
            .id()
            .to_owned()
    };
    assert_eq!(id_of("Docs"), "docs-writer-v2");
    assert_eq!(id_of("Unicode"), "n-code");
    // The valid slug keeps its id; the two renamed into it get their own.
    assert_eq!(id_of("Plain"), "review-ts");
    let (dot, slash) = (id_of("Dot"), id_of("Slash"));
    assert!(
        dot != slash && dot != "review-ts" && slash != "review-ts",
        "{}",
        imported.toml
    );
    for (slug, id) in [
        ("docs-writer.v2", "docs-writer-v2".to_owned()),
        ("Ünïcode", "n-code".to_owned()),
        ("review.ts", dot.clone()),
        ("review/ts", slash.clone()),
    ] {
        let line = imported
            .not_carried
            .iter()
            .find(|l| l.contains(&format!("mode `{slug}` is named `{id}`")))
            .unwrap_or_else(|| panic!("{slug} not reported: {:?}", imported.not_carried));
        assert!(imported.toml.contains(&format!("# - {line}")), "{line}");
    }
    assert!(
        !imported
            .not_carried
            .iter()
            .any(|l| l.contains("`review-ts` is named")),
        "{:?}",
        imported.not_carried
    );

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(".roomodes"), &roo).expect("write");
    let out = cli::bin(dir.path(), &["import", "roo", ".roomodes"], "");
    assert_eq!(out.status.code(), Some(0), "{}", cli::text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not carried over: mode `docs-writer.v2` is named `docs-writer-v2`"),
        "{stderr}"
    );
    std::fs::write(dir.path().join("modes.toml"), &out.stdout).expect("write");
    let checked = cli::bin(dir.path(), &["check", "modes.toml"], "");
    assert_eq!(checked.status.code(), Some(0), "{}", cli::text(&checked));
}

/// The renaming never starts or ends an id with `-` (trimmed, as `Ünïcode` would begin
/// `-n-code`), and a slug that leaves nothing becomes `agent`; each rename is reported.
#[test]
fn renamed_ids_neither_start_nor_end_with_a_dash() {
    let imported = imported("roomodes-edges.yaml");
    let graph = config::parse(&imported.toml, "modes.toml").expect("parses");
    let id_of = |name: &str| {
        graph
            .modes()
            .iter()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("mode {name}\n{}", imported.toml))
            .id()
            .to_owned()
    };
    assert_eq!(id_of("Unicode"), "n-code");
    assert_eq!(id_of("Draft"), "draft");
    assert_eq!(id_of("Accents"), "agent");
    for (slug, id) in [
        ("Ünïcode", "n-code"),
        ("(draft)", "draft"),
        ("ééé", "agent"),
    ] {
        assert!(
            imported
                .not_carried
                .iter()
                .any(|l| l.contains(&format!("mode `{slug}` is named `{id}`"))),
            "{slug}: {:?}",
            imported.not_carried
        );
    }
}
