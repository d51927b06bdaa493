//! Quorum (issue 41): a mode's `approvers = 2` needs two approvals by distinct identities
//! (`decide --as NAME`) before its plan or waiting tool call is approved; the same identity
//! twice is refused, a rejection by any one rejects, an always-allow is refused, two `decide`
//! processes racing both land, and `log` tells who, how, through which channel (`via`), when,
//! what and why of each. The CLI binary against the scripted model server, on the directory
//! store, SQLite and PostgreSQL (`AGENT_CONTROLLER_TEST_POSTGRES`).
#![cfg(all(feature = "openai", feature = "cli"))]

use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common;
use common::cli::world::{World, stores};
use common::cli::{DONE, NOT_APPROVED, PENDING, REFUSED};
use common::openai_server::{call, calls, submit, text};
use common::{json_lines, stderr};

const TOOL_QUORUM: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
approvers = 2
"#;

const PLAN_QUORUM: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
approvers = 2

[[modes]]
id = "build"
default = true
"#;

const PLAN: &str = "# Add dark mode\n\n1. Add the theme flag\n2. Wire the toggle\n";

/// A world whose model writes `a.txt` (a call that waits for two approvals), then says so.
fn tool_world(kind: &str) -> (World, String) {
    let args = json!({ "path": "a.txt", "content": "hello" }).to_string();
    let world = World::with_config(
        kind,
        TOOL_QUORUM,
        vec![
            calls([call("call_1", "write_file", &args)]),
            text("Wrote a.txt."),
        ],
    );
    let (out, session) = world.run_stored("Write a.txt");
    assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
    (world, session)
}

/// `log SESSION --json`: the session's decisions and pending approvals, in order.
fn log_json(world: &World, session: &str) -> Vec<Value> {
    let out = common::cli::output(
        common::cli::command(
            world.ws.path(),
            &["log", session, "--store", &world.spec, "--json"],
        ),
        "",
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    json_lines(&out)
}

/// `log SESSION`, as text.
fn log_text(world: &World, session: &str) -> String {
    let out = common::cli::output(
        common::cli::command(world.ws.path(), &["log", session, "--store", &world.spec]),
        "",
    );
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_plan_needs_two_distinct_approvers_and_the_same_one_twice_is_refused() {
    for kind in stores() {
        let world = World::with_config(
            kind,
            PLAN_QUORUM,
            vec![
                calls([submit("call_1", ".agent/plans/p.md")]),
                text("built"),
            ],
        );
        world.ws.plan("p.md", PLAN);
        let out = world.cli(
            "run",
            true,
            &["--mode", "plan", "--json", "Add dark mode"],
            None,
        );
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        let session = json_lines(&out)[0]["sessionId"]
            .as_str()
            .expect("session")
            .to_owned();

        // The first approval is recorded; the plan still waits, showing who approved.
        let out = world.decide(&session, &["--approve", "--as", "alice"]);
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        let pending = world.pending_json();
        assert_eq!(pending.len(), 1, "{kind}: {pending:?}");
        assert_eq!(pending[0]["approversNeeded"], 2, "{kind}: {pending:?}");
        assert_eq!(pending[0]["approvals"][0]["by"], "alice", "{kind}");
        assert_eq!(pending[0]["approvals"][0]["via"], "decide", "{kind}");
        let listed = common::cli::world::pending(&world.spec, false);
        let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
        assert!(
            listed.contains("approvals 1 of 2: alice"),
            "{kind}: {listed}"
        );
        // Before the quorum, the log shows the approval given on what waits.
        let log = log_json(&world, &session);
        assert_eq!(log.len(), 1, "{kind}: {log:?}");
        assert_eq!(log[0]["how"], "approval", "{kind}: {log:?}");
        assert_eq!(log[0]["approval"]["by"], "alice", "{kind}: {log:?}");

        // The same identity again: refused with a clear reason, nothing changes.
        let out = world.decide(&session, &["--approve", "--as", "alice"]);
        assert_eq!(out.status.code(), Some(REFUSED), "{kind}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("`alice` has already approved"),
            "{kind}: {}",
            stderr(&out)
        );
        assert_eq!(
            world.pending_json()[0]["approvals"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );

        // A second person completes the quorum: the plan is approved and the run carries on.
        let out = world.decide(&session, &["--approve", "--by", "bob"]);
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert!(world.pending_json().is_empty(), "{kind}");
        let log = log_json(&world, &session);
        assert_eq!(log.len(), 1, "{kind}: {log:?}");
        let record = &log[0];
        assert_eq!(record["outcome"], "approved", "{kind}: {record}");
        assert_eq!(record["how"], "person", "{kind}: {record}");
        assert_eq!(record["via"], "decide", "{kind}: {record}");
        assert_eq!(record["decidedBy"], "bob", "{kind}: {record}");
        assert_eq!(record["targetModeId"], "build", "{kind}: {record}");
        let by: Vec<&str> = record["approvals"]
            .as_array()
            .expect("approvals")
            .iter()
            .filter_map(|a| a["by"].as_str())
            .collect();
        assert_eq!(by, ["alice", "bob"], "{kind}: {record}");
        assert_eq!(
            record["approvals"][0]["sha256"], record["sha256"],
            "{kind}: each approval names what it approved"
        );
        // The text log: each approval on its line, then the decision.
        let text = log_text(&world, &session);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{kind}: {text}");
        assert!(
            lines[0].contains("\tapproval\tperson\tdecide\talice\tsubmit_plan "),
            "{kind}: {text}"
        );
        assert!(
            lines[1].contains("\tapproval\tperson\tdecide\tbob\tsubmit_plan "),
            "{kind}: {text}"
        );
        assert!(
            lines[2].contains("\tapproved\tperson\tdecide\tbob\tsubmit_plan ")
                && lines[2].contains("-> build"),
            "{kind}: {text}"
        );
    }
}

#[test]
fn a_rejection_by_one_rejects_and_an_always_allow_is_refused() {
    for kind in stores() {
        let (world, session) = tool_world(kind);
        // An always-allow is not offered under a quorum.
        let out = world.decide(&session, &["--approve", "--always", "--as", "alice"]);
        assert_eq!(out.status.code(), Some(REFUSED), "{kind}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("always-allow is not offered under a quorum"),
            "{kind}: {}",
            stderr(&out)
        );
        assert!(
            world.pending_json()[0].get("approvals").is_none(),
            "{kind}: nothing recorded"
        );

        let out = world.decide(&session, &["--approve", "--as", "alice"]);
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        assert_eq!(
            world.file("a.txt"),
            None,
            "{kind}: one approval runs nothing"
        );

        // Bob rejects: the call is rejected, whatever alice said.
        let out = world.decide(
            &session,
            &["--reject", "--as", "bob", "--feedback", "not now"],
        );
        assert_eq!(
            out.status.code(),
            Some(NOT_APPROVED),
            "{kind}: {}",
            stderr(&out)
        );
        assert_eq!(world.file("a.txt"), None, "{kind}: never ran");
        let log = log_json(&world, &session);
        assert_eq!(log.len(), 1, "{kind}: {log:?}");
        let record = &log[0];
        assert_eq!(record["outcome"], "rejected", "{kind}: {record}");
        assert_eq!(record["decidedBy"], "bob", "{kind}: {record}");
        assert_eq!(record["via"], "decide", "{kind}: {record}");
        assert_eq!(record["toolName"], "write_file", "{kind}: {record}");
        assert_eq!(record["feedback"], "not now", "{kind}: {record}");
        assert_eq!(record["approvals"][0]["by"], "alice", "{kind}: {record}");
        assert_eq!(record["approvals"].as_array().map(Vec::len), Some(1));
    }
}

/// `decide SESSION --approve --as BY` started (not awaited), as [`World::cli`] would run it.
fn spawn_decide(world: &World, session: &str, by: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_agent-controller"))
        .arg("decide")
        .arg("--config")
        .arg(&world.config)
        .arg("--workspace")
        .arg(world.ws.path())
        .args(["--model", "openai/test-model", "--store", &world.spec])
        .args([session, "--approve", "--as", by])
        .envs(world.server.env())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

#[test]
fn two_decide_processes_racing_both_land_and_the_call_runs_once() {
    for kind in stores() {
        let (world, session) = tool_world(kind);
        let alice = spawn_decide(&world, &session, "alice");
        let bob = spawn_decide(&world, &session, "bob");
        let outs: Vec<Output> = [alice, bob]
            .into_iter()
            .map(|c| c.wait_with_output().expect("wait"))
            .collect();
        let mut codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
        codes.sort_unstable();
        // One approval was the first (the call still waited after it), the other completed the
        // quorum and carried the run on: neither was lost, and neither applied alone.
        assert_eq!(
            codes,
            [Some(DONE), Some(PENDING)],
            "{kind}: {}\n---\n{}",
            stderr(&outs[0]),
            stderr(&outs[1])
        );
        assert_eq!(world.file("a.txt").as_deref(), Some("hello"), "{kind}");
        assert!(world.pending_json().is_empty(), "{kind}");
        let log = log_json(&world, &session);
        assert_eq!(log.len(), 1, "{kind}: {log:?}");
        let mut by: Vec<&str> = log[0]["approvals"]
            .as_array()
            .expect("approvals")
            .iter()
            .filter_map(|a| a["by"].as_str())
            .collect();
        by.sort_unstable();
        assert_eq!(by, ["alice", "bob"], "{kind}: {log:?}");
        assert_eq!(log[0]["outcome"], "approved", "{kind}");
        assert_eq!(log[0]["via"], "decide", "{kind}");
    }
}

/// A hook that allows every call.
struct AllowAll;

#[agent_controller::async_trait]
impl agent_controller::hook::Hook for AllowAll {
    fn name(&self) -> &str {
        "allow-all"
    }

    async fn decide(
        &self,
        _: &agent_controller::hook::HookRequest,
    ) -> Result<agent_controller::hook::HookVerdict, agent_controller::hook::HookError> {
        Ok(agent_controller::hook::HookVerdict::Allow)
    }
}

/// A session in `text`'s default mode whose model writes `a.txt` once, under a hook that allows
/// everything; the session and its workspace.
async fn hooked_session(
    text: &str,
) -> (
    agent_controller::Session,
    agent_controller::RunOutcome,
    common::Workspace,
) {
    use agent_controller::model::scripted::ReplayModel;
    let ws = common::Workspace::new();
    let model = common::replay(vec![
        ReplayModel::call(
            "w1",
            "write_file",
            json!({ "path": "a.txt", "content": "hello" }),
        ),
        ReplayModel::text("done"),
    ]);
    let controller = agent_controller::AgentController::builder(
        agent_controller::config::parse(text, "modes.toml").expect("config"),
        model,
    )
    .tools(agent_controller::ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .hook(AllowAll)
    .build()
    .expect("controller");
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("write it").await.expect("runs");
    (session, outcome, ws)
}

#[tokio::test]
async fn a_hooks_allow_never_counts_toward_a_quorum_of_the_mode_or_of_an_ask_rule() {
    use agent_controller::{Decision, SessionError, quorum::QuorumError};
    let by_rule = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
rules = [{ tool = "write_file", action = "ask", approvers = 2 }]
"#;
    for text in [TOOL_QUORUM, by_rule] {
        let (mut session, outcome, ws) = hooked_session(text).await;
        assert!(
            matches!(
                outcome,
                agent_controller::RunOutcome::ToolCallsSuspended { .. }
            ),
            "the hook's allow does not run it: {outcome:?}"
        );
        assert!(!ws.path().join("a.txt").exists());
        let pending = session.pending()[0].clone();
        assert_eq!(pending.terms().approvers_needed, Some(2), "{text}");
        let id = pending.decision_id().to_owned();
        // Without an identity, an edit-free approval is refused: the quorum counts people.
        let error = session
            .decide(&id, Decision::approve())
            .await
            .expect_err("no identity");
        assert!(
            matches!(
                error,
                SessionError::Quorum(QuorumError::NoIdentity { needed: 2 })
            ),
            "{error}"
        );
        session
            .decide(&id, Decision::approve().decided_by("alice"))
            .await
            .expect("one approval");
        assert!(
            !ws.path().join("a.txt").exists(),
            "one approval runs nothing"
        );
        assert_eq!(session.pending()[0].terms().approvals.len(), 1);
        // The same person with other spacing is the same identity.
        let error = session
            .decide(&id, Decision::approve().decided_by(" alice "))
            .await
            .expect_err("the same identity");
        assert!(
            matches!(&error, SessionError::Quorum(QuorumError::SameIdentity { by, .. }) if by == "alice"),
            "{error}"
        );
        session
            .decide(&id, Decision::approve().decided_by("bob"))
            .await
            .expect("the quorum");
        assert_eq!(
            std::fs::read_to_string(ws.path().join("a.txt"))
                .ok()
                .as_deref(),
            Some("hello")
        );
        let record = session
            .decision_history()
            .iter()
            .find(|d| d.decision_id == id)
            .expect("a record")
            .clone();
        assert_eq!(record.approvals.len(), 2);
        assert_eq!(record.how(), agent_controller::event::DecidedHow::Person);
    }
}

/// Two approvals by two identities at once through the library's shared handle (as `serve`
/// takes them, [`agent_controller::session::SessionHandle::decide_json_via`]), each on its own
/// copy of the session loaded at the same version (two hosts): one wins the store's
/// compare-and-swap, the other is tried again on what it saved, and both land, as two
/// `decide` processes do. The call runs once, after the second.
#[tokio::test]
async fn two_approvals_at_once_through_the_library_handle_both_land() {
    use agent_controller::model::scripted::ReplayModel;
    use agent_controller::quorum::Via;
    use agent_controller::session::SessionHandle;
    use std::sync::Arc;
    let ws = common::Workspace::new();
    let store = Arc::new(common::faulty::Paired::default());
    let model = common::replay(vec![
        ReplayModel::call(
            "w1",
            "write_file",
            json!({ "path": "a.txt", "content": "hello" }),
        ),
        ReplayModel::text("done"),
    ]);
    let controller = agent_controller::AgentController::builder(
        agent_controller::config::parse(TOOL_QUORUM, "modes.toml").expect("config"),
        model,
    )
    .tools(agent_controller::ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .store(store.clone())
    .build()
    .expect("controller");
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    session.send_message("write it").await.expect("runs");
    let id = session.pending()[0].decision_id().to_owned();
    let session_id = session.id().to_owned();
    drop(session);
    let open = || async {
        SessionHandle::new(
            controller
                .restore_session(&session_id, agent_controller::SessionOptions::new())
                .await
                .expect("restored"),
        )
    };
    let (alice, bob) = (open().await, open().await);
    store.pair();
    let approve = json!({ "action": "approved" });
    let (a, b) = tokio::join!(
        alice.decide_json_via(&id, &approve, Some("alice"), Via::Http),
        bob.decide_json_via(&id, &approve, Some("bob"), Via::Http),
    );
    let (a, b) = (
        a.expect("alice's approval lands"),
        b.expect("bob's approval lands"),
    );
    let (_, run_a) = a;
    let (_, run_b) = b;
    run_a.outcome().await.expect("alice's run");
    run_b.outcome().await.expect("bob's run");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt"))
            .ok()
            .as_deref(),
        Some("hello"),
        "the quorum of two applied"
    );
    let after = controller
        .restore_session(&session_id, agent_controller::SessionOptions::new())
        .await
        .expect("restored");
    assert!(after.pending().is_empty());
    let record = after
        .decision_history()
        .iter()
        .find(|d| d.decision_id == id)
        .expect("a record");
    let mut by: Vec<&str> = record.approvals.iter().map(|a| a.by.as_str()).collect();
    by.sort_unstable();
    assert_eq!(by, ["alice", "bob"]);
    assert_eq!(record.via, Some(Via::Http));
}

/// A second approval under a name that reads as one that approved already (a Cyrillic `а`, a
/// zero-width space) is the same identity: the log would show one person twice.
#[tokio::test]
async fn a_look_alike_of_an_identity_that_approved_is_the_same_identity() {
    use agent_controller::{Decision, SessionError, quorum::QuorumError};
    let (mut session, _, ws) = hooked_session(TOOL_QUORUM).await;
    let id = session.pending()[0].decision_id().to_owned();
    session
        .decide(&id, Decision::approve().decided_by("alice"))
        .await
        .expect("one approval");
    for look_alike in ["\u{430}lice", "al\u{200b}ice", "aIice"] {
        let error = session
            .decide(&id, Decision::approve().decided_by(look_alike))
            .await
            .expect_err(look_alike);
        assert!(
            matches!(&error, SessionError::Quorum(QuorumError::SameIdentity { by, have: 1, .. }) if by == "alice"),
            "{look_alike:?}: {error}"
        );
        assert!(!ws.path().join("a.txt").exists(), "{look_alike:?}");
        assert_eq!(session.pending()[0].terms().approvals.len(), 1);
    }
    // Another person's name runs it.
    session
        .decide(&id, Decision::approve().decided_by("Alice Smith"))
        .await
        .expect("the quorum");
    assert!(ws.path().join("a.txt").exists());
}

#[test]
fn approvers_is_checked_on_a_mode_and_on_an_ask_rule() {
    let errors = agent_controller::config::check(
        "[[modes]]\nid = \"build\"\napprovers = 17\nrules = [\n  { tool = \"write_file\", action = \"deny\", approvers = 2 },\n  { tool = \"read_file\", action = \"ask\", approvers = 0 },\n]\n",
        "modes.toml",
    );
    let placed: Vec<(usize, String)> = errors
        .iter()
        .map(|e| (e.location().map_or(0, |l| l.line), e.message().to_owned()))
        .collect();
    assert!(
        placed
            .iter()
            .any(|(l, m)| *l == 3 && m.contains("from 1 to 16")),
        "{placed:?}"
    );
    assert!(
        placed
            .iter()
            .any(|(l, m)| *l == 5 && m.contains("only an `ask` rule")),
        "{placed:?}"
    );
    assert!(
        placed
            .iter()
            .any(|(l, m)| *l == 6 && m.contains("approvers = 0")),
        "{placed:?}"
    );
}
