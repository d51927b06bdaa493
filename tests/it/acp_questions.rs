//! Issue 37 over ACP with a tool of one's own (the official SDK's tests run the binary, which
//! has only the built-in tools, so these drive a library `AcpAgent` in process over raw
//! JSON-RPC lines): a flat answer schema is an elicitation form whose accepted content the tool
//! gets; a nested one is answered by the next prompt (as JSON that fits); a cancelled form, or
//! content that does not fit (asked again once, saying why), answers nothing and the tool never
//! gets an answer.
#![cfg(feature = "acp")]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_controller::acp::AcpAgent;
use agent_controller::model::Message;
use agent_controller::model::scripted::ReplayModel;
use agent_controller::{
    AgentController, Tool, ToolContext, ToolOutput, ToolRegistry, async_trait, config,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines, ReadHalf, WriteHalf};

use crate::common::Workspace;

const MODES: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "confirm_deploy", "shape_deploy", "ask_user"]

[[modes]]
id = "plan"
transitionsTo = "build"
"#;

/// A tool of one's own that suspends with `schema` and records each answer it resumes with.
struct Asking {
    name: &'static str,
    schema: Value,
    answers: Arc<Mutex<Vec<Value>>>,
}

#[async_trait]
impl Tool for Asking {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "Deploys once the user answers.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object", "properties": { "target": { "type": "string" } } })
    }
    async fn execute(&self, args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        ToolOutput::suspend(
            "Deploy? The user has to answer.",
            json!({ "target": args["target"], "warning": "prod\u{202e}" }),
            self.schema.clone(),
        )
    }
    async fn resume(&self, _args: &Value, answer: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(answer.clone());
        ToolOutput::ok(format!("Deployed with {answer}."))
    }
}

/// A flat form: a boolean and a string.
fn flat() -> Value {
    json!({
        "type": "object",
        "properties": {
            "confirm": { "type": "boolean", "description": "Go ahead?" },
            "note": { "type": "string" },
        },
        "required": ["confirm"],
        "additionalProperties": false,
    })
}

/// A nested answer: no form can ask it.
fn nested() -> Value {
    json!({
        "type": "object",
        "properties": { "target": { "type": "object", "properties": { "env": { "type": "string" } }, "required": ["env"] } },
        "required": ["target"],
    })
}

/// The client's end of an agent served in process.
struct Client {
    write: WriteHalf<tokio::io::DuplexStream>,
    lines: Lines<BufReader<ReadHalf<tokio::io::DuplexStream>>>,
    next_id: u64,
    /// Every message the agent sent.
    seen: Vec<Value>,
    model: Arc<ReplayModel>,
    answers: Arc<Mutex<Vec<Value>>>,
    _ws: Workspace,
    session: String,
}

impl Client {
    /// An agent whose model replies `replies`, with both tools; `elicits`: the client
    /// advertises elicitation forms. Initialized, with a session open.
    async fn start(replies: Vec<agent_controller::model::ModelResponse>, elicits: bool) -> Self {
        let ws = Workspace::new();
        let model = Arc::new(ReplayModel::new(replies));
        let answers = Arc::new(Mutex::new(Vec::new()));
        let (m, a) = (model.clone(), answers.clone());
        let agent = AcpAgent::new(move |cwd: &Path| {
            let graph = config::parse(MODES, "modes.toml")?;
            let mut tools = ToolRegistry::with_workspace_tools();
            for (name, schema) in [("confirm_deploy", flat()), ("shape_deploy", nested())] {
                tools.register(Arc::new(Asking {
                    name,
                    schema,
                    answers: a.clone(),
                }))?;
            }
            Ok(AgentController::builder(graph, m.clone())
                .tools(tools)
                .workspace(cwd)
                .build()?)
        });
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        tokio::spawn(agent.serve(server_read, server_write));
        let (read, write) = tokio::io::split(client);
        let mut client = Client {
            write,
            lines: BufReader::new(read).lines(),
            next_id: 0,
            seen: Vec::new(),
            model,
            answers,
            _ws: ws,
            session: String::new(),
        };
        let capabilities = if elicits {
            json!({ "elicitation": { "form": {} } })
        } else {
            json!({})
        };
        let params = json!({ "protocolVersion": 1, "clientCapabilities": capabilities });
        client.request("initialize", params, |_| None).await;
        let cwd = client._ws.path().to_path_buf();
        let new = client
            .request(
                "session/new",
                json!({ "cwd": cwd, "mcpServers": [] }),
                |_| None,
            )
            .await;
        client.session = new["result"]["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned();
        client
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.expect("write");
    }

    /// Sends a request and reads until its response, answering each request of the agent with
    /// what `answer` gives (an error response when `None`).
    async fn request(
        &mut self,
        method: &str,
        params: Value,
        mut answer: impl FnMut(&Value) -> Option<Value>,
    ) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
                .await
                .expect("the agent answers (a hang fails the test)")
                .expect("read")
                .expect("the agent is there");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            self.seen.push(message.clone());
            if message.get("method").is_some() && message.get("id").is_some() {
                let reply = match answer(&message) {
                    Some(result) => {
                        json!({ "jsonrpc": "2.0", "id": message["id"], "result": result })
                    }
                    None => {
                        json!({ "jsonrpc": "2.0", "id": message["id"], "error": { "code": -32601, "message": "no" } })
                    }
                };
                self.send(reply).await;
            } else if message.get("method").is_none() && message["id"] == id {
                return message;
            }
        }
    }

    async fn prompt(&mut self, text: &str, answer: impl FnMut(&Value) -> Option<Value>) -> Value {
        let params =
            json!({ "sessionId": self.session, "prompt": [{ "type": "text", "text": text }] });
        self.request("session/prompt", params, answer).await
    }

    /// The agent's requests of `method` seen so far.
    fn requests(&self, method: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == method && m.get("id").is_some())
            .cloned()
            .collect()
    }

    fn answers(&self) -> Vec<Value> {
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The tool results of the model's `n`-th request (0-based).
    fn tool_results(&self, n: usize) -> Vec<String> {
        self.model.requests()[n]
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }
}

fn deploy(tool: &str) -> agent_controller::model::ModelResponse {
    ReplayModel::call("call_1", tool, json!({ "target": "staging" }))
}

#[tokio::test]
async fn a_flat_form_of_ones_own_tool_is_elicited_and_the_tool_gets_the_content() {
    let mut client = Client::start(
        vec![deploy("confirm_deploy"), ReplayModel::text("Done.")],
        true,
    )
    .await;
    let done = client
        .prompt("Deploy", |request| {
            (request["method"] == "elicitation/create").then(
                || json!({ "action": "accept", "content": { "confirm": true, "note": "go" } }),
            )
        })
        .await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let [asked] = client
        .requests("elicitation/create")
        .try_into()
        .expect("one elicitation");
    let params = &asked["params"];
    assert_eq!(params["mode"], "form");
    assert_eq!(params["sessionId"], client.session);
    let schema = &params["requestedSchema"];
    assert_eq!(schema["properties"]["confirm"]["type"], "boolean");
    assert_eq!(schema["properties"]["note"]["type"], "string");
    assert_eq!(schema["required"], json!(["confirm"]));
    let message = params["message"].as_str().expect("message");
    assert!(
        message.contains("confirm_deploy") && message.contains("prod\\u{202e}"),
        "{message}"
    );
    assert!(!message.contains('\u{202e}'), "{message}");
    assert_eq!(client.answers(), [json!({ "confirm": true, "note": "go" })]);
    assert!(client.requests("session/request_permission").is_empty());
}

#[tokio::test]
async fn a_nested_answer_is_the_next_prompt_as_json_even_for_a_client_that_elicits() {
    let mut client = Client::start(
        vec![deploy("shape_deploy"), ReplayModel::text("Done.")],
        true,
    )
    .await;
    let first = client.prompt("Deploy", |_| None).await;
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
    assert!(
        client.requests("elicitation/create").is_empty(),
        "a nested schema is no form"
    );
    let told: String = client
        .seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(
        told.contains("Your next prompt is the answer: JSON"),
        "{told}"
    );
    assert!(told.contains("\"env\""), "the schema is shown: {told}");
    assert!(client.answers().is_empty());
    let second = client
        .prompt(r#"{"target": {"env": "prod"}}"#, |_| None)
        .await;
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    assert_eq!(client.answers(), [json!({ "target": { "env": "prod" } })]);
    assert_eq!(client.model.requests().len(), 2);
}

#[tokio::test]
async fn a_prompt_that_does_not_fit_sets_the_question_aside_and_the_model_reads_it() {
    let mut client = Client::start(
        vec![deploy("shape_deploy"), ReplayModel::text("Ok.")],
        false,
    )
    .await;
    client.prompt("Deploy", |_| None).await;
    let second = client.prompt("never mind, stop", |_| None).await;
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    assert!(client.answers().is_empty(), "nothing was made up");
    let results = client.tool_results(1);
    assert!(
        results
            .iter()
            .any(|r| r.starts_with("Not answered: the user sent a new message")),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_cancelled_form_or_content_that_does_not_fit_answers_nothing() {
    for reply in [
        json!({ "action": "cancel" }),
        json!({ "action": "accept", "content": { "confirm": "yes" } }),
    ] {
        let mut client = Client::start(
            vec![deploy("confirm_deploy"), ReplayModel::text("Ok.")],
            true,
        )
        .await;
        let done = client
            .prompt("Deploy", |request| {
                (request["method"] == "elicitation/create").then(|| reply.clone())
            })
            .await;
        assert!(done.get("result").is_some(), "{done}");
        // Content that does not fit is asked again once, with the reason (trial 5 L9).
        let asked = if reply["action"] == "cancel" { 1 } else { 2 };
        assert_eq!(
            client.requests("elicitation/create").len(),
            asked,
            "{reply}"
        );
        assert!(client.answers().is_empty(), "{reply}: nothing was made up");
        // The call ends for the editor as a question not answered, never as a call not approved.
        let ended: Vec<String> = client
            .seen
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "tool_call_update")
            .filter(|m| m["params"]["update"]["status"] == "failed")
            .map(|m| m["params"]["update"]["content"].to_string())
            .collect();
        assert!(!ended.is_empty(), "{reply}: {:?}", client.seen);
        for text in &ended {
            assert!(
                text.contains("answer") && !text.contains("approved"),
                "{reply}: {text}"
            );
        }
        // Without a store the run ended: the model is told the user did not answer, and the
        // next prompt is a new turn.
        client.prompt("Hello", |_| None).await;
        let results = client.tool_results(1);
        assert!(
            results.iter().any(|r| r.starts_with("Not answered")),
            "{reply}: {results:?}"
        );
    }
}

/// Trial 5 L9: accepted form content that does not fit is asked again once, the form's message
/// saying why; content that fits then is the answer.
#[tokio::test]
async fn form_content_that_does_not_fit_is_asked_again_with_the_reason() {
    let mut client = Client::start(
        vec![deploy("confirm_deploy"), ReplayModel::text("Ok.")],
        true,
    )
    .await;
    let mut replies = vec![
        json!({ "action": "accept", "content": { "confirm": true } }),
        json!({ "action": "accept", "content": { "confirm": "yes" } }),
    ];
    client
        .prompt("Deploy", |request| {
            (request["method"] == "elicitation/create").then(|| replies.pop().expect("a reply"))
        })
        .await;
    let asked = client.requests("elicitation/create");
    assert_eq!(asked.len(), 2, "{:?}", client.seen);
    let again = asked[1]["params"]["message"].as_str().expect("message");
    assert!(
        again.contains("was not taken") && again.contains("confirm"),
        "{again}"
    );
    assert_eq!(client.answers(), [json!({ "confirm": true })]);
}

/// Trial 5 L9: an option id that was never offered is refused and the question asked again,
/// saying why; an offered option then answers it.
#[tokio::test]
async fn an_option_id_never_offered_is_refused_and_asked_again() {
    let question = json!({ "question": "Which theme?", "options": [{ "label": "dark" }, { "label": "light" }] });
    let mut client = Client::start(
        vec![
            ReplayModel::call("call_1", "ask_user", question),
            ReplayModel::text("Ok."),
        ],
        false,
    )
    .await;
    let mut picks = vec!["answer:1", "answer:5"];
    client
        .prompt("Ask me", |request| {
            (request["method"] == "session/request_permission").then(|| {
                json!({ "outcome": { "outcome": "selected", "optionId": picks.pop().expect("a pick") } })
            })
        })
        .await;
    let asked = client.requests("session/request_permission");
    assert_eq!(asked.len(), 2, "{:?}", client.seen);
    let again = asked[1]["params"]["toolCall"]["content"].to_string();
    assert!(
        again.contains("answer:5") && again.contains("not one of the options"),
        "{again}"
    );
    let results = client.tool_results(1);
    assert!(results.iter().any(|r| r.contains("light")), "{results:?}");
}
