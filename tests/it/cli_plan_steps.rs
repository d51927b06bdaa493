//! Approving some of a plan's steps from the CLI (issue 40): `decide --approve --steps 1-3,5`
//! and `y 1,3` at the prompt. A list naming a step the plan lacks, or one that does not read,
//! is refused (exit 2; at the prompt, asked again) and the plan still waits. The shipped
//! scripted plan has three steps.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::Output;

use crate::common::cli::{self, INVALID, SHIPPED, STORE, pending_plan, text};

fn bin(ws: &Path, args: &[&str], input: &str) -> Output {
    cli::bin(ws, args, input)
}

/// The session's history of decisions, from the file store.
fn history(ws: &Path, session: &str) -> Vec<serde_json::Value> {
    for suffix in ["pending.json", "json", "running.json"] {
        let path = ws.join(STORE).join(format!("{session}.{suffix}"));
        if let Ok(text) = std::fs::read_to_string(path) {
            let record: serde_json::Value = serde_json::from_str(&text).expect("json");
            return record["history"].as_array().cloned().unwrap_or_default();
        }
    }
    panic!("no record of {session}");
}

fn decide(ws: &Path, session: &str, more: &[&str], input: &str) -> Output {
    let mut args = vec!["decide", "--store", STORE, "--config", SHIPPED, session];
    args.extend_from_slice(more);
    bin(ws, &args, input)
}

#[test]
fn decide_approve_steps_approves_those_and_refuses_steps_the_plan_lacks() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    for (list, says) in [
        ("1,7", "the plan has no step 7 (its steps: 1, 2, 3)"),
        ("2,2", "step 2 is named twice"),
        ("3-1", "backwards"),
        ("0", "step 0"),
        ("x", "not a step number"),
    ] {
        let out = decide(ws.path(), &session, &["--approve", "--steps", list], "");
        assert_eq!(out.status.code(), Some(INVALID), "{list}: {}", text(&out));
        assert!(text(&out).contains(says), "{list}: {}", text(&out));
    }
    let out = decide(ws.path(), &session, &["--reject", "--steps", "1"], "");
    assert_eq!(out.status.code(), Some(INVALID), "{}", text(&out));
    assert!(history(ws.path(), &session).is_empty(), "nothing decided");

    let out = decide(ws.path(), &session, &["--approve", "--steps", "1, 3"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let shown = text(&out);
    assert!(
        shown.contains("Approved steps: 1, 3; not approved: 2."),
        "{shown}"
    );
    let decided = history(ws.path(), &session);
    assert_eq!(decided[0]["steps"], serde_json::json!([1, 3]));
    assert_eq!(decided[0]["outcome"], "approved");
}

#[test]
fn y_and_steps_at_the_prompt_approves_those_steps() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let out = decide(ws.path(), &session, &[], "y 3-1\ny 1,9\ny 2-3\n");
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("[y 1-3,5] approve only those steps"),
        "the prompt says it: {shown}"
    );
    assert!(shown.contains("runs backwards"), "{shown}");
    assert!(
        shown.contains("the steps cannot be approved: the plan has no step 9"),
        "{shown}"
    );
    assert!(
        shown.contains("Approved steps: 2, 3; not approved: 1."),
        "{shown}"
    );
    let decided = history(ws.path(), &session);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["steps"], serde_json::json!([2, 3]));
}
