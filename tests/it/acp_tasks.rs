//! The task list over ACP (issue 38), seen by the official TypeScript SDK
//! (`tests/acp/plan_updates.mjs`): an approved plan's numbered steps and each change of the
//! model's task tools reach the editor as `plan` session updates, whole, with each entry's
//! content, status and priority `medium`; after a restart, `session/load` replays the list
//! as it stands.
#![cfg(all(feature = "cli", feature = "openai"))]

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::acp::workspace;
use crate::acp_sdk::sdk_dir;
use crate::common::openai_server::{self, ScriptedServer};

const PLAN_TASKS: &str = r#"
defaultModeId = "plan"

[[modes]]
id = "plan"
name = "Plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
availableTools = ["read_file", "task_write", "task_update", "task_complete", "task_check"]
"#;

#[test]
fn sdk_sees_the_task_list_as_plan_updates() {
    let plan = json!({
        "path": "dark.md",
        "content": "# Dark mode\n\n1. Add the theme flag\n2. Wire the toggle\n",
    });
    let call = |id: &str, name: &str, args: serde_json::Value| {
        openai_server::calls([openai_server::call(id, name, &args.to_string())])
    };
    let server = ScriptedServer::start_blocking(vec![
        call("call_1", "write_plan", plan),
        openai_server::calls([openai_server::submit("call_2", ".agent/plans/dark.md")]),
        call(
            "call_3",
            "task_update",
            json!({"id": "step_1", "status": "in_progress"}),
        ),
        call("call_4", "task_complete", json!({"id": "step_1"})),
        openai_server::text("Done."),
    ]);
    let dir = sdk_dir();
    let ws = workspace(PLAN_TASKS);
    let child = Command::new("node")
        .arg(dir.join("plan_updates.mjs"))
        .current_dir(&dir)
        .env("AC_BIN", env!("CARGO_BIN_EXE_agent-controller"))
        // The node scripts spawn the binary with their environment: kept from the layers.
        .envs(
            crate::common::isolate(&mut Command::new("true"))
                .get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env("AC_WS", ws.path())
        .env("AC_STORE", ws.path().join("sessions"))
        .envs(server.env())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (Node 20 is needed for the ACP SDK tests)");
    let output = crate::common::wait::exit_within(child, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("the plan_updates scenario hung"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("ok plan_updates"),
        "{}\n{stdout}\n{stderr}",
        output.status
    );
}
