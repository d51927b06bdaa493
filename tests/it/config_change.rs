//! The config-change guard ([`RecordedConfig::change_to`]) counts what subagent types may do
//! as it counts the modes': a type given a new tool, a type that no longer asks, a type losing
//! an `ask` or `deny` rule, a mode newly allowed a type: each widens what a session may do. A
//! record written before types were recorded reads back and claims no change of them.

use agent_controller::config;
use agent_controller::store::RecordedConfig;

/// `explore` reads only and asks before `list_files`, with an `ask` rule; `build` may start
/// `explore` only.
const BASE: &str = r#"
[[subagents]]
id = "explore"
availableTools = ["read_file", "list_files"]
requireApproval = ["list_files"]
rules = [{ tool = "read_file", path = "secret/**", action = "ask" }]

[[subagents]]
id = "writer"
availableTools = ["read_file", "write_file"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "list_files", "write_file", "subagent"]
subagents = ["explore"]
"#;

fn recorded() -> RecordedConfig {
    RecordedConfig::of(&config::parse(BASE, "modes.toml").expect("base"))
}

/// The `wider` lines of the change from [`BASE`] to `text`.
fn wider(text: &str) -> Vec<String> {
    let graph = config::parse(text, "modes.toml").expect("changed config");
    recorded().change_to(&graph).wider
}

#[test]
fn the_same_config_changes_nothing() {
    let graph = config::parse(BASE, "modes.toml").expect("base");
    assert!(recorded().change_to(&graph).is_empty());
}

#[test]
fn a_type_given_a_new_tool_widens() {
    let text = BASE.replace(
        "availableTools = [\"read_file\", \"list_files\"]",
        "availableTools = [\"read_file\", \"list_files\", \"write_file\"]",
    );
    assert_eq!(
        wider(&text),
        ["subagent type `explore` offers `write_file` (it did not)"]
    );
}

#[test]
fn a_type_that_no_longer_asks_widens() {
    let text = BASE.replace("requireApproval = [\"list_files\"]\n", "");
    assert_eq!(
        wider(&text),
        ["subagent type `explore` runs `list_files` without asking (it asked before)"]
    );
}

#[test]
fn a_type_losing_an_ask_rule_widens() {
    let text = BASE.replace(
        "rules = [{ tool = \"read_file\", path = \"secret/**\", action = \"ask\" }]\n",
        "",
    );
    assert_eq!(
        wider(&text),
        ["subagent type `explore` no longer has the rule `ask read_file path `secret/**``"]
    );
}

#[test]
fn a_mode_newly_allowed_a_type_widens() {
    let listed = BASE.replace(
        "subagents = [\"explore\"]",
        "subagents = [\"explore\", \"writer\"]",
    );
    assert_eq!(
        wider(&listed),
        ["mode `build` may start the subagent type `writer` (it could not)"]
    );
    // A mode that leaves its list out may start every type.
    let every = BASE.replace("subagents = [\"explore\"]\n", "");
    assert_eq!(
        wider(&every),
        ["mode `build` may start the subagent type `writer` (it could not)"]
    );
}

#[test]
fn narrowing_a_type_only_narrows() {
    let text = BASE.replace(
        "requireApproval = [\"list_files\"]",
        "requireApproval = [\"list_files\", \"read_file\"]",
    );
    let graph = config::parse(&text, "modes.toml").expect("changed config");
    let change = recorded().change_to(&graph);
    assert!(change.only_narrows(), "{change}");
    assert_eq!(
        change.narrower,
        ["subagent type `explore` asks before `read_file`"]
    );
}

#[test]
fn a_record_without_types_reads_back_and_round_trips_with_them() {
    let old = serde_json::json!({
        "path": "modes.toml",
        "modes": [{"id": "build", "tools": null, "instructions": ""}],
    });
    let read: RecordedConfig = serde_json::from_value(old).expect("an old record reads");
    assert!(read.subagents.is_empty());
    assert_eq!(read.modes[0].subagents, None);
    let now = recorded();
    let json = serde_json::to_value(&now).expect("json");
    assert_eq!(
        json["modes"][0]["subagents"],
        serde_json::json!(["explore"])
    );
    assert_eq!(json["subagents"][0]["id"], "explore");
    let back: RecordedConfig = serde_json::from_value(json).expect("reads back");
    assert_eq!(back, now);
}
