//! Shared test helpers: fixtures, a temporary workspace, an event recorder.
#![allow(dead_code, unreachable_pub)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod clock;
pub mod dropped;
pub mod endless;
pub mod faulty;
pub mod openai_server;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod wait;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_controller::model::scripted::ReplayModel;
use agent_controller::{
    AgentController, Event, LanguageModel, ModeGraph, SessionOptions, ToolRegistry,
};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

pub fn read_fixture(rel: &str) -> String {
    std::fs::read_to_string(fixture(rel)).expect("fixture")
}

/// A temporary workspace with `.agent/plans/` created.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join(".agent/plans")).expect("plans dir");
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a plan file under `.agent/plans/` and returns its workspace-relative path.
    pub fn plan(&self, name: &str, text: &str) -> String {
        let rel = format!(".agent/plans/{name}");
        let path = self.path().join(&rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write plan");
        rel
    }
}

pub const PLAN_BUILD: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
instructions = "PLAN INSTRUCTIONS"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
default = true
instructions = "BUILD INSTRUCTIONS"
"#;

pub fn graph(text: &str) -> ModeGraph {
    agent_controller::config::parse(text, "test.toml").expect("valid config")
}

pub fn controller(text: &str, ws: &Workspace, model: Arc<dyn LanguageModel>) -> AgentController {
    AgentController::builder(graph(text), model)
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .build()
        .expect("controller")
}

/// Records every event of a session.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<Event>>>);

impl Recorder {
    pub fn options(&self) -> SessionOptions {
        let sink = self.0.clone();
        SessionOptions::new().on_event(move |e| sink.lock().expect("lock").push(e.clone()))
    }

    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }

    pub fn kinds(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .expect("lock")
            .iter()
            .map(Event::kind)
            .collect()
    }
}

pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

pub fn replay(replies: Vec<agent_controller::ModelResponse>) -> Arc<ReplayModel> {
    Arc::new(ReplayModel::new(replies))
}

/// The tool calls `session` waits on (decided while others wait included), in the model's order.
pub fn waiting_calls(
    session: &agent_controller::Session,
) -> Vec<agent_controller::session::PendingToolCall> {
    session
        .pending()
        .iter()
        .filter_map(agent_controller::PendingDecision::as_tool_call)
        .cloned()
        .collect()
}

/// The JSON lines a command printed on stdout (events, `pending --json`), each parsed; a line
/// that is not JSON fails the test.
pub fn json_lines(out: &std::process::Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line: {l}: {e}")))
        .collect()
}

/// What a command printed on stderr.
pub fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every tool result in `messages`, in order: (tool call id, content).
pub fn tool_results(messages: &[agent_controller::model::Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| match m {
            agent_controller::model::Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

/// The binary, kept from the developer's own config layers: `XDG_CONFIG_HOME` is an empty
/// folder (no user file) and `AGENT_CONTROLLER_MANAGED_CONFIG` an empty file (no managed policy,
/// and `/etc/agent-controller/managed.toml` is not read). A test of the layers sets its own.
#[cfg(feature = "cli")]
pub fn agent_controller() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_agent-controller"));
    isolate(&mut command);
    command
}

/// Sets `command`'s config layers as [`agent_controller`] does.
pub fn isolate(command: &mut std::process::Command) -> &mut std::process::Command {
    static ISOLATED: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    let (xdg, managed) = ISOLATED.get_or_init(|| {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("config-layers-isolated");
        let xdg = base.join("xdg");
        std::fs::create_dir_all(&xdg).expect("isolated XDG_CONFIG_HOME");
        let managed = base.join("managed.toml");
        std::fs::write(&managed, "# no managed policy in the crate's own tests\n")
            .expect("isolated managed file");
        (xdg, managed)
    });
    command
        .env("XDG_CONFIG_HOME", xdg)
        .env("AGENT_CONTROLLER_MANAGED_CONFIG", managed)
}
