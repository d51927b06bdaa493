//! Deciding from another process: a host process plans and stops with the plan pending in a
//! `FileStore`; a second process (a reviewer: this example run again, as a child) lists what
//! waits in the store, restores the session and approves the plan pinned to its sha256; the
//! host restores the session afterwards and finds it handed over to build mode.
//!
//!     cargo run --example decide_from_another_process
//!
//! The same works across machines with the PostgreSQL store (`--features postgres`), and from
//! the command line with `agent-controller pending` and `agent-controller decide`. The example
//! checks what it shows and exits non-zero if the flow breaks: the reviewer must find exactly
//! one pending plan, the host must see the approval, and its stale copy of the session must be
//! refused rather than decide a second time.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use agent_controller::model::scripted::ScriptedModel;
use agent_controller::session::SessionErrorKind;
use agent_controller::{
    AgentController, Decision, FileStore, RunOutcome, SessionOptions, ToolRegistry,
};

const MODES: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
"#;

/// The controller both processes build the same way: same modes, same workspace, same store.
fn controller(workspace: &Path, store: &Path) -> agent_controller::Result<AgentController> {
    let graph = agent_controller::config::parse(MODES, "modes.toml")?;
    Ok(
        AgentController::builder(graph, Arc::new(ScriptedModel::new()))
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(workspace)
            .store(Arc::new(FileStore::open(store)?))
            .build()?,
    )
}

/// The reviewer's process: find the one plan that waits, show it, approve it pinned.
async fn review(workspace: &Path, store: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let controller = controller(workspace, store)?;
    let listing = controller.list_pending().await?;
    assert_eq!(listing.pending.len(), 1, "one plan waits: {listing:?}");
    let waiting = &listing.pending[0];
    println!(
        "[reviewer {}] session {}: plan {:?} (sha256 {}...)",
        std::process::id(),
        waiting.session_id,
        waiting.title,
        &waiting.sha256[..12]
    );
    let mut session = controller
        .restore_session(&waiting.session_id, SessionOptions::new())
        .await?;
    let approve = Decision::approve()
        .with_sha256(&waiting.sha256)
        .decided_by("reviewer");
    let outcome = session.decide(&waiting.decision_id, approve).await?;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    println!(
        "[reviewer] approved; the session is in mode {}",
        session.mode().id()
    );
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, workspace, store] = args.as_slice()
        && role == "review"
    {
        return review(Path::new(workspace), Path::new(store)).await;
    }

    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    let controller = controller(workspace.path(), store.path())?;
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await?;
    let RunOutcome::Suspended { payload, .. } = session.send_message("Add dark mode").await? else {
        panic!("the scripted model submits a plan in plan mode");
    };
    println!(
        "[host {}] plan {:?} waits in the store; asking a reviewer",
        std::process::id(),
        payload.submission.title
    );

    // The reviewer: another process on the same store and workspace.
    let status = Command::new(std::env::current_exe()?)
        .arg("review")
        .arg(workspace.path())
        .arg(store.path())
        .status()?;
    assert!(status.success(), "the reviewer failed: {status}");

    // The host's copy of the session is stale now: deciding with it is refused, nothing changes.
    let stale = session
        .decide(&payload.decision_id, Decision::reject())
        .await
        .expect_err("the plan was decided by the reviewer");
    assert_eq!(stale.kind(), SessionErrorKind::Conflict, "{stale}");
    println!("[host] my stale copy is refused: {stale}");

    // Restored, the session is where the reviewer left it.
    let session = controller
        .restore_session(session.id(), SessionOptions::new())
        .await?;
    assert_eq!(session.mode().id(), "build");
    let history = session.decision_history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].decided_by.as_deref(), Some("reviewer"));
    assert!(controller.list_pending().await?.pending.is_empty());
    println!(
        "[host] restored: mode {}, decided by {}",
        session.mode().id(),
        history[0].decided_by.as_deref().unwrap_or("?")
    );
    Ok(())
}
