//! Comments anchored to plan lines from the CLI (issue 23, item 5): `decide --reject --comment
//! LINE:TEXT` (repeatable) and `c LINE TEXT` at the prompt. The model receives each comment with
//! the line it quotes; `pending` and the next revision's prompt show them again; a line outside
//! the plan is refused (exit 2) and changes nothing.
#![cfg(feature = "cli")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");

/// The scripted plan of "Add dark mode", as the prompt numbers it with `c`.
const LINE_4: &str = "1. Read the code this change touches.";
const LINE_6: &str = "3. Add tests for it and run the whole suite.";

fn bin(ws: &Path, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-controller"))
        .current_dir(ws)
        .args(args)
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

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A stored session with the scripted plan pending; its id.
fn pending_plan(ws: &Path) -> String {
    let out = bin(
        ws,
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            "st",
            "--mode",
            "plan",
            "Add dark mode",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let listed = bin(ws, &["pending", "--store", "st", "--json"], "");
    let line = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .next()
        .map(str::to_owned);
    let first: serde_json::Value = serde_json::from_str(&line.expect("pending")).expect("json");
    first["sessionId"].as_str().expect("sessionId").to_owned()
}

/// The session's history of decisions, from the file store.
fn history(ws: &Path, session: &str) -> Vec<serde_json::Value> {
    for suffix in ["pending.json", "json", "running.json"] {
        let path = ws.join("st").join(format!("{session}.{suffix}"));
        if let Ok(text) = std::fs::read_to_string(path) {
            let record: serde_json::Value = serde_json::from_str(&text).expect("json");
            return record["history"].as_array().cloned().unwrap_or_default();
        }
    }
    panic!("no record of {session}");
}

#[test]
fn decide_reject_with_comments_sends_each_with_its_line_and_shows_them_again() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let out = bin(
        ws.path(),
        &[
            "decide",
            "--store",
            "st",
            "--config",
            SHIPPED,
            &session,
            "--reject",
            "--comment",
            "4:staging first",
            "--comment",
            "6: and the docs ",
        ],
        "",
    );
    let shown = text(&out);
    // The revision waits again (exit 4): comments ask for a revision as feedback does.
    assert_eq!(out.status.code(), Some(4), "{shown}");
    assert!(
        shown.contains(&format!("- line 4 \"{LINE_4}\": staging first")),
        "the model got the line: {shown}"
    );
    let decided = history(ws.path(), &session);
    let comments = &decided[0]["comments"];
    assert_eq!(
        comments,
        &serde_json::json!([
            { "line": 4, "text": "staging first", "quote": LINE_4 },
            { "line": 6, "text": "and the docs", "quote": LINE_6 },
        ]),
        "the audit record keeps them"
    );
    assert!(decided[0]["sha256"].as_str().is_some_and(|s| s.len() == 64));
    let listed = text(&bin(ws.path(), &["pending", "--store", "st"], ""));
    assert!(
        listed.contains(&format!(
            "comments on the last revision: line 4 \"{LINE_4}\": staging first; line 6"
        )),
        "{listed}"
    );
    let json = text(&bin(ws.path(), &["pending", "--store", "st", "--json"], ""));
    assert!(json.contains("\"comments\":[{\"line\":4"), "{json}");
    // The next revision's prompt shows them beside its diff.
    let out = bin(
        ws.path(),
        &["decide", "--store", "st", "--config", SHIPPED, &session],
        "n\n",
    );
    let prompt = text(&out);
    assert!(
        prompt.contains(&format!(
            "your comments on revision 1:\n  line 4: {LINE_4}\n    staging first\n"
        )),
        "{prompt}"
    );
}

#[test]
fn a_comment_outside_the_plan_or_without_text_is_refused_and_changes_nothing() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let decide = |extra: &[&str]| {
        let mut args = vec!["decide", "--store", "st", "--config", SHIPPED, &session];
        args.extend_from_slice(extra);
        bin(ws.path(), &args, "")
    };
    for (extra, says) in [
        (
            &["--reject", "--comment", "0:x"][..],
            "line 0 is not a line of the plan shown (lines 1 to 6)",
        ),
        (
            &["--reject", "--comment", "7:x"][..],
            "line 7 is not a line of the plan shown",
        ),
        (&["--reject", "--comment", "4:  "][..], "has no text"),
        (
            &["--reject", "--comment", "four:x"][..],
            "a comment is LINE:TEXT",
        ),
        (
            &["--approve", "--comment", "4:x"][..],
            "`comments` go with a rejection",
        ),
    ] {
        let out = decide(extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{extra:?}: {}", text(&out));
    }
    assert!(
        history(ws.path(), &session).is_empty(),
        "nothing was decided"
    );
    let listed = text(&bin(ws.path(), &["pending", "--store", "st"], ""));
    assert!(listed.contains("decision_1"), "{listed}");
}

#[test]
fn c_at_the_prompt_numbers_the_lines_and_n_rejects_with_the_comments() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let out = bin(
        ws.path(),
        &["decide", "--store", "st", "--config", SHIPPED, &session],
        "c\nc 7 past the end\nc 4 staging first\ny\nn\n",
    );
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(4), "the revision waits: {shown}");
    assert!(
        shown.contains("[c LINE TEXT] comment on a line (c numbers them)"),
        "{shown}"
    );
    assert!(shown.contains(&format!("   4  {LINE_4}\n")), "{shown}");
    assert!(
        shown.contains("line 7 is not a line of the plan (lines 1 to 6)"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("comment 1 on line 4 ({LINE_4}): staging first")),
        "{shown}"
    );
    assert!(
        shown.contains("comments go with a rejection"),
        "y asks again: {shown}"
    );
    // What the prompt numbered is what the library quotes.
    let decided = history(ws.path(), &session);
    assert_eq!(decided[0]["outcome"], "rejected");
    assert_eq!(
        decided[0]["comments"],
        serde_json::json!([{ "line": 4, "text": "staging first", "quote": LINE_4 }])
    );
}
