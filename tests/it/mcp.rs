//! MCP tools gated per mode (issue 24), against a real server nobody here wrote: the reference
//! `@modelcontextprotocol/server-filesystem` from npm, installed by `tests/mcp/package.json` and
//! its lockfile (`npm ci` runs here once when `node_modules` is missing), started with node
//! directly. And against hostile servers scripted in this file (garbage, a hang, a crash, a huge
//! result, clashing tool names).
#![cfg(feature = "mcp")]

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_controller::model::scripted::ReplayModel;
use agent_controller::store::MemoryStore;
use agent_controller::tool::mcp::McpTools;
use agent_controller::{
    AgentController, Decision, ModeGraph, RunOutcome, Session, ToolRegistry, config,
    tool::ToolAccess,
};
use common::{Recorder, Workspace};
use serde_json::json;

/// The reference filesystem server's entry point, installed by `npm ci` in `tests/mcp` when it
/// is missing (once: a file lock keeps parallel tests and test processes from racing).
pub(crate) fn filesystem_server() -> PathBuf {
    static ONCE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
    let entry = dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let _thread = ONCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if entry.exists() {
        return entry;
    }
    let lock = std::fs::File::create(dir.join(".npm-ci.lock")).expect("lock file");
    lock.lock().expect("lock");
    if !entry.exists() {
        let status = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .expect("npm runs (Node 20 and npm are needed for the MCP tests)");
        assert!(status.success(), "npm ci in tests/mcp failed: {status}");
    }
    drop(lock);
    assert!(entry.exists(), "npm ci did not install {}", entry.display());
    entry
}

/// The issue's config, with the filesystem server started as `node ENTRY .` (the server runs in
/// the workspace, which it also gets as its MCP root; the directory argument covers the calls
/// made before the server has asked for its roots), through `sh` so the test can learn its pid.
fn fs_config(pid_file: &Path) -> String {
    let entry = filesystem_server();
    format!(
        r#"
[[mcpServers]]
id = "fs"
command = "sh"
args = ["-c", "echo $$ > '{pid}'; exec node '{entry}' ."]

[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["fs__read_text_file", "fs__list_directory", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["fs__*", "read_file"]
requireApproval = ["fs__write_file"]
"#,
        pid = pid_file.display(),
        entry = entry.display()
    )
}

struct Setup {
    ws: Workspace,
    model: Arc<ReplayModel>,
    controller: AgentController,
    mcp: McpTools,
    pid_file: PathBuf,
    recorder: Recorder,
}

impl Setup {
    async fn new(replies: Vec<agent_controller::ModelResponse>) -> Self {
        let ws = Workspace::new();
        let pid_file = ws.path().join(".agent/fs.pid");
        let graph = config::parse(&fs_config(&pid_file), "modes.toml").expect("config");
        Self::with_graph(ws, graph, replies, pid_file).await
    }

    async fn with_graph(
        ws: Workspace,
        graph: ModeGraph,
        replies: Vec<agent_controller::ModelResponse>,
        pid_file: PathBuf,
    ) -> Self {
        let mcp = McpTools::start(
            graph.needed_mcp_servers(),
            graph.mcp_tool_names(),
            ws.path(),
        )
        .await;
        let mut tools = ToolRegistry::with_workspace_tools();
        mcp.register(&mut tools).expect("register");
        let model = Arc::new(ReplayModel::new(replies));
        let controller = AgentController::builder(graph, model.clone())
            .tools(tools)
            .workspace(ws.path())
            .store(Arc::new(MemoryStore::new()))
            .build()
            .expect("controller");
        Self {
            ws,
            model,
            controller,
            mcp,
            pid_file,
            recorder: Recorder::default(),
        }
    }

    async fn session(&self, mode: &str) -> Session {
        self.controller
            .start_session(self.recorder.options().mode(mode))
            .await
            .expect("session")
    }

    /// The result the model got for the tool call `id` in its `n`-th request.
    fn result(&self, n: usize, id: &str) -> String {
        let requests = self.model.requests();
        let messages = &requests[n].messages;
        let value = serde_json::to_value(messages).expect("json");
        value
            .as_array()
            .expect("messages")
            .iter()
            .find(|m| m["toolCallId"] == id)
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("no result for {id} in request {n}: {value}"))
    }
}

fn call(id: &str, name: &str, args: serde_json::Value) -> agent_controller::ModelResponse {
    ReplayModel::call(id, name, args)
}

fn text(text: &str) -> agent_controller::ModelResponse {
    ReplayModel::text(text)
}

#[tokio::test]
async fn plan_mode_offers_only_its_listed_read_tools() {
    let s = Setup::new(vec![text("looked")]).await;
    let report = &s.mcp.reports()[0];
    let listed = report
        .tools
        .as_ref()
        .expect("the filesystem server started");
    assert!(
        listed.iter().any(|t| t.name == "fs__write_file"),
        "{listed:?}"
    );
    // Untrusted: no annotation counts, every tool may write.
    assert!(listed.iter().all(|t| t.access == ToolAccess::Writes));

    let mut session = s.session("plan").await;
    session.send_message("look around").await.expect("run");
    let offered = &s.model.requests()[0].tool_names;
    assert_eq!(
        offered,
        &[
            "fs__read_text_file",
            "fs__list_directory",
            "write_plan",
            "submit_plan"
        ]
    );
    // The build mode's wildcard offers every tool of the server, and its own.
    let build = s.controller.modes().get("build").expect("build");
    let names: Vec<&str> = s
        .controller
        .tool_specs(build)
        .iter()
        .map(|t| &*t.name)
        .collect();
    assert!(names.contains(&"fs__write_file"), "{names:?}");
    assert!(names.contains(&"fs__read_text_file"), "{names:?}");
    assert_eq!(names.last(), Some(&"read_file"));
}

#[tokio::test]
async fn a_plan_mode_write_through_mcp_is_refused_and_writes_nothing() {
    let s = Setup::new(vec![
        call(
            "call_1",
            "fs__write_file",
            json!({"path": "owned.txt", "content": "x"}),
        ),
        text("tried"),
    ])
    .await;
    let mut session = s.session("plan").await;
    let outcome = session.send_message("write").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let result = s.result(1, "call_1");
    assert!(result.contains("not available in mode `plan`"), "{result}");
    assert!(!s.ws.path().join("owned.txt").exists());
}

#[tokio::test]
async fn after_approval_a_build_mode_write_waits_for_approval_then_writes_through_the_server() {
    let s = Setup::new(vec![
        call(
            "call_1",
            "write_plan",
            json!({"path": ".agent/plans/notes.md", "content": "# Plan\n\nWrite notes.txt\n"}),
        ),
        call(
            "call_2",
            "submit_plan",
            json!({"path": ".agent/plans/notes.md"}),
        ),
        call(
            "call_3",
            "fs__write_file",
            json!({"path": "notes.txt", "content": "written by MCP"}),
        ),
        call("call_4", "fs__read_text_file", json!({"path": "notes.txt"})),
        text("done"),
    ])
    .await;
    let mut session = s.session("plan").await;
    let outcome = session.send_message("plan notes").await.expect("run");
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = outcome
    else {
        panic!("expected the plan to wait, got {outcome:?}");
    };
    let outcome = session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("approve the plan");
    assert_eq!(session.mode().id(), "build");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
        panic!("expected fs__write_file to wait for approval, got {outcome:?}");
    };
    assert_eq!(tool_calls[0].tool_name(), "fs__write_file");
    assert!(
        !s.ws.path().join("notes.txt").exists(),
        "nothing is written before approval"
    );
    let outcome = session
        .decide(tool_calls[0].decision_id(), Decision::approve())
        .await
        .expect("approve the write");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let result = s.result(3, "call_3");
    assert!(!result.contains("denied"), "{result}");
    assert_eq!(
        std::fs::read_to_string(s.ws.path().join("notes.txt")).expect("written"),
        "written by MCP"
    );
    // The read went through the server too (the workspace is its root).
    assert_eq!(s.result(4, "call_4"), "written by MCP");
}

#[tokio::test]
async fn a_server_killed_mid_session_gives_an_error_not_a_hang() {
    let s = Setup::new(vec![
        call("call_1", "fs__list_directory", json!({"path": "."})),
        text("listed"),
        call("call_2", "fs__list_directory", json!({"path": "."})),
        text("after the kill"),
    ])
    .await;
    let mut session = s.session("build").await;
    session.send_message("list").await.expect("run");
    assert!(
        s.result(1, "call_1").contains(".agent"),
        "{}",
        s.result(1, "call_1")
    );

    let pid = std::fs::read_to_string(&s.pid_file).expect("pid");
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .expect("kill");
    assert!(killed.success());

    let outcome = session.send_message("list again").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let result = s.result(3, "call_2");
    assert!(result.contains("MCP server `fs` stopped"), "{result}");
}

/// A config of one server `bad` scripted by `mode` (see [`FAKE_SERVER`]), with `timeout`.
fn hostile_config(script: &Path, mode: &str, timeout: &str) -> String {
    format!(
        r#"
[[mcpServers]]
id = "bad"
command = "node"
args = ["{script}", "{mode}"]
timeout = "{timeout}"

[[modes]]
id = "build"
availableTools = ["bad__*", "bad__echo"]
"#,
        script = script.display()
    )
}

/// A tiny MCP server over stdio, hostile in the way its first argument says: `garbage` answers
/// a call with a result that is not a tool result, `notjson` with a line that is not JSON, `hang` never answers one, `crash` exits during one,
/// `huge` answers with 1 MB of text, `flood` sends 100,000 log notifications of 2 KB before
/// it answers, `badinit` answers `initialize` with garbage, `names`
/// offers tools whose names clash once mapped, `pages` pages its tool list without end, `roots` answers a call with the roots it asks
/// the client for.
const FAKE_SERVER: &str = r#"
const mode = process.argv[2];
const FLOOD = 100000;
const rl = require('readline').createInterface({ input: process.stdin });
let pending;
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
rl.on('line', (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch (e) { return; }
  if (msg.id === 'roots-1') {
    send({ jsonrpc: '2.0', id: pending, result: { content: [{ type: 'text', text: JSON.stringify(msg.result.roots) }] } });
    return;
  }
  if (msg.id === undefined) return;
  if (msg.method === 'initialize') {
    if (mode === 'badinit') { process.stdout.write('this is not json\n'); return; }
    send({ jsonrpc: '2.0', id: msg.id, result: {
      protocolVersion: msg.params.protocolVersion,
      capabilities: { tools: {} },
      serverInfo: { name: 'fake', version: '1.0.0' } } });
  } else if (msg.method === 'tools/list') {
    const tools = [{ name: 'echo', description: 'Echoes', inputSchema: { type: 'object' } }];
    if (mode === 'names') {
      tools.push({ name: 'a.b', inputSchema: { type: 'object' } });
      tools.push({ name: 'a_b', inputSchema: { type: 'object' } });
      tools.push({ name: 'with space', inputSchema: { type: 'object' } });
      tools.push({ name: 'stringly', inputSchema: { type: 'string' } });
    }
    if (mode === 'pages') {
      const page = Number((msg.params && msg.params.cursor) || 0);
      send({ jsonrpc: '2.0', id: msg.id, result: { tools: [{ name: 'echo' + (page || ''), inputSchema: { type: 'object' } }], nextCursor: String(page + 1) } });
      return;
    }
    send({ jsonrpc: '2.0', id: msg.id, result: { tools } });
  } else if (msg.method === 'tools/call') {
    if (mode === 'garbage') { process.stdout.write('{"jsonrpc": "2.0", "id": ' + JSON.stringify(msg.id) + ', "result": 42}\n'); return; }
    if (mode === 'hang') return;
    if (mode === 'notjson') { process.stdout.write('\u001b[2J{ this is not json\n'); return; }
    if (mode === 'roots') { pending = msg.id; send({ jsonrpc: '2.0', id: 'roots-1', method: 'roots/list' }); return; }
    if (mode === 'crash') { process.stderr.write('fake server: out of cheese\n'); process.exit(3); }
    if (mode === 'flood') {
      const data = 'n'.repeat(2000);
      for (let i = 0; i < FLOOD; i++) {
        send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', logger: 'flood', data: data + i } });
      }
    }
    const text = mode === 'huge' ? 'y'.repeat(1024 * 1024) : 'echo:' + JSON.stringify(msg.params.arguments);
    send({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text }] } });
  } else {
    send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'method not found' } });
  }
});
"#;

async fn hostile(mode: &str, timeout: &str) -> Setup {
    let ws = Workspace::new();
    let script = ws.path().join(".agent/fake.js");
    std::fs::write(&script, FAKE_SERVER).expect("script");
    let graph =
        config::parse(&hostile_config(&script, mode, timeout), "modes.toml").expect("config");
    Setup::with_graph(
        ws,
        graph,
        vec![
            call("call_1", "bad__echo", json!({"said": "hi"})),
            text("done"),
        ],
        PathBuf::new(),
    )
    .await
}

async fn echo_result(s: &Setup) -> String {
    let mut session = s.session("build").await;
    let outcome = session.send_message("echo").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    s.result(1, "call_1")
}

#[tokio::test]
async fn a_well_behaved_fake_server_echoes() {
    let s = hostile("fine", "10s").await;
    assert_eq!(echo_result(&s).await, r#"echo:{"said":"hi"}"#);
}

#[tokio::test]
async fn a_server_that_answers_with_garbage_gives_an_error() {
    let s = hostile("garbage", "2s").await;
    let result = echo_result(&s).await;
    assert_eq!(
        result,
        "MCP server `bad` answered the call of `echo` with something that is not a tool result"
    );
}

#[tokio::test]
async fn a_server_that_answers_with_a_line_that_is_not_json_gives_an_error() {
    // The timeout covers the server's start too: 4s leaves room for node to start on a loaded
    // machine (1s did not, under the whole suite on 2 cores).
    let s = hostile("notjson", "4s").await;
    let result = echo_result(&s).await;
    // rmcp drops a line it cannot read: no reply comes, and the timeout ends the call.
    assert!(
        result.starts_with("MCP server `bad` sent no reply to `echo` within 4s"),
        "{result}"
    );
}

#[tokio::test]
async fn a_server_that_hangs_gives_an_error_after_its_timeout() {
    let s = hostile("hang", "4s").await;
    let result = echo_result(&s).await;
    assert!(
        result.contains("sent no reply to `echo` within 4s"),
        "{result}"
    );
}

#[tokio::test]
async fn a_server_that_crashes_during_a_call_gives_an_error_with_its_stderr() {
    let s = hostile("crash", "10s").await;
    let result = echo_result(&s).await;
    assert!(
        result.contains("stopped during the call of `echo`"),
        "{result}"
    );
    assert!(result.contains("out of cheese"), "{result}");
}

#[tokio::test]
async fn a_huge_result_is_cut() {
    let s = hostile("huge", "10s").await;
    let result = echo_result(&s).await;
    assert!(result.len() < 300 * 1024, "{}", result.len());
    assert!(
        result.contains("bytes not shown"),
        "{}",
        &result[result.len() - 200..]
    );
}

/// Issue 36, item 7: a server that floods notifications grew the host's memory without bound
/// (1.37 GB in 21 s): the SDK gives each notification that reaches it a task of its own. The
/// host acts on none, so each is dropped as it is read and only counted: all 100,000 sent
/// during the call are counted there, none is held, and the call still gets its answer, read
/// after all of them.
#[tokio::test]
async fn a_server_flooding_notifications_is_held_to_a_bounded_queue() {
    let s = hostile("flood", "120s").await;
    assert_eq!(s.mcp.ignored_notifications("bad"), Some(0));
    assert_eq!(echo_result(&s).await, r#"echo:{"said":"hi"}"#);
    assert_eq!(s.mcp.ignored_notifications("bad"), Some(100_000));
    assert_eq!(s.mcp.ignored_notifications("nope"), None);
}

#[tokio::test]
async fn a_server_that_does_not_start_makes_its_listed_tools_errors() {
    let s = hostile("badinit", "1s").await;
    assert!(s.mcp.reports()[0].tools.is_err());
    let result = echo_result(&s).await;
    assert!(
        result.contains("MCP server `bad` did not start"),
        "{result}"
    );
    assert!(result.contains("the call was not sent"), "{result}");
}

#[tokio::test]
async fn clashing_mapped_names_and_a_schema_not_an_object_are_refused() {
    let s = hostile("names", "10s").await;
    let report = &s.mcp.reports()[0];
    let names: Vec<&str> = report
        .tools
        .as_ref()
        .expect("started")
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["bad__echo", "bad__with_space"]);
    assert_eq!(report.refused.len(), 2, "{:?}", report.refused);
    assert!(
        report.refused[0].contains("`stringly`: its input schema is not of type `object`"),
        "{:?}",
        report.refused
    );
    assert!(
        report.refused[1].contains("`a.b`, `a_b`"),
        "{:?}",
        report.refused
    );
}

#[tokio::test]
async fn the_workspace_is_the_servers_root() {
    let s = hostile("roots", "10s").await;
    let result = echo_result(&s).await;
    let roots: serde_json::Value = serde_json::from_str(&result).expect(&result);
    let root = std::fs::canonicalize(s.ws.path()).expect("canonical");
    assert_eq!(roots[0]["uri"], format!("file://{}", root.display()));
    assert_eq!(roots.as_array().map(Vec::len), Some(1));
}

fn bin() -> std::process::Command {
    crate::common::agent_controller()
}

#[test]
fn check_connect_starts_the_servers_and_lists_what_each_mode_offers() {
    let ws = Workspace::new();
    let config = ws.path().join("modes.toml");
    std::fs::write(&config, fs_config(&ws.path().join(".agent/fs.pid"))).expect("config");
    // Without --connect nothing starts: the names are checked against the config alone.
    let out = bin()
        .arg("check")
        .arg(&config)
        .current_dir(ws.path())
        .output()
        .expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("MCP servers"), "{stdout}");
    assert!(
        !ws.path().join(".agent/fs.pid").exists(),
        "no server started"
    );

    let out = bin()
        .args(["check", "--connect"])
        .arg(&config)
        .current_dir(ws.path())
        .output()
        .expect("check --connect");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("MCP servers:\n  fs: "), "{stdout}");
    assert!(
        stdout.contains(
            "  plan: fs__read_text_file, fs__list_directory, write_plan (plans), submit_plan (plans)\n"
        ),
        "{stdout}"
    );
    let build = stdout
        .lines()
        .find(|l| l.starts_with("  build: "))
        .expect("build line");
    assert!(build.contains("fs__write_file"), "{build}");
    assert!(build.ends_with("read_file (read-only)"), "{build}");
}

#[test]
fn check_connect_reports_a_listed_tool_the_server_lacks() {
    let ws = Workspace::new();
    let config = ws.path().join("modes.toml");
    let text = fs_config(&ws.path().join(".agent/fs.pid")).replace(
        "\"fs__list_directory\"",
        "\"fs__list_directory\", \"fs__format_disk\"",
    );
    std::fs::write(&config, text).expect("config");
    let out = bin()
        .args(["check", "--connect"])
        .arg(&config)
        .current_dir(ws.path())
        .output()
        .expect("check --connect");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("mode `plan` lists `fs__format_disk`, which its MCP server does not offer"),
        "{stderr}"
    );
}

#[test]
fn run_starts_no_server_of_a_workspace_config_it_was_not_given() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("config")).expect("config dir");
    let pid = ws.path().join(".agent/fs.pid");
    std::fs::write(ws.path().join("config/modes.toml"), fs_config(&pid)).expect("config");
    let out = bin()
        .args(["run", "--workspace"])
        .arg(ws.path())
        .arg("hello")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pass --config"), "{stderr}");
    assert!(!pid.exists(), "the server did not start");
    // Named, it starts and the session runs (the scripted model calls no MCP tool).
    let out = bin()
        .args(["run", "--workspace"])
        .arg(ws.path())
        .arg("--config")
        .arg(ws.path().join("config/modes.toml"))
        .args(["--mode", "build", "hello"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(pid.exists(), "the server started");
}

/// A streamable HTTP MCP server scripted with wiremock: JSON replies to `initialize`,
/// `tools/list` and `tools/call` (the echo of the arguments), 202 to notifications, 405 to the
/// GET that would open an event stream.
struct HttpServer;

impl wiremock::Respond for HttpServer {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        if request.method != wiremock::http::Method::POST {
            return wiremock::ResponseTemplate::new(405);
        }
        let msg: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let result = match msg["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": { "tools": {} },
                "serverInfo": { "name": "scripted-http", "version": "1.0.0" }
            }),
            Some("tools/list") => json!({ "tools": [{
                "name": "lookup",
                "description": "Looks up",
                "inputSchema": { "type": "object" },
                "annotations": { "readOnlyHint": true }
            }] }),
            Some("tools/call") => json!({ "content": [{
                "type": "text",
                "text": format!("found {}", msg["params"]["arguments"]["q"])
            }] }),
            _ if msg.get("id").is_none() => return wiremock::ResponseTemplate::new(202),
            _ => {
                return wiremock::ResponseTemplate::new(200).set_body_json(json!({
                    "jsonrpc": "2.0", "id": msg["id"],
                    "error": { "code": -32601, "message": "method not found" }
                }));
            }
        };
        wiremock::ResponseTemplate::new(200)
            .set_body_json(json!({ "jsonrpc": "2.0", "id": msg["id"], "result": result }))
    }
}

#[tokio::test]
async fn a_streamable_http_server_offers_and_runs_its_tools() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/mcp"))
        .respond_with(HttpServer)
        .mount(&server)
        .await;
    let config_text = format!(
        r#"
[[mcpServers]]
id = "web"
url = "{}/mcp"
trusted = true
timeout = "10s"

[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["web__*", "submit_plan"]

[[modes]]
id = "build"
default = true
"#,
        server.uri()
    );
    let graph = config::parse(&config_text, "modes.toml").expect("config");
    let s = Setup::with_graph(
        Workspace::new(),
        graph,
        vec![
            call("call_1", "web__lookup", json!({"q": "dark mode"})),
            text("done"),
        ],
        PathBuf::new(),
    )
    .await;
    let listed = s.mcp.reports()[0].tools.as_ref().expect("started");
    // Trusted and annotated read-only: the planning mode's wildcard offers it.
    assert_eq!(listed[0].access, ToolAccess::ReadOnly);
    let mut session = s.session("plan").await;
    session.send_message("look it up").await.expect("run");
    assert_eq!(
        s.model.requests()[0].tool_names,
        ["web__lookup", "submit_plan"]
    );
    assert_eq!(s.result(1, "call_1"), r#"found "dark mode""#);
}

#[tokio::test]
async fn an_http_server_that_is_not_there_does_not_start() {
    let config_text = r#"
[[mcpServers]]
id = "web"
url = "http://127.0.0.1:9/mcp"
timeout = "5s"

[[modes]]
id = "build"
availableTools = ["web__lookup"]
"#;
    let graph = config::parse(config_text, "modes.toml").expect("config");
    let s = Setup::with_graph(
        Workspace::new(),
        graph,
        vec![call("call_1", "web__lookup", json!({})), text("done")],
        PathBuf::new(),
    )
    .await;
    let error = s.mcp.reports()[0].tools.as_ref().expect_err("not started");
    assert!(
        error
            .to_string()
            .starts_with("MCP server `web` did not start"),
        "{error}"
    );
    let mut session = s.session("build").await;
    session.send_message("look").await.expect("run");
    assert!(
        s.result(1, "call_1").contains("did not start"),
        "{}",
        s.result(1, "call_1")
    );
}

#[tokio::test]
async fn a_tool_list_paged_without_end_is_cut_short() {
    let s = hostile("pages", "10s").await;
    let report = &s.mcp.reports()[0];
    let tools = report.tools.as_ref().expect("started");
    assert_eq!(tools.len(), 64);
    // The cut is said, not silent: the report names the pages left unread.
    assert!(
        report.refused.iter().any(|r| r.contains("past page 64")),
        "{:?}",
        report.refused
    );
    assert_eq!(echo_result(&s).await, r#"echo:{"said":"hi"}"#);
}
