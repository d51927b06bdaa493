//! A tool that asks: `confirm_deploy` suspends its call with the deploy target and a form
//! schema (`ToolOutput::suspend`); the run waits in a `FileStore` with the question pending; a
//! second host (another controller on the same store, as another process would be) lists what
//! waits, answers it pinned to the payload's sha256, and the tool's `resume` step turns the
//! answer into the call's result for the model.
//!
//!     cargo run --example confirm_tool
//!
//! From the command line the same answer is `agent-controller decide --store STORE SESSION
//! --answer-json '{"confirm": true}'` (a host that has the tool carries the run on). The example
//! checks what it shows and exits non-zero when its flow breaks: a bad answer must be refused
//! and change nothing, and the model must get the tool's result.

use std::path::Path;
use std::sync::Arc;

use agent_controller::model::Message;
use agent_controller::model::scripted::ReplayModel;
use agent_controller::store::PendingKind;
use agent_controller::{
    AgentController, Decision, FileStore, RunOutcome, SessionError, SessionOptions, Tool,
    ToolContext, ToolOutput, ToolRegistry, async_trait,
};
use serde_json::{Value, json};

const MODES: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "confirm_deploy"]
"#;

/// Asks the user to confirm the deploy target before it deploys.
struct ConfirmDeploy;

#[async_trait]
impl Tool for ConfirmDeploy {
    fn name(&self) -> &str {
        "confirm_deploy"
    }
    fn description(&self) -> String {
        "Deploys to `target` once the user confirms.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "target": { "type": "string" } },
            "required": ["target"],
        })
    }
    async fn execute(&self, args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        let target = args["target"].as_str().unwrap_or_default();
        // The run waits for an answer that fits this form; outside a run, the fallback text.
        ToolOutput::suspend(
            format!("Deploy to {target}? The user has to confirm it."),
            json!({ "target": target }),
            json!({
                "type": "object",
                "properties": {
                    "confirm": { "type": "boolean" },
                    "note": { "type": "string" },
                },
                "required": ["confirm"],
                "additionalProperties": false,
            }),
        )
    }
    async fn resume(&self, args: &Value, answer: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        let target = args["target"].as_str().unwrap_or_default();
        match answer["confirm"].as_bool() {
            Some(true) => ToolOutput::ok(format!("Deployed to {target}.")),
            _ => ToolOutput::error(format!("The user did not confirm the deploy to {target}.")),
        }
    }
}

fn controller(
    workspace: &Path,
    store: &Path,
    model: ReplayModel,
) -> agent_controller::Result<AgentController> {
    let graph = agent_controller::config::parse(MODES, "modes.toml")?;
    let mut tools = ToolRegistry::with_workspace_tools();
    tools.register(Arc::new(ConfirmDeploy))?;
    Ok(AgentController::builder(graph, Arc::new(model))
        .tools(tools)
        .workspace(workspace)
        .store(Arc::new(FileStore::open(store)?))
        .build()?)
}

fn check(ok: bool, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    if ok {
        Ok(())
    } else {
        Err(format!("the flow broke: {what}").into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let (workspace, store) = (dir.path().join("ws"), dir.path().join("sessions"));
    std::fs::create_dir_all(&workspace)?;

    // The host: the model calls the tool, and the run waits for the user.
    let model = ReplayModel::new([ReplayModel::call(
        "call_1",
        "confirm_deploy",
        json!({ "target": "staging" }),
    )]);
    let host = controller(&workspace, &store, model)?;
    let mut session = host.start_session(SessionOptions::new()).await?;
    let id = session.id().to_owned();
    let outcome = session.send_message("Deploy the app").await?;
    check(
        matches!(outcome, RunOutcome::AwaitingAnswer { .. }),
        "the run waits for the answer",
    )?;
    println!(
        "[host] the run waits: {}",
        session.pending()[0].decision_id()
    );
    drop(session);

    // Another host: what waits, and the answer, pinned to the payload it showed.
    let model = ReplayModel::new([ReplayModel::text("Staging is deployed.")]);
    let reviewer = controller(&workspace, &store, model)?;
    let listing = reviewer.list_pending().await?;
    check(listing.pending.len() == 1, "one question waits")?;
    let waiting = &listing.pending[0];
    check(
        waiting.kind == PendingKind::Suspension,
        "it is the tool's suspension",
    )?;
    println!(
        "[reviewer] {} asks: {}",
        waiting.tool_name.as_deref().unwrap_or_default(),
        waiting.payload.clone().unwrap_or_default()
    );
    let mut session = reviewer.restore_session(&id, SessionOptions::new()).await?;
    let bad = session
        .decide(
            &waiting.decision_id,
            Decision::answer(json!({ "confirm": "yes" })),
        )
        .await;
    check(
        matches!(bad, Err(SessionError::InvalidAnswer { .. })) && session.pending().len() == 1,
        "an answer that does not fit is refused and changes nothing",
    )?;
    let answer = Decision::answer(json!({ "confirm": true }))
        .with_sha256(&waiting.sha256)
        .decided_by("alice");
    let outcome = session.decide(&waiting.decision_id, answer).await?;
    check(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "Staging is deployed."),
        "the run carries on to the model's last reply",
    )?;
    let result = session.messages().iter().find_map(|m| match m {
        Message::Tool { content, .. } => Some(content.clone()),
        _ => None,
    });
    check(
        result.as_deref() == Some("Deployed to staging."),
        "the model got the tool's result",
    )?;
    println!("[reviewer] answered; the tool said: Deployed to staging.");
    Ok(())
}
