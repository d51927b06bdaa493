//! A property test over the JSON-RPC input of the ACP agent (in process, over an in-memory
//! pipe): whatever lines a client sends and however it answers the permission requests, the
//! agent never panics, writes only JSON, answers every request, and approves a plan only when
//! the client selected an allow option it offered.
#![cfg(feature = "cli")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_controller::acp::AcpAgent;
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{AgentController, ToolRegistry, config};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::acp::MODES;
use crate::common::Workspace;

/// One thing the client does.
#[derive(Debug, Clone)]
enum Step {
    /// A line as is (not necessarily JSON).
    Line(String),
    /// A request with this method and params (the session id put in where `"$session"`).
    Request(String, Value),
    /// A notification.
    Notify(String, Value),
    /// A prompt in the session; the harness reads until the permission request or the answer.
    Prompt,
    /// An answer to the open permission request.
    Answer(Answer),
}

#[derive(Debug, Clone)]
enum Answer {
    /// Selects the option with this id (offered or not).
    Select(String),
    /// Selects the offered allow option of the first target: the only answer that approves.
    Allow,
    /// Selects "Keep planning".
    Reject,
    /// Any result at all.
    Result(Value),
    /// An error response.
    Error,
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z:$/_\\-]{0,12}".prop_map(Value::from),
        Just(json!("$session")),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("sessionId".to_owned()),
                    Just("modeId".to_owned()),
                    Just("prompt".to_owned()),
                    Just("cwd".to_owned()),
                    Just("outcome".to_owned()),
                    Just("optionId".to_owned()),
                    "[a-zA-Z]{1,8}",
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("initialize".to_owned()),
        Just("session/new".to_owned()),
        Just("session/load".to_owned()),
        Just("session/prompt".to_owned()),
        Just("session/set_mode".to_owned()),
        Just("session/set_config_option".to_owned()),
        Just("session/cancel".to_owned()),
        Just("$/cancel_request".to_owned()),
        Just("session/request_permission".to_owned()),
        "[a-z/_$]{1,20}",
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        "\\PC{0,40}".prop_map(Step::Line),
        // A valid method with made-up params: set_mode only ever to a mode that does not exist,
        // so no step but an allow answer can change the mode.
        (method(), json_value()).prop_map(|(m, p)| {
            let p = if m.starts_with("session/set_") {
                json!({ "sessionId": "$session", "modeId": "nope", "configId": "mode", "value": "nope" })
            } else {
                p
            };
            Step::Request(m, p)
        }),
        (method(), json_value())
            .prop_filter("no manual switch", |(m, _)| !m.starts_with("session/set_"))
            .prop_map(|(m, p)| Step::Notify(m, p)),
        Just(Step::Prompt),
        prop_oneof![
            "[a-z:_]{0,14}".prop_map(Answer::Select),
            Just(Answer::Select("switch:nope".to_owned())),
            Just(Answer::Allow),
            Just(Answer::Reject),
            json_value().prop_map(Answer::Result),
            Just(Answer::Error),
        ]
        .prop_map(Step::Answer),
    ]
}

/// What a run of steps showed.
#[derive(Debug, Default)]
struct Seen {
    /// The client selected an offered allow option.
    allowed: bool,
    /// The agent announced a mode change.
    mode_changed: bool,
    /// Request ids the client sent, and those the agent answered.
    sent: Vec<u64>,
    answered: Vec<u64>,
}

fn substitute(value: &Value, session: &str) -> Value {
    match value {
        Value::String(s) if s == "$session" => Value::from(session),
        Value::Array(items) => items.iter().map(|v| substitute(v, session)).collect(),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, session)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn run(steps: Vec<Step>) -> Seen {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("config")).expect("config dir");
    let agent = AcpAgent::new(|cwd: &Path| {
        let graph = config::parse(MODES, "modes.toml")?;
        Ok(
            AgentController::builder(graph, Arc::new(ScriptedModel::new()))
                .tools(ToolRegistry::with_workspace_tools())
                .workspace(cwd)
                .build()?,
        )
    })
    .max_message_bytes(1 << 16);
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let serving = tokio::spawn(agent.serve(server_read, server_write));
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    let mut seen = Seen::default();
    let mut next_id = 1000;

    macro_rules! send {
        ($value:expr) => {{
            let mut text = serde_json::to_string(&$value).expect("JSON");
            text.push('\n');
            client_write
                .write_all(text.as_bytes())
                .await
                .expect("write");
        }};
    }
    // Reads one message: JSON, always; notes answers and mode changes.
    let read = async |seen: &mut Seen, lines: &mut tokio::io::Lines<_>| -> Option<Value> {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("the agent answers (a hang fails the test)")
            .expect("read")?;
        let message: Value = serde_json::from_str(&line).expect("the agent writes JSON");
        if let (None, Some(id)) = (message.get("method"), message["id"].as_u64()) {
            seen.answered.push(id);
        }
        if message["params"]["update"]["sessionUpdate"] == "current_mode_update" {
            seen.mode_changed = true;
        }
        Some(message)
    };

    send!(
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": 1 } })
    );
    while read(&mut seen, &mut lines).await.expect("initialized")["id"] != 1 {}
    send!(
        json!({ "jsonrpc": "2.0", "id": 2, "method": "session/new", "params": { "cwd": ws.path(), "mcpServers": [] } })
    );
    seen.sent.extend([1, 2]);
    let session = loop {
        let message = read(&mut seen, &mut lines).await.expect("a session");
        if message["id"] == 2 {
            let id = message["result"]["sessionId"].as_str();
            break id
                .unwrap_or_else(|| panic!("a session: {message}"))
                .to_owned();
        }
    };
    let mut open: Option<(Value, Vec<(String, String)>)> = None;
    let mut prompting: Option<u64> = None;
    for step in steps {
        match step {
            Step::Line(text) => {
                let text = text.replace(['\n', '\r'], " ");
                client_write
                    .write_all(format!("{text}\n").as_bytes())
                    .await
                    .expect("write");
            }
            Step::Request(method, params) => {
                next_id += 1;
                seen.sent.push(next_id);
                // JSON-RPC params are an object or an array: other params make the request
                // invalid as a whole, answered with a null id (-32600).
                let params = match substitute(&params, &session) {
                    params @ (Value::Object(_) | Value::Array(_)) => params,
                    other => json!({ "value": other }),
                };
                send!(
                    json!({ "jsonrpc": "2.0", "id": next_id, "method": method, "params": params })
                );
            }
            Step::Notify(method, params) => {
                send!(
                    json!({ "jsonrpc": "2.0", "method": method, "params": substitute(&params, &session) })
                );
            }
            Step::Prompt if prompting.is_none() => {
                next_id += 1;
                seen.sent.push(next_id);
                prompting = Some(next_id);
                send!(
                    json!({ "jsonrpc": "2.0", "id": next_id, "method": "session/prompt",
                    "params": { "sessionId": session, "prompt": [{ "type": "text", "text": "Add dark mode" }] } })
                );
                while let Some(message) = read(&mut seen, &mut lines).await {
                    if message["method"] == "session/request_permission" {
                        let options = message["params"]["options"]
                            .as_array()
                            .expect("options")
                            .iter()
                            .map(|o| {
                                (
                                    o["optionId"].as_str().unwrap_or_default().to_owned(),
                                    o["kind"].as_str().unwrap_or_default().to_owned(),
                                )
                            })
                            .collect();
                        open = Some((message["id"].clone(), options));
                        break;
                    }
                    if message["id"] == json!(next_id) {
                        prompting = None;
                        break;
                    }
                }
            }
            Step::Prompt => {}
            Step::Answer(answer) => {
                let Some((id, options)) = open.take() else {
                    continue;
                };
                let chosen = |kind: &str| {
                    options
                        .iter()
                        .find(|(_, k)| k == kind)
                        .map(|(o, _)| o.clone())
                        .unwrap_or_default()
                };
                let reply = match &answer {
                    Answer::Select(option) => {
                        if options
                            .iter()
                            .any(|(o, k)| o == option && k.starts_with("allow"))
                        {
                            seen.allowed = true;
                        }
                        json!({ "result": { "outcome": { "outcome": "selected", "optionId": option } } })
                    }
                    Answer::Allow => {
                        seen.allowed = true;
                        json!({ "result": { "outcome": { "outcome": "selected", "optionId": chosen("allow_once") } } })
                    }
                    Answer::Reject => {
                        json!({ "result": { "outcome": { "outcome": "selected", "optionId": chosen("reject_once") } } })
                    }
                    Answer::Result(value) => {
                        let text = value.to_string();
                        if options
                            .iter()
                            .any(|(o, k)| text.contains(o.as_str()) && k.starts_with("allow"))
                        {
                            // A made-up result that names an allow option may select it.
                            seen.allowed = true;
                        }
                        json!({ "result": value })
                    }
                    Answer::Error => json!({ "error": { "code": -32000, "message": "no" } }),
                };
                let mut reply = reply;
                reply["jsonrpc"] = json!("2.0");
                reply["id"] = id;
                send!(reply);
                // The turn ends (or carries on to its end): read up to the prompt's answer.
                if let Some(prompt) = prompting.take() {
                    while let Some(message) = read(&mut seen, &mut lines).await {
                        if message["id"] == json!(prompt) && message.get("method").is_none() {
                            break;
                        }
                        if message["method"] == "session/request_permission" {
                            // Asked again (an option id never offered), or a request the model
                            // resubmitted: the client cancels it, which approves nothing.
                            let mut cancel = json!({ "jsonrpc": "2.0", "result": { "outcome": { "outcome": "cancelled" } } });
                            cancel["id"] = message["id"].clone();
                            send!(cancel);
                        }
                    }
                }
            }
        }
    }
    // Every request is answered while the connection is open, but a prompt that waits for its
    // permission answer (it ends when the input does, and its answer cannot be written then).
    let waiting = prompting.filter(|_| open.is_some());
    seen.sent.retain(|id| Some(*id) != waiting);
    while seen.sent.iter().any(|id| !seen.answered.contains(id)) {
        if read(&mut seen, &mut lines).await.is_none() {
            break;
        }
    }
    // The end of the client's input (the read half stays open to read the rest).
    client_write.shutdown().await.expect("shutdown");
    while read(&mut seen, &mut lines).await.is_some() {}
    let served = serving.await.expect("the agent does not panic");
    assert!(served.is_ok(), "{served:?}");
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_input_panics_or_approves_without_an_allow_option(steps in prop::collection::vec(step(), 0..12)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let seen = rt.block_on(run(steps));
        prop_assert!(!seen.mode_changed || seen.allowed, "a mode change without an allow option: {seen:?}");
        for id in &seen.sent {
            prop_assert!(seen.answered.contains(id), "request {id} never answered: {seen:?}");
        }
    }
}

/// The property's positive side: selecting the offered allow option does change the mode (so
/// the property's check can fail).
#[test]
fn an_offered_allow_option_does_approve() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let seen = rt.block_on(run(vec![Step::Prompt, Step::Answer(Answer::Allow)]));
    assert!(seen.allowed && seen.mode_changed, "{seen:?}");
}
