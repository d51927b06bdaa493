//! The JSON Schema of the config format: shipped beside the config, derived from the parser's own
//! types, and honest about what it checks (structure) and what only `check` can (graph rules).
#![cfg(feature = "schema")]

use std::path::{Path, PathBuf};

use agent_controller::{ToolRegistry, config};
use serde_json::Value;

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&config::schema()).expect("the schema is a valid JSON Schema")
}

/// A TOML file as the JSON value an editor validates.
fn as_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("read_to_string");
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn schema_errors(instance: &Value) -> Vec<String> {
    validator()
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn the_shipped_schema_file_is_what_the_types_derive() {
    let shipped =
        std::fs::read_to_string(manifest("config/modes.schema.json")).expect("read_to_string");
    assert_eq!(
        shipped,
        config::schema_json(),
        "config/modes.schema.json is stale: run `cargo run -- schema > config/modes.schema.json`"
    );
}

#[test]
fn the_shipped_config_and_every_valid_fixture_validate() {
    let mut files = vec![manifest("config/modes.toml")];
    for entry in std::fs::read_dir(manifest("tests/fixtures/configs/valid")).expect("read_dir") {
        let path = entry.expect("entry").path();
        if !path.ends_with("expected.toml") {
            files.push(path);
        }
    }
    assert!(files.len() >= 8);
    for file in files {
        let errors = schema_errors(&as_json(&file));
        assert!(errors.is_empty(), "{}: {errors:?}", file.display());
    }
}

/// The schema refuses what the parser's raw layer refuses: unknown keys, wrong types, a missing
/// or malformed id, no modes. Graph rules that span values (duplicates, targets, defaults, tool
/// names) pass the schema and are left to `check`: the split is asserted so it cannot shift
/// unnoticed.
#[test]
fn structural_errors_are_refused_and_graph_rules_are_left_to_check() {
    let dir = manifest("tests/fixtures/configs/invalid");
    let refused_by_schema = [
        "unknown-field.toml",
        "wrong-type.toml",
        "missing-id.toml",
        "empty-id.toml",
        "no-modes.toml",
        // `uniqueItems`: a list naming one mode twice is refused by the schema, too.
        "targets-list-duplicate.toml",
        // ... and one naming a tool twice (issue 19 item 7).
        "duplicate-tool.toml",
        // A `planScope` that is not `ask`, `enforce` or `off` (issue 40).
        "plan-scope-bad.toml",
        // A rule test's `expect` that is not one of the four outcomes (issue 42).
        "rule-test-bad-expect.toml",
    ];
    let left_to_check = [
        "duplicate-id.toml",
        "self-transition.toml",
        "unknown-target.toml",
        "two-defaults.toml",
        "unknown-default-id.toml",
        "conflicting-default.toml",
        "unknown-tool.toml",
        "target-without-submit-plan.toml",
        "plans-dir-outside.toml",
        "self-handover-default.toml",
        "targets-list-unknown.toml",
        "targets-list-self.toml",
        "require-approval-not-offered.toml",
        // A subagent type's tools are checked against the controller's, like a mode's.
        "subagent-unknown-tool.toml",
        // A rule test on an unknown mode, and `not` without a pattern (issue 42).
        "rule-test-unknown-mode.toml",
        "rule-not-without-pattern.toml",
        // A hook's missing `command` and a `reviewBy` naming no reviewer (issue 41): `check`
        // places them in the table.
        "hook-without-command.toml",
        "reviewer-unknown.toml",
    ];
    for name in refused_by_schema {
        let errors = schema_errors(&as_json(&dir.join(name)));
        assert!(!errors.is_empty(), "{name} must be refused by the schema");
    }
    for name in left_to_check {
        let path = dir.join(name);
        assert!(schema_errors(&as_json(&path)).is_empty(), "{name}");
        let text = std::fs::read_to_string(&path).expect("read_to_string");
        let tools = ToolRegistry::with_workspace_tools();
        let errors = config::check_with_tools(&text, name, |t| tools.knows(t));
        assert!(!errors.is_empty(), "{name} must be refused by check");
    }
    // Every invalid fixture but the one that is not TOML is covered above.
    let listed = std::fs::read_dir(&dir)
        .expect("read_dir")
        .filter(|e| {
            let name = e.as_ref().expect("as_ref").file_name();
            name != "expected.toml" && name != "not-toml.toml"
        })
        .count();
    assert_eq!(listed, refused_by_schema.len() + left_to_check.len());
}

#[test]
fn unknown_keys_are_refused_in_the_file_and_in_each_mode() {
    let top: Value = serde_json::json!({"defaultMode": "build", "modes": [{"id": "build"}]});
    assert!(
        schema_errors(&top)
            .iter()
            .any(|e| e.contains("defaultMode")),
        "{:?}",
        schema_errors(&top)
    );
    let mode: Value = serde_json::json!({"modes": [{"id": "plan", "transitionTo": "build"}]});
    assert!(
        schema_errors(&mode)
            .iter()
            .any(|e| e.contains("transitionTo"))
    );
    // Metadata is free.
    let free: Value =
        serde_json::json!({"modes": [{"id": "plan", "metadata": {"color": "#fff", "x": [1]}}]});
    assert!(schema_errors(&free).is_empty());
}

#[test]
fn ids_follow_the_parsers_pattern() {
    for (id, ok) in [
        ("plan-2_b", true),
        ("plan mode", false),
        ("計画", false),
        ("", false),
    ] {
        let instance = serde_json::json!({"modes": [{"id": id}]});
        assert_eq!(schema_errors(&instance).is_empty(), ok, "schema on {id:?}");
        let text = format!("[[modes]]\nid = {}\n", Value::from(id));
        assert_eq!(
            config::parse(&text, "m.toml").is_ok(),
            ok,
            "parser on {id:?}"
        );
    }
}

#[test]
fn every_key_the_parser_knows_has_a_description() {
    let schema = config::schema();
    let mode = &schema["definitions"]["Mode"]["properties"];
    let keys: Vec<&str> = mode
        .as_object()
        .expect("as_object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "approvalTimeout",
            "approvers",
            "availableTools",
            "default",
            "defaultModelId",
            "description",
            "id",
            "instructions",
            "metadata",
            "name",
            "onTimeout",
            "planScope",
            "requireApproval",
            "reviewBy",
            "reviewToolCalls",
            "reviewerMay",
            "rules",
            "subagents",
            "transitionsTo"
        ]
    );
    for (key, property) in mode.as_object().expect("as_object") {
        assert!(property["description"].is_string(), "{key}");
    }
    let subagent = &schema["definitions"]["Subagent"]["properties"];
    for (key, property) in subagent.as_object().expect("as_object") {
        assert!(property["description"].is_string(), "subagent {key}");
    }
    for key in [
        "defaultModeId",
        "plansDir",
        "modes",
        "subagents",
        "hooks",
        "reviewers",
    ] {
        assert!(
            schema["properties"][key]["description"].is_string(),
            "{key}"
        );
    }
}

/// `transitionsTo` is a mode id or a non-empty list of distinct mode ids, in the schema as in
/// the parser.
#[test]
fn transitions_to_takes_an_id_or_a_list_of_ids() {
    for (targets, ok) in [
        (serde_json::json!("build"), true),
        (serde_json::json!(["build"]), true),
        (serde_json::json!(["build", "build-auto"]), true),
        (serde_json::json!([]), false),
        (serde_json::json!(["build", "build"]), false),
        (serde_json::json!(["build", 3]), false),
        (serde_json::json!(["build mode"]), false),
        (serde_json::json!(3), false),
        (serde_json::json!({ "id": "build" }), false),
    ] {
        let instance = serde_json::json!({"modes": [
            {"id": "plan", "transitionsTo": targets},
            {"id": "build"},
            {"id": "build-auto"},
        ]});
        assert_eq!(
            schema_errors(&instance).is_empty(),
            ok,
            "schema on {targets}"
        );
        let text = format!(
            "[[modes]]\nid = \"plan\"\ntransitionsTo = {}\n[[modes]]\nid = \"build\"\n[[modes]]\nid = \"build-auto\"\n",
            toml::Value::try_from(&targets).map_or_else(|_| "{}".to_owned(), |v| v.to_string())
        );
        assert_eq!(
            config::parse(&text, "m.toml").is_ok(),
            ok,
            "parser on {text}"
        );
    }
}

#[test]
fn require_approval_takes_a_boolean_or_a_list_of_tool_names() {
    for (value, ok) in [
        (serde_json::json!(true), true),
        (serde_json::json!(false), true),
        (serde_json::json!(["write_file", "read_file"]), true),
        (serde_json::json!("write_file"), false),
        (serde_json::json!(["write_file", "write_file"]), false),
        (serde_json::json!([1]), false),
    ] {
        let instance = serde_json::json!({"modes": [{"id": "build", "requireApproval": value}]});
        assert_eq!(schema_errors(&instance).is_empty(), ok, "schema on {value}");
    }
}
