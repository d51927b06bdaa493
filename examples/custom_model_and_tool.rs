//! A host built the way a harness builder would: its own `LanguageModel`, its own `Tool` that
//! reads the host's data, modes built in code, sessions in a `FileStore`, and a restore in a
//! fresh controller (as after a restart) to approve the plan.
//!
//! Run with `cargo run --example custom_model_and_tool`.

use std::path::Path;
use std::sync::Arc;

use agent_controller::{
    AgentController, Decision, FileStore, LanguageModel, ModeGraph, ModelError, ModelRequest,
    ModelResponse, RunOutcome, SessionOptions, Tool, ToolCall, ToolContext, ToolOutput,
    ToolRegistry, config::ModeBuilder, config::ModeGraphBuilder, model::Message,
};
use serde_json::{Value, json};

/// The host's own data, handed to tools through the session's extensions.
struct Tenant {
    name: String,
}

/// A tool of the host's own: counts the words of `text`, signed with the tenant's name.
struct WordCount;

#[agent_controller::async_trait]
impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }
    fn description(&self) -> String {
        "Counts the words of `text`.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    async fn execute(&self, args: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let tenant = ctx.extensions.get::<Tenant>().map_or("nobody", |t| &t.name);
        match args["text"].as_str() {
            Some(text) => ToolOutput::ok(format!(
                "{} words (for {tenant}, session {})",
                text.split_whitespace().count(),
                ctx.session_id
            )),
            None => ToolOutput::error("`text` must be a string"),
        }
    }
}

/// A model of the host's own: in `plan` it writes a plan and submits it; in `build` it counts
/// the plan's words with the host's tool and is done.
struct Planner;

fn call(id: &str, name: &str, args: Value) -> ModelResponse {
    ModelResponse {
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            args,
        }],
        ..ModelResponse::default()
    }
}

#[agent_controller::async_trait]
impl LanguageModel for Planner {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        // The last tool result of the conversation, if the last message is one.
        let last_result = match request.messages.last() {
            Some(Message::Tool {
                tool_name, content, ..
            }) => Some((tool_name.as_str(), content.as_str())),
            _ => None,
        };
        let reply = match (request.mode_id, last_result) {
            ("plan", None) => call(
                "c1",
                "write_plan",
                json!({"path": "dark-mode.md", "content": "# Dark mode\n\n1. Add a theme setting.\n2. Test both palettes.\n"}),
            ),
            ("plan", Some(("write_plan", path))) => {
                call("c2", "submit_plan", json!({"path": path}))
            }
            ("build", Some(("word_count", counted))) => ModelResponse {
                text: format!("Built it; the plan had {counted}."),
                ..ModelResponse::default()
            },
            ("build", _) => call(
                "c3",
                "word_count",
                json!({"text": "Add a theme setting. Test both palettes."}),
            ),
            (mode, _) => return Err(ModelError::new(format!("nothing to do in mode `{mode}`"))),
        };
        Ok(reply)
    }
}

fn modes() -> Result<ModeGraph, agent_controller::ConfigError> {
    ModeGraphBuilder::new()
        .mode(
            ModeBuilder::new("plan")
                .instructions("Write a plan with write_plan, then submit it.")
                .transitions_to("build")
                .available_tools(["write_plan", "submit_plan"]),
        )
        .mode(
            ModeBuilder::new("build")
                .instructions("Carry out the approved plan.")
                .available_tools(["word_count"]),
        )
        .default_mode_id("build")
        .build()
}

/// The store lies outside the workspace, where the model's tools cannot reach it (inside, the
/// controller would protect it anyway: `SessionStore::protected_paths`).
fn controller(workspace: &Path, sessions: &Path) -> agent_controller::Result<AgentController> {
    let mut tools = ToolRegistry::with_workspace_tools();
    tools.register(Arc::new(WordCount))?;
    let store = FileStore::open(sessions)?;
    Ok(AgentController::builder(modes()?, Arc::new(Planner))
        .tools(tools)
        .workspace(workspace)
        .store(Arc::new(store))
        .build()?)
}

fn options() -> SessionOptions {
    SessionOptions::new().extension(Tenant {
        name: "acme".to_owned(),
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> agent_controller::Result<()> {
    let workspace = tempfile::tempdir().map_err(|e| {
        agent_controller::store::StoreError::backend("create a temporary workspace", e)
    })?;
    let sessions = tempfile::tempdir()
        .map_err(|e| agent_controller::store::StoreError::backend("create a temporary store", e))?;

    // First process: plan, then stop with the plan pending.
    let session_id = {
        let controller = controller(workspace.path(), sessions.path())?;
        let mut session = controller.start_session(options().mode("plan")).await?;
        let outcome = session.send_message("Add dark mode").await?;
        let RunOutcome::Suspended { payload, .. } = outcome else {
            panic!("expected the plan to wait for approval, got {outcome:?}");
        };
        println!(
            "plan submitted: {:?}\n{}",
            payload.submission.title, payload.submission.plan
        );
        session.id().to_owned()
    };

    // Second process (a fresh controller on the same store): approve, and the build runs.
    let controller = controller(workspace.path(), sessions.path())?;
    let mut session = controller.restore_session(&session_id, options()).await?;
    let pending = session.pending_plan().expect("the plan is still pending");
    let (run_id, tool_call_id) = (
        pending.run_id().to_owned(),
        pending.tool_call_id().to_owned(),
    );
    let sha256 = pending.payload().submission.sha256.clone();
    let outcome = session
        .resume(
            &run_id,
            &tool_call_id,
            Decision::approve().with_sha256(sha256),
        )
        .await?;
    let RunOutcome::Completed { text, .. } = outcome else {
        panic!("expected the build to finish, got {outcome:?}");
    };
    println!("mode: {}\nmodel: {text}", session.mode().id());
    assert_eq!(session.mode().id(), "build");
    assert!(
        text.contains("for acme"),
        "the tool read the host's data: {text}"
    );
    Ok(())
}
