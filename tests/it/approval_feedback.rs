//! Feedback given with the approval of a tool call (issue 36, item 11): `decide --approve
//! --feedback TEXT` (`Decision::approve_with`) was accepted and silently dropped. It reaches the
//! model with the tool's result, after a store round trip and a resume in another process, and
//! the decision's record keeps it. The model is the real OpenAI provider against the scripted
//! server, on the directory store, SQLite and PostgreSQL (`AGENT_CONTROLLER_TEST_POSTGRES`).
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use common::cli::world::{World, stores};
use common::cli::{DONE, PENDING};
use common::openai_server::{call, calls, text};
use common::stderr;
use serde_json::json;

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

#[test]
fn feedback_with_an_approval_reaches_the_model_with_the_tools_result() {
    for kind in stores() {
        let args = json!({ "path": "a.txt", "content": "hello" }).to_string();
        let world = World::with_config(
            kind,
            CONFIG,
            vec![
                calls([call("call_1", "write_file", &args)]),
                text("Wrote a.txt."),
            ],
        );
        let (out, session) = world.run_stored("Write a.txt");
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        let out = world.decide(
            &session,
            &["--json", "--approve", "--feedback", "next time use tabs"],
        );
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert_eq!(world.file("a.txt").as_deref(), Some("hello"), "{kind}");
        let results = world.tool_results(1);
        assert_eq!(results.len(), 1, "{kind}: {results:?}");
        assert!(
            results[0].contains("Wrote"),
            "{kind}: the tool ran: {results:?}"
        );
        assert!(
            results[0].contains("next time use tabs"),
            "{kind}: the feedback reaches the model: {results:?}"
        );
        // The `tool_end` event carries the decision's record, which keeps the feedback.
        let events = common::json_lines(&out);
        let decided: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| e["type"] == "tool_end")
            .filter_map(|e| e.get("decision"))
            .collect();
        assert!(
            decided
                .iter()
                .any(|d| d["outcome"] == "approved" && d["feedback"] == "next time use tabs"),
            "{kind}: the record keeps it: {events:?}"
        );
    }
}
