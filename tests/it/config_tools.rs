//! The config tools of the binary: `graph`, `schema`, and `check` reporting every error at once.
// Drives the binary.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::Output;

use agent_controller::{config, diagram};

use crate::common::cli::INVALID;

fn bin(args: &[&str]) -> Output {
    crate::common::agent_controller()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run the binary")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("from_utf8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("from_utf8")
}

#[test]
fn graph_prints_the_mermaid_picture_of_the_shipped_config_by_default() {
    let out = bin(&["graph"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let graph = config::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/modes.toml"))
        .expect("value");
    assert_eq!(stdout(&out), diagram::mermaid(&graph));
    assert!(stdout(&out).contains("mode_plan -->|plan approved| mode_build"));
}

#[test]
fn graph_draws_dot_for_any_config() {
    let out = bin(&[
        "graph",
        "tests/fixtures/configs/valid/chain.toml",
        "--format",
        "dot",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("digraph modes {"), "{text}");
    assert!(text.contains(r#""research" -> "plan""#), "{text}");
    assert!(text.contains(r#""plan" -> "build""#), "{text}");
}

#[test]
fn graph_refuses_an_unknown_format_and_an_invalid_config() {
    let out = bin(&["graph", "--format", "svg"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown format `svg`: use mermaid or dot"),
        "{}",
        stderr(&out)
    );
    let out = bin(&[
        "graph",
        "tests/fixtures/configs/invalid/self-transition.toml",
    ]);
    assert_eq!(out.status.code(), Some(INVALID));
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("self-transition.toml:3:"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn schema_prints_the_shipped_schema_file() {
    let out = bin(&["schema"]);
    assert!(out.status.success());
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/modes.schema.json"),
    )
    .expect("value");
    assert_eq!(stdout(&out), shipped);
    let schema: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("from_str");
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
}

#[test]
fn check_prints_every_error_of_a_file_with_its_source_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("multi.toml");
    std::fs::write(
        &file,
        r#"defaultModeId = "bild"

[[modes]]
id = "plan"
transitionsTo = "plan"
availableTools = ["read_file", "grep"]

[[modes]]
id = "plan"
"#,
    )
    .expect("write");
    let out = bin(&["check", file.to_str().expect("to_str")]);
    assert_eq!(out.status.code(), Some(INVALID));
    assert!(stdout(&out).is_empty(), "errors go to stderr");
    let err = stderr(&out);
    let origin = file.display().to_string();
    let headers: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(headers.len(), 5, "{err}");
    for (header, (at, words)) in headers.iter().zip([
        ("1:17", "defaultModeId `bild` names no mode"),
        ("5:17", "naming itself"),
        ("6:18", "leaves out `submit_plan`"),
        ("6:32", "unknown tool `grep`"),
        ("9:6", "duplicate mode id `plan`"),
    ]) {
        assert!(
            header.starts_with(&format!("error: {origin}:{at}: ")),
            "{header}"
        );
        assert!(header.contains(words), "{header}");
    }
    // Each error shows its line and a caret under the offending text.
    assert!(err.contains("6 | availableTools = [\"read_file\", \"grep\"]\n  |                                ^^^^^^"), "{err}");
    assert!(err.contains("9 | id = \"plan\"\n  |      ^^^^^^"), "{err}");
    assert!(err.trim_end().ends_with("multi.toml: 5 errors"), "{err}");
}

#[test]
fn check_of_a_valid_file_still_prints_the_summary() {
    let out = bin(&["check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("default mode: build"),
        "{}",
        stdout(&out)
    );
}

/// Writes `text` to a config file in a fresh directory and runs `check` on it.
fn check(text: &str) -> (Output, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("modes.toml");
    std::fs::write(&file, text).expect("write");
    let out = bin(&["check", file.to_str().expect("to_str")]);
    (out, file.display().to_string())
}

#[test]
fn check_warns_about_a_planning_mode_that_cannot_write_a_plan() {
    let (out, origin) = check(
        r#"[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "list_files", "submit_plan"]

[[modes]]
id = "build"
"#,
    );
    assert_eq!(out.status.code(), Some(0), "a warning is not an error");
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].starts_with(&format!(
            "warning: {origin}:4:19: planning mode `plan` offers no tool that can write a plan"
        )),
        "{err}"
    );
    assert!(
        stdout(&out).contains("ok, 2 modes, 1 warning"),
        "{}",
        stdout(&out)
    );
    // Offering write_plan (or write_file), or every tool, silences it.
    for tools in [
        r#"availableTools = ["read_file", "write_plan", "submit_plan"]"#,
        r#"availableTools = ["write_file", "submit_plan"]"#,
        "",
    ] {
        let (out, _) = check(&format!(
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n{tools}\n[[modes]]\nid = \"build\"\n"
        ));
        assert_eq!(out.status.code(), Some(0));
        assert!(
            !stderr(&out).contains("offers no tool that can write a plan"),
            "{tools}: {}",
            stderr(&out)
        );
    }
}

/// Issue 19 item 6: `check` warns, at the name's line and column, where a planning mode lists a
/// tool that writes (it runs before any plan is approved), and its summary says what a planning
/// mode without `availableTools` is offered.
#[test]
fn check_warns_where_a_planning_mode_lists_a_tool_that_writes() {
    let (out, origin) = check(
        r#"[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["write_plan", "write_file", "submit_plan"]

[[modes]]
id = "review"
transitionsTo = "build"

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
"#,
    );
    assert_eq!(out.status.code(), Some(0), "a warning is not an error");
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].starts_with(&format!(
            "warning: {origin}:4:33: planning mode `plan` lists `write_file`, a tool that writes, in availableTools"
        )),
        "{err}"
    );
    let text = stdout(&out);
    assert!(text.contains("ok, 3 modes, 1 warning"), "{text}");
    assert!(
        // Trial 5 (L13): the built-in tools such a mode offers are named.
        text.contains(
            "  review (review) [planning]  tools: all read-only and plan tools (ask_user among them)"
        ),
        "{text}"
    );
}

/// Issue 36, item 10: `check` reported `requireApproval` and `rules` entries on a tool that a
/// planning mode does not offer only when the mode lists its tools; a planning mode without
/// `availableTools` offers the read-only and plan tools, and entries on any other tool (one
/// that writes) are reported against that set too, at their line and column (as warnings: the
/// set depends on the tools a host registers). Entries on tools the set holds pass.
#[test]
fn check_reports_entries_on_tools_a_planning_mode_offers_only_implicitly_not() {
    let (out, origin) = check(
        r#"[[modes]]
id = "plan"
transitionsTo = "build"
requireApproval = ["write_file", "read_file"]
rules = [
  { tool = "write_file", path = "src/**", action = "allow" },
  { tool = "list_files", path = "secret/**", action = "deny" },
]

[[modes]]
id = "build"
default = true
requireApproval = ["write_file"]
"#,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings[0].starts_with(&format!(
            "warning: {origin}:4:20: mode `plan` lists `write_file` in requireApproval, but does not offer it"
        )),
        "{err}"
    );
    assert!(
        warnings[1].starts_with(&format!(
            "warning: {origin}:6:12: rule 1 of mode `plan` is on `write_file`, which the mode does not offer"
        )),
        "{err}"
    );
    assert!(err.contains("read-only and plan tools"), "{err}");
    assert!(
        stdout(&out).contains("ok, 2 modes, 2 warnings"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn check_reports_warnings_together_with_errors() {
    let (out, origin) = check(
        r#"defaultModeId = "bild"

[[modes]]
id = "plan"
availableTools = ["read_file", "submit_plan"]
"#,
    );
    assert_eq!(out.status.code(), Some(INVALID));
    let err = stderr(&out);
    let reports: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("error: ") || l.starts_with("warning: "))
        .collect();
    assert_eq!(reports.len(), 2, "{err}");
    assert!(
        reports[0].starts_with(&format!("error: {origin}:1:17: ")),
        "{err}"
    );
    assert!(
        reports[1].starts_with(&format!("warning: {origin}:5:19: ")),
        "{err}"
    );
    assert!(err.trim_end().ends_with("modes.toml: 1 error"), "{err}");
}

#[test]
fn check_reports_a_submit_plan_typo_once() {
    let (out, origin) = check(
        r#"[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["write_plan", "sumbit_plan"]

[[modes]]
id = "build"
"#,
    );
    assert_eq!(out.status.code(), Some(INVALID));
    let err = stderr(&out);
    let headers: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(
        headers,
        [format!(
            "error: {origin}:4:33: mode `plan` lists unknown tool `sumbit_plan` in availableTools: did you mean `submit_plan`?"
        )],
        "{err}"
    );
    assert!(err.trim_end().ends_with("modes.toml: 1 error"), "{err}");
}

#[test]
fn check_counts_one_mode_in_the_singular() {
    let (out, _) = check("[[modes]]\nid = \"build\"\n");
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains(": ok, 1 mode\n"), "{}", stdout(&out));
}

#[test]
fn check_and_graph_show_control_characters_in_names_visibly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("modes.toml");
    std::fs::write(
        &file,
        "[[modes]]\nid = \"plan\"\nname = \"Plan\\u001b]0;owned\\u0007\\u001b[2K\\r\\u202eevil\"\ntransitionsTo = \"nope\"\n\n[[modes]]\nid = \"build\"\nname = \"Build\\u001b[2J\"\n",
    )
    .expect("write");
    let path = file.to_str().expect("to_str");
    // `check` of a bad file: the message holds the file's text, neutralised.
    let out = bin(&["check", path]);
    assert_eq!(out.status.code(), Some(INVALID));
    assert!(!out.stderr.contains(&0x1b), "{:?}", stderr(&out));
    std::fs::write(
        &file,
        std::fs::read_to_string(&file)
            .expect("read")
            .replace("transitionsTo = \"nope\"", "transitionsTo = \"build\""),
    )
    .expect("write");
    let out = bin(&["check", path]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        !text.contains(['\u{1b}', '\r', '\u{7}', '\u{202e}']),
        "{text:?}"
    );
    assert!(
        text.contains("Plan\\u{1b}]0;owned\\u{7}\\u{1b}[2K\\u{d}\\u{202e}evil"),
        "{text}"
    );
    for format in ["mermaid", "dot"] {
        let out = bin(&["graph", path, "--format", format]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(
            !text.contains(['\u{1b}', '\r', '\u{7}', '\u{202e}']),
            "{format}: {text:?}"
        );
        assert!(text.contains("u{1b}]0;owned"), "{format}: {text}");
    }
}

#[test]
fn check_summary_shows_each_modes_require_approval_and_approval_timeout() {
    let (out, origin) = check(
        r#"[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]
approvalTimeout = "24h"

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
approvalTimeout = "1h30m"

[[modes]]
id = "careful"
requireApproval = true
"#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("{origin}: ok, 3 modes"), "{text}");
    assert_eq!(
        lines[1],
        "  plan (plan) [planning]  tools: read_file, write_plan, submit_plan  approvalTimeout: 24h",
        "{text}"
    );
    assert_eq!(
        lines[2],
        "  build (build) [default]  tools: read_file, write_file  requireApproval: write_file  approvalTimeout: 1h30m",
        "{text}"
    );
    assert_eq!(
        lines[3], "  careful (careful)  tools: all  requireApproval: every tool",
        "{text}"
    );
}

#[test]
fn check_suggests_the_tool_an_unknown_name_in_require_approval_or_available_tools_meant() {
    // A mode offering every tool: the name is checked against the built-in tools.
    let (out, origin) = check(
        r#"[[modes]]
id = "build"
requireApproval = ["Write_File", "rm_rf"]

[[modes]]
id = "review"
availableTools = ["read_fiel", "list_files"]

[[modes]]
id = "edit"
availableTools = ["read_file", "write_file"]
requireApproval = ["WRITE_FILE"]
"#,
    );
    assert_eq!(out.status.code(), Some(INVALID));
    let err = stderr(&out);
    let headers: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(headers.len(), 4, "{err}");
    assert_eq!(
        headers[0],
        format!(
            "error: {origin}:3:20: mode `build` lists unknown tool `Write_File` in requireApproval: did you mean `write_file`? (tool names are case-sensitive)"
        )
    );
    // Nothing near `rm_rf`: no guess.
    assert_eq!(
        headers[1],
        format!("error: {origin}:3:34: mode `build` lists unknown tool `rm_rf` in requireApproval")
    );
    assert_eq!(
        headers[2],
        format!(
            "error: {origin}:7:19: mode `review` lists unknown tool `read_fiel` in availableTools: did you mean `read_file`?"
        )
    );
    // A name the mode's own list does not offer is compared with that list.
    assert!(
        headers[3].starts_with(&format!("error: {origin}:12:20: mode `edit` lists `WRITE_FILE` in requireApproval, but does not offer it")),
        "{}",
        headers[3]
    );
    assert!(
        headers[3].ends_with(": did you mean `write_file`? (tool names are case-sensitive)"),
        "{}",
        headers[3]
    );
}
