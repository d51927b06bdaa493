//! Subagents on the command line (issue 38): `run --json` prints a child's events wrapped with
//! its id between `subagent_started` and `subagent_ended`; the terminal shows them indented.
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use common::cli::world::World;
use common::cli::{DONE, stdout};
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
