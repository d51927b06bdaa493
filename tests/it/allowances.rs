//! Allowances with a scope (issue 23, item 2): an "always allow" lasts for its mode (the
//! default), for the session in its mode, or for the workspace (kept in the store, keyed by the
//! workspace and the config, never applied to another); a pattern written as a rule narrows it;
//! it only stands in for `requireApproval`, never for a rule; every use is in the audit history;
//! the library lists and revokes them. Driven by the real `OpenAiModel` against the scripted
//! OpenAI-compatible server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::allowance::{AllowancePattern, AllowanceScope};
use agent_controller::store::StoreError;
use agent_controller::{
    AgentController, Decision, FileStore, RunOutcome, Session, SessionError, SessionStore,
    ToolRegistry, config,
};
use common::Workspace;
use common::openai_server::{Call, Reply, ScriptedServer, call, calls, text};
use serde_json::json;

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "**/.env*", action = "deny" },
  { tool = "write_file", path = "ops/**", action = "ask" },
]

[[modes]]
id = "review"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

fn write(id: &str, path: &str) -> Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": "x" }).to_string(),
    )
}

/// A controller over `store` in `ws` with `config`, its model scripted by `script`.
async fn controller(
    ws: &Workspace,
    store: Option<Arc<dyn SessionStore>>,
    config_text: &str,
    script: Vec<Reply>,
) -> (ScriptedServer, AgentController) {
    let server = ScriptedServer::start(script).await;
    let mut builder = AgentController::builder(
        config::parse(config_text, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path());
    if let Some(store) = store {
        builder = builder.store(store);
    }
    (server, builder.build().expect("controller"))
}

fn file_store(dir: &tempfile::TempDir) -> Arc<dyn SessionStore> {
    Arc::new(FileStore::open(dir.path().join("sessions")).expect("store"))
}

/// Whether the run waits on a call (true) or ran it and completed (false).
fn waits(outcome: &RunOutcome) -> bool {
    match outcome {
        RunOutcome::ToolCallsSuspended { .. } => true,
        RunOutcome::Completed { .. } => false,
        other => panic!("unexpected outcome {other:?}"),
    }
}

/// One session in `ws` that writes `path` once, then ends.
async fn one_write(
    ws: &Workspace,
    store: Option<Arc<dyn SessionStore>>,
    config_text: &str,
    path: &str,
) -> (Session, RunOutcome, ScriptedServer) {
    let (server, controller) = controller(
        ws,
        store,
        config_text,
        vec![calls([write("call_1", path)]), text("done")],
    )
    .await;
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("write").await.expect("run");
    (session, outcome, server)
}

#[tokio::test]
async fn a_workspace_allowance_runs_the_calls_of_later_sessions_in_that_workspace_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = file_store(&dir);
    let (a, b) = (Workspace::new(), Workspace::new());
    let (mut first, outcome, _server) = one_write(&a, Some(store.clone()), CONFIG, "a.txt").await;
    assert!(waits(&outcome));
    let decision = Decision::approve()
        .always_allow()
        .scope(AllowanceScope::Workspace)
        .decided_by("ana");
    first.decide("decision_1", decision).await.expect("decide");
    let kept = store.list_workspace_allowances(None).await.expect("listed");
    let [allowance] = kept.as_slice() else {
        panic!("one workspace allowance: {kept:?}");
    };
    assert_eq!(allowance.mode_id, "build");
    assert_eq!(
        allowance.workspace.as_deref(),
        Some(
            std::fs::canonicalize(a.path())
                .expect("canonical")
                .as_path()
        )
    );
    assert_eq!(allowance.decided_by.as_deref(), Some("ana"));

    // A new session in the same workspace under the same config: runs without asking, and
    // its audit record names the allowance.
    let (second, outcome, _server) = one_write(&a, Some(store.clone()), CONFIG, "b.txt").await;
    assert!(!waits(&outcome), "{outcome:?}");
    assert!(a.path().join("b.txt").exists());
    let used = second
        .decision_history()
        .iter()
        .find(|d| d.tool_call_id == "call_1")
        .expect("a record of the allowed call");
    assert_eq!(used.allowed_by.as_deref(), Some(allowance.id.as_str()));
    assert_eq!(
        used.decided_by.as_deref(),
        Some(format!("allowance {} (workspace)", allowance.id).as_str())
    );
    assert_eq!(second.allowances(), kept);

    // Another workspace, same store and config: asked.
    let (third, outcome, _server) = one_write(&b, Some(store.clone()), CONFIG, "a.txt").await;
    assert!(waits(&outcome), "another workspace: {outcome:?}");
    assert!(third.allowances().is_empty());
    // The same workspace under another config: asked.
    let changed = format!("{CONFIG}\n[[modes]]\nid = \"extra\"\n");
    let (_fourth, outcome, _server) = one_write(&a, Some(store.clone()), &changed, "c.txt").await;
    assert!(waits(&outcome), "another config: {outcome:?}");

    // Revoked in the store: the next session asks again.
    assert!(
        store
            .revoke_workspace_allowance(&allowance.id)
            .await
            .expect("revoke")
    );
    let (_fifth, outcome, _server) = one_write(&a, Some(store.clone()), CONFIG, "d.txt").await;
    assert!(waits(&outcome), "revoked: {outcome:?}");
}

#[tokio::test]
async fn a_session_allowance_applies_again_back_in_its_mode_and_a_mode_one_does_not() {
    for (scope, back) in [
        (AllowanceScope::Mode, false),
        (AllowanceScope::Session, true),
    ] {
        let ws = Workspace::new();
        let script = vec![
            calls([write("call_1", "a.txt")]),
            text("done"),
            calls([write("call_2", "b.txt")]),
            calls([write("call_3", "c.txt")]),
            text("done"),
        ];
        let (_server, controller) = controller(&ws, None, CONFIG, script).await;
        let mut session = controller
            .start_session(agent_controller::SessionOptions::new())
            .await
            .expect("session");
        session.send_message("one").await.expect("run");
        session
            .decide(
                "decision_1",
                Decision::approve().always_allow().scope(scope),
            )
            .await
            .expect("decide");
        session.switch_mode("review").await.expect("switch");
        // Never another mode's calls.
        let outcome = session.send_message("two").await.expect("run");
        assert!(waits(&outcome), "{scope}: in review");
        session.abort().await.expect("abort");
        session.switch_mode("build").await.expect("switch back");
        let outcome = session.send_message("three").await.expect("run");
        assert_eq!(!waits(&outcome), back, "{scope}: back in build");
        assert_eq!(session.allowances().len(), usize::from(back), "{scope}");
    }
}

#[tokio::test]
async fn a_narrowed_allowance_runs_only_what_its_pattern_matches_where_the_jail_resolves_it() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("src")).expect("src");
    let script = vec![
        calls([write("call_1", "src/a.rs")]),
        text("done"),
        calls([
            write("call_2", "src/b.rs"),
            write("call_3", "src/../top.txt"),
            write("call_4", "./src/c.rs"),
        ]),
        text("done"),
    ];
    let (_server, controller) = controller(&ws, None, CONFIG, script).await;
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    session.send_message("one").await.expect("run");
    let narrowed = Decision::approve()
        .scope(AllowanceScope::Session)
        .allow_only(AllowancePattern::path("src/**"));
    session
        .decide("decision_1", narrowed)
        .await
        .expect("decide");
    assert!(session.always_allowed().is_empty(), "not the whole tool");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } =
        session.send_message("two").await.expect("run")
    else {
        panic!("the call outside src waits");
    };
    let ids: Vec<&str> = tool_calls.iter().map(|c| c.tool_call_id()).collect();
    assert_eq!(
        ids,
        ["call_3"],
        "`src/../top.txt` is `top.txt`, outside src/**"
    );
    let ran: Vec<&str> = session
        .decision_history()
        .iter()
        .filter(|d| d.allowed_by.as_deref() == Some("decision_1"))
        .map(|d| d.tool_call_id.as_str())
        .collect();
    assert_eq!(ran, ["call_2", "call_4"]);
}

#[tokio::test]
async fn a_deny_or_ask_rule_outranks_any_allowance() {
    let ws = Workspace::new();
    let script = vec![
        calls([write("call_1", "a.txt")]),
        text("done"),
        calls([write("call_2", ".env"), write("call_3", "ops/deploy.sh")]),
        text("done"),
    ];
    let (_server, controller) = controller(&ws, None, CONFIG, script).await;
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    session.send_message("one").await.expect("run");
    session
        .decide(
            "decision_1",
            Decision::approve().scope(AllowanceScope::Session),
        )
        .await
        .expect("decide");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } =
        session.send_message("two").await.expect("run")
    else {
        panic!("the ask rule's call waits");
    };
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0].tool_call_id(), "call_3");
    assert!(!ws.path().join(".env").exists(), "the deny rule refused it");
    // And no allowance may be given at the ask rule's call: the one predicate says why.
    assert!(!tool_calls[0].payload().may_always_allow());
    let refused = session
        .decide(
            tool_calls[0].decision_id(),
            Decision::approve().scope(AllowanceScope::Workspace),
        )
        .await
        .expect_err("refused");
    assert!(
        matches!(refused, SessionError::MalformedDecision(_)),
        "{refused}"
    );
}

#[tokio::test]
async fn a_workspace_allowance_without_a_store_that_keeps_it_is_refused_and_changes_nothing() {
    let ws = Workspace::new();
    let (mut session, outcome, _server) = one_write(&ws, None, CONFIG, "a.txt").await;
    assert!(waits(&outcome));
    let refused = session
        .decide(
            "decision_1",
            Decision::approve().scope(AllowanceScope::Workspace),
        )
        .await
        .expect_err("no store");
    assert!(
        matches!(refused, SessionError::Store(StoreError::Unsupported(_))),
        "{refused}"
    );
    assert!(session.pending()[0].is_waiting(), "nothing changed");
    assert!(session.allowances().is_empty());
    assert!(!ws.path().join("a.txt").exists());
}

#[tokio::test]
async fn allowances_are_listed_and_revoked_by_the_session_and_survive_a_restore() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = file_store(&dir);
    let ws = Workspace::new();
    let (server, controller) = controller(
        &ws,
        Some(store.clone()),
        CONFIG,
        vec![
            calls([write("call_1", "a.txt")]),
            text("done"),
            calls([write("call_2", "b.txt")]),
            text("done"),
        ],
    )
    .await;
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    session.send_message("one").await.expect("run");
    let narrowed = Decision::approve()
        .scope(AllowanceScope::Session)
        .allow_only(AllowancePattern::glob("content", "x"));
    session
        .decide("decision_1", narrowed)
        .await
        .expect("decide");
    let id = session.id().to_owned();
    drop(session);
    let mut restored = controller
        .restore_session(&id, agent_controller::SessionOptions::new())
        .await
        .expect("restore");
    let listed = restored.allowances();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, "decision_1");
    assert_eq!(listed[0].scope, AllowanceScope::Session);
    assert_eq!(
        listed[0].pattern,
        Some(AllowancePattern::glob("content", "x"))
    );
    assert!(
        restored
            .revoke_allowance("decision_1")
            .await
            .expect("revoke")
    );
    assert!(restored.allowances().is_empty());
    let outcome = restored.send_message("two").await.expect("run");
    assert!(waits(&outcome), "revoked: asked again");
    drop(server);
}

mod keyed {
    use agent_controller::allowance::{Allowance, AllowancePattern, AllowanceScope};
    use agent_controller::{MemoryStore, SessionStore};
    use proptest::prelude::*;

    const WORKSPACES: [&str; 3] = ["/w/a", "/w/b", "/w/a/b"];
    const CONFIGS: [&str; 2] = ["f1", "f2"];
    const TOOLS: [&str; 2] = ["write_file", "run_command"];

    fn allowance(w: usize, f: usize, t: usize, narrowed: bool) -> Allowance {
        let mut a = Allowance::new(AllowanceScope::Workspace, "", "build", TOOLS[t]);
        if narrowed {
            a.pattern = Some(AllowancePattern::path("src/**"));
        }
        a.in_workspace(WORKSPACES[w], CONFIGS[f])
    }

    proptest! {
        /// Whatever workspace allowances are given, in whatever order and however often, what a
        /// workspace under a config keeps is exactly those given for both: never another
        /// workspace's (`/w/a/b` is not `/w/a`), never another config's, each once.
        #[test]
        fn a_workspace_keeps_exactly_its_own_allowances(
            given in proptest::collection::vec((0..3usize, 0..2usize, 0..2usize, any::<bool>()), 0..12)
        ) {
            let store = MemoryStore::new();
            let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
            runtime.block_on(async {
                for (w, f, t, n) in &given {
                    store.save_workspace_allowance(&allowance(*w, *f, *t, *n)).await.expect("saved");
                }
                for (w, workspace) in WORKSPACES.iter().enumerate() {
                    for (f, config) in CONFIGS.iter().enumerate() {
                        let path = std::path::Path::new(workspace);
                        let mut kept: Vec<String> = store
                            .list_workspace_allowances(Some(path))
                            .await
                            .expect("listed")
                            .into_iter()
                            .filter(|a| a.is_for(path, config))
                            .map(|a| a.id)
                            .collect();
                        kept.sort();
                        let mut want: Vec<String> = given
                            .iter()
                            .filter(|(gw, gf, _, _)| *gw == w && *gf == f)
                            .map(|(gw, gf, t, n)| allowance(*gw, *gf, *t, *n).id)
                            .collect();
                        want.sort();
                        want.dedup();
                        prop_assert_eq!(kept, want);
                    }
                }
                Ok(())
            })?;
        }
    }
}

/// An approval of the call that waits with a session allowance narrowed by `pattern`.
fn narrowed(pattern: AllowancePattern) -> Decision {
    Decision::approve()
        .scope(AllowanceScope::Session)
        .allow_only(pattern)
}

/// Deciding `decision_1` with a session allowance narrowed by `pattern` is refused as a
/// malformed decision whose reason says `why`, and changes nothing: the call still waits and
/// no allowance is kept.
async fn narrowing_is_refused(session: &mut Session, pattern: AllowancePattern, why: &str) {
    let refused = session
        .decide("decision_1", narrowed(pattern.clone()))
        .await
        .expect_err("refused");
    let SessionError::MalformedDecision(reason) = &refused else {
        panic!("{refused}");
    };
    assert!(reason.contains(why), "{reason}");
    assert_eq!(session.pending().len(), 1, "nothing changed");
    assert!(session.allowances().is_empty(), "{pattern}");
}

/// Review finding 2: a `glob` on the argument `path` read the text as sent, so
/// `src/../.env` fit `src/*` and ran unasked. The narrowing is refused (use `path`), nothing
/// changes, and the call still waits; the same narrowing written with `path` is accepted.
#[tokio::test]
async fn a_string_pattern_on_the_path_argument_is_refused_and_changes_nothing() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("src")).expect("src");
    let script = vec![
        calls([write("call_1", "src/a.rs")]),
        text("done"),
        calls([write("call_2", "src/../top.txt")]),
        text("done"),
    ];
    let (_server, controller) = controller(&ws, None, CONFIG, script).await;
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    assert!(waits(&session.send_message("one").await.expect("run")));
    for pattern in [
        AllowancePattern::glob("path", "src/*"),
        serde_json::from_value(json!({ "arg": "path", "regex": "src/.*" })).expect("pattern"),
    ] {
        narrowing_is_refused(&mut session, pattern, "use `path`").await;
    }
    session
        .decide("decision_1", narrowed(AllowancePattern::path("src/*")))
        .await
        .expect("decide");
    assert!(
        waits(&session.send_message("two").await.expect("run")),
        "`src/../top.txt` is `top.txt`, outside src/*"
    );
    assert!(!ws.path().join("top.txt").exists());
}

/// Review finding 2, in a mode's own rules: an `allow` rule with a `glob` on `path` is refused
/// by the config, at the pattern's line and column.
#[test]
fn an_allow_rule_with_a_string_pattern_on_path_is_a_config_error_at_its_place() {
    let text = "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\nrules = [{ tool = \"write_file\", arg = \"path\", glob = \"src/*\", action = \"allow\" }]\n";
    let err = config::parse(text, "modes.toml").expect_err("refused");
    let shown = err.to_string();
    assert!(shown.contains("modes.toml:4:"), "{shown}");
    assert!(shown.contains("use `path"), "{shown}");
    // A deny rule may read the text as sent (it only refuses more).
    let deny = text.replace("\"allow\"", "\"deny\"");
    config::parse(&deny, "modes.toml").expect("a deny rule is kept");
}

/// A host tool `copy` that takes its path in `file` (so a string pattern on `file` reads a
/// path the jail does not resolve), and `run` that takes only `command`; neither schema closes
/// its properties.
struct HostTool {
    name: &'static str,
    arg: &'static str,
}

#[async_trait::async_trait]
impl agent_controller::tool::Tool for HostTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "A host tool.".to_owned()
    }
    fn input_schema(&self) -> serde_json::Value {
        json!({ "type": "object", "properties": { self.arg: { "type": "string" } } })
    }
    async fn execute(
        &self,
        _: &serde_json::Value,
        _: &agent_controller::tool::ToolContext<'_>,
    ) -> agent_controller::tool::ToolOutput {
        agent_controller::tool::ToolOutput::ok("done")
    }
}

const HOST_CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["copy", "run"]
requireApproval = ["copy", "run"]
"#;

async fn host_session(ws: &Workspace, script: Vec<Reply>) -> (ScriptedServer, Session) {
    let server = ScriptedServer::start(script).await;
    let mut tools = ToolRegistry::new();
    for (name, arg) in [("copy", "file"), ("run", "command")] {
        tools
            .register(Arc::new(HostTool { name, arg }))
            .expect("registers");
    }
    let controller = AgentController::builder(
        config::parse(HOST_CONFIG, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(tools)
    .workspace(ws.path())
    .build()
    .expect("controller");
    let session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    (server, session)
}

/// Review finding 3: a pattern on an argument the tool does not declare was accepted, and a
/// decoy argument of that name met it (`{"command": "rm -rf ~", "path": "src/x"}` fit `path
/// src/**`). Such a pattern is refused and nothing changes; one on `command` is accepted and the
/// decoy call still waits.
#[tokio::test]
async fn a_pattern_on_an_argument_the_tool_does_not_declare_is_refused() {
    let ws = Workspace::new();
    let script = vec![
        calls([call(
            "call_1",
            "run",
            &json!({ "command": "git status" }).to_string(),
        )]),
        text("done"),
        calls([call(
            "call_2",
            "run",
            &json!({ "command": "rm -rf ~", "path": "src/x", "cmd": "git x" }).to_string(),
        )]),
        text("done"),
    ];
    let (_server, mut session) = host_session(&ws, script).await;
    assert!(waits(&session.send_message("one").await.expect("run")));
    for pattern in [
        AllowancePattern::path("src/**"),
        AllowancePattern::glob("cmd", "git *"),
    ] {
        narrowing_is_refused(&mut session, pattern, "does not declare").await;
    }
    session
        .decide(
            "decision_1",
            narrowed(AllowancePattern::glob("command", "git *")),
        )
        .await
        .expect("decide");
    assert!(
        waits(&session.send_message("two").await.expect("run")),
        "`rm -rf ~` is not `git *`, whatever the decoys say"
    );
}

/// Review finding 2, for a path argument the jail does not resolve: an allow pattern on the
/// text of `file` never fits a value with a `.` or `..` component, so `src/../.env` waits.
#[tokio::test]
async fn a_string_allow_pattern_never_fits_a_value_that_walks_out_with_dot_dot() {
    let ws = Workspace::new();
    let copy = |id: &str, file: &str| call(id, "copy", &json!({ "file": file }).to_string());
    let script = vec![
        calls([copy("call_1", "src/a")]),
        text("done"),
        calls([
            copy("call_2", "src/b"),
            copy("call_3", "src/../.env"),
            copy("call_4", "src/./c"),
        ]),
        text("done"),
    ];
    let (_server, mut session) = host_session(&ws, script).await;
    assert!(waits(&session.send_message("one").await.expect("run")));
    session
        .decide(
            "decision_1",
            Decision::approve()
                .scope(AllowanceScope::Session)
                .allow_only(AllowancePattern::glob("file", "src/*")),
        )
        .await
        .expect("decide");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } =
        session.send_message("two").await.expect("run")
    else {
        panic!("the calls with `..` or `.` wait");
    };
    let ids: Vec<&str> = tool_calls.iter().map(|c| c.tool_call_id()).collect();
    assert_eq!(ids, ["call_3", "call_4"]);
}

/// The config of [`CONFIG`]'s `build` mode without its rules: every write waits on
/// `requireApproval` alone.
const NO_RULES: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

/// Review finding 1 and trust round 4, M2: an "always allow" on one call approved the other
/// waiting calls of its tool unseen. It approves the call shown only: the other call (restored
/// under a config with an `ask` rule on its path) still waits and is asked about; rejected, it
/// never runs.
#[tokio::test]
async fn a_call_waiting_beside_an_always_allow_is_asked_about_not_approved_unseen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = file_store(&dir);
    let ws = Workspace::new();
    let (_first_server, first) = controller(
        &ws,
        Some(store.clone()),
        NO_RULES,
        vec![calls([
            write("call_1", "a.txt"),
            write("call_2", "ops/b.txt"),
        ])],
    )
    .await;
    let mut session = first
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("write").await.expect("run");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = &outcome else {
        panic!("both calls wait: {outcome:?}");
    };
    assert_eq!(tool_calls.len(), 2);
    let id = session.id().to_owned();
    drop(session);

    let (server, second) = controller(&ws, Some(store.clone()), CONFIG, vec![text("done")]).await;
    let mut restored = second
        .restore_session(&id, agent_controller::SessionOptions::new())
        .await
        .expect("restore");
    let outcome = restored
        .decide("decision_1", Decision::approve().always_allow())
        .await
        .expect("decide");
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = &outcome else {
        panic!("the other call still waits: {outcome:?}");
    };
    let waiting: Vec<&str> = tool_calls
        .iter()
        .filter(|c| c.decision().is_none())
        .map(|c| c.decision_id())
        .collect();
    assert_eq!(waiting, ["decision_2"]);
    assert!(!ws.path().join("a.txt").exists(), "nothing ran yet");
    let outcome = restored
        .decide("decision_2", Decision::reject())
        .await
        .expect("reject");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(
        ws.path().join("a.txt").exists(),
        "the call the user approved ran"
    );
    assert!(
        !ws.path().join("ops/b.txt").exists(),
        "the call nobody approved never ran"
    );
    // The model was told it did not run.
    let told = server.bodies().await;
    let body = told.last().expect("the model was called").to_string();
    assert!(body.contains("Not approved"), "{body}");
}

/// A memory store whose session saves conflict once `lose` is set (another decider won the
/// race) and whose revokes fail.
#[derive(Default)]
struct LosesTheRace {
    inner: agent_controller::MemoryStore,
    lose: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl SessionStore for LosesTheRace {
    async fn load(
        &self,
        id: &str,
    ) -> Result<Option<agent_controller::store::SessionRecord>, StoreError> {
        self.inner.load(id).await
    }
    async fn save(
        &self,
        r: &agent_controller::store::SessionRecord,
        e: Option<u64>,
    ) -> Result<(), StoreError> {
        if self.lose.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Conflict {
                session_id: r.session_id.clone(),
                expected: e,
                found: Some(7),
            });
        }
        self.inner.save(r, e).await
    }
    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.inner.delete(id).await
    }
    async fn list_pending(
        &self,
        now_ms: u64,
    ) -> Result<agent_controller::store::PendingListing, StoreError> {
        self.inner.list_pending(now_ms).await
    }
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.inner.expire(before).await
    }
    async fn save_workspace_allowance(
        &self,
        allowance: &agent_controller::allowance::Allowance,
    ) -> Result<(), StoreError> {
        self.inner.save_workspace_allowance(allowance).await
    }
    async fn list_workspace_allowances(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<Vec<agent_controller::allowance::Allowance>, StoreError> {
        self.inner.list_workspace_allowances(workspace).await
    }
    async fn revoke_workspace_allowance(&self, _id: &str) -> Result<bool, StoreError> {
        Err(StoreError::Unsupported(
            "revoke (failing on purpose)".to_owned(),
        ))
    }
}

/// Review finding 6: a workspace allowance is kept only once the decision that gives it is
/// saved. When that save fails (a lost race) and a revoke would fail too, the store keeps no
/// allowance, and the session still waits, as before.
#[tokio::test]
async fn a_workspace_allowance_whose_decision_is_not_saved_is_never_kept() {
    let store = Arc::new(LosesTheRace::default());
    let ws = Workspace::new();
    let (mut session, outcome, _server) =
        one_write(&ws, Some(store.clone()), CONFIG, "a.txt").await;
    assert!(waits(&outcome));
    store.lose.store(true, std::sync::atomic::Ordering::SeqCst);
    let decision = Decision::approve()
        .always_allow()
        .scope(AllowanceScope::Workspace);
    let lost = session
        .decide("decision_1", decision)
        .await
        .expect_err("the save lost the race");
    assert!(
        matches!(lost, SessionError::Store(StoreError::Conflict { .. })),
        "{lost}"
    );
    let kept = store.list_workspace_allowances(None).await.expect("listed");
    assert!(
        kept.is_empty(),
        "no allowance without its decision: {kept:?}"
    );
    assert!(session.pending()[0].is_waiting(), "nothing changed");
    assert!(!ws.path().join("a.txt").exists());
}

fn workspace_scope() -> Decision {
    Decision::approve()
        .always_allow()
        .scope(AllowanceScope::Workspace)
}

/// Review finding 4: a workspace allowance was keyed by the path text of the workspace, so a
/// directory deleted and made again at the same path (another clone, another project) ran its
/// calls unasked. It keeps the directory's identity, as sessions do: in another directory at
/// the path it does not apply (the store still lists it, to be revoked), and given again there
/// it replaces the old one.
#[tokio::test]
async fn a_workspace_allowance_does_not_apply_in_another_directory_at_the_same_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = file_store(&dir);
    let ws = Workspace::new();
    let (mut first, outcome, _server) = one_write(&ws, Some(store.clone()), CONFIG, "a.txt").await;
    assert!(waits(&outcome));
    first
        .decide("decision_1", workspace_scope())
        .await
        .expect("decide");
    let kept = store.list_workspace_allowances(None).await.expect("listed");
    let [given] = kept.as_slice() else {
        panic!("one workspace allowance: {kept:?}");
    };
    assert!(given.workspace_identity.is_some(), "{given:?}");
    let (_same, outcome, _server) = one_write(&ws, Some(store.clone()), CONFIG, "b.txt").await;
    assert!(!waits(&outcome), "the same directory: {outcome:?}");

    // Another directory at the same path: the old one moved aside (so its inode stays in use),
    // a new one made in its place.
    let canonical = std::fs::canonicalize(ws.path()).expect("canonical");
    let aside = ws.path().with_extension("aside");
    std::fs::rename(ws.path(), &aside).expect("move aside");
    std::fs::create_dir(ws.path()).expect("a new directory at the same path");
    let (mut other, outcome, _server) = one_write(&ws, Some(store.clone()), CONFIG, "c.txt").await;
    assert!(
        waits(&outcome),
        "another directory at the path: {outcome:?}"
    );
    assert!(other.allowances().is_empty(), "{:?}", other.allowances());
    assert!(!ws.path().join("c.txt").exists());
    let listed = store
        .list_workspace_allowances(Some(&canonical))
        .await
        .expect("listed");
    assert_eq!(listed, kept, "still listed for the path, to be revoked");

    // Given again in the new directory: it replaces the old one, and applies here.
    other
        .decide("decision_1", workspace_scope())
        .await
        .expect("decide");
    let now = store.list_workspace_allowances(None).await.expect("listed");
    let [again] = now.as_slice() else {
        panic!("one workspace allowance: {now:?}");
    };
    assert_eq!(again.id, given.id);
    assert_ne!(again.workspace_identity, given.workspace_identity);
    let (_next, outcome, _server) = one_write(&ws, Some(store.clone()), CONFIG, "d.txt").await;
    assert!(!waits(&outcome), "given again here: {outcome:?}");
    std::fs::remove_dir_all(&aside).expect("remove the old directory");
}

/// Review finding 5: the config fingerprint left out the MCP servers, so an allowance given
/// while a tool name ran on one server applied when the config pointed it at another. Every
/// part of a server that decides what its tools do is in the fingerprint.
#[tokio::test]
async fn a_workspace_allowance_does_not_apply_when_the_config_names_other_mcp_servers() {
    let servers =
        |command: &str| format!("[[mcpServers]]\nid = \"gh\"\ncommand = \"{command}\"\n{CONFIG}");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = file_store(&dir);
    let ws = Workspace::new();
    let given_under = servers("gh-mcp");
    let (mut first, outcome, _server) =
        one_write(&ws, Some(store.clone()), &given_under, "a.txt").await;
    assert!(waits(&outcome));
    first
        .decide("decision_1", workspace_scope())
        .await
        .expect("decide");
    let (_same, outcome, _server) =
        one_write(&ws, Some(store.clone()), &given_under, "b.txt").await;
    assert!(!waits(&outcome), "the same servers: {outcome:?}");
    for other in [servers("evil-mcp"), CONFIG.to_owned()] {
        let (_other, outcome, _server) = one_write(&ws, Some(store.clone()), &other, "c.txt").await;
        assert!(waits(&outcome), "other servers: {outcome:?}");
    }
    assert!(!ws.path().join("c.txt").exists());
}

/// Review findings 9 and 10: the approval that gave an allowance did not record its scope and
/// pattern, and a call it approved named the decision, not the allowance (`ws_…` for a
/// workspace one). The approval's record keeps `allowance` (`id`, `scope`, `allow`), and every
/// call the allowance approves (a later reply's: trust round 4, M2) names it.
#[tokio::test]
async fn the_approval_records_what_it_gave_and_the_calls_it_approves_name_the_allowance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = file_store(&dir);
    let ws = Workspace::new();
    let script = vec![
        calls([write("call_1", "a.txt")]),
        calls([write("call_2", "b.txt")]),
        text("done"),
    ];
    let (_server, controller) = controller(&ws, Some(store.clone()), CONFIG, script).await;
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    let outcome = session.send_message("write").await.expect("run");
    assert!(waits(&outcome));
    session
        .decide("decision_1", workspace_scope().decided_by("ana"))
        .await
        .expect("decide");
    let allowances = session.allowances();
    let [allowance] = allowances.as_slice() else {
        panic!("one allowance: {allowances:?}");
    };
    assert!(allowance.id.starts_with("ws_"), "{}", allowance.id);
    let history = session.decision_history();
    let record = |call: &str| {
        history
            .iter()
            .find(|d| d.tool_call_id == call)
            .unwrap_or_else(|| panic!("a record of {call}: {history:?}"))
    };
    let granting = serde_json::to_value(record("call_1")).expect("json");
    assert_eq!(
        granting["allowance"],
        json!({ "id": allowance.id, "scope": "workspace" })
    );
    assert_eq!(granting["decidedBy"], "ana");
    let sibling = record("call_2");
    assert_eq!(sibling.allowed_by.as_deref(), Some(allowance.id.as_str()));
    assert_eq!(
        sibling.decided_by.as_deref(),
        Some(format!("allowance {} (workspace)", allowance.id).as_str())
    );
    assert_eq!(sibling.allowance, None);
    assert!(ws.path().join("b.txt").exists());

    // A narrowed one keeps its pattern.
    let (mut narrowed, outcome, _server) = one_write(&ws, None, CONFIG, "src/a.txt").await;
    assert!(waits(&outcome));
    let decision = Decision::approve()
        .always_allow()
        .scope(AllowanceScope::Session)
        .allow_only(AllowancePattern::path("src/**"));
    narrowed
        .decide("decision_1", decision)
        .await
        .expect("decide");
    let given = narrowed.decision_history()[0].allowance.clone().map(|g| *g);
    assert_eq!(
        given,
        Some(agent_controller::allowance::GivenAllowance {
            id: "decision_1".to_owned(),
            scope: AllowanceScope::Session,
            allow: Some(AllowancePattern::path("src/**")),
        })
    );
}

/// A tool `slow` that returns at once, or with `{"wait": true}` waits until the run is
/// cancelled (after telling `started`).
struct Slow {
    started: Arc<tokio::sync::Notify>,
}

#[async_trait::async_trait]
impl agent_controller::tool::Tool for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> String {
        "Waits when asked to.".to_owned()
    }
    fn input_schema(&self) -> serde_json::Value {
        json!({ "type": "object", "properties": { "wait": { "type": "boolean" } } })
    }
    async fn execute(
        &self,
        args: &serde_json::Value,
        _: &agent_controller::tool::ToolContext<'_>,
    ) -> agent_controller::tool::ToolOutput {
        if args["wait"] == json!(true) {
            self.started.notify_one();
            std::future::pending::<()>().await;
        }
        agent_controller::tool::ToolOutput::ok("done")
    }
}

/// A session in `build` where `slow` waits for approval, with `slow` allowed for the session
/// (the first call approved with "always allow"); the model's next reply calls `slow` with
/// `{"wait": true}` (`call_2`), which tells the returned `Notify` when it starts. Keep the server.
async fn allowed_slow_session(
    ws: &Workspace,
) -> (
    ScriptedServer,
    agent_controller::Session,
    Arc<tokio::sync::Notify>,
) {
    let started = Arc::new(tokio::sync::Notify::new());
    let script = vec![
        calls([call("call_1", "slow", r#"{"wait": false}"#)]),
        text("done"),
        calls([call("call_2", "slow", r#"{"wait": true}"#)]),
    ];
    let server = ScriptedServer::start(script).await;
    let mut tools = ToolRegistry::new();
    tools
        .register(Arc::new(Slow {
            started: started.clone(),
        }))
        .expect("registers");
    let graph = config::parse(
        "[[modes]]\nid = \"build\"\ndefault = true\navailableTools = [\"slow\"]\nrequireApproval = [\"slow\"]\n",
        "modes.toml",
    )
    .expect("config");
    let controller = AgentController::builder(graph, Arc::new(server.model()))
        .tools(tools)
        .workspace(ws.path())
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    assert!(waits(&session.send_message("one").await.expect("run")));
    let decision = Decision::approve()
        .always_allow()
        .scope(AllowanceScope::Session);
    session
        .decide("decision_1", decision)
        .await
        .expect("decide");
    (server, session, started)
}

/// `call_2`, which the allowance `decision_1` let run, has the allowance's audit record.
fn assert_the_allowance_record_of_call_2(session: &agent_controller::Session) {
    let record = session
        .decision_history()
        .iter()
        .find(|d| d.tool_call_id == "call_2")
        .cloned()
        .expect("a record of the cancelled call the allowance ran");
    assert_eq!(record.allowed_by.as_deref(), Some("decision_1"));
    assert_eq!(
        record.decided_by.as_deref(),
        Some("allowance decision_1 (session)")
    );
    assert_eq!(
        record.outcome,
        Some(agent_controller::event::DecisionOutcome::Approved)
    );
}

/// Review finding 11: a call an allowance ran that was cancelled while it ran (the host's
/// abort) got no audit record. It gets the allowance's, as a call it ran to the end does.
#[tokio::test]
async fn a_call_an_allowance_ran_that_is_cancelled_has_its_record() {
    let ws = Workspace::new();
    let (_server, mut session, started) = allowed_slow_session(&ws).await;
    let handle = session.cancel_handle();
    let (outcome, cancelled) = tokio::join!(session.send_message("two"), async move {
        started.notified().await;
        handle.cancel()
    });
    assert!(cancelled);
    assert!(
        matches!(outcome, Ok(RunOutcome::Aborted { .. })),
        "{outcome:?}"
    );
    assert_the_allowance_record_of_call_2(&session);
}

/// Review finding 11, the other way to stop a run: a call an allowance ran whose run's future
/// the host dropped while it ran got no audit record. It gets the allowance's at once, in
/// memory, as a cancelled one does.
#[tokio::test]
async fn a_call_an_allowance_ran_whose_run_is_dropped_has_its_record() {
    let ws = Workspace::new();
    let (_server, mut session, started) = allowed_slow_session(&ws).await;
    {
        let run = session.send_message("two");
        tokio::pin!(run);
        tokio::select! {
            outcome = &mut run => panic!("the run waits in `slow`, it ended: {outcome:?}"),
            () = started.notified() => {}
        }
    }
    assert_eq!(
        session.run_state().map(|(_, state)| state),
        Some(agent_controller::event::RunState::Aborted)
    );
    assert_the_allowance_record_of_call_2(&session);
}
