//! `agent-controller sessions`: the store's sessions, newest first, by workspace; a record that
//! cannot be read is a warning and exit 6, never a failure of the listing; what a prompt typed
//! is shown neutralized.
#![cfg(feature = "cli")]

use crate::common::cli::{DONE, INVALID, SHIPPED, STORE, UNREADABLE, bin, pending_plan, stdout};
use crate::common::{json_lines, stderr};

#[test]
fn sessions_lists_the_stores_sessions_by_workspace_and_reports_what_it_cannot_read() {
    let ws = tempfile::tempdir().expect("tempdir");
    let first = pending_plan(ws.path());
    // A second session, its prompt holding a terminal escape.
    let out = bin(
        ws.path(),
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            STORE,
            "--mode",
            "plan",
            "Fix \u{1b}[31mred\nsecond line",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));

    let out = bin(ws.path(), &["sessions", "--store", STORE], "");
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let shown = stdout(&out);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 2, "{shown}");
    assert!(!shown.contains('\u{1b}'), "neutralized: {shown}");
    let workspace = ws.path().canonicalize().expect("canonical");
    for line in &lines {
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields.len(), 6, "{line}");
        assert_eq!(fields[1], "plan");
        assert_eq!(fields[3], "pending");
        assert_eq!(fields[4], workspace.display().to_string());
    }
    let titles: Vec<&str> = lines.iter().filter_map(|l| l.rsplit('\t').next()).collect();
    assert!(titles.contains(&"Add dark mode"), "{titles:?}");
    assert!(
        titles
            .iter()
            .any(|t| t.starts_with("Fix ") && t.ends_with("red")),
        "the first line only: {titles:?}"
    );

    // A hostile record beside them: reported, the others still listed.
    std::fs::write(ws.path().join(STORE).join("garbage.json"), "{ not json").expect("plant");
    let out = bin(ws.path(), &["sessions", "--store", STORE, "--json"], "");
    assert_eq!(out.status.code(), Some(UNREADABLE), "{}", stderr(&out));
    let listed = json_lines(&out);
    let ids: Vec<&str> = listed
        .iter()
        .filter_map(|l| l["sessionId"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{listed:?}");
    assert!(ids.contains(&first.as_str()), "{ids:?}");
    assert!(
        listed
            .iter()
            .any(|l| l["unreadable"]["sessionId"] == "garbage")
    );
    assert!(
        stderr(&out).contains("warning: session `garbage`"),
        "{}",
        stderr(&out)
    );
    assert!(
        listed.iter().any(|l| l["title"] == "Fix \u{1b}[31mred"),
        "JSON carries the title as typed: {listed:?}"
    );

    // Another workspace has none of them.
    let other = tempfile::tempdir().expect("tempdir");
    let other_path = other.path().to_str().expect("utf-8");
    let out = bin(
        ws.path(),
        &["sessions", "--store", STORE, "--workspace", other_path],
        "",
    );
    assert_eq!(out.status.code(), Some(UNREADABLE), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    let here = ws.path().to_str().expect("utf-8");
    let out = bin(
        ws.path(),
        &["sessions", "--store", STORE, "--workspace", here],
        "",
    );
    assert_eq!(stdout(&out).lines().count(), 2);

    let out = bin(ws.path(), &["sessions", "--store", "no-such-store"], "");
    assert_eq!(out.status.code(), Some(INVALID), "{}", stderr(&out));
}
