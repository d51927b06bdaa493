//! `agent-controller acp`: the JSON-RPC error codes say what happened (invalid params for bad
//! input, ACP's resource-not-found for an unknown session, internal error only for the agent's
//! own fault), the location of a plan tool's call is where the plan is, and the client's MCP
//! servers start only once `session/load` has checked the workspace (issue 36 item 15).
#![cfg(feature = "cli")]

use serde_json::json;

use crate::acp::{Agent, MODES, workspace};

/// ACP's code for a resource that does not exist (`ErrorCode::ResourceNotFound`).
const RESOURCE_NOT_FOUND: i64 = -32002;

#[test]
fn an_unknown_session_is_resource_not_found_and_a_bad_id_invalid_params() {
    let ws = workspace(MODES);
    let store = ws.path().join("sessions");
    let store = store.to_str().expect("utf-8");
    let mut agent = Agent::start(ws.path(), &["--store", store], &[]);
    let (session, _) = agent.open(ws.path());

    let id = agent.prompt("no-such-session", "hello");
    let (response, _) = agent.response(id);
    assert_eq!(
        response["error"]["code"], RESOURCE_NOT_FOUND,
        "{response:#}"
    );
    let id = agent.request(
        "session/set_mode",
        json!({ "sessionId": "no-such-session", "modeId": "build" }),
    );
    let (response, _) = agent.response(id);
    assert_eq!(
        response["error"]["code"], RESOURCE_NOT_FOUND,
        "{response:#}"
    );

    let id = agent.request("session/close", json!({ "sessionId": "no-such-session" }));
    let (response, _) = agent.response(id);
    assert_eq!(
        response["error"]["code"], RESOURCE_NOT_FOUND,
        "{response:#}"
    );

    let load = |agent: &mut Agent, id: &str| {
        let request = agent.request(
            "session/load",
            json!({ "sessionId": id, "cwd": ws.path(), "mcpServers": [] }),
        );
        agent.response(request).0
    };
    let response = load(&mut agent, "no-such-session");
    assert_eq!(
        response["error"]["code"], RESOURCE_NOT_FOUND,
        "{response:#}"
    );
    assert!(
        response["error"]["data"]
            .to_string()
            .contains("no-such-session"),
        "{response:#}"
    );
    // An id no store could hold is the client's bad input.
    for bad in ["../escape", "a/b", ""] {
        let response = load(&mut agent, bad);
        assert_eq!(response["error"]["code"], -32602, "{bad:?}: {response:#}");
    }
    // An unknown mode is bad input, in a session that exists.
    let id = agent.request(
        "session/set_mode",
        json!({ "sessionId": session, "modeId": "no-such-mode" }),
    );
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32602, "{response:#}");
    assert_eq!(agent.close(), 0);
}

/// `write_plan` with a path inside the plans directory (`.agent/plans/q.md`) and with a bare
/// name (`r.md`) points the editor at the file it writes, not at `.agent/plans/.agent/plans/`.
#[cfg(feature = "openai")] // the model is the OpenAI provider
#[test]
fn a_plan_tools_location_is_the_plan_file() {
    use crate::common::openai_server::{self, ScriptedServer};
    let ws = workspace(MODES);
    let write = |id: &str, path: &str| {
        let args = json!({ "path": path, "content": "# Q\n\n1. Do it.\n" }).to_string();
        openai_server::calls([openai_server::call(id, "write_plan", &args)])
    };
    let server = ScriptedServer::start_blocking(vec![
        write("call_1", ".agent/plans/q.md"),
        write("call_2", "r.md"),
        openai_server::text("Written."),
    ]);
    let mut agent = Agent::start(ws.path(), &["--model", "openai/test-model"], &server.env());
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Plan it");
    let (response, seen) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    let locations: Vec<String> = seen
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
        .map(|m| {
            m["params"]["update"]["locations"][0]["path"]
                .as_str()
                .unwrap_or("(none)")
                .to_owned()
        })
        .collect();
    let plans = ws.path().join(".agent/plans");
    assert_eq!(
        locations,
        [
            plans.join("q.md").display().to_string(),
            plans.join("r.md").display().to_string()
        ]
    );
    assert!(plans.join("q.md").is_file() && plans.join("r.md").is_file());
    assert_eq!(agent.close(), 0);
}

/// A `session/load` in another workspace than the session's is refused before the client's MCP
/// servers start: a server whose start leaves a mark leaves none.
#[cfg(feature = "mcp")]
#[test]
fn the_clients_mcp_servers_start_only_after_load_checks_the_workspace() {
    let ws = workspace(MODES);
    let other = workspace(MODES);
    let store = ws.path().join("sessions");
    let store = store.to_str().expect("utf-8");
    let mut agent = Agent::start(ws.path(), &["--store", store], &[]);
    let (session, _) = agent.open(ws.path());
    assert_eq!(agent.close(), 0);
    let mut agent = Agent::start(ws.path(), &["--store", store], &[]);
    let id = agent.request(
        "initialize",
        json!({ "protocolVersion": 1, "clientCapabilities": {} }),
    );
    agent.result(id);
    let mark = other.path().join("server-started");
    let server = json!({
        "name": "marker",
        "command": "sh",
        "args": ["-c", format!("touch '{}'", mark.display())],
        "env": [],
    });
    let id = agent.request(
        "session/load",
        json!({ "sessionId": session, "cwd": other.path(), "mcpServers": [server] }),
    );
    let (response, _) = agent.response(id);
    assert_eq!(response["error"]["code"], -32602, "{response:#}");
    assert!(
        response["error"]["data"].to_string().contains("workspace"),
        "{response:#}"
    );
    assert!(
        !mark.exists(),
        "the client's MCP server started before the workspace check"
    );
    assert_eq!(agent.close(), 0);
}
