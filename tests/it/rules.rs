//! Rules on tool-call arguments (issue 23, item 1): the config is read and checked at
//! line:col, `decide` follows the documented precedence (checked against a reference over
//! generated rules and calls), and paths are matched where the jail resolves them (checked
//! against a model of a workspace with symlinks over generated spellings). Each property is
//! also run against a planted bug — a deny rule ignored, a path rule matched on the path as
//! written — and must catch it.

use std::path::Path;

use agent_controller::rules::{
    DecidedBy, Matcher, PathGlob, ResolvedPath, ResolvedPaths, Rule, RuleAction, Rules, StringGlob,
    Verdict, resolve_paths,
};
use agent_controller::{ToolCall, ToolRegistry, config, config::ConfigErrorKind, mode::Mode};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

fn graph(text: &str) -> agent_controller::ModeGraph {
    config::parse(text, "modes.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn errors(text: &str) -> Vec<(usize, usize, ConfigErrorKind, String)> {
    let mut all = config::check(text, "modes.toml");
    all.extend(config::rule_errors(
        text,
        "modes.toml",
        &ToolRegistry::with_workspace_tools(),
    ));
    all.sort_by_key(|e| e.location());
    all.iter()
        .map(|e| {
            let at = e.location().expect("a place");
            (at.line, at.column, e.kind(), e.message().to_owned())
        })
        .collect()
}

fn decide(mode: &Mode, offered: bool, call: &ToolCall, paths: &ResolvedPaths) -> Verdict {
    mode.decide(offered, call, paths)
}

fn write(path: &str) -> ToolCall {
    ToolCall::new("c1", "write_file", json!({"path": path, "content": "x"}))
}

const BUILD: &str = r#"
[[modes]]
id = "build"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "**/.env*", action = "deny" },
  { tool = "write_file", path = "src/**", action = "allow" },
  { tool = "write_file", arg = "content", regex = ".*BEGIN PRIVATE KEY.*", action = "deny" },
  { tool = "read_file", path = "secret/**", action = "ask" },
]
"#;

#[test]
fn rules_are_read_in_order_with_their_kinds() {
    let graph = graph(BUILD);
    let rules: Vec<String> = graph
        .default_mode()
        .rules()
        .as_slice()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        rules,
        [
            "deny write_file path `**/.env*`",
            "allow write_file path `src/**`",
            "deny write_file content regex `.*BEGIN PRIVATE KEY.*`",
            "ask read_file path `secret/**`",
        ]
    );
}

#[test]
fn the_precedence_is_available_tools_then_deny_ask_allow_then_the_default() {
    let graph = graph(BUILD);
    let build = graph.default_mode();
    let at = |p: &str| ResolvedPaths::new().with("path", p);
    let outcome = |v: Verdict| (v.action, v.decided_by);
    // An allowed path, and one in no rule: the mode's requireApproval.
    assert_eq!(
        outcome(decide(build, true, &write("src/a.rs"), &at("src/a.rs"))),
        (RuleAction::Allow, DecidedBy::Rule(2))
    );
    assert_eq!(
        outcome(decide(build, true, &write("docs/a.md"), &at("docs/a.md"))),
        (RuleAction::Ask, DecidedBy::RequireApproval)
    );
    // Deny beats allow wherever it is listed.
    assert_eq!(
        outcome(decide(build, true, &write("src/.env"), &at("src/.env"))),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    let key = ToolCall::new(
        "c2",
        "write_file",
        json!({"path": "src/k.pem", "content": "-----BEGIN PRIVATE KEY-----"}),
    );
    let verdict = decide(build, true, &key, &at("src/k.pem"));
    assert_eq!(
        (verdict.action, verdict.decided_by),
        (RuleAction::Deny, DecidedBy::Rule(3))
    );
    assert!(
        verdict
            .reason
            .starts_with("rule 3 of mode `build` (deny write_file content regex"),
        "{}",
        verdict.reason
    );
    // availableTools outranks every rule, an allow rule too.
    assert_eq!(
        outcome(decide(build, false, &write("src/a.rs"), &at("src/a.rs"))),
        (RuleAction::Deny, DecidedBy::AvailableTools)
    );
    // A tool with no rule and no requireApproval runs.
    let read = ToolCall::new("c3", "read_file", json!({"path": "README.md"}));
    assert_eq!(
        outcome(decide(build, true, &read, &at("README.md"))),
        (RuleAction::Allow, DecidedBy::Default)
    );
}

#[test]
fn a_path_in_doubt_is_never_allowed_and_always_denied_or_asked() {
    let graph = graph(BUILD);
    let build = graph.default_mode();
    let outside = ResolvedPaths::new()
        .with_resolved("path", ResolvedPath::Doubtful("leads outside".to_owned()));
    let verdict = decide(build, true, &write("src/../../x"), &outside);
    assert_eq!(
        (verdict.action, verdict.decided_by),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    assert!(verdict.reason.contains("in doubt"), "{}", verdict.reason);
    // Not a string: no allow either.
    let odd = ToolCall::new(
        "c4",
        "write_file",
        json!({"path": ["src/a.rs"], "content": ""}),
    );
    let paths = resolve_paths(build.rules(), &odd, Path::new("."));
    assert!(matches!(
        paths.get("path"),
        Some(ResolvedPath::NotAString(_))
    ));
    assert_eq!(decide(build, true, &odd, &paths).action, RuleAction::Deny);
    // An argument left out matches no rule on it.
    let bare = ToolCall::new("c5", "write_file", json!({"content": ""}));
    assert_eq!(
        decide(build, true, &bare, &ResolvedPaths::new()).decided_by,
        DecidedBy::RequireApproval
    );
}

#[test]
fn string_rules_match_the_canonical_value_whole() {
    let graph = graph(
        r#"
[[modes]]
id = "build"
rules = [
  { tool = "write_file", arg = "content", glob = "git *", action = "allow" },
  { tool = "write_file", arg = "content", regex = "4[0-9]", action = "deny" },
]
"#,
    );
    let build = graph.default_mode();
    let call =
        |content: Value| ToolCall::new("c", "write_file", json!({"path": "a", "content": content}));
    let action = |content: Value| decide(build, true, &call(content), &ResolvedPaths::new()).action;
    assert_eq!(action(json!("git log src/a.rs")), RuleAction::Allow);
    assert_eq!(
        action(json!("echo; git log")),
        RuleAction::Allow,
        "the mode's default: it runs"
    );
    assert_eq!(
        decide(
            build,
            true,
            &call(json!("echo; git log")),
            &ResolvedPaths::new()
        )
        .decided_by,
        DecidedBy::Default
    );
    // 42.0 is `42` canonically, and the regex is anchored: `142` does not match.
    assert_eq!(action(json!(42.0)), RuleAction::Deny);
    assert_eq!(
        decide(build, true, &call(json!(142)), &ResolvedPaths::new()).decided_by,
        DecidedBy::Default
    );
}

#[test]
fn check_reports_each_bad_rule_at_its_line_and_column() {
    let text = r#"[[modes]]
id = "build"
availableTools = ["read_file", "write_file"]
rules = [
  { tool = "write_fil", action = "ask" },
  { tool = "write_file", arg = "pth", path = "x", action = "ask" },
  { tool = "write_file", path = "[", action = "ask" },
  { tool = "write_file", arg = "content", regex = "a)|(b", action = "deny" },
  { tool = "write_file", regex = "a", action = "ask" },
  { tool = "write_file", arg = "content", action = "ask" },
  { tool = "write_file", path = "a", glob = "b", action = "ask" },
  { tool = "submit_plan", action = "deny" },
  { tool = "write_file", action = "ask" },
  { tool = "write_file", path = "src/**", action = "allow" },
  { tool = "read_file", path = "a/**", action = "ask" },
  { tool = "read_file", path = "a/**", action = "ask" },
]
"#;
    let found = errors(text);
    let kinds: Vec<(usize, usize, ConfigErrorKind)> =
        found.iter().map(|(l, c, k, _)| (*l, *c, *k)).collect();
    assert_eq!(
        kinds,
        [
            (5, 12, ConfigErrorKind::RuleToolNotOffered),
            (6, 32, ConfigErrorKind::UnknownArgument),
            (7, 33, ConfigErrorKind::InvalidPattern),
            (8, 51, ConfigErrorKind::InvalidPattern),
            (9, 34, ConfigErrorKind::InvalidRule),
            (10, 32, ConfigErrorKind::InvalidRule),
            (11, 45, ConfigErrorKind::InvalidRule),
            (12, 12, ConfigErrorKind::InvalidRule),
            (14, 3, ConfigErrorKind::ShadowedRule),
            (16, 3, ConfigErrorKind::ShadowedRule),
        ],
        "{found:#?}"
    );
    let message = |line: usize| {
        found
            .iter()
            .find(|(l, ..)| *l == line)
            .map(|(.., m)| m.as_str())
            .unwrap_or_default()
    };
    assert!(
        message(5).ends_with("did you mean `write_file`?"),
        "{}",
        message(5)
    );
    assert!(
        message(6).ends_with("did you mean `path`?"),
        "{}",
        message(6)
    );
    assert!(message(8).contains("unopened group"), "{}", message(8));
    assert_eq!(
        message(14),
        "rule 10 of mode `build` (allow write_file path `src/**`) can never decide a call: rule 9 (ask write_file) matches every call it matches, and ask beats allow: to ask about the calls no rule allows, list `write_file` in requireApproval and leave rule 9 out"
    );
    assert!(
        message(16).ends_with("and comes first: leave one of them out"),
        "{}",
        message(16)
    );
    // Bad input changes nothing: the config is refused whole.
    assert!(config::parse(text, "modes.toml").is_err());
}

#[test]
fn a_rule_on_a_tool_the_controller_lacks_is_refused_at_build() {
    let text =
        "[[modes]]\nid = \"build\"\nrules = [{ tool = \"run_command\", action = \"ask\" }]\n";
    let graph = graph(text);
    let model = std::sync::Arc::new(agent_controller::model::scripted::ScriptedModel::new());
    let err = agent_controller::AgentController::builder(graph, model)
        .tools(ToolRegistry::with_workspace_tools())
        .build()
        .map(|_| ())
        .expect_err("refused");
    assert_eq!(err.kind(), ConfigErrorKind::UnknownTool);
    assert_eq!(err.location().map(|l| (l.line, l.column)), Some((3, 19)));
}

#[test]
fn a_controller_refuses_rules_until_sessions_apply_them() {
    // Until the session applies rules, a deny rule would be silently ignored: refused instead.
    let text = "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", path = \".env\", action = \"deny\" }]\n";
    let model = std::sync::Arc::new(agent_controller::model::scripted::ScriptedModel::new());
    let err = agent_controller::AgentController::builder(graph(text), model)
        .tools(ToolRegistry::with_workspace_tools())
        .build()
        .map(|_| ())
        .expect_err("refused");
    assert_eq!(err.kind(), ConfigErrorKind::InvalidRule);
    assert!(
        err.to_string()
            .starts_with("modes.toml:3:19: mode `build` has rules"),
        "{err}"
    );
}

#[test]
fn the_fingerprint_changes_with_the_rules_only_when_there_are_some() {
    let plain = graph("[[modes]]\nid = \"build\"\n");
    let empty = graph("[[modes]]\nid = \"build\"\nrules = []\n");
    let one = graph(
        "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", action = \"deny\" }]\n",
    );
    let other =
        graph("[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", action = \"ask\" }]\n");
    assert_eq!(plain.fingerprint(), empty.fingerprint());
    assert_ne!(plain.fingerprint(), one.fingerprint());
    assert_ne!(one.fingerprint(), other.fingerprint());
}

#[cfg(feature = "schema")]
#[test]
fn the_schema_describes_rules() {
    let schema = config::schema();
    let rule = &schema["definitions"]["Rule"];
    assert_eq!(rule["additionalProperties"], false);
    assert_eq!(rule["required"], json!(["tool", "action"]));
    assert_eq!(
        rule["properties"]["action"]["enum"],
        json!(["allow", "ask", "deny"])
    );
    assert_eq!(rule["dependencies"]["glob"], json!(["arg"]));
    let validator = jsonschema::validator_for(&schema).expect("a schema");
    let as_json = |text: &str| -> Value {
        let table: toml::Table = toml::from_str(text).expect("toml");
        serde_json::to_value(table).expect("json")
    };
    assert!(validator.is_valid(&as_json(BUILD)));
    assert!(!validator.is_valid(&as_json(
        "[[modes]]\nid = \"b\"\nrules = [{ tool = \"t\", glob = \"x\", action = \"ask\" }]\n"
    )));
    assert!(!validator.is_valid(&as_json(
        "[[modes]]\nid = \"b\"\nrules = [{ tool = \"t\", action = \"approve\" }]\n"
    )));
}

// The precedence, against a reference over generated rules and calls.

/// The tools, arguments and values the generated rules and calls draw from.
const TOOLS: [&str; 2] = ["write_file", "read_file"];
const PATHS: [&str; 5] = ["src/a.rs", "src/.env", ".env", "docs/b.md", "secret/k"];

/// A rule as the reference sees it: a tool, a literal path, a `dir/**` glob, a string prefix
/// (`glob = "prefix*"`) or the whole tool, and an action.
#[derive(Debug, Clone)]
enum Shape {
    Any,
    Exact(&'static str),
    Under(&'static str),
    Prefix(&'static str),
}

#[derive(Debug, Clone)]
struct RefRule {
    tool: &'static str,
    shape: Shape,
    action: RuleAction,
}

fn action() -> impl Strategy<Value = RuleAction> {
    prop_oneof![
        Just(RuleAction::Allow),
        Just(RuleAction::Ask),
        Just(RuleAction::Deny)
    ]
}

fn ref_rule() -> impl Strategy<Value = RefRule> {
    let shape = prop_oneof![
        Just(Shape::Any),
        proptest::sample::select(PATHS.to_vec()).prop_map(Shape::Exact),
        proptest::sample::select(vec!["src", "docs", "secret"]).prop_map(Shape::Under),
        proptest::sample::select(vec!["git ", "rm ", "g"]).prop_map(Shape::Prefix),
    ];
    (proptest::sample::select(TOOLS.to_vec()), shape, action()).prop_map(|(tool, shape, action)| {
        RefRule {
            tool,
            shape,
            action,
        }
    })
}

fn real_rule(r: &RefRule) -> Rule {
    let path = |glob: String| Matcher::Path {
        arg: "path".into(),
        glob: PathGlob::new(&glob).expect("glob"),
    };
    let matcher = match r.shape {
        Shape::Any => Matcher::Any,
        Shape::Exact(p) => path(p.to_owned()),
        Shape::Under(dir) => path(format!("{dir}/**")),
        Shape::Prefix(prefix) => Matcher::Glob {
            arg: "content".into(),
            glob: StringGlob::new(&format!("{prefix}*")).expect("glob"),
        },
    };
    Rule::new(r.tool, matcher, r.action)
}

/// The reference: every rule that matches, the strongest action, the first of those; else the
/// mode's default. Written from the documentation, sharing nothing with `decide`.
fn reference(
    rules: &[RefRule],
    tool: &str,
    path: &str,
    content: &str,
    asks: bool,
) -> (RuleAction, DecidedBy) {
    let fits = |r: &RefRule| {
        r.tool == tool
            && match r.shape {
                Shape::Any => true,
                Shape::Exact(p) => p == path,
                Shape::Under(dir) => path.starts_with(&format!("{dir}/")),
                Shape::Prefix(prefix) => content.starts_with(prefix),
            }
    };
    let mut best: Option<(usize, RuleAction)> = None;
    for (i, rule) in rules.iter().enumerate() {
        if fits(rule) && best.is_none_or(|(_, a)| rule.action > a) {
            best = Some((i + 1, rule.action));
        }
    }
    match best {
        Some((n, action)) => (action, DecidedBy::Rule(n)),
        None if asks => (RuleAction::Ask, DecidedBy::RequireApproval),
        None => (RuleAction::Allow, DecidedBy::Default),
    }
}

type Decider = dyn Fn(&Mode, &ToolCall, &ResolvedPaths) -> Verdict;

/// Runs the precedence property against `decider`; `Err` with the first counterexample.
fn precedence_holds(decider: &Decider) -> Result<(), String> {
    let mut runner = TestRunner::new(Config {
        cases: 512,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(23),
        ..Config::default()
    });
    let case = (
        proptest::collection::vec(ref_rule(), 0..6),
        proptest::sample::select(TOOLS.to_vec()),
        proptest::sample::select(PATHS.to_vec()),
        proptest::sample::select(vec!["git status", "rm -rf /", "gx", "ls"]),
        any::<bool>(),
    );
    runner
        .run(&case, |(rules, tool, path, content, asks)| {
            let approval = if asks { "requireApproval = true\n" } else { "" };
            let graph = config::parse(&format!("[[modes]]\nid = \"m\"\n{approval}"), "m.toml")
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mode = with_rules(
                graph.modes()[0].clone(),
                rules.iter().map(real_rule).collect(),
            );
            let call = ToolCall::new("c", tool, json!({"path": path, "content": content}));
            let paths = ResolvedPaths::new().with("path", path);
            let got = decider(&mode, &call, &paths);
            let want = reference(&rules, tool, path, content, asks);
            prop_assert_eq!((got.action, got.decided_by), want, "rules {:?}", rules);
            Ok(())
        })
        .map_err(|e| e.to_string())
}

/// `mode` with `rules` instead of its own.
fn with_rules(mode: Mode, rules: Vec<Rule>) -> Mode {
    mode.with_rules(Rules::new(rules))
}

#[test]
fn decide_follows_the_documented_precedence() {
    if let Err(e) = precedence_holds(&|mode, call, paths| decide(mode, true, call, paths)) {
        panic!("{e}");
    }
}

#[test]
fn the_precedence_property_catches_a_deny_rule_ignored() {
    // Planted bug: deny rules are dropped before deciding.
    let planted = |mode: &Mode, call: &ToolCall, paths: &ResolvedPaths| {
        let kept: Vec<Rule> = mode
            .rules()
            .as_slice()
            .iter()
            .filter(|r| r.action() != RuleAction::Deny)
            .cloned()
            .collect();
        decide(&with_rules(mode.clone(), kept), true, call, paths)
    };
    let caught = precedence_holds(&planted).expect_err("the planted bug is caught");
    assert!(caught.contains("Deny"), "{caught}");
}

#[test]
fn the_precedence_property_catches_first_match_wins() {
    // Planted bug: the first matching rule decides, whatever its action.
    let planted = |mode: &Mode, call: &ToolCall, paths: &ResolvedPaths| {
        let first = mode
            .rules()
            .as_slice()
            .iter()
            .position(|r| Rules::new(vec![r.clone()]).deciding(call, paths).is_some());
        match first {
            Some(i) => {
                let only = vec![mode.rules().as_slice()[i].clone()];
                let mut v = decide(&with_rules(mode.clone(), only), true, call, paths);
                v.decided_by = DecidedBy::Rule(i + 1);
                v
            }
            None => decide(mode, true, call, paths),
        }
    };
    precedence_holds(&planted).expect_err("the planted bug is caught");
}

// Paths where the jail resolves them, against a model of the workspace.

/// The workspace: `src/a.rs`, `src/up -> ..`, `src/out -> <outside>`, `secret/k`, `.env`.
fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let ws = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let root = ws.path();
    std::fs::create_dir_all(root.join("src")).expect("src");
    std::fs::create_dir_all(root.join("secret")).expect("secret");
    std::fs::write(root.join("src/a.rs"), "").expect("a.rs");
    std::fs::write(root.join("secret/k"), "").expect("k");
    std::fs::write(root.join(".env"), "").expect(".env");
    std::os::unix::fs::symlink("..", root.join("src/up")).expect("up");
    std::os::unix::fs::symlink(outside.path(), root.join("src/out")).expect("out");
    (ws, outside)
}

/// Where the model workspace puts `parts`: `None` when the jail cannot tell (outside, a file
/// used as a folder, `..` past a name that does not exist yet). Existing folders are walked
/// (the symlinks taken), and past the first name that does not exist the rest applies as
/// written.
fn model_resolve(parts: &[&str]) -> Option<String> {
    let dirs = ["", "src", "secret"];
    let files = ["src/a.rs", "secret/k", ".env"];
    let mut at: Vec<String> = Vec::new();
    // Whether everything so far exists, and whether it is a file.
    let mut exists = true;
    let mut file = false;
    for part in parts {
        let here = at.join("/");
        if file || (!exists && *part == "..") {
            return None;
        }
        match *part {
            "." => {}
            ".." => {
                at.pop()?;
            }
            "up" if exists && here == "src" => at.clear(),
            "out" if exists && here == "src" => return None,
            name => {
                at.push(name.to_owned());
                let path = at.join("/");
                file = exists && files.contains(&path.as_str());
                exists = exists && (file || dirs.contains(&path.as_str()));
            }
        }
    }
    Some(at.join("/"))
}

const PATH_RULES: &str = r#"
[[modes]]
id = "build"
rules = [
  { tool = "write_file", path = "secret/**", action = "deny" },
  { tool = "write_file", path = ".env", action = "deny" },
  { tool = "write_file", path = "src/**", action = "allow" },
]
"#;

type Resolver = dyn Fn(&Rules, &ToolCall, &Path) -> ResolvedPaths;

/// Runs the path property against `resolver`: no spelling of a path reaches `secret/` or `.env`
/// without the deny rule, and none outside `src/` is allowed.
fn paths_hold(resolver: &Resolver) -> Result<(), String> {
    let (ws, _outside) = workspace();
    let graph = graph(PATH_RULES);
    let build = graph.default_mode();
    let mut runner = TestRunner::new(Config {
        cases: 384,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(23),
        ..Config::default()
    });
    let part = proptest::sample::select(vec![
        "src", "secret", "k", ".env", "a.rs", "up", "out", ".", "..", "new",
    ]);
    runner
        .run(&proptest::collection::vec(part, 1..6), |parts| {
            let spelled = parts.join("/");
            let call = write(&spelled);
            let paths = resolver(build.rules(), &call, ws.path());
            let got = decide(build, true, &call, &paths);
            let model = model_resolve(&parts);
            if let Some(real) = &model {
                prop_assert_eq!(
                    paths.get("path"),
                    Some(&ResolvedPath::Inside(real.clone())),
                    "`{}`",
                    spelled
                );
            }
            let want = match model {
                // In doubt: denied by the first deny rule on the path.
                None => (RuleAction::Deny, DecidedBy::Rule(1)),
                Some(real) if real.starts_with("secret/") => (RuleAction::Deny, DecidedBy::Rule(1)),
                Some(real) if real == ".env" => (RuleAction::Deny, DecidedBy::Rule(2)),
                Some(real) if real.starts_with("src/") => (RuleAction::Allow, DecidedBy::Rule(3)),
                Some(_) => (RuleAction::Allow, DecidedBy::Default),
            };
            prop_assert_eq!(
                (got.action, got.decided_by),
                want,
                "`{}` resolved to {:?}",
                spelled,
                paths.get("path")
            );
            Ok(())
        })
        .map_err(|e| e.to_string())
}

#[test]
fn path_rules_match_where_the_jail_resolves_the_path() {
    if let Err(e) = paths_hold(&resolve_paths) {
        panic!("{e}");
    }
}

#[test]
fn the_path_property_catches_a_path_rule_matched_as_written() {
    // Planted bug: the path is matched as the model spelled it.
    let planted = |_: &Rules, call: &ToolCall, _: &Path| {
        let spelled = call.args["path"].as_str().unwrap_or_default().to_owned();
        ResolvedPaths::new().with("path", &spelled)
    };
    paths_hold(&planted).expect_err("the planted bug is caught");
}

#[test]
fn the_path_property_catches_a_symlink_not_followed() {
    // Planted bug: `.` and `..` applied, but symlinks not followed.
    let planted = |_: &Rules, call: &ToolCall, _: &Path| {
        let spelled = call.args["path"].as_str().unwrap_or_default();
        let mut at: Vec<&str> = Vec::new();
        for part in spelled.split('/') {
            match part {
                "." => {}
                ".." => {
                    if at.pop().is_none() {
                        return ResolvedPaths::new()
                            .with_resolved("path", ResolvedPath::Doubtful("outside".to_owned()));
                    }
                }
                name => at.push(name),
            }
        }
        ResolvedPaths::new().with("path", &at.join("/"))
    };
    paths_hold(&planted).expect_err("the planted bug is caught");
    // Through a symlink alone, too: `src/up` is the workspace itself.
    let build = graph(PATH_RULES);
    let call = write("src/up/secret/k");
    let paths = planted(build.default_mode().rules(), &call, Path::new("."));
    assert_eq!(
        decide(build.default_mode(), true, &call, &paths).action,
        RuleAction::Allow
    );
    let (ws, _outside) = workspace();
    let paths = resolve_paths(build.default_mode().rules(), &call, ws.path());
    assert_eq!(
        decide(build.default_mode(), true, &call, &paths).action,
        RuleAction::Deny
    );
}

#[test]
fn the_jail_resolves_the_spellings_of_the_issue() {
    let (ws, _outside) = workspace();
    let build = graph(PATH_RULES);
    let build = build.default_mode();
    let resolved = |p: &str| resolve_paths(build.rules(), &write(p), ws.path());
    assert_eq!(
        resolved("./.env").get("path"),
        Some(&ResolvedPath::Inside(".env".to_owned()))
    );
    assert_eq!(
        resolved("./src/new/./b.rs").get("path"),
        Some(&ResolvedPath::Inside("src/new/b.rs".to_owned()))
    );
    assert_eq!(
        resolved("./src/../.env").get("path"),
        Some(&ResolvedPath::Inside(".env".to_owned()))
    );
    assert_eq!(
        resolved("src/up/secret/k").get("path"),
        Some(&ResolvedPath::Inside("secret/k".to_owned()))
    );
    assert!(matches!(
        resolved("src/../../x").get("path"),
        Some(ResolvedPath::Doubtful(_))
    ));
    assert!(matches!(
        resolved("src/out/x").get("path"),
        Some(ResolvedPath::Doubtful(_))
    ));
    // An absolute path inside the workspace is taken relative to it.
    let absolute = ws.path().join("src/a.rs").display().to_string();
    assert_eq!(
        resolved(&absolute).get("path"),
        Some(&ResolvedPath::Inside("src/a.rs".to_owned()))
    );
    // A dangling symlink is in doubt: where it leads is unknown.
    std::os::unix::fs::symlink("../nowhere/.env", ws.path().join("src/dangling")).expect("link");
    assert!(matches!(
        resolved("src/dangling").get("path"),
        Some(ResolvedPath::Doubtful(_))
    ));
}
