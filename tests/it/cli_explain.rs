//! `agent-controller explain` and the config's rule tests in `check` (issue 42): the outcome of
//! one call and each step of why, exit 0 allowed, 4 it would wait, 3 refused or not offered, 2
//! bad input; a failing `[[tests]]` entry is an error at its `expect`.
#![cfg(feature = "cli")]

use crate::common::cli::{self, snapshots::same, snapshots::shown};
use snapbox::str;

const CONFIG: &str = r#"[[modes]]
id = "build"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "**/.env*", action = "deny" },
  { tool = "write_file", path = "src/**", not = true, action = "ask" },
  { tool = "write_file", path = "src/**", action = "allow" },
]

[[modes]]
id = "review"
availableTools = ["read_file"]
"#;

/// `agent-controller ARGS` in a fresh directory holding `modes.toml` (`text`).
fn run(text: &str, args: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("modes.toml"), text).expect("write");
    cli::bin(dir.path(), args, "")
}

fn explain(mode: &str, tool: &str, args: &str) -> std::process::Output {
    run(
        CONFIG,
        &[
            "explain",
            "--config",
            "modes.toml",
            "--mode",
            mode,
            tool,
            args,
        ],
    )
}

#[test]
fn explain_prints_the_outcome_the_deciding_rule_and_each_step() {
    same(
        shown(
            &explain("build", "write_file", r#"{"path": ".env", "content": "x"}"#),
            &[],
        ),
        str![[r#"
exit 3
--- stdout
write_file: refused, by rule 1 at modes.toml:6:12
  rule 1 of mode `build` (deny write_file path `**/.env*`) refuses this call of `write_file` with path, which matches `.env`
steps:
  1. availableTools: mode `build` offers `write_file`
  2. arguments: they fit the tool's input schema
  3. rule 1 (modes.toml:6:12): deny (deny write_file path `**/.env*`) matches `.env`
  4. rule 2 (modes.toml:7:12): ask (ask write_file path not `src/**`) matches `.env`
  5. rule 3 (modes.toml:8:12): allow (allow write_file path `src/**`) does not match
  6. rule 1 (modes.toml:6:12): decides: rule 1 of mode `build` (deny write_file path `**/.env*`) refuses this call of `write_file` with path, which matches `.env`
--- stderr

"#]],
    );
}

#[test]
fn explain_exits_by_the_outcome() {
    let code = |out: std::process::Output| out.status.code();
    let write = |path: &str| format!(r#"{{"path": "{path}", "content": "x"}}"#);
    assert_eq!(
        code(explain("build", "write_file", &write("src/a.rs"))),
        Some(0)
    );
    assert_eq!(
        code(explain("build", "write_file", &write("docs/a.md"))),
        Some(4)
    );
    assert_eq!(
        code(explain("review", "write_file", &write("src/a.rs"))),
        Some(3)
    );
    assert_eq!(
        code(explain("build", "read_file", r#"{"path": "a"}"#)),
        Some(0)
    );
    // Bad input: arguments that do not fit the schema, that are not JSON, an unknown mode or tool.
    let bad = explain("build", "write_file", r#"{"path": ["a"]}"#);
    assert_eq!(code(bad.clone()), Some(2));
    assert!(
        cli::text(&bad).contains("refused before any rule applies"),
        "{}",
        cli::text(&bad)
    );
    assert_eq!(code(explain("build", "write_file", "{path")), Some(2));
    assert_eq!(code(explain("biuld", "write_file", &write("a"))), Some(2));
    assert_eq!(code(explain("build", "rm_rf", "{}")), Some(2));
}

#[test]
fn explain_json_is_one_object() {
    let args = r#"{"path": "docs/a.md", "content": "x"}"#;
    let out = run(
        CONFIG,
        &[
            "explain",
            "--config",
            "modes.toml",
            "--mode",
            "build",
            "--json",
            "write_file",
            args,
        ],
    );
    assert_eq!(out.status.code(), Some(4));
    let text = cli::stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(json["outcome"], "ask");
    assert_eq!(json["decidedBy"], "rule 2");
    assert_eq!(json["at"], "modes.toml:7:12");
    assert_eq!(json["modeId"], "build");
    assert_eq!(json["steps"][0]["check"], "availableTools");
}

const TESTED: &str = r#"
[[tests]]
mode = "build"
tool = "write_file"
args = { path = "src/a.rs", content = "x" }
expect = "allow"

[[tests]]
mode = "build"
tool = "write_file"
args = { path = "docs/a.md", content = "x" }
expect = "allow"
"#;

#[test]
fn check_runs_the_rule_tests_and_reports_a_failing_one_at_its_expect() {
    let text = format!("{CONFIG}{TESTED}");
    same(
        shown(&run(&text, &["check", "modes.toml"]), &[]),
        str![[r#"
exit 2
--- stdout
--- stderr
error: modes.toml:25:10: rule test 2 expects `allow` for write_file in mode `build`, but explain says ask (by rule 2 at modes.toml:7:12): rule 2 of mode `build` (ask write_file path not `src/**`) asks the user about this call of `write_file` with path, which matches `docs/a.md`
25 | expect = "allow"
   |          ^^^^^^^

modes.toml: 1 failed rule test

"#]],
    );
    let passing = text.replace(
        "args = { path = \"docs/a.md\", content = \"x\" }\nexpect = \"allow\"",
        "args = { path = \"docs/a.md\", content = \"x\" }\nexpect = \"ask\"",
    );
    let out = run(&passing, &["check", "modes.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", cli::text(&out));
}

#[test]
fn check_reports_a_rule_test_on_an_unknown_tool_at_its_tool() {
    let text =
        format!("{CONFIG}\n[[tests]]\nmode = \"build\"\ntool = \"write_fil\"\nexpect = \"deny\"\n");
    let out = run(&text, &["check", "modes.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = cli::text(&out);
    assert!(
        err.contains("modes.toml:17:8: rule test 1 is on unknown tool `write_fil`: did you mean `write_file`?"),
        "{err}"
    );
}

/// With `--session` and `--store`, the call is ruled in the stored session's current mode: a
/// session waiting in `plan` is not offered `write_file`; `--mode` naming another mode is bad
/// input.
#[test]
fn explain_in_a_stored_session_rules_in_its_mode() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = cli::pending_plan(ws.path());
    let args = r#"{"path": "src/a.rs", "content": "x"}"#;
    let base = ["explain", "--session", &session, "--store", cli::STORE];
    let mut call: Vec<&str> = base.to_vec();
    call.extend(["--json", "write_file", args]);
    let out = cli::bin(ws.path(), &call, "");
    assert_eq!(out.status.code(), Some(3), "{}", cli::text(&out));
    let json: serde_json::Value = serde_json::from_str(&cli::stdout(&out)).expect("json");
    assert_eq!(
        (json["modeId"].as_str(), json["outcome"].as_str()),
        (Some("plan"), Some("unavailable"))
    );
    let mut read: Vec<&str> = base.to_vec();
    read.extend(["read_file", r#"{"path": "README.md"}"#]);
    assert_eq!(cli::bin(ws.path(), &read, "").status.code(), Some(0));
    let mut wrong: Vec<&str> = base.to_vec();
    wrong.extend(["--mode", "build", "read_file", r#"{"path": "README.md"}"#]);
    let out = cli::bin(ws.path(), &wrong, "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        cli::text(&out).contains("is in mode `plan`, not `build`"),
        "{}",
        cli::text(&out)
    );
}

/// `verify` runs the rule tests as `check` does: a failing one is an error (exit 2) before the
/// state-machine check runs.
#[test]
fn verify_runs_the_rule_tests_too() {
    let text = format!("{CONFIG}{TESTED}");
    let out = run(&text, &["verify", "modes.toml", "--cases", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", cli::text(&out));
    assert!(
        cli::text(&out).contains("modes.toml:25:10: rule test 2 expects `allow`"),
        "{}",
        cli::text(&out)
    );
}
