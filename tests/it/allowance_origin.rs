//! An allowance covers the tool it was given for (issue 36, item 5): one given for an MCP
//! server's tool records that server (its command and arguments, `Tool::origin`) and covers no
//! other server that reuses the tool's name; and no allowance is given for a call that cannot
//! run where it is decided (a client's MCP tool decided from the command line).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_controller::allowance::AllowanceScope;
use agent_controller::model::scripted::ReplayModel;
use agent_controller::{
    AgentController, Decision, MemoryStore, RunOutcome, SessionError, SessionOptions, SessionStore,
    Tool, ToolContext, ToolOutput, ToolRegistry,
};
use common::Workspace;
use serde_json::{Value, json};

/// Every call waits for approval unless an allowance covers it.
const ASKING: &str = r#"
[[modes]]
id = "build"
default = true
requireApproval = true
"#;

/// A tool an MCP server runs: `origin` names the server.
struct Remote {
    origin: &'static str,
    runs: Arc<AtomicUsize>,
}

#[agent_controller::async_trait]
impl Tool for Remote {
    fn name(&self) -> &str {
        "fs__write_file"
    }
    fn description(&self) -> String {
        "Writes a file (an MCP server's tool).".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn origin(&self) -> Option<String> {
        Some(self.origin.to_owned())
    }
    async fn execute(&self, _: &Value, _: &ToolContext<'_>) -> ToolOutput {
        self.runs.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok(format!("written by {}", self.origin))
    }
}

/// A host on `store` whose `fs__write_file` is run by `origin` (none: the host has no such
/// tool), counting its runs in `runs`.
fn host(
    ws: &Workspace,
    store: &Arc<MemoryStore>,
    origin: Option<&'static str>,
    runs: &Arc<AtomicUsize>,
) -> AgentController {
    let mut tools = ToolRegistry::new();
    if let Some(origin) = origin {
        let remote = Remote {
            origin,
            runs: runs.clone(),
        };
        tools.register(Arc::new(remote)).expect("register");
    }
    AgentController::builder(common::graph(ASKING), common::replay(vec![]))
        .tools(tools)
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller")
}

fn calls_remote() -> Arc<ReplayModel> {
    common::replay(vec![
        ReplayModel::call("c1", "fs__write_file", json!({"path": "a.txt"})),
        ReplayModel::text("done"),
    ])
}

const SERVER_A: &str = r#"mcp stdio node ["fs-server.js"]"#;
const SERVER_B: &str = r#"mcp stdio node ["another-server.js"]"#;

#[tokio::test]
async fn a_workspace_allowance_of_an_mcp_tool_covers_its_own_server_only() {
    let ws = Workspace::new();
    let store = Arc::new(MemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let a = host(&ws, &store, Some(SERVER_A), &runs);
    let mut first = a
        .start_session(SessionOptions::new().model(calls_remote()))
        .await
        .expect("start");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } =
        first.send_message("write").await.expect("send")
    else {
        panic!("the call asks");
    };
    let always = Decision::approve()
        .always_allow()
        .scope(AllowanceScope::Workspace);
    first
        .decide(tool_calls[0].decision_id(), always)
        .await
        .expect("decide");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Another host whose client gives a different server under the same name: asked.
    let b = host(&ws, &store, Some(SERVER_B), &runs);
    let mut other = b
        .start_session(SessionOptions::new().model(calls_remote()))
        .await
        .expect("start");
    let outcome = other.send_message("write").await.expect("send");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "the allowance of server A ran server B's tool: {outcome:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // The same server again: the allowance covers it.
    let again = host(&ws, &store, Some(SERVER_A), &runs);
    let mut same = again
        .start_session(SessionOptions::new().model(calls_remote()))
        .await
        .expect("start");
    let outcome = same.send_message("write").await.expect("send");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let kept = store.list_workspace_allowances(None).await.expect("list");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].origin.as_deref(), Some(SERVER_A));
}

#[tokio::test]
async fn no_allowance_is_given_for_a_call_that_cannot_run_where_it_is_decided() {
    let ws = Workspace::new();
    let store = Arc::new(MemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let editor = host(&ws, &store, Some(SERVER_A), &runs);
    let mut session = editor
        .start_session(SessionOptions::new().model(calls_remote()))
        .await
        .expect("start");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } =
        session.send_message("write").await.expect("send")
    else {
        panic!("the call asks");
    };
    let id = session.id().to_owned();
    drop(session);

    // Decided from a host without the client's server (the command line's `decide`).
    let cli = host(&ws, &store, None, &runs);
    let mut restored = cli
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore");
    let always = Decision::approve()
        .always_allow()
        .scope(AllowanceScope::Workspace);
    let err = restored
        .decide(tool_calls[0].decision_id(), always)
        .await
        .expect_err("nothing here runs the call");
    assert!(
        matches!(&err, SessionError::MalformedDecision(why) if why.contains("fs__write_file")),
        "{err}"
    );
    assert!(
        store
            .list_workspace_allowances(None)
            .await
            .expect("list")
            .is_empty(),
        "an allowance was kept for a call that never ran"
    );
    assert_eq!(restored.pending().len(), 1, "nothing was decided");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}
