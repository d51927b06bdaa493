//! What the approver sees is everything that is handed over (issue 36, items 4 and 14): a plan's
//! whole title in `pending --json` (the human line may cut it for the screen, saying where it is
//! whole), `v` at a tool call's prompt prints every argument whole, and the human display of many
//! arguments is bounded in lines and bytes, saying how much is not shown and where it is whole.
//! The model is the real OpenAI provider against the scripted server.
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use common::cli::world::{World, pending};
use common::cli::{DONE, PENDING, stdout};
use common::openai_server::{Reply, call, calls, submit, text};
use common::stderr;
use serde_json::json;

/// `build` asks before `write_file`; `plan` hands over to `build`.
const CONFIG: &str = r#"
[[modes]]
id = "plan"
availableTools = ["read_file", "write_plan", "submit_plan"]
transitionsTo = "build"

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
requireApproval = ["write_file"]
"#;

fn write(id: &str, args: &serde_json::Value) -> common::openai_server::Call {
    call(id, "write_file", &args.to_string())
}

/// A plan whose title is 1,100 characters: `write_plan`, then `submit_plan`.
fn long_titled_plan(title: &str) -> Vec<Reply> {
    let plan = json!({ "path": "t.md", "content": format!("# {title}\n\n1. Step one.\n") });
    vec![
        calls([call("call_1", "write_plan", &plan.to_string())]),
        calls([submit("call_2", ".agent/plans/t.md")]),
    ]
}

/// Issue 36, item 4: `pending --json` carries a plan's title whole, and the human line, which
/// cuts a long title for the screen, says that `pending --json` shows it whole.
#[test]
fn pending_json_carries_a_long_plan_title_whole_and_the_line_says_where() {
    let title = format!("Start {} End", "t".repeat(1_100));
    let world = World::with_config("dir", CONFIG, long_titled_plan(&title));
    let out = world.cli("run", true, &["--mode", "plan", "Plan it"], None);
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let listed = world.pending_json();
    assert_eq!(listed[0]["title"], title.as_str());
    let line = stdout(&pending(&world.spec, false));
    assert!(line.contains("characters not shown"), "{line}");
    assert!(line.contains("pending --json"), "{line}");
    assert!(line.len() < 2_000, "bounded: {line}");
}

/// Issue 36, item 4 (t3code#4051): the prompt cut a long argument in its middle and `y`
/// approved text nobody saw. `v` prints every argument whole (hidden characters as escapes),
/// then asks again; `y` then runs the call.
#[test]
fn v_at_a_tool_calls_prompt_prints_every_argument_whole_then_asks_again() {
    let content = format!(
        "BEGIN{}\u{1b}[2K hidden{}END",
        "a".repeat(3_000),
        "b".repeat(3_000)
    );
    let args = json!({ "path": "long.txt", "content": content });
    let world = World::with_config(
        "dir",
        CONFIG,
        vec![calls([write("call_1", &args)]), text("Written.")],
    );
    let out = world.cli("run", false, &["Write"], Some("v\ny\n"));
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let shown = stderr(&out);
    assert!(
        shown.contains("characters not shown"),
        "cut at first: {shown}"
    );
    assert!(shown.contains("[v]"), "the key is offered: {shown}");
    let whole = format!(
        "\"content\": \"BEGIN{}\\u001b[2K hidden{}END\"",
        "a".repeat(3_000),
        "b".repeat(3_000)
    );
    assert!(shown.contains(&whole), "v shows it whole: {shown:.2000}");
    assert_eq!(
        shown.matches("Run this write_file call?").count(),
        2,
        "asked again after v: {shown:.2000}"
    );
    assert_eq!(world.file("long.txt").as_deref(), Some(content.as_str()));
}

/// Issue 36, item 4: a second reviewer of revision 2 (a `decide` in a new process; revision 1
/// was rejected by flags, never shown) saw only the diff against revision 1. The whole revision
/// is shown first, the diff after it; the same prompt that showed revision 1 shows the diff
/// alone (`cli_prompt_switch::switch_followed_by_a_sentence_is_still_feedback`).
#[cfg(feature = "diff")]
#[test]
fn a_reviewer_who_never_saw_the_previous_revision_sees_the_whole_plan() {
    use common::cli::{SHIPPED, STORE, bin, pending_plan, text};
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let decide = |extra: &[&str], input: &str| {
        let mut args = vec!["decide", "--store", STORE, "--config", SHIPPED, &session];
        args.extend_from_slice(extra);
        bin(ws.path(), &args, input)
    };
    let out = decide(&["--reject", "--feedback", "add a rollback step"], "");
    assert_eq!(out.status.code(), Some(PENDING), "{}", text(&out));
    let out = decide(&[], "n\n");
    let shown = stderr(&out);
    let whole = "# Add dark mode\n\n## Steps\n1. Read the code this change touches.\n2. Make the change in small steps.\n3. Add tests for it and run the whole suite.\n\n## Revisions\n- Addressed: add a rollback step";
    let at_whole = shown.find(whole).unwrap_or_else(|| panic!("{shown}"));
    let at_diff = shown
        .find("changes since revision 1")
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(at_whole < at_diff, "the whole plan, then the diff: {shown}");
}
