//! Every request body the OpenAI provider sends, over whole cycles, rendered through strict chat
//! templates of our own (`tests/fixtures/chat_templates/`, with `minijinja`) that refuse what
//! Qwen3.5's, Gemma's and Mistral's templates refuse: a `system` message anywhere but first,
//! roles out of order, tool results that answer no call. A server running such a template
//! answers the refused request with an error and the run ends `failed`, typically right after
//! the user approved a plan.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::model::openai::{OpenAiModel, OpenAiSettings, RUN_ENDED_REPLY, RetryPolicy};
use agent_controller::store::{MemoryStore, SessionStore};
use agent_controller::tool::{Tool, ToolContext, ToolOutput};
use agent_controller::{
    AgentController, Decision, RunOutcome, Session, SessionOptions, ToolRegistry,
};
use async_trait::async_trait;
use common::openai_server::{Reply, ScriptedServer, call, calls, roles, submit, text};
use common::{Workspace, graph};
use minijinja::value::Serde;
use minijinja::{Environment, Error, ErrorKind, Value as Jinja, context};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The templates, by name (see `tests/fixtures/chat_templates/README.md`).
const TEMPLATES: [(&str, &str); 3] = [
    (
        "qwen3.5",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/chat_templates/qwen3.5.jinja"
        )),
    ),
    (
        "gemma",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/chat_templates/gemma.jinja"
        )),
    ),
    (
        "mistral",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/chat_templates/mistral.jinja"
        )),
    ),
];

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    // What Hugging Face's `apply_chat_template` and llama.cpp provide to chat templates.
    env.add_function(
        "raise_exception",
        |message: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        },
    );
    for (name, source) in TEMPLATES {
        env.add_template(name, source).expect("a valid template");
    }
    env
}

/// Renders `body` (a chat-completions request) through the template `name`.
fn render(env: &Environment<'_>, name: &str, body: &Value) -> Result<String, Error> {
    let template = env.get_template(name).expect("template");
    template.render(context! {
        messages => Jinja::from(Serde(&body["messages"])),
        tools => Jinja::from(Serde(&body["tools"])),
        add_generation_prompt => true,
    })
}

/// Every refusal of every template for every body, one line each.
fn refusals(bodies: &[Value]) -> Vec<String> {
    let env = environment();
    let mut refused = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        for (name, _) in TEMPLATES {
            if let Err(error) = render(&env, name, body) {
                refused.push(format!(
                    "request {i} {:?} refused by {name}: {error}",
                    roles(body)
                ));
            }
        }
    }
    refused
}

#[track_caller]
fn assert_every_template_accepts(bodies: &[Value], expected_requests: usize) {
    assert_eq!(bodies.len(), expected_requests, "{bodies:#?}");
    let refused = refusals(bodies);
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

// --- The templates refuse what the real ones refuse -------------------------------------------

fn system(content: &str) -> Value {
    json!({"role": "system", "content": content})
}
fn user(content: &str) -> Value {
    json!({"role": "user", "content": content})
}
fn assistant(content: &str) -> Value {
    json!({"role": "assistant", "content": content})
}
fn tool_calls(ids: &[&str]) -> Value {
    let calls: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}))
        .collect();
    json!({"role": "assistant", "tool_calls": calls})
}
fn tool(id: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": "result"})
}

/// The refusal of each template (qwen3.5, gemma, mistral) for `messages`, `None` for none.
fn refusal_by_template(messages: Vec<Value>) -> [Option<String>; 3] {
    let env = environment();
    let body = json!({"messages": messages});
    TEMPLATES.map(|(name, _)| render(&env, name, &body).err().map(|e| e.to_string()))
}

#[track_caller]
fn assert_refusals(messages: Vec<Value>, expected: [Option<&str>; 3]) {
    let got = refusal_by_template(messages);
    for ((got, expected), (name, _)) in got.iter().zip(expected).zip(TEMPLATES) {
        match (got, expected) {
            (None, None) => {}
            (Some(got), Some(expected)) => assert!(got.contains(expected), "{name}: {got}"),
            _ => panic!("{name}: refused {got:?}, expected {expected:?}"),
        }
    }
}

const ALTERNATE: &str = "conversation roles must alternate user/assistant/user/assistant/...";
const GEMMA_ALTERNATE: &str = "Conversation roles must alternate user/assistant/user/assistant/...";

#[test]
fn the_templates_accept_a_well_formed_tool_conversation() {
    assert_refusals(
        vec![
            system("Plan."),
            user("Add dark mode"),
            tool_calls(&["c1", "c2"]),
            tool("c2"),
            tool("c1"),
            assistant("Planned."),
            user("Thanks"),
            assistant("You're welcome."),
        ],
        [None, None, None],
    );
}

#[test]
fn a_system_message_after_the_first_is_refused_by_every_template() {
    assert_refusals(
        vec![
            system("Plan."),
            user("Add dark mode"),
            tool_calls(&["c1"]),
            tool("c1"),
            system("Mode changed."),
        ],
        [
            Some("System message must be at the beginning."),
            Some(GEMMA_ALTERNATE),
            Some("with the exception of an initial optional system message!"),
        ],
    );
}

#[test]
fn a_user_message_after_a_user_message_or_after_tool_results_breaks_alternation() {
    // Qwen's template takes both; Gemma's and Mistral's want user and assistant to alternate.
    assert_refusals(
        vec![system("Plan."), user("Add dark mode"), user("Again")],
        [None, Some(GEMMA_ALTERNATE), Some(ALTERNATE)],
    );
    assert_refusals(
        vec![
            system("Plan."),
            user("Add dark mode"),
            tool_calls(&["c1"]),
            tool("c1"),
            user("Again"),
        ],
        [None, Some(GEMMA_ALTERNATE), Some(ALTERNATE)],
    );
    assert_refusals(
        vec![system("Plan."), assistant("Hello")],
        [
            Some("No user query found in messages."),
            Some(GEMMA_ALTERNATE),
            Some(ALTERNATE),
        ],
    );
}

#[test]
fn tool_results_must_answer_the_calls_just_made() {
    let mistral = |messages| refusal_by_template(messages)[2].clone();
    let stray = mistral(vec![user("Plan it"), tool("c9")]).expect("refused");
    assert!(stray.contains("Tool results must follow"), "{stray}");
    let wrong_id =
        mistral(vec![user("Plan it"), tool_calls(&["c1"]), tool("c2")]).expect("refused");
    assert!(wrong_id.contains("Tool results must follow"), "{wrong_id}");
    let unanswered = mistral(vec![
        user("Plan it"),
        tool_calls(&["c1", "c2"]),
        tool("c1"),
        assistant("Done."),
    ])
    .expect("refused");
    assert!(unanswered.contains("needs a result"), "{unanswered}");
}

#[test]
fn qwen_refuses_no_messages_and_no_user_query() {
    let qwen = |messages| refusal_by_template(messages)[0].clone();
    assert!(
        qwen(vec![])
            .expect("refused")
            .contains("No messages provided.")
    );
    assert!(
        qwen(vec![system("Plan.")])
            .expect("refused")
            .contains("No user query found in messages.")
    );
    assert!(
        qwen(vec![
            user("x"),
            json!({"role": "developer", "content": "y"})
        ])
        .expect("refused")
        .contains("Unexpected message role.")
    );
}

// --- Whole cycles through the real provider ---------------------------------------------------

const CONFIG: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
instructions = "You are planning. Write the plan with write_plan, then call submit_plan."
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan", "hang"]

[[modes]]
id = "build"
name = "Build"
default = true
instructions = "Implement the approved plan step by step."
"#;

/// A tool that says it started, then never finishes (the run is cancelled while it runs).
struct Hang(Arc<Notify>);

#[async_trait]
impl Tool for Hang {
    fn name(&self) -> &str {
        "hang"
    }
    fn description(&self) -> String {
        "Never finishes.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _: &Value, _: &ToolContext<'_>) -> ToolOutput {
        self.0.notify_one();
        std::future::pending().await
    }
}

struct Cycle {
    server: ScriptedServer,
    workspace: Workspace,
    store: Arc<MemoryStore>,
    started: Arc<Notify>,
    config: &'static str,
}

impl Cycle {
    async fn new(script: Vec<Reply>) -> Self {
        Self::with_config(script, CONFIG).await
    }

    async fn with_config(script: Vec<Reply>, config: &'static str) -> Self {
        Self {
            server: ScriptedServer::start(script).await,
            workspace: Workspace::new(),
            store: Arc::new(MemoryStore::default()),
            started: Arc::new(Notify::new()),
            config,
        }
    }

    /// A controller (a new one each call, as a restarted host has) on the shared server, store
    /// and workspace.
    fn controller(&self) -> AgentController {
        let settings = OpenAiSettings::new(self.server.base_url())
            .api_key("sk-test")
            .default_model("openai/test-model")
            .retry_policy(RetryPolicy::none());
        let mut tools = ToolRegistry::with_workspace_tools();
        tools
            .register(Arc::new(Hang(self.started.clone())))
            .expect("register");
        let store: Arc<dyn SessionStore> = self.store.clone();
        AgentController::builder(
            graph(self.config),
            Arc::new(OpenAiModel::new(settings).expect("model")),
        )
        .tools(tools)
        .workspace(self.workspace.path())
        .store(store)
        .build()
        .expect("controller")
    }

    async fn session(&self) -> Session {
        self.controller()
            .start_session(SessionOptions::new().mode("plan"))
            .await
            .expect("session")
    }

    async fn bodies(&self) -> Vec<Value> {
        self.server.bodies().await
    }
}

/// `write_plan` of `path` (under the plans directory) with a small plan.
fn write(id: &str, name: &str, title: &str) -> Reply {
    let content = format!("# {title}\n\n## Steps\n1. Add a toggle.\n2. Test it.\n");
    calls([call(
        id,
        "write_plan",
        &json!({"path": name, "content": content}).to_string(),
    )])
}

/// Sends `message`; the run must suspend on a plan. Returns the run and tool-call ids.
async fn suspended(session: &mut Session, message: &str) -> (Arc<str>, String) {
    match session.send_message(message).await.expect("send_message") {
        RunOutcome::Suspended {
            run_id,
            tool_call_id,
            ..
        } => (run_id, tool_call_id),
        other => panic!("expected a suspension, got {other:?}"),
    }
}

#[track_caller]
fn assert_completed(outcome: &RunOutcome, expected: &str) {
    assert!(
        matches!(outcome, RunOutcome::Completed { text, .. } if text == expected),
        "{outcome:?}"
    );
}

const PLAN: &str = ".agent/plans/dark-mode.md";

#[tokio::test]
async fn plan_submit_approve_build_then_a_next_message() {
    let cycle = Cycle::new(vec![
        write("call_0", "dark-mode.md", "Add dark mode"),
        calls([submit("call_1", PLAN)]),
        text("Building."),
        text("You're welcome."),
    ])
    .await;
    let mut session = cycle.session().await;
    let (run, call) = suspended(&mut session, "Add dark mode").await;
    let outcome = session
        .resume(&run, &call, Decision::approve_with("also update the docs"))
        .await
        .expect("resume");
    assert_completed(&outcome, "Building.");
    assert_eq!(session.mode().id(), "build");
    let outcome = session.send_message("Thanks").await.expect("send_message");
    assert_completed(&outcome, "You're welcome.");
    assert_every_template_accepts(&cycle.bodies().await, 4);
}

#[tokio::test]
async fn reject_with_feedback_then_the_revision_is_approved() {
    // The model reuses its tool-call ids, as many servers do.
    let cycle = Cycle::new(vec![
        write("call_0", "dark-mode.md", "Add dark mode"),
        calls([submit("call_1", PLAN)]),
        write("call_0", "dark-mode-2.md", "Add dark mode, tested"),
        calls([submit("call_1", ".agent/plans/dark-mode-2.md")]),
        text("Building."),
    ])
    .await;
    let mut session = cycle.session().await;
    let (run, call) = suspended(&mut session, "Add dark mode").await;
    let outcome = session
        .resume(&run, &call, Decision::reject_with("add tests"))
        .await
        .expect("resume");
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = outcome
    else {
        panic!("expected the revision to be pending, got {outcome:?}");
    };
    let outcome = session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("resume");
    assert_completed(&outcome, "Building.");
    assert_every_template_accepts(&cycle.bodies().await, 5);
}

#[tokio::test]
async fn reject_without_feedback_then_a_next_message() {
    let cycle = Cycle::new(vec![
        write("call_0", "dark-mode.md", "Add dark mode"),
        calls([submit("call_1", PLAN)]),
        text("What should change?"),
    ])
    .await;
    let mut session = cycle.session().await;
    let (run, call) = suspended(&mut session, "Add dark mode").await;
    let outcome = session
        .resume(&run, &call, Decision::reject())
        .await
        .expect("resume");
    assert_completed(&outcome, "");
    let outcome = session
        .send_message("Smaller, please")
        .await
        .expect("send_message");
    assert_completed(&outcome, "What should change?");
    assert_every_template_accepts(&cycle.bodies().await, 3);
}

#[tokio::test]
async fn a_manual_mode_switch_mid_conversation() {
    let cycle = Cycle::new(vec![
        text("Looked around."),
        text("Building."),
        text("Planning again."),
    ])
    .await;
    let mut session = cycle.session().await;
    let outcome = session.send_message("Look around").await.expect("send");
    assert_completed(&outcome, "Looked around.");
    assert!(session.switch_mode("build").await.expect("switch_mode"));
    let outcome = session.send_message("Now build").await.expect("send");
    assert_completed(&outcome, "Building.");
    assert!(session.switch_mode("plan").await.expect("switch_mode"));
    let outcome = session.send_message("Plan more").await.expect("send");
    assert_completed(&outcome, "Planning again.");
    assert_every_template_accepts(&cycle.bodies().await, 3);
}

#[tokio::test]
async fn a_manual_mode_switch_while_a_plan_is_pending() {
    let cycle = Cycle::new(vec![
        write("call_0", "dark-mode.md", "Add dark mode"),
        calls([submit("call_1", PLAN)]),
        text("Building without a plan."),
    ])
    .await;
    let mut session = cycle.session().await;
    suspended(&mut session, "Add dark mode").await;
    assert!(session.switch_mode("build").await.expect("switch_mode"));
    assert!(
        session.pending_plan().is_none(),
        "the switch cancels the plan"
    );
    let outcome = session.send_message("Just build it").await.expect("send");
    assert_completed(&outcome, "Building without a plan.");
    assert_every_template_accepts(&cycle.bodies().await, 3);
}

#[tokio::test]
async fn a_cancelled_run_then_a_next_message() {
    // Two calls in one reply: the first hangs and is cancelled, the second never starts; both
    // get "cancelled" results.
    let cycle = Cycle::new(vec![
        calls([
            call("call_0", "hang", "{}"),
            call("call_1", "read_file", r#"{"path": "README.md"}"#),
        ]),
        text("Starting over."),
    ])
    .await;
    let mut session = cycle.session().await;
    let cancel = session.cancel_handle();
    let started = cycle.started.clone();
    let (outcome, ()) = tokio::join!(session.send_message("Look around"), async move {
        started.notified().await;
        assert!(cancel.cancel());
    });
    let outcome = outcome.expect("send_message");
    assert!(matches!(outcome, RunOutcome::Aborted { .. }), "{outcome:?}");
    let outcome = session.send_message("Try again").await.expect("send");
    assert_completed(&outcome, "Starting over.");
    let bodies = cycle.bodies().await;
    // Both calls have a result, and a stand-in for the reply the cancelled run never got.
    assert_eq!(
        roles(&bodies[1]),
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user"
        ]
    );
    assert_eq!(bodies[1]["messages"][5]["content"], RUN_ENDED_REPLY);
    assert_every_template_accepts(&bodies, 2);
}

#[tokio::test]
async fn a_session_resumed_from_the_store_in_a_new_controller() {
    let cycle = Cycle::new(vec![
        write("call_0", "dark-mode.md", "Add dark mode"),
        calls([submit("call_1", PLAN)]),
        text("Building."),
        text("Done."),
    ])
    .await;
    let id = {
        let mut session = cycle.session().await;
        suspended(&mut session, "Add dark mode").await;
        session.id().to_owned()
    };
    // A new controller (a restarted host) restores the session and decides the plan.
    let mut session = cycle
        .controller()
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore_session");
    let pending = session.pending_plan().expect("still pending").clone();
    let outcome = session
        .resume(
            pending.run_id(),
            pending.tool_call_id(),
            Decision::approve(),
        )
        .await
        .expect("resume");
    assert_completed(&outcome, "Building.");
    drop(session);
    let mut session = cycle
        .controller()
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore_session");
    assert_eq!(session.mode().id(), "build");
    let outcome = session.send_message("Go on").await.expect("send");
    assert_completed(&outcome, "Done.");
    assert_every_template_accepts(&cycle.bodies().await, 4);
}

#[tokio::test]
async fn a_failed_model_call_then_a_next_message() {
    let cycle = Cycle::new(vec![
        Reply::Status(400, "bad request".to_owned()),
        text("Here."),
    ])
    .await;
    let mut session = cycle.session().await;
    let outcome = session.send_message("Plan it").await.expect("send");
    assert!(matches!(outcome, RunOutcome::Failed { .. }), "{outcome:?}");
    let outcome = session.send_message("Plan it again").await.expect("send");
    assert_completed(&outcome, "Here.");
    let bodies = cycle.bodies().await;
    assert_eq!(roles(&bodies[1]), ["system", "user", "assistant", "user"]);
    assert_eq!(bodies[1]["messages"][2]["content"], RUN_ENDED_REPLY);
    assert_every_template_accepts(&bodies, 2);
}

/// The `(call, response)` pairs a template that pairs results by position shows the model:
/// the n-th `<tool_call>` of the last assistant turn with the n-th `<tool_response>` after it.
fn paired_by_position(rendered: &str) -> Vec<(String, String)> {
    let between = |text: &str, open: &str, close: &str| -> Vec<String> {
        text.split(open)
            .skip(1)
            .filter_map(|part| part.split(close).next())
            .map(|inner| inner.trim().to_owned())
            .collect()
    };
    let calls = between(rendered, "<tool_call>", "</tool_call>");
    let responses = between(rendered, "<tool_response>", "</tool_response>");
    calls.into_iter().zip(responses).collect()
}

const APPROVALS: &str = r#"
[[modes]]
id = "build"
name = "Build"
default = true
instructions = "Implement the approved plan step by step."
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

#[tokio::test]
async fn a_template_that_pairs_results_by_position_sees_each_result_with_its_call() {
    // A and C wait for approval; C is decided first, then a restarted host rejects A.
    let cycle = Cycle::with_config(
        vec![
            calls([
                call(
                    "call_a",
                    "write_file",
                    r#"{"path": "a.txt", "content": "a"}"#,
                ),
                call("call_b", "read_file", r#"{"path": "b.txt"}"#),
                call(
                    "call_c",
                    "write_file",
                    r#"{"path": "c.txt", "content": "c"}"#,
                ),
                call("call_d", "read_file", r#"{"path": "d.txt"}"#),
            ]),
            text("Done."),
        ],
        APPROVALS,
    )
    .await;
    std::fs::write(cycle.workspace.path().join("b.txt"), "bee").expect("write");
    std::fs::write(cycle.workspace.path().join("d.txt"), "dee").expect("write");
    let id = {
        let mut session = cycle
            .controller()
            .start_session(SessionOptions::new())
            .await
            .expect("session");
        let outcome = session.send_message("Write a and c").await.expect("send");
        assert!(
            matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
            "{outcome:?}"
        );
        session
            .decide("decision_2", Decision::approve())
            .await
            .expect("decide c");
        session.id().to_owned()
    };
    let mut session = cycle
        .controller()
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore_session");
    let outcome = session
        .decide("decision_1", Decision::reject_with("not a.txt"))
        .await
        .expect("decide a");
    assert_completed(&outcome, "Done.");
    let bodies = cycle.bodies().await;
    assert_every_template_accepts(&bodies, 2);
    let ids: Vec<&str> = bodies[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(ids, ["call_a", "call_b", "call_c", "call_d"]);
    let rendered = render(&environment(), "qwen3.5", &bodies[1]).expect("rendered");
    let pairs = paired_by_position(&rendered);
    assert_eq!(pairs.len(), 4, "{rendered}");
    let expected = [
        ("a.txt", "not a.txt"),
        ("b.txt", "bee"),
        ("c.txt", "Wrote c.txt"),
        ("d.txt", "dee"),
    ];
    for ((call, response), (file, result)) in pairs.iter().zip(expected) {
        assert!(
            call.contains(file) && response.contains(result),
            "{call} was shown with {response}:\n{rendered}"
        );
    }
}
