//! Faults a trial as a new user and as a hostile model found at the terminal prompt and in the
//! CLI (trial findings M4, M5, L1, L2, L8, L15): each is driven through the binary.
#![cfg(feature = "cli")]

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use common::cli::{DONE, INVALID, SHIPPED};
use common::{Workspace, json_lines, stderr};
use serde_json::Value;

/// `run --config SHIPPED --workspace WS ARGS` with the bytes of `input` on stdin.
fn run_bytes(ws: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut cmd = common::cli::command(ws, &["run", "--config", SHIPPED, "--workspace"]);
    cmd.arg(ws)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    child.wait_with_output().expect("wait")
}

/// The results `submit_plan` gave in a `--json` run's events.
fn plan_results(out: &Output) -> Vec<String> {
    json_lines(out)
        .iter()
        .filter(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
        .map(|e| e["result"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Whether the run's events switched from `plan` to `build`.
fn approved(out: &Output) -> bool {
    json_lines(out)
        .iter()
        .any(|e: &Value| e["type"] == "mode_changed" && e["modeId"] == "build")
}

#[test]
fn an_escape_sequence_at_the_plan_prompt_is_not_feedback_and_asks_again() {
    // M5: an arrow key then Enter, and other control bytes, were sent as rejection feedback.
    for typed in [
        &b"\x1b[A\n"[..],
        b"\x1b[1;5D\r\n",
        b"abc\x08\x08x\n",
        b"\x00\n",
    ] {
        let ws = Workspace::new();
        let mut input = typed.to_vec();
        input.extend_from_slice(b"y\n");
        let out = run_bytes(
            ws.path(),
            &["--mode", "plan", "--json", "Add dark mode"],
            &input,
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(DONE), "{typed:?}: {err}");
        assert!(approved(&out), "{typed:?}: {err}");
        assert_eq!(
            plan_results(&out).len(),
            1,
            "{typed:?} is no feedback: {err}"
        );
        assert!(err.contains("holds control characters"), "{typed:?}: {err}");
        assert_eq!(
            err.matches("Approve this plan").count(),
            2,
            "asked again: {err}"
        );
    }
}

#[test]
fn a_line_that_is_not_utf8_is_not_end_of_input_and_asks_again() {
    // L8: `\xff\xfe` was reported as "end of input: the plan is not approved".
    let ws = Workspace::new();
    let out = run_bytes(
        ws.path(),
        &["--mode", "plan", "--json", "Add dark mode"],
        b"\xff\xfe\ny\n",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{err}");
    assert!(approved(&out), "{err}");
    assert!(err.contains("is not UTF-8 text"), "{err}");
    assert!(!err.contains("end of input"), "{err}");
}

#[test]
fn a_model_typed_at_the_prompt_is_checked_when_typed_and_nothing_is_lost() {
    // M4: `m bogus` was taken, and the `y` after it ended the run with exit 2, the plan lost.
    for bad in ["bogus", "openai/", "llama/7b"] {
        let ws = Workspace::new();
        let out = run_bytes(
            ws.path(),
            &["--mode", "plan", "--json", "Model test"],
            format!("m {bad}\ny\n").as_bytes(),
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(DONE), "{bad}: {err}");
        assert!(approved(&out), "{bad}: {err}");
        assert!(
            err.contains(&format!("model {bad} cannot be used")),
            "{bad}: {err}"
        );
        assert!(
            !err.contains("once you approve"),
            "{bad} was not kept: {err}"
        );
        assert_eq!(
            err.matches("Approve this plan").count(),
            2,
            "asked again: {err}"
        );
    }
}

#[test]
fn a_model_for_next_this_build_cannot_open_is_a_usage_error_before_anything_runs() {
    // M4: `--model-for-next bogus` was checked only at the approval, after the planning run.
    let ws = Workspace::new();
    let out = run_bytes(
        ws.path(),
        &[
            "--model-for-next",
            "bogus",
            "--mode",
            "plan",
            "--approve",
            "x",
        ],
        b"",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(INVALID), "{err}");
    assert!(err.contains("--model-for-next"), "{err}");
    assert!(json_lines(&out).is_empty(), "nothing ran: {err}");
    let plans = ws.path().join(".agent/plans");
    let written = std::fs::read_dir(&plans).map_or(0, Iterator::count);
    assert_eq!(written, 0, "no plan was written");
}

#[test]
fn a_plan_of_invisible_characters_is_blank_and_an_untitled_plan_is_listed_visibly() {
    // L1: a plan of zero-width spaces was submitted with an empty title, and `pending` printed
    // plans without a `# ` line with an empty title field a reviewer cannot tell apart.
    let ws = Workspace::new();
    let blank = ws.plan("blank.md", "\u{200b}\u{200b}\n\u{3164}\n");
    let out = run_bytes(
        ws.path(),
        &["--mode", "plan", "--plan", &blank, "--approve", "x"],
        b"",
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(INVALID), "{err}");
    assert!(err.contains("blank") || err.contains("empty"), "{err}");

    for (name, text) in [
        ("a.md", "no title here\n"),
        ("b.md", "#\nbody\n"),
        ("c.md", "## sub only\n"),
    ] {
        let ws = Workspace::new();
        let plan = ws.plan(name, text);
        let store = ws.path().join("st").display().to_string();
        let out = run_bytes(
            ws.path(),
            &[
                "--mode", "plan", "--plan", &plan, "--store", &store, "--detach", "x",
            ],
            b"",
        );
        assert_eq!(
            out.status.code(),
            Some(common::cli::PENDING),
            "{name}: {}",
            stderr(&out)
        );
        let listed = common::cli::bin(ws.path(), &["pending", "--store", &store], "");
        let shown = common::cli::stdout(&listed);
        assert!(shown.contains("\t(untitled plan)"), "{name}: {shown}");
    }
}

/// L15: `continue` and `switch` take a prefix of the id of a session whose run was interrupted,
/// as cli.md promises ("as for `decide`"); they said "unknown session" (exit 5).
#[cfg(feature = "openai")]
#[test]
fn continue_and_switch_take_a_session_id_prefix_of_an_interrupted_run() {
    use common::openai_server::{Reply, ScriptedServer, text};
    use std::time::Duration;
    use wiremock::ResponseTemplate;

    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let out = run_bytes(
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
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(common::cli::PENDING),
        "{}",
        stderr(&out)
    );
    let session = json_lines(&out)[0]["sessionId"]
        .as_str()
        .expect("session id")
        .to_owned();
    let server = ScriptedServer::start_blocking(vec![
        Reply::Raw(ResponseTemplate::new(500).set_delay(Duration::from_secs(60))),
        text("Built it."),
    ]);
    let workspace = ws.path().to_str().expect("utf-8");
    let model_args = ["--model", "openai/test-model", "--config", SHIPPED];
    let mut decider = common::cli::command(
        ws.path(),
        &["decide", "--store", &spec, &session, "--approve", "--json"],
    );
    decider
        .args(["--workspace", workspace, "--lease", "600"])
        .args(model_args)
        .envs(server.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut decider = decider.spawn().expect("decide");
    server.wait_served(1);
    decider.kill().expect("SIGKILL");
    decider.wait().expect("reap");
    lease_ended_long_ago(&spec, &session);

    let prefix = &session[..8];
    // `switch` by the prefix resolves it (to a mode that does not exist: exit 2, nothing changed).
    let switched = common::cli::bin(
        ws.path(),
        &[
            "switch",
            "--store",
            &spec,
            prefix,
            "no-such-mode",
            "--config",
            SHIPPED,
        ],
        "",
    );
    let err = stderr(&switched);
    assert!(!err.contains("unknown session"), "{err}");
    assert_eq!(switched.status.code(), Some(INVALID), "{err}");
    assert!(err.contains("no-such-mode"), "{err}");

    let mut carry_on = common::cli::command(
        ws.path(),
        &[
            "continue",
            "--store",
            &spec,
            prefix,
            "--json",
            "--workspace",
            workspace,
        ],
    );
    carry_on
        .args(model_args)
        .envs(server.env())
        .stdin(Stdio::null());
    let out = carry_on.output().expect("continue");
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert_eq!(server.served(), 2, "the model's next step, once");
}

/// Ends the lease of session `session_id`'s running run as a lease of a real clock ends: at a
/// time in the past that is after the epoch (1 ms), so a listing at time 0 still sees it run.
#[cfg(feature = "openai")]
fn lease_ended_long_ago(spec: &str, session_id: &str) {
    common::wait::end_lease_at(spec, session_id, 1);
}

#[test]
fn the_hand_over_and_a_rejection_are_shown_as_lines_not_one_escaped_line() {
    // D1: the hand-over after `y` was one line of about 900 characters with `\u{a}` for each
    // line feed, where cli.md showed its first sentence.
    let ws = Workspace::new();
    let out = run_bytes(
        ws.path(),
        &["--mode", "plan", "Add dark mode"],
        b"add a rollback step\ny\n",
    );
    let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(DONE), "{shown}");
    assert!(!shown.contains("\\u{a}"), "{shown}");
    assert!(
        shown.contains("tool submit_plan ok: Plan rejected. Feedback from the user: add a rollback step\n  Revise the plan"),
        "{shown}"
    );
    assert!(
        shown.contains("tool submit_plan ok: Plan approved. Proceed with implementation following the approved plan.\n  Mode changed: you are now in the Build mode"),
        "{shown}"
    );
    assert!(
        shown.contains("\n  ----- approved plan -----\n  (the approved plan, 9 lines, as shown above; `--json` has them)\n  ----- end of approved plan "),
        "{shown}"
    );
}

#[test]
fn decide_help_covers_questions() {
    // D4: `decide --help` named plans and tool calls only, and `--sha256` a plan's sha256 and
    // `argsSha256`, not a question's `payloadSha256`.
    let ws = Workspace::new();
    let out = common::cli::bin(ws.path(), &["decide", "--help"], "");
    let help = common::cli::stdout(&out);
    assert_eq!(out.status.code(), Some(DONE), "{help}");
    for said in [
        "(`ask_user`)",
        "payloadSha256",
        "1,3",
        "a question without options: the answer",
        "control characters",
    ] {
        assert!(help.contains(said), "{said:?}: {help}");
    }
}

/// A config whose `build` mode offers `ask_user`, as the asking guide's try-it section has it.
const ASKING: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "list_files", "write_file", "ask_user"]
"#;

#[test]
fn the_built_in_scripted_model_asks_when_the_prompt_says_ask_me() {
    // D2: no way to try `ask_user` from the CLI without a provider; the built-in model now asks
    // when the prompt starts with "ask me", at the prompt and through `decide --answer`.
    let ws = Workspace::new();
    std::fs::write(ws.path().join("modes.toml"), ASKING).expect("config");
    let ask = |extra: &[&str], input: &str| {
        let mut args = vec!["run", "--config", "modes.toml"];
        args.extend_from_slice(extra);
        args.push("Ask me which database to use: Postgres, SQLite");
        let mut cmd = common::cli::command(ws.path(), &args);
        cmd.env("NO_COLOR", "1");
        common::cli::output(cmd, input)
    };
    let out = ask(&[], "2\n");
    let shown = format!("{}{}", common::cli::stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(DONE), "{shown}");
    assert!(
        shown.contains("│ Which database to use?\n│   1. Postgres\n│   2. SQLite\n"),
        "{shown}"
    );
    assert!(
        shown.contains("model: Noted. The user chose: SQLite"),
        "{shown}"
    );

    let store = ws.path().join("st").display().to_string();
    let out = ask(&["--store", &store, "--json"], "");
    assert_eq!(
        out.status.code(),
        Some(common::cli::PENDING),
        "{}",
        stderr(&out)
    );
    let session = json_lines(&out)[0]["sessionId"]
        .as_str()
        .expect("session")
        .to_owned();
    let out = common::cli::bin(
        ws.path(),
        &[
            "decide",
            "--store",
            &store,
            &session,
            "--config",
            "modes.toml",
            "--answer",
            "Postgres",
        ],
        "",
    );
    let shown = common::cli::stdout(&out);
    assert_eq!(out.status.code(), Some(DONE), "{shown}{}", stderr(&out));
    assert!(
        shown.contains("model: Noted. The user chose: Postgres"),
        "{shown}"
    );
}
