//! Subagents on the command line (issue 38): `run --json` prints a child's events wrapped with
//! its id between `subagent_started` and `subagent_ended`; the terminal shows them indented.
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use common::cli::world::World;
use common::cli::{DONE, PENDING, stdout};
use common::openai_server::{call, calls, text};
use common::stderr;
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[subagents]]
id = "explore"
instructions = "Explore."

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "subagent"]
"#;

fn script() -> Vec<common::openai_server::Reply> {
    vec![
        calls([call(
            "call_1",
            "subagent",
            &json!({"agentType": "explore", "task": "Look."}).to_string(),
        )]),
        text("Child says hi."),
        text("Done."),
    ]
}

#[test]
fn run_json_prints_the_childs_events_wrapped_with_its_id() {
    let world = World::with_config("file", CONFIG, script());
    let out = world.cli("run", false, &["--json", "Go"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let started = kinds
        .iter()
        .position(|k| *k == "subagent_started")
        .expect("subagent_started");
    let ended = kinds
        .iter()
        .position(|k| *k == "subagent_ended")
        .expect("subagent_ended");
    assert!(started < ended);
    let child = events[started]["childId"].as_str().expect("childId");
    assert!(
        events[started + 1..ended]
            .iter()
            .all(|e| e["type"] == "subagent_event" && e["childId"] == child),
        "{kinds:?}"
    );
    assert_eq!(events[ended]["outcome"], "completed");
}

#[test]
fn the_terminal_shows_the_childs_lines_indented_under_the_call() {
    let world = World::with_config("file", CONFIG, script());
    let out = world.cli("run", false, &["Go"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let shown = stdout(&out);
    let start = shown.find("subagent explore started").expect(&shown);
    let end = shown
        .find("subagent explore ended: completed")
        .expect(&shown);
    assert!(start < end, "{shown}");
    let between = &shown[start..end];
    assert!(
        between.lines().skip(1).all(|l| l.starts_with("    ")),
        "the child's lines are indented: {shown}"
    );
    assert!(between.contains("Child says hi."), "{shown}");
}

const CAREFUL: &str = r#"
[[subagents]]
id = "explore"
instructions = "Explore."
availableTools = ["write_file"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "subagent"]
requireApproval = ["write_file"]
"#;

/// A child's call that waits is listed by `pending` naming the subagent, and `decide` on the
/// stored session approves it: the child carries on and the parent completes, on every store.
#[test]
fn pending_names_the_subagent_whose_call_waits_and_decide_carries_the_child_on() {
    for kind in common::cli::world::stores() {
        let world = World::with_config(
            kind,
            CAREFUL,
            vec![
                calls([call(
                    "call_1",
                    "subagent",
                    &json!({"agentType": "explore", "task": "Write notes."}).to_string(),
                )]),
                calls([call(
                    "c_1",
                    "write_file",
                    &json!({"path": "notes.txt", "content": "x"}).to_string(),
                )]),
                text("CHILD-WROTE"),
                text("Done."),
            ],
        );
        let (out, session) = world.run_stored("Go");
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        let listed = world.pending_json();
        assert_eq!(listed.len(), 1, "{kind}: {listed:?}");
        assert_eq!(listed[0]["toolName"], "write_file", "{kind}");
        assert_eq!(listed[0]["subagent"]["agentType"], "explore", "{kind}");
        assert_eq!(listed[0]["subagent"]["toolCallId"], "call_1", "{kind}");
        let text = stdout(&common::cli::world::pending(&world.spec, false));
        assert!(
            text.contains("subagent explore") && text.contains("call_1"),
            "{kind}: the line names the subagent: {text}"
        );
        let decision = listed[0]["decisionId"].as_str().expect("id").to_owned();
        let out = world.decide(&session, &["--decision", &decision, "--approve"]);
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert_eq!(world.file("notes.txt").as_deref(), Some("x"), "{kind}");
        assert!(world.pending_json().is_empty(), "{kind}");
        assert_eq!(world.tool_results(3), ["CHILD-WROTE"], "{kind}");
    }
}

/// Trial F12: two children of one reply run at once, so their lines interleave: each child's
/// line is labelled with its id (`[CHILD_ID]`), indented under the parent's call.
#[test]
fn the_terminal_labels_each_childs_lines_with_its_id() {
    let task = |t: &str| json!({"agentType": "explore", "task": t}).to_string();
    let script = vec![
        calls([
            call("call_1", "subagent", &task("Look left.")),
            call("call_2", "subagent", &task("Look right.")),
        ]),
        text("One child says hi."),
        text("The other child says hi."),
        text("Done."),
    ];
    let world = World::with_config("file", CONFIG, script);
    let out = world.cli("run", false, &["Go"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let shown = stdout(&out);
    let ids: Vec<&str> = shown
        .lines()
        .filter_map(|l| l.strip_prefix("subagent explore started ("))
        .map(|rest| rest.trim_end_matches(')'))
        .collect();
    assert_eq!(ids.len(), 2, "{shown}");
    let child_lines: Vec<&str> = shown.lines().filter(|l| l.starts_with("    ")).collect();
    assert!(!child_lines.is_empty(), "{shown}");
    for l in &child_lines {
        assert!(
            ids.iter().any(|id| l.starts_with(&format!("    [{id}] "))),
            "a child's line without its id: {l:?} in {shown}"
        );
    }
    for id in &ids {
        assert!(
            child_lines
                .iter()
                .any(|l| l.starts_with(&format!("    [{id}] ")) && l.contains("says hi.")),
            "{id}: {shown}"
        );
    }
}
