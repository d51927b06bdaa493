//! `agent-controller check` on a mode's rules (issue 23): a valid config lists each rule under
//! its mode; a bad rule is reported at its line and column, with the rest of the file.
#![cfg(feature = "cli")]

use std::process::Command;

use snapbox::str;

fn check(text: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("modes.toml");
    std::fs::write(&path, text).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_agent-controller"))
        .current_dir(dir.path())
        .args(["check", "modes.toml"])
        .output()
        .expect("run");
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[track_caller]
fn same(actual: String, expected: impl snapbox::IntoData) {
    snapbox::Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .normalize_paths(false)
        .eq(actual, expected);
}

#[test]
fn check_lists_each_rule_under_its_mode() {
    let text = r#"[[modes]]
id = "build"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "**/.env*", action = "deny" },
  { tool = "write_file", path = "src/**", action = "allow" },
  { tool = "write_file", arg = "content", regex = ".*BEGIN PRIVATE KEY.*", action = "deny" },
]
"#;
    same(
        check(text),
        str![[r#"
exit 0
--- stdout
modes.toml: ok, 1 mode
  build (build) [default]  tools: read_file, write_file  requireApproval: write_file
    rule 1: deny write_file path `**/.env*`
    rule 2: allow write_file path `src/**`
    rule 3: deny write_file content regex `.*BEGIN PRIVATE KEY.*`
default mode: build
hand-over edges (on approval):
--- stderr

"#]],
    );
}

#[test]
fn check_reports_bad_rules_at_line_and_column() {
    let text = r#"[[modes]]
id = "build"
rules = [
  { tool = "write_file", arg = "pth", path = "src/**", action = "allow" },
  { tool = "run_command", action = "ask" },
  { tool = "write_file", path = "src/[", action = "deny" },
  { tool = "write_file", action = "ask" },
  { tool = "write_file", path = "docs/**", action = "allow" },
]
"#;
    same(
        check(text),
        str![[r#"
exit 2
--- stdout
--- stderr
error: modes.toml:4:3: rule 1 of mode `build` (allow write_file pth path `src/**`) can never decide a call: rule 4 (ask write_file) matches every call it matches, and ask beats allow: to ask about the calls no rule allows, list `write_file` in requireApproval and leave rule 4 out
4 |   { tool = "write_file", arg = "pth", path = "src/**", action = "allow" },
  |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^

error: modes.toml:4:32: rule 1 of mode `build` reads argument `pth`, which `write_file` does not declare, so it could never match: did you mean `path`?
4 |   { tool = "write_file", arg = "pth", path = "src/**", action = "allow" },
  |                                ^^^^^

error: modes.toml:5:12: rule 2 of mode `build` is on unknown tool `run_command`
5 |   { tool = "run_command", action = "ask" },
  |            ^^^^^^^^^^^^^

error: modes.toml:6:33: rule 3 of mode `build` has path `src/[`, which is not valid: unclosed character class; missing ']'
6 |   { tool = "write_file", path = "src/[", action = "deny" },
  |                                 ^^^^^^^

error: modes.toml:8:3: rule 5 of mode `build` (allow write_file path `docs/**`) can never decide a call: rule 4 (ask write_file) matches every call it matches, and ask beats allow: to ask about the calls no rule allows, list `write_file` in requireApproval and leave rule 4 out
8 |   { tool = "write_file", path = "docs/**", action = "allow" },
  |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^

modes.toml: 5 errors

"#]],
    );
}

#[test]
fn check_refuses_an_unknown_action_with_the_ones_there_are() {
    let text =
        "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", action = \"approve\" }]\n";
    same(
        check(text),
        str![[r#"
exit 2
--- stdout
--- stderr
error: modes.toml:3:42: unknown variant `approve`, expected one of `allow`, `ask`, `deny`
3 | rules = [{ tool = "write_file", action = "approve" }]
  |                                          ^^^^^^^^^

modes.toml: 1 error

"#]],
    );
}
