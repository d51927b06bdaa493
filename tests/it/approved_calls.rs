//! What happens to a tool call the user approved when it is about to run: it gets every check a
//! call that never waited gets, made again then (the config, the tools or the workspace may have
//! changed while it waited, a restore under other tools among them). A call whose arguments the
//! tool now refuses, like one a `deny` rule now refuses, never runs: the model is told why.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_controller::model::scripted::ReplayModel;
use agent_controller::store::MemoryStore;
use agent_controller::tool::{Tool, ToolContext, ToolOutput};
use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::common::{Workspace, graph, tool_results};

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["deploy"]
requireApproval = ["deploy"]
"#;

/// A tool that counts its runs; its input schema is the one it was made with.
struct Deploy {
    schema: Value,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Deploy {
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> String {
        "Deploys.".to_owned()
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    async fn execute(&self, _: &Value, _: &ToolContext<'_>) -> ToolOutput {
        self.runs.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok("deployed")
    }
}

fn controller(
    ws: &Workspace,
    model: Arc<ReplayModel>,
    store: Arc<MemoryStore>,
    schema: Value,
    runs: &Arc<AtomicUsize>,
) -> AgentController {
    let mut tools = ToolRegistry::new();
    tools
        .register(Arc::new(Deploy {
            schema,
            runs: runs.clone(),
        }))
        .expect("registers");
    AgentController::builder(graph(CONFIG), model)
        .tools(tools)
        .workspace(ws.path())
        .store(store)
        .build()
        .expect("controller")
}

/// The call waited under a tool that took any object; it is approved in a process whose tool
/// wants `target` to be a string. The approval used to run it with arguments the tool refuses
/// (only a `deny` rule was checked again): it is refused, and the model told why.
#[tokio::test]
async fn an_approved_call_whose_arguments_the_tool_now_refuses_never_runs() {
    let ws = Workspace::new();
    let store = Arc::new(MemoryStore::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let model = Arc::new(ReplayModel::new([
        ReplayModel::call("c1", "deploy", json!({ "target": 5 })),
        ReplayModel::text("done"),
    ]));
    let lax = controller(
        &ws,
        model.clone(),
        store.clone(),
        json!({ "type": "object" }),
        &runs,
    );
    let mut session = lax
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("deploy").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    let (session_id, decision_id) = (
        session.id().to_owned(),
        session.pending()[0].decision_id().to_owned(),
    );
    drop(session);
    let strict = controller(
        &ws,
        model,
        store,
        json!({
            "type": "object",
            "properties": { "target": { "type": "string" } },
            "required": ["target"],
        }),
        &runs,
    );
    let mut session = strict
        .restore_session(&session_id, SessionOptions::new())
        .await
        .expect("restored");
    let outcome = session
        .decide(&decision_id, Decision::approve())
        .await
        .expect("decided");
    assert!(
        matches!(outcome, RunOutcome::Completed { ref text, .. } if text == "done"),
        "{outcome:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the refused call never ran");
    let results = tool_results(session.messages());
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, "c1");
    assert_eq!(
        results[0].1, "Not executed: `target` must be a string, not a number.",
        "the model is told why"
    );
}
