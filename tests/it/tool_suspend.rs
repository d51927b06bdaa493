//! Every tool can ask (issue 37): a tool ends its call by suspending
//! ([`ToolOutput::suspend`]) with a payload and the JSON Schema of the answer it takes; the run
//! suspends as for a plan, the call waits as a decision of its own (a third kind of the one
//! pending-decision type, beside the reply's calls that wait for approval), is saved, listed,
//! restored, expired and cancelled like the others, and nothing is ever invented for it.
//! Driven by the real `OpenAiModel` against the scripted OpenAI-compatible server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::event::{Suspension, SuspensionKind};
use agent_controller::store::{FileStore, MemoryStore, PendingKind, SessionStore};
use agent_controller::{
    AgentController, Decision, Event, PendingDecision, RunOutcome, Session, SessionError, Tool,
    ToolContext, ToolOutput, ToolRegistry, config, event::DecisionOutcome, event::RunState, jcs,
};
use async_trait::async_trait;
use common::clock::{T0, TestClock};
use common::openai_server::{Call, Reply, ScriptedServer, call, calls, text};
use common::{Recorder, Workspace};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "confirm_deploy"]
requireApproval = ["write_file"]
approvalTimeout = "1h"

[[modes]]
id = "free"
availableTools = ["read_file"]
"#;

/// A tool of the user's own that asks before it acts: it suspends with the target and a form
/// schema, and its resume step turns the answer into its result.
pub(crate) struct ConfirmDeploy;

pub(crate) fn form() -> Value {
    json!({
        "type": "object",
        "properties": { "confirm": { "type": "boolean" }, "note": { "type": "string" } },
        "required": ["confirm"],
        "additionalProperties": false,
    })
}

#[async_trait]
impl Tool for ConfirmDeploy {
    fn name(&self) -> &str {
        "confirm_deploy"
    }
    fn description(&self) -> String {
        "Asks the user to confirm a deploy target.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "target": { "type": "string" } },
            "required": ["target"],
        })
    }
    async fn execute(&self, args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        let target = args["target"].as_str().unwrap_or_default();
        ToolOutput::suspend(
            format!("Deploy to {target}? (needs the user's confirmation)"),
            json!({ "target": target }),
            form(),
        )
    }
    async fn resume(&self, args: &Value, answer: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        let target = args["target"].as_str().unwrap_or_default();
        if answer["confirm"] == json!(true) {
            ToolOutput::ok(format!("Deployed to {target}."))
        } else {
            ToolOutput::error(format!("The user did not confirm the deploy to {target}."))
        }
    }
}

pub(crate) fn deploy(id: &str, target: &str) -> Call {
    call(
        id,
        "confirm_deploy",
        &json!({ "target": target }).to_string(),
    )
}

fn write(id: &str, path: &str) -> Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": "x" }).to_string(),
    )
}

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    recorder: Recorder,
    clock: TestClock,
    ws: Workspace,
}

impl Setup {
    async fn new(script: Vec<Reply>) -> Self {
        Self::with_store(script, Arc::new(MemoryStore::new())).await
    }

    async fn with_store(script: Vec<Reply>, store: Arc<dyn SessionStore>) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let clock = TestClock::at(T0);
        let controller = controller(&server, &ws, store.clone(), &clock);
        Self {
            server,
            controller,
            recorder: Recorder::default(),
            clock,
            ws,
        }
    }

    fn exists(&self, name: &str) -> bool {
        self.ws.path().join(name).exists()
    }

    async fn session(&self) -> Session {
        self.controller
            .start_session(self.recorder.options())
            .await
            .expect("session")
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

    async fn result_of(&self, n: usize, id: &str) -> String {
        self.tool_results(n)
            .await
            .into_iter()
            .find(|(call, _)| call == id)
            .map(|(_, content)| content)
            .unwrap_or_else(|| panic!("no result for {id} in request {n}"))
    }
}

fn controller(
    server: &ScriptedServer,
    ws: &Workspace,
    store: Arc<dyn SessionStore>,
    clock: &TestClock,
) -> AgentController {
    let mut tools = ToolRegistry::with_workspace_tools();
    tools.register(Arc::new(ConfirmDeploy)).expect("register");
    AgentController::builder(
        config::parse(CONFIG, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(tools)
    .workspace(ws.path())
    .store(store)
    .clock(clock.source())
    .build()
    .expect("controller")
}

fn awaiting(outcome: RunOutcome) -> Vec<PendingDecision> {
    match outcome {
        RunOutcome::AwaitingAnswer { pending, .. } => pending,
        other => panic!("expected the run to await an answer, got {other:?}"),
    }
}

#[tokio::test]
async fn a_tool_that_suspends_suspends_the_run_with_a_decision_of_its_own() {
    let s = Setup::new(vec![calls([deploy("call_1", "staging")]), text("done")]).await;
    let mut session = s.session().await;
    let outcome = session.send_message("deploy").await.expect("send");
    assert_eq!(outcome.state(), RunState::Suspended);
    let pending = awaiting(outcome);
    assert_eq!(pending.len(), 1);
    let PendingDecision::Suspension(suspended) = &pending[0] else {
        panic!("a suspension: {pending:?}");
    };
    assert_eq!(suspended.kind(), SuspensionKind::Suspension);
    assert_eq!(suspended.tool_name(), "confirm_deploy");
    assert_eq!(suspended.tool_call_id(), "call_1");
    assert_eq!(suspended.decision_id(), "decision_1");
    let payload = suspended.payload();
    assert_eq!(payload.payload, json!({ "target": "staging" }));
    assert_eq!(payload.answer_schema, form());
    assert_eq!(
        payload.payload_sha256,
        jcs::sha256(&json!({ "target": "staging" }))
    );
    assert_eq!(pending[0].sha256(), payload.payload_sha256);
    assert!(
        pending[0].deadline_at_ms().is_some(),
        "the mode's approvalTimeout"
    );
    assert_eq!(session.pending(), pending.as_slice());
    // The model was called once: the run waits.
    assert_eq!(s.server.served(), 1);

    let events = s.recorder.take();
    let suspended_events: Vec<&Suspension> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolSuspended {
                suspend_payload, ..
            } => Some(suspend_payload),
            _ => None,
        })
        .collect();
    assert_eq!(suspended_events.len(), 1, "{events:?}");
    let json = serde_json::to_value(suspended_events[0]).expect("json");
    assert_eq!(json["kind"], "suspension");
    assert_eq!(json["toolName"], "confirm_deploy");
    assert_eq!(json["payload"], json!({ "target": "staging" }));
    assert_eq!(json["decisionId"], "decision_1");
    assert_eq!(json["payloadSha256"], payload.payload_sha256);
    // Read back, it is a tool's suspension and nothing else.
    let back: Suspension = serde_json::from_value(json).expect("back");
    assert_eq!(back.as_tool(), Some(payload));
    assert!(matches!(
        events.last(),
        Some(Event::AgentEnd {
            reason: RunState::Suspended,
            ..
        })
    ));
}

#[tokio::test]
async fn suspension_payloads_are_tagged_so_no_kind_reads_as_another() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt"), deploy("call_2", "prod")]),
        text("done"),
    ])
    .await;
    let mut session = s.session().await;
    session.send_message("go").await.expect("send");
    let mut kinds = Vec::new();
    for event in s.recorder.take() {
        if let Event::ToolSuspended {
            suspend_payload, ..
        } = event
        {
            let json = serde_json::to_value(&suspend_payload).expect("json");
            kinds.push(json["kind"].as_str().expect("a kind").to_owned());
            let back: Suspension = serde_json::from_value(json).expect("back");
            assert_eq!(back, suspend_payload);
        }
    }
    assert_eq!(kinds, ["tool_call", "suspension"]);
    // A tool call's payload tagged as a plan is refused, not read as a plan.
    let mut forged =
        serde_json::to_value(session.pending()[0].as_tool_call().expect("call").payload())
            .expect("json");
    forged["kind"] = json!("plan");
    assert!(serde_json::from_value::<Suspension>(forged).is_err());
}

#[tokio::test]
async fn a_suspension_waits_beside_the_replys_approvals_each_decided_on_its_own() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt"), deploy("call_2", "staging")]),
        text("done"),
    ])
    .await;
    let mut session = s.session().await;
    let pending = awaiting(session.send_message("go").await.expect("send"));
    let kinds: Vec<&str> = pending
        .iter()
        .map(|p| match p {
            PendingDecision::ToolCall(_) => "tool_call",
            PendingDecision::Suspension(_) => "suspension",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["tool_call", "suspension"], "in the model's order");
    // The approval of the write does not decide the suspension: the run still waits on it.
    let outcome = session
        .decide("decision_1", Decision::reject())
        .await
        .expect("reject the write");
    let left = awaiting(outcome);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].decision_id(), "decision_2");
    assert_eq!(s.server.served(), 1);
    // Declined: the model is told the user did not answer; nothing is invented.
    let outcome = session
        .decide("decision_2", Decision::reject_with("not now"))
        .await
        .expect("decline");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let declined = s.result_of(1, "call_2").await;
    assert!(declined.starts_with("Not answered"), "{declined}");
    assert!(declined.contains("not now"), "{declined}");
    let history = session.decision_history();
    let record = history
        .iter()
        .find(|d| d.decision_id == "decision_2")
        .expect("recorded");
    assert_eq!(record.outcome, Some(DecisionOutcome::Rejected));
    assert_eq!(record.tool_name.as_deref(), Some("confirm_deploy"));
}

#[tokio::test]
async fn an_approval_of_a_suspension_is_refused_and_changes_nothing() {
    let s = Setup::new(vec![calls([deploy("call_1", "staging")]), text("done")]).await;
    let mut session = s.session().await;
    session.send_message("deploy").await.expect("send");
    let before = session.pending().to_vec();
    for decision in [
        Decision::approve(),
        Decision::reject().to("free"),
        Decision::reject().always_allow(),
    ] {
        let refused = session.decide("decision_1", decision).await;
        assert!(
            matches!(refused, Err(SessionError::MalformedDecision(_))),
            "{refused:?}"
        );
    }
    let pinned = session
        .decide("decision_1", Decision::reject().with_sha256("0".repeat(64)))
        .await;
    assert!(
        matches!(pinned, Err(SessionError::PayloadSha256Mismatch { .. })),
        "{pinned:?}"
    );
    assert_eq!(session.pending(), before.as_slice());
    assert_eq!(s.server.served(), 1);
}

#[tokio::test]
async fn a_suspension_is_saved_listed_and_restored_after_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).expect("store"));
    let s = Setup::with_store(
        vec![calls([deploy("call_1", "staging")]), text("done")],
        store,
    )
    .await;
    let mut session = s.session().await;
    let id = session.id().to_owned();
    let pending = awaiting(session.send_message("deploy").await.expect("send"));
    drop(session);

    let listed = s.controller.list_pending().await.expect("list").pending;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].kind, PendingKind::Suspension);
    assert_eq!(listed[0].decision_id, "decision_1");
    assert_eq!(listed[0].tool_name.as_deref(), Some("confirm_deploy"));
    assert_eq!(listed[0].payload, Some(json!({ "target": "staging" })));
    assert_eq!(listed[0].answer_schema, Some(form()));
    assert_eq!(listed[0].sha256, pending[0].sha256());

    // Another process (a new controller on the same store) restores it.
    let other = controller(
        &s.server,
        &s.ws,
        Arc::new(FileStore::open(dir.path()).expect("store")),
        &s.clock,
    );
    let restored = other
        .restore_session(&id, agent_controller::SessionOptions::new())
        .await
        .expect("restore");
    assert_eq!(restored.pending(), pending.as_slice());
}

#[tokio::test]
async fn a_new_message_abort_or_switch_is_no_answer() {
    // A new message: the model is told the user did not answer, and reads the message.
    let s = Setup::new(vec![
        calls([deploy("call_1", "staging")]),
        text("ok, not deploying"),
    ])
    .await;
    let mut session = s.session().await;
    session.send_message("deploy").await.expect("send");
    let outcome = session.send_message("wait, no").await.expect("send");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let result = s.result_of(1, "call_1").await;
    assert!(
        result.starts_with("Not answered: the user sent a new message"),
        "{result}"
    );
    assert!(session.pending().is_empty());
    let record = session
        .decision_history()
        .last()
        .cloned()
        .expect("recorded");
    assert_eq!(record.outcome, Some(DecisionOutcome::Cancelled));

    // An abort and a manual switch: the same, with their own reasons.
    for (how, expected) in [
        ("abort", "the run was aborted"),
        ("switch", "switched mode"),
    ] {
        let s = Setup::new(vec![calls([deploy("call_1", "staging")]), text("next")]).await;
        let mut session = s.session().await;
        session.send_message("deploy").await.expect("send");
        match how {
            "abort" => assert!(session.abort().await.expect("abort")),
            _ => assert!(session.switch_mode("free").await.expect("switch")),
        }
        assert!(session.pending().is_empty());
        let content = session
            .messages()
            .iter()
            .find_map(|m| match m {
                agent_controller::model::Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("the call has a result: {:?}", session.messages()));
        assert!(content.starts_with("Not answered"), "{content}");
        assert!(content.contains(expected), "{content}");
    }
}

#[tokio::test]
async fn a_suspension_past_its_deadline_expires_unanswered() {
    let s = Setup::new(vec![calls([deploy("call_1", "staging")]), text("done")]).await;
    let mut session = s.session().await;
    session.send_message("deploy").await.expect("send");
    assert!(session.expire_if_due().await.expect("expire").is_empty());
    s.clock.advance(std::time::Duration::from_secs(3601));
    let expired = session.expire_if_due().await.expect("expire");
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].outcome, Some(DecisionOutcome::Expired));
    assert_eq!(expired[0].decision_id, "decision_1");
    assert!(session.pending().is_empty());
    let Some(agent_controller::model::Message::Tool { content, .. }) = session.messages().last()
    else {
        panic!("the call has a result");
    };
    assert!(
        content.starts_with("Not answered: the user gave no answer within 1h"),
        "{content}"
    );
    // No model call followed.
    assert_eq!(s.server.served(), 1);
}
/// Trial 5 L8: an expired suspension was not answered, not rejected. Its audit record says
/// which kind of decision expired (`suspensionKind`), and an answer after the deadline is
/// refused with a message that speaks of a call that was not answered.
#[tokio::test]
async fn an_expired_suspension_is_recorded_as_its_kind_and_spoken_of_as_not_answered() {
    let s = Setup::new(vec![calls([deploy("call_1", "staging")]), text("done")]).await;
    let mut session = s.session().await;
    session.send_message("deploy").await.expect("send");
    s.clock.advance(std::time::Duration::from_secs(3601));
    let refused = session
        .decide("decision_1", Decision::answer(json!({ "confirm": true })))
        .await
        .expect_err("too late");
    let text = refused.to_string();
    assert!(
        text.contains("so the `confirm_deploy` tool call was not answered"),
        "{text}"
    );
    assert!(!text.contains("rejected"), "{text}");
    let record = session
        .decision_history()
        .iter()
        .find(|d| d.decision_id == "decision_1")
        .expect("recorded");
    assert_eq!(record.outcome, Some(DecisionOutcome::Expired));
    assert_eq!(record.suspension_kind, Some(SuspensionKind::Suspension));
    let json = serde_json::to_value(record).expect("json");
    assert_eq!(json["suspensionKind"], "suspension", "{json}");
}

// Answering (issue 37, "Answering"): an answer pinned to the payload's sha256, checked against
// the schema the tool suspended with, handed to the tool's resume step.

fn sha_of(pending: &[PendingDecision], decision_id: &str) -> String {
    pending
        .iter()
        .find(|p| p.decision_id() == decision_id)
        .map(|p| p.sha256().to_owned())
        .expect("waits")
}

#[tokio::test]
async fn an_answer_goes_to_the_tools_resume_step_and_its_result_to_the_model() {
    let s = Setup::new(vec![calls([deploy("call_1", "staging")]), text("done")]).await;
    let mut session = s.session().await;
    let pending = awaiting(session.send_message("deploy").await.expect("send"));
    let answer = Decision::answer(json!({ "confirm": true }))
        .with_sha256(sha_of(&pending, "decision_1"))
        .decided_by("alice");
    let outcome = session.decide("decision_1", answer).await.expect("answer");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(s.result_of(1, "call_1").await, "Deployed to staging.");
    let record = session
        .decision_history()
        .iter()
        .find(|d| d.decision_id == "decision_1")
        .cloned()
        .expect("recorded");
    assert_eq!(record.outcome, Some(DecisionOutcome::Answered));
    assert_eq!(record.decided_by.as_deref(), Some("alice"));
    assert_eq!(record.sha256.as_deref(), Some(pending[0].sha256()));
    // Exactly once: answered, it waits no more.
    assert_eq!(
        session
            .decide("decision_1", Decision::answer(json!({ "confirm": true })))
            .await,
        Err(SessionError::AlreadyDecided("decision_1".into()))
    );
}

#[tokio::test]
async fn an_answer_that_does_not_fit_the_schema_is_refused_and_changes_nothing() {
    let s = Setup::new(vec![calls([deploy("call_1", "staging")]), text("done")]).await;
    let mut session = s.session().await;
    let pending = awaiting(session.send_message("deploy").await.expect("send"));
    for bad in [
        json!({ "confirm": "yes" }),
        json!("yes"),
        json!({}),
        json!({ "confirm": true, "target": "prod" }),
        json!(null),
    ] {
        let refused = session
            .decide("decision_1", Decision::answer(bad.clone()))
            .await;
        let Err(SessionError::InvalidAnswer {
            decision_id,
            reason,
        }) = &refused
        else {
            panic!("{bad}: {refused:?}");
        };
        assert_eq!(decision_id, "decision_1");
        assert!(!reason.is_empty());
        assert_eq!(
            session.pending(),
            pending.as_slice(),
            "{bad}: nothing changed"
        );
    }
    // Mastra's bare resume data is read as the answer, and refused for not fitting.
    let bare = session.decide_json("decision_1", &json!("yes")).await;
    assert!(
        matches!(bare, Err(SessionError::InvalidAnswer { .. })),
        "{bare:?}"
    );
    // Pinned to another payload: refused too.
    let pinned = session
        .decide(
            "decision_1",
            Decision::answer(json!({ "confirm": true })).with_sha256("0".repeat(64)),
        )
        .await;
    assert!(
        matches!(pinned, Err(SessionError::PayloadSha256Mismatch { .. })),
        "{pinned:?}"
    );
    // An answer with the parts of another kind's decision is malformed.
    let mut with_target = Decision::answer(json!({ "confirm": true }));
    with_target.to = Some("free".into());
    assert!(matches!(
        session.decide("decision_1", with_target).await,
        Err(SessionError::MalformedDecision(_))
    ));
    assert_eq!(session.pending(), pending.as_slice());
    assert_eq!(s.server.served(), 1);
    // The question still waits, and a fitting answer carries the run on.
    let outcome = session
        .decide("decision_1", Decision::answer(json!({ "confirm": false })))
        .await
        .expect("answer");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        s.result_of(1, "call_1").await,
        "The user did not confirm the deploy to staging."
    );
}

#[tokio::test]
async fn an_answer_for_a_decision_that_is_not_a_suspension_is_refused() {
    let s = Setup::new(vec![
        calls([write("call_1", "a.txt"), deploy("call_2", "staging")]),
        text("done"),
    ])
    .await;
    let mut session = s.session().await;
    let pending = awaiting(session.send_message("go").await.expect("send"));
    let refused = session
        .decide("decision_1", Decision::answer(json!({ "confirm": true })))
        .await;
    assert!(
        matches!(refused, Err(SessionError::MalformedDecision(ref why)) if why.contains("not")),
        "{refused:?}"
    );
    // Bare resume data for a tool call waiting for approval is no decision at all.
    let bare = session.decide_json("decision_1", &json!("yes")).await;
    assert!(
        matches!(bare, Err(SessionError::MalformedDecision(_))),
        "{bare:?}"
    );
    // An approval's JSON with an answer is refused as well.
    let refused = session
        .decide_json(
            "decision_1",
            &json!({ "action": "approved", "answer": { "confirm": true } }),
        )
        .await;
    assert!(
        matches!(refused, Err(SessionError::MalformedDecision(_))),
        "{refused:?}"
    );
    assert_eq!(session.pending(), pending.as_slice());
    assert!(!s.exists("a.txt"));
}

#[tokio::test]
async fn an_answer_given_while_another_call_waits_is_kept_across_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).expect("store"));
    let s = Setup::with_store(
        vec![
            calls([write("call_1", "a.txt"), deploy("call_2", "prod")]),
            text("done"),
        ],
        store,
    )
    .await;
    let mut session = s.session().await;
    let id = session.id().to_owned();
    awaiting(session.send_message("go").await.expect("send"));
    // The answer, as JSON (what `decide --answer-json` sends): only the approval waits now.
    let outcome = session
        .decide_json(
            "decision_2",
            &json!({ "action": "answered", "answer": { "confirm": true } }),
        )
        .await
        .expect("answer");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
        panic!("the write still waits: {outcome:?}");
    };
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0].decision_id(), "decision_1");
    assert_eq!(s.server.served(), 1, "the tool's resume waits for the run");
    drop(session);

    let other = controller(
        &s.server,
        &s.ws,
        Arc::new(FileStore::open(dir.path()).expect("store")),
        &s.clock,
    );
    let mut restored = other
        .restore_session(&id, agent_controller::SessionOptions::new())
        .await
        .expect("restore");
    let answered = restored.pending()[1].as_suspension().expect("a suspension");
    assert_eq!(answered.answer(), Some(&json!({ "confirm": true })));
    let outcome = restored
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(s.result_of(1, "call_2").await, "Deployed to prod.");
    assert!(s.exists("a.txt"));
}

#[tokio::test]
async fn a_tool_that_needs_approval_runs_once_approved_then_waits_for_its_answer() {
    let server = ScriptedServer::start(vec![calls([deploy("call_1", "prod")]), text("done")]).await;
    let ws = Workspace::new();
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(ConfirmDeploy)).expect("register");
    let graph = config::parse(
        "[[modes]]\nid = \"careful\"\navailableTools = [\"confirm_deploy\"]\nrequireApproval = [\"confirm_deploy\"]\n",
        "modes.toml",
    )
    .expect("config");
    let controller = AgentController::builder(graph, Arc::new(server.model()))
        .tools(tools)
        .workspace(ws.path())
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("deploy").await.expect("send");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
        panic!("asked about first: {outcome:?}");
    };
    let outcome = session
        .decide(tool_calls[0].decision_id(), Decision::approve())
        .await
        .expect("approve");
    let pending = awaiting(outcome);
    assert_eq!(
        pending[0].decision_id(),
        "decision_2",
        "a decision of its own"
    );
    let outcome = session
        .decide("decision_2", Decision::answer(json!({ "confirm": true })))
        .await
        .expect("answer");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let bodies = server.bodies().await;
    let results: Vec<&Value> = bodies[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1, "one result for the one call");
    assert_eq!(results[0]["content"], "Deployed to prod.");
}
