//! Leaving planning without approving from the prompt (issue 23, item 3): `s MODE` at a plan's
//! question switches by hand (`Session::switch_mode`), so the plan counts as not approved and the
//! model is told, the same rule `agent-controller switch` follows. Driven through the binary
//! with stdin.
#![cfg(feature = "cli")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");
const NOT_APPROVED: i32 = 3;
const PENDING: i32 = 4;

/// The binary in `ws` with `args`, `input` on stdin.
fn bin(ws: &Path, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-controller"))
        .current_dir(ws)
        .args(args)
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    child.wait_with_output().expect("wait")
}

fn run(ws: &Path, extra: &[&str], input: &str) -> Output {
    let mut args = vec!["run", "--config", SHIPPED, "--mode", "plan"];
    args.extend_from_slice(extra);
    args.push("Add dark mode");
    bin(ws, &args, input)
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of every record in the file store `st`.
fn records(ws: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(ws.join("st")).expect("the store") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            all.push_str(&std::fs::read_to_string(&path).expect("read"));
        }
    }
    all
}

#[test]
fn s_mode_at_the_prompt_switches_without_approving() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = run(ws.path(), &[], "s\ns nope\nswitch Build\ns build\n");
    let (err, stdout) = (err(&out), stdout(&out));
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{err}{stdout}");
    // The help line names the key and the modes a switch may go to (not the current one).
    assert!(
        err.contains(
            "\n[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  "
        ),
        "{err}"
    );
    assert!(
        err.contains("  [s MODE] switch to build, not approving\n> "),
        "{err}"
    );
    assert!(
        err.contains("switch to which mode? type s and one of build"),
        "{err}"
    );
    assert!(err.contains("`nope` is not a mode to switch to"), "{err}");
    // Mode ids are typed exactly, as at `--to`.
    assert!(err.contains("`Build` is not a mode to switch to"), "{err}");
    assert_eq!(
        err.matches("Approve this plan").count(),
        4,
        "asked again each time: {err}"
    );
    assert!(
        err.contains("mode plan -> build (switched by hand at the prompt)"),
        "{err}"
    );
    assert!(
        err.contains("the plan decision_1 (Add dark mode) counts as not approved"),
        "{err}"
    );
    // The plan is cancelled (not approved) before the mode changes; nothing was approved.
    let cancelled = stdout
        .find("submit_plan cancelled (mode_switch): not approved")
        .expect(&stdout);
    let changed = stdout
        .find("mode changed: plan -> build (manual)")
        .expect(&stdout);
    assert!(cancelled < changed, "{stdout}");
    assert!(!stdout.contains("plan_approved"), "{stdout}");
    assert!(stdout.trim_end().ends_with("mode: build"), "{stdout}");
}

#[test]
fn a_switch_at_the_prompt_of_a_stored_run_is_saved_and_the_model_is_told() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = run(ws.path(), &["--store", "st"], "s build\n");
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{}", err(&out));
    let stored = records(ws.path());
    assert!(
        stored.contains("Plan not approved: the user switched mode by hand."),
        "{stored}"
    );
    assert!(stored.contains("\"modeId\":\"build\""), "{stored}");
    let listed = bin(ws.path(), &["pending", "--store", "st"], "");
    assert!(
        stdout(&listed).contains("no pending plans or tool calls")
            || err(&listed).contains("no pending plans or tool calls"),
        "{}{}",
        stdout(&listed),
        err(&listed)
    );
}

#[test]
fn decide_at_the_prompt_can_switch_instead() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = run(ws.path(), &["--store", "st"], "");
    assert_eq!(out.status.code(), Some(PENDING), "{}", err(&out));
    let listed = bin(ws.path(), &["pending", "--store", "st", "--json"], "");
    let first: serde_json::Value =
        serde_json::from_str(stdout(&listed).lines().next().expect("a pending plan"))
            .expect("json");
    let session = first["sessionId"].as_str().expect("sessionId").to_owned();
    let out = bin(
        ws.path(),
        &["decide", "--store", "st", "--config", SHIPPED, &session],
        "s build\n",
    );
    let shown = format!("{}{}", stdout(&out), err(&out));
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{shown}");
    assert!(
        shown.contains("mode changed: plan -> build (manual)"),
        "{shown}"
    );
    let late = bin(
        ws.path(),
        &[
            "decide",
            "--store",
            "st",
            "--config",
            SHIPPED,
            &session,
            "--approve",
        ],
        "",
    );
    assert_ne!(late.status.code(), Some(0), "nothing left to approve");
    assert!(
        records(ws.path()).contains("Plan not approved: the user switched mode by hand."),
        "saved"
    );
}

#[test]
fn switch_followed_by_a_sentence_is_still_feedback() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = run(ws.path(), &[], "switch steps 2 and 3 around\nn\n");
    let (err, stdout) = (err(&out), stdout(&out));
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{err}");
    assert!(
        stdout.contains("switch steps 2 and 3 around"),
        "sent as feedback: {stdout}"
    );
    assert!(!stdout.contains("mode changed"), "{stdout}");
    assert!(stdout.trim_end().ends_with("mode: plan"), "{stdout}");
}
