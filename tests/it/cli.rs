//! The `agent-controller` binary: `check` and `run` end to end on real files.
// Drives the binary.
#![cfg(feature = "cli")]

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::cli::{
    DONE, INVALID, NOT_APPROVED, PENDING, REFUSED, RUNTIME_ERROR, SHIPPED, STDOUT_CLOSED,
    UNREADABLE,
};
use common::json_lines as events;
use common::{Workspace, fixture, read_fixture};
use serde_json::Value;

fn bin() -> Command {
    crate::common::agent_controller()
}

fn run(ws: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = bin();
    cmd.arg("run")
        .arg("--config")
        .arg(SHIPPED)
        .arg("--workspace")
        .arg(ws)
        .args(args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(pipe);
    child.wait_with_output().expect("wait")
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .collect()
}

fn mode_changes(events: &[Value]) -> Vec<(&str, &str)> {
    events
        .iter()
        .filter(|e| e["type"] == "mode_changed")
        .map(|e| {
            (
                e["previousModeId"].as_str().expect("prev"),
                e["modeId"].as_str().expect("mode"),
            )
        })
        .collect()
}

#[test]
fn check_prints_modes_default_and_edges() {
    let out = bin().arg("check").arg(SHIPPED).output().expect("run");
    snapshots::same(
        snapshots::shown(&out, &[(SHIPPED, "[CONFIG]")]),
        snapbox::str![[r#"
exit 0
--- stdout
[CONFIG]: ok, 2 modes
  plan (Plan) [planning]  tools: read_file, list_files, write_plan, submit_plan, ask_user, task_write, task_update, task_complete, task_check
  build (Build) [default]  tools: all
default mode: build
hand-over edges (on approval):
  plan -> build
--- stderr

"#]],
    );
}

#[test]
fn check_refuses_an_invalid_config_with_file_line_col() {
    let path = fixture("configs/invalid/duplicate-id.toml");
    let out = bin().arg("check").arg(&path).output().expect("run");
    let path = path.display().to_string();
    snapshots::same(
        snapshots::shown(&out, &[(&path, "[CONFIG]")]),
        snapbox::str![[r#"
exit 2
--- stdout
--- stderr
error: [CONFIG]:10:6: duplicate mode id `plan`: another mode already uses it
10 | id = "plan"
   |      ^^^^^^

[CONFIG]: 1 error

"#]],
    );
}

#[test]
fn run_approve_json_shows_the_plan_then_hands_over_to_build() {
    let ws = Workspace::new();
    let out = run(
        ws.path(),
        &["--mode", "plan", "--approve", "--json", "Add dark mode"],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = events(&out);
    let suspended = events
        .iter()
        .find(|e| e["type"] == "tool_suspended")
        .expect("tool_suspended");
    assert_eq!(suspended["suspendPayload"]["title"], "Add dark mode");
    assert!(
        suspended["suspendPayload"]["plan"]
            .as_str()
            .expect("plan")
            .contains("## Steps")
    );
    assert_eq!(
        suspended["suspendPayload"]["sha256"].as_str().map(str::len),
        Some(64)
    );
    let kinds = types(&events);
    let at = |k: &str| kinds.iter().position(|t| *t == k).expect(k);
    assert!(at("tool_suspended") < at("mode_changed"));
    assert_eq!(mode_changes(&events), [("plan", "build")]);
    assert_eq!(kinds.last(), Some(&"agent_end"));
}

#[test]
fn run_reject_with_feedback_never_changes_mode() {
    let ws = Workspace::new();
    let out = run(
        ws.path(),
        &[
            "--mode",
            "plan",
            "--reject",
            "--feedback",
            "more tests",
            "--json",
            "Add dark mode",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(NOT_APPROVED));
    let events = events(&out);
    assert!(mode_changes(&events).is_empty());
    let results: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
        .map(|e| e["result"].as_str().expect("result"))
        .collect();
    assert_eq!(results.len(), 2, "the model revises and resubmits once");
    assert!(results.iter().all(|r| r.contains("more tests")));
}

#[test]
fn run_with_case_plan_files_suspends_or_refuses_as_expected() {
    let expected: toml::Table = read_fixture("plans/expected.toml")
        .parse()
        .expect("expected");
    for (name, case) in &expected {
        let ws = Workspace::new();
        let plan = fixture(&format!("plans/{name}"));
        let out = run(
            ws.path(),
            &[
                "--mode",
                "plan",
                "--plan",
                plan.to_str().expect("utf8"),
                "--approve",
                "--json",
                "Do it",
            ],
            None,
        );
        let events = events(&out);
        let suspended = events.iter().find(|e| e["type"] == "tool_suspended");
        match case["submit"].as_str() {
            Some("suspends") => {
                assert_eq!(out.status.code(), Some(DONE), "{name}");
                let s = suspended.unwrap_or_else(|| panic!("{name} suspends"));
                assert_eq!(
                    s["suspendPayload"]["title"],
                    case["title"].as_str().expect("title"),
                    "{name}"
                );
                assert_eq!(mode_changes(&events), [("plan", "build")], "{name}");
            }
            _ => {
                // `--plan` checks the file before it copies anything or starts a session.
                assert_eq!(out.status.code(), Some(INVALID), "{name} is refused");
                assert!(
                    suspended.is_none() && events.is_empty(),
                    "{name}: no session"
                );
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(stderr.contains(name.as_str()), "{name}: {stderr}");
                let plans = ws.path().join(".agent/plans");
                let copied = std::fs::read_dir(&plans).map_or(0, |d| d.count());
                assert_eq!(copied, 0, "{name}: nothing copied");
            }
        }
    }
}

#[test]
fn interactive_answers_from_stdin() {
    let cases = [
        ("y\n", Some("build")),
        ("yes\n", Some("build")),
        ("n\n", None),
        ("please add tests\nno\n", None),
        ("", None),
        ("\n\n", None),
    ];
    for (input, to) in cases {
        let ws = Workspace::new();
        let out = run(
            ws.path(),
            &["--mode", "plan", "--json", "Add dark mode"],
            Some(input),
        );
        let expected = if to.is_some() { DONE } else { NOT_APPROVED };
        assert_eq!(out.status.code(), Some(expected), "{input:?}");
        let events = events(&out);
        let changes = mode_changes(&events);
        match to {
            Some(target) => assert_eq!(changes, [("plan", target)], "{input:?}"),
            None => assert!(changes.is_empty(), "{input:?} must not approve"),
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Add dark mode"), "the plan is shown: {err}");
    }
    let ws = Workspace::new();
    let out = run(
        ws.path(),
        &["--mode", "plan", "--json", "Add dark mode"],
        Some("please add tests\nno\n"),
    );
    let feedback = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
        .map(|e| e["result"].as_str().expect("result").to_owned())
        .next()
        .expect("first decision");
    assert!(feedback.contains("please add tests"), "{feedback}");
}

#[test]
fn run_outside_a_planning_mode_just_answers() {
    let ws = Workspace::new();
    let out = run(ws.path(), &["--json", "hello"], None);
    assert!(out.status.success());
    let events = events(&out);
    assert_eq!(events[0]["modeId"], "build");
    assert!(!types(&events).contains(&"tool_suspended"));
}

#[test]
fn run_with_an_unknown_mode_fails_cleanly() {
    let ws = Workspace::new();
    let mut shown = String::new();
    for mode in ["review", "Plan", "buidl"] {
        let out = run(ws.path(), &["--mode", mode, "x"], None);
        let ws = ws.path().display().to_string();
        shown.push_str(&format!(
            "$ run --mode {mode}\n{}\n",
            snapshots::shown(&out, &[(&ws, "[WORKSPACE]")])
        ));
    }
    snapshots::same(
        shown,
        snapbox::str![[r#"
$ run --mode review
exit 2
--- stdout
--- stderr
error: unknown mode `review` (modes: plan, build)

$ run --mode Plan
exit 2
--- stdout
--- stderr
error: unknown mode `Plan`: did you mean `plan`? (mode ids are case-sensitive)

$ run --mode buidl
exit 2
--- stdout
--- stderr
error: unknown mode `buidl`: did you mean `build`?


"#]],
    );
}

#[test]
fn an_unknown_model_provider_is_a_usage_error_before_anything_runs() {
    let ws = Workspace::new();
    let out = run(
        ws.path(),
        &["--model", "llama/7b", "--mode", "plan", "x"],
        None,
    );
    snapshots::same(
        snapshots::shown(&out, &[]),
        snapbox::str![[r#"
exit 2
--- stdout
--- stderr
error: invalid value 'llama/7b' for '--model <MODEL>': unknown model provider `llama`: use `scripted`, `openai/MODEL` or `anthropic/MODEL`

For more information, try '--help'.

"#]],
    );
    let plans = std::fs::read_dir(ws.path().join(".agent/plans")).expect("plans dir");
    assert_eq!(plans.count(), 0, "no plan was written");
}

/// `scripted/NAME` is the scripted model (the name is ignored), with its plan placed as for
/// `scripted`.
#[test]
fn a_scripted_model_spec_with_a_name_runs_the_scripted_model() {
    let ws = Workspace::new();
    let out = run(
        ws.path(),
        &[
            "--model",
            "scripted/any",
            "--mode",
            "plan",
            "--approve",
            "--json",
            "Add dark mode",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert_eq!(mode_changes(&events(&out)), [("plan", "build")]);
}

/// `run --detach` / `pending` / `decide --approve` across three processes, on both stores.
#[test]
fn detach_pending_decide_across_three_processes() {
    let mut stores = vec!["dir"];
    if cfg!(feature = "sqlite") {
        stores.push("sqlite");
    }
    for kind in stores {
        let ws = Workspace::new();
        let spec = match kind {
            "sqlite" => format!("sqlite:{}", ws.path().join("sessions.db").display()),
            _ => ws.path().join("sessions").display().to_string(),
        };
        // Process 1: plan, suspend, detach.
        let out = run(
            ws.path(),
            &[
                "--store",
                &spec,
                "--detach",
                "--mode",
                "plan",
                "--json",
                "Add dark mode",
            ],
            None,
        );
        assert_eq!(
            out.status.code(),
            Some(PENDING),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let first = events(&out);
        assert_eq!(types(&first).last(), Some(&"agent_end"));
        assert!(mode_changes(&first).is_empty());
        let session = first[0]["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned();
        // Process 2: list what is pending.
        let out = bin()
            .args(["pending", "--store", &spec, "--json"])
            .output()
            .expect("pending");
        assert!(out.status.success());
        let pending = events(&out);
        assert_eq!(pending.len(), 1, "{kind}");
        assert_eq!(pending[0]["sessionId"], session.as_str());
        assert_eq!(pending[0]["title"], "Add dark mode");
        assert_eq!(pending[0]["modeId"], "plan");
        // Process 3: decide; the run carries on in build.
        let out = bin()
            .args([
                "decide",
                "--store",
                &spec,
                &session,
                "--approve",
                "--json",
                "--config",
                SHIPPED,
            ])
            .arg("--workspace")
            .arg(ws.path())
            .output()
            .expect("decide");
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let decided = events(&out);
        assert_eq!(
            types(&decided),
            [
                "agent_start",
                "tool_end",
                "mode_changed",
                // The shipped `build` offers the task tools: the plan's steps are its list.
                "tasks_updated",
                "assistant_message",
                // The run of the approved plan ends: its report.
                "plan_report",
                "agent_end"
            ],
            "{kind}"
        );
        assert_eq!(mode_changes(&decided), [("plan", "build")]);
        // Deciding again is refused; nothing is pending any more.
        let again = bin()
            .args([
                "decide",
                "--store",
                &spec,
                &session,
                "--approve",
                "--config",
                SHIPPED,
            ])
            .output()
            .expect("decide again");
        assert_eq!(again.status.code(), Some(REFUSED), "{kind}");
        let out = bin()
            .args(["pending", "--store", &spec, "--json"])
            .output()
            .expect("pending");
        assert!(events(&out).is_empty(), "{kind}");
    }
}

/// Runs `agent-controller ARGS` with `stdin` as input (closed at once when `None`).
fn cli(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(pipe);
    child.wait_with_output().expect("wait")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A plan submitted and left pending in a directory store: (store spec, session id).
fn detached(ws: &Workspace) -> (String, String) {
    let spec = ws.path().join("sessions").display().to_string();
    let out = run(
        ws.path(),
        &[
            "--store",
            &spec,
            "--detach",
            "--mode",
            "plan",
            "--json",
            "Add dark mode",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let session = events(&out)[0]["sessionId"]
        .as_str()
        .expect("session id")
        .to_owned();
    (spec, session)
}

fn pending_json(spec: &str) -> Vec<Value> {
    let out = cli(&["pending", "--store", spec, "--json"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    events(&out)
}

fn decide(
    ws: &Workspace,
    spec: &str,
    session: &str,
    flags: &[&str],
    stdin: Option<&str>,
) -> Output {
    let workspace = ws.path().to_str().expect("utf-8");
    let mut args = vec![
        "decide",
        "--store",
        spec,
        session,
        "--config",
        SHIPPED,
        "--workspace",
        workspace,
    ];
    args.extend_from_slice(flags);
    cli(&args, stdin)
}

#[test]
fn reject_takes_no_value_so_a_word_after_it_is_the_prompt() {
    let ws = Workspace::new();
    let out = run(
        ws.path(),
        &["--mode", "plan", "--json", "--reject", "Add dark mode"],
        None,
    );
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{}", stderr(&out));
    let events = events(&out);
    let suspended = events
        .iter()
        .find(|e| e["type"] == "tool_suspended")
        .expect("a plan is submitted");
    assert_eq!(
        suspended["suspendPayload"]["title"], "Add dark mode",
        "the word after --reject is the prompt, not feedback"
    );
    let results: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
        .map(|e| e["result"].as_str().expect("result"))
        .collect();
    assert_eq!(results.len(), 1, "no feedback, so no revision: {results:?}");
    assert!(!results[0].contains("Add dark mode"), "{results:?}");
}

#[test]
fn feedback_needs_a_verdict_and_verdicts_exclude_each_other() {
    let ws = Workspace::new();
    for flags in [
        &["--feedback", "more tests"][..],
        &["--approve", "--reject"][..],
        &["--sha256", "abc", "--approve"][..],
    ] {
        let mut args = vec!["--mode", "plan", "--json"];
        args.extend_from_slice(flags);
        let out = run(ws.path(), &args, None);
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "{flags:?}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "{flags:?}: nothing ran");
    }
}

#[test]
fn exit_statuses_tell_the_outcomes_apart() {
    let ws = Workspace::new();
    let approved = run(ws.path(), &["--mode", "plan", "--approve", "x"], None);
    assert_eq!(approved.status.code(), Some(DONE), "{}", stderr(&approved));
    let rejected = run(ws.path(), &["--mode", "plan", "--reject", "x"], None);
    assert_eq!(rejected.status.code(), Some(NOT_APPROVED));
    let answered = run(ws.path(), &["hello"], None);
    assert_eq!(
        answered.status.code(),
        Some(DONE),
        "no plan, nothing to approve"
    );
    let bad_config = bin()
        .args(["run", "--config", "/nonexistent/modes.toml", "x"])
        .output()
        .expect("run");
    assert_eq!(bad_config.status.code(), Some(INVALID));
    let usage = bin().args(["run", "--no-such-flag"]).output().expect("run");
    assert_eq!(usage.status.code(), Some(INVALID));
    let (spec, session) = detached(&ws);
    let unknown = decide(&ws, &spec, "no-such-session", &["--approve"], None);
    assert_eq!(unknown.status.code(), Some(REFUSED), "{}", stderr(&unknown));
    // A session id no session can have is a usage error, not a runtime one.
    for malformed in ["../../etc/passwd", "my session/1", ""] {
        let out = decide(&ws, &spec, malformed, &["--approve"], None);
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "{malformed:?}: {}",
            stderr(&out)
        );
    }
    let first = decide(&ws, &spec, &session, &["--approve", "--json"], None);
    assert_eq!(first.status.code(), Some(DONE), "{}", stderr(&first));
    let again = decide(&ws, &spec, &session, &["--approve"], None);
    assert_eq!(again.status.code(), Some(REFUSED), "{}", stderr(&again));
    let help = bin().args(["run", "--help"]).output().expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    for line in [
        "0    done",
        "1    runtime error",
        "2    invalid config or usage",
        "3    not approved",
        "4    still pending",
        "5    decision refused",
        "6    `pending`: some stored records cannot be read",
        "130  interrupted",
    ] {
        assert!(help.contains(line), "`{line}` in --help: {help}");
    }
    let _ = RUNTIME_ERROR;
}

/// Trial F7: the approver of a pending plan reads it whole: `pending --json` carries the plan's
/// text (`plan`), not its title alone, and `decide --approve` prints the plan it approves on
/// stderr.
#[test]
fn pending_json_carries_the_plan_and_decide_approve_prints_it() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    // A session with a plan pending is kept as `<id>.pending.json`.
    let record = ws
        .path()
        .join("sessions")
        .join(format!("{session}.pending.json"));
    let record = std::fs::read_to_string(record).expect("the record");
    let record: Value = serde_json::from_str(&record).expect("json");
    let text = record["pending"]["suspendPayload"]["plan"]
        .as_str()
        .expect("the captured plan")
        .to_owned();
    assert!(text.lines().count() > 1, "{text}");
    let listed = pending_json(&spec);
    assert_eq!(listed[0]["kind"], "plan");
    assert_eq!(listed[0]["plan"], text.as_str(), "{:#}", listed[0]);
    let out = decide(&ws, &spec, &session, &["--approve"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("approving the plan"), "{said}");
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        assert!(said.contains(line.trim()), "{line:?} in {said}");
    }
}

/// Issue 10, fault 6: a garbage `<id>.pending.json` and a record whose id is not its file name
/// made `pending` exit 1 listing nothing (or list a session twice). Now the healthy plan is listed,
/// each bad record is one `warning:` line (and a `{"unreadable": ...}` line with --json), exit 6.
#[test]
fn pending_lists_healthy_plans_and_warns_about_each_unreadable_record() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let dir = Path::new(&spec);
    std::fs::write(dir.join("garbage.pending.json"), "{ not json").expect("garbage");
    std::fs::copy(
        dir.join(format!("{session}.pending.json")),
        dir.join("twin.pending.json"),
    )
    .expect("twin");

    let out = cli(&["pending", "--store", &spec], None);
    let workspace = ws.path().display().to_string();
    let redact = [
        (spec.as_str(), "[STORE]"),
        (workspace.as_str(), "[WORKSPACE]"),
        (session.as_str(), "[SESSION]"),
    ];
    snapshots::same(
        snapshots::shown(&out, &redact),
        snapbox::str![[r#"
exit 6
--- stdout
[SESSION]	run_1	decision_1	plan -> build	53fac1f88019	Add dark mode	workspace [WORKSPACE]
--- stderr
warning: session `garbage` ([STORE]/garbage.pending.json) cannot be read, not listed: [STORE]/garbage.pending.json: key must be a string at line 1 column 3
warning: session `twin` ([STORE]/twin.pending.json) cannot be read, not listed: [STORE]/twin.pending.json: the record is stored as session `twin` but names session `[SESSION]`

"#]],
    );

    let out = cli(&["pending", "--store", &spec, "--json"], None);
    assert_eq!(out.status.code(), Some(UNREADABLE), "{}", stderr(&out));
    let lines = events(&out);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["sessionId"], session.as_str());
    assert_eq!(lines[1]["unreadable"]["sessionId"], "garbage");
    assert_eq!(lines[2]["unreadable"]["sessionId"], "twin");
    assert!(
        lines[2]["unreadable"]["location"]
            .as_str()
            .expect("location")
            .ends_with("twin.pending.json")
    );

    let twin = decide(&ws, &spec, "twin", &["--approve"], None);
    snapshots::same(
        snapshots::shown(&twin, &redact),
        snapbox::str![[r#"
exit 1
--- stdout
--- stderr
error: session `twin` cannot be read: [STORE]/twin.pending.json: the record is stored as session `twin` but names session `[SESSION]`

"#]],
    );
    let first = decide(&ws, &spec, &session, &["--approve"], None);
    assert_eq!(first.status.code(), Some(DONE), "{}", stderr(&first));
}

/// Issue 19, item 7: a FIFO named like a record hung `pending` and `decide`, a symlinked record
/// was read through the link, and a record under a name that is no session id was skipped
/// silently. Now `pending` lists the healthy plan, warns about each of them, and exits 6 at
/// once; `decide` on the FIFO's session fails at once naming its file.
#[test]
fn pending_reports_special_files_symlinks_and_odd_names_as_unreadable_at_once() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let dir = Path::new(&spec);
    let status = Command::new("mkfifo")
        .arg(dir.join("fifo.pending.json"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    std::os::unix::fs::symlink("/etc/passwd", dir.join("link.pending.json")).expect("symlink");
    std::fs::copy(
        dir.join(format!("{session}.pending.json")),
        dir.join("odd name.pending.json"),
    )
    .expect("copy");

    let out = cli(&["pending", "--store", &spec], None);
    let workspace = ws.path().display().to_string();
    let redact = [
        (spec.as_str(), "[STORE]"),
        (workspace.as_str(), "[WORKSPACE]"),
        (session.as_str(), "[SESSION]"),
    ];
    // Nothing is read through the link (no `root:` line of /etc/passwd).
    snapshots::same(
        snapshots::shown(&out, &redact),
        snapbox::str![[r#"
exit 6
--- stdout
[SESSION]	run_1	decision_1	plan -> build	53fac1f88019	Add dark mode	workspace [WORKSPACE]
--- stderr
warning: session `fifo` ([STORE]/fifo.pending.json) cannot be read, not listed: [STORE]/fifo.pending.json: it is not a regular file (a FIFO, device or socket)
warning: session `link` ([STORE]/link.pending.json) cannot be read, not listed: [STORE]/link.pending.json: it is a symlink, which the store does not follow
warning: session `odd name` ([STORE]/odd name.pending.json) cannot be read, not listed: the file name is not `<session id>.pending.json`: `odd name` is not a session id (ASCII letters, digits, `-` and `_`, at most 128); not read

"#]],
    );

    let fifo = decide(&ws, &spec, "fifo", &["--approve"], None);
    snapshots::same(
        snapshots::shown(&fifo, &redact),
        snapbox::str![[r#"
exit 1
--- stdout
--- stderr
error: session `fifo` cannot be read: [STORE]/fifo.pending.json: it is not a regular file (a FIFO, device or socket)

"#]],
    );
}

/// Issue 10, fault 7: `--store sqlite:` and `sqlite::memory:` printed "decide later with ..."
/// for a session that went into a throw-away database. Every spec that would lose the session
/// is a usage error (exit 2) for `run`, `pending` and `decide`, before anything runs.
#[test]
fn throw_away_store_specs_are_usage_errors_before_anything_runs() {
    let ws = Workspace::new();
    for spec in [
        "",
        "sqlite:",
        "sqlite::memory:",
        "sqlite:file::memory:",
        "sqlite:file:s.db?mode=memory",
        "sqlite:FILE:s.db?vfs=memdb",
        "sqlite:s.db?mode=memory",
    ] {
        let out = run(
            ws.path(),
            &[
                "--store",
                spec,
                "--detach",
                "--mode",
                "plan",
                "--json",
                "Add dark mode",
            ],
            None,
        );
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "run {spec:?}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "run {spec:?}: nothing ran");
        assert!(
            stderr(&out).contains("--store"),
            "{spec:?}: {}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("decide later"), "{}", stderr(&out));
        let out = cli(&["pending", "--store", spec], None);
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "pending {spec:?}: {}",
            stderr(&out)
        );
        let out = decide(&ws, spec, "s1", &["--approve"], None);
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "decide {spec:?}: {}",
            stderr(&out)
        );
    }
    let left: Vec<_> = std::fs::read_dir(ws.path())
        .expect("workspace")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(
        !left
            .iter()
            .any(|name| name.to_string_lossy().contains("s.db")),
        "no database file was made: {left:?}"
    );
}

#[test]
fn end_of_input_at_decide_decides_nothing_and_the_plan_stays_pending() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let out = decide(&ws, &spec, &session, &["--json"], None);
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    assert!(events(&out).is_empty(), "no decision, no events");
    assert!(stderr(&out).contains("stays pending"), "{}", stderr(&out));
    assert_eq!(pending_json(&spec).len(), 1, "still pending");
    let out = decide(&ws, &spec, &session, &["--approve", "--json"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let plain = self::events(&out);
    assert_eq!(mode_changes(&plain), [("plan", "build")]);
}

#[test]
fn end_of_input_at_a_stored_run_leaves_the_plan_pending() {
    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let out = run(
        ws.path(),
        &[
            "--store",
            &spec,
            "--mode",
            "plan",
            "--json",
            "Add dark mode",
        ],
        Some(""),
    );
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let kinds: Vec<String> = events(&out)
        .iter()
        .map(|e| e["type"].as_str().expect("type").to_owned())
        .collect();
    assert!(
        !kinds.iter().any(|k| k == "tool_suspension_cancelled"),
        "{kinds:?}"
    );
    assert_eq!(pending_json(&spec).len(), 1);
}

#[test]
fn a_word_that_looks_like_a_decision_asks_again() {
    for word in [
        "approve", "ok", "Okay", "LGTM", "accept", "sure", "reject", "deny", "yes!",
        // Numbers alone, the habit of a numbered question (trial 5 L3): not feedback.
        "2", "1,3",
    ] {
        let ws = Workspace::new();
        let out = run(
            ws.path(),
            &["--mode", "plan", "--json", "Add dark mode"],
            Some(&format!("{word}\ny\n")),
        );
        assert_eq!(out.status.code(), Some(DONE), "{word}: {}", stderr(&out));
        let events = events(&out);
        assert_eq!(mode_changes(&events), [("plan", "build")], "{word}");
        let results: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
            .map(|e| e["result"].as_str().expect("result"))
            .collect();
        assert_eq!(results.len(), 1, "{word} is not feedback: {results:?}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("`{word}` is not an answer here")),
            "{err}"
        );
        assert_eq!(
            err.matches("Approve this plan").count(),
            2,
            "asked again: {err}"
        );
    }
}

#[test]
fn decide_with_a_stale_sha256_is_refused_and_changes_nothing() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let listed = pending_json(&spec);
    let sha256 = listed[0]["sha256"]
        .as_str()
        .expect("pending --json shows sha256");
    assert_eq!(sha256.len(), 64);
    let other = "0".repeat(64);
    let out = decide(
        &ws,
        &spec,
        &session,
        &["--approve", "--sha256", &other, "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    assert!(events(&out).is_empty(), "nothing happened");
    assert!(stderr(&out).contains(sha256), "{}", stderr(&out));
    assert_eq!(pending_json(&spec), listed, "still pending, unchanged");
    let out = decide(
        &ws,
        &spec,
        &session,
        &["--approve", "--sha256", sha256, "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let plain = self::events(&out);
    assert_eq!(mode_changes(&plain), [("plan", "build")]);
}

/// A stdout whose reader is gone before anything is written (as `| head` ends early).
fn closed_stdout() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    writer
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let ws = Workspace::new();
    let workspace = ws.path().to_str().expect("utf-8");
    for args in [
        &["check", SHIPPED][..],
        &["graph", SHIPPED][..],
        &["schema"][..],
        &[
            "run",
            "--config",
            SHIPPED,
            "--workspace",
            workspace,
            "--mode",
            "plan",
            "--approve",
            "--json",
            "x",
        ][..],
        &[
            "run",
            "--config",
            SHIPPED,
            "--workspace",
            workspace,
            "--mode",
            "plan",
            "--approve",
            "x",
        ][..],
    ] {
        let out = bin()
            .args(args)
            .stdin(Stdio::null())
            .stdout(closed_stdout())
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(STDOUT_CLOSED),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Runs the binary with `args`, killing it (and failing) if it has not ended in time
/// ([`common::wait::exit_of`]).
/// `cmd` run as [`in_time`] runs it, with the patience of a command that explores a config
/// ([`common::wait::EXPLORATION_PATIENCE`]): `verify` of `deadlines.toml` takes 16 s on an idle
/// machine, which beside the suite's parallel tests can pass the 30 s a hang is waited for.
fn exploring_in_time(cmd: Command) -> Output {
    within(cmd, common::wait::EXPLORATION_PATIENCE)
}

fn in_time(cmd: Command) -> Output {
    within(cmd, common::wait::PATIENCE)
}

/// Runs `cmd` with stdin closed and its output captured; fails when it has not exited within
/// `patience` (a hang).
fn within(mut cmd: Command, patience: std::time::Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    common::wait::exit_within(child, patience).unwrap_or_else(|| panic!("the command hung"))
}

fn plan_run(ws: &Path, plan: &Path) -> Command {
    let mut cmd = bin();
    cmd.args(["run", "--config", SHIPPED, "--workspace"])
        .arg(ws)
        .args(["--mode", "plan", "--approve", "--json", "--plan"])
        .arg(plan)
        .arg("Add dark mode");
    cmd
}

#[test]
fn plan_naming_a_fifo_or_device_is_refused_at_once() {
    let ws = Workspace::new();
    let fifo = ws.path().join("plan.md");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let out = in_time(plan_run(ws.path(), &fifo));
    assert_eq!(out.status.code(), Some(INVALID));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a regular file"), "{stderr}");
    let inside = ws.path().join(".agent/plans/pipe.md");
    assert!(
        Command::new("mkfifo")
            .arg(&inside)
            .status()
            .expect("mkfifo")
            .success()
    );
    let out = in_time(plan_run(ws.path(), &inside));
    assert_eq!(out.status.code(), Some(INVALID));
}

#[test]
fn plan_copy_never_writes_through_a_symlink_or_over_another_file() {
    let ws = Workspace::new();
    let outside = tempfile::tempdir().expect("outside");
    let plans = ws.path().join(".agent/plans");
    // The plans directory already holds `add.md` as a dangling link to the outside, and another
    // session's pending `mine.md`.
    std::os::unix::fs::symlink(outside.path().join("new.txt"), plans.join("add.md"))
        .expect("symlink");
    std::fs::write(plans.join("mine.md"), "# Mine\n\n1. Mine\n").expect("write");
    let source = tempfile::tempdir().expect("source");
    for name in ["add.md", "mine.md"] {
        let plan = source.path().join(name);
        std::fs::write(&plan, "# Other\n\n1. Other\n").expect("write");
        let out = in_time(plan_run(ws.path(), &plan));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let events = events(&out);
        let suspended = events
            .iter()
            .find(|e| e["type"] == "tool_suspended")
            .expect("suspended");
        let stem = name.trim_end_matches(".md");
        assert_eq!(
            suspended["suspendPayload"]["path"],
            format!(".agent/plans/{stem}-2.md"),
            "a fresh name"
        );
    }
    assert_eq!(std::fs::read_dir(outside.path()).expect("dir").count(), 0);
    assert_eq!(
        std::fs::read_to_string(plans.join("mine.md")).expect("read"),
        "# Mine\n\n1. Mine\n",
        "the other plan is unchanged"
    );
}

#[test]
fn plan_is_checked_before_anything_is_copied() {
    let ws = Workspace::new();
    let source = tempfile::tempdir().expect("source");
    let cases: [(&str, &[u8]); 4] = [
        ("notes.txt", b"# Plan\n"),
        ("blank.md", b" \n\n"),
        ("latin1.md", b"# Caf\xe9\n"),
        ("huge.md", &[b'x'; 1024 * 1024 + 1]),
    ];
    let source_dir = source.path().display().to_string();
    let workspace = ws.path().display().to_string();
    let redact = [
        (source_dir.as_str(), "[SOURCE]"),
        (workspace.as_str(), "[WORKSPACE]"),
    ];
    let mut all = String::new();
    for (name, bytes) in cases {
        let plan = source.path().join(name);
        std::fs::write(&plan, bytes).expect("write");
        let out = in_time(plan_run(ws.path(), &plan));
        all.push_str(&format!(
            "$ run --plan {name}\n{}\n",
            snapshots::shown(&out, &redact)
        ));
    }
    // Not a planning mode: nothing to submit the plan in.
    let plan = source.path().join("ok.md");
    std::fs::write(&plan, "# Plan\n\n1. Go\n").expect("write");
    let mut cmd = bin();
    cmd.args(["run", "--config", SHIPPED, "--workspace"])
        .arg(ws.path())
        .args(["--mode", "build", "--approve", "--plan"])
        .arg(&plan);
    let out = in_time(cmd);
    all.push_str(&format!(
        "$ run --mode build --plan ok.md\n{}",
        snapshots::shown(&out, &redact)
    ));
    snapshots::same(
        all,
        snapbox::str![[r#"
$ run --plan notes.txt
exit 2
--- stdout
--- stderr
error: --plan: plan file `[SOURCE]/notes.txt` is not a markdown file: the name must end in .md

$ run --plan blank.md
exit 2
--- stdout
--- stderr
error: --plan: plan file `[SOURCE]/blank.md` is empty: write the plan into it before submitting

$ run --plan latin1.md
exit 2
--- stdout
--- stderr
error: --plan: plan file `[SOURCE]/latin1.md` is not valid UTF-8 text

$ run --plan huge.md
exit 2
--- stdout
--- stderr
error: --plan: plan file `[SOURCE]/huge.md` is larger than 1 MiB (1048577 bytes): shorten it

$ run --mode build --plan ok.md
exit 2
--- stdout
--- stderr
error: --plan: [SOURCE]/ok.md: the start mode is not a planning mode (it does not offer submit_plan); start in one with --mode

"#]],
    );
    let plans = ws.path().join(".agent/plans");
    assert_eq!(
        std::fs::read_dir(plans).expect("dir").count(),
        0,
        "nothing copied"
    );
}

#[test]
fn check_refuses_devices_and_non_utf8_configs_with_a_location() {
    let mut cmd = bin();
    cmd.args(["check", "/dev/zero"]);
    let out = in_time(cmd);
    let mut all = format!("$ check /dev/zero\n{}\n", snapshots::shown(&out, &[]));
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("modes.toml");
    std::fs::write(&path, b"[[modes]]\nid = \"b\xff\"\n").expect("write");
    let mut cmd = bin();
    cmd.arg("check").arg(&path);
    let out = in_time(cmd);
    let path = path.display().to_string();
    all.push_str(&format!(
        "$ check [LATIN1]\n{}",
        snapshots::shown(&out, &[(&path, "[LATIN1]")])
    ));
    snapshots::same(
        all,
        snapbox::str![[r#"
$ check /dev/zero
exit 2
--- stdout
--- stderr
error: /dev/zero: cannot read config: not a regular file (a config must be a file, not a device, FIFO or folder)

$ check [LATIN1]
exit 2
--- stdout
--- stderr
error: [LATIN1]:2:8: the config is not valid UTF-8: byte 0xff at offset 17 (save the file as UTF-8)
2 | id = "b�"
  |        ^

"#]],
    );
}

// ---------------------------------------------------------------------------------------------
// `verify` (issue 14): the exploration and the random state-machine test on a config.

#[test]
fn verify_prints_states_transitions_cases_and_seed() {
    let dir = tempfile::tempdir().expect("a directory");
    let out = bin()
        .current_dir(dir.path())
        .args(["verify", SHIPPED, "--cases", "16", "--seed", "7"])
        .output()
        .expect("run verify");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let explored = stdout.lines().next().unwrap_or_default();
    assert!(
        explored.starts_with(&format!("{SHIPPED}: explored ")),
        "{stdout}"
    );
    assert!(explored.ends_with(" transitions, all checked"), "{stdout}");
    assert!(
        stdout.contains("16 random cases passed (seed 7), edges covered: 14/14"),
        "{stdout}"
    );
}

#[test]
fn verify_refuses_an_invalid_config_with_exit_status_2() {
    let path = fixture("configs/invalid/self-handover-default.toml");
    let out = bin().arg("verify").arg(&path).output().expect("run verify");
    let path = path.display().to_string();
    snapshots::same(
        snapshots::shown(&out, &[(&path, "[CONFIG]")]),
        snapbox::str![[r#"
exit 2
--- stdout
--- stderr
warning: [CONFIG]:5:19: planning mode `plan` offers no tool that can write a plan (its availableTools has none of the plan-writing tools, such as `write_plan`): a model there cannot author a plan to submit
5 | availableTools = ["read_file", "submit_plan"]
  |                   ^^^^^^^^^^^

error: [CONFIG]:5:32: mode `plan` lists `submit_plan` but sets no transitionsTo and is itself the default mode, so an approved plan would hand over to `plan` itself: add `transitionsTo` naming the mode to hand over to, or mark another mode default
5 | availableTools = ["read_file", "submit_plan"]
  |                                ^^^^^^^^^^^^^

[CONFIG]: 1 error

"#]],
    );
}

/// `verify CONFIG ARGS...` in a fresh directory (so no regression file is left behind), with
/// the config written there from `toml`.
fn verify(toml: &str, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("a directory");
    std::fs::write(dir.path().join("modes.toml"), toml).expect("write the config");
    let mut cmd = bin();
    cmd.current_dir(dir.path())
        .args(["verify", "modes.toml", "--cases", "4", "--seed", "1"])
        .args(args);
    exploring_in_time(cmd)
}

/// A config naming the host's own tool `run_tests`, which waits for approval in `build`.
const CUSTOM_TOOL: &str = "[[modes]]\nid = \"plan\"\nname = \"Plan\"\ndefault = true\n\
    transitionsTo = \"build\"\n\n[[modes]]\nid = \"build\"\nname = \"Build\"\n\
    availableTools = [\"read_file\", \"write_file\", \"run_tests\"]\n\
    requireApproval = [\"run_tests\"]\n";

#[test]
fn verify_reports_every_config_error_as_check_does() {
    let toml = "[[modes]]\nid = \"plan\"\nname = \"Plan\"\ntransitionsTo = \"nowhere\"\n\n\
        [[modes]]\nid = \"build\"\nname = \"Build\"\ndefault = true\n\
        availableTools = [\"read_file\", \"write_flie\"]\n";
    let out = verify(toml, &[]);
    snapshots::same(
        snapshots::shown(&out, &[]),
        snapbox::str![[r#"
exit 2
--- stdout
--- stderr
error: modes.toml:4:17: mode `plan` has transitionsTo `nowhere`, which names no mode (ids are case-sensitive; known: plan, build)
4 | transitionsTo = "nowhere"
  |                 ^^^^^^^^^

error: modes.toml:10:32: mode `build` lists unknown tool `write_flie` in availableTools: did you mean `write_file`?
10 | availableTools = ["read_file", "write_flie"]
   |                                ^^^^^^^^^^^^

modes.toml: 2 errors

"#]],
    );
}

#[test]
fn verify_shows_checks_warnings_and_still_checks() {
    let toml = "[[modes]]\nid = \"plan\"\nname = \"Plan\"\ndefault = true\n\
        transitionsTo = \"build\"\n\
        availableTools = [\"read_file\", \"write_file\", \"write_plan\", \"submit_plan\"]\n\n\
        [[modes]]\nid = \"build\"\nname = \"Build\"\n";
    let out = verify(toml, &[]);
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{stderr}");
    assert!(
        stderr.contains("warning: modes.toml:6:32: planning mode `plan` lists `write_file`"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("4 random cases passed (seed 1)"),
        "{stdout}"
    );
    assert!(stdout.contains("1 config warning"), "{stdout}");
}

#[test]
fn verify_exits_1_for_an_unknown_custom_tool_and_says_to_stub_it() {
    let out = verify(CUSTOM_TOOL, &[]);
    snapshots::same(
        snapshots::shown(&out, &[]),
        snapbox::str![[r#"
exit 1
--- stdout
--- stderr
error: modes.toml:10:46: mode `build` lists unknown tool `run_tests` in availableTools
10 | availableTools = ["read_file", "write_file", "run_tests"]
   |                                              ^^^^^^^^^^^

modes.toml: 1 error
the config names tools of its host: stub them with --tool run_tests (add `:read-only` to one that changes nothing)

"#]],
    );
}

#[test]
fn verify_stubs_a_custom_tool_with_the_tool_flag() {
    let out = verify(CUSTOM_TOOL, &["--tool", "run_tests"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(DONE), "{stdout}{}", stderr(&out));
    assert!(
        stdout.contains("4 random cases passed (seed 1)"),
        "{stdout}"
    );
    // A read-only stub is offered in the planning mode without availableTools: the kit checks
    // that too, and the config still passes.
    let out = verify(CUSTOM_TOOL, &["--tool", "run_tests:read-only"]);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    // A stub cannot take a built-in's name, nor `submit_plan`'s, nor an access it lacks.
    for bad in [
        "read_file",
        "submit_plan",
        "run_tests:sometimes",
        ":read-only",
    ] {
        let out = verify(CUSTOM_TOOL, &["--tool", bad]);
        assert_eq!(out.status.code(), Some(INVALID), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("--tool"), "{bad}: {}", stderr(&out));
    }
}

#[test]
fn verify_closes_with_what_it_checked_and_what_it_did_not() {
    let out = verify(CUSTOM_TOOL, &["--tool", "run_tests"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(DONE), "{stdout}{}", stderr(&out));
    let checked = stdout
        .lines()
        .find(|l| l.starts_with("checked: "))
        .unwrap_or_else(|| panic!("no `checked:` line: {stdout}"));
    for part in [
        " states",
        " transitions",
        "edges",
        "restarts",
        "4 random cases",
    ] {
        assert!(checked.contains(part), "{part}: {checked}");
    }
    let not = stdout
        .lines()
        .find(|l| l.starts_with("not checked: "))
        .unwrap_or_else(|| panic!("no `not checked:` line: {stdout}"));
    for part in ["deadlines", "outside the tool registry", "run_tests"] {
        assert!(not.contains(part), "{part}: {not}");
    }
}

#[test]
fn verify_help_lists_the_divergence_exit_status() {
    let out = bin().args(["verify", "--help"]).output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--tool <NAME[:read-only]>"), "{help}");
    assert!(
        help.lines()
            .any(|l| l.trim_start().starts_with("7 ") && l.contains("diverged")),
        "{help}"
    );
}

#[test]
fn decisions_record_who_decided() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let out = decide(
        &ws,
        &spec,
        &session,
        &["--approve", "--by", "alice", "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let decided_by = |out: &Output| {
        events(out)
            .into_iter()
            .find(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
            .map(|e| e["decision"]["decidedBy"].clone())
            .expect("the decision's tool_end")
    };
    assert_eq!(decided_by(&out), "alice");
    let workspace = ws.path().to_str().expect("utf-8");
    let args = [
        "run",
        "--config",
        SHIPPED,
        "--workspace",
        workspace,
        "--mode",
        "plan",
        "--approve",
        "--json",
        "x",
    ];
    let out = bin()
        .args(args)
        .env("USER", "ci-bot")
        .output()
        .expect("run");
    assert_eq!(decided_by(&out), "ci-bot", "the OS user by default");
    let out = bin()
        .args(args)
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .expect("run");
    assert_eq!(decided_by(&out), "unknown");
    // An answer typed at the prompt is signed the same way.
    let out = run(
        ws.path(),
        &["--mode", "plan", "--json", "--by", "bob", "x"],
        Some("y\n"),
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert_eq!(decided_by(&out), "bob");
}

#[test]
fn decide_refuses_a_decision_id_that_is_not_the_pending_one() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let listed = pending_json(&spec);
    let id = listed[0]["decisionId"]
        .as_str()
        .expect("pending --json shows the decision id");
    assert!(!id.is_empty());
    let out = decide(
        &ws,
        &spec,
        &session,
        &["--decision", "decision_99", "--approve", "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    assert!(events(&out).is_empty());
    assert_eq!(pending_json(&spec), listed, "unchanged");
    let out = decide(
        &ws,
        &spec,
        &session,
        &["--decision", id, "--approve", "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let plain = self::events(&out);
    assert_eq!(mode_changes(&plain), [("plan", "build")]);
}

/// The fixture whose `plan` hands an approved plan over to `build` (plain) or `build-auto`.
fn choice_config() -> String {
    fixture("configs/valid/targets-list.toml")
        .display()
        .to_string()
}

/// `run` on the targets-list config.
fn run_choice(ws: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let config = choice_config();
    let workspace = ws.to_str().expect("utf-8");
    let mut all = vec!["run", "--config", &config, "--workspace", workspace];
    all.extend_from_slice(args);
    cli(&all, stdin)
}

#[test]
fn run_approve_to_a_listed_target_hands_over_there() {
    let ws = Workspace::new();
    let out = run_choice(
        ws.path(),
        &[
            "--mode",
            "plan",
            "--approve",
            "--to",
            "build-auto",
            "--json",
            "Add dark mode",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let events = events(&out);
    let suspended = events
        .iter()
        .find(|e| e["type"] == "tool_suspended")
        .expect("tool_suspended");
    assert_eq!(
        suspended["suspendPayload"]["targetModeIds"],
        serde_json::json!(["build", "build-auto"])
    );
    assert_eq!(suspended["suspendPayload"]["targetModeId"], "build");
    assert_eq!(mode_changes(&events), [("plan", "build-auto")]);
    let decided = events
        .iter()
        .find(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
        .expect("the decision");
    assert_eq!(decided["decision"]["targetModeId"], "build-auto");
    // Without --to, the first target.
    let ws = Workspace::new();
    let out = run_choice(
        ws.path(),
        &["--mode", "plan", "--approve", "--json", "Add dark mode"],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let plain = self::events(&out);
    assert_eq!(mode_changes(&plain), [("plan", "build")]);
}

#[test]
fn run_approve_to_a_mode_outside_the_list_is_refused_and_nothing_is_approved() {
    let mut refusals = String::new();
    for to in ["plan", "nowhere", "Build-auto", "build\u{1b}[2K"] {
        let ws = Workspace::new();
        let out = run_choice(
            ws.path(),
            &[
                "--mode",
                "plan",
                "--approve",
                "--to",
                to,
                "--json",
                "Add dark mode",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(REFUSED), "{to:?}: {}", stderr(&out));
        assert!(mode_changes(&events(&out)).is_empty(), "{to:?}");
        let err = stderr(&out);
        assert!(
            !err.contains('\u{1b}'),
            "no raw escape reaches the terminal: {err:?}"
        );
        refusals.push_str(&format!("$ run --approve --to {to:?}\n{err}\n"));
    }
    snapshots::same(
        refusals,
        snapbox::str![[r#"
$ run --approve --to "plan"
error: mode `plan` is not a target of the pending plan: approve to one of build, build-auto

$ run --approve --to "nowhere"
error: mode `nowhere` is not a target of the pending plan: approve to one of build, build-auto

$ run --approve --to "Build-auto"
error: mode `Build-auto` is not a target of the pending plan: approve to one of build, build-auto: did you mean `build-auto`? (mode ids are case-sensitive)

$ run --approve --to "build\u{1b}[2K"
error: mode `build\u{1b}[2K` is not a target of the pending plan: approve to one of build, build-auto


"#]],
    );
    // `--to` goes with `--approve` only.
    let ws = Workspace::new();
    for flags in [&["--to", "build"][..], &["--reject", "--to", "build"][..]] {
        let mut args = vec!["--mode", "plan"];
        args.extend_from_slice(flags);
        let out = run_choice(ws.path(), &args, None);
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "{flags:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn pending_lists_the_targets_and_decide_to_chooses_one_across_processes() {
    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let out = run_choice(
        ws.path(),
        &[
            "--store",
            &spec,
            "--detach",
            "--mode",
            "plan",
            "--json",
            "Add dark mode",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--approve [--to MODE]"),
        "{}",
        stderr(&out)
    );
    let session = events(&out)[0]["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    let listed = pending_json(&spec);
    assert_eq!(
        listed[0]["targetModeIds"],
        serde_json::json!(["build", "build-auto"])
    );
    let text = cli(&["pending", "--store", &spec], None);
    let line = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(line.contains("\tplan -> build | build-auto\t"), "{line}");

    let config = choice_config();
    let workspace = ws.path().to_str().expect("utf-8").to_owned();
    let decide_to = |flags: &[&str]| {
        let mut args = vec![
            "decide",
            "--store",
            &spec,
            &session,
            "--config",
            &config,
            "--workspace",
            &workspace,
            "--json",
        ];
        args.extend_from_slice(flags);
        cli(&args, None)
    };
    let out = decide_to(&["--approve", "--to", "plan"]);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    assert!(events(&out).is_empty(), "nothing happened");
    assert_eq!(pending_json(&spec), listed, "still pending, unchanged");
    // A case-only miss is hinted, as the config loader hints it.
    let out = decide_to(&["--approve", "--to", "Build-auto"]);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    snapshots::same(
        stderr(&out),
        snapbox::str![[r#"
approving the plan (plan file .agent/plans/add-dark-mode.md, sha256 53fac1f88019...):

# Add dark mode

## Steps
1. Read the code this change touches.
2. Make the change in small steps.
3. Add tests for it and run the whole suite.

error: mode `Build-auto` is not a target of the pending plan: approve to one of build, build-auto: did you mean `build-auto`? (mode ids are case-sensitive)

"#]],
    );
    assert_eq!(pending_json(&spec), listed, "still pending, unchanged");
    let out = decide_to(&["--approve", "--to", "build-auto"]);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert_eq!(mode_changes(&events(&out)), [("plan", "build-auto")]);
    assert!(pending_json(&spec).is_empty());
    let out = decide_to(&["--approve", "--to", "build"]);
    assert_eq!(
        out.status.code(),
        Some(REFUSED),
        "decided once: {}",
        stderr(&out)
    );
}

#[test]
fn the_prompt_lists_the_targets_and_takes_a_number_or_a_mode_id() {
    for (input, to) in [
        ("y\n", Some("build")),
        ("1\n", Some("build")),
        ("2\n", Some("build-auto")),
        ("build-auto\n", Some("build-auto")),
        ("7\n2\n", Some("build-auto")),
        ("n\n", None),
        ("Build-auto\nn\n", None),
        ("Build-auto\n2\n", Some("build-auto")),
    ] {
        let ws = Workspace::new();
        let out = run_choice(
            ws.path(),
            &["--mode", "plan", "--json", "Add dark mode"],
            Some(input),
        );
        let err = stderr(&out);
        assert!(
            err.contains("Approve this plan and switch to one of:"),
            "{err}"
        );
        assert!(err.contains("  2  ● build-auto (build-auto)"), "{err}");
        assert!(err.contains("[1-2] approve to that mode"), "{err}");
        let events = events(&out);
        let changes = mode_changes(&events);
        match to {
            Some(target) => {
                assert_eq!(out.status.code(), Some(DONE), "{input:?}: {err}");
                assert_eq!(changes, [("plan", target)], "{input:?}");
            }
            None => {
                assert_eq!(out.status.code(), Some(NOT_APPROVED), "{input:?}: {err}");
                assert!(changes.is_empty(), "{input:?}");
            }
        }
        if input.starts_with('7') {
            assert!(err.contains("`7` is not a listed choice"), "{err}");
        }
        if input.starts_with("Build-auto") {
            // A case-only miss asks again with the hint: it is not feedback that rejects.
            assert!(
                err.contains("`Build-auto` is not a listed choice: did you mean `build-auto`? (mode ids are case-sensitive); type 1 to 2"),
                "{err}"
            );
        }
    }
}

#[test]
fn check_and_graph_show_every_target() {
    let config = choice_config();
    let redact = [(config.as_str(), "[CONFIG]")];
    let out = cli(&["check", &config], None);
    let mut all = format!("$ check\n{}\n", snapshots::shown(&out, &redact));
    let out = cli(&["graph", &config, "--format", "dot"], None);
    all.push_str(&format!(
        "$ graph --format dot\n{}\n",
        snapshots::shown(&out, &redact)
    ));
    for name in [
        "targets-list-unknown.toml",
        "targets-list-self.toml",
        "targets-list-duplicate.toml",
    ] {
        let path = fixture(&format!("configs/invalid/{name}"));
        let out = cli(&["check", path.to_str().expect("utf-8")], None);
        let path = path.display().to_string();
        all.push_str(&format!(
            "$ check {name}\n{}\n",
            snapshots::shown(&out, &[(&path, "[CONFIG]")])
        ));
    }
    snapshots::same(
        all,
        snapbox::str![[r#"
$ check
exit 0
--- stdout
[CONFIG]: ok, 3 modes
  plan (plan) [planning]  tools: read_file, list_files, write_plan, submit_plan
  build (build) [default]  tools: all  requireApproval: write_file
  build-auto (build-auto)  tools: all
default mode: build
hand-over edges (on approval):
  plan -> build
  plan -> build-auto (when chosen at approval)
--- stderr

$ graph --format dot
exit 0
--- stdout
digraph modes {
    rankdir=LR;
    node [shape=box, style=rounded];
    "plan" [label="plan\n(plan)\nplanning", style="rounded,dashed"];
    "build" [label="build\n(build)\ndefault, approval: write_file", peripheries=2];
    "build-auto" [label="build-auto\n(build-auto)"];
    "plan" -> "build" [label="plan approved"];
    "plan" -> "build-auto" [label="plan approved (chosen)"];
}
--- stderr

$ check targets-list-unknown.toml
exit 2
--- stdout
--- stderr
error: [CONFIG]:5:3: mode `plan` has transitionsTo `biuld`, which names no mode: did you mean `build`?
5 |   "biuld",
  |   ^^^^^^^

[CONFIG]: 1 error

$ check targets-list-self.toml
exit 2
--- stdout
--- stderr
error: [CONFIG]:3:27: mode `plan` has transitionsTo naming itself: a plan approved in `plan` must hand over to another mode
3 | transitionsTo = ["build", "plan"]
  |                           ^^^^^^

[CONFIG]: 1 error

$ check targets-list-duplicate.toml
exit 2
--- stdout
--- stderr
error: [CONFIG]:3:41: mode `plan` lists `build` twice in transitionsTo: name each mode once
3 | transitionsTo = ["build", "build-auto", "build"]
  |                                         ^^^^^^^

[CONFIG]: 1 error


"#]],
    );
}

/// Reads a child's stderr on a thread; `wait_for` blocks until it holds a text (or 20 s pass),
/// `all` until the stream ended (the child exited and its last bytes were read).
struct StderrWatch {
    seen: std::sync::Arc<std::sync::Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl StderrWatch {
    fn new(mut stderr: std::process::ChildStderr) -> Self {
        use std::io::Read;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = seen.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self { seen, reader }
    }

    /// All the child wrote: waits for the end of the stream, so no late bytes are missed.
    fn all(self) -> String {
        self.reader.join().expect("the reader thread");
        let seen = self.seen.lock().expect("lock");
        seen.clone()
    }

    fn text(&self) -> String {
        self.seen.lock().expect("lock").clone()
    }

    fn wait_for(&self, needle: &str) {
        common::wait::until(
            || self.text().contains(needle),
            || format!("no `{needle}` on stderr: {}", self.text()),
        );
    }
}

#[test]
fn a_plan_revised_while_the_prompt_waits_cannot_be_approved_from_that_prompt() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let first = pending_json(&spec);
    let shown = first[0]["sha256"].as_str().expect("sha256").to_owned();

    // `decide` waits at the prompt, its stdin a pipe this test holds.
    let workspace = ws.path().to_str().expect("utf-8");
    let mut prompt = bin()
        .args(["decide", "--store", &spec, &session, "--config", SHIPPED])
        .args(["--workspace", workspace, "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut answer = prompt.stdin.take().expect("stdin");
    let watch = StderrWatch::new(prompt.stderr.take().expect("stderr"));
    watch.wait_for("Approve this plan");
    assert!(
        watch.text().contains(&shown[..12]),
        "the prompt shows the plan's sha256: {}",
        watch.text()
    );

    // Meanwhile another process rejects with feedback: the model revises and resubmits.
    let out = decide(
        &ws,
        &spec,
        &session,
        &["--reject", "--feedback", "add tests", "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let revised = pending_json(&spec);
    assert_eq!(revised.len(), 1);
    assert_ne!(revised[0]["sha256"], first[0]["sha256"], "a new plan");
    let plan_file = ws
        .path()
        .join(revised[0]["planPath"].as_str().expect("planPath"));
    let revised_text = std::fs::read(&plan_file).ok();

    // `y` at the first prompt approves the plan it showed, which is no longer pending.
    answer.write_all(b"y\n").expect("answer");
    drop(answer);
    let out = common::wait::exit_of(prompt);
    let said = watch.all();
    assert_eq!(
        out.status.code(),
        Some(REFUSED),
        "exit {:?}: {said}",
        out.status.code()
    );
    assert!(said.contains("this decision was not applied"), "{said}");
    assert!(
        mode_changes(&events(&out)).is_empty(),
        "no hand-over: {:?}",
        events(&out)
    );
    assert_eq!(pending_json(&spec), revised, "the revision stays pending");
    assert_eq!(std::fs::read(&plan_file).ok(), revised_text);

    // The revision can still be approved by its own sha256.
    let sha256 = revised[0]["sha256"].as_str().expect("sha256");
    let out = decide(
        &ws,
        &spec,
        &session,
        &["--approve", "--sha256", sha256, "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert_eq!(mode_changes(&events(&out)), [("plan", "build")]);
}

/// `decide` killed (SIGKILL) right after its decision was saved, while the model's first call in
/// the new mode is under way: the run stays `running` under the dead process's lease, so
/// `continue` is refused until the lease ends; then `pending` shows the run interrupted, and
/// `continue` carries it on (the model's next step, in the mode the plan handed over to) exactly
/// once (issue 10 item 8).
#[cfg(feature = "openai")]
#[test]
fn a_decide_killed_after_its_save_is_interrupted_and_continue_carries_it_on_once() {
    use common::openai_server::{Reply, ScriptedServer, text};
    use std::time::Duration;
    use wiremock::ResponseTemplate;

    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let server = ScriptedServer::start_blocking(vec![
        // The killed `decide`'s model call: it never answers in time.
        Reply::Raw(ResponseTemplate::new(500).set_delay(Duration::from_secs(60))),
        // `continue`'s model call.
        text("Built it."),
    ]);
    let workspace = ws.path().to_str().expect("utf-8");
    let model_args = ["--model", "openai/test-model", "--config", SHIPPED];
    let mut decider = bin()
        .args(["decide", "--store", &spec, &session, "--approve", "--json"])
        .args(["--workspace", workspace, "--lease", "600"])
        .args(model_args)
        .envs(server.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("decide");
    // The decision is saved before the model is called: once the server sees the call, kill.
    server.wait_served(1);
    decider.kill().expect("SIGKILL");
    decider.wait().expect("reap");

    let continue_args = [
        "continue",
        "--store",
        &spec,
        &session,
        "--json",
        "--workspace",
        workspace,
    ];
    let carry_on = || {
        bin()
            .args(continue_args)
            .args(model_args)
            .envs(server.env())
            .stdin(Stdio::null())
            .output()
            .expect("continue")
    };
    // The dead process's lease still runs: nobody takes the run over yet.
    let early = carry_on();
    assert_eq!(early.status.code(), Some(REFUSED), "{}", stderr(&early));
    assert!(stderr(&early).contains("lease"), "{}", stderr(&early));
    assert!(
        pending_json(&spec).is_empty(),
        "not interrupted while the lease runs"
    );

    // Once the lease ends, `pending` shows the run interrupted.
    common::wait::end_lease(&spec, &session);
    let interrupted = pending_json(&spec);
    assert_eq!(interrupted.len(), 1, "{interrupted:?}");
    let run = &interrupted[0]["interrupted"];
    assert_eq!(run["sessionId"], session.as_str());
    assert_eq!(
        (&run["runId"], &run["modeId"]),
        (&"run_1".into(), &"build".into())
    );
    let listed = cli(&["pending", "--store", &spec], None);
    let listed_text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed_text.contains("interrupted")
            && listed_text.contains(&format!(
                "agent-controller continue --store {spec} {session}"
            )),
        "{listed_text}"
    );

    let out = carry_on();
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let carried = events(&out);
    assert_eq!(
        types(&carried),
        [
            "agent_start",
            "text_delta",
            "model_end",
            "assistant_message",
            "plan_report",
            "agent_end"
        ],
        "{carried:?}"
    );
    assert_eq!(carried[3]["text"], "Built it.");
    assert_eq!(carried[4]["report"]["reason"], "completed");
    assert_eq!(carried[5]["reason"], "completed");
    assert_eq!(server.served(), 2, "the model's next step, once");
    let bodies = server.bodies_blocking();
    assert!(
        common::openai_server::contents(&bodies[1], "system")
            .iter()
            .any(|c| c.contains("`build`")),
        "the step runs in the build mode"
    );

    // Nothing is left to carry on, and nothing is listed.
    let again = carry_on();
    assert_eq!(again.status.code(), Some(REFUSED), "{}", stderr(&again));
    assert_eq!(server.served(), 2);
    assert!(pending_json(&spec).is_empty());
}

/// Edit before approving: `decide --approve --plan-file EDITED.md` hands the edited text to the
/// next mode and the `tool_end` decision keeps both hashes; a `--sha256` pin names the plan shown.
/// A plan file that is missing, not a regular file, not UTF-8, too large or blank, and
/// `--plan-file` without `--approve`, are refused and change nothing.
#[test]
fn decide_approve_with_an_edited_plan_file_hands_over_the_edit() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let listed = pending_json(&spec);
    let shown = listed[0]["sha256"].as_str().expect("sha256").to_owned();
    let dir = tempfile::tempdir().expect("tmp");
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        path.display().to_string()
    };
    let blank = file("blank.md", b" \n\n");
    let latin1 = file("latin1.md", b"# Plan\n\ncaf\xe9\n");
    let huge = file("huge.md", &vec![b'x'; 1024 * 1024 + 1]);
    let missing = dir.path().join("missing.md").display().to_string();
    let folder = dir.path().display().to_string();
    let edited_text = "# Edited\n\n1. EDITED step \u{1b}[31mred\n";
    let edited = file("edited.md", edited_text.as_bytes());
    for flags in [
        &["--approve", "--plan-file", &blank][..],
        &["--approve", "--plan-file", &latin1][..],
        &["--approve", "--plan-file", &huge][..],
        &["--approve", "--plan-file", &missing][..],
        &["--approve", "--plan-file", &folder][..],
        &["--reject", "--plan-file", &edited][..],
        &["--plan-file", &edited][..],
    ] {
        let mut args = flags.to_vec();
        args.push("--json");
        let out = decide(&ws, &spec, &session, &args, None);
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "{flags:?}: {}",
            stderr(&out)
        );
        assert!(events(&out).is_empty(), "{flags:?}: nothing happened");
        assert_eq!(pending_json(&spec), listed, "{flags:?}: still pending");
    }
    let out = decide(
        &ws,
        &spec,
        &session,
        &[
            "--approve",
            "--sha256",
            &shown,
            "--plan-file",
            &edited,
            "--json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let end = events(&out)
        .into_iter()
        .find(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
        .expect("tool_end");
    assert_eq!(end["decision"]["sha256"], shown.as_str());
    let approved = agent_controller::tool::submit_plan::sha256_hex(edited_text.as_bytes());
    assert_eq!(end["decision"]["approvedSha256"], approved.as_str());
    let result = end["result"].as_str().expect("result");
    assert!(result.contains("1. EDITED step"), "{result}");
    assert!(pending_json(&spec).is_empty());
}

// The revision prompt shows a diff: the `diff` feature.
#[cfg(feature = "diff")]
#[test]
fn a_revised_plan_is_shown_as_its_diff_and_p_shows_it_whole() {
    let ws = Workspace::new();
    let out = run(
        ws.path(),
        &["--mode", "plan", "--json", "Add dark mode"],
        Some("add a rollback step\np\ny\n"),
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let events = events(&out);
    let payloads: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_suspended")
        .map(|e| &e["suspendPayload"])
        .collect();
    assert_eq!(payloads.len(), 2);
    assert_eq!(payloads[0]["revision"], 1);
    assert!(payloads[0].get("diff").is_none());
    assert_eq!(payloads[1]["revision"], 2);
    assert_eq!(payloads[1]["previousSha256"], payloads[0]["sha256"]);
    let diff = payloads[1]["diff"].as_str().expect("diff");
    assert!(
        diff.contains("+- Addressed: add a rollback step\n"),
        "{diff}"
    );
    let err = stderr(&out);
    assert!(
        err.contains("revision 2 of the plan \"Add dark mode\", changes since revision 1"),
        "{err}"
    );
    assert!(err.contains("+++ revision 2\n"), "{err}");
    assert!(err.contains("[p] show the whole plan"), "{err}");
    // `p` prints the whole revision before asking again.
    let after_p = err
        .rsplit("[s MODE] switch to build, not approving\n> ")
        .nth(1)
        .expect("asked twice");
    assert!(after_p.contains("Revisions"), "{err}");
    assert_eq!(mode_changes(&events), [("plan", "build")]);
}

/// The stored record of `session` in the file store `spec`, as JSON.
fn stored_json(spec: &str, session: &str) -> Value {
    let path = ["json", "pending.json", "running.json"]
        .iter()
        .map(|suffix| Path::new(spec).join(format!("{session}.{suffix}")))
        .find(|path| path.exists())
        .unwrap_or_else(|| panic!("no record of {session} in {spec}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("a JSON record")
}

/// `decide --approve` whose stdout fails after the decision is saved (a full disk, `/dev/full`;
/// a reader that closed the pipe): the run is carried on to its end and saved (the mode is
/// `build`, the run `completed`, nothing left `running` under a lease), and the output error is
/// reported afterwards: exit 141, with the reason on stderr for a write error (issue 19).
#[test]
fn decide_whose_stdout_fails_after_the_save_still_finishes_the_run_and_reports_the_error() {
    for full in [true, false] {
        let ws = Workspace::new();
        let (spec, session) = detached(&ws);
        let stdout: Stdio = if full {
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full")
                .into()
        } else {
            closed_stdout().into()
        };
        let workspace = ws.path().to_str().expect("utf-8");
        let out = bin()
            .args(["decide", "--store", &spec, &session, "--approve", "--json"])
            .args(["--config", SHIPPED, "--workspace", workspace])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .output()
            .expect("decide");
        assert_eq!(out.status.code(), Some(STDOUT_CLOSED), "{}", stderr(&out));
        if full {
            assert!(
                stderr(&out).contains("cannot write to stdout"),
                "{}",
                stderr(&out)
            );
        }
        let record = stored_json(&spec, &session);
        assert_eq!(record["modeId"], "build", "full={full}: {record}");
        assert_eq!(record["run"]["state"], "completed", "full={full}: {record}");
        assert!(record.get("pending").is_none_or(Value::is_null), "{record}");
    }
}

/// Issue 21: what `pending` shows, `decide` takes: 12 hex digits of the sha256 and a prefix of
/// the session id; a prefix shorter than 8 is a usage error (exit 2), and nothing changes.
#[test]
fn decide_takes_the_sha256_and_session_id_prefixes_pending_shows() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let listed = pending_json(&spec);
    let sha256 = listed[0]["sha256"].as_str().expect("sha256");
    let short_session = &session[..8];
    let out = decide(&ws, &spec, &session[..6], &["--approve", "--json"], None);
    assert_eq!(out.status.code(), Some(INVALID), "{}", stderr(&out));
    assert!(stderr(&out).contains("too short"), "{}", stderr(&out));
    let out = decide(
        &ws,
        &spec,
        short_session,
        &["--approve", "--sha256", &sha256[..7], "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(INVALID), "{}", stderr(&out));
    assert_eq!(pending_json(&spec), listed, "still pending, unchanged");
    let out = decide(
        &ws,
        &spec,
        short_session,
        &["--approve", "--sha256", &sha256[..12], "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert_eq!(mode_changes(&events(&out)), [("plan", "build")]);
}

/// Issue 21: the run `decide --approve` carries on is "resumed", as the prompt says, not
/// "started".
#[test]
fn decide_says_the_run_resumed() {
    let ws = Workspace::new();
    let (spec, session) = detached(&ws);
    let out = decide(&ws, &spec, &session, &["--approve"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let runs: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("] started in mode") || l.contains("] resumed in mode"))
        .collect();
    assert!(!runs.is_empty(), "{text}");
    assert!(
        runs.iter().all(|l| l.contains("] resumed in mode")),
        "{text}"
    );
}

/// Issue 21: a command's `--help` lists only the flags it takes: `--always` is `decide`'s.
#[test]
fn only_decide_lists_always() {
    for (command, listed) in [("run", false), ("continue", false), ("decide", true)] {
        let out = bin().args([command, "--help"]).output().expect("help");
        let help = String::from_utf8_lossy(&out.stdout);
        let option = help.lines().any(|l| l.trim_start().starts_with("--always"));
        assert_eq!(option, listed, "{command}: {help}");
    }
}

/// Issue 21: snapshots of the CLI's human output and error text, whole (as the `toml` crate's
/// tests do them with snapbox), with ids, hashes and paths redacted. `SNAPSHOTS=overwrite`
/// rewrites them after a deliberate change.
mod snapshots {
    use super::*;
    pub(super) use common::cli::snapshots::{same, shown};
    use snapbox::str;

    #[test]
    fn check_reports_each_invalid_fixture() {
        let dir = fixture("configs/invalid");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n != "expected.toml")
            .collect();
        names.sort();
        let mut all = String::new();
        for name in names {
            let out = bin()
                .args(["check", &name])
                .current_dir(&dir)
                .output()
                .expect("check");
            all.push_str(&format!("$ check {name}\n{}\n", shown(&out, &[])));
        }
        same(
            all,
            str![[r#"
$ check conflicting-default.toml
exit 2
--- stdout
--- stderr
error: conflicting-default.toml:1:17: defaultModeId `plan` conflicts with mode `build`, which is marked `default = true`: name one default mode
1 | defaultModeId = "plan"
  |                 ^^^^^^

conflicting-default.toml: 1 error

$ check duplicate-id.toml
exit 2
--- stdout
--- stderr
error: duplicate-id.toml:10:6: duplicate mode id `plan`: another mode already uses it
10 | id = "plan"
   |      ^^^^^^

duplicate-id.toml: 1 error

$ check duplicate-tool.toml
exit 2
--- stdout
--- stderr
error: duplicate-tool.toml:4:46: mode `plan` lists `read_file` twice in availableTools: name each tool once
4 | availableTools = ["read_file", "write_plan", "read_file", "submit_plan"]
  |                                              ^^^^^^^^^^^

error: duplicate-tool.toml:9:34: mode `build` lists `write_file` twice in requireApproval: name each tool once
9 | requireApproval = ["write_file", "write_file"]
  |                                  ^^^^^^^^^^^^

duplicate-tool.toml: 2 errors

$ check empty-id.toml
exit 2
--- stdout
--- stderr
error: empty-id.toml:2:6: mode id is empty
2 | id = ""
  |      ^^

empty-id.toml: 1 error

$ check hook-without-command.toml
exit 2
--- stdout
--- stderr
error: hook-without-command.toml:6:6: [[hooks]] entry 1 has no `command`: add the program to run and its arguments, `command = ["python3", "hooks/guard.py"]`
6 | on = "toolCall"
  |      ^^^^^^^^^^

hook-without-command.toml: 1 error

$ check missing-id.toml
exit 2
--- stdout
--- stderr
error: missing-id.toml:1:1: missing field `id`
1 | [[modes]]
  | ^^^^^^^^^

missing-id.toml: 1 error

$ check no-modes.toml
exit 2
--- stdout
--- stderr
error: no-modes.toml:1:1: the config defines no modes: add at least one [[modes]] table with an id
1 | # A file with no modes at all.
  | ^

no-modes.toml: 1 error

$ check not-toml.toml
exit 2
--- stdout
--- stderr
error: not-toml.toml:1:9: unclosed array table, expected `]`
1 | [[modes]
  |         ^

not-toml.toml: 1 error

$ check plan-scope-bad.toml
exit 2
--- stdout
--- stderr
error: plan-scope-bad.toml:4:13: mode `plan` has planScope `sometimes`: use `ask` (the default: writes outside the approved plan's files wait for approval), `enforce` (they are refused) or `off` (the files are shown and bind nothing)
4 | planScope = "sometimes"
  |             ^^^^^^^^^^^

plan-scope-bad.toml: 1 error

$ check plans-dir-outside.toml
exit 2
--- stdout
--- stderr
error: plans-dir-outside.toml:1:12: plansDir `../plans` leaves the workspace: plansDir must be a relative path inside it, without `..`
1 | plansDir = "../plans"
  |            ^^^^^^^^^^

plans-dir-outside.toml: 1 error

$ check require-approval-not-offered.toml
exit 2
--- stdout
--- stderr
warning: require-approval-not-offered.toml:4:19: planning mode `plan` offers no tool that can write a plan (its availableTools has none of the plan-writing tools, such as `write_plan`): a model there cannot author a plan to submit
4 | availableTools = ["read_file", "submit_plan"]
  |                   ^^^^^^^^^^^

error: require-approval-not-offered.toml:5:20: mode `plan` lists `write_file` in requireApproval, but does not offer it (its availableTools: `read_file`, `submit_plan`): add `write_file` to availableTools or leave it out of requireApproval
5 | requireApproval = ["write_file"]
  |                    ^^^^^^^^^^^^

require-approval-not-offered.toml: 1 error

$ check reviewer-unknown.toml
exit 2
--- stdout
--- stderr
error: reviewer-unknown.toml:4:12: mode `plan` sets reviewBy = "critc", but no [[reviewers]] entry has that id (did you mean `critic`?)
4 | reviewBy = "critc"
  |            ^^^^^^^

reviewer-unknown.toml: 1 error

$ check rule-not-without-pattern.toml
exit 2
--- stdout
--- stderr
error: rule-not-without-pattern.toml:4:32: rule 1 of mode `build` sets `not` without a pattern, so it would match no call: add `path`, `glob` or `regex`, or leave `not` out
4 |   { tool = "write_file", not = true, action = "deny" },
  |                                ^^^^

rule-not-without-pattern.toml: 1 error

$ check rule-test-bad-expect.toml
exit 2
--- stdout
--- stderr
error: rule-test-bad-expect.toml:8:10: unknown variant `allowed`, expected one of `allow`, `ask`, `deny`, `unavailable`
8 | expect = "allowed"
  |          ^^^^^^^^^

rule-test-bad-expect.toml: 1 error

$ check rule-test-unknown-mode.toml
exit 2
--- stdout
--- stderr
error: rule-test-unknown-mode.toml:5:8: rule test 1 names unknown mode `biuld`: did you mean `build`?
5 | mode = "biuld"
  |        ^^^^^^^

rule-test-unknown-mode.toml: 1 error

$ check self-handover-default.toml
exit 2
--- stdout
--- stderr
warning: self-handover-default.toml:5:19: planning mode `plan` offers no tool that can write a plan (its availableTools has none of the plan-writing tools, such as `write_plan`): a model there cannot author a plan to submit
5 | availableTools = ["read_file", "submit_plan"]
  |                   ^^^^^^^^^^^

error: self-handover-default.toml:5:32: mode `plan` lists `submit_plan` but sets no transitionsTo and is itself the default mode, so an approved plan would hand over to `plan` itself: add `transitionsTo` naming the mode to hand over to, or mark another mode default
5 | availableTools = ["read_file", "submit_plan"]
  |                                ^^^^^^^^^^^^^

self-handover-default.toml: 1 error

$ check self-transition.toml
exit 2
--- stdout
--- stderr
error: self-transition.toml:3:17: mode `plan` has transitionsTo naming itself: a plan approved in `plan` must hand over to another mode
3 | transitionsTo = "plan"
  |                 ^^^^^^

self-transition.toml: 1 error

$ check subagent-unknown-tool.toml
exit 2
--- stdout
--- stderr
error: subagent-unknown-tool.toml:9:32: subagent type `explore` lists unknown tool `rm_rf` in availableTools
9 | availableTools = ["read_file", "rm_rf"]
  |                                ^^^^^^^

subagent-unknown-tool.toml: 1 error

$ check target-without-submit-plan.toml
exit 2
--- stdout
--- stderr
error: target-without-submit-plan.toml:5:18: mode `plan` sets transitionsTo but its availableTools leaves out `submit_plan`, so a plan could never be submitted in it: add `submit_plan`
5 | availableTools = ["read_file"]
  |                  ^^^^^^^^^^^^^

warning: target-without-submit-plan.toml:5:19: planning mode `plan` offers no tool that can write a plan (its availableTools has none of the plan-writing tools, such as `write_plan`): a model there cannot author a plan to submit
5 | availableTools = ["read_file"]
  |                   ^^^^^^^^^^^

target-without-submit-plan.toml: 1 error

$ check targets-list-duplicate.toml
exit 2
--- stdout
--- stderr
error: targets-list-duplicate.toml:3:41: mode `plan` lists `build` twice in transitionsTo: name each mode once
3 | transitionsTo = ["build", "build-auto", "build"]
  |                                         ^^^^^^^

targets-list-duplicate.toml: 1 error

$ check targets-list-self.toml
exit 2
--- stdout
--- stderr
error: targets-list-self.toml:3:27: mode `plan` has transitionsTo naming itself: a plan approved in `plan` must hand over to another mode
3 | transitionsTo = ["build", "plan"]
  |                           ^^^^^^

targets-list-self.toml: 1 error

$ check targets-list-unknown.toml
exit 2
--- stdout
--- stderr
error: targets-list-unknown.toml:5:3: mode `plan` has transitionsTo `biuld`, which names no mode: did you mean `build`?
5 |   "biuld",
  |   ^^^^^^^

targets-list-unknown.toml: 1 error

$ check two-defaults.toml
exit 2
--- stdout
--- stderr
error: two-defaults.toml:8:11: mode `build` is marked default, but mode `plan` already is: only one mode may set `default = true`
8 | default = true
  |           ^^^^

two-defaults.toml: 1 error

$ check unknown-default-id.toml
exit 2
--- stdout
--- stderr
error: unknown-default-id.toml:1:17: defaultModeId `code` names no mode (ids are case-sensitive; known: plan, build)
1 | defaultModeId = "code"
  |                 ^^^^^^

unknown-default-id.toml: 1 error

$ check unknown-field.toml
exit 2
--- stdout
--- stderr
error: unknown-field.toml:3:1: unknown field `transitionTo` in mode `plan`: did you mean `transitionsTo`?
3 | transitionTo = "build"
  | ^^^^^^^^^^^^

unknown-field.toml: 1 error

$ check unknown-target.toml
exit 2
--- stdout
--- stderr
error: unknown-target.toml:3:17: mode `plan` has transitionsTo `biuld`, which names no mode: did you mean `build`?
3 | transitionsTo = "biuld"
  |                 ^^^^^^^

unknown-target.toml: 1 error

$ check unknown-tool.toml
exit 2
--- stdout
--- stderr
warning: unknown-tool.toml:4:19: planning mode `plan` offers no tool that can write a plan (its availableTools has none of the plan-writing tools, such as `write_plan`): a model there cannot author a plan to submit
4 | availableTools = ["read_file", "submit_plna"]
  |                   ^^^^^^^^^^^

error: unknown-tool.toml:4:32: mode `plan` lists unknown tool `submit_plna` in availableTools: did you mean `submit_plan`?
4 | availableTools = ["read_file", "submit_plna"]
  |                                ^^^^^^^^^^^^^

unknown-tool.toml: 1 error

$ check wrong-type.toml
exit 2
--- stdout
--- stderr
error: wrong-type.toml:4:17: invalid type: integer `3`, expected a mode id or a list of mode ids
4 | transitionsTo = 3
  |                 ^

wrong-type.toml: 1 error


"#]],
        );
    }

    #[test]
    fn pending_and_decide_messages() {
        let ws = Workspace::new();
        let (spec, session) = detached(&ws);
        let sha256 = pending_json(&spec)[0]["sha256"]
            .as_str()
            .expect("sha256")
            .to_owned();
        let workspace = ws.path().display().to_string();
        let redact = [
            (sha256.as_str(), "[SHA256]"),
            (&sha256[..12], "[SHA12]"),
            (session.as_str(), "[SESSION]"),
            (&session[..6], "[SESSION6]"),
            (workspace.as_str(), "[WS]"),
        ];
        let pending = cli(&["pending", "--store", &spec], None);
        same(
            shown(&pending, &redact),
            str![[r#"
exit 0
--- stdout
[SESSION]	run_1	decision_1	plan -> build	[SHA12]	Add dark mode	workspace [WS]
--- stderr

"#]],
        );
        let stale = decide(
            &ws,
            &spec,
            &session,
            &["--approve", "--sha256", &"0".repeat(64)],
            None,
        );
        same(
            shown(&stale, &redact),
            str![[r#"
exit 5
--- stdout
--- stderr
error: the pending plan has sha256 [SHA256], not 0000000000000000000000000000000000000000000000000000000000000000: it is not the plan you meant; nothing was decided

"#]],
        );
        let short = decide(&ws, &spec, &session[..6], &["--approve"], None);
        same(
            shown(&short, &redact),
            str![[r#"
exit 2
--- stdout
--- stderr
error: `[SESSION6]` is too short for a session id prefix: give at least 8 characters, or the whole id

"#]],
        );
        let approved = decide(
            &ws,
            &spec,
            &session[..8],
            &["--approve", "--sha256", &sha256[..12]],
            None,
        );
        same(
            shown(&approved, &redact),
            str![[r#"
exit 0
--- stdout
[run_1] resumed in mode plan
tool submit_plan ok: Plan approved. Proceed with implementation following the approved plan.
  Mode changed: you are now in the Build mode (`build`), previously `plan` (your plan was approved). Follow this mode's instructions from now on. Your tools are now: read_file, list_files, write_file, write_plan, ask_user, task_write, task_update, task_complete, task_check.
  The approved plan follows, exactly as submitted from `.agent/plans/add-dark-mode.md` (sha256 [SHA256]) and shown to the user. Carry out this text; do not re-read the plan file, which may have changed since. It ends at the line `----- end of approved plan [SHA256] -----`.
  ----- approved plan -----
  (the approved plan, 6 lines, as shown above; `--json` has them)
  ----- end of approved plan [SHA256] -----
  The plan's 3 numbered steps are now your task list, all pending (ids `step_1` to `step_3`). Mark each in_progress with task_update before you start it, and task_complete when it is done.
mode changed: plan -> build (plan_approved)
tasks (0/3 completed):
  [ ] Read the code this change touches. (step_1)
  [ ] Make the change in small steps. (step_2)
  [ ] Add tests for it and run the whole suite. (step_3)
model: Now in mode `build`: implementing the approved plan for "Add dark mode".
plan report: .agent/plans/add-dark-mode.md (decision_1), run run_1 completed in build
  steps approved: 1, 2, 3
  steps done: none
  steps not done: step_1, step_2, step_3
  files: the plan declares none (no `## Files` section)
  plan file: unchanged since approval
[run_1] ended: completed
mode: build
--- stderr
approving the plan (plan file .agent/plans/add-dark-mode.md, sha256 [SHA12]...):

# Add dark mode

## Steps
1. Read the code this change touches.
2. Make the change in small steps.
3. Add tests for it and run the whole suite.


"#]],
        );
        let again = decide(&ws, &spec, &session, &["--approve"], None);
        same(
            shown(&again, &redact),
            str![[r#"
exit 5
--- stdout
--- stderr
error: session [SESSION] has nothing pending (already decided?)

"#]],
        );
    }
}

/// The binary diverges (exit 7) on a real divergence: through `verify`'s test seam (a debug
/// build reads `AGENT_CONTROLLER_VERIFY_PLANT`), its store keeps only each session's first
/// save, so a restored session has lost what happened. The report names the restart and how
/// to replay it; the summary still closes it.
#[test]
fn verify_exits_7_when_the_controller_diverges() {
    let dir = tempfile::tempdir().expect("a directory");
    let mut cmd = bin();
    cmd.current_dir(dir.path())
        .env("AGENT_CONTROLLER_VERIFY_PLANT", "forgets-saves")
        .args(["verify", SHIPPED, "--cases", "4", "--seed", "1"]);
    let out = exploring_in_time(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stdout}\n{stderr}");
    assert!(stderr.contains("a planted bug (ForgetsSaves)"), "{stderr}");
    assert!(stdout.contains("checked before a divergence"), "{stdout}");
    assert!(stdout.contains("Restart"), "{stdout}");
    assert!(stdout.contains("\nchecked: "), "{stdout}");
    // Without the seam the same config passes.
    let mut cmd = bin();
    cmd.current_dir(dir.path())
        .args(["verify", SHIPPED, "--cases", "4", "--seed", "1"]);
    let out = exploring_in_time(cmd);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A config with deadlines: `verify` checks them (the expiry of plans and of waiting tool
/// calls, time passing, restarts around it) and says so in its summary.
#[test]
fn verify_checks_deadlines_and_says_so() {
    let toml = std::fs::read_to_string(fixture("configs/deadlines.toml")).expect("fixture");
    let out = verify(&toml, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(DONE), "{stdout}{}", stderr(&out));
    let checked = stdout
        .lines()
        .find(|l| l.starts_with("checked: "))
        .unwrap_or_else(|| panic!("no `checked:` line: {stdout}"));
    assert!(
        checked.contains("deadlines (the approvalTimeout of `plan`, `build`: time passing"),
        "{checked}"
    );
    let not = stdout
        .lines()
        .find(|l| l.starts_with("not checked: "))
        .unwrap_or_default();
    assert!(!not.contains("deadlines"), "{not}");
}

/// A config whose modes offer `ask_user`: `verify` drives questions (answered, declined,
/// refused answers, aborted, expired, beside waiting tool calls, before a plan) and names the
/// question transitions it covered.
#[test]
fn verify_checks_questions_and_names_their_transitions() {
    let toml = std::fs::read_to_string(fixture("configs/questions.toml")).expect("fixture");
    let out = verify(&toml, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(DONE), "{stdout}{}", stderr(&out));
    let checked = stdout
        .lines()
        .find(|l| l.starts_with("checked: "))
        .unwrap_or_else(|| panic!("no `checked:` line: {stdout}"));
    assert!(
        checked.contains(
            "questions (ask_user in `plan`, `build`: answer_question, decline_question, \
             abort_question, expire_question, answer_then_approve, answer_beside_tool;"
        ),
        "{checked}"
    );
    let not = stdout
        .lines()
        .find(|l| l.starts_with("not checked: "))
        .unwrap_or_default();
    assert!(!not.contains("questions"), "{not}");
}

/// A config with subagent types: `verify` drives `subagent` calls (children that answer,
/// refused calls, a child's wait approved, rejected, answered, aborted and beside the parent's
/// own) and names the subagent transitions it covered.
#[test]
fn verify_checks_subagents_and_names_their_transitions() {
    let toml = std::fs::read_to_string(fixture("configs/subagents.toml")).expect("fixture");
    let out = verify(&toml, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(DONE), "{stdout}{}", stderr(&out));
    let checked = stdout
        .lines()
        .find(|l| l.starts_with("checked: "))
        .unwrap_or_else(|| panic!("no `checked:` line: {stdout}"));
    for cause in [
        "subagent_answers",
        "subagent_refused",
        "approve_child_tool",
        "reject_child_tool",
        "abort_child",
        "answer_child_question",
        "child_beside_tool",
    ] {
        assert!(checked.contains(cause), "{cause}: {checked}");
    }
    assert!(
        checked.contains(", subagents (subagent in `plan`, `build`: "),
        "{checked}"
    );
    let not = stdout
        .lines()
        .find(|l| l.starts_with("not checked: "))
        .unwrap_or_default();
    assert!(!not.contains("subagents"), "{not}");
}

/// The help says what an always-allow approves now: the call shown only; the reply's other
/// calls are each asked about, later replies' calls of the tool run unasked (review finding:
/// the help still said the other calls of the reply ran, or were approved, with it).
#[test]
fn help_says_an_always_allow_approves_the_call_shown_only() {
    for command in [["run", "--help"], ["decide", "--help"]] {
        let out = bin().args(command).output().expect("run");
        let help = String::from_utf8_lossy(&out.stdout);
        let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(!flat.contains("run with it"), "{command:?}: {help}");
        assert!(!flat.contains("approved with it"), "{command:?}: {help}");
        assert!(
            flat.contains("the other calls waiting in the reply are each shown and asked about"),
            "{command:?}: {help}"
        );
    }
}
