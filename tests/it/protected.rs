//! Protected paths: a model that works in a workspace holding the session store or the mode
//! config cannot read or change them through the workspace tools (hostile-model trial: it read
//! other sessions' conversations, forged a pending plan or `modeId: "build"` into a record, and
//! rewrote the config so the next plan-mode run offered `write_file`).
#![cfg(feature = "openai")]

use std::path::Path;
#[cfg(feature = "cli")]
use std::process::Stdio;
use std::sync::Arc;

use agent_controller::store::{FileStore, SessionStore};
use agent_controller::{AgentController, Event, SessionOptions, ToolRegistry, config};
use serde_json::json;

use crate::common::Recorder;
use crate::common::openai_server::{Call, ScriptedServer, call, calls, text};

const CONFIG: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
transitionsTo = "build"
availableTools = ["read_file", "list_files", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
default = true
"#;

fn read(id: &str, path: &str) -> Call {
    call(id, "read_file", &json!({ "path": path }).to_string())
}

fn write(id: &str, path: &str, content: &str) -> Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": content }).to_string(),
    )
}

fn list(id: &str, path: &str) -> Call {
    call(id, "list_files", &json!({ "path": path }).to_string())
}

/// The results of every tool call, in order: (tool call id, result, is_error).
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

fn assert_all_refused(events: &[Event], count: usize) {
    let results = results(events);
    assert_eq!(results.len(), count, "{results:#?}");
    for (id, result, is_error) in &results {
        assert!(*is_error, "{id} was not refused: {result}");
        assert!(result.contains("protected"), "{id}: {result}");
    }
}

fn controller(
    ws: &Path,
    server: &ScriptedServer,
    store: Option<Arc<dyn SessionStore>>,
    extra: &[&Path],
) -> AgentController {
    let graph = config::parse(CONFIG, "modes.toml").expect("config");
    let mut builder = AgentController::builder(graph, Arc::new(server.model()))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws);
    if let Some(store) = store {
        builder = builder.store(store);
    }
    for path in extra {
        builder = builder.protected_path(path);
    }
    builder.build().expect("controller")
}

#[tokio::test]
async fn a_file_store_inside_the_workspace_is_neither_read_nor_written_by_the_tools() {
    let ws = tempfile::tempdir().expect("tempdir");
    let store_dir = ws.path().join(".agent/sessions");
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(&store_dir).expect("store"));
    std::fs::create_dir_all(ws.path().join("src")).expect("mkdir");
    std::fs::write(ws.path().join("src/link-target"), "x").expect("write");
    // A symlink inside the workspace that leads into the store.
    std::os::unix::fs::symlink(".agent/sessions", ws.path().join("peek")).expect("symlink");

    let server = ScriptedServer::start(vec![]).await;
    let other = controller(ws.path(), &server, Some(store.clone()), &[]);
    let victim = other
        .start_session(SessionOptions::new().id("victim"))
        .await
        .expect("victim session");
    drop(victim);
    let record = store_dir.join("victim.json");
    let before = std::fs::read(&record).expect("the victim's record");

    let forged = r#"{"sessionId":"victim","modeId":"build","pending":null}"#;
    let server = ScriptedServer::start(vec![
        calls([
            read("r1", ".agent/sessions/victim.json"),
            read("r2", "./src/../.agent/sessions/victim.json"),
            read("r3", "peek/victim.json"),
            list("l1", ".agent/sessions"),
            list("l2", "peek/.locks"),
        ]),
        calls([
            write("w1", ".agent/sessions/victim.json", forged),
            write("w2", "peek/victim.json", forged),
            write("w3", ".agent/sessions/forged.json", forged),
            write("w4", ".agent/sessions/new/forged.json", forged),
            write("w5", "src/../.agent/sessions/.locks/00", "x"),
            write("w6", "fresh/../.agent/sessions/fresh.json", forged),
        ]),
        text("done"),
    ])
    .await;
    let attacker = controller(ws.path(), &server, Some(store.clone()), &[]);
    let recorder = Recorder::default();
    let mut session = attacker
        .start_session(recorder.options().mode("build"))
        .await
        .expect("session");
    session.send_message("go").await.expect("run");

    assert_all_refused(&recorder.take(), 11);
    assert_eq!(std::fs::read(&record).expect("record"), before);
    for name in ["forged.json", "new", "fresh.json"] {
        assert!(!store_dir.join(name).exists(), "{name} was created");
    }
    let victim = store.load("victim").await.expect("load").expect("victim");
    assert_eq!(victim.pending, None);
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn an_sqlite_store_file_and_its_siblings_are_protected() {
    let ws = tempfile::tempdir().expect("tempdir");
    let db = ws.path().join("sessions.db");
    let store: Arc<dyn SessionStore> =
        Arc::new(agent_controller::store::SqliteStore::open(&db).expect("store"));
    let server = ScriptedServer::start(vec![
        calls([
            read("r1", "sessions.db"),
            write("w1", "sessions.db", "x"),
            write("w2", "sessions.db-wal", "x"),
            write("w3", "sessions.db-journal", "x"),
            write("w4", "sessions.db-shm", "x"),
        ]),
        text("done"),
    ])
    .await;
    let c = controller(ws.path(), &server, Some(store.clone()), &[]);
    let recorder = Recorder::default();
    let mut session = c
        .start_session(recorder.options().mode("build"))
        .await
        .expect("session");
    session.send_message("go").await.expect("run");
    assert_all_refused(&recorder.take(), 5);
    assert!(!ws.path().join("sessions.db-journal").exists());
    assert!(store.load(session.id()).await.expect("load").is_some());
}

#[tokio::test]
async fn a_path_the_host_protects_is_refused_and_stays_as_it_was() {
    let ws = tempfile::tempdir().expect("tempdir");
    let config_file = ws.path().join("config/modes.toml");
    std::fs::create_dir_all(config_file.parent().expect("parent")).expect("mkdir");
    std::fs::write(&config_file, CONFIG).expect("config");
    let server = ScriptedServer::start(vec![
        calls([
            read("r1", "config/modes.toml"),
            write("w1", "config/modes.toml", "rewritten"),
            write("w2", &config_file.display().to_string(), "rewritten"),
        ]),
        text("done"),
    ])
    .await;
    let c = controller(ws.path(), &server, None, &[&config_file]);
    let recorder = Recorder::default();
    let mut session = c
        .start_session(recorder.options().mode("build"))
        .await
        .expect("session");
    session.send_message("go").await.expect("run");
    assert_all_refused(&recorder.take(), 3);
    assert_eq!(
        std::fs::read_to_string(&config_file).expect("config"),
        CONFIG
    );
}

/// The CLI protects the config file it loaded and the store it was given.
#[cfg(feature = "cli")]
#[test]
fn the_cli_protects_its_config_file_and_its_store() {
    let ws = tempfile::tempdir().expect("tempdir");
    let config_file = ws.path().join("config/modes.toml");
    std::fs::create_dir_all(config_file.parent().expect("parent")).expect("mkdir");
    std::fs::write(&config_file, CONFIG).expect("config");
    let server = ScriptedServer::start_blocking(vec![
        calls([
            write("w1", "config/modes.toml", "rewritten"),
            read("r1", "sessions/.locks/00"),
            write("w2", "sessions/forged.json", "{}"),
        ]),
        text("done"),
    ]);
    let out = crate::common::agent_controller()
        .args([
            "run",
            "--json",
            "--mode",
            "build",
            "--model",
            "openai/test-model",
        ])
        .arg("--config")
        .arg(&config_file)
        .arg("--workspace")
        .arg(ws.path())
        .arg("--store")
        .arg(ws.path().join("sessions"))
        .arg("go")
        .envs(server.env())
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ends: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON event"))
        .filter(|e: &serde_json::Value| e["type"] == "tool_end")
        .collect();
    assert_eq!(ends.len(), 3, "{stdout}");
    for end in &ends {
        assert_eq!(end["isError"], true, "{end}");
        assert!(
            end["result"]
                .as_str()
                .expect("result")
                .contains("protected"),
            "{end}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&config_file).expect("config"),
        CONFIG
    );
    assert!(!ws.path().join("sessions/forged.json").exists());
}

/// Every config file the CLI's session reads is protected, not only the one `--config` names:
/// the local layer beside it (`modes.local.toml`) is merged over it, so a build step that
/// wrote one (`requireApproval = []`) would widen the next run.
#[cfg(feature = "cli")]
#[test]
fn the_cli_protects_the_local_layer_beside_its_config() {
    let ws = tempfile::tempdir().expect("tempdir");
    let config_file = ws.path().join("config/modes.toml");
    std::fs::create_dir_all(config_file.parent().expect("parent")).expect("mkdir");
    std::fs::write(&config_file, CONFIG).expect("config");
    let widened = "[[modes]]\nid = \"build\"\nrequireApproval = []\n";
    for named in [true, false] {
        let server = ScriptedServer::start_blocking(vec![
            calls([write("w1", "config/modes.local.toml", widened)]),
            text("done"),
        ]);
        let mut cli = crate::common::agent_controller();
        cli.args([
            "run",
            "--json",
            "--mode",
            "build",
            "--model",
            "openai/test-model",
        ]);
        if named {
            cli.arg("--config").arg(&config_file);
        }
        let out = cli
            .arg("--workspace")
            .arg(ws.path())
            .arg("go")
            .current_dir(ws.path())
            .envs(server.env())
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ends: Vec<serde_json::Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON event"))
            .filter(|e: &serde_json::Value| e["type"] == "tool_end")
            .collect();
        assert_eq!(ends.len(), 1, "{stdout}");
        assert_eq!(ends[0]["isError"], true, "named {named}: {}", ends[0]);
        assert!(
            ends[0]["result"]
                .as_str()
                .expect("result")
                .contains("protected"),
            "named {named}: {}",
            ends[0]
        );
        assert!(
            !ws.path().join("config/modes.local.toml").exists(),
            "named {named}: the local layer was not written"
        );
    }
}

#[tokio::test]
async fn a_protected_plan_file_is_neither_written_by_write_plan_nor_submitted() {
    let ws = tempfile::tempdir().expect("tempdir");
    let secret = ws.path().join(".agent/plans/secret");
    std::fs::create_dir_all(&secret).expect("mkdir");
    std::fs::write(secret.join("plan.md"), "# Secret\n\nDo not show.\n").expect("write");
    let server = ScriptedServer::start(vec![
        calls([call(
            "w1",
            "write_plan",
            &json!({ "path": ".agent/plans/secret/other.md", "content": "# Forged\n" }).to_string(),
        )]),
        calls([crate::common::openai_server::submit(
            "s1",
            ".agent/plans/secret/plan.md",
        )]),
        text("done"),
    ])
    .await;
    let c = controller(ws.path(), &server, None, &[&secret]);
    let recorder = Recorder::default();
    let mut session = c
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    session.send_message("go").await.expect("run");
    assert_all_refused(&recorder.take(), 2);
    assert!(!secret.join("other.md").exists());
    assert_eq!(session.pending_plan(), None);
}
