//! Choosing the model at approval from the CLI (issue 23, item 6): `--model-for-next ID` on
//! `run` and `decide`, and `m MODEL` at the prompt. The requests of the mode the plan hands over
//! to go to the chosen model (checked on a scripted OpenAI-compatible server); the audit record
//! keeps it; a spec the CLI cannot open is refused (exit 2) and changes nothing.
#![cfg(all(feature = "cli", feature = "openai"))]

use std::path::Path;
use std::process::Output;

use crate::common::cli::{self, SHIPPED, text as text_of};
use crate::common::openai_server::{ScriptedServer, calls, submit, text};

const PLAN: &str = "# Add dark mode\n\n1. Add a theme setting.\n";

/// The binary in `ws` with `args` and `input` on stdin, pointed at `server` when given.
fn bin(ws: &Path, server: Option<&ScriptedServer>, args: &[&str], input: &str) -> Output {
    let mut command = cli::command(ws, args);
    if let Some(server) = server {
        command.envs(server.env());
    }
    cli::output(command, input)
}

/// A workspace with the plan file the scripted server submits.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(ws.path().join(".agent/plans")).expect("mkdir");
    std::fs::write(ws.path().join(".agent/plans/p.md"), PLAN).expect("write");
    ws
}

fn models(server: &ScriptedServer) -> Vec<String> {
    server
        .bodies_blocking()
        .iter()
        .map(|b| b["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The session's stored record, from the file store `st` (the one session of the test).
fn record(ws: &Path) -> serde_json::Value {
    let (_, text) = cli::records(ws).into_iter().next().expect("a record");
    serde_json::from_str(&text).expect("json")
}

#[test]
fn run_approve_with_model_for_next_sends_the_next_mode_to_that_model() {
    let ws = workspace();
    let server = ScriptedServer::start_blocking(vec![
        calls([submit("c1", ".agent/plans/p.md")]),
        text("built with the cheap one"),
    ]);
    let out = bin(
        ws.path(),
        Some(&server),
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            "st",
            "--mode",
            "plan",
            "--model",
            "openai/planner",
            "--approve",
            "--model-for-next",
            "openai/cheap",
            "Add dark mode",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert_eq!(
        models(&server),
        ["planner", "cheap"],
        "the build mode's call went to cheap"
    );
    let stored = record(ws.path());
    assert_eq!(stored["history"][0]["model"], "openai/cheap", "{stored}");
    assert_eq!(
        stored["modelId"], "openai/cheap",
        "it runs the build mode on: {stored}"
    );
}

#[test]
fn m_at_the_prompt_chooses_the_model_and_a_bad_spec_changes_nothing() {
    let ws = workspace();
    let server = ScriptedServer::start_blocking(vec![
        calls([submit("c1", ".agent/plans/p.md")]),
        text("built"),
    ]);
    let run = bin(
        ws.path(),
        Some(&server),
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            "st",
            "--mode",
            "plan",
            "--model",
            "openai/planner",
            "Add dark mode",
        ],
        "",
    );
    assert_eq!(run.status.code(), Some(4), "pending: {}", text_of(&run));
    let session = record(ws.path())["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    // A provider the CLI does not know: refused before anything changes, with a hint at the
    // provider meant when it is near one.
    for (next, said) in [
        (
            "llama/7b",
            "unknown model provider `llama`: use `scripted`, `openai/MODEL` or `anthropic/MODEL`",
        ),
        (
            "OpenAI/cheap",
            "unknown model provider `OpenAI`: did you mean `openai`? (provider names are case-sensitive) use `scripted`",
        ),
        (
            "antropic/cheap",
            "unknown model provider `antropic`: did you mean `anthropic`? use `scripted`",
        ),
    ] {
        let refused = bin(
            ws.path(),
            Some(&server),
            &[
                "decide",
                "--store",
                "st",
                "--config",
                SHIPPED,
                &session,
                "--model",
                "openai/planner",
                "--approve",
                "--model-for-next",
                next,
            ],
            "",
        );
        assert_eq!(refused.status.code(), Some(2), "{}", text_of(&refused));
        assert!(text_of(&refused).contains(said), "{}", text_of(&refused));
    }
    assert!(
        record(ws.path())["history"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
    assert_eq!(models(&server), ["planner"], "no model call");
    let out = bin(
        ws.path(),
        Some(&server),
        &[
            "decide",
            "--store",
            "st",
            "--config",
            SHIPPED,
            &session,
            "--model",
            "openai/planner",
        ],
        "m openai/cheap\ny\n",
    );
    let shown = text_of(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("[m MODEL] approve with another model"),
        "{shown}"
    );
    assert!(
        shown.contains("the next mode runs with model openai/cheap once you approve"),
        "{shown}"
    );
    assert_eq!(models(&server), ["planner", "cheap"]);
    assert_eq!(record(ws.path())["history"][0]["model"], "openai/cheap");
}

#[test]
fn model_for_next_goes_with_an_approval() {
    let ws = workspace();
    let out = bin(
        ws.path(),
        None,
        &[
            "run",
            "--config",
            SHIPPED,
            "--mode",
            "plan",
            "--reject",
            "--model-for-next",
            "scripted",
            "Add dark mode",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{}", text_of(&out));
    // With the scripted model: the approval records it, and the build mode runs.
    let out = bin(
        ws.path(),
        None,
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            "st",
            "--mode",
            "plan",
            "--approve",
            "--model-for-next",
            "scripted",
            "Add dark mode",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert!(
        text_of(&out).contains("mode changed: plan -> build (plan_approved)"),
        "{}",
        text_of(&out)
    );
    assert_eq!(record(ws.path())["history"][0]["model"], "scripted");
}

/// `run` at the prompt with `--model-for-next ID`, answering `input`: the models the scripted
/// server was asked for, and the stored approval's model.
fn prompt_with_model_for_next(input: &str) -> (Vec<String>, serde_json::Value, String) {
    let ws = workspace();
    let server = ScriptedServer::start_blocking(vec![
        calls([submit("c1", ".agent/plans/p.md")]),
        text("built"),
    ]);
    let out = bin(
        ws.path(),
        Some(&server),
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            "st",
            "--mode",
            "plan",
            "--model",
            "openai/planner",
            "--model-for-next",
            "openai/cheap",
            "Add dark mode",
        ],
        input,
    );
    let shown = text_of(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let model = record(ws.path())["history"][0]["model"].clone();
    (models(&server), model, shown)
}

#[test]
fn y_at_the_prompt_approves_with_the_model_for_next() {
    let (models, model, shown) = prompt_with_model_for_next("y\n");
    assert_eq!(models, ["planner", "cheap"], "{shown}");
    assert_eq!(model, "openai/cheap", "{shown}");
}

#[test]
fn m_alone_at_the_prompt_goes_back_to_the_sessions_model_despite_model_for_next() {
    let (models, model, shown) = prompt_with_model_for_next("m\ny\n");
    assert!(
        shown.contains("the next mode runs with the session's model"),
        "{shown}"
    );
    // What the prompt said is what ran: the flag does not come back behind it.
    assert_eq!(models, ["planner", "planner"], "{shown}");
    assert!(model.is_null(), "no model chosen: {model}");
}

/// Trial F2: the model `run --model` names is the session's: `decide` and `continue` without
/// `--model` run the approved mode with it (before, with the built-in scripted model), one
/// that names `--model` runs with that one, and the hint `run` prints names it.
#[test]
fn decide_without_model_runs_with_the_model_the_session_ran_with() {
    let ws = workspace();
    let server = ScriptedServer::start_blocking(vec![
        calls([submit("c1", ".agent/plans/p.md")]),
        text("built by the planner's model"),
    ]);
    let run = bin(
        ws.path(),
        Some(&server),
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            "st",
            "--mode",
            "plan",
            "--model",
            "openai/planner",
            "Add dark mode",
        ],
        "",
    );
    let said = text_of(&run);
    assert_eq!(run.status.code(), Some(4), "pending: {said}");
    assert!(said.contains("--model openai/planner"), "the hint: {said}");
    let stored = record(ws.path());
    assert_eq!(stored["metadata"]["model"], "openai/planner", "{stored}");
    let session = stored["sessionId"].as_str().expect("id").to_owned();
    let out = bin(
        ws.path(),
        Some(&server),
        &["decide", "--store", "st", &session, "--approve"],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert_eq!(models(&server), ["planner", "planner"], "{}", text_of(&out));
}

#[test]
fn an_explicit_model_wins_over_the_recorded_one() {
    let ws = workspace();
    let server = ScriptedServer::start_blocking(vec![
        calls([submit("c1", ".agent/plans/p.md")]),
        text("built by another"),
    ]);
    let run = bin(
        ws.path(),
        Some(&server),
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            "st",
            "--mode",
            "plan",
            "--model",
            "openai/planner",
            "Add dark mode",
        ],
        "",
    );
    assert_eq!(run.status.code(), Some(4), "{}", text_of(&run));
    let session = record(ws.path())["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    let out = bin(
        ws.path(),
        Some(&server),
        &[
            "decide",
            "--store",
            "st",
            &session,
            "--approve",
            "--model",
            "openai/other",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text_of(&out));
    assert_eq!(models(&server), ["planner", "other"]);
}
