//! `[[subagents]]` in the config (issue 38), checked like modes at line:col: unknown tools in a
//! type's lists, duplicate type ids, a mode's `subagents` entry naming no type, unknown keys.

use agent_controller::config::{self, ConfigErrorKind};

/// The (kind, line, column) of each error of `check_with_tool_names` over the workspace tools.
fn errors(text: &str) -> Vec<(ConfigErrorKind, usize, usize, String)> {
    config::check_with_tool_names(
        text,
        "modes.toml",
        &["read_file", "write_file", "list_files"],
    )
    .into_iter()
    .map(|e| {
        let at = e.location().expect("a location");
        (e.kind(), at.line, at.column, e.message().to_owned())
    })
    .collect()
}

#[test]
fn a_valid_config_with_subagents_has_no_errors_and_modes_name_their_types() {
    let text = r#"
[[subagents]]
id = "explore"
availableTools = ["read_file"]

[[subagents]]
id = "writer"

[[modes]]
id = "build"
availableTools = ["read_file", "subagent"]
subagents = ["explore"]

[[modes]]
id = "all"
availableTools = ["read_file", "subagent"]
"#;
    assert_eq!(errors(text), []);
    let graph = config::parse(text, "modes.toml").expect("parses");
    let build = graph.get("build").expect("build");
    let all = graph.get("all").expect("all");
    let ids = |m| {
        graph
            .subagents_of(m)
            .iter()
            .map(|t| t.id().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(build), ["explore"]);
    assert_eq!(
        ids(all),
        ["explore", "writer"],
        "the list left out: every type"
    );
}

#[test]
fn an_unknown_tool_in_a_types_list_is_an_error_at_its_line_and_column() {
    let text = "[[subagents]]\nid = \"explore\"\navailableTools = [\"read_file\", \"reed_file\"]\n\n[[modes]]\nid = \"build\"\n";
    let found = errors(text);
    assert_eq!(found.len(), 1, "{found:?}");
    let (kind, line, column, message) = &found[0];
    assert_eq!(*kind, ConfigErrorKind::UnknownTool);
    assert_eq!((*line, *column), (3, 32));
    assert!(message.contains("subagent type `explore`"), "{message}");
    assert!(message.contains("did you mean `read_file`"), "{message}");
}

#[test]
fn a_duplicate_type_id_is_an_error_at_the_second_id() {
    let text = "[[subagents]]\nid = \"explore\"\n\n[[subagents]]\nid = \"explore\"\n\n[[modes]]\nid = \"build\"\n";
    let found = errors(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, ConfigErrorKind::DuplicateId);
    assert_eq!((found[0].1, found[0].2), (5, 6));
    assert!(found[0].3.contains("duplicate subagent type id `explore`"));
}

#[test]
fn a_modes_subagents_entry_naming_no_type_is_an_error_at_the_entry() {
    let text = "[[subagents]]\nid = \"explore\"\n\n[[modes]]\nid = \"build\"\nsubagents = [\"explore\", \"explor\"]\n";
    let found = errors(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, ConfigErrorKind::UnknownSubagent);
    assert_eq!((found[0].1, found[0].2), (6, 25));
    assert!(
        found[0].3.contains("did you mean `explore`"),
        "{}",
        found[0].3
    );
}

#[test]
fn an_unknown_key_in_a_type_is_an_error_at_the_key_and_the_rest_is_still_checked() {
    let text = "[[subagents]]\nid = \"explore\"\ninstruction = \"x\"\n\n[[modes]]\nid = \"build\"\nsubagents = [\"nobody\"]\n";
    let found = errors(text);
    let kinds: Vec<ConfigErrorKind> = found.iter().map(|e| e.0).collect();
    assert_eq!(
        kinds,
        [
            ConfigErrorKind::UnknownField,
            ConfigErrorKind::UnknownSubagent
        ],
        "{found:?}"
    );
    assert_eq!((found[0].1, found[0].2), (3, 1));
    assert!(
        found[0].3.contains("did you mean `instructions`"),
        "{}",
        found[0].3
    );
}

#[test]
fn a_types_require_approval_must_name_a_tool_it_lists_and_its_rules_are_checked() {
    let text = "[[subagents]]\nid = \"explore\"\navailableTools = [\"read_file\"]\nrequireApproval = [\"write_file\"]\nrules = [{ tool = \"write_file\", action = \"deny\" }]\n\n[[modes]]\nid = \"build\"\n";
    let found = errors(text);
    let kinds: Vec<ConfigErrorKind> = found.iter().map(|e| e.0).collect();
    assert_eq!(
        kinds,
        [
            ConfigErrorKind::ApprovalToolNotOffered,
            ConfigErrorKind::RuleToolNotOffered
        ],
        "{found:?}"
    );
    assert_eq!(found[0].1, 4);
    assert!(
        found[1].3.contains("subagent type `explore`"),
        "{}",
        found[1].3
    );
}

#[test]
fn a_types_rule_changing_only_its_arg_or_matcher_kind_changes_the_fingerprint() {
    let config_with = |rule: &str| {
        let text = format!(
            "[[subagents]]\nid = \"writer\"\nrules = [\n  {rule},\n]\n\n[[modes]]\nid = \"build\"\n"
        );
        config::parse(&text, "modes.toml")
            .expect("parses")
            .fingerprint()
    };
    let content = config_with(
        r#"{ tool = "write_file", arg = "content", regex = "4[0-9]", action = "deny" }"#,
    );
    let path =
        config_with(r#"{ tool = "write_file", arg = "path", regex = "4[0-9]", action = "deny" }"#);
    let glob = config_with(
        r#"{ tool = "write_file", arg = "content", glob = "4[0-9]", action = "deny" }"#,
    );
    assert_ne!(
        content, path,
        "a type rule's arg is part of the fingerprint"
    );
    assert_ne!(
        content, glob,
        "a type rule's matcher kind is part of the fingerprint"
    );
}

#[test]
fn a_types_allow_rule_is_an_error_at_its_action_that_says_why() {
    // A child may do only what its parent's mode allows: a type's `deny` and `ask` rules narrow
    // it, an `allow` would widen it, so it is refused rather than silently dropped.
    let text = "[[subagents]]\nid = \"writer\"\nrules = [\n  { tool = \"write_file\", action = \"deny\" },\n  { tool = \"read_file\", path = \"src/**\", action = \"allow\" },\n]\n\n[[modes]]\nid = \"build\"\n";
    let found = errors(text);
    assert_eq!(found.len(), 1, "{found:?}");
    let (kind, line, column, message) = &found[0];
    assert_eq!(*kind, ConfigErrorKind::InvalidRule);
    assert_eq!((*line, *column), (5, 51), "at the rule's action");
    for word in ["rule 2", "subagent type `writer`", "allow", "parent"] {
        assert!(message.contains(word), "`{word}` missing from: {message}");
    }
    assert!(
        config::parse(text, "modes.toml").is_err(),
        "the config does not load"
    );
}

#[test]
fn a_types_require_approval_is_checked_as_a_modes_is() {
    // One check for both (the type's copy of it let these through): a tool named twice, and
    // `submit_plan`, whose plan always waits for a decision.
    let text = "[[subagents]]\nid = \"explore\"\nrequireApproval = [\"read_file\", \"read_file\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\n";
    let found = errors(text);
    let kinds: Vec<ConfigErrorKind> = found.iter().map(|e| e.0).collect();
    assert_eq!(
        kinds,
        [
            ConfigErrorKind::DuplicateTool,
            ConfigErrorKind::ApprovalOfSubmitPlan
        ],
        "{found:?}"
    );
    assert_eq!((found[0].1, found[0].2), (3, 33));
    assert!(
        found[0]
            .3
            .contains("subagent type `explore` lists `read_file` twice"),
        "{}",
        found[0].3
    );
    assert!(
        found[1].3.contains("subagent type `explore`"),
        "{}",
        found[1].3
    );
}
