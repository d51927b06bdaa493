//! Tool calls that wait for the user (issue 12, `requireApproval`): a call to a listed tool
//! suspends the run instead of running; approve runs it, reject gives the model the feedback;
//! parallel calls wait at once, each its own decision; the decision is pinned by the RFC 8785
//! hash of the arguments, exactly-once and durable; abort and a new message never run it;
//! "always allow" approves the call shown, lasts until the mode changes (a manual switch or an
//! approved plan), and leaves the other waiting calls of the reply to be asked about. Driven by the real `OpenAiModel` against the
//! scripted OpenAI-compatible server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::store::{MemoryStore, PendingKind, SessionStore};
use agent_controller::{
    AgentController, Decision, Event, RunOutcome, Session, SessionError, ToolRegistry, config,
    event::DecisionOutcome, event::RunState, event::Suspension, jcs,
};
use common::clock::{T0, TestClock};
use common::openai_server::{Call, Reply, ScriptedServer, call, calls, submit, text};
use common::{Recorder, Workspace};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
requireApproval = ["write_file"]

[[modes]]
id = "free"
availableTools = ["read_file", "write_file"]

[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_file", "submit_plan"]
requireApproval = ["write_file"]
"#;

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    store: Arc<MemoryStore>,
    recorder: Recorder,
    ws: Workspace,
}

impl Setup {
    async fn new(script: Vec<Reply>) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let store = Arc::new(MemoryStore::new());
        let controller = AgentController::builder(
            config::parse(CONFIG, "modes.toml").expect("config"),
            Arc::new(server.model()),
        )
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller");
        Self {
            server,
            controller,
            store,
            recorder: Recorder::default(),
            ws,
        }
    }

    async fn session(&self, mode: &str) -> Session {
        self.controller
            .start_session(self.recorder.options().mode(mode))
            .await
            .expect("session")
    }

    async fn restore(&self, id: &str) -> Session {
        self.controller
            .restore_session(id, agent_controller::SessionOptions::new())
            .await
            .expect("restore")
    }

    fn exists(&self, name: &str) -> bool {
        self.ws.path().join(name).exists()
    }

    /// The `tool` messages of the `n`-th request (0-based): (tool_call_id, content).
    async fn tool_results(&self, n: usize) -> Vec<(String, String)> {
        let bodies = self.server.bodies().await;
        bodies[n]["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }
}

fn write(id: &str, path: &str, content: &str) -> Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": content }).to_string(),
    )
}

fn waiting(outcome: RunOutcome) -> Vec<agent_controller::session::PendingToolCall> {
    match outcome {
        RunOutcome::ToolCallsSuspended { tool_calls, .. } => tool_calls,
        other => panic!("expected tool calls waiting for approval, got {other:?}"),
    }
}

/// The result text of `id` in the `n`-th request.
async fn result_of(s: &Setup, n: usize, id: &str) -> String {
    s.tool_results(n)
        .await
        .into_iter()
        .find(|(call, _)| call == id)
        .map(|(_, content)| content)
        .unwrap_or_else(|| panic!("no result for {id} in request {n}"))
}

#[tokio::test]
async fn a_call_that_needs_approval_suspends_the_run_and_does_not_run() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt", "hello")]),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    let pending = waiting(session.send_message("write a").await.expect("run"));
    assert_eq!(pending.len(), 1);
    let p = &pending[0];
    assert_eq!(
        (p.decision_id(), p.tool_name(), p.tool_call_id()),
        ("decision_1", "write_file", "call_1")
    );
    assert_eq!(p.args(), &json!({ "path": "a.txt", "content": "hello" }));
    // argsSha256: SHA-256 of the RFC 8785 form, members sorted.
    assert_eq!(
        jcs::to_string(p.args()),
        r#"{"content":"hello","path":"a.txt"}"#
    );
    assert_eq!(p.args_sha256(), jcs::sha256(p.args()));
    assert!(!s.exists("a.txt"), "the tool did not run");
    assert_eq!(s.server.served(), 1, "the model was not called again");
    assert_eq!(session.run_state(), Some(("run_1", RunState::Suspended)));
    assert_eq!(session.pending().len(), 1);
    assert!(session.pending_plan().is_none(), "no plan is pending");
    let events = s.recorder.take();
    let suspended: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolSuspended {
                tool_name,
                suspend_payload: Suspension::ToolCall(payload),
                ..
            } => Some((tool_name.clone(), payload.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(suspended.len(), 1, "{events:?}");
    assert_eq!(suspended[0].0, "write_file");
    assert_eq!(suspended[0].1.decision_id, "decision_1");
    assert_eq!(suspended[0].1.args_sha256, p.args_sha256());
    // The payload's JSON shape: { kind, decisionId, toolName, args, argsSha256 }.
    let json = serde_json::to_value(Suspension::ToolCall(suspended[0].1.clone())).expect("json");
    assert_eq!(
        json,
        json!({
            "kind": "tool_call",
            "decisionId": "decision_1",
            "toolName": "write_file",
            "args": { "path": "a.txt", "content": "hello" },
            "argsSha256": p.args_sha256(),
            "workspace": session.workspace(),
        })
    );
    assert!(matches!(
        events.last(),
        Some(Event::AgentEnd {
            reason: RunState::Suspended,
            ..
        })
    ));
}

#[tokio::test]
async fn approve_runs_the_tool_then_calls_the_model() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt", "hello")]),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    waiting(session.send_message("write a").await.expect("run"));
    let outcome = session
        .decide("decision_1", Decision::approve().decided_by("alice"))
        .await
        .expect("decide");
    assert!(matches!(outcome, RunOutcome::Completed { ref text, .. } if text == "done"));
    assert_eq!(
        std::fs::read_to_string(s.ws.path().join("a.txt")).expect("written"),
        "hello"
    );
    assert!(!result_of(&s, 1, "call_1").await.contains("Not approved"));
    let end = s
        .recorder
        .take()
        .into_iter()
        .find_map(|e| match e {
            Event::ToolEnd {
                tool_call_id,
                decision: Some(record),
                is_error,
                ..
            } if tool_call_id == "call_1" => Some((record, is_error)),
            _ => None,
        })
        .expect("tool_end with the decision");
    assert!(!end.1);
    assert_eq!(end.0.outcome, Some(DecisionOutcome::Approved));
    assert_eq!(end.0.tool_name.as_deref(), Some("write_file"));
    assert_eq!(end.0.decided_by.as_deref(), Some("alice"));
    assert_eq!(end.0.decision_id, "decision_1");
    assert_eq!(session.decision_history(), [end.0]);
    assert!(session.pending().is_empty());
}

#[tokio::test]
async fn reject_does_not_run_the_tool_and_gives_the_model_the_feedback() {
    for feedback in [Some("write b.txt instead"), None] {
        let s = Setup::new(vec![calls([write("call_1", "a.txt", "hello")]), text("ok")]).await;
        let mut session = s.session("build").await;
        waiting(session.send_message("write a").await.expect("run"));
        let decision = match feedback {
            Some(f) => Decision::reject_with(f),
            None => Decision::reject(),
        };
        let outcome = session
            .decide("decision_1", decision)
            .await
            .expect("decide");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
        assert!(!s.exists("a.txt"), "a rejected call never runs");
        let result = result_of(&s, 1, "call_1").await;
        assert!(result.starts_with("Not approved"), "{result}");
        if let Some(f) = feedback {
            assert!(result.contains(f), "{result}");
        }
        assert_eq!(
            session.decision_history()[0].outcome,
            Some(DecisionOutcome::Rejected)
        );
    }
}

#[tokio::test]
async fn parallel_calls_wait_at_once_and_the_run_carries_on_when_all_are_decided() {
    let s = Setup::new(vec![
        calls([
            write("call_1", "a.txt", "A"),
            call("call_2", "list_files", r#"{"path":"."}"#),
            write("call_3", "b.txt", "B"),
        ]),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    let pending = waiting(session.send_message("write both").await.expect("run"));
    let ids: Vec<&str> = pending.iter().map(|p| p.decision_id()).collect();
    assert_eq!(ids, ["decision_1", "decision_2"]);
    // The call that needs no approval ran, in order, before the suspension.
    let events = s.recorder.take();
    let ran = events
        .iter()
        .position(|e| matches!(e, Event::ToolEnd { tool_call_id, .. } if tool_call_id == "call_2"));
    let first_suspended = events
        .iter()
        .position(|e| matches!(e, Event::ToolSuspended { .. }));
    assert!(ran.is_some() && ran < first_suspended, "{events:?}");

    // One decision: the run still waits for the other, nothing ran, no model call.
    let left = waiting(
        session
            .decide("decision_2", Decision::approve())
            .await
            .expect("first"),
    );
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].decision_id(), "decision_1");
    assert!(!s.exists("b.txt") && !s.exists("a.txt"));
    assert_eq!(s.server.served(), 1);
    assert!(session.pending()[1].decision().is_some());
    assert_eq!(
        session.decide("decision_2", Decision::reject()).await,
        Err(SessionError::AlreadyDecided("decision_2".into()))
    );
    // Every listing shows only the one still waiting.
    let listed = s
        .store
        .list_pending(agent_controller::store::now_millis())
        .await
        .expect("list")
        .pending;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].decision_id, "decision_1");

    let outcome = session
        .decide("decision_1", Decision::reject_with("not a.txt"))
        .await
        .expect("last");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(s.exists("b.txt") && !s.exists("a.txt"));
    let results = s.tool_results(1).await;
    let order: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(order.len(), 3, "every call has one result: {results:?}");
    assert!(result_of(&s, 1, "call_1").await.contains("not a.txt"));
    let history: Vec<&str> = session
        .decision_history()
        .iter()
        .map(|d| d.decision_id.as_str())
        .collect();
    assert_eq!(history, ["decision_1", "decision_2"]);
}

#[tokio::test]
async fn submit_plan_beside_a_call_that_waits_is_not_executed() {
    let s = Setup::new(vec![
        calls([
            submit("call_1", ".agent/plans/p.md"),
            write("call_2", "a.txt", "A"),
        ]),
        text("ok"),
    ])
    .await;
    s.ws.plan("p.md", "# P\n\n1. step\n");
    let mut session = s.session("plan").await;
    let pending = waiting(session.send_message("plan").await.expect("run"));
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_call_id(), "call_2");
    assert!(
        session.pending_plan().is_none(),
        "the plan was not submitted"
    );
    session
        .decide(pending[0].decision_id(), Decision::approve())
        .await
        .expect("decide");
    let plan_result = result_of(&s, 1, "call_1").await;
    assert!(
        plan_result.contains("Submit the plan again after they are decided"),
        "{plan_result}"
    );
    assert_eq!(session.mode().id(), "plan");
}

#[tokio::test]
async fn refused_calls_are_never_suspended() {
    // Arguments that are not an object, and a tool the mode does not offer: refused as before.
    let s = Setup::new(vec![
        calls([
            call("call_1", "write_file", "[1]"),
            call("call_2", "delete_all", "{}"),
        ]),
        text("ok"),
    ])
    .await;
    let mut session = s.session("build").await;
    let outcome = session.send_message("go").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(session.pending().is_empty());
    assert!(
        result_of(&s, 1, "call_1")
            .await
            .contains("not a JSON object")
    );
    assert!(
        result_of(&s, 1, "call_2")
            .await
            .contains("is not available")
    );
}

#[tokio::test]
async fn a_decision_pinned_to_other_arguments_is_refused_and_changes_nothing() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt", "hello")]),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    let pending = waiting(session.send_message("write a").await.expect("run"));
    let wrong = jcs::sha256(&json!({ "path": "a.txt", "content": "HELLO" }));
    let err = session
        .decide("decision_1", Decision::approve().with_sha256(&wrong))
        .await
        .expect_err("mismatch");
    assert_eq!(
        err,
        SessionError::ArgsSha256Mismatch {
            decision_id: "decision_1".to_owned(),
            expected: pending[0].args_sha256().to_owned(),
            given: wrong,
        }
    );
    // Trial finding 5: the message names the call's argsSha256, not a plan.
    let text = err.to_string();
    assert!(
        text.contains("argsSha256") && text.contains("tool call decision_1"),
        "{text}"
    );
    assert!(!text.contains("plan"), "{text}");
    assert!(!s.exists("a.txt"));
    assert_eq!(session.pending().len(), 1);
    assert!(session.pending()[0].decision().is_none());
    // The hash a host computes from the arguments with any JCS library.
    let pinned = jcs::sha256(&json!({ "content": "hello", "path": "a.txt" }));
    session
        .decide("decision_1", Decision::approve().with_sha256(pinned))
        .await
        .expect("pinned approval");
    assert!(s.exists("a.txt"));
}

#[tokio::test]
async fn targets_edited_plans_and_always_allow_on_a_rejection_are_malformed_for_tool_calls() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt", "hello")]),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    waiting(session.send_message("write a").await.expect("run"));
    for decision in [
        Decision::approve().to("free"),
        Decision::approve().with_plan("# X\n\nbody\n"),
        Decision::reject().always_allow(),
    ] {
        let err = session
            .decide("decision_1", decision.clone())
            .await
            .expect_err("malformed");
        assert!(
            matches!(err, SessionError::MalformedDecision(_)),
            "{decision:?}: {err}"
        );
    }
    assert!(session.always_allowed().is_empty());
    assert!(session.pending()[0].decision().is_none());
    assert_eq!(
        session.decide("decision_9", Decision::approve()).await,
        Err(SessionError::UnknownDecision("decision_9".into()))
    );
}

#[tokio::test]
async fn always_allow_on_a_plan_decision_is_malformed() {
    let s = Setup::new(vec![calls([submit("call_1", ".agent/plans/p.md")])]).await;
    s.ws.plan("p.md", "# P\n\n1. step\n");
    let mut session = s.session("plan").await;
    let outcome = session.send_message("plan").await.expect("run");
    assert!(matches!(outcome, RunOutcome::Suspended { .. }));
    let err = session
        .decide("decision_1", Decision::approve().always_allow())
        .await
        .expect_err("malformed");
    assert!(matches!(err, SessionError::MalformedDecision(_)), "{err}");
    assert!(session.pending_plan().is_some());
}

#[tokio::test]
async fn resume_decides_a_tool_call_by_run_and_tool_call_id_once() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt", "hello")]),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    waiting(session.send_message("write a").await.expect("run"));
    session
        .resume_json("run_1", "call_1", &json!({ "action": "approved" }))
        .await
        .expect("resume");
    assert!(s.exists("a.txt"));
    assert_eq!(
        session.decide("decision_1", Decision::approve()).await,
        Err(SessionError::AlreadyDecided("decision_1".into()))
    );
}

#[tokio::test]
async fn abort_and_a_new_message_never_run_the_call() {
    for by_message in [false, true] {
        let s = Setup::new(vec![
            calls([write("call_1", "a.txt", "A"), write("call_2", "b.txt", "B")]),
            text("read it"),
        ])
        .await;
        let mut session = s.session("build").await;
        waiting(session.send_message("write").await.expect("run"));
        // One decided while the other waits: neither runs.
        waiting(
            session
                .decide("decision_1", Decision::approve())
                .await
                .expect("partial"),
        );
        s.recorder.take();
        if by_message {
            session.send_message("stop, do X").await.expect("message");
            let r1 = result_of(&s, 1, "call_1").await;
            assert!(
                r1.starts_with("Not approved: the user sent a new message"),
                "{r1}"
            );
        } else {
            assert!(session.abort().await.expect("abort"));
            assert_eq!(session.run_state(), Some(("run_1", RunState::Aborted)));
        }
        assert!(!s.exists("a.txt") && !s.exists("b.txt"));
        assert!(session.pending().is_empty());
        let cancelled: Vec<_> = s
            .recorder
            .take()
            .into_iter()
            .filter_map(|e| match e {
                Event::ToolSuspensionCancelled {
                    decision: Some(d), ..
                } => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(cancelled.len(), 2);
        assert!(
            cancelled
                .iter()
                .all(|d| d.outcome == Some(DecisionOutcome::Cancelled))
        );
        assert_eq!(session.decision_history().len(), 2);
        assert_eq!(
            session.decide("decision_2", Decision::approve()).await,
            Err(SessionError::AlreadyDecided("decision_2".into()))
        );
        // Every call of the reply has a result in the conversation.
        let answered = session
            .messages()
            .iter()
            .filter(|m| matches!(m, agent_controller::model::Message::Tool { .. }))
            .count();
        assert!(answered >= 2);
    }
}

#[tokio::test]
async fn always_allow_lets_later_calls_run_until_a_manual_switch() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt", "A")]),
        calls([write("call_2", "b.txt", "B")]),
        text("both written"),
        calls([write("call_3", "c.txt", "C")]),
    ])
    .await;
    let mut session = s.session("build").await;
    waiting(session.send_message("write a").await.expect("run"));
    let outcome = session
        .decide("decision_1", Decision::approve().always_allow())
        .await
        .expect("decide");
    // b.txt was written without waiting: the tool is allowed for the session.
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(s.exists("a.txt") && s.exists("b.txt"));
    assert_eq!(session.always_allowed(), ["write_file"]);
    assert!(session.decision_history()[0].always_allow);
    // Persisted with the session.
    let restored = s.restore(session.id()).await;
    assert_eq!(restored.always_allowed(), ["write_file"]);
    drop(restored);
    // A manual switch ends it.
    session.switch_mode("free").await.expect("switch");
    session.switch_mode("build").await.expect("back");
    assert!(session.always_allowed().is_empty());
    waiting(session.send_message("write c").await.expect("run"));
    assert!(!s.exists("c.txt"));
}

#[tokio::test]
async fn a_dismissed_session_keeps_the_calls_pending_and_a_restore_decides_them() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt", "A"), write("call_2", "b.txt", "B")]),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    waiting(session.send_message("write").await.expect("run"));
    session
        .decide("decision_1", Decision::approve())
        .await
        .expect("partial");
    let id = session.id().to_owned();
    let before = session.pending().to_vec();
    drop(session);
    let listed = s
        .store
        .list_pending(agent_controller::store::now_millis())
        .await
        .expect("list");
    assert_eq!(listed.pending.len(), 1);
    let entry = &listed.pending[0];
    assert_eq!(entry.kind, PendingKind::ToolCall);
    assert_eq!(entry.decision_id, "decision_2");
    assert_eq!(entry.tool_name.as_deref(), Some("write_file"));
    assert_eq!(entry.args_sha256.as_deref(), Some(before[1].sha256()));
    assert_eq!(entry.sha256, before[1].sha256());
    let mut restored = s.restore(&id).await;
    assert_eq!(restored.pending(), before.as_slice());
    restored
        .decide("decision_2", Decision::approve())
        .await
        .expect("decide after restore");
    assert!(s.exists("a.txt") && s.exists("b.txt"));
    assert!(
        s.store
            .list_pending(agent_controller::store::now_millis())
            .await
            .expect("list")
            .pending
            .is_empty()
    );
}

#[tokio::test]
async fn of_two_racing_decisions_one_wins_and_the_other_changes_nothing() {
    let s = Setup::new(vec![calls([write("call_1", "a.txt", "A")]), text("done")]).await;
    let mut session = s.session("build").await;
    waiting(session.send_message("write").await.expect("run"));
    let id = session.id().to_owned();
    drop(session);
    let mut first = s.restore(&id).await;
    let mut second = s.restore(&id).await;
    first
        .decide("decision_1", Decision::reject())
        .await
        .expect("first wins");
    let err = second
        .decide("decision_1", Decision::approve())
        .await
        .expect_err("second loses");
    assert!(err.is_conflict(), "{err}");
    assert!(!s.exists("a.txt"), "the losing approval ran nothing");
    assert_eq!(second.pending().len(), 1, "the loser is unchanged");
    let stored = s.store.load(&id).await.expect("load").expect("record");
    assert!(stored.pending_tool_calls.is_empty());
    assert_eq!(stored.history[0].outcome, Some(DecisionOutcome::Rejected));
    let _: Value = serde_json::to_value(&stored).expect("record json");
}

#[tokio::test]
async fn tool_suspended_events_read_back_from_json_as_they_were() {
    let s = Setup::new(vec![calls([write("call_1", "a.txt", "hello")])]).await;
    let mut session = s.session("build").await;
    waiting(session.send_message("write a").await.expect("run"));
    let suspended: Vec<Event> = s
        .recorder
        .take()
        .into_iter()
        .filter(|e| matches!(e, Event::ToolSuspended { .. }))
        .collect();
    assert_eq!(suspended.len(), 1);
    let json = serde_json::to_value(&suspended[0]).expect("json");
    assert_eq!(json["type"], "tool_suspended");
    assert_eq!(json["suspendPayload"]["toolName"], "write_file");
    let back: Event = serde_json::from_value(json).expect("reads back");
    assert_eq!(back, suspended[0]);
}

#[tokio::test]
async fn a_session_with_calls_waiting_is_never_expired() {
    let s = Setup::new(vec![calls([write("call_1", "a.txt", "hello")])]).await;
    let mut session = s.session("build").await;
    waiting(session.send_message("write a").await.expect("run"));
    assert_eq!(s.store.expire(u64::MAX).await.expect("expire"), 0);
    assert!(s.store.load(session.id()).await.expect("load").is_some());
}

/// A tool that counts its runs, tells the test it started, and never finishes.
struct Hangs(
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<tokio::sync::Notify>,
);

#[agent_controller::async_trait]
impl agent_controller::Tool for Hangs {
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> String {
        "Deploys; never returns.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object" })
    }
    async fn execute(
        &self,
        _: &Value,
        _: &agent_controller::ToolContext<'_>,
    ) -> agent_controller::ToolOutput {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.1.notify_one();
        std::future::pending().await
    }
}

/// The approval is saved before the tool runs: a host that stops while the approved call runs
/// leaves it decided once, and the run carried on later answers the call "Interrupted" instead
/// of running it again.
#[tokio::test]
async fn an_approved_call_cut_off_by_a_stopped_host_is_never_run_again() {
    let server = ScriptedServer::start(vec![
        calls([call("call_1", "deploy", "{}")]),
        text("checked"),
    ])
    .await;
    let ws = Workspace::new();
    let store = Arc::new(MemoryStore::new());
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Arc::new(tokio::sync::Notify::new());
    let clock = TestClock::at(T0);
    let build = |runs: Arc<std::sync::atomic::AtomicUsize>| {
        let mut tools = ToolRegistry::new();
        tools
            .register(Arc::new(Hangs(runs, started.clone())))
            .expect("register");
        AgentController::builder(
            config::parse(
                "[[modes]]\nid = \"ops\"\nrequireApproval = [\"deploy\"]\n",
                "modes.toml",
            )
            .expect("config"),
            Arc::new(server.model()),
        )
        .tools(tools)
        .workspace(ws.path())
        .store(store.clone())
        .lease_duration(std::time::Duration::from_millis(50))
        .clock(clock.source())
        .build()
        .expect("controller")
    };
    let controller = build(runs.clone());
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    waiting(session.send_message("deploy").await.expect("run"));
    {
        let decided = session.decide("decision_1", Decision::approve());
        tokio::pin!(decided);
        tokio::select! {
            outcome = &mut decided => panic!("the tool hangs: {outcome:?}"),
            () = started.notified() => {} // the host stops here
        }
    }
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let id = session.id().to_owned();
    std::mem::forget(session); // the host is gone: no settle, no drop handling

    clock.advance(std::time::Duration::from_millis(100)); // past its lease
    let controller = build(runs.clone());
    let mut session = controller
        .restore_session(&id, agent_controller::SessionOptions::new())
        .await
        .expect("restore");
    assert_eq!(
        session.decision_history()[0].outcome,
        Some(DecisionOutcome::Approved),
        "the approval was saved before the tool ran"
    );
    let outcome = session.continue_run().await.expect("continue");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "never run again"
    );
    let result = s_result(&server, 1, "call_1").await;
    assert!(result.starts_with("Interrupted"), "{result}");
    assert_eq!(
        session.decide("decision_1", Decision::approve()).await,
        Err(SessionError::AlreadyDecided("decision_1".into()))
    );
}

/// The result text of `id` in the `n`-th request `server` received.
async fn s_result(server: &ScriptedServer, n: usize, id: &str) -> String {
    let bodies = server.bodies().await;
    bodies[n]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn events_come_in_the_documented_order_on_suspension_and_on_the_decision() {
    let s = Setup::new(vec![
        calls([
            write("call_1", "a.txt", "A"),
            call("call_2", "list_files", r#"{"path":"."}"#),
        ]),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    s.recorder.take();
    waiting(session.send_message("go").await.expect("run"));
    let of_run = |events: Vec<Event>| -> Vec<String> {
        events
            .into_iter()
            .filter_map(|e| match e {
                Event::AgentStart { .. } => Some("agent_start".to_owned()),
                Event::AgentEnd { reason, .. } => Some(format!("agent_end {reason}")),
                Event::ToolStart { tool_call_id, .. } => Some(format!("tool_start {tool_call_id}")),
                Event::ToolEnd { tool_call_id, .. } => Some(format!("tool_end {tool_call_id}")),
                Event::ToolSuspended { tool_call_id, .. } => {
                    Some(format!("tool_suspended {tool_call_id}"))
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        of_run(s.recorder.take()),
        [
            "agent_start",
            "tool_start call_1",
            "tool_start call_2",
            "tool_end call_2",
            "tool_suspended call_1",
            "agent_end suspended",
        ]
    );
    session
        .decide("decision_1", Decision::approve())
        .await
        .expect("decide");
    assert_eq!(
        of_run(s.recorder.take()),
        ["agent_start", "tool_end call_1", "agent_end completed"]
    );
}

/// Issue 19, item 3: an "always allow" given in the planning mode ends when the approved plan
/// switches mode, as at every mode change: the build mode's call of the same tool waits.
#[tokio::test]
async fn always_allow_given_in_plan_mode_ends_when_the_approved_plan_switches_mode() {
    let s = Setup::new(vec![
        calls([write("call_1", "notes.txt", "notes")]),
        calls([submit("call_2", ".agent/plans/p.md")]),
        calls([write("call_3", "src.txt", "built")]),
    ])
    .await;
    s.ws.plan("p.md", "# Plan\n\n1. Write src.txt.\n");
    let mut session = s.session("plan").await;
    waiting(session.send_message("plan it").await.expect("run"));
    let outcome = session
        .decide("decision_1", Decision::approve().always_allow())
        .await
        .expect("always allow");
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "{outcome:?}"
    );
    assert_eq!(session.always_allowed(), ["write_file"]);
    let outcome = session
        .decide("decision_2", Decision::approve())
        .await
        .expect("approve the plan");
    assert_eq!(session.mode().id(), "build");
    assert!(session.always_allowed().is_empty());
    let left = waiting(outcome);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].tool_name(), "write_file");
    assert!(!s.exists("src.txt"), "the build-mode call ran unasked");
    // The record says so too: a restore does not bring the allowance back.
    let restored = s.restore(session.id()).await;
    assert!(restored.always_allowed().is_empty());
}

/// Trust round 4, M2: "always allow" on call 1 of 3 parallel calls of the same tool approves
/// call 1 (the one shown) and allows the tool from then on; the other two, never shown, are
/// not approved with it: each is asked about on its own (here one approved, one rejected), and
/// the run carries on once every call is decided. A later reply's call of the tool runs unasked.
#[tokio::test]
async fn always_allow_on_one_of_three_parallel_calls_asks_about_the_others() {
    let s = Setup::new(vec![
        calls([
            write("call_1", "a.txt", "A"),
            write("call_2", "b.txt", "B"),
            write("call_3", "c.txt", "C"),
        ]),
        calls([write("call_4", "d.txt", "D")]),
        text("written"),
    ])
    .await;
    let mut session = s.session("build").await;
    let pending = waiting(session.send_message("write three").await.expect("run"));
    assert_eq!(pending.len(), 3);
    let left = waiting(
        session
            .decide(
                "decision_1",
                Decision::approve().always_allow().decided_by("ana"),
            )
            .await
            .expect("always allow"),
    );
    let ids: Vec<&str> = left.iter().map(|p| p.decision_id()).collect();
    assert_eq!(ids, ["decision_2", "decision_3"], "each still waits");
    assert_eq!(session.always_allowed(), ["write_file"]);
    let listed = s
        .store
        .list_pending(agent_controller::store::now_millis())
        .await
        .expect("list")
        .pending;
    let listed: Vec<&str> = listed.iter().map(|p| p.decision_id.as_str()).collect();
    assert_eq!(listed, ["decision_2", "decision_3"]);
    assert!(
        !s.exists("a.txt"),
        "nothing runs before every call is decided"
    );
    session
        .decide("decision_2", Decision::approve())
        .await
        .expect("approve");
    let outcome = session
        .decide("decision_3", Decision::reject())
        .await
        .expect("reject");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(s.exists("a.txt") && s.exists("b.txt") && !s.exists("c.txt"));
    assert!(
        s.exists("d.txt"),
        "the next reply's call runs under the allowance"
    );
    let history: Vec<(&str, Option<DecisionOutcome>, Option<&str>)> = session
        .decision_history()
        .iter()
        .map(|d| (d.decision_id.as_str(), d.outcome, d.allowed_by.as_deref()))
        .collect();
    assert_eq!(
        history[..3],
        [
            ("decision_1", Some(DecisionOutcome::Approved), None),
            ("decision_2", Some(DecisionOutcome::Approved), None),
            ("decision_3", Some(DecisionOutcome::Rejected), None),
        ]
    );
    assert!(session.decision_history()[0].always_allow);
}
