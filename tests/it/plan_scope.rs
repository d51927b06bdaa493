//! The approved plan binds the build (issue 40): a plan declares the files it writes in a
//! `## Files` section, read at submit (a section that leaves the workspace, matches everything
//! or is too long is refused: the model gets an error result and nothing waits), shown as what
//! the approval grants (the suspend payload's `scope` and `steps`, `pending`), and bound in the
//! mode the plan hands over to by the planning mode's `planScope`. Driven by the real
//! `OpenAiModel` against the scripted OpenAI-compatible server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::store::{FileStore, SessionStore};
use agent_controller::{AgentController, RunOutcome, Session, ToolRegistry, config};
use common::openai_server::{Call, Reply, ScriptedServer, call, calls, submit, text};
use common::{Recorder, Workspace};
use serde_json::json;

/// A planning mode handing over to `build`, which asks before `write_file`; `{POLICY}` is the
/// planning mode's `planScope` line.
const CONFIG: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
{POLICY}

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
requireApproval = ["write_file"]
"#;

/// A plan with two numbered steps and a `## Files` section.
const PLAN: &str = "# Dark mode\n\n1. Add the theme.\n2. Use it in the UI.\n\n## Files to change\n- `src/theme.rs` — the colours\n- `src/ui/**`\n";

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    store: Arc<FileStore>,
    recorder: Recorder,
    ws: Workspace,
}

impl Setup {
    /// `policy`: the planning mode's `planScope` value, or `None` for none (the default).
    async fn new(policy: Option<&str>, script: Vec<Reply>) -> Self {
        Self::with_config(CONFIG, policy, script).await
    }

    /// [`Setup::new`] over `config` (with its `{POLICY}` line) instead of [`CONFIG`].
    async fn with_config(config: &str, policy: Option<&str>, script: Vec<Reply>) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let store = Arc::new(FileStore::open(ws.path().join("st")).expect("store"));
        let line = policy.map_or(String::new(), |p| format!("planScope = \"{p}\""));
        let config = config.replace("{POLICY}", &line);
        let controller = AgentController::builder(
            config::parse(&config, "modes.toml").expect("config"),
            Arc::new(server.model()),
        )
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller");
        Self {
            server,
            controller,
            store,
            recorder: Recorder::default(),
            ws,
        }
    }

    async fn session(&self) -> Session {
        self.controller
            .start_session(self.recorder.options().mode("plan"))
            .await
            .expect("session")
    }

    /// The `tool` messages of the `n`-th request (0-based): (tool_call_id, content).
    async fn tool_results(&self, n: usize) -> Vec<(String, String)> {
        let bodies = self.server.bodies().await;
        bodies[n]["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// The result text of `id` in the `n`-th request.
    async fn result_of(&self, n: usize, id: &str) -> String {
        self.tool_results(n)
            .await
            .into_iter()
            .find(|(call, _)| call == id)
            .map(|(_, content)| content)
            .unwrap_or_else(|| panic!("no result for {id} in request {n}"))
    }
}

fn write(id: &str, path: &str) -> Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": "x" }).to_string(),
    )
}

/// A plan whose `## Files` section is refused never waits: the model gets an error result
/// saying why, and the run goes on to its next reply.
#[tokio::test]
async fn a_files_section_that_leaves_the_workspace_is_refused_at_submit_and_nothing_waits() {
    let many: String = (0..10_000).map(|i| format!("- `src/f{i}.rs`\n")).collect();
    for (section, says) in [
        ("- `../outside.rs`\n".to_owned(), "leaves the workspace"),
        ("- `/etc/passwd`\n".to_owned(), "absolute"),
        ("- `**`\n".to_owned(), "whole workspace"),
        ("- `/`\n".to_owned(), "whole workspace"),
        (many, "10000 entries"),
    ] {
        let s = Setup::new(
            None,
            vec![
                calls([submit("call_1", ".agent/plans/p.md")]),
                text("understood"),
            ],
        )
        .await;
        s.ws.plan("p.md", &format!("# T\n\n1. Do it.\n\n## Files\n{section}"));
        let mut session = s.session().await;
        let outcome = session.send_message("plan it").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{says}: nothing waits: {outcome:?}"
        );
        let result = s.result_of(1, "call_1").await;
        assert!(result.contains(says), "{says}: {result}");
        assert!(result.contains("## Files"), "{result}");
        let listing = s
            .store
            .list_pending_decisions()
            .await
            .expect("list")
            .pending;
        assert!(listing.is_empty(), "{says}: nothing pending");
    }
}

/// A declared folder that is a symlink leading out of the workspace is refused as leaving it.
#[cfg(unix)]
#[tokio::test]
async fn a_files_entry_through_a_symlink_that_leads_out_is_refused() {
    let s = Setup::new(
        None,
        vec![
            calls([submit("call_1", ".agent/plans/p.md")]),
            text("understood"),
        ],
    )
    .await;
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), s.ws.path().join("docs")).expect("symlink");
    s.ws.plan("p.md", "# T\n\n1. Docs.\n\n## Files\n- `docs/**`\n");
    let mut session = s.session().await;
    let outcome = session.send_message("plan it").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let result = s.result_of(1, "call_1").await;
    assert!(result.contains("symlink"), "{result}");
    assert!(result.contains("docs/**"), "{result}");
}

/// The suspend payload and `pending --json` carry the plan's declared files (`scope`), its
/// numbered steps (`steps`) and the planning mode's `planScope`.
#[tokio::test]
async fn the_payload_and_the_listing_show_the_scope_the_steps_and_the_plan_scope() {
    for policy in [None, Some("enforce"), Some("off")] {
        let s = Setup::new(policy, vec![calls([submit("call_1", ".agent/plans/p.md")])]).await;
        s.ws.plan("p.md", PLAN);
        let mut session = s.session().await;
        let outcome = session.send_message("plan it").await.expect("run");
        let RunOutcome::Suspended { payload, .. } = outcome else {
            panic!("the plan waits: {outcome:?}");
        };
        let shown = serde_json::to_value(&payload).expect("json");
        assert_eq!(shown["scope"], json!(["src/theme.rs", "src/ui/**"]));
        assert_eq!(
            shown["steps"],
            json!([
                { "number": 1, "text": "Add the theme." },
                { "number": 2, "text": "Use it in the UI." }
            ])
        );
        assert_eq!(
            shown.get("planScope").and_then(|v| v.as_str()),
            policy,
            "`ask`, the default, is left out"
        );
        let listing = s
            .store
            .list_pending_decisions()
            .await
            .expect("list")
            .pending;
        let listed = serde_json::to_value(&listing[0]).expect("json");
        assert_eq!(listed["scope"], shown["scope"]);
        assert_eq!(listed["steps"], shown["steps"]);
        assert_eq!(listed.get("planScope"), shown.get("planScope"));
    }
}

/// A plan without a `## Files` section shows no scope.
#[tokio::test]
async fn a_plan_without_a_files_section_shows_no_scope() {
    let s = Setup::new(None, vec![calls([submit("call_1", ".agent/plans/p.md")])]).await;
    s.ws.plan("p.md", "# T\n\n1. Do it.\n");
    let mut session = s.session().await;
    let RunOutcome::Suspended { payload, .. } = session.send_message("plan").await.expect("run")
    else {
        panic!("waits");
    };
    let shown = serde_json::to_value(&payload).expect("json");
    assert!(shown.get("scope").is_none(), "{shown}");
    assert_eq!(shown["steps"], json!([{ "number": 1, "text": "Do it." }]));
}

/// `submit_plan`'s description tells the model the format.
#[tokio::test]
async fn submit_plans_description_tells_the_model_the_format() {
    let s = Setup::new(None, vec![text("ok")]).await;
    let mut session = s.session().await;
    session.send_message("hi").await.expect("run");
    let bodies = s.server.bodies().await;
    let tools = bodies[0]["tools"].as_array().expect("tools");
    let submit = tools
        .iter()
        .find(|t| t["function"]["name"] == "submit_plan")
        .expect("offered");
    let description = submit["function"]["description"].as_str().expect("text");
    assert!(description.contains("## Files"), "{description}");
    assert!(description.contains("src/ui/**"), "{description}");
}

/// The `pending` line of a plan says what approving grants.
#[cfg(feature = "cli")]
#[tokio::test]
async fn the_pending_line_says_what_approving_grants() {
    for (policy, says) in [
        (
            None,
            "approving lets `build` write: src/theme.rs, src/ui/** (a write to another file waits for approval)",
        ),
        (
            Some("enforce"),
            "approving lets `build` write: src/theme.rs, src/ui/** (a write to another file is refused)",
        ),
        (
            Some("off"),
            "the plan declares it writes: src/theme.rs, src/ui/** (planScope `off`: approving grants nothing)",
        ),
    ] {
        let s = Setup::new(policy, vec![calls([submit("call_1", ".agent/plans/p.md")])]).await;
        s.ws.plan("p.md", PLAN);
        let mut session = s.session().await;
        session.send_message("plan it").await.expect("run");
        let out = common::cli::bin(s.ws.path(), &["pending", "--store", "st"], "");
        let listed = common::cli::text(&out);
        assert!(
            listed.contains(&format!("Dark mode\t{says}\tworkspace ")),
            "{listed}"
        );
    }
}

/// The build mode of `CONFIG` with a `deny` rule on `src/theme.rs` (a declared file) and no
/// `requireApproval`: `{POLICY}` as in `CONFIG`.
const FREE_BUILD: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
{POLICY}

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
rules = [{ tool = "write_file", path = "src/theme.rs", action = "deny" }]
"#;

/// Submits `plan` in mode `plan` and approves it: the model then answers in `build` as the
/// script says ([`script`]). Returns the session and the approval's outcome.
async fn approved_then(s: &Setup, plan: &str) -> (Session, RunOutcome) {
    s.ws.plan("p.md", plan);
    let mut session = s.session().await;
    let outcome = session.send_message("plan it").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "{outcome:?}"
    );
    let outcome = session
        .decide("decision_1", agent_controller::Decision::approve())
        .await
        .expect("approve");
    assert_eq!(session.mode().id(), "build");
    (session, outcome)
}

/// The script: the plan's submission, then one reply in `build` with `writes`, then `done`.
fn script(writes: Vec<Call>) -> Vec<Reply> {
    vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        calls(writes),
        text("done"),
    ]
}

/// The audit record `tool_end` carried for call `id`, if any.
fn record_of(
    events: &[agent_controller::Event],
    id: &str,
) -> Option<agent_controller::event::DecidedRecord> {
    events.iter().find_map(|e| match e {
        agent_controller::Event::ToolEnd {
            tool_call_id,
            decision,
            ..
        } if tool_call_id == id => decision.clone(),
        _ => None,
    })
}

/// Under `ask` (the default): the write inside the plan's files runs without asking (an
/// allowance of scope `plan`, named in its audit record and listed with the session's
/// allowances); the write outside waits for approval as drift, saying which file.
#[tokio::test]
async fn under_ask_a_write_inside_runs_unasked_and_one_outside_waits_as_drift() {
    let writes = vec![
        write("w_in", "src/ui/button.rs"),
        write("w_out", "src/main.rs"),
    ];
    let s = Setup::new(None, script(writes)).await;
    let (session, outcome) = approved_then(&s, PLAN).await;
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
        panic!("the write outside waits: {outcome:?}");
    };
    assert!(s.ws.path().join("src/ui/button.rs").exists(), "inside: ran");
    assert!(!s.ws.path().join("src/main.rs").exists(), "outside: waits");
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0].tool_call_id(), "w_out");
    let drift = tool_calls[0].payload().drift.clone().expect("drift");
    assert!(
        drift.contains("`src/main.rs` is outside the approved plan"),
        "{drift}"
    );
    assert!(drift.contains("src/theme.rs, src/ui/**"), "{drift}");
    let record = record_of(&s.recorder.take(), "w_in").expect("audited");
    assert_eq!(record.allowed_by.as_deref(), Some("decision_1"));
    assert_eq!(
        record.decided_by.as_deref(),
        Some("allowance decision_1 (plan)")
    );
    let allowances = session.allowances();
    assert_eq!(allowances.len(), 1, "{allowances:?}");
    assert_eq!(
        allowances[0].scope,
        agent_controller::allowance::AllowanceScope::Plan
    );
    let grant = allowances[0].plan.as_ref().expect("the plan's files");
    assert_eq!(grant.files.entries(), ["src/theme.rs", "src/ui/**"]);
    // `pending` shows the drift beside the call.
    let listed = s
        .store
        .list_pending_decisions()
        .await
        .expect("list")
        .pending;
    assert_eq!(listed[0].drift.as_deref(), Some(drift.as_str()));
}

/// Approving the drift runs the write; the model then finishes.
#[tokio::test]
async fn an_approved_drift_runs() {
    let writes = vec![write("w_out", "src/main.rs")];
    let s = Setup::new(None, script(writes)).await;
    let (mut session, outcome) = approved_then(&s, PLAN).await;
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    let outcome = session
        .decide("decision_2", agent_controller::Decision::approve())
        .await
        .expect("approve the drift");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(s.ws.path().join("src/main.rs").exists());
}

/// Under `enforce`: inside runs unasked; outside is refused without asking, the model told
/// why, and the run goes on.
#[tokio::test]
async fn under_enforce_a_write_outside_is_refused_and_the_model_told_why() {
    let writes = vec![write("w_in", "src/theme.rs"), write("w_out", "src/main.rs")];
    let s = Setup::new(Some("enforce"), script(writes)).await;
    let (_session, outcome) = approved_then(&s, PLAN).await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(s.ws.path().join("src/theme.rs").exists());
    assert!(!s.ws.path().join("src/main.rs").exists());
    let result = s.result_of(2, "w_out").await;
    assert!(
        result.starts_with("Not executed: `src/main.rs` is outside the approved plan"),
        "{result}"
    );
    assert!(result.contains("planScope `enforce`"), "{result}");
}

/// Under `enforce`, a look-alike of a declared path (a Cyrillic `е`) is outside.
#[tokio::test]
async fn a_look_alike_of_a_declared_path_is_outside() {
    let writes = vec![write("w_look", "src/th\u{435}me.rs")];
    let s = Setup::new(Some("enforce"), script(writes)).await;
    let (_session, outcome) = approved_then(&s, PLAN).await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let result = s.result_of(2, "w_look").await;
    assert!(result.contains("is outside the approved plan"), "{result}");
}

/// A declared file that is a symlink to a file the plan did not declare is outside: the path
/// compared is where the write lands, so the approved name cannot carry a write elsewhere.
#[cfg(unix)]
#[tokio::test]
async fn a_declared_path_that_links_to_an_undeclared_file_is_outside() {
    let writes = vec![write("w_link", "src/theme.rs")];
    let s = Setup::new(Some("enforce"), script(writes)).await;
    std::fs::create_dir_all(s.ws.path().join("src")).expect("src");
    std::fs::write(s.ws.path().join("Cargo.toml"), "[package]\n").expect("target");
    std::os::unix::fs::symlink("../Cargo.toml", s.ws.path().join("src/theme.rs")).expect("link");
    let (_session, outcome) = approved_then(&s, PLAN).await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let result = s.result_of(2, "w_link").await;
    assert!(
        result.contains("`Cargo.toml` is outside the approved plan"),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(s.ws.path().join("Cargo.toml")).expect("target"),
        "[package]\n"
    );
}

/// Under `off`, and for a plan without a `## Files` section, approval grants and binds
/// nothing: both writes wait by `requireApproval`, neither as drift.
#[tokio::test]
async fn off_and_a_plan_without_files_grant_and_bind_nothing() {
    for (policy, plan) in [(Some("off"), PLAN), (None, "# T\n\n1. Do it.\n")] {
        let writes = vec![write("w_in", "src/theme.rs"), write("w_out", "src/main.rs")];
        let s = Setup::new(policy, script(writes)).await;
        let (session, outcome) = approved_then(&s, plan).await;
        let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
            panic!("both wait: {outcome:?}");
        };
        assert_eq!(tool_calls.len(), 2, "{policy:?}");
        assert!(tool_calls.iter().all(|c| c.payload().drift.is_none()));
        assert!(session.allowances().is_empty());
    }
}

/// A `deny` rule still wins over the plan's files, and in a mode that asks for nothing a
/// write outside them is held all the same (the plan binds it).
#[tokio::test]
async fn a_deny_rule_wins_and_a_write_outside_is_held_where_nothing_would_ask() {
    let writes = vec![
        write("w_denied", "src/theme.rs"),
        write("w_out", "README.md"),
    ];
    let server = ScriptedServer::start(script(writes)).await;
    let ws = Workspace::new();
    let store = Arc::new(FileStore::open(ws.path().join("st")).expect("store"));
    let controller = AgentController::builder(
        config::parse(&FREE_BUILD.replace("{POLICY}", ""), "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .store(store.clone())
    .build()
    .expect("controller");
    let s = Setup {
        server,
        controller,
        store,
        recorder: Recorder::default(),
        ws,
    };
    let (_session, outcome) = approved_then(&s, PLAN).await;
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = outcome else {
        panic!("the write outside waits: {outcome:?}");
    };
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0].tool_call_id(), "w_out");
    assert!(tool_calls[0].payload().drift.is_some());
    let events = s.recorder.take();
    let denied = record_of(&events, "w_denied").expect("audited");
    assert_eq!(
        denied.outcome,
        Some(agent_controller::event::DecisionOutcome::Rejected)
    );
    assert!(!s.ws.path().join("src/theme.rs").exists());
}

/// The next change of mode ends the plan's allowance: back in `build` after a manual switch,
/// a write waits by `requireApproval`, not as drift.
#[tokio::test]
async fn the_next_mode_change_ends_the_plans_allowance() {
    let s = Setup::new(
        None,
        vec![calls([submit("call_1", ".agent/plans/p.md")]), text("ok")],
    )
    .await;
    s.ws.plan("p.md", PLAN);
    let mut session = s.session().await;
    session.send_message("plan it").await.expect("run");
    session
        .decide("decision_1", agent_controller::Decision::approve())
        .await
        .expect("approve");
    assert_eq!(session.allowances().len(), 1);
    session.switch_mode("plan").await.expect("switch");
    assert!(session.allowances().is_empty(), "ended by the switch");
    session.switch_mode("build").await.expect("switch back");
    assert!(session.allowances().is_empty(), "not given again");
}

/// `CONFIG` with a subagent type that may write, which `build` may start.
const WITH_WORKER: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
{POLICY}

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "subagent"]

[[subagents]]
id = "worker"
name = "Worker"
description = "Writes what it is told."
instructions = "Write the file you are told to."
availableTools = ["read_file", "write_file"]
"#;

/// A subagent started by the mode an approved plan binds is bound by the same plan: under
/// `enforce`, its write outside the plan's files is refused (a child never writes what its
/// parent's mode could not), and one inside runs.
#[tokio::test]
async fn a_subagent_of_the_bound_mode_is_bound_by_the_plan_too() {
    let script = vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        calls([call(
            "sub_1",
            "subagent",
            &json!({ "agentType": "worker", "task": "Write the files." }).to_string(),
        )]),
        calls([write("c_in", "src/theme.rs"), write("c_out", "src/main.rs")]),
        text("child done"),
        text("done"),
    ];
    let s = Setup::with_config(WITH_WORKER, Some("enforce"), script).await;
    let (_session, outcome) = approved_then(&s, PLAN).await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(s.ws.path().join("src/theme.rs").exists(), "inside: ran");
    assert!(
        !s.ws.path().join("src/main.rs").exists(),
        "outside: refused"
    );
    let result = s.result_of(3, "c_out").await;
    assert!(
        result.starts_with("Not executed: `src/main.rs` is outside the approved plan"),
        "{result}"
    );
}

/// A plan that hands over to a mode which plans too (`review`, handing over to `build`).
const CHAINED: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "review"
availableTools = ["read_file", "submit_plan"]
{POLICY}

[[modes]]
id = "review"
transitionsTo = "build"
availableTools = ["read_file", "write_file", "submit_plan", "ask_user"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
"#;

/// The controller's own tools write nothing the plan's files bind: in a mode an approved plan
/// binds, `submit_plan` suspends as a plan (not as drift, nor refused under `enforce`), as the
/// testing kit's reference model says (it found this: a generated config whose planning mode
/// hands over to another planning mode).
#[tokio::test]
async fn a_plan_submitted_in_a_bound_mode_waits_as_a_plan_not_as_drift() {
    for policy in [None, Some("enforce")] {
        let script = vec![
            calls([submit("call_1", ".agent/plans/p.md")]),
            calls([submit("call_2", ".agent/plans/q.md")]),
            text("done"),
        ];
        let s = Setup::with_config(CHAINED, policy, script).await;
        s.ws.plan("p.md", PLAN);
        s.ws.plan("q.md", "# Next\n\n1. Build it.\n");
        let mut session = s.session().await;
        session.send_message("plan it").await.expect("run");
        let outcome = session
            .decide("decision_1", agent_controller::Decision::approve())
            .await
            .expect("approve");
        assert_eq!(session.mode().id(), "review");
        let RunOutcome::Suspended { tool_call_id, .. } = &outcome else {
            panic!("{policy:?}: the plan waits as a plan: {outcome:?}");
        };
        assert_eq!(tool_call_id, "call_2", "{policy:?}");
    }
}
