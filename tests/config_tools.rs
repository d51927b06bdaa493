//! The config tools of the binary: `graph`, `schema`, and `check` reporting every error at once.

use std::path::Path;
use std::process::{Command, Output};

use agent_controller::{config, diagram};

fn bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agent-controller"))
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
    assert_eq!(out.status.code(), Some(1));
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
    assert_eq!(out.status.code(), Some(1));
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
