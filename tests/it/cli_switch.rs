//! `agent-controller switch --store S SESSION MODE` (issue 23, item 3): leaving planning without
//! approving, from the command line, over `Session::switch_mode`. The pending plan counts as not
//! approved and the model is told; an unknown mode changes nothing.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::Output;

use crate::common::cli::snapshots::{same, shown};
use crate::common::cli::{self, SHIPPED, STORE, pending_plan, text};

fn bin(ws: &Path, args: &[&str]) -> Output {
    cli::bin(ws, args, "")
}

/// The session's one record in the store: its file name and text.
fn record(ws: &Path, session: &str) -> String {
    let (name, text) = cli::record_of(ws, session);
    format!("{name}\n{text}")
}

#[test]
fn switch_leaves_planning_without_approving_and_the_model_is_told() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let out = bin(
        ws.path(),
        &[
            "switch",
            "--store",
            "st",
            "--config",
            SHIPPED,
            &session[..8],
            "build",
        ],
    );
    // The whole text: the cancelled plan, the switch, what counts as not approved.
    same(
        shown(&out, &[(&session, "[SESSION]")]),
        snapbox::str![[r#"
exit 0
--- stdout
[run_1] resumed in mode plan
submit_plan cancelled (mode_switch): not approved
[run_1] ended: aborted
mode changed: plan -> build (manual)
--- stderr
session [SESSION]: mode plan -> build (switched by hand)
  the plan decision_1 (Add dark mode) counts as not approved; the model is told when the session runs next

"#]],
    );
    // Nothing is pending any more, and the model is told why its plan went nowhere.
    let listed = bin(ws.path(), &["pending", "--store", STORE]);
    same(
        shown(&listed, &[]),
        snapbox::str![[r#"
exit 0
--- stdout
--- stderr
nothing pending: no plan, tool call or question waits

"#]],
    );
    let stored = record(ws.path(), &session);
    assert!(
        stored.contains("Plan not approved: the user switched mode by hand."),
        "{stored}"
    );
    // A decision after the switch finds nothing to decide.
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
    );
    same(
        shown(&late, &[(&session, "[SESSION]")]),
        snapbox::str![[r#"
exit 5
--- stdout
--- stderr
error: session [SESSION] has nothing pending (already decided?)

"#]],
    );
}

#[test]
fn switch_to_an_unknown_mode_or_the_same_mode_changes_nothing() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let before = record(ws.path(), &session);
    let out = bin(
        ws.path(),
        &[
            "switch", "--store", "st", "--config", SHIPPED, &session, "Build",
        ],
    );
    same(
        shown(&out, &[(&session, "[SESSION]")]),
        snapbox::str![[r#"
exit 2
--- stdout
--- stderr
error: unknown mode `Build`: did you mean `build`? (mode ids are case-sensitive)

"#]],
    );
    assert_eq!(
        record(ws.path(), &session),
        before,
        "an unknown mode changes nothing"
    );
    let unchanged = bin(
        ws.path(),
        &[
            "switch", "--store", "st", "--config", SHIPPED, &session, "plan", "--json",
        ],
    );
    // No event on stdout, a note on stderr.
    self::same(
        shown(&unchanged, &[(&session, "[SESSION]")]),
        snapbox::str![[r#"
exit 0
--- stdout
--- stderr
session [SESSION] is already in mode plan: nothing changed

"#]],
    );
    assert_eq!(
        record(ws.path(), &session),
        before,
        "the same mode changes nothing"
    );
}

#[test]
fn switch_prints_its_events_as_json() {
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let out = bin(
        ws.path(),
        &[
            "switch", "--store", "st", "--config", SHIPPED, &session, "build", "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let types: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let event: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            event["type"].as_str().expect("type").to_owned()
        })
        .collect();
    assert!(types.contains(&"mode_changed".to_owned()), "{types:?}");
    assert!(
        types.contains(&"tool_suspension_cancelled".to_owned()),
        "{types:?}"
    );
    let changed = types.iter().position(|t| t == "mode_changed");
    let cancelled = types.iter().position(|t| t == "tool_suspension_cancelled");
    assert!(
        cancelled < changed,
        "the plan is cancelled before the mode changes: {types:?}"
    );
}
