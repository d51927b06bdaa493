//! The ACP agent's round trips and the memory of an idle session (issue 22's numbers, in
//! `src/guide/acp.md`): the agent in process over an in-memory pipe, the scripted model, a
//! client writing raw JSON-RPC lines.
//!
//! `cargo run --release --example acp_bench --features acp [ROUNDS] [SESSIONS]`
//!
//! - prompt -> permission request: `session/prompt` in plan mode until the
//!   `session/request_permission` of the plan the scripted model wrote and submitted;
//! - option -> mode update: the answer selecting the build option until `current_mode_update`;
//! - memory per idle session: the growth of the resident set (Linux `/proc/self/statm`) over
//!   SESSIONS `session/new`, divided by SESSIONS.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_controller::acp::AcpAgent;
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{AgentController, ToolRegistry, config};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const MODES: &str = r#"
defaultModeId = "plan"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "list_files", "write_plan", "submit_plan"]
[[modes]]
id = "build"
"#;

struct Client<R, W> {
    lines: tokio::io::Lines<BufReader<R>>,
    write: W,
    next_id: u64,
}

impl<R: tokio::io::AsyncRead + Unpin, W: tokio::io::AsyncWrite + Unpin> Client<R, W> {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.expect("write");
    }

    async fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        id
    }

    async fn until(&mut self, mut done: impl FnMut(&Value) -> bool) -> Value {
        loop {
            let line = self.lines.next_line().await.expect("read").expect("a line");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            if done(&message) {
                return message;
            }
        }
    }

    async fn new_session(&mut self, cwd: &Path) -> String {
        let id = self
            .request("session/new", json!({ "cwd": cwd, "mcpServers": [] }))
            .await;
        let response = self.until(|m| m["id"] == id).await;
        response["result"]["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned()
    }
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let sessions: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let workspace = tempfile::tempdir().expect("a workspace");
    let agent = AcpAgent::new(|cwd: &Path| {
        let graph = config::parse(MODES, "modes.toml")?;
        Ok(
            AgentController::builder(graph, Arc::new(ScriptedModel::new()))
                .tools(ToolRegistry::with_workspace_tools())
                .workspace(cwd)
                .build()?,
        )
    });
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let serving = tokio::spawn(agent.serve(server_read, server_write));
    let (read, write) = tokio::io::split(client);
    let mut client = Client {
        lines: BufReader::new(read).lines(),
        write,
        next_id: 0,
    };
    let id = client
        .request("initialize", json!({ "protocolVersion": 1 }))
        .await;
    client.until(|m| m["id"] == id).await;

    let (mut to_request, mut to_switch) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let session = client.new_session(workspace.path()).await;
        let start = Instant::now();
        let prompt = client
            .request(
                "session/prompt",
                json!({ "sessionId": session, "prompt": [{ "type": "text", "text": "Add dark mode" }] }),
            )
            .await;
        let request = client
            .until(|m| m["method"] == "session/request_permission")
            .await;
        to_request.push(start.elapsed());
        let start = Instant::now();
        client
            .send(json!({ "jsonrpc": "2.0", "id": request["id"],
                "result": { "outcome": { "outcome": "selected", "optionId": "switch:build" } } }))
            .await;
        client
            .until(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
            .await;
        to_switch.push(start.elapsed());
        client.until(|m| m["id"] == prompt).await;
    }
    println!("rounds: {rounds}");
    println!(
        "prompt -> permission request: median {:?}",
        median(&mut to_request)
    );
    println!(
        "option -> current_mode_update: median {:?}",
        median(&mut to_switch)
    );

    let before = resident_bytes();
    for _ in 0..sessions {
        client.new_session(workspace.path()).await;
    }
    match (before, resident_bytes()) {
        (Some(before), Some(after)) => println!(
            "memory per idle session: {} bytes ({sessions} sessions)",
            after.saturating_sub(before) / sessions as u64
        ),
        _ => println!("memory per idle session: not measured (no /proc/self/statm)"),
    }
    drop(client);
    let _ = serving.await;
}
