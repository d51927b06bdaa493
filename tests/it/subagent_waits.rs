//! A subagent's questions and approvals reach the user (issue 38): a child's call that waits for
//! approval, or its `ask_user`, suspends the parent run as pending decisions that name the
//! subagent, decided like any other; the child then carries on, and its final text is the
//! parent's `subagent` result. Driven by the real `OpenAiModel` against the scripted server,
//! which answers parent and child.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::event::DecisionOutcome;
use agent_controller::{
    AgentController, Decision, FileStore, RunOutcome, SessionOptions, SessionStore, ToolRegistry,
    config,
};
use common::Workspace;
use common::openai_server::{Reply, ScriptedServer, call, calls, text};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[subagents]]
id = "explore"
description = "Reads the code and reports."
instructions = "EXPLORE-INSTRUCTIONS"
availableTools = ["read_file", "write_file", "ask_user"]

[[modes]]
id = "careful"
default = true
availableTools = ["read_file", "write_file", "subagent", "ask_user"]
requireApproval = ["write_file"]
subagents = ["explore"]
"#;

struct Setup {
    server: ScriptedServer,
    ws: Workspace,
    store: Option<Arc<dyn SessionStore>>,
    concurrency: usize,
}

impl Setup {
    async fn new(script: Vec<Reply>) -> Self {
        Self {
            server: ScriptedServer::start(script).await,
            ws: Workspace::new(),
            store: None,
            concurrency: 1,
        }
    }

    fn stored(mut self) -> Self {
        let store = FileStore::open(self.ws.path().join(".sessions")).expect("store");
        self.store = Some(Arc::new(store));
        self
    }

    #[cfg(feature = "sqlite")]
    fn stored_in_sqlite(mut self) -> Self {
        let store = agent_controller::store::SqliteStore::open(self.ws.path().join("s.db"))
            .expect("sqlite");
        self.store = Some(Arc::new(store));
        self
    }

    fn controller(&self) -> AgentController {
        let mut builder = AgentController::builder(
            config::parse(CONFIG, "modes.toml").expect("config"),
            Arc::new(self.server.model()),
        )
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(self.ws.path())
        .subagent_concurrency(self.concurrency);
        if let Some(store) = &self.store {
            builder = builder.store(store.clone());
        }
        builder.build().expect("controller")
    }
}

fn subagent(id: &str, task: &str) -> common::openai_server::Call {
    call(
        id,
        "subagent",
        &json!({"agentType": "explore", "task": task}).to_string(),
    )
}

fn tool(id: &str, name: &str, args: Value) -> Reply {
    calls([call(id, name, &args.to_string())])
}

fn write(id: &str, path: &str) -> Reply {
    tool(id, "write_file", json!({"path": path, "content": "x"}))
}

#[tokio::test]
async fn a_childs_call_that_waits_suspends_the_parent_and_its_approval_lets_the_child_carry_on() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "Write notes.")]),
        write("c_1", "notes.txt"),
        text("CHILD-DONE: wrote notes."),
        text("Parent done."),
    ])
    .await;
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("Go").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    assert!(!s.ws.path().join("notes.txt").exists(), "nothing ran yet");
    let pending = session.pending();
    assert_eq!(pending.len(), 1, "{pending:?}");
    let waiting = &pending[0];
    assert_eq!(waiting.tool_name(), "write_file");
    assert_eq!(waiting.tool_call_id(), "c_1");
    let origin = waiting.subagent().expect("names the subagent");
    assert_eq!(origin.agent_type, "explore");
    assert_eq!(origin.tool_call_id, "call_1");
    assert!(origin.child_id.starts_with(session.id()), "{origin:?}");
    let shown =
        serde_json::to_value(waiting.as_tool_call().expect("a call").payload()).expect("json");
    assert_eq!(shown["subagent"]["agentType"], "explore", "{shown}");
    assert_eq!(shown["subagent"]["toolCallId"], "call_1", "{shown}");
    let id = waiting.decision_id().to_owned();
    let outcome = session
        .decide(&id, Decision::approve())
        .await
        .expect("decide");
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "Parent done."),
        "{outcome:?}"
    );
    assert!(s.ws.path().join("notes.txt").exists(), "the child wrote");
    assert_eq!(
        s.server.tool_results(3).await,
        ["CHILD-DONE: wrote notes."],
        "the parent reads the child's final text"
    );
    let history = session.decision_history();
    let record = history
        .iter()
        .find(|r| r.decision_id == id)
        .expect("the decision's record in the parent's history");
    assert_eq!(record.outcome, Some(DecisionOutcome::Approved));
    let named = record
        .subagent
        .as_ref()
        .expect("the record names the subagent");
    assert_eq!(named.tool_call_id, "call_1");
}

#[tokio::test]
async fn a_childs_question_reaches_the_user_and_the_answer_goes_to_the_child() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "Ask.")]),
        tool("c_1", "ask_user", json!({"question": "Which colour?"})),
        text("CHILD: the user said blue."),
        text("Parent done."),
    ])
    .await;
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("Go").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::AwaitingAnswer { .. }),
        "{outcome:?}"
    );
    let pending = session.pending();
    let question = pending[0].as_suspension().expect("a question");
    assert_eq!(pending[0].subagent().expect("named").tool_call_id, "call_1");
    let id = question.decision_id().to_owned();
    let outcome = session
        .decide(&id, Decision::answer(json!("blue")))
        .await
        .expect("answer");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let child_saw = s.server.tool_results(2).await;
    assert!(child_saw[0].contains("blue"), "{child_saw:?}");
    assert_eq!(
        s.server.tool_results(3).await,
        ["CHILD: the user said blue."]
    );
}

#[tokio::test]
async fn a_rejected_childs_call_is_refused_in_the_child_which_carries_on() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "Write notes.")]),
        write("c_1", "notes.txt"),
        text("CHILD: was refused."),
        text("Parent done."),
    ])
    .await;
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    session.send_message("Go").await.expect("run");
    let id = session.pending()[0].decision_id().to_owned();
    let outcome = session
        .decide(&id, Decision::reject_with("not now"))
        .await
        .expect("decide");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(!s.ws.path().join("notes.txt").exists());
    let child_saw = s.server.tool_results(2).await;
    assert!(child_saw[0].contains("not now"), "{child_saw:?}");
}

#[tokio::test]
async fn a_child_waits_while_a_sibling_runs_and_the_parent_suspends_once_after_it_settles() {
    // One child at a time: the first waits, the second finishes, then the parent suspends.
    let s = Setup::new(vec![
        calls([subagent("call_1", "Write a."), subagent("call_2", "Look.")]),
        write("c_1", "a.txt"),
        text("SECOND-CHILD-DONE"),
        text("FIRST-CHILD-DONE"),
        text("Parent done."),
    ])
    .await;
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("Go").await.expect("run");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(
        tool_calls.len(),
        1,
        "one suspension with the one waiting call"
    );
    assert_eq!(
        s.server.served(),
        3,
        "the sibling settled before the suspension"
    );
    let id = session.pending()[0].decision_id().to_owned();
    let outcome = session
        .decide(&id, Decision::approve())
        .await
        .expect("decide");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        s.server.tool_results(4).await,
        ["FIRST-CHILD-DONE", "SECOND-CHILD-DONE"],
        "each call gets its child's final text, in the model's order"
    );
}

#[tokio::test]
async fn a_child_can_wait_twice_and_decision_ids_stay_unique_in_the_parent() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "Write two.")]),
        write("c_1", "a.txt"),
        write("c_2", "b.txt"),
        text("CHILD: both written."),
        text("Parent done."),
    ])
    .await;
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    session.send_message("Go").await.expect("run");
    let first = session.pending()[0].decision_id().to_owned();
    let outcome = session
        .decide(&first, Decision::approve())
        .await
        .expect("decide");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "the child waits again: {outcome:?}"
    );
    let second = session.pending()[0].decision_id().to_owned();
    assert_ne!(first, second, "a new decision id");
    assert_eq!(session.pending()[0].tool_call_id(), "c_2");
    let outcome = session
        .decide(&second, Decision::approve())
        .await
        .expect("decide");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(s.ws.path().join("a.txt").exists() && s.ws.path().join("b.txt").exists());
}

fn restart_script() -> Vec<Reply> {
    vec![
        calls([subagent("call_1", "Write notes.")]),
        write("c_1", "notes.txt"),
        text("CHILD-DONE"),
        text("Parent done."),
    ]
}

/// Suspends a parent on its child's call in `s`'s store, drops it, restores it with another
/// controller, and decides there: the child carries on and the parent completes.
async fn survives_a_restart(s: Setup) {
    let (id, decision_id) = {
        let controller = s.controller();
        let mut session = controller
            .start_session(SessionOptions::new())
            .await
            .expect("session");
        session.send_message("Go").await.expect("run");
        let decision_id = session.pending()[0].decision_id().to_owned();
        (session.id().to_owned(), decision_id)
    };
    let controller = s.controller();
    let mut restored = controller
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore");
    let pending = restored.pending();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].decision_id(), decision_id);
    assert_eq!(pending[0].subagent().expect("named").agent_type, "explore");
    let outcome = restored
        .decide(&decision_id, Decision::approve())
        .await
        .expect("decide");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(s.ws.path().join("notes.txt").exists());
    assert_eq!(s.server.tool_results(3).await, ["CHILD-DONE"]);
    assert!(
        s.server.tool_results(2).await[0].contains("notes.txt"),
        "the child's conversation came back with it"
    );
}

#[tokio::test]
async fn a_waiting_child_survives_a_restart_and_is_decided_in_the_restored_session() {
    survives_a_restart(Setup::new(restart_script()).await.stored()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_waiting_child_survives_a_restart_with_the_sqlite_store() {
    survives_a_restart(Setup::new(restart_script()).await.stored_in_sqlite()).await;
}

#[tokio::test]
async fn a_dismissed_parent_keeps_its_childs_decision_pending_in_the_store() {
    let s = Setup::new(restart_script()).await.stored();
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    session.send_message("Go").await.expect("run");
    let id = session.id().to_owned();
    drop(session);
    let listing = s
        .store
        .as_ref()
        .expect("store")
        .list_pending_decisions()
        .await
        .expect("listing");
    let listed: Vec<_> = listing
        .pending
        .iter()
        .filter(|p| p.session_id == id)
        .collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        listed[0]
            .subagent
            .as_ref()
            .expect("names the child")
            .tool_call_id,
        "call_1"
    );
}

#[tokio::test]
async fn aborting_the_parent_ends_its_waiting_child_as_not_approved() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "Write notes.")]),
        write("c_1", "notes.txt"),
        text("After the abort."),
    ])
    .await;
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    session.send_message("Go").await.expect("run");
    let id = session.pending()[0].decision_id().to_owned();
    assert!(session.abort().await.expect("abort"));
    assert!(session.pending().is_empty());
    let history = session.decision_history();
    let record = history
        .iter()
        .find(|r| r.decision_id == id)
        .expect("record");
    assert_eq!(record.outcome, Some(DecisionOutcome::Cancelled));
    assert!(record.subagent.is_some(), "{record:?}");
    // The parent's `subagent` call has its result, and the child's call is not in the
    // parent's transcript.
    session.send_message("Next").await.expect("run");
    let results = s.server.tool_results(2).await;
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("subagent"), "{results:?}");
    assert!(!s.ws.path().join("notes.txt").exists());
}

#[tokio::test]
async fn a_childs_call_waits_beside_the_parents_own_and_both_are_decided() {
    let s = Setup::new(vec![
        calls([
            call(
                "w0",
                "write_file",
                &json!({"path": "parent.txt", "content": "p"}).to_string(),
            ),
            subagent("call_1", "Write child."),
        ]),
        write("c_1", "child.txt"),
        text("CHILD-DONE"),
        text("Parent done."),
    ])
    .await;
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("Go").await.expect("run");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(
        tool_calls.len(),
        2,
        "one suspension: the parent's call and the child's"
    );
    let pending = session.pending().to_vec();
    assert_eq!(pending[0].tool_call_id(), "w0");
    assert!(pending[0].subagent().is_none());
    assert_eq!(pending[1].tool_call_id(), "c_1");
    assert!(pending[1].subagent().is_some());
    let outcome = session
        .decide(pending[1].decision_id(), Decision::approve())
        .await
        .expect("decide the child's");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "the parent's own still waits: {outcome:?}"
    );
    assert!(!s.ws.path().join("child.txt").exists(), "nothing runs yet");
    let outcome = session
        .decide(pending[0].decision_id(), Decision::reject())
        .await
        .expect("decide the parent's");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(!s.ws.path().join("parent.txt").exists(), "rejected");
    assert!(
        s.ws.path().join("child.txt").exists(),
        "approved in the child"
    );
    let results = s.server.tool_results(3).await;
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[1], "CHILD-DONE", "{results:?}");
}

#[tokio::test]
async fn a_new_message_while_a_child_waits_ends_it_as_not_approved() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "Write notes.")]),
        write("c_1", "notes.txt"),
        text("Something else then."),
    ])
    .await;
    let controller = s.controller();
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    session.send_message("Go").await.expect("run");
    let id = session.pending()[0].decision_id().to_owned();
    let outcome = session.send_message("Never mind.").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(session.pending().is_empty());
    let record = session
        .decision_history()
        .iter()
        .find(|r| r.decision_id == id)
        .cloned()
        .expect("record");
    assert_eq!(record.outcome, Some(DecisionOutcome::Cancelled));
    let results = s.server.tool_results(2).await;
    assert_eq!(
        results.len(),
        1,
        "only the parent's subagent call: {results:?}"
    );
    assert!(results[0].contains("not approved"), "{results:?}");
    assert!(!s.ws.path().join("notes.txt").exists());
}

/// A run dropped after one child began to wait (its sibling still asking) leaves nothing of
/// that child behind: the next run's children, at the same positions, end as their own.
#[tokio::test]
async fn a_child_that_waited_in_a_dropped_run_is_not_taken_for_the_next_runs_child() {
    use std::time::Duration;
    let hang = Reply::Raw(wiremock::ResponseTemplate::new(500).set_delay(Duration::from_secs(600)));
    let mut s = Setup::new(vec![
        calls([subagent("call_1", "Write."), subagent("call_2", "Write.")]),
        write("c_1", "a.txt"),
        hang,
        calls([subagent("call_3", "Look."), subagent("call_4", "Look.")]),
        text("CHILD"),
        text("CHILD"),
        text("Parent done."),
    ])
    .await;
    s.concurrency = 2;
    let controller = s.controller();
    let waits = Arc::new(tokio::sync::Notify::new());
    let options = {
        let waits = waits.clone();
        SessionOptions::new().on_event(move |e| {
            if let agent_controller::Event::SubagentEvent { event, .. } = e
                && event.kind() == "tool_suspended"
            {
                waits.notify_one();
            }
        })
    };
    let mut session = controller.start_session(options).await.expect("session");
    // One child waits and the other's request (the hanging one) has reached the server: on a
    // loaded machine the wait can come first, and the hanging reply would then be left for the
    // next run (which timed out on it).
    let served = s.server.watcher();
    let ready = async {
        waits.notified().await;
        let three =
            tokio::task::spawn_blocking(move || served.wait_served(3, common::wait::PATIENCE));
        assert!(
            three.await.expect("watcher"),
            "the second child never asked its model"
        );
    };
    tokio::select! {
        outcome = session.send_message("Go") => panic!("the run ended: {outcome:?}"),
        () = ready => {}
    }
    // The run's future is dropped here: one child waits, the other still asks its model.
    let outcome = session.send_message("Again").await.expect("run");
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "Parent done."),
        "{outcome:?}"
    );
    assert!(session.pending().is_empty());
}

/// A plan submitted in the reply whose child waits is not executed (as beside any call that
/// waits): the run suspends on the child's call, never on a plan that would leave it behind.
#[tokio::test]
async fn a_plan_beside_a_waiting_child_is_not_executed() {
    const PLANNING: &str = r#"
[[subagents]]
id = "explore"
availableTools = ["read_file"]

[[modes]]
id = "plan"
default = true
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan", "subagent"]
rules = [ { tool = "read_file", path = "private/**", action = "ask" } ]

[[modes]]
id = "build"
availableTools = ["read_file"]
"#;
    let server = ScriptedServer::start(vec![
        calls([
            subagent("call_1", "Read the private notes."),
            call(
                "p_1",
                "submit_plan",
                &json!({"path": ".agent/plans/p.md"}).to_string(),
            ),
        ]),
        tool("c_1", "read_file", json!({"path": "private/a.txt"})),
    ])
    .await;
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join(".agent/plans")).expect("dir");
    std::fs::write(ws.path().join(".agent/plans/p.md"), "# P\n\n1. Step.\n").expect("plan");
    std::fs::create_dir_all(ws.path().join("private")).expect("dir");
    std::fs::write(ws.path().join("private/a.txt"), "A").expect("file");
    let controller = AgentController::builder(
        config::parse(PLANNING, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("Plan").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    let pending = session.pending();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(pending[0].subagent().is_some());
    let plan_result = session.messages().iter().find_map(|m| match m {
        agent_controller::model::Message::Tool {
            tool_call_id,
            content,
            ..
        } if tool_call_id == "p_1" => Some(content.clone()),
        _ => None,
    });
    assert!(
        plan_result.is_some_and(|r| r.contains("Not executed")),
        "the plan is not executed beside the waiting child"
    );
}
