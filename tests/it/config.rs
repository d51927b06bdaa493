//! Config loading: every valid and invalid case file, default-mode resolution, planning modes and
//! hand-over targets, error locations and messages.

use crate::common;

use agent_controller::ToolRegistry;
use agent_controller::config::{self, ConfigErrorKind};
use common::{fixture, read_fixture};

fn expected(dir: &str) -> toml::Table {
    read_fixture(&format!("configs/{dir}/expected.toml"))
        .parse()
        .expect("expected.toml")
}

/// Files in a fixture folder other than expected.toml, so no case file goes untested.
fn case_files(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixture(&format!("configs/{dir}")))
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n != "expected.toml")
        .collect();
    names.sort();
    names
}

#[test]
fn every_valid_case_loads_with_the_expected_default_planning_modes_and_targets() {
    let expected = expected("valid");
    let files = case_files("valid");
    assert_eq!(
        files.len(),
        expected.len(),
        "every case file has an expectation"
    );
    for name in files {
        let case = expected[&name].as_table().expect("case table");
        let graph = config::load(fixture(&format!("configs/valid/{name}")))
            .unwrap_or_else(|e| panic!("{name} must load: {e}"));
        let tools = ToolRegistry::with_workspace_tools();
        graph
            .check_tools(|t| tools.knows(t))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            graph.default_mode().id(),
            case["default"].as_str().expect("default"),
            "{name}: default"
        );
        let planning: Vec<&str> = graph.planning_modes().map(|m| graph.mode(m).id()).collect();
        let want: Vec<&str> = case["planning"]
            .as_array()
            .expect("planning")
            .iter()
            .map(|v| v.as_str().expect("id"))
            .collect();
        assert_eq!(planning, want, "{name}: planning modes");
        let none = toml::Table::new();
        let approve = match case.get("approve") {
            Some(approve) => approve.as_table().expect("approve"),
            None => &none,
        };
        assert_eq!(
            approve.len(),
            planning.len(),
            "{name}: one target per planning mode"
        );
        for (from, to) in approve {
            let from_id = graph.get(from).expect("from mode");
            assert_eq!(
                graph.mode(graph.transition_target(from_id)).id(),
                to.as_str().expect("to"),
                "{name}: {from}"
            );
            // The modes a user may choose: `approve_to` where the case lists several, else the
            // plain approval's target alone.
            let want: Vec<&str> = match case.get("approve_to").and_then(|t| t.get(from)) {
                Some(list) => list
                    .as_array()
                    .expect("approve_to list")
                    .iter()
                    .map(|v| v.as_str().expect("id"))
                    .collect(),
                None => vec![to.as_str().expect("to")],
            };
            let got: Vec<&str> = graph
                .transition_targets(from_id)
                .iter()
                .map(|t| graph.mode(*t).id())
                .collect();
            assert_eq!(got, want, "{name}: targets of {from}");
        }
        check_approval_required(&name, case, &graph);
        check_subagents(&name, case, &graph);
    }
}

/// Each mode's subagent types as the case's `subagents` says (for a mode the case leaves out,
/// or a case without the key: every type of the config, which is none in the older cases).
fn check_subagents(name: &str, case: &toml::Table, graph: &agent_controller::ModeGraph) {
    let wanted = case.get("subagents").and_then(|t| t.as_table());
    for mode in graph.modes() {
        let id = graph.get(mode.id()).expect("a mode of the graph");
        let got: Vec<&str> = graph.subagents_of(id).iter().map(|t| t.id()).collect();
        let want: Vec<&str> = match wanted.and_then(|t| t.get(mode.id())) {
            Some(list) => list
                .as_array()
                .expect("subagents list")
                .iter()
                .map(|v| v.as_str().expect("type id"))
                .collect(),
            None => graph.subagents().iter().map(|t| t.id()).collect(),
        };
        assert_eq!(got, want, "{name}: subagent types of {}", mode.id());
    }
}

/// Each mode's `requireApproval` as the case's `approval_required` says: `true` for every
/// offered tool, a list of tool names, or (for a mode the case leaves out) none.
fn check_approval_required(name: &str, case: &toml::Table, graph: &agent_controller::ModeGraph) {
    use agent_controller::mode::RequireApproval;
    let wanted = case.get("approval_required").and_then(|t| t.as_table());
    for mode in graph.modes() {
        let want = match wanted.and_then(|t| t.get(mode.id())) {
            None => RequireApproval::None,
            Some(toml::Value::Boolean(true)) => RequireApproval::All,
            Some(list) => RequireApproval::Tools(
                list.as_array()
                    .expect("approval_required list")
                    .iter()
                    .map(|v| v.as_str().expect("tool").into())
                    .collect(),
            ),
        };
        assert_eq!(
            mode.require_approval(),
            &want,
            "{name}: requireApproval of {}",
            mode.id()
        );
    }
}

#[test]
fn every_invalid_case_is_refused_at_the_expected_line_with_the_expected_words() {
    let expected = expected("invalid");
    let files = case_files("invalid");
    assert_eq!(
        files.len(),
        expected.len(),
        "every case file has an expectation"
    );
    let tools = ToolRegistry::with_workspace_tools();
    for name in files {
        let case = expected[&name].as_table().expect("case table");
        let path = fixture(&format!("configs/invalid/{name}"));
        let err = match config::load(&path) {
            Err(e) => e,
            Ok(graph) => graph
                .check_tools(|t| tools.knows(t))
                .expect_err(&format!("{name} must be refused")),
        };
        // One line, or the lines any of which is right (a missing key: anywhere in its table).
        let lines: Vec<usize> = match &case["line"] {
            toml::Value::Array(lines) => lines
                .iter()
                .map(|l| l.as_integer().expect("line") as usize)
                .collect(),
            line => vec![line.as_integer().expect("line") as usize],
        };
        let line = err.location().map_or(0, |l| l.line);
        assert!(
            lines.contains(&line),
            "{name}: line {line} not in {lines:?}: {err}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{}:{line}:", path.display())),
            "{name}: message starts with file:line:col: {text}"
        );
        for word in case["mentions"].as_array().expect("mentions") {
            let word = word.as_str().expect("word");
            assert!(
                text.to_lowercase().contains(&word.to_lowercase()),
                "{name}: `{word}` missing from: {text}"
            );
        }
    }
}

#[test]
fn invalid_cases_report_their_kind() {
    let cases = [
        ("duplicate-id.toml", ConfigErrorKind::DuplicateId),
        ("self-transition.toml", ConfigErrorKind::SelfTransition),
        ("unknown-target.toml", ConfigErrorKind::UnknownTarget),
        ("unknown-field.toml", ConfigErrorKind::UnknownField),
        ("two-defaults.toml", ConfigErrorKind::MultipleDefaults),
        (
            "unknown-default-id.toml",
            ConfigErrorKind::UnknownDefaultModeId,
        ),
        ("no-modes.toml", ConfigErrorKind::NoModes),
        ("wrong-type.toml", ConfigErrorKind::InvalidType),
        ("empty-id.toml", ConfigErrorKind::InvalidId),
        (
            "conflicting-default.toml",
            ConfigErrorKind::ConflictingDefault,
        ),
        ("missing-id.toml", ConfigErrorKind::MissingField),
        ("not-toml.toml", ConfigErrorKind::Syntax),
        (
            "target-without-submit-plan.toml",
            ConfigErrorKind::TargetWithoutSubmitPlan,
        ),
        ("plans-dir-outside.toml", ConfigErrorKind::InvalidPlansDir),
        ("targets-list-unknown.toml", ConfigErrorKind::UnknownTarget),
        ("targets-list-self.toml", ConfigErrorKind::SelfTransition),
        (
            "targets-list-duplicate.toml",
            ConfigErrorKind::DuplicateTarget,
        ),
        (
            "require-approval-not-offered.toml",
            ConfigErrorKind::ApprovalToolNotOffered,
        ),
        ("duplicate-tool.toml", ConfigErrorKind::DuplicateTool),
    ];
    for (name, kind) in cases {
        let err = config::load(fixture(&format!("configs/invalid/{name}"))).expect_err(name);
        assert_eq!(err.kind(), kind, "{name}: {err}");
    }
    // A typo of `submit_plan` is an unknown tool (not a missing submit_plan), with a suggestion.
    let err = config::load(fixture("configs/invalid/unknown-tool.toml")).expect_err("typo");
    assert_eq!(err.kind(), ConfigErrorKind::UnknownTool);
    assert!(
        err.to_string().contains("did you mean `submit_plan`"),
        "{err}"
    );
    // Any other unknown name is caught against the controller's registry.
    let graph = config::parse(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"submit_plan\", \"grep\"]\n[[modes]]\nid = \"build\"\n",
        "t.toml",
    )
    .expect("parses");
    let err = graph
        .check_tools(|t| ToolRegistry::with_workspace_tools().knows(t))
        .expect_err("unknown tool");
    assert_eq!(err.kind(), ConfigErrorKind::UnknownTool);
    assert_eq!(err.location().map(|l| (l.line, l.column)), Some((4, 34)));
    assert!(err.to_string().contains("`grep`"), "{err}");
    // ... and so is one a subagent type lists.
    let graph = config::load(fixture("configs/invalid/subagent-unknown-tool.toml")).expect("loads");
    let err = graph
        .check_tools(|t| ToolRegistry::with_workspace_tools().knows(t))
        .expect_err("unknown tool of a subagent type");
    assert_eq!(err.kind(), ConfigErrorKind::UnknownTool);
    assert_eq!(err.location().map(|l| (l.line, l.column)), Some((9, 32)));
}

#[test]
fn errors_show_the_offending_text_with_a_caret() {
    let err = config::load(fixture("configs/invalid/unknown-target.toml")).expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("3 | transitionsTo = \"biuld\""), "{text}");
    assert!(text.contains("^^^^^^^"), "{text}");
    assert_eq!(err.location().map(|l| l.column), Some(17));
}

#[test]
fn mode_ids_are_case_sensitive_and_must_be_ascii_words() {
    let err = config::parse(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = \"Build\"\n[[modes]]\nid = \"build\"\n",
        "t",
    )
    .expect_err("Build is not build");
    assert_eq!(err.kind(), ConfigErrorKind::UnknownTarget);
    let err = config::parse("[[modes]]\nid = \"plan mode\"\n", "t").expect_err("space");
    assert_eq!(err.kind(), ConfigErrorKind::InvalidId);
    assert_eq!(err.location().map(|l| l.line), Some(2));
}

#[test]
fn default_mode_resolution_order() {
    let text = |top: &str, flag_on: &str| {
        let flag = |id: &str| {
            if id == flag_on {
                "default = true\n"
            } else {
                ""
            }
        };
        format!(
            "{top}[[modes]]\nid = \"a\"\n{}[[modes]]\nid = \"b\"\n{}[[modes]]\nid = \"c\"\n{}",
            flag("a"),
            flag("b"),
            flag("c")
        )
    };
    let default_of = |t: String| {
        config::parse(&t, "t")
            .expect("valid")
            .default_mode()
            .id()
            .to_owned()
    };
    assert_eq!(default_of(text("", "")), "a", "first mode");
    assert_eq!(default_of(text("", "c")), "c", "marked default");
    assert_eq!(
        default_of(text("defaultModeId = \"b\"\n", "")),
        "b",
        "defaultModeId"
    );
    assert_eq!(
        default_of(text("defaultModeId = \"b\"\n", "b")),
        "b",
        "both agree"
    );
}

#[test]
fn check_reports_every_problem_at_once_in_text_order() {
    let text = "[[modes]]\nid = \"a\"\ntransitionsTo = \"a\"\n[[modes]]\nid = \"a\"\n[[modes]]\nid = \"b\"\ntransitionsTo = \"zz\"\n";
    let errors = config::check(text, "t");
    let lines: Vec<usize> = errors
        .iter()
        .filter_map(|e| e.location())
        .map(|l| l.line)
        .collect();
    assert_eq!(lines, vec![3, 5, 8]);
    assert!(config::check(&read_fixture("configs/valid/chain.toml"), "t").is_empty());
}

#[test]
fn metadata_model_and_texts_are_kept() {
    let graph = config::load(fixture("configs/valid/three-modes.toml")).expect("valid");
    let plan = graph.mode(graph.get("plan").expect("plan"));
    assert_eq!(plan.default_model_id(), Some("openai/o3"));
    assert_eq!(plan.metadata()["color"].as_str(), Some("#3b82f6"));
    let fast = graph.mode(graph.get("fast").expect("fast"));
    assert_eq!(fast.instructions(), "Answer briefly.");
    assert_eq!(fast.available_tools().map(<[_]>::len), Some(0));
    let unicode = config::load(fixture("configs/valid/unicode.toml")).expect("valid");
    assert_eq!(
        unicode.mode(unicode.get("plan").expect("plan")).name(),
        "計画"
    );
}

#[test]
fn the_shipped_config_is_the_plan_build_pair() {
    let graph =
        config::load(concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml")).expect("valid");
    let tools = ToolRegistry::with_workspace_tools();
    graph.check_tools(|t| tools.knows(t)).expect("known tools");
    assert_eq!(graph.default_mode().id(), "build");
    let plan = graph.get("plan").expect("plan");
    assert_eq!(graph.mode(graph.transition_target(plan)).id(), "build");
    let plan_tools = graph.mode(plan).available_tools().expect("allowlist");
    assert!(plan_tools.iter().any(|t| &**t == "submit_plan"));
    assert!(
        !plan_tools.iter().any(|t| &**t == "write_file"),
        "plan mode must not write files"
    );
}

#[test]
fn loading_a_missing_file_is_an_io_error() {
    let err = config::load("does/not/exist.toml").expect_err("missing");
    assert_eq!(err.kind(), ConfigErrorKind::Io);
    assert!(err.to_string().contains("does/not/exist.toml"));
}

#[test]
fn the_known_ids_in_a_message_are_listed_once() {
    // (An id near a known one gets "did you mean" instead of the list.)
    let text = "defaultModeId = \"code\"\n[[modes]]\nid = \"plan\"\n[[modes]]\nid = \"plan\"\n[[modes]]\nid = \"build\"\n";
    let errors = config::check(text, "t.toml");
    let unknown = errors
        .iter()
        .find(|e| e.kind() == ConfigErrorKind::UnknownDefaultModeId)
        .expect("unknown default");
    assert!(
        unknown.message().ends_with("known: plan, build)"),
        "{}",
        unknown.message()
    );
}

#[test]
fn plans_dir_must_be_a_non_empty_relative_path_inside_the_workspace() {
    let refused = [
        "/",
        "",
        "../x",
        ".",
        "./",
        "a/../../b",
        "a/../b",
        "/tmp/plans",
    ];
    for dir in refused {
        let text = format!(
            "defaultModeId = \"build\"\nplansDir = \"{dir}\"\n\n[[modes]]\nid = \"build\"\n"
        );
        let err = config::parse(&text, "modes.toml").expect_err(dir);
        assert_eq!(err.kind(), ConfigErrorKind::InvalidPlansDir, "{dir}: {err}");
        assert_eq!(
            err.location().map(|l| (l.line, l.column)),
            Some((2, 12)),
            "{dir}: {err}"
        );
        assert!(err.to_string().contains("plansDir"), "{err}");
        // `check` reports it with the other errors, at the same place.
        let all = config::check(&text, "modes.toml");
        assert_eq!(all.len(), 1, "{dir}: {all:?}");
    }
    for dir in [".agent/plans", "plans", "./docs/plans", "a/b/c"] {
        let text = format!("plansDir = \"{dir}\"\n[[modes]]\nid = \"build\"\n");
        let graph = config::parse(&text, "modes.toml").unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(graph.plans_dir(), std::path::Path::new(dir));
    }
}

#[test]
fn a_config_that_is_not_utf8_is_an_error_at_the_first_bad_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("modes.toml");
    let mut bytes = b"[[modes]]\nid = \"b\"\nname = \"Bu".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(b"ild\"\n");
    std::fs::write(&path, &bytes).expect("write");
    let err = config::load(&path).expect_err("not UTF-8");
    assert_eq!(err.kind(), ConfigErrorKind::NotUtf8, "{err}");
    let loc = err.location().expect("a location");
    assert_eq!((loc.line, loc.column), (3, 11), "{err}");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3:11: ", path.display())),
        "{err}"
    );
    assert!(err.to_string().contains("UTF-8"), "{err}");
}

#[test]
fn configs_that_are_not_regular_files_or_too_large_are_refused_at_once() {
    let started = std::time::Instant::now();
    // /dev/zero never ends: reading it grew to gigabytes before.
    let err = config::load("/dev/zero").expect_err("a device");
    assert_eq!(err.kind(), ConfigErrorKind::Io, "{err}");
    assert!(err.to_string().contains("not a regular file"), "{err}");
    // A config linked to it, as `config/modes.toml -> /dev/zero`.
    let dir = tempfile::tempdir().expect("tempdir");
    let link = dir.path().join("modes.toml");
    std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
    let err = config::load(&link).expect_err("a link to a device");
    assert!(err.to_string().contains("not a regular file"), "{err}");
    // A FIFO with no writer would block a plain read for ever.
    let fifo = dir.path().join("fifo.toml");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let err = config::load(&fifo).expect_err("a FIFO");
    assert!(err.to_string().contains("not a regular file"), "{err}");
    // Over the 4 MiB limit.
    let big = dir.path().join("big.toml");
    let mut text = "[[modes]]\nid = \"b\"\n".to_owned();
    text.push_str(&"#".repeat(config::MAX_CONFIG_BYTES as usize));
    std::fs::write(&big, text).expect("write");
    let err = config::load(&big).expect_err("too large");
    assert!(err.to_string().contains("limit"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

/// A graph built in code is validated by the rules of a TOML config: each case gives the same
/// error kind and message as the TOML text with the same values, without a file position.
#[test]
fn a_mode_graph_built_in_code_follows_the_toml_rules() {
    use agent_controller::{config::ModeBuilder as M, config::ModeGraphBuilder as G};
    let plan = || M::new("plan").available_tools(["read_file", "submit_plan"]);
    let cases: Vec<(G, &str)> = vec![
        (G::new(), "modes = []"),
        (G::new().mode(M::new("a b")), "[[modes]]\nid = \"a b\""),
        (
            G::new().mode(M::new("x")).mode(M::new("x")),
            "[[modes]]\nid = \"x\"\n[[modes]]\nid = \"x\"",
        ),
        (
            G::new().mode(plan().transitions_to("plan")),
            "[[modes]]\nid = \"plan\"\navailableTools = [\"read_file\", \"submit_plan\"]\ntransitionsTo = \"plan\"",
        ),
        (
            G::new().mode(plan().transitions_to("biuld")),
            "[[modes]]\nid = \"plan\"\navailableTools = [\"read_file\", \"submit_plan\"]\ntransitionsTo = \"biuld\"",
        ),
        (
            G::new().mode(M::new("a")).default_mode_id("b"),
            "defaultModeId = \"b\"\n[[modes]]\nid = \"a\"",
        ),
        (
            G::new()
                .mode(M::new("a").default_mode())
                .mode(M::new("b").default_mode()),
            "[[modes]]\nid = \"a\"\ndefault = true\n[[modes]]\nid = \"b\"\ndefault = true",
        ),
        (
            G::new()
                .mode(M::new("a").default_mode())
                .mode(M::new("b"))
                .default_mode_id("b"),
            "defaultModeId = \"b\"\n[[modes]]\nid = \"a\"\ndefault = true\n[[modes]]\nid = \"b\"",
        ),
        (
            G::new()
                .mode(
                    M::new("plan")
                        .transitions_to("build")
                        .available_tools(["read_file"]),
                )
                .mode(M::new("build")),
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\"]\n[[modes]]\nid = \"build\"",
        ),
    ];
    for (builder, text) in cases {
        let from_code = builder.build().expect_err(text);
        let from_toml = config::parse(text, "modes.toml").expect_err(text);
        assert_eq!(from_code.kind(), from_toml.kind(), "{text}");
        assert_eq!(from_code.message(), from_toml.message(), "{text}");
        assert_eq!(from_code.location(), None, "{text}");
        assert_eq!(from_code.origin(), config::BUILDER_ORIGIN);
        assert!(
            !from_code.to_string().contains('\n'),
            "no snippet: {from_code}"
        );
    }
}

/// A graph built in code is the graph the same TOML gives: same modes, default, hand-over
/// targets and fingerprint; an unknown tool is reported without a position.
#[test]
fn a_mode_graph_built_in_code_equals_its_toml_twin() {
    use agent_controller::{config::ModeBuilder, config::ModeGraphBuilder};
    let built = ModeGraphBuilder::new()
        .mode(
            ModeBuilder::new("plan")
                .name("Plan")
                .instructions("Plan first.")
                .transitions_to("build")
                .available_tools(["read_file", "write_plan", "submit_plan", "grep"]),
        )
        .mode(ModeBuilder::new("build").name("Build").default_mode())
        .plans_dir("plans")
        .build()
        .expect("valid");
    let text = "plansDir = \"plans\"\n[[modes]]\nid = \"plan\"\nname = \"Plan\"\ninstructions = \"Plan first.\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\", \"grep\"]\n[[modes]]\nid = \"build\"\nname = \"Build\"\ndefault = true\n";
    let parsed = config::parse(text, "modes.toml").expect("valid");
    assert_eq!(built.modes(), parsed.modes());
    assert_eq!(built.default_mode_id(), parsed.default_mode_id());
    assert_eq!(built.plans_dir(), parsed.plans_dir());
    assert_eq!(built.fingerprint(), parsed.fingerprint());
    let unknown = built.unknown_tools(|t| t != "grep");
    assert_eq!(unknown.len(), 1);
    assert_eq!(
        unknown[0].kind(),
        agent_controller::config::ConfigErrorKind::UnknownTool
    );
    assert_eq!(unknown[0].location(), None);
    assert!(
        parsed.unknown_tools(|t| t != "grep")[0]
            .location()
            .is_some()
    );
}

/// `transitionsTo` takes a mode id or a list of them; every entry of a list is checked (unknown,
/// itself, named twice), each error at the entry's own line and column.
#[test]
fn every_entry_of_a_targets_list_is_checked_at_its_own_column() {
    let text = "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"biuld\", \"plan\", \"build\"]\n[[modes]]\nid = \"build\"\n";
    let errors = config::check(text, "t.toml");
    let found: Vec<(ConfigErrorKind, usize, usize)> = errors
        .iter()
        .map(|e| {
            let at = e.location().expect("a location");
            (e.kind(), at.line, at.column)
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (ConfigErrorKind::UnknownTarget, 3, 27),
            (ConfigErrorKind::SelfTransition, 3, 36),
            (ConfigErrorKind::DuplicateTarget, 3, 44),
        ],
        "{errors:?}"
    );
    assert!(errors[0].to_string().contains("`biuld`"), "{}", errors[0]);
    assert!(
        errors[2].to_string().contains("`build` twice"),
        "{}",
        errors[2]
    );
    // The snippet's carets sit under the entry, not the whole list.
    assert!(
        errors[1]
            .to_string()
            .ends_with("|                                    ^^^^^^"),
        "{}",
        errors[1]
    );
    // A list across lines: the entry's own line, as the fixture shows.
    let err =
        config::load(fixture("configs/invalid/targets-list-unknown.toml")).expect_err("biuld");
    assert_eq!(
        err.location().map(|l| (l.line, l.column)),
        Some((5, 3)),
        "{err}"
    );
}

#[test]
fn a_targets_list_must_name_at_least_one_mode_and_only_mode_ids() {
    let empty = "[[modes]]\nid = \"plan\"\ntransitionsTo = []\n[[modes]]\nid = \"build\"\n";
    let err = config::parse(empty, "t.toml").expect_err("empty list");
    assert_eq!(err.kind(), ConfigErrorKind::EmptyTargets, "{err}");
    assert_eq!(
        err.location().map(|l| (l.line, l.column)),
        Some((3, 17)),
        "{err}"
    );
    for (value, column) in [
        ("3", 17),
        ("[\"build\", 3]", 27),
        ("{ id = \"build\" }", 17),
    ] {
        let text = format!(
            "[[modes]]\nid = \"plan\"\ntransitionsTo = {value}\n[[modes]]\nid = \"build\"\n"
        );
        let err = config::parse(&text, "t.toml").expect_err(value);
        assert_eq!(err.kind(), ConfigErrorKind::InvalidType, "{value}: {err}");
        assert_eq!(
            err.location().map(|l| (l.line, l.column)),
            Some((3, column)),
            "{value}: {err}"
        );
    }
    let err = config::parse(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = 3\n[[modes]]\nid = \"build\"\n",
        "t.toml",
    )
    .expect_err("a number");
    assert!(
        err.message().contains("a mode id or a list of mode ids"),
        "{err}"
    );
}

/// The single-id and the one-entry list forms mean the same graph (and fingerprint), so a
/// session saved under one restores under the other.
#[test]
fn one_target_written_as_a_list_is_the_same_graph() {
    let one = config::parse(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n[[modes]]\nid = \"build\"\n",
        "t.toml",
    )
    .expect("valid");
    let list = config::parse(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\"]\n[[modes]]\nid = \"build\"\n",
        "t.toml",
    )
    .expect("valid");
    assert_eq!(one.modes(), list.modes());
    assert_eq!(one.fingerprint(), list.fingerprint());
    let two = config::load(fixture("configs/valid/targets-list.toml")).expect("valid");
    let plan = two.get("plan").expect("plan");
    assert_eq!(two.mode(plan).transitions_to(), two.get("build"));
    assert_eq!(two.mode(plan).transitions_to_all().len(), 2);
    let edges: Vec<(&str, &str)> = two
        .transition_edges()
        .map(|(from, to)| (two.mode(from).id(), two.mode(to).id()))
        .collect();
    assert_eq!(edges, [("plan", "build"), ("plan", "build-auto")]);
    // Another target changes what a pending plan may be approved to: a new fingerprint.
    assert_ne!(two.fingerprint(), {
        let text = read_fixture("configs/valid/targets-list.toml")
            .replace("[\"build\", \"build-auto\"]", "\"build\"");
        config::parse(&text, "t.toml").expect("valid").fingerprint()
    });
}

#[test]
fn a_targets_list_built_in_code_follows_the_toml_rules() {
    use agent_controller::{config::ModeBuilder as M, config::ModeGraphBuilder as G};
    let plan = |targets: &[&str]| M::new("plan").transitions_to_list(targets.iter().copied());
    let cases: Vec<(G, &str)> = vec![
        (
            G::new()
                .mode(plan(&["build", "build"]))
                .mode(M::new("build")),
            "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"build\"]\n[[modes]]\nid = \"build\"",
        ),
        (
            G::new()
                .mode(plan(&["build", "plan"]))
                .mode(M::new("build")),
            "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"plan\"]\n[[modes]]\nid = \"build\"",
        ),
        (
            G::new().mode(plan(&[])).mode(M::new("build")),
            "[[modes]]\nid = \"plan\"\ntransitionsTo = []\n[[modes]]\nid = \"build\"",
        ),
    ];
    for (builder, text) in cases {
        let from_code = builder.build().expect_err(text);
        let from_toml = config::parse(text, "modes.toml").expect_err(text);
        assert_eq!(from_code.kind(), from_toml.kind(), "{text}");
        assert_eq!(from_code.message(), from_toml.message(), "{text}");
        assert_eq!(from_code.location(), None, "{text}");
    }
    let built = G::new()
        .mode(plan(&["build", "build-auto"]))
        .mode(M::new("build").default_mode())
        .mode(M::new("build-auto"))
        .build()
        .expect("valid");
    let parsed = config::parse(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"build-auto\"]\n[[modes]]\nid = \"build\"\ndefault = true\n[[modes]]\nid = \"build-auto\"\n",
        "modes.toml",
    )
    .expect("valid");
    assert_eq!(built.modes(), parsed.modes());
    assert_eq!(built.fingerprint(), parsed.fingerprint());
}

#[test]
fn require_approval_of_submit_plan_is_refused_at_its_line_and_column() {
    let errors = config::check(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\nrequireApproval = [\"submit_plan\"]\n[[modes]]\nid = \"build\"\n",
        "modes.toml",
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    let err = &errors[0];
    assert_eq!(err.kind(), ConfigErrorKind::ApprovalOfSubmitPlan);
    assert_eq!(err.location().map(|l| (l.line, l.column)), Some((4, 20)));
    assert!(err.message().contains("`submit_plan`"), "{err}");
    assert!(err.message().contains("requireApproval"), "{err}");
}

#[test]
fn require_approval_takes_true_false_or_a_list_and_refuses_other_types() {
    let parse = |value: &str| {
        config::parse(
            &format!(
                "[[modes]]\nid = \"build\"\navailableTools = [\"read_file\", \"write_file\"]\nrequireApproval = {value}\n"
            ),
            "modes.toml",
        )
    };
    let all = parse("true").expect("true");
    assert_eq!(
        all.default_mode().require_approval(),
        &agent_controller::mode::RequireApproval::All
    );
    assert!(all.default_mode().requires_approval("read_file"));
    let none = parse("false").expect("false");
    assert!(!none.default_mode().requires_approval("write_file"));
    let listed = parse("[\"write_file\"]").expect("list");
    assert!(listed.default_mode().requires_approval("write_file"));
    assert!(!listed.default_mode().requires_approval("read_file"));
    let err = parse("\"write_file\"").expect_err("a string is not a list");
    assert_eq!(err.kind(), ConfigErrorKind::InvalidType);
    assert_eq!(err.location().map(|l| l.line), Some(4));
}

#[test]
fn require_approval_of_a_mode_offering_every_tool_is_checked_against_the_controllers_tools() {
    // Without availableTools the mode offers every tool: a listed name must be one of them.
    let graph = config::parse(
        "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\", \"rm_rf\"]\n",
        "modes.toml",
    )
    .expect("parses");
    let tools = ToolRegistry::with_workspace_tools();
    let errors = graph.unknown_tools(|t| tools.knows(t));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind(), ConfigErrorKind::UnknownTool);
    assert_eq!(
        errors[0].location().map(|l| (l.line, l.column)),
        Some((3, 34))
    );
    assert!(
        errors[0].message().contains("`rm_rf` in requireApproval"),
        "{}",
        errors[0]
    );
}

#[test]
fn require_approval_changes_the_config_fingerprint_only_where_it_is_set() {
    let plain = config::parse("[[modes]]\nid = \"build\"\n", "a.toml").expect("plain");
    let off = config::parse(
        "[[modes]]\nid = \"build\"\nrequireApproval = false\n",
        "a.toml",
    )
    .expect("off");
    let on = config::parse(
        "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
        "a.toml",
    )
    .expect("on");
    assert_eq!(plain.fingerprint(), off.fingerprint());
    assert_ne!(plain.fingerprint(), on.fingerprint());
}

#[test]
fn unknown_tools_among_suggests_only_a_near_unambiguous_name() {
    let graph = config::parse(
        "[[modes]]\nid = \"build\"\nrequireApproval = [\"Write_File\", \"grep\", \"subit_plan\", \"cot\"]\n\n[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"submit_plan\", \"subit_plan\"]\n",
        "modes.toml",
    )
    .expect("parses");
    let messages: Vec<String> = graph
        .unknown_tools_among(&["read_file", "write_file", "cat", "cut"])
        .iter()
        .map(|e| e.message().to_owned())
        .collect();
    assert_eq!(
        messages,
        [
            "mode `build` lists unknown tool `Write_File` in requireApproval: did you mean `write_file`? (tool names are case-sensitive)",
            "mode `build` lists unknown tool `grep` in requireApproval",
            // `submit_plan` is never listed in requireApproval, so it is no guess there.
            "mode `build` lists unknown tool `subit_plan` in requireApproval",
            // `cat` and `cut` are both one edit away: no guess.
            "mode `build` lists unknown tool `cot` in requireApproval",
            "mode `plan` lists unknown tool `subit_plan` in availableTools: did you mean `submit_plan`?",
        ]
    );
    // The closure form has no names to suggest from.
    let plain = graph.unknown_tools(|t| ["read_file", "write_file"].contains(&t));
    assert!(!plain[0].message().contains("did you mean"), "{}", plain[0]);
}

/// Issue 19 item 7: a name listed twice in `availableTools`, `requireApproval` or `transitionsTo`
/// is refused at the second entry's line and column (the tool lists accepted it silently), by
/// `check` once per repeat, and in a graph built in code.
#[test]
fn an_entry_listed_twice_is_refused_at_its_second_line_and_column() {
    let cases = [
        (
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"submit_plan\", \"read_file\"]\n[[modes]]\nid = \"build\"\n",
            ConfigErrorKind::DuplicateTool,
            (4, 47),
            "mode `plan` lists `read_file` twice in availableTools",
        ),
        (
            "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\", \"read_file\", \"write_file\"]\n",
            ConfigErrorKind::DuplicateTool,
            (3, 47),
            "mode `build` lists `write_file` twice in requireApproval",
        ),
        (
            "[[modes]]\nid = \"build\"\navailableTools = [\"write_file\"]\nrequireApproval = [\"write_file\", \"write_file\"]\n",
            ConfigErrorKind::DuplicateTool,
            (4, 34),
            "mode `build` lists `write_file` twice in requireApproval",
        ),
        (
            "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"build\"]\n[[modes]]\nid = \"build\"\n",
            ConfigErrorKind::DuplicateTarget,
            (3, 27),
            "mode `plan` lists `build` twice in transitionsTo",
        ),
    ];
    for (text, kind, (line, column), words) in cases {
        let errors = config::check(text, "twice.toml");
        assert_eq!(errors.len(), 1, "{text}: {errors:?}");
        let err = &errors[0];
        assert_eq!(err.kind(), kind, "{err}");
        assert_eq!(
            err.location().map(|l| (l.line, l.column)),
            Some((line, column)),
            "{err}"
        );
        assert!(err.message().contains(words), "{err}");
    }
    let thrice = "[[modes]]\nid = \"build\"\navailableTools = [\"a\", \"a\", \"a\"]\n";
    let columns: Vec<usize> = config::check(thrice, "t.toml")
        .iter()
        .map(|e| e.location().expect("placed").column)
        .collect();
    assert_eq!(columns, [24, 29]);

    use agent_controller::{config::ModeBuilder, config::ModeGraphBuilder};
    let err = ModeGraphBuilder::new()
        .mode(ModeBuilder::new("build").available_tools(["read_file", "read_file"]))
        .build()
        .expect_err("listed twice");
    assert_eq!(err.kind(), ConfigErrorKind::DuplicateTool);
}

/// A tool that does nothing, under any name: a registry of many distinct tools.
struct Named(String);

#[agent_controller::async_trait]
impl agent_controller::Tool for Named {
    fn name(&self) -> &str {
        &self.0
    }
    fn description(&self) -> String {
        String::new()
    }
    fn input_schema(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    async fn execute(
        &self,
        _args: &serde_json::Value,
        _ctx: &agent_controller::ToolContext<'_>,
    ) -> agent_controller::ToolOutput {
        agent_controller::ToolOutput::ok("")
    }
}

/// Issue 19 item 7: one `availableTools` line of 30,000 entries (about 420 KB, and a
/// `requireApproval` line of the same) aborted the process: each name kept a copy of its whole
/// line, so memory grew with the square of the list's length, and each lookup scanned the list.
/// Distinct names that a controller registers make it valid: it loads, checks clean against
/// them, a controller offers them all, and with none of them known each name is reported at its
/// own column with a bounded snippet. (Time goes in `benches/config_load.rs`, not here.)
#[test]
fn a_config_with_a_30000_entry_tool_list_on_one_line_loads_and_checks() {
    const N: usize = 30_000;
    let names: Vec<String> = (0..N).map(|i| format!("tool_{i:05}")).collect();
    let list = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!(
        "[[modes]]\nid = \"build\"\navailableTools = [{list}]\nrequireApproval = [{list}]\n"
    );
    assert!(text.len() > 2 * 400_000, "{}", text.len());
    let graph = config::parse(&text, "big.toml").expect("loads");
    let build = graph.default_mode();
    assert_eq!(build.available_tools().map(<[_]>::len), Some(N));
    assert!(build.requires_approval("tool_29999"));
    let known: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(config::check_with_tool_names(&text, "big.toml", &known), []);

    let mut tools = ToolRegistry::new();
    for name in &names {
        tools
            .register(std::sync::Arc::new(Named(name.clone())))
            .expect("distinct");
    }
    let controller = agent_controller::AgentController::builder(
        graph,
        std::sync::Arc::new(agent_controller::model::scripted::ScriptedModel::new()),
    )
    .tools(tools)
    .build()
    .expect("a controller");
    let build = controller.modes().default_mode_id();
    assert_eq!(controller.tool_specs(build).len(), N);

    let errors = config::check_with_tools(&text, "big.toml", |_| false);
    assert_eq!(errors.len(), N, "one unknown tool per name");
    for (i, err) in [(0, &errors[0]), (N - 1, &errors[N - 1])] {
        assert_eq!(
            err.location().map(|l| (l.line, l.column)),
            Some((3, 19 + 14 * i)),
            "{err}"
        );
        let shown = err.to_string();
        assert!(
            shown.len() < 400,
            "a bounded snippet: {} bytes",
            shown.len()
        );
        assert!(
            shown.contains(&format!("\"tool_{i:05}\"")),
            "the snippet shows the name: {shown}"
        );
    }
}

/// Issue 21: `check` goes on after an unknown field and reports every error of the file, each
/// at its line and column, with "did you mean" for near-miss keys, mode ids and tools, and a
/// case hint for an id that differs only in case.
#[test]
fn check_reports_every_error_after_an_unknown_field_with_hints() {
    let text = "\
defaultModeId = \"Plan\"
plansDri = \"plans\"

[[modes]]
id = \"plan\"
transitionTo = \"build\"
availableTools = [\"read_file\", \"submit_plan\"]
instructons = \"Plan first.\"

[[modes]]
id = \"build\"
transitionsTo = \"pln\"
availableTools = [\"submit_plan\", \"reed_file\"]
";
    let errors = config::check_with_tool_names(text, "m.toml", &["read_file", "write_file"]);
    let shown: Vec<String> = errors
        .iter()
        .map(|e| e.to_string().lines().next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        shown,
        [
            "m.toml:1:17: defaultModeId `Plan` names no mode; the mode is `plan` (ids are case-sensitive)",
            "m.toml:2:1: unknown field `plansDri`: did you mean `plansDir`?",
            "m.toml:6:1: unknown field `transitionTo` in mode `plan`: did you mean `transitionsTo`?",
            "m.toml:8:1: unknown field `instructons` in mode `plan`: did you mean `instructions`?",
            "m.toml:12:17: mode `build` has transitionsTo `pln`, which names no mode: did you mean `plan`?",
            "m.toml:13:34: mode `build` lists unknown tool `reed_file` in availableTools: did you mean `read_file`?",
        ],
        "{errors:#?}"
    );
    assert_eq!(errors[1].kind(), ConfigErrorKind::UnknownField);
    // `parse` reports the first of them.
    let first = config::parse(text, "m.toml").expect_err("invalid");
    assert_eq!(first.location().map(|l| (l.line, l.column)), Some((1, 17)));
    // Type errors in several modes are all reported too.
    let text =
        "[[modes]]\nid = \"a\"\ndefault = \"yes\"\n\n[[modes]]\nid = \"b\"\nname = 3\nbogus = 1\n";
    let lines: Vec<(usize, ConfigErrorKind)> = config::check(text, "t.toml")
        .iter()
        .map(|e| (e.location().map_or(0, |l| l.line), e.kind()))
        .collect();
    assert_eq!(
        lines,
        [
            (3, ConfigErrorKind::InvalidType),
            (7, ConfigErrorKind::InvalidType),
            (8, ConfigErrorKind::UnknownField),
        ]
    );
}

/// Issue 21: a key with no near known key lists the keys, and a key in the wrong table says
/// where it belongs.
#[test]
fn an_unknown_field_far_from_every_key_lists_them_or_says_where_it_belongs() {
    let text =
        "id = \"plan\"\n[[modes]]\nid = \"plan\"\ncolour = \"red\"\ndefaultModeId = \"plan\"\n";
    let messages: Vec<String> = config::check(text, "t.toml")
        .iter()
        .map(|e| e.message().to_owned())
        .collect();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert!(
        messages[0].contains("`id` belongs in a [[modes]] table"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1]
            .starts_with("unknown field `colour` in mode `plan`, expected one of `id`, `name`"),
        "{}",
        messages[1]
    );
    assert!(
        messages[2].contains("`defaultModeId` belongs at the top of the file"),
        "{}",
        messages[2]
    );
}

/// Issue 21: `build()` names every unknown tool, not only the first, and points at
/// `ToolRegistry::with_workspace_tools()` when a name is one of the built-in tools.
#[test]
fn build_lists_every_unknown_tool_and_hints_at_the_built_in_tools() {
    use agent_controller::AgentController;
    use agent_controller::model::scripted::ScriptedModel;
    use std::sync::Arc;
    let graph = config::parse(
        "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"grep\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\navailableTools = [\"write_file\", \"list_files\"]\n",
        "modes.toml",
    )
    .expect("parses");
    let err = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .build()
        .expect_err("no tools registered");
    assert_eq!(err.kind(), ConfigErrorKind::UnknownTool);
    assert_eq!(err.location().map(|l| (l.line, l.column)), Some((4, 19)));
    assert_eq!(
        err.message(),
        "mode `plan` lists unknown tool `read_file` in availableTools, and 3 more: `grep` (4:32, mode `plan`), `write_file` (8:19, mode `build`), `list_files` (8:33, mode `build`). `read_file`, `write_file` and `list_files` are built-in tools: register them with `ToolRegistry::with_workspace_tools()`"
    );
}

/// Issue 40: `planScope` takes `ask`, `enforce` or `off`, only on a planning mode (elsewhere it
/// could never apply), each error at the value; a mode leaving it out binds by `ask`, and only
/// a mode that sets another value changes the config's fingerprint.
#[test]
fn plan_scope_is_checked_at_its_value_and_only_on_a_planning_mode() {
    let config = |plan: &str, build: &str| {
        format!(
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n{plan}\n\n[[modes]]\nid = \"build\"\ndefault = true\n{build}\n"
        )
    };
    let errors = config::check(&config("", "planScope = \"enforce\""), "m.toml");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind(), ConfigErrorKind::InvalidPlanScope);
    assert_eq!(errors[0].location().map(|l| l.line), Some(9));
    assert!(
        errors[0].message().contains("plans nothing"),
        "{}",
        errors[0]
    );
    let errors = config::check(&config("planScope = \"Enforce\"", ""), "m.toml");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind(), ConfigErrorKind::InvalidPlanScope);
    let plain = config::parse(&config("", ""), "m.toml").expect("valid");
    let asks = config::parse(&config("planScope = \"ask\"", ""), "m.toml").expect("valid");
    let enforces = config::parse(&config("planScope = \"enforce\"", ""), "m.toml").expect("valid");
    let plan = plain.get("plan").expect("plan");
    assert_eq!(plain.mode(plan).plan_scope().as_str(), "ask");
    assert_eq!(enforces.mode(plan).plan_scope().as_str(), "enforce");
    assert_eq!(plain.fingerprint(), asks.fingerprint());
    assert_ne!(plain.fingerprint(), enforces.fingerprint());
}
