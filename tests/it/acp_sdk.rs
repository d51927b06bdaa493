//! `agent-controller acp` with a real client nobody here wrote: the official ACP TypeScript SDK
//! (`@agentclientprotocol/sdk`, installed by `tests/acp/package.json` and its lockfile: `npm ci`
//! runs here once when `node_modules` is missing), driving the binary from
//! `tests/acp/scenarios.mjs`, one node process per scenario.
#![cfg(feature = "cli")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

#[cfg(feature = "openai")]
use serde_json::json;

use crate::acp::workspace;
#[cfg(feature = "openai")]
use crate::acp::{APPROVING, hang};
#[cfg(feature = "openai")]
use crate::common::openai_server;
use crate::common::openai_server::{Reply, ScriptedServer};

/// `plan` (the default) hands over to `build`.
const PLAN_BUILD: &str = r#"
defaultModeId = "plan"

[[modes]]
id = "plan"
name = "Plan"
transitionsTo = "build"
availableTools = ["read_file", "list_files", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
"#;

/// The SDK's directory, with its packages installed by `npm ci` when they are missing (once: a
/// file lock keeps parallel tests and test processes from racing).
pub(crate) fn sdk_dir() -> PathBuf {
    static ONCE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp");
    let installed = dir.join("node_modules/@agentclientprotocol/sdk/package.json");
    let _thread = ONCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if installed.exists() {
        return dir;
    }
    let lock = std::fs::File::create(dir.join(".npm-ci.lock")).expect("lock file");
    lock.lock().expect("lock");
    if !installed.exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .expect("npm runs (Node 20 and npm are needed for the ACP SDK tests)");
        assert!(status.success(), "npm ci in tests/acp failed: {status}");
    }
    drop(lock);
    assert!(
        installed.exists(),
        "npm ci did not install {}",
        installed.display()
    );
    dir
}

/// How long a scenario (a node start, `npm`'s SDK, the agent) may take before it counts as hung.
const SCENARIO_PATIENCE: Duration = Duration::from_secs(120);

/// Runs scenario `name` in a fresh workspace with `modes`, the model scripted by `script`
/// (the scripted model when `None`), and a file store when `store`.
fn scenario(name: &str, modes: &str, script: Option<Vec<Reply>>, store: bool) {
    scenario_with(name, modes, script, store, &[]);
}

/// [`scenario`] with `env` set for the scenario too; returns the scripted model's server.
fn scenario_with(
    name: &str,
    modes: &str,
    script: Option<Vec<Reply>>,
    store: bool,
    env: &[(&str, &Path)],
) -> Option<ScriptedServer> {
    let dir = sdk_dir();
    let ws = workspace(modes);
    let server = script.map(ScriptedServer::start_blocking);
    let mut node = Command::new("node");
    node.arg(dir.join("scenarios.mjs"))
        .arg(name)
        .current_dir(&dir)
        .env("AC_BIN", env!("CARGO_BIN_EXE_agent-controller"))
        // The node scripts spawn the binary with their environment: kept from the layers.
        .envs(
            crate::common::isolate(&mut Command::new("true"))
                .get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env("AC_WS", ws.path())
        .env_remove("OPENAI_BASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if store {
        node.env("AC_STORE", ws.path().join("sessions"));
    }
    node.envs(env.iter().copied());
    if let Some(server) = &server {
        node.envs(server.env());
    }
    let child = node
        .spawn()
        .expect("node runs (Node 20 is needed for the ACP SDK tests)");
    // Tells a scenario that waits for it that the model call is under way: a thread woken by
    // the server's first request writes the marker.
    if let Some(server) = &server {
        let watcher = server.watcher();
        let marker = ws.path().join(".model-called");
        std::thread::spawn(move || {
            if watcher.wait_served(1, SCENARIO_PATIENCE) {
                let _ = std::fs::write(marker, "");
            }
        });
    }
    // A hang fails the test instead of blocking the suite (no timing is measured).
    let output = crate::common::wait::exit_within(child, SCENARIO_PATIENCE)
        .unwrap_or_else(|| panic!("scenario {name} hung"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(&format!("ok {name}")),
        "scenario {name}: {}\n{stdout}\n{stderr}",
        output.status
    );
    server
}

#[cfg(feature = "openai")]
fn write_call(path: &str, content: &str) -> Reply {
    let args = json!({ "path": path, "content": content }).to_string();
    openai_server::calls([openai_server::call("call_1", "write_file", &args)])
}

#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_approve_to_build_then_a_build_tool_call_ends_the_turn() {
    let plan = json!({ "path": "dark.md", "content": "# Dark mode\n\n1. Add a theme.\n" });
    let script = vec![
        openai_server::calls([openai_server::call(
            "call_1",
            "write_plan",
            &plan.to_string(),
        )]),
        openai_server::calls([openai_server::submit("call_2", ".agent/plans/dark.md")]),
        write_call("theme.css", "body { color: white }"),
        openai_server::text("Done."),
    ];
    scenario("approve", PLAN_BUILD, Some(script), false);
}

#[test]
fn sdk_keep_planning_then_the_next_prompt_plans_again() {
    scenario("reject", PLAN_BUILD, None, false);
}

#[test]
fn sdk_a_cancelled_outcome_approves_nothing() {
    scenario("cancelled", PLAN_BUILD, None, false);
}

#[test]
fn sdk_set_mode_while_a_plan_is_pending() {
    scenario("set_mode_while_pending", PLAN_BUILD, None, false);
}

#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_session_cancel_mid_turn() {
    let script = vec![hang(), openai_server::text("Hello again.")];
    scenario("cancel_mid_turn", APPROVING, Some(script), false);
}

/// `session/set_mode` while the model works stops the run at once and switches: no call runs
/// in the mode the user left (issue 36 item 9: before, the switch waited for the turn to end
/// while the model went on in the old mode).
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_set_mode_mid_turn_stops_the_run_and_switches() {
    let script = vec![hang(), openai_server::text("Hello again.")];
    scenario("set_mode_mid_turn", APPROVING, Some(script), false);
}

/// A tool call that waits for approval is announced `pending` (issue 44 item 4: it was
/// `in_progress`, then `pending`), and session/cancel while it is asked about gives it a final
/// `failed` update saying it was cancelled, with a store (before: none) and without one.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_a_waiting_tool_call_is_announced_pending_and_ends_failed_when_cancelled() {
    for store in [true, false] {
        let script = vec![write_call("notes.txt", "hello")];
        scenario(
            "cancel_while_a_tool_call_waits",
            APPROVING,
            Some(script),
            store,
        );
    }
}

/// A subagent's call that waits reaches the editor as a permission request naming the
/// subagent (issue 38); allowed, the child carries on.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_a_subagents_call_that_waits_is_a_permission_request_naming_it() {
    const MODES: &str = r#"
[[subagents]]
id = "explore"
availableTools = ["write_file"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "subagent"]
requireApproval = ["write_file"]

[[modes]]
id = "plan"
availableTools = ["read_file"]
"#;
    let task = json!({"agentType": "explore", "task": "Write notes."}).to_string();
    let script = vec![
        openai_server::calls([openai_server::call("call_sub", "subagent", &task)]),
        openai_server::calls([openai_server::call(
            "c_1",
            "write_file",
            &json!({"path": "notes.txt", "content": "x"}).to_string(),
        )]),
        openai_server::text("Wrote notes."),
        openai_server::text("Done."),
    ];
    scenario("subagent_permission", MODES, Some(script), false);
}

#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_a_tool_call_that_waits_is_allowed_then_rejected() {
    let script = vec![
        write_call("yes.txt", "yes"),
        openai_server::text("Wrote yes."),
        write_call("no.txt", "no"),
        openai_server::text("Did not write no."),
    ];
    scenario("tool_approval", APPROVING, Some(script), false);
}

/// A reply cut at the token limit (OpenAI-compatible `finish_reason: "length"`) ends the turn
/// `max_tokens`, its text shown (issue 44 item 3: it ended `end_turn`).
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_a_reply_cut_at_the_token_limit_ends_max_tokens() {
    let cut = openai_server::sse(&[
        openai_server::chunk(json!({"role": "assistant", "content": ""}), None),
        openai_server::chunk(json!({"content": "The answer is"}), None),
        openai_server::chunk(json!({}), Some("length")),
    ]);
    let script = vec![Reply::Raw(cut)];
    scenario("token_limit", PLAN_BUILD, Some(script), false);
}

/// Only an approved plan is drawn `completed`, live and in the replay of `session/load`; a
/// rejected plan, one set aside by a switch or a feedback prompt is `failed`, one still open
/// `pending`; the replay says what became of each (issue 44 item 1).
#[test]
fn sdk_a_plan_not_approved_is_never_drawn_completed_live_or_replayed() {
    scenario("plan_statuses", PLAN_BUILD, None, true);
}

/// A session reopened while a plan was asked about (the editor went: stdin closed) is quiet
/// until the editor prompts; that prompt is accepted, is the feedback that sets the old plan
/// aside, and all of its turn comes before its stop reason (issue 44 item 2: before, the old
/// plan was asked about with no prompt open, and the prompt was refused as already running).
#[test]
fn sdk_a_session_loaded_while_asked_waits_for_the_editors_prompt() {
    scenario("quiet_after_load", PLAN_BUILD, None, true);
}

/// The same when the agent was killed while asking.
#[test]
fn sdk_a_session_loaded_after_a_kill_while_asked_waits_for_the_editors_prompt() {
    scenario_with(
        "quiet_after_load",
        PLAN_BUILD,
        None,
        true,
        &[("AC_KILL", Path::new("1"))],
    );
}

/// The same for a tool call left waiting for approval: quiet after the load, set aside by the
/// next prompt, never run.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_a_session_loaded_while_a_tool_call_waits_waits_for_the_editors_prompt() {
    let script = vec![
        write_call("notes.txt", "hello"),
        openai_server::text("Not written."),
    ];
    scenario("quiet_after_load_tool_call", APPROVING, Some(script), true);
}

/// `session/cancel` of the first prompt after such a load ends it `cancelled` and approves
/// nothing.
#[test]
fn sdk_cancel_after_a_load_while_asked_approves_nothing() {
    scenario("cancel_after_load", PLAN_BUILD, None, true);
}

/// `session/close` and `session/resume`, advertised in `initialize`, and the mode option's
/// `mode` category (issue 36 item 12: before, neither method nor the category).
#[test]
fn sdk_close_and_resume_a_session_and_the_mode_category() {
    scenario("session_lifecycle", PLAN_BUILD, None, true);
}

/// The `model` config option: offered where several models are configured, set by the
/// client, and the next model request goes to the chosen model; a change of mode tells the
/// new mode's model (issue 36 item 12: before, no model option).
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_the_model_option_chooses_the_next_requests_model() {
    let modes = PLAN_BUILD
        .replace(
            "name = \"Plan\"\n",
            "name = \"Plan\"\ndefaultModelId = \"openai/planner\"\n",
        )
        .replace(
            "name = \"Build\"\n",
            "name = \"Build\"\ndefaultModelId = \"openai/builder\"\n",
        );
    assert_eq!(modes.matches("defaultModelId").count(), 2);
    let script = vec![openai_server::text("Hi."), openai_server::text("Built.")];
    let server =
        scenario_with("model_option", &modes, Some(script), false, &[]).expect("a scripted model");
    let models: Vec<String> = server
        .bodies_blocking()
        .iter()
        .map(|b| b["model"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        models,
        ["test-model", "builder"],
        "the chosen one, then build's own"
    );
}

#[test]
fn sdk_session_list_pages_the_stores_sessions_by_workspace_and_skips_hostile_records() {
    scenario("session_list", PLAN_BUILD, None, true);
}

#[test]
fn sdk_session_list_is_neither_advertised_nor_answered_without_a_store() {
    scenario("session_list_without_store", PLAN_BUILD, None, false);
}

#[test]
fn sdk_load_after_a_restart_with_a_file_store() {
    scenario("load_after_restart", PLAN_BUILD, None, true);
}

/// ACP has every agent take the client's stdio MCP servers: the editor's server (the reference
/// filesystem server from npm) is started for the session, its tools are offered in the mode
/// (`build` lists no tools: all of them), a call waits for approval like any other, and runs.
#[cfg(feature = "mcp")]
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn sdk_the_clients_mcp_server_is_started_and_its_tools_offered_and_gated() {
    let entry = crate::mcp::filesystem_server();
    let script = vec![
        openai_server::calls([openai_server::call(
            "call_1",
            "fs__list_directory",
            &json!({ "path": "." }).to_string(),
        )]),
        openai_server::text("Listed."),
    ];
    let pids = tempfile::tempdir().expect("tmp");
    let pid_file = pids.path().join("fs.pid");
    // APPROVING with every tool call waiting for approval.
    let asking = APPROVING.replace(
        r#"requireApproval = ["write_file"]"#,
        "requireApproval = true",
    );
    assert_ne!(asking, APPROVING);
    let server = scenario_with(
        "mcp_servers",
        &asking,
        Some(script),
        false,
        &[("AC_FS_SERVER", &entry), ("AC_FS_PID", &pid_file)],
    )
    .expect("a scripted model");
    let bodies = server.bodies_blocking();
    let offered = openai_server::tool_names(&bodies[0]);
    for name in ["fs__list_directory", "fs__write_file", "read_file"] {
        assert!(offered.iter().any(|n| n == name), "{name}: {offered:?}");
    }
    // The agent stopped the server when the connection ended (it had exited by then).
    let pid = std::fs::read_to_string(&pid_file).expect("the server's pid");
    let stat = format!("/proc/{}/stat", pid.trim());
    let running = std::fs::read_to_string(&stat)
        .is_ok_and(|s| !s.rsplit(')').next().unwrap_or_default().starts_with(" Z"));
    assert!(
        !running,
        "the client's MCP server outlived the agent: {stat}"
    );
}

/// `build` offers `ask_user` (and waits for approval of `write_file`).
#[cfg(feature = "openai")]
const ASKING: &str = r#"
defaultModeId = "build"

[[modes]]
id = "plan"
name = "Plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
availableTools = ["read_file", "write_file", "ask_user"]
requireApproval = ["write_file"]
"#;

/// A reply that calls `ask_user` with `args`.
#[cfg(feature = "openai")]
fn ask(args: serde_json::Value) -> Reply {
    openai_server::calls([openai_server::call("call_1", "ask_user", &args.to_string())])
}

/// The `tool` messages of the `n`-th model request (0-based).
#[cfg(feature = "openai")]
fn tool_results(bodies: &[serde_json::Value], n: usize) -> Vec<String> {
    bodies[n]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The user messages of the `n`-th model request (0-based).
#[cfg(feature = "openai")]
fn user_messages(bodies: &[serde_json::Value], n: usize) -> Vec<String> {
    bodies[n]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Issue 37 over ACP, a client without elicitation: a select question is a permission request
/// with one option per choice and "Don't answer"; the option picked reaches the model as the
/// tool's result, "Don't answer" as not answered (nothing invented), and a multi-select
/// question takes one pick.
#[cfg(feature = "openai")]
#[test]
fn sdk_a_select_question_is_a_permission_request_without_elicitation() {
    let script = vec![
        ask(json!({
            "question": "Which\u{200b} one?",
            "options": [{ "label": "a", "description": "first\u{1b}[2K" }, { "label": "b\u{202e}" }],
        })),
        openai_server::text("Thanks."),
        ask(json!({ "question": "And now?", "options": [{ "label": "x" }, { "label": "y" }] })),
        openai_server::text("Ok."),
        ask(json!({
            "question": "Which ones?",
            "options": [{ "label": "a" }, { "label": "b" }, { "label": "c" }],
            "selectionMode": "multi_select",
        })),
        openai_server::text("Fine."),
    ];
    let server = scenario_with("question_permission", ASKING, Some(script), false, &[])
        .expect("a scripted model");
    let bodies = server.bodies_blocking();
    assert_eq!(bodies.len(), 6);
    assert_eq!(tool_results(&bodies, 1), ["The user chose: b\u{202e}"]);
    let declined = tool_results(&bodies, 3);
    assert_eq!(declined.len(), 2, "{declined:?}");
    assert!(
        declined[1].starts_with("Not answered: the user declined to answer"),
        "{declined:?}"
    );
    assert_eq!(
        tool_results(&bodies, 5).last().map(String::as_str),
        Some("The user chose: c")
    );
}

/// Issue 37 over ACP, a client without elicitation: a free-text question ends the turn telling
/// the client that the next prompt is the answer; that prompt answers it (the model gets it as
/// the tool's result, not as a new message), with a store and without one.
#[cfg(feature = "openai")]
#[test]
fn sdk_a_free_text_question_is_answered_by_the_next_prompt() {
    for store in [false, true] {
        let script = vec![
            ask(json!({ "question": "Which colour?\u{1b}[2K" })),
            openai_server::text("Blue it is."),
        ];
        let server = scenario_with("question_next_prompt", ASKING, Some(script), store, &[])
            .expect("a scripted model");
        let bodies = server.bodies_blocking();
        assert_eq!(bodies.len(), 2, "store {store}");
        assert_eq!(
            tool_results(&bodies, 1),
            ["The user answered: Blue"],
            "store {store}"
        );
        assert_eq!(
            user_messages(&bodies, 1),
            ["Pick a colour"],
            "store {store}"
        );
    }
}

/// Issue 37 over ACP, a client that advertises elicitation forms: each question is an
/// `elicitation/create` form (a multi-select, free text, a single select); the accepted content
/// reaches the model as the answer, a decline as not answered.
#[cfg(feature = "openai")]
#[test]
fn sdk_a_question_is_an_elicitation_when_the_client_supports_it() {
    let script = vec![
        ask(json!({
            "question": "Which\u{200b} ones?",
            "options": [{ "label": "a", "description": "first\u{1b}[2K" }, { "label": "b" }, { "label": "c" }],
            "selectionMode": "multi_select",
        })),
        openai_server::text("Thanks."),
        ask(json!({ "question": "Which colour?" })),
        openai_server::text("Ok."),
        ask(json!({ "question": "Which?", "options": [{ "label": "x" }, { "label": "y" }] })),
        openai_server::text("Fine."),
    ];
    let server = scenario_with("question_elicitation", ASKING, Some(script), false, &[])
        .expect("a scripted model");
    let bodies = server.bodies_blocking();
    assert_eq!(bodies.len(), 6);
    assert_eq!(tool_results(&bodies, 1), ["The user chose: a, c"]);
    assert_eq!(
        tool_results(&bodies, 3).last().map(String::as_str),
        Some("The user answered: Blue")
    );
    let declined = tool_results(&bodies, 5);
    assert!(
        declined
            .last()
            .is_some_and(|r| r.starts_with("Not answered: the user declined to answer")),
        "{declined:?}"
    );
}
