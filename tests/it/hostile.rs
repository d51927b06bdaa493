//! A hostile model's trial of main (issue 19, "beyond these examples"): each fault it found is
//! a test here.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_controller::model::scripted::ReplayModel;
use agent_controller::{
    AgentController, Event, RunOutcome, Tool, ToolContext, ToolOutput, ToolRegistry,
    tool::ToolAccess,
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
        assert!(session.pending().is_empty(), "{mode}: nothing waits");
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

/// The CLI's part of the trial.
#[cfg(feature = "cli")]
mod cli {
    use std::path::Path;
    use std::process::{Output, Stdio};

    use crate::common::Workspace;

    const PENDING: i32 = 4;

    fn bin(args: &[&str]) -> Output {
        crate::common::agent_controller()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("run the binary")
    }

    fn stderr(out: &Output) -> String {
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// A workspace whose default config (`config/modes.toml`) is `modes`.
    fn workspace_with(modes: &str) -> Workspace {
        let ws = Workspace::new();
        std::fs::create_dir_all(ws.path().join("config")).expect("config dir");
        std::fs::write(ws.path().join("config/modes.toml"), modes).expect("config");
        ws
    }

    fn path(p: &Path) -> &str {
        p.to_str().expect("utf-8")
    }

    const WRITING_PLAN: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
"#;

    /// Item 2: a planning mode that lists a tool that writes is warned about by `run` and
    /// `decide` on stderr before the run starts, as `check` warns.
    #[test]
    fn run_and_decide_warn_when_a_planning_mode_lists_a_writer() {
        let ws = workspace_with(WRITING_PLAN);
        let store = ws.path().join("sessions");
        let out = bin(&[
            "run",
            "--workspace",
            path(ws.path()),
            "--store",
            path(&store),
            "--detach",
            "--mode",
            "plan",
            "--json",
            "Add dark mode",
        ]);
        assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
        let warning = "planning mode `plan` lists `write_file`, a tool that writes";
        assert!(stderr(&out).contains(warning), "run: {}", stderr(&out));
        assert!(stderr(&out).contains("warning: "), "run: {}", stderr(&out));
        let events = String::from_utf8_lossy(&out.stdout).into_owned();
        let first: serde_json::Value =
            serde_json::from_str(events.lines().next().expect("an event")).expect("json");
        let session = first["sessionId"].as_str().expect("session id");
        let out = bin(&["decide", "--store", path(&store), session, "--approve"]);
        assert!(stderr(&out).contains(warning), "decide: {}", stderr(&out));
    }
}

/// Item 3: the default config (`config/modes.toml` in the workspace) is a symlink to a file
/// outside: `run`, `decide` and `check` refuse it unread, and never show its first line.
#[cfg(feature = "cli")]
#[test]
fn a_default_config_symlinked_out_of_the_workspace_is_refused_unread() {
    use std::process::Stdio;
    let ws = Workspace::new();
    let outside = tempfile::tempdir().expect("dir");
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "SECRET-TOKEN-8231 = [\n").expect("secret");
    std::fs::create_dir(ws.path().join("config")).expect("config dir");
    std::os::unix::fs::symlink(&secret, ws.path().join("config/modes.toml")).expect("link");
    let bin = || {
        let mut cmd = crate::common::agent_controller();
        cmd.stdin(Stdio::null()).current_dir(ws.path());
        cmd
    };
    let workspace = ws.path().to_str().expect("utf-8");
    for (what, out) in [
        (
            "run",
            bin()
                .args(["run", "--workspace", workspace, "hello"])
                .output(),
        ),
        ("run in .", bin().args(["run", "hello"]).output()),
        ("check", bin().arg("check").output()),
        ("graph", bin().arg("graph").output()),
    ] {
        let out = out.expect("the binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(stderr.contains("leads out of"), "{what}: {stderr}");
        assert!(
            !stderr.contains("SECRET") && !stdout.contains("SECRET"),
            "{what}: {stderr}"
        );
    }
    // Named with --config, a file outside is the user's choice.
    let out = bin()
        .args(["check", secret.to_str().expect("utf-8")])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}

fn at(error: &agent_controller::ConfigError) -> Option<(usize, usize)> {
    error.location().map(|l| (l.line, l.column))
}

/// Item 4: a plans folder that holds source (`plansDir = "src"`) is warned about at `plansDir`;
/// the workspace root (`.`, `""`, `a/..`) is refused at line:col. A folder of plans only, or
/// one that does not exist yet, is fine.
#[test]
fn a_plans_dir_that_holds_source_is_warned_about_and_the_root_refused() {
    use agent_controller::{config, config::ConfigErrorKind};
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("src")).expect("src");
    std::fs::write(ws.path().join("src/main.rs"), "fn main() {}").expect("main.rs");
    std::fs::create_dir_all(ws.path().join("plans")).expect("plans");
    std::fs::write(ws.path().join("plans/a.md"), "# A").expect("plan");
    let text = |dir: &str| format!("plansDir = \"{dir}\"\n[[modes]]\nid = \"build\"\n");
    let warnings = config::workspace_warnings(&text("src"), "modes.toml", ws.path());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].kind(), ConfigErrorKind::PlansDirNotDedicated);
    assert_eq!(at(&warnings[0]), Some((1, 12)));
    assert!(
        warnings[0].to_string().contains("`main.rs`"),
        "{}",
        warnings[0]
    );
    for fine in ["plans", "not-yet"] {
        assert!(config::workspace_warnings(&text(fine), "m.toml", ws.path()).is_empty());
    }
    for root in [".", "", "./", "src/.."] {
        let error = config::parse(&text(root), "modes.toml").expect_err(root);
        assert_eq!(error.kind(), ConfigErrorKind::InvalidPlansDir, "{root}");
        assert_eq!(at(&error), Some((1, 12)), "{root}");
    }
}

/// Item 5: a known mode key under `[modes.metadata]` has no effect there: warned at the key.
#[test]
fn a_known_key_in_metadata_is_warned_about_at_the_key() {
    use agent_controller::{ToolRegistry, config, config::ConfigErrorKind};
    let text = "[[modes]]\nid = \"build\"\navailableTools = [\"write_file\"]\n\n[modes.metadata]\ncolor = \"red\"\nrequireApproval = true\n";
    let graph = config::parse(text, "modes.toml").expect("still valid");
    assert!(
        graph
            .mode(graph.default_mode_id())
            .metadata()
            .contains_key("requireApproval")
    );
    let warnings =
        config::warnings_with_tools(text, "modes.toml", &ToolRegistry::with_workspace_tools());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].kind(), ConfigErrorKind::KnownKeyInMetadata);
    assert_eq!(at(&warnings[0]), Some((7, 1)));
    assert!(
        warnings[0].to_string().contains("`requireApproval`"),
        "{}",
        warnings[0]
    );
}

/// Item 6: two modes with the same display name (or one named like another's id) are refused
/// at the second name: the user picks a target mode by its name at the prompt.
#[test]
fn two_modes_with_the_same_name_are_refused() {
    use agent_controller::{config, config::ConfigErrorKind};
    let text = "[[modes]]\nid = \"build\"\nname = \"Build\"\ndefault = true\n\n[[modes]]\nid = \"yolo\"\nname = \"build\"\n";
    let error = config::parse(text, "modes.toml").expect_err("same name");
    assert_eq!(error.kind(), ConfigErrorKind::DuplicateName);
    assert_eq!(at(&error), Some((8, 8)));
    let unnamed = "[[modes]]\nid = \"build\"\n\n[[modes]]\nid = \"other\"\nname = \"build\"\n";
    let error = config::parse(unnamed, "modes.toml").expect_err("named like an id");
    assert_eq!(error.kind(), ConfigErrorKind::DuplicateName);
    assert!(
        config::parse(
            "[[modes]]\nid = \"a\"\nname = \"A\"\n[[modes]]\nid = \"b\"\nname = \"B\"\n",
            "m.toml"
        )
        .is_ok()
    );
}

/// Item 8: `write_plan` through a plans folder that is a symlink out of the workspace says the
/// path leaves the workspace, not `File exists`; nothing is written outside.
#[tokio::test]
async fn write_plan_through_a_symlinked_plans_folder_says_it_leaves_the_workspace() {
    use agent_controller::tool::fs::WritePlan;
    let ws = Workspace::new();
    let outside = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(ws.path().join(".agent")).expect(".agent");
    let _ = std::fs::remove_dir_all(ws.path().join(".agent/plans"));
    std::os::unix::fs::symlink(outside.path(), ws.path().join(".agent/plans")).expect("link");
    let plans = ws.path().join(".agent/plans");
    for path in ["p.md", ".agent/plans/p.md"] {
        let ctx = ToolContext::new(ws.path(), &plans, "plan");
        let out = WritePlan
            .execute(&json!({"path": path, "content": "# P\n"}), &ctx)
            .await;
        assert!(out.is_error, "{path}: {out:?}");
        assert!(
            !out.content.contains("File exists"),
            "{path}: {}",
            out.content
        );
        assert!(
            out.content.contains("outside") || out.content.contains("leaves"),
            "{path}: {}",
            out.content
        );
        assert_eq!(std::fs::read_dir(outside.path()).expect("dir").count(), 0);
    }
}

/// Found in the trial: a mode named `""` or `"   "` showed as nothing at the prompt and in
/// `check`; refused at the name.
#[test]
fn an_empty_mode_name_is_refused() {
    use agent_controller::{config, config::ConfigErrorKind};
    for name in ["", "   "] {
        let text = format!("[[modes]]\nid = \"build\"\nname = \"{name}\"\n");
        let error = config::parse(&text, "modes.toml").expect_err(name);
        assert_eq!(error.kind(), ConfigErrorKind::EmptyName, "{name:?}");
        assert_eq!(at(&error), Some((3, 8)), "{name:?}");
    }
}
