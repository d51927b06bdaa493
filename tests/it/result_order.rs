//! Tool results go back to the model in the order of the model's calls (issue 19, item 5;
//! langchain-ai/langgraph#6626): whatever order the results came in (calls that ran before the
//! suspension, decisions taken in another order, rejections before approvals, a plan decided
//! after the calls behind it were answered, a suspension cancelled by a new message), across a
//! restart from a store too. Chat templates that pair results with calls by position (Qwen's
//! `<tool_response>` carries no id) would otherwise give the model the wrong result for a call.
//! Through the library with the replay model; `chat_templates.rs` has the same through the real
//! OpenAI provider and the Qwen template.

use crate::common;

use std::sync::Arc;

use agent_controller::model::scripted::ReplayModel;
use agent_controller::store::{MemoryStore, SessionStore};
use agent_controller::tool::ToolCall;
use agent_controller::{
    AgentController, Decision, ModelResponse, RunOutcome, Session, SessionOptions, ToolRegistry,
    model::Message,
};
use common::{Workspace, graph};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

fn tool_call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        args,
    }
}

/// One reply with these calls.
fn reply(calls: Vec<ToolCall>) -> ModelResponse {
    ModelResponse {
        tool_calls: calls,
        ..ModelResponse::default()
    }
}

/// A (writes a.txt, waits), B (reads b.txt), C (writes c.txt, waits), D (reads d.txt).
fn four_calls() -> ModelResponse {
    reply(vec![
        tool_call("A", "write_file", json!({"path": "a.txt", "content": "a"})),
        tool_call("B", "read_file", json!({"path": "b.txt"})),
        tool_call("C", "write_file", json!({"path": "c.txt", "content": "c"})),
        tool_call("D", "read_file", json!({"path": "d.txt"})),
    ])
}

struct Setup {
    ws: Workspace,
    model: Arc<ReplayModel>,
    store: Arc<MemoryStore>,
}

impl Setup {
    fn new(replies: Vec<ModelResponse>) -> Self {
        let ws = Workspace::new();
        std::fs::write(ws.path().join("b.txt"), "bee").expect("write");
        std::fs::write(ws.path().join("d.txt"), "dee").expect("write");
        Self {
            ws,
            model: common::replay(replies),
            store: Arc::new(MemoryStore::new()),
        }
    }

    /// A new controller each call (a restarted host) on the same model, store and workspace.
    fn controller(&self) -> AgentController {
        let store: Arc<dyn SessionStore> = self.store.clone();
        AgentController::builder(graph(CONFIG), self.model.clone())
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(self.ws.path())
            .store(store)
            .build()
            .expect("controller")
    }

    async fn session(&self, mode: &str) -> Session {
        self.controller()
            .start_session(SessionOptions::new().mode(mode))
            .await
            .expect("session")
    }

    /// The (id, content) of every tool result the `n`-th model request carried after its last
    /// assistant message with tool calls.
    fn last_results(&self, n: usize) -> Vec<(String, String)> {
        let requests = self.model.requests();
        last_results(&requests[n].messages)
    }
}

/// The (id, content) of the tool results right after the last assistant message with calls.
fn last_results(messages: &[Message]) -> Vec<(String, String)> {
    let at = messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()))
        .expect("an assistant message with tool calls");
    messages[at + 1..]
        .iter()
        .map_while(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

fn ids(results: &[(String, String)]) -> Vec<&str> {
    results.iter().map(|(id, _)| id.as_str()).collect()
}

#[track_caller]
fn assert_completed(outcome: &RunOutcome) {
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn results_go_back_in_the_order_of_the_calls_whatever_order_the_decisions_came_in() {
    let s = Setup::new(vec![four_calls(), ReplayModel::text("done")]);
    let mut session = s.session("build").await;
    let outcome = session.send_message("write a and c").await.expect("run");
    assert!(
        matches!(&outcome, RunOutcome::ToolCallsSuspended { tool_calls, .. } if tool_calls.len() == 2),
        "{outcome:?}"
    );
    // C is decided first, then the host restarts and decides A: a rejection, which comes back
    // before C's approval was run.
    session
        .decide("decision_2", Decision::approve())
        .await
        .expect("decide C");
    let id = session.id().to_owned();
    drop(session);
    let mut session = s
        .controller()
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore");
    let outcome = session
        .decide("decision_1", Decision::reject_with("not a.txt"))
        .await
        .expect("decide A");
    assert_completed(&outcome);

    let results = s.last_results(1);
    assert_eq!(ids(&results), ["A", "B", "C", "D"], "{results:#?}");
    assert!(results[0].1.contains("not a.txt"), "{results:#?}");
    assert!(results[1].1.contains("bee"), "{results:#?}");
    assert!(results[2].1.contains("c.txt"), "{results:#?}");
    assert!(results[3].1.contains("dee"), "{results:#?}");
    // The conversation the session and its store keep is in that order too.
    assert_eq!(last_results(session.messages()), results);
    let record = s.store.load(&id).await.expect("load").expect("saved");
    assert_eq!(record.messages, session.messages());
}

#[tokio::test]
async fn a_plan_result_goes_back_before_the_results_of_the_calls_after_it() {
    let s = Setup::new(vec![
        reply(vec![
            tool_call("P", "submit_plan", json!({"path": ".agent/plans/p.md"})),
            tool_call("R", "read_file", json!({"path": "b.txt"})),
        ]),
        ReplayModel::text("building"),
    ]);
    s.ws.plan("p.md", "# P\n\n1. Step.\n");
    let mut session = s.session("plan").await;
    let pending = match session.send_message("plan it").await.expect("run") {
        RunOutcome::Suspended {
            run_id,
            tool_call_id,
            ..
        } => (run_id, tool_call_id),
        other => panic!("expected a plan suspension, got {other:?}"),
    };
    let outcome = session
        .resume(&pending.0, &pending.1, Decision::approve())
        .await
        .expect("approve");
    assert_completed(&outcome);
    let results = s.last_results(1);
    assert_eq!(ids(&results), ["P", "R"], "{results:#?}");
}

#[tokio::test]
async fn results_of_a_suspension_a_new_message_cancelled_go_back_in_the_order_of_the_calls() {
    let s = Setup::new(vec![four_calls(), ReplayModel::text("ok")]);
    let mut session = s.session("build").await;
    session.send_message("write a and c").await.expect("run");
    // A new message instead of deciding: A and C get their "not approved" results now.
    let outcome = session.send_message("never mind").await.expect("run");
    assert_completed(&outcome);
    let results = s.last_results(1);
    assert_eq!(ids(&results), ["A", "B", "C", "D"], "{results:#?}");
    assert!(results[0].1.starts_with("Not approved"), "{results:#?}");
}

/// The calls of the last assistant message with calls, as (id, path argument).
fn last_calls(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => Some(
                tool_calls
                    .iter()
                    .map(|c| {
                        (
                            c.id.clone(),
                            c.args["path"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect(),
            ),
            _ => None,
        })
        .expect("an assistant message with tool calls")
}

#[tokio::test]
async fn calls_that_repeat_an_id_in_one_reply_each_get_their_own_result_in_their_place() {
    // Hostile-model trial: two calls of one reply under the same id, decided in reverse order.
    // The results came back swapped (the rejection of c.txt where a.txt's write was), and no id
    // told the model which call a result answered.
    let s = Setup::new(vec![
        reply(vec![
            tool_call("X", "write_file", json!({"path": "a.txt", "content": "a"})),
            tool_call("X", "write_file", json!({"path": "c.txt", "content": "c"})),
            tool_call("", "read_file", json!({"path": "b.txt"})),
            tool_call("", "read_file", json!({"path": "d.txt"})),
        ]),
        ReplayModel::text("done"),
    ]);
    let mut session = s.session("build").await;
    let outcome = session.send_message("write a and c").await.expect("run");
    assert!(
        matches!(&outcome, RunOutcome::ToolCallsSuspended { tool_calls, .. } if tool_calls.len() == 2),
        "{outcome:?}"
    );
    session
        .decide("decision_2", Decision::reject_with("not c.txt"))
        .await
        .expect("decide c");
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("decide a");
    assert_completed(&outcome);
    assert!(s.ws.path().join("a.txt").exists());
    assert!(!s.ws.path().join("c.txt").exists());

    let requests = s.model.requests();
    let calls = last_calls(&requests[1].messages);
    let results = last_results(&requests[1].messages);
    let call_ids: Vec<&str> = calls.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids(&results), call_ids, "{calls:#?} {results:#?}");
    let mut unique = call_ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        4,
        "every call has an id of its own: {calls:#?}"
    );
    assert!(call_ids.iter().all(|id| !id.is_empty()), "{calls:#?}");
    assert_eq!(call_ids[0], "X", "the first call keeps the model's id");
    assert!(results[0].1.contains("a.txt"), "{results:#?}");
    assert!(results[1].1.contains("not c.txt"), "{results:#?}");
    assert!(results[2].1.contains("bee"), "{results:#?}");
    assert!(results[3].1.contains("dee"), "{results:#?}");
}
