//! The JSON Schemas of what a host exchanges with the crate: the decision it sends (shipped as
//! `config/decision.schema.json`), and the pending listing entry and decision audit record it
//! reads. Derived from the serde types, so the schema and the parser agree: asserted on a table
//! of instances and on generated ones.
#![cfg(feature = "schema")]

use std::path::{Path, PathBuf};

use agent_controller::event::{DecidedRecord, OnTimeout, WaitTerms};
use agent_controller::{
    Decision, event::DecisionOutcome, schema, store::PendingKind, store::PendingSummary,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    jsonschema::validator_for(schema)
        .expect("the schema is a valid JSON Schema")
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect()
}

fn decision_errors(instance: &Value) -> Vec<String> {
    errors(&schema::decision(), instance)
}

/// The schema accepts `instance` exactly when `Decision::from_json` does.
fn assert_agree(instance: &Value) -> bool {
    let by_schema = decision_errors(instance);
    let parsed = Decision::from_json(instance);
    assert_eq!(
        by_schema.is_empty(),
        parsed.is_ok(),
        "{instance}: schema {by_schema:?}, parser {parsed:?}"
    );
    parsed.is_ok()
}

#[test]
fn the_shipped_decision_schema_file_is_what_the_type_derives() {
    let shipped =
        std::fs::read_to_string(manifest("config/decision.schema.json")).expect("read_to_string");
    assert_eq!(
        shipped,
        schema::to_json(&schema::decision()),
        "config/decision.schema.json is stale: run \
         `cargo run -- schema decision > config/decision.schema.json`"
    );
}

#[test]
fn the_decision_schema_names_every_field_with_a_description_and_no_other() {
    let schema = schema::decision();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["required"], json!(["action"]));
    let properties = schema["properties"].as_object().expect("properties");
    let keys: Vec<&str> = properties.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "action",
            "allow",
            "alwaysAllow",
            "answer",
            "comments",
            "decidedBy",
            "feedback",
            "model",
            "plan",
            "scope",
            "sha256",
            "steps",
            "targetModeId"
        ]
    );
    for (key, property) in properties {
        let text = property["description"].as_str().unwrap_or_default();
        assert!(!text.is_empty(), "{key} has no description");
    }
    assert!(schema["description"].is_string());
    // Every field a built decision writes is one the schema lists.
    let mut full = Decision::approve_with("note")
        .with_sha256("ab")
        .decided_by("alice")
        .to("build")
        .with_plan("# P\n")
        .always_allow()
        .scope(agent_controller::allowance::AllowanceScope::Workspace)
        .allow_only(agent_controller::allowance::AllowancePattern::path(
            "src/**",
        ))
        .comment(4, "staging first")
        .model("openai/gpt-4o-mini")
        .steps([1, 3]);
    full.answer = Some(Box::new(json!("staging")));
    let written = serde_json::to_value(&full).expect("to_value");
    let mut written: Vec<&str> = written
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    // In key order: serde_json keeps a struct's field order when a dependency turns on its
    // `preserve_order` (the `acp` feature's SDK does).
    written.sort_unstable();
    assert_eq!(written, keys);
}

/// A table of decisions, valid and malformed: the schema and `Decision::from_json` give the same
/// verdict on each, and it is the expected one.
#[test]
fn schema_and_parser_agree_on_a_table_of_decisions() {
    let table = [
        (json!({"action": "approved"}), true),
        (json!({"action": "rejected"}), true),
        (
            json!({"action": "rejected", "feedback": "split step 2"}),
            true,
        ),
        (
            json!({"action": "approved", "targetModeId": "build-auto"}),
            true,
        ),
        (
            json!({"action": "approved", "plan": "# Title\n\n1. step\n"}),
            true,
        ),
        (json!({"action": "approved", "alwaysAllow": true}), true),
        (json!({"action": "approved", "alwaysAllow": false}), true),
        (
            json!({"action": "approved", "alwaysAllow": true, "scope": "workspace", "allow": {"path": "src/**"}}),
            true,
        ),
        (
            json!({"action": "approved", "alwaysAllow": true, "scope": "session", "allow": {"arg": "command", "glob": "git *"}}),
            true,
        ),
        (
            json!({"action": "approved", "alwaysAllow": true, "scope": "forever"}),
            false,
        ),
        (
            json!({"action": "approved", "alwaysAllow": true, "allow": {"path": "src/**", "tool": "x"}}),
            false,
        ),
        (
            json!({"action": "approved", "sha256": "00ff", "decidedBy": "alice"}),
            true,
        ),
        // Optional fields may be null, as serde reads `Option`.
        (
            json!({"action": "approved", "feedback": null, "plan": null}),
            true,
        ),
        (
            json!({"action": "rejected", "comments": [{"line": 4, "text": "staging first"}]}),
            true,
        ),
        (json!({"action": "rejected", "comments": []}), true),
        (
            json!({"action": "approved", "model": "openai/gpt-4o-mini"}),
            true,
        ),
        (
            json!({"action": "rejected", "comments": [{"line": 4}]}),
            false,
        ),
        (
            json!({"action": "rejected", "comments": [{"text": "x"}]}),
            false,
        ),
        (
            json!({"action": "rejected", "comments": [{"line": -1, "text": "x"}]}),
            false,
        ),
        (
            json!({"action": "rejected", "comments": [{"line": "4", "text": "x"}]}),
            false,
        ),
        (
            json!({"action": "rejected", "comments": [{"line": 4, "text": "x", "quote": "y"}]}),
            false,
        ),
        (
            json!({"action": "rejected", "comments": {"line": 4, "text": "x"}}),
            false,
        ),
        (json!({"action": "approved", "model": 4}), false),
        (json!({"action": "approve"}), false),
        (json!({"action": "APPROVED"}), false),
        (json!({"action": null}), false),
        (json!({"action": true}), false),
        (json!({}), false),
        (json!({"feedback": "no action"}), false),
        (json!({"action": "approved", "extra": 1}), false),
        (
            json!({"action": "approved", "target_mode_id": "build"}),
            false,
        ),
        (json!({"action": "approved", "decided_by": "alice"}), false),
        (json!({"action": "approved", "to": "build"}), false),
        (json!({"action": "approved", "alwaysAllow": "true"}), false),
        (json!({"action": "approved", "alwaysAllow": 1}), false),
        (json!({"action": "approved", "alwaysAllow": null}), false),
        (
            json!({"action": "approved", "targetModeId": ["build"]}),
            false,
        ),
        (json!({"action": "approved", "sha256": 42}), false),
        (
            json!({"action": "rejected", "feedback": {"text": "x"}}),
            false,
        ),
        (json!({"action": "approved", "plan": 1}), false),
        (json!("approved"), false),
        (json!(["approved"]), false),
        (json!(null), false),
    ];
    for (instance, valid) in table {
        assert_eq!(assert_agree(&instance), valid, "{instance}");
    }
}

/// Rules that span fields (a target, an edited plan or "always allow" on a rejection) pass the
/// schema and `from_json`: the session refuses them when the decision is applied
/// (`store::` and `tool_approval::` tests). The split is asserted so it cannot shift unnoticed.
#[test]
fn cross_field_rules_are_left_to_the_session() {
    for instance in [
        json!({"action": "rejected", "targetModeId": "build"}),
        json!({"action": "rejected", "plan": "# P\n"}),
        json!({"action": "rejected", "alwaysAllow": true}),
        json!({"action": "approved", "comments": [{"line": 4, "text": "x"}]}),
        json!({"action": "rejected", "comments": [{"line": 0, "text": " "}]}),
        json!({"action": "rejected", "model": "openai/gpt-4o-mini"}),
    ] {
        assert!(assert_agree(&instance), "{instance}");
    }
}

const FIELDS: [&str; 11] = [
    "action",
    "comments",
    "model",
    "feedback",
    "sha256",
    "decidedBy",
    "targetModeId",
    "plan",
    "alwaysAllow",
    "decided_by",
    "extra",
];

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        prop::sample::select(vec!["approved", "rejected", "approve", "", "build", "true"])
            .prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
        prop::collection::vec(any::<bool>().prop_map(Value::from), 0..2).prop_map(Value::from),
        Just(json!({"action": "approved"})),
    ]
}

fn any_instance() -> impl Strategy<Value = Value> {
    prop_oneof![
        9 => prop::collection::btree_map(prop::sample::select(FIELDS.to_vec()), any_value(), 0..6)
            .prop_map(|map| {
                Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        1 => any_value(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// On generated JSON (known and unknown fields, values of every type), the schema accepts
    /// exactly what `Decision::from_json` accepts.
    #[test]
    fn schema_and_parser_agree_on_generated_decisions(instance in any_instance()) {
        assert_agree(&instance);
    }

    /// Every decision the builders make serializes to JSON the schema accepts and that parses
    /// back to the same decision.
    #[test]
    fn every_built_decision_validates_and_round_trips(
        approve in any::<bool>(),
        feedback in proptest::option::of(".{0,8}"),
        sha256 in proptest::option::of("[0-9a-f]{0,64}"),
        by in proptest::option::of(".{0,8}"),
        to in proptest::option::of("[a-z-]{1,8}"),
        plan in proptest::option::of(".{0,16}"),
        always in any::<bool>(),
        comments in prop::collection::vec((any::<u64>(), ".{0,8}"), 0..3),
        model in proptest::option::of(".{0,8}"),
    ) {
        let mut decision = match (approve, feedback) {
            (true, Some(f)) => Decision::approve_with(f),
            (true, None) => Decision::approve(),
            (false, Some(f)) => Decision::reject_with(f),
            (false, None) => Decision::reject(),
        };
        if let Some(sha256) = sha256 { decision = decision.with_sha256(sha256); }
        if let Some(by) = by { decision = decision.decided_by(by); }
        if let Some(to) = to { decision = decision.to(to); }
        if let Some(plan) = plan { decision = decision.with_plan(plan); }
        if always { decision = decision.always_allow(); }
        for (line, text) in comments { decision = decision.comment(line, text); }
        if let Some(model) = model { decision = decision.model(model); }
        let value = serde_json::to_value(&decision).expect("to_value");
        prop_assert!(decision_errors(&value).is_empty(), "{}", value);
        prop_assert_eq!(Decision::from_json(&value).ok(), Some(decision));
    }
}

/// The decision objects in backticks of a doc text: `` `{"action": …}` `` spans (across line
/// breaks and `///` prefixes), skipping the grammar form with `?` marks.
fn decision_examples(text: &str) -> Vec<String> {
    let text: String = text
        .lines()
        .map(|l| {
            let l = l.trim_start();
            l.strip_prefix("///")
                .or_else(|| l.strip_prefix("//!"))
                .unwrap_or(l)
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ");
    text.match_indices("`{\"action\"")
        .filter_map(|(at, _)| {
            let span = &text[at + 1..];
            span.find('`').map(|end| span[..end].to_owned())
        })
        .filter(|span| !span.contains("\"?"))
        .collect()
}

/// Examples the docs give of what is refused.
const REFUSED_EXAMPLES: [&str; 1] = [r#"{"action": "approve"}"#];

#[test]
fn every_decision_example_in_the_readme_and_the_docs_validates() {
    let mut files = vec![manifest("README.md")];
    let mut dirs = vec![manifest("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "md") {
                files.push(path);
            }
        }
    }
    let mut seen = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read_to_string");
        for example in decision_examples(&text) {
            let value: Value = serde_json::from_str(&example)
                .unwrap_or_else(|e| panic!("{}: {example}: {e}", file.display()));
            let valid = assert_agree(&value);
            assert!(
                valid || REFUSED_EXAMPLES.contains(&example.as_str()),
                "{}: {example}",
                file.display()
            );
            seen += 1;
        }
    }
    // The README and the guide (`src/guide/*.md`): the approval note, a target, an edited plan,
    // tool calls, "always allow", the field table.
    assert!(seen >= 8, "only {seen} examples found");
}

#[cfg(feature = "cli")]
fn bin() -> std::process::Command {
    crate::common::agent_controller()
}

#[cfg(feature = "cli")]
fn stdout_of(args: &[&str]) -> String {
    let out = bin().args(args).output().expect("run agent-controller");
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[cfg(feature = "cli")]
#[test]
fn the_cli_prints_each_schema_and_plain_schema_stays_the_config_one() {
    assert_eq!(
        stdout_of(&["schema"]),
        agent_controller::config::schema_json()
    );
    assert_eq!(
        stdout_of(&["schema", "config"]),
        agent_controller::config::schema_json()
    );
    assert_eq!(
        stdout_of(&["schema", "decision"]),
        schema::to_json(&schema::decision())
    );
    assert_eq!(
        stdout_of(&["schema", "pending"]),
        schema::to_json(&schema::pending_entry())
    );
    assert_eq!(
        stdout_of(&["schema", "decided"]),
        schema::to_json(&schema::decided_record())
    );
    let out = bin()
        .args(["schema", "decisions"])
        .output()
        .expect("run agent-controller");
    assert_eq!(out.status.code(), Some(2));
}

fn full_pending_tool_call() -> PendingSummary {
    PendingSummary {
        session_id: "s1".into(),
        run_id: "run_1".into(),
        tool_call_id: "call_1".into(),
        kind: PendingKind::ToolCall,
        decision_id: "decision_2".into(),
        mode_id: "build".into(),
        target_mode_id: String::new(),
        target_mode_ids: Vec::new(),
        title: String::new(),
        plan: None,
        diff: None,
        sha256: "ab".into(),
        tool_name: Some("write_file".into()),
        args: Some(json!({"path": "a.txt"})),
        args_sha256: Some("ab".into()),
        locations: vec![agent_controller::rules::ResolvedLocation {
            arg: "path".into(),
            given: "a.txt".into(),
            path: Some("src/a.txt".into()),
            doubt: None,
        }],
        payload: None,
        answer_schema: None,
        always_allowed: vec!["read_file".into()],
        plan_path: String::new(),
        terms: WaitTerms {
            workspace: Some("/home/alice/project".into()),
            approval_timeout: Some("24h".into()),
            deadline_at_ms: Some(1_800_000_000_000),
            on_timeout: OnTimeout::Abort,
            approvers_needed: Some(2),
            approvals: vec![agent_controller::quorum::Approval {
                by: "alice".into(),
                at: "2026-12-07T02:00:00Z".into(),
                via: Some(agent_controller::quorum::Via::Http),
                sha256: Some("ab".into()),
            }],
        },
        comments: Vec::new(),
        subagent: None,
        scope: None,
        plan_scope: Default::default(),
        steps: Vec::new(),
        drift: None,
        review: None,
        updated_at: 1_700_000_000,
    }
}

#[test]
fn pending_entries_validate_and_malformed_ones_do_not() {
    let schema = schema::pending_summary();
    let entry = serde_json::to_value(full_pending_tool_call()).expect("to_value");
    assert!(errors(&schema, &entry).is_empty(), "{entry}");
    let plan = PendingSummary {
        kind: PendingKind::Plan,
        target_mode_id: "build".into(),
        target_mode_ids: vec!["build".into(), "build-auto".into()],
        title: "Add dark mode".into(),
        plan_path: "plans/dark.md".into(),
        tool_name: None,
        args: None,
        args_sha256: None,
        locations: Vec::new(),
        always_allowed: Vec::new(),
        terms: WaitTerms::default(),
        ..full_pending_tool_call()
    };
    let plan = serde_json::to_value(plan).expect("to_value");
    assert!(errors(&schema, &plan).is_empty(), "{plan}");
    // Listings written before tool calls and decision ids lack `kind`, `decisionId`, `sha256`.
    let mut old = plan.clone();
    for key in ["kind", "decisionId", "sha256", "targetModeIds", "planPath"] {
        old.as_object_mut().expect("object").remove(key);
    }
    assert!(errors(&schema, &old).is_empty(), "{old}");
    assert!(serde_json::from_value::<PendingSummary>(old).is_ok());
    for (key, bad) in [
        ("kind", json!("toolcall")),
        ("updatedAt", json!(-1)),
        ("targetModeIds", json!("build")),
        ("sessionId", json!(null)),
    ] {
        let mut instance = entry.clone();
        instance[key] = bad;
        assert!(!errors(&schema, &instance).is_empty(), "{instance}");
        assert!(
            serde_json::from_value::<PendingSummary>(instance.clone()).is_err(),
            "{instance}"
        );
    }
}

/// A line of `pending --json` is a pending entry with the allowances in force: `schema pending`
/// describes them, so an allowance that is not one (an unknown scope, a pattern with an unknown
/// key, a list where an object goes) fails, while the summary's schema alone lets any extra key
/// through.
#[test]
fn pending_lines_with_allowances_in_force_validate_and_malformed_ones_do_not() {
    let schema = schema::pending_entry();
    let allowance = json!({
        "id": "decision_1", "scope": "session", "modeId": "build", "toolName": "write_file",
        "pattern": { "path": "src/**" }, "decisionId": "decision_1", "decidedBy": "ana",
        "decidedAt": "2026-12-02T03:10:00Z"
    });
    let allowance: agent_controller::allowance::Allowance =
        serde_json::from_value(allowance).expect("an allowance as the library writes it");
    let entry = agent_controller::store::PendingEntry {
        summary: full_pending_tool_call(),
        allowances_in_force: vec![allowance],
    };
    let line = serde_json::to_value(&entry).expect("to_value");
    assert_eq!(
        line["toolName"], "write_file",
        "the summary's fields stand inline: {line}"
    );
    assert!(
        errors(&schema, &line).is_empty(),
        "{line}: {:?}",
        errors(&schema, &line)
    );
    let plain = serde_json::to_value(full_pending_tool_call()).expect("to_value");
    assert!(errors(&schema, &plain).is_empty(), "no allowances: {plain}");
    for (path, bad) in [
        ("scope", json!("forever")),
        ("pattern", json!({ "path": "src/**", "nope": 1 })),
        ("toolName", json!(["write_file"])),
    ] {
        let mut instance = line.clone();
        instance["allowancesInForce"][0][path] = bad;
        assert!(!errors(&schema, &instance).is_empty(), "{instance}");
        assert!(
            errors(&schema::pending_summary(), &instance).is_empty(),
            "the summary alone does not describe allowancesInForce"
        );
        assert!(
            serde_json::from_value::<agent_controller::store::PendingEntry>(instance.clone())
                .is_err(),
            "{instance}"
        );
    }
}

#[test]
fn decided_records_validate_and_unknown_fields_do_not() {
    let schema = schema::decided_record();
    let record = DecidedRecord {
        run_id: "run_1".into(),
        tool_call_id: "call_1".into(),
        decision_id: "decision_1".into(),
        outcome: Some(DecisionOutcome::Approved),
        sha256: Some("ab".into()),
        approved_sha256: Some("cd".into()),
        decided_at: Some("2026-11-30T12:35:43Z".into()),
        decided_by: Some("alice".into()),
        target_mode_id: Some("build".into()),
        tool_name: None,
        suspension_kind: None,
        always_allow: false,
        allowed_by: None,
        allowance: None,
        comments: Vec::new(),
        model: None,
        rule: None,
        feedback: None,
        subagent: None,
        steps: vec![1, 3],
        hook: None,
        via: Some(agent_controller::quorum::Via::Decide),
        approvals: Vec::new(),
        answer: None,
        review: None,
    };
    let value = serde_json::to_value(&record).expect("to_value");
    assert!(errors(&schema, &value).is_empty(), "{value}");
    let tool = DecidedRecord {
        target_mode_id: None,
        approved_sha256: None,
        tool_name: Some("write_file".into()),
        always_allow: true,
        feedback: Some("use tabs".into()),
        ..record
    };
    let tool = serde_json::to_value(&tool).expect("to_value");
    assert!(errors(&schema, &tool).is_empty(), "{tool}");
    let outcomes = &schema["properties"]["outcome"];
    for name in DecisionOutcome::NAMES {
        let mut instance = value.clone();
        instance["outcome"] = json!(name);
        assert!(errors(&schema, &instance).is_empty(), "{outcomes}: {name}");
    }
    for (key, bad) in [
        ("outcome", json!("approve")),
        ("alwaysAllow", json!("yes")),
        ("unknown", json!(1)),
        ("runId", json!(null)),
    ] {
        let mut instance = value.clone();
        instance[key] = bad;
        assert!(!errors(&schema, &instance).is_empty(), "{instance}");
        assert!(
            serde_json::from_value::<DecidedRecord>(instance.clone()).is_err(),
            "{instance}"
        );
    }
}

#[cfg(feature = "cli")]
const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");

#[cfg(feature = "cli")]
use crate::common::json_lines;

/// What the CLI really prints validates: the lines of `pending --json` for a plan left
/// pending, and the audit record (`decision`) in the events of the decision that settles it.
#[cfg(feature = "cli")]
#[test]
fn what_the_cli_prints_for_a_real_decision_validates() {
    let ws = crate::common::Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let workspace = ws.path().to_str().expect("utf-8");
    let out = bin()
        .args(["run", "--config", SHIPPED, "--workspace", workspace])
        .args(["--store", &spec, "--detach", "--mode", "plan", "--json"])
        .arg("Add dark mode")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = json_lines(&out)[0]["sessionId"]
        .as_str()
        .expect("session id")
        .to_owned();

    let out = bin()
        .args(["pending", "--store", &spec, "--json"])
        .output()
        .expect("pending");
    assert_eq!(out.status.code(), Some(0));
    let pending = json_lines(&out);
    assert_eq!(pending.len(), 1, "{pending:?}");
    let entry = &pending[0];
    assert_eq!(entry["kind"], "plan");
    assert!(
        errors(&schema::pending_entry(), entry).is_empty(),
        "{entry}: {:?}",
        errors(&schema::pending_entry(), entry)
    );

    let out = bin()
        .args(["decide", "--store", &spec, &session, "--config", SHIPPED])
        .args([
            "--workspace",
            workspace,
            "--approve",
            "--by",
            "alice",
            "--json",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("decide");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<Value> = json_lines(&out)
        .into_iter()
        .filter_map(|e| e.get("decision").cloned())
        .collect();
    assert!(!records.is_empty(), "no event carries a decision");
    for record in records {
        assert_eq!(record["decidedBy"], "alice");
        assert!(
            errors(&schema::decided_record(), &record).is_empty(),
            "{record}: {:?}",
            errors(&schema::decided_record(), &record)
        );
    }
}

/// The guide's "Decision JSON" table (`src/guide/contract.md`) lists exactly the fields the
/// schema has, in the type's order.
#[test]
fn the_guide_field_table_lists_every_decision_field() {
    let guide = std::fs::read_to_string(manifest("src/guide/contract.md")).expect("read_to_string");
    let section = guide
        .split("\n## Decision JSON\n")
        .nth(1)
        .expect("the guide has a Decision JSON section");
    let listed: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|row| row.split('|').nth(1))
        .map(|cell| cell.trim().trim_matches('`'))
        .collect();
    assert_eq!(
        listed,
        [
            "action",
            "feedback",
            "sha256",
            "decidedBy",
            "targetModeId",
            "plan",
            "alwaysAllow",
            "scope",
            "allow",
            "comments",
            "model",
            "steps",
            "answer"
        ]
    );
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    let schema = schema::decision();
    let keys: Vec<&str> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(sorted, keys);
}
