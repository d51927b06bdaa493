//! A session acts in the workspace it recorded when it started (issue 19 item 1): restoring it
//! into a controller whose workspace is another directory, a directory that is gone, or a
//! different directory at the same path is refused with a typed error and changes nothing.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use agent_controller::controller::session_workspace;
use agent_controller::model::scripted::ReplayModel;
use agent_controller::store::{FileStore, SessionRecord, SessionStore};
use agent_controller::workspace::WorkspaceRecord;
use agent_controller::{
    AgentController, Decision, RunOutcome, SessionError, SessionOptions, ToolRegistry,
};
use common::Workspace;
use serde_json::json;

const CONFIG: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
instructions = "PLAN"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
default = true
instructions = "BUILD"
requireApproval = ["write_file"]
"#;

fn controller(
    workspace: Option<&Path>,
    store: &Arc<FileStore>,
    replies: Vec<agent_controller::ModelResponse>,
) -> AgentController {
    let mut builder =
        AgentController::builder(common::graph(CONFIG), Arc::new(ReplayModel::new(replies)))
            .tools(ToolRegistry::with_workspace_tools())
            .store(store.clone());
    if let Some(dir) = workspace {
        builder = builder.workspace(dir);
    }
    builder.build().expect("controller")
}

/// The build mode's work after an approval: write `marker.txt` (it waits for approval), then
/// finish.
fn build_replies() -> Vec<agent_controller::ModelResponse> {
    vec![
        ReplayModel::call(
            "call_w",
            "write_file",
            json!({"path": "marker.txt", "content": "written"}),
        ),
        ReplayModel::text("done"),
    ]
}

/// A session of `ws` with a plan pending, in a file store of its own; returns the store, the
/// session id and the plan's decision id.
async fn pending_plan(ws: &Workspace) -> (tempfile::TempDir, Arc<FileStore>, String, String) {
    let dir = tempfile::tempdir().expect("store dir");
    let store = Arc::new(FileStore::open(dir.path().join("sessions")).expect("store"));
    let plan = ws.plan("p.md", "# Plan\n\nWrite the marker.\n");
    let first = controller(
        Some(ws.path()),
        &store,
        vec![ReplayModel::call(
            "call_1",
            "submit_plan",
            json!({"path": plan}),
        )],
    );
    let mut session = first
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("start");
    let outcome = session.send_message("go").await.expect("run");
    let RunOutcome::Suspended { payload, .. } = outcome else {
        panic!("a plan is pending: {outcome:?}");
    };
    let decision = payload.decision_id.clone();
    (dir, store, session.id().to_owned(), decision)
}

async fn record(store: &FileStore, id: &str) -> SessionRecord {
    store.load(id).await.expect("load").expect("saved")
}

#[tokio::test]
async fn a_session_records_its_workspace_canonical_path_and_identity_at_start() {
    let ws = Workspace::new();
    let (_dir, store, id, _) = pending_plan(&ws).await;
    let saved = record(&store, &id).await;
    let recorded = saved.workspace.expect("the workspace is recorded");
    assert_eq!(recorded, WorkspaceRecord::of(ws.path()).expect("workspace"));
    assert_eq!(
        recorded.path,
        std::fs::canonicalize(ws.path()).expect("canonical")
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(ws.path()).expect("meta");
        assert_eq!(recorded.identity.device, Some(meta.dev()));
        assert_eq!(recorded.identity.inode, Some(meta.ino()));
    }
    // What the user sees names it: the pending listing and the `tool_suspended` payload.
    let listing = store
        .list_pending(agent_controller::store::now_millis())
        .await
        .expect("list");
    assert_eq!(
        listing.pending[0].terms.workspace.as_deref(),
        Some(&*recorded.path)
    );
    let pending = saved.pending.expect("pending");
    assert_eq!(
        pending.suspend_payload.terms.workspace.as_deref(),
        Some(&*recorded.path)
    );
}

#[tokio::test]
async fn a_decision_in_a_controller_of_another_workspace_is_refused_and_changes_nothing() {
    let ws = Workspace::new();
    let elsewhere = Workspace::new();
    let (_dir, store, id, decision) = pending_plan(&ws).await;
    let before = record(&store, &id).await;
    let wrong = controller(Some(elsewhere.path()), &store, build_replies());
    let error = wrong
        .restore_session(&id, SessionOptions::new())
        .await
        .expect_err("another workspace is refused");
    assert_eq!(
        error,
        SessionError::WrongWorkspace {
            session_id: id.clone(),
            recorded: std::fs::canonicalize(ws.path()).expect("canonical"),
            actual: std::fs::canonicalize(elsewhere.path()).expect("canonical"),
        }
    );
    let text = error.to_string();
    assert!(
        text.contains(&*ws.path().file_name().expect("ok").to_string_lossy()),
        "{text}"
    );
    assert!(
        text.contains(&*elsewhere.path().file_name().expect("ok").to_string_lossy()),
        "{text}"
    );
    assert_eq!(record(&store, &id).await, before, "nothing changed");

    // In its own workspace the same decision goes through, and the build mode works there.
    let right = controller(Some(ws.path()), &store, build_replies());
    let mut session = right
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore");
    assert_eq!(
        session.workspace(),
        &*std::fs::canonicalize(ws.path()).expect("ok")
    );
    let outcome = session
        .decide(&decision, Decision::approve())
        .await
        .expect("decide");
    let RunOutcome::ToolCallsSuspended {
        tool_calls: calls, ..
    } = outcome
    else {
        panic!("write_file waits: {outcome:?}");
    };
    assert_eq!(
        calls[0].payload().terms.workspace.as_deref(),
        Some(session.workspace())
    );
    // The waiting tool call, decided from a controller of another workspace: refused too.
    let wrong = controller(Some(elsewhere.path()), &store, vec![]);
    assert!(matches!(
        wrong.restore_session(&id, SessionOptions::new()).await,
        Err(SessionError::WrongWorkspace { .. })
    ));
    let outcome = session
        .decide(calls[0].decision_id(), Decision::approve())
        .await
        .expect("approve the call");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("marker.txt")).expect("written in ws"),
        "written"
    );
    assert!(!elsewhere.path().join("marker.txt").exists());
}

#[tokio::test]
async fn a_workspace_that_is_gone_or_another_directory_now_is_refused_and_changes_nothing() {
    let ws = Workspace::new();
    let (_dir, store, id, decision) = pending_plan(&ws).await;
    let before = record(&store, &id).await;
    let canonical = std::fs::canonicalize(ws.path()).expect("canonical");

    // Another directory at the same path: the old one moved aside (so its inode stays in use),
    // a new one made in its place.
    let aside = ws.path().with_extension("aside");
    std::fs::rename(ws.path(), &aside).expect("move aside");
    std::fs::create_dir(ws.path()).expect("new directory at the same path");
    let replaced = controller(Some(ws.path()), &store, build_replies());
    assert_eq!(
        replaced
            .restore_session(&id, SessionOptions::new())
            .await
            .expect_err("a different directory is refused"),
        SessionError::WorkspaceReplaced {
            session_id: id.clone(),
            path: canonical.clone(),
        }
    );
    // Gone: nothing at the path.
    std::fs::remove_dir(ws.path()).expect("remove");
    let error = replaced
        .restore_session(&id, SessionOptions::new())
        .await
        .expect_err("a missing workspace is refused");
    assert!(
        matches!(&error, SessionError::WorkspaceGone { session_id, .. } if *session_id == id),
        "{error:?}"
    );
    assert_eq!(record(&store, &id).await, before, "nothing changed");

    // Put back, and replaced while a session is live: its next act is refused too.
    std::fs::rename(&aside, ws.path()).expect("put back");
    let mut session = replaced
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("the same directory again");
    std::fs::rename(ws.path(), &aside).expect("move aside");
    std::fs::create_dir(ws.path()).expect("new directory");
    assert!(matches!(
        session.decide(&decision, Decision::approve()).await,
        Err(SessionError::WorkspaceReplaced { .. })
    ));
    assert_eq!(record(&store, &id).await, before, "nothing changed");
    std::fs::remove_dir(ws.path()).expect("remove");
    std::fs::rename(&aside, ws.path()).expect("put back");
}

/// A record written before workspaces were recorded (schema 4): restored into a controller that
/// names its workspace, the session adopts it (and records it at its next save); into one that
/// names none (the builder's default, the current directory), it is refused.
#[tokio::test]
async fn an_old_record_without_a_workspace_adopts_only_a_workspace_the_host_names() {
    let ws = Workspace::new();
    let (_dir, store, id, decision) = pending_plan(&ws).await;
    let mut old = serde_json::to_value(record(&store, &id).await).expect("json");
    let object = old.as_object_mut().expect("object");
    object.remove("workspace");
    object.insert("schemaVersion".into(), json!(4));
    let pending = &mut object["pending"]["suspendPayload"];
    pending
        .as_object_mut()
        .expect("payload")
        .remove("workspace");
    let path = store_file(&store, &id);
    std::fs::write(&path, serde_json::to_vec(&old).expect("ok")).expect("write old record");
    let loaded = record(&store, &id).await;
    assert_eq!(
        loaded.workspace, None,
        "an old record loads, without a workspace"
    );

    let unnamed = controller(None, &store, build_replies());
    assert_eq!(
        unnamed
            .restore_session(&id, SessionOptions::new())
            .await
            .expect_err("no workspace to act in"),
        SessionError::NoWorkspaceRecorded {
            session_id: id.clone()
        }
    );
    let named = controller(Some(ws.path()), &store, build_replies());
    let mut session = named
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("adopts the named workspace");
    session
        .decide(&decision, Decision::approve())
        .await
        .expect("decide");
    assert_eq!(
        record(&store, &id).await.workspace,
        Some(WorkspaceRecord::of(ws.path()).expect("ok")),
        "recorded from then on"
    );
}

/// `session_workspace`: where a stored session acts, checked before a host builds its
/// controller there, with the errors restoring gives; nothing changes.
#[tokio::test]
async fn session_workspace_names_the_recorded_workspace_and_refuses_any_other() {
    let ws = Workspace::new();
    let elsewhere = Workspace::new();
    let (_dir, store, id, _) = pending_plan(&ws).await;
    let before = record(&store, &id).await;
    let canonical = std::fs::canonicalize(ws.path()).expect("canonical");

    assert_eq!(
        session_workspace(&*store, &id, None).await,
        Ok(canonical.clone())
    );
    let same = ws.path().join(".");
    assert_eq!(
        session_workspace(&*store, &id, Some(&same)).await,
        Ok(canonical.clone()),
        "the same directory spelled another way"
    );
    assert_eq!(
        session_workspace(&*store, &id, Some(elsewhere.path())).await,
        Err(SessionError::WrongWorkspace {
            session_id: id.clone(),
            recorded: canonical.clone(),
            actual: std::fs::canonicalize(elsewhere.path()).expect("canonical"),
        })
    );
    assert_eq!(
        session_workspace(&*store, "nobody", None).await,
        Err(SessionError::UnknownSession("nobody".to_owned()))
    );

    let aside = ws.path().with_extension("aside");
    std::fs::rename(ws.path(), &aside).expect("move aside");
    std::fs::create_dir(ws.path()).expect("new directory at the same path");
    assert_eq!(
        session_workspace(&*store, &id, None).await,
        Err(SessionError::WorkspaceReplaced {
            session_id: id.clone(),
            path: canonical.clone(),
        })
    );
    std::fs::remove_dir(ws.path()).expect("remove");
    let gone = session_workspace(&*store, &id, None).await;
    assert!(
        matches!(&gone, Err(SessionError::WorkspaceGone { session_id, .. }) if *session_id == id),
        "{gone:?}"
    );
    std::fs::rename(&aside, ws.path()).expect("put back");
    assert_eq!(record(&store, &id).await, before, "nothing changed");

    // A record from before workspaces: only a named workspace, which it adopts.
    let mut old = serde_json::to_value(&before).expect("json");
    let object = old.as_object_mut().expect("object");
    object.remove("workspace");
    object.insert("schemaVersion".into(), json!(4));
    object["pending"]["suspendPayload"]
        .as_object_mut()
        .expect("payload")
        .remove("workspace");
    let path = store_file(&store, &id);
    std::fs::write(&path, serde_json::to_vec(&old).expect("ok")).expect("write old record");
    assert_eq!(
        session_workspace(&*store, &id, None).await,
        Err(SessionError::NoWorkspaceRecorded {
            session_id: id.clone()
        })
    );
    assert_eq!(
        session_workspace(&*store, &id, Some(elsewhere.path())).await,
        Ok(elsewhere.path().to_path_buf())
    );
}

#[tokio::test]
async fn a_session_cannot_start_in_a_workspace_that_does_not_exist() {
    let ws = Workspace::new();
    let missing = ws.path().join("missing");
    let dir = tempfile::tempdir().expect("store dir");
    let store = Arc::new(FileStore::open(dir.path().join("sessions")).expect("store"));
    let error = controller(Some(&missing), &store, vec![])
        .start_session(SessionOptions::new())
        .await
        .expect_err("refused");
    assert!(
        matches!(error, SessionError::WorkspaceGone { .. }),
        "{error:?}"
    );
    assert!(
        store
            .list_pending(agent_controller::store::now_millis())
            .await
            .expect("ok")
            .pending
            .is_empty()
    );
}

/// The file of session `id` in `store` (whichever state suffix it has).
fn store_file(store: &FileStore, id: &str) -> std::path::PathBuf {
    let dir = store.dir();
    ["json", "pending.json", "running.json"]
        .iter()
        .map(|suffix| dir.join(format!("{id}.{suffix}")))
        .find(|p| p.exists())
        .expect("a record file")
}
