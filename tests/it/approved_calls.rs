//! What happens to a tool call the user approved when it is about to run: it gets every check a
//! call that never waited gets, made again then (the config, the tools or the workspace may have
//! changed while it waited, a restore under other tools among them). A call whose arguments the
//! tool now refuses, like one a `deny` rule now refuses, never runs: the model is told why.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_controller::model::scripted::ReplayModel;
use agent_controller::store::MemoryStore;
use agent_controller::tool::{Tool, ToolContext, ToolOutput};
use agent_controller::{
    AgentController, Decision, ModelResponse, RunOutcome, SessionOptions, ToolCall, ToolRegistry,
};
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

/// `build` asks before `write_file`; `relink` runs without asking.
#[cfg(unix)]
const LINKS: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["write_file", "relink"]
requireApproval = ["write_file"]
"#;

/// A tool that makes `link` a symlink to `target` in the workspace (replacing what was there):
/// a call of the same reply that runs without asking while another waits.
#[cfg(unix)]
struct Relink {
    link: &'static str,
    target: &'static str,
}

#[cfg(unix)]
#[async_trait]
impl Tool for Relink {
    fn name(&self) -> &str {
        "relink"
    }
    fn description(&self) -> String {
        "Points a symlink elsewhere.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object" })
    }
    async fn execute(&self, _: &Value, ctx: &ToolContext<'_>) -> ToolOutput {
        let link = ctx.workspace.join(self.link);
        let _ = std::fs::remove_file(&link);
        match std::os::unix::fs::symlink(self.target, &link) {
            Ok(()) => ToolOutput::ok("relinked"),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// A reply of two calls: `write_file` of `path` (waits), then `relink` (runs at once, after
/// the write began to wait, pointing `relink.link` at `relink.target`). The write is approved.
/// Returns the session, what the approver was shown, and the outcome of the approval.
#[cfg(unix)]
async fn approve_after_relink(
    ws: &Workspace,
    path: &str,
    relink: Relink,
) -> (agent_controller::Session, Vec<String>, RunOutcome) {
    let model = Arc::new(ReplayModel::new([
        ModelResponse::tool_calls([
            ToolCall::new(
                "c1",
                "write_file",
                json!({ "path": path, "content": "overwritten" }),
            ),
            ToolCall::new("c2", "relink", json!({})),
        ]),
        ReplayModel::text("done"),
    ]));
    let mut tools = ToolRegistry::with_workspace_tools();
    tools.register(Arc::new(relink)).expect("registers");
    let controller = AgentController::builder(graph(LINKS), model)
        .tools(tools)
        .workspace(ws.path())
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("write").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    let waiting = crate::common::waiting_calls(&session);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    let shown = waiting[0].payload().where_paths_lead();
    let decision_id = session.pending()[0].decision_id().to_owned();
    let outcome = session
        .decide(&decision_id, Decision::approve())
        .await
        .expect("decided");
    (session, shown, outcome)
}

/// `src/main.rs` and `secret.txt` in the workspace `ws`.
#[cfg(unix)]
fn two_files(ws: &Workspace) {
    std::fs::create_dir_all(ws.path().join("src")).expect("src");
    std::fs::write(ws.path().join("src/main.rs"), "fn main() {}\n").expect("main.rs");
    std::fs::write(ws.path().join("secret.txt"), "secret\n").expect("secret.txt");
}

/// The approver was shown `notes.md -> src/main.rs`; before the approved write ran, another
/// call of the reply pointed `notes.md` at `secret.txt`. The write used to land in
/// `secret.txt`, which nobody approved: it is not run, the model is told which path changed
/// and where it leads now, nothing is written, and the run goes on.
#[cfg(unix)]
#[tokio::test]
async fn an_approved_write_whose_symlink_changed_since_it_was_shown_never_runs() {
    let ws = Workspace::new();
    two_files(&ws);
    std::os::unix::fs::symlink("src/main.rs", ws.path().join("notes.md")).expect("link");
    let relink = Relink {
        link: "notes.md",
        target: "secret.txt",
    };
    let (session, shown, outcome) = approve_after_relink(&ws, "notes.md", relink).await;
    assert_eq!(shown, ["path notes.md -> src/main.rs"]);
    assert!(
        matches!(outcome, RunOutcome::Completed { ref text, .. } if text == "done"),
        "the run goes on: {outcome:?}"
    );
    let read = |p: &str| std::fs::read_to_string(ws.path().join(p)).expect("read");
    assert_eq!(
        read("secret.txt"),
        "secret\n",
        "not written where nobody saw"
    );
    assert_eq!(
        read("src/main.rs"),
        "fn main() {}\n",
        "nor where it was shown"
    );
    let results = tool_results(session.messages());
    assert_eq!(results[1], ("c2".to_owned(), "relinked".to_owned()));
    assert_eq!(results[0].0, "c1");
    assert_eq!(
        results[0].1,
        "Not executed: where its path leads changed after it was approved: \
         `path notes.md` led to `src/main.rs` and now leads to `secret.txt`; \
         call it again to have it approved where it leads now.",
        "the model is told which path changed and where it leads now"
    );
}

/// The approver was shown `plain.txt` as it reads (no arrow: a plain file); before the
/// approved write ran, another call of the reply made `plain.txt` a symlink to `src/main.rs`.
/// The approval showed no such location: the write is not run.
#[cfg(unix)]
#[tokio::test]
async fn an_approved_write_whose_path_became_a_symlink_since_it_was_shown_never_runs() {
    let ws = Workspace::new();
    two_files(&ws);
    let relink = Relink {
        link: "plain.txt",
        target: "src/main.rs",
    };
    let (session, shown, outcome) = approve_after_relink(&ws, "plain.txt", relink).await;
    assert_eq!(shown, Vec::<String>::new(), "it led where it reads");
    assert!(
        matches!(outcome, RunOutcome::Completed { ref text, .. } if text == "done"),
        "{outcome:?}"
    );
    let main = std::fs::read_to_string(ws.path().join("src/main.rs")).expect("main.rs");
    assert_eq!(
        main, "fn main() {}\n",
        "not written through the new symlink"
    );
    let results = tool_results(session.messages());
    assert_eq!(
        results[0].1,
        "Not executed: where its path leads changed after it was approved: \
         `path plain.txt` led to `plain.txt` and now leads to `src/main.rs`; \
         call it again to have it approved where it leads now."
    );
}

/// The symlink leads where it led when shown (relinked to the same target): the approved
/// write runs, through it, where the approver saw.
#[cfg(unix)]
#[tokio::test]
async fn an_approved_write_whose_symlink_leads_where_it_was_shown_runs() {
    let ws = Workspace::new();
    two_files(&ws);
    std::os::unix::fs::symlink("src/main.rs", ws.path().join("notes.md")).expect("link");
    let relink = Relink {
        link: "notes.md",
        target: "./src/main.rs",
    };
    let (session, shown, outcome) = approve_after_relink(&ws, "notes.md", relink).await;
    assert_eq!(shown, ["path notes.md -> src/main.rs"]);
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let main = std::fs::read_to_string(ws.path().join("src/main.rs")).expect("main.rs");
    assert_eq!(main, "overwritten", "written where it was shown");
    let results = tool_results(session.messages());
    assert!(!results[0].1.starts_with("Not executed"), "{results:?}");
}
