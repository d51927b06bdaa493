//! A hostile model's trial of main (issue 19, "beyond these examples"): each fault it found is
//! a test here.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_controller::model::scripted::ReplayModel;
use agent_controller::{
    AgentController, Event, RunOutcome, Tool, ToolAccess, ToolContext, ToolOutput, ToolRegistry,
};
use common::{Recorder, Workspace};
use serde_json::{Value, json};

/// A host tool with a strict schema that counts its runs.
struct Strict(Arc<AtomicUsize>);

#[agent_controller::async_trait]
impl Tool for Strict {
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> String {
        "Deploys `service` to `replicas` machines.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "service": { "type": "string" },
                "replicas": { "type": "integer", "minimum": 1 },
            },
            "required": ["service"],
            "additionalProperties": false,
        })
    }
    fn access(&self) -> ToolAccess {
        ToolAccess::Writes
    }
    async fn execute(&self, _args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        self.0.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok("deployed")
    }
}

const SCHEMA_CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["write_file", "deploy"]

[[modes]]
id = "careful"
availableTools = ["write_file", "deploy"]
requireApproval = true
"#;

fn results(events: &[Event]) -> Vec<(String, String, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolEnd {
                tool_call_id,
                result,
                is_error,
                ..
            } => Some((tool_call_id.clone(), result.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

/// Item 1: arguments outside the tool's schema (an unknown property, a wrong type, a missing
/// required one) are refused before the tool runs or waits, for a built-in and a host tool,
/// and the model is told why.
#[tokio::test]
async fn arguments_outside_the_tool_schema_are_refused_before_running_or_waiting() {
    let bad = [
        (
            "w1",
            "write_file",
            json!({"path": "a.txt", "content": "x", "mode": "0777"}),
            "`mode`",
        ),
        (
            "w2",
            "write_file",
            json!({"path": "a.txt", "content": 5}),
            "`content` must be a string",
        ),
        (
            "w3",
            "write_file",
            json!({"content": "x"}),
            "required property `path`",
        ),
        (
            "d1",
            "deploy",
            json!({"service": "api", "force": true}),
            "`force`",
        ),
        (
            "d2",
            "deploy",
            json!({"service": "api", "replicas": "all"}),
            "`replicas` must be an integer",
        ),
        (
            "d3",
            "deploy",
            json!({"replicas": 2}),
            "required property `service`",
        ),
    ];
    for mode in ["build", "careful"] {
        let ws = Workspace::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let mut tools = ToolRegistry::with_workspace_tools();
        tools
            .register(Arc::new(Strict(runs.clone())))
            .expect("register");
        let replies = vec![
            agent_controller::ModelResponse {
                tool_calls: bad
                    .iter()
                    .map(|(id, name, args, _)| {
                        agent_controller::ToolCall::new(*id, *name, args.clone())
                    })
                    .collect(),
                ..Default::default()
            },
            ReplayModel::text("done"),
        ];
        let controller =
            AgentController::builder(common::graph(SCHEMA_CONFIG), common::replay(replies))
                .tools(tools)
                .workspace(ws.path())
                .build()
                .expect("controller");
        let recorder = Recorder::default();
        let mut session = controller
            .start_session(recorder.options().mode(mode))
            .await
            .expect("session");
        let outcome = session.send_message("go").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{mode}: {outcome:?}"
        );
        assert!(
            session.pending_tool_calls().is_empty(),
            "{mode}: nothing waits"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0, "{mode}: deploy never ran");
        assert!(!ws.path().join("a.txt").exists(), "{mode}: nothing written");
        let results = results(&recorder.take());
        for (id, _, _, why) in &bad {
            let (_, text, is_error) = results
                .iter()
                .find(|(r, _, _)| r == id)
                .unwrap_or_else(|| panic!("{mode}: no result for {id}: {results:#?}"));
            assert!(is_error, "{mode} {id}: {text}");
            assert!(text.starts_with("Not executed:"), "{mode} {id}: {text}");
            assert!(text.contains(why), "{mode} {id}: {text}");
        }
    }
}
