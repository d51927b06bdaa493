//! `agent-controller switch --store S SESSION MODE` (issue 23, item 3): leaving planning without
//! approving, from the command line, over `Session::switch_mode`. The pending plan counts as not
//! approved and the model is told; an unknown mode changes nothing.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::{Command, Output, Stdio};

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");

fn bin(ws: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agent-controller"))
        .current_dir(ws)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A session in `plan` with a plan pending, in a fresh workspace and store; its id.
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
    );
    // Exit 4: the plan stays pending in the store.
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let listed = bin(ws, &["pending", "--store", "st", "--json"]);
    let line = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .next()
        .map(str::to_owned);
    let first: serde_json::Value =
        serde_json::from_str(&line.expect("a pending plan")).expect("json");
    first["sessionId"].as_str().expect("sessionId").to_owned()
}

/// The session's record as the file store keeps it (`ID.pending.json` while a decision is
/// pending, `ID.json` otherwise): its file name and text.
fn record(ws: &Path, session: &str) -> String {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(ws.join("st")).expect("the store") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name.filter(|n| n.starts_with(session) && n.ends_with(".json")) {
            found.push(format!(
                "{name}\n{}",
                std::fs::read_to_string(&path).expect("read")
            ));
        }
    }
    assert_eq!(found.len(), 1, "one record: {found:?}");
    found.remove(0)
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
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("submit_plan cancelled (mode_switch): not approved"),
        "{shown}"
    );
    assert!(
        shown.contains("mode changed: plan -> build (manual)"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "session {session}: mode plan -> build (switched by hand)"
        )),
        "{shown}"
    );
    assert!(
        shown.contains("the plan decision_1 (Add dark mode) counts as not approved"),
        "{shown}"
    );
    // Nothing is pending any more, and the model is told why its plan went nowhere.
    let listed = bin(ws.path(), &["pending", "--store", "st"]);
    assert!(
        text(&listed).contains("no pending plans or tool calls"),
        "{}",
        text(&listed)
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
    assert_ne!(late.status.code(), Some(0), "{}", text(&late));
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
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out)
            .contains("unknown mode `Build`: did you mean `build`? (mode ids are case-sensitive)"),
        "{}",
        text(&out)
    );
    assert_eq!(
        record(ws.path(), &session),
        before,
        "an unknown mode changes nothing"
    );
    let same = bin(
        ws.path(),
        &[
            "switch", "--store", "st", "--config", SHIPPED, &session, "plan", "--json",
        ],
    );
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    assert!(
        text(&same).contains("is already in mode plan: nothing changed"),
        "{}",
        text(&same)
    );
    assert!(same.stdout.is_empty(), "no event: {}", text(&same));
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
