//! `ask_user`, built in (issue 37): the model asks a clarifying question (Mastra's input:
//! `question`, `options`, `selectionMode`), the run waits for the answer, and the answer comes
//! back in the next request's tool result. Never gated by `requireApproval`; offered by modes
//! that list it and by a planning mode with no list. Bad input from the model is an error for
//! the model and nothing waits; an answer that does not fit is refused and changes nothing.
//! Driven by the real `OpenAiModel` against the scripted OpenAI-compatible server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::event::SuspensionKind;
use agent_controller::{
    AgentController, Decision, PendingDecision, RunOutcome, Session, SessionError, ToolRegistry,
    config,
};
use common::openai_server::{Reply, ScriptedServer, call, calls, text, tool_names};
use common::{Recorder, Workspace};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "ask_user"]
requireApproval = true

[[modes]]
id = "plan"
transitionsTo = "build"

[[modes]]
id = "free"
"#;

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    recorder: Recorder,
    _ws: Workspace,
}

impl Setup {
    async fn new(script: Vec<Reply>) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let controller = AgentController::builder(
            config::parse(CONFIG, "modes.toml").expect("config"),
            Arc::new(server.model()),
        )
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .build()
        .expect("controller");
        Self {
            server,
            controller,
            recorder: Recorder::default(),
            _ws: ws,
        }
    }

    async fn session(&self, mode: &str) -> Session {
        self.controller
            .start_session(self.recorder.options().mode(mode))
            .await
            .expect("session")
    }

    /// The `tool` message contents of the `n`-th request (0-based).
    async fn tool_results(&self, n: usize) -> Vec<String> {
        self.server.tool_results(n).await
    }
}

fn ask(id: &str, args: Value) -> Reply {
    calls([call(id, "ask_user", &args.to_string())])
}

fn question(outcome: RunOutcome) -> agent_controller::session::PendingSuspension {
    match outcome {
        RunOutcome::AwaitingAnswer { mut pending, .. } => match pending.remove(0) {
            PendingDecision::Suspension(s) => s,
            other => panic!("a question, got {other:?}"),
        },
        other => panic!("the run awaits an answer, got {other:?}"),
    }
}

#[tokio::test]
async fn the_model_asks_and_the_answer_is_in_the_next_requests_tool_result() {
    let options = json!([
        { "label": "Postgres", "description": "the server" },
        { "label": "SQLite" },
    ]);
    let s = Setup::new(vec![
        ask(
            "call_1",
            json!({ "question": "Which database?", "options": options }),
        ),
        text("SQLite it is."),
    ])
    .await;
    let mut session = s.session("build").await;
    // `requireApproval = true` gates every tool, yet the question is asked at once.
    let asked = question(session.send_message("set up storage").await.expect("send"));
    assert_eq!(asked.kind(), SuspensionKind::Question);
    assert_eq!(asked.tool_name(), "ask_user");
    assert_eq!(
        asked.payload().payload,
        json!({ "question": "Which database?", "options": options, "selectionMode": "single_select" })
    );
    let event = serde_json::to_value(agent_controller::event::Suspension::Tool(
        asked.payload().clone().into(),
    ))
    .expect("json");
    assert_eq!(event["kind"], "question");
    // The event as a host receives it: the question and its options beside `kind`, and the
    // payload whole as well.
    let emitted: Vec<Value> = s
        .recorder
        .take()
        .iter()
        .filter(|e| e.kind() == "tool_suspended")
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect();
    assert_eq!(emitted.len(), 1, "{emitted:?}");
    let shown = &emitted[0]["suspendPayload"];
    assert_eq!(shown["kind"], "question");
    assert_eq!(shown["question"], "Which database?");
    assert_eq!(shown["options"], options);
    assert_eq!(shown["selectionMode"], "single_select");
    assert_eq!(shown["payload"], asked.payload().payload);
    // Read back, it is the same payload (the fields beside `kind` are derived from it).
    let read: agent_controller::event::Suspension =
        serde_json::from_value(shown.clone()).expect("read back");
    assert_eq!(read.decision_id(), asked.decision_id());
    // Mastra's bare resume data, pinned through the JSON decision's own form as well.
    let sha = asked.payload().payload_sha256.clone();
    let outcome = session
        .decide_json(
            asked.decision_id(),
            &json!({ "action": "answered", "answer": "SQLite", "sha256": sha }),
        )
        .await
        .expect("answer");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(s.tool_results(1).await, ["The user chose: SQLite"]);
}

#[tokio::test]
async fn a_multi_select_takes_labels_and_refuses_anything_else() {
    let options = json!([{ "label": "a" }, { "label": "b" }, { "label": "c" }]);
    let s = Setup::new(vec![
        ask(
            "call_1",
            json!({ "question": "Which?", "options": options, "selectionMode": "multi_select" }),
        ),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    let asked = question(session.send_message("go").await.expect("send"));
    let id = asked.decision_id().to_owned();
    for bad in [
        json!("a"),
        json!(["z"]),
        json!([]),
        json!([1]),
        json!({ "a": true }),
    ] {
        let refused = session.decide(&id, Decision::answer(bad.clone())).await;
        assert!(
            matches!(refused, Err(SessionError::InvalidAnswer { .. })),
            "{bad}: {refused:?}"
        );
        assert_eq!(session.pending().len(), 1, "{bad}: still waits");
    }
    assert_eq!(s.server.served(), 1);
    let outcome = session
        .decide_json(&id, &json!(["a", "c"]))
        .await
        .expect("answer");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(s.tool_results(1).await, ["The user chose: a, c"]);
}

#[tokio::test]
async fn a_question_without_options_takes_free_text() {
    let s = Setup::new(vec![
        ask(
            "call_1",
            json!({ "question": "What should the page be called?" }),
        ),
        text("done"),
    ])
    .await;
    let mut session = s.session("build").await;
    let asked = question(session.send_message("go").await.expect("send"));
    assert_eq!(
        asked.payload().payload,
        json!({ "question": "What should the page be called?" })
    );
    // A free-text question's event has the question beside `kind`, and no options.
    let event = serde_json::to_value(agent_controller::event::Suspension::Tool(
        asked.payload().clone().into(),
    ))
    .expect("json");
    assert_eq!(event["question"], "What should the page be called?");
    assert!(
        event.get("options").is_none() && event.get("selectionMode").is_none(),
        "{event}"
    );
    let refused = session
        .decide(asked.decision_id(), Decision::answer(json!(["x"])))
        .await;
    assert!(matches!(refused, Err(SessionError::InvalidAnswer { .. })));
    session
        .decide(asked.decision_id(), Decision::answer(json!("Settings")))
        .await
        .expect("answer");
    assert_eq!(s.tool_results(1).await, ["The user answered: Settings"]);
}

#[tokio::test]
async fn bad_questions_are_errors_for_the_model_and_nothing_waits() {
    let many: Vec<Value> = (0..10_000)
        .map(|k| json!({ "label": format!("o{k}") }))
        .collect();
    let bad = [
        json!({ "question": "   " }),
        json!({ "question": "" }),
        json!({ "question": "q", "options": [{ "label": "a" }, { "label": "a" }] }),
        json!({ "question": "q", "options": many }),
        json!({ "question": "x".repeat(5_000) }),
        json!({ "question": "q", "selectionMode": "single_select" }),
        json!({ "question": "q", "options": [{ "label": "a" }], "selectionMode": "all" }),
        json!({ "options": [{ "label": "a" }] }),
    ];
    for args in bad {
        let s = Setup::new(vec![ask("call_1", args.clone()), text("ok")]).await;
        let mut session = s.session("build").await;
        let outcome = session.send_message("go").await.expect("send");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{args}: {outcome:?}"
        );
        assert!(session.pending().is_empty(), "{args}: nothing waits");
        let results = s.tool_results(1).await;
        assert_eq!(results.len(), 1);
        assert!(
            // Refused by the input schema before the tool runs, or by the tool itself.
            results[0].starts_with("Not executed: ")
                || results[0].starts_with("ask_user refused: "),
            "{args}: {}",
            results[0]
        );
    }
}

/// Listed by one mode, it is a tool of the controller: a mode with no list offers it, a
/// planning one too (it changes nothing).
#[tokio::test]
async fn a_mode_that_lists_it_offers_it_and_so_do_modes_with_no_list() {
    let s = Setup::new(vec![text("a"), text("b"), text("c")]).await;
    for mode in ["plan", "free", "build"] {
        let mut session = s.session(mode).await;
        session.send_message("hi").await.expect("send");
    }
    let bodies = s.server.bodies().await;
    let offered: Vec<bool> = bodies
        .iter()
        .map(|b| tool_names(b).iter().any(|n| n == "ask_user"))
        .collect();
    assert_eq!(offered, [true, true, true], "plan, free, build");
}

/// Listed by no mode, a planning mode with no list still offers it (it changes nothing), and
/// a mode whose list leaves it out does not.
#[tokio::test]
async fn a_planning_mode_with_no_list_offers_it_though_no_mode_lists_it() {
    let server = ScriptedServer::start(vec![text("a"), text("b")]).await;
    let ws = Workspace::new();
    let config = "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n\n\
                  [[modes]]\nid = \"build\"\ndefault = true\navailableTools = [\"read_file\"]\n";
    let controller = AgentController::builder(
        config::parse(config, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    for mode in ["plan", "build"] {
        let mut session = controller
            .start_session(agent_controller::SessionOptions::new().mode(mode))
            .await
            .expect("session");
        session.send_message("hi").await.expect("send");
    }
    let bodies = server.bodies().await;
    let offered: Vec<bool> = bodies
        .iter()
        .map(|b| tool_names(b).iter().any(|n| n == "ask_user"))
        .collect();
    assert_eq!(offered, [true, false], "plan, build");
}
