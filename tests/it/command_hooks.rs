//! Hooks by command (issue 41): `[[hooks]]` entries run as programs in the workspace, one JSON
//! object in on stdin, one out on stdout. Every bad answer (a hook that never answers, prints
//! 100 MB, prints two objects, exits non-zero) counts as ask, saying why in its event; a hook's
//! script is protected from the model's writes like the config.

use crate::common;

use std::sync::Arc;

use agent_controller::event::DecisionOutcome;
use agent_controller::hook::HookDecision;
use agent_controller::model::scripted::ReplayModel;
use agent_controller::{AgentController, Event, RunOutcome, ToolRegistry, config};
use common::{Recorder, Workspace, replay, tool_results};
use serde_json::json;

/// A config whose `write_file` calls wait for approval and go to `hooks/guard.sh` first
/// (`timeout` as given).
fn config(timeout: &str) -> String {
    format!(
        r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
requireApproval = ["write_file"]

[[hooks]]
on = "toolCall"
tools = ["write_file"]
command = ["sh", "hooks/guard.sh"]
timeout = "{timeout}"
"#
    )
}

struct Run {
    outcome: RunOutcome,
    results: Vec<(String, String)>,
    history: Vec<agent_controller::event::DecidedRecord>,
    events: Vec<Event>,
    ws: Workspace,
}

/// Runs one reply of `calls` in `build`, with `script` as `hooks/guard.sh`.
async fn run(script: &str, timeout: &str, calls: Vec<agent_controller::ModelResponse>) -> Run {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("hooks")).expect("mkdir");
    std::fs::write(ws.path().join("hooks/guard.sh"), script).expect("script");
    let mut replies = calls;
    replies.push(ReplayModel::text("done"));
    let controller = AgentController::builder(
        config::parse(&config(timeout), "modes.toml").expect("config"),
        replay(replies),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("build"))
        .await
        .expect("session");
    let outcome = session.send_message("go").await.expect("runs");
    Run {
        outcome,
        results: tool_results(session.messages()),
        history: session.decision_history().to_vec(),
        events: recorder.take(),
        ws,
    }
}

fn write(path: &str) -> agent_controller::ModelResponse {
    ReplayModel::call(
        "w1",
        "write_file",
        json!({ "path": path, "content": "hello" }),
    )
}

fn hook_errors(events: &[Event]) -> Vec<(HookDecision, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::HookDecided { hook, .. } => Some((hook.decision, hook.error.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_command_hook_allows_and_denies_and_sees_the_call() {
    // It keeps what it was given, then allows.
    let allow = "cat > hooks/seen.json\necho '{\"decision\": \"allow\", \"reason\": \"fine\"}'\n";
    let run_allowed = run(allow, "10s", vec![write("a.txt")]).await;
    assert!(
        matches!(run_allowed.outcome, RunOutcome::Completed { .. }),
        "{:?}",
        run_allowed.outcome
    );
    assert!(run_allowed.ws.path().join("a.txt").exists());
    let record = run_allowed.history.last().expect("record");
    assert_eq!(record.outcome, Some(DecisionOutcome::Approved));
    assert_eq!(record.decided_by.as_deref(), Some("hook sh hooks/guard.sh"));
    let seen: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run_allowed.ws.path().join("hooks/seen.json")).expect("seen"),
    )
    .expect("one JSON object on stdin");
    assert_eq!(seen["on"], "toolCall");
    assert_eq!(seen["modeId"], "build");
    assert_eq!(seen["toolName"], "write_file");
    assert_eq!(seen["args"]["path"], "a.txt");
    assert!(seen["sessionId"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(seen["argsSha256"].as_str().is_some_and(|s| s.len() == 64));
    assert_eq!(
        std::path::Path::new(seen["workspace"].as_str().expect("workspace")),
        run_allowed.ws.path()
    );

    let deny = "cat > /dev/null\necho '{\"decision\": \"deny\", \"reason\": \"guard says no\"}'\n";
    let denied = run(deny, "10s", vec![write("a.txt")]).await;
    assert!(!denied.ws.path().join("a.txt").exists());
    assert_eq!(
        denied.results[0].1,
        "Not executed: hook `sh hooks/guard.sh` denied it: guard says no."
    );
    // A call the hook's filter leaves out is not shown to it.
    let other = run(
        deny,
        "10s",
        vec![ReplayModel::call("l1", "list_files", json!({}))],
    )
    .await;
    assert!(hook_errors(&other.events).is_empty());
    assert!(
        !other.results[0].1.starts_with("Not executed"),
        "{:?}",
        other.results
    );
}

/// Each bad answer counts as ask: the call waits for a person, and the event says why.
#[tokio::test]
async fn a_command_hook_that_misbehaves_counts_as_ask() {
    for (script, timeout, why) in [
        ("sleep 30\n", "1s", "timed out after 1s"),
        ("yes\n", "10s", "more than 65536 bytes"),
        (
            "echo '{\"decision\": \"allow\"}'\necho '{\"decision\": \"allow\"}'\n",
            "10s",
            "more than one JSON value",
        ),
        (
            "echo '{\"decision\": \"allow\"}'\nexit 3\n",
            "10s",
            "exited with",
        ),
        ("echo allow\n", "10s", "not a JSON object"),
    ] {
        let started = std::time::Instant::now();
        let run = run(script, timeout, vec![write("a.txt")]).await;
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{script}: bounded"
        );
        assert!(
            matches!(run.outcome, RunOutcome::ToolCallsSuspended { .. }),
            "{script}: {:?}",
            run.outcome
        );
        assert!(!run.ws.path().join("a.txt").exists());
        let errors = hook_errors(&run.events);
        assert_eq!(errors.len(), 1, "{script}");
        assert_eq!(errors[0].0, HookDecision::Ask, "{script}");
        let error = errors[0].1.clone().unwrap_or_default();
        assert!(error.contains(why), "{script}: {error}");
    }
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped: it runs no more).
#[cfg(target_os = "linux")]
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // `pid (comm) S ...`: the state follows the last `)`.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// A hook that never answers is stopped whole at its timeout: the processes it started (a
/// shell's children) go with it, none is left running after the call was ruled.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_hook_that_never_answers_is_stopped_with_the_processes_it_started() {
    let script = "sleep 30 &\necho $! > hooks/child.pid\nwait\n";
    let started = std::time::Instant::now();
    let run = run(script, "1s", vec![write("a.txt")]).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(
        matches!(run.outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{:?}",
        run.outcome
    );
    let errors = hook_errors(&run.events);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, HookDecision::Ask);
    assert!(
        errors[0]
            .1
            .as_deref()
            .is_some_and(|e| e.contains("timed out after 1s")),
        "{errors:?}"
    );
    let pid = std::fs::read_to_string(run.ws.path().join("hooks/child.pid")).expect("pid");
    let pid = pid.trim();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while !gone(pid) && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let left = !gone(pid);
    if left {
        // Not left behind by the test either.
        let _ = std::process::Command::new("kill").arg(pid).status();
    }
    assert!(!left, "the hook's child {pid} still runs after its timeout");
}

/// A build step cannot rewrite the hook to answer `allow`: its script is protected like the
/// config, even when the hook itself allows the write.
#[tokio::test]
async fn a_hooks_script_is_protected_from_the_models_writes() {
    let allow = "cat > /dev/null\necho '{\"decision\": \"allow\"}'\n";
    let run = run(allow, "10s", vec![write("hooks/guard.sh")]).await;
    let script = std::fs::read_to_string(run.ws.path().join("hooks/guard.sh")).expect("script");
    assert_eq!(script, allow, "the script is untouched");
    assert!(run.results[0].1.contains("protected"), "{:?}", run.results);
}

/// `check` reads `[[hooks]]` at line:col; quorum is read, checked, and said to be not
/// enforced yet; reviewers run, so nothing says they do not.
#[test]
fn hook_config_errors_are_placed_and_unenforced_keys_are_warned_about() {
    let errors = config::check(
        "[[modes]]\nid = \"build\"\n\n[[hooks]]\non = \"toolCall\"\ntimeout = \"1h\"\n",
        "modes.toml",
    );
    let placed: Vec<(usize, String)> = errors
        .iter()
        .map(|e| (e.location().expect("placed").line, e.message().to_owned()))
        .collect();
    assert!(
        placed
            .iter()
            .any(|(l, m)| (5..=6).contains(l) && m.contains("`command`")),
        "{placed:?}"
    );
    assert!(
        placed.iter().any(|(l, m)| *l == 6 && m.contains("10m")),
        "{placed:?}"
    );
    let bad_on = config::check(
        "[[modes]]\nid = \"build\"\n[[hooks]]\non = \"always\"\ncommand = [\"x\"]\n",
        "modes.toml",
    );
    assert_eq!(bad_on[0].location().expect("placed").line, 4);
    // The shipped fixture, with two approvers in build (the kit models a quorum and checks it).
    let text = common::read_fixture("configs/valid/hooks.toml");
    assert!(text.contains("approvers = 2"));
    let graph = config::parse(&text, "hooks.toml").expect("valid");
    let warnings = config::warnings_of(&graph, &ToolRegistry::with_workspace_tools());
    let unenforced: Vec<&str> = warnings
        .iter()
        .filter(|w| w.kind() == config::ConfigErrorKind::NotEnforced)
        .map(|w| w.message())
        .collect();
    // Quorum is enforced (tests/it/quorum.rs): `approvers` is no longer a warning.
    assert!(
        !unenforced.iter().any(|m| m.contains("approvers")),
        "{unenforced:?}"
    );
    assert_eq!(
        graph.get("build").map(|b| graph.mode(b).approvers()),
        Some(2)
    );
    assert!(
        !unenforced
            .iter()
            .any(|m| m.contains("reviewBy") || m.contains("reviewer")),
        "{unenforced:?}"
    );
    let _ = Arc::new(());
}
