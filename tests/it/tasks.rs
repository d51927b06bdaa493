//! The task tools (issue 38): `task_write`, `task_update`, `task_complete` and `task_check`,
//! built in with Mastra's inputs. The list is the session's: every change comes in a
//! `tasks_updated` event with the whole list, it is saved in the session record and back after
//! a restart, and an approved plan's numbered steps seed it. Bad input (two tasks in progress,
//! repeated or unknown ids, 10,000 entries, 10 MB of content) is an error result for the model,
//! the list stays as it was and the session goes on. Driven by the real `OpenAiModel` against
//! the scripted OpenAI-compatible server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::tool::tasks::{Task, TaskStatus};
use agent_controller::{
    AgentController, Decision, Event, FileStore, RunOutcome, Session, SessionStore, ToolRegistry,
    config,
};
use common::openai_server::{Reply, ScriptedServer, call, calls, submit, text, tool_names};
use common::{Recorder, Workspace};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "task_write", "task_update", "task_complete", "task_check"]

[[modes]]
id = "bare"
availableTools = ["read_file"]
"#;

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    recorder: Recorder,
    ws: Workspace,
}

impl Setup {
    async fn new(script: Vec<Reply>, store: Option<Arc<dyn SessionStore>>) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let controller = controller(&server, &ws, store);
        Self {
            server,
            controller,
            recorder: Recorder::default(),
            ws,
        }
    }

    async fn session(&self, mode: &str) -> Session {
        self.controller
            .start_session(self.recorder.options().mode(mode))
            .await
            .expect("session")
    }

    /// The `tool` message contents of the `n`-th request (0-based).
    async fn tool_results(&self, n: usize) -> Vec<String> {
        self.server.tool_results(n).await
    }

    /// Every `tasks_updated` event so far, as JSON.
    fn updates(&self) -> Vec<Value> {
        self.recorder
            .take()
            .iter()
            .filter(|e| e.kind() == "tasks_updated")
            .map(|e| serde_json::to_value(e).expect("json"))
            .collect()
    }
}

fn controller(
    server: &ScriptedServer,
    ws: &Workspace,
    store: Option<Arc<dyn SessionStore>>,
) -> AgentController {
    let mut builder = AgentController::builder(
        config::parse(CONFIG, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path());
    if let Some(store) = store {
        builder = builder.store(store);
    }
    builder.build().expect("controller")
}

fn tool(id: &str, name: &str, args: Value) -> Reply {
    calls([call(id, name, &args.to_string())])
}

fn statuses(tasks: &[Task]) -> Vec<(&str, TaskStatus)> {
    tasks.iter().map(|t| (t.id.as_str(), t.status)).collect()
}

fn completed(outcome: &RunOutcome) -> bool {
    matches!(outcome, RunOutcome::Completed { .. })
}

#[tokio::test]
async fn the_model_writes_updates_completes_and_checks_its_list_and_each_result_reaches_it() {
    let s = Setup::new(
        vec![
            tool(
                "call_1",
                "task_write",
                json!({"tasks": [
                    {"content": "Read the code", "status": "in_progress", "activeForm": "Reading the code"},
                    {"id": "tests", "content": "Write the tests", "status": "pending"},
                ]}),
            ),
            tool(
                "call_2",
                "task_update",
                json!({"id": "tests", "status": "in_progress"}),
            ),
            tool("call_3", "task_complete", json!({"id": "tests"})),
            tool("call_4", "task_check", json!({})),
            text("done"),
        ],
        None,
    )
    .await;
    let mut session = s.session("build").await;
    let outcome = session.send_message("fix it").await.expect("run");
    assert!(completed(&outcome), "{outcome:?}");
    // The model is offered the four tools, and each request carries the result before it.
    let bodies = s.server.bodies().await;
    let offered = tool_names(&bodies[0]);
    for name in ["task_write", "task_update", "task_complete", "task_check"] {
        assert!(offered.iter().any(|n| n == name), "{name}: {offered:?}");
    }
    let written = s.tool_results(1).await;
    assert!(
        written[0].contains("task_read_the_code: Read the code"),
        "a minted id is told to the model: {written:?}"
    );
    assert!(written[0].contains("tests: Write the tests"), "{written:?}");
    let updated = s.tool_results(2).await;
    assert!(updated[1].contains("[~] tests"), "{updated:?}");
    let checked = s.tool_results(4).await;
    assert!(
        checked[3].contains("[1/2 completed]"),
        "task_check reads the list as it is: {checked:?}"
    );
    assert!(
        checked[3].contains("task_read_the_code (pending)"),
        "{checked:?}"
    );
    // Setting `tests` in progress put the task in progress before it back to pending.
    assert_eq!(
        statuses(session.tasks()),
        [
            ("task_read_the_code", TaskStatus::Pending),
            ("tests", TaskStatus::Completed)
        ]
    );
    // Each change is a `tasks_updated` event with the whole list, camelCase; a check is none.
    let updates = s.updates();
    assert_eq!(updates.len(), 3, "{updates:?}");
    assert_eq!(updates[0]["type"], "tasks_updated");
    assert_eq!(updates[0]["runId"], "run_1");
    assert_eq!(
        updates[0]["tasks"],
        json!([
            {"id": "task_read_the_code", "content": "Read the code", "status": "in_progress", "activeForm": "Reading the code"},
            {"id": "tests", "content": "Write the tests", "status": "pending", "activeForm": "Write the tests"},
        ])
    );
    assert_eq!(updates[1]["tasks"][0]["status"], "pending");
    assert_eq!(updates[1]["tasks"][1]["status"], "in_progress");
    assert_eq!(updates[2]["tasks"][1]["status"], "completed");
}

#[tokio::test]
async fn bad_lists_and_ids_get_error_results_the_list_stays_and_the_session_goes_on() {
    let two_in_progress = json!({"tasks": [
        {"id": "a", "content": "A", "status": "in_progress"},
        {"id": "b", "content": "B", "status": "in_progress"},
    ]});
    let repeated = json!({"tasks": [
        {"id": "a", "content": "A", "status": "pending"},
        {"id": "a", "content": "B", "status": "pending"},
    ]});
    let many: Vec<Value> = (0..10_000)
        .map(|k| json!({"content": format!("task {k}"), "status": "pending"}))
        .collect();
    // 1 MB here (the provider refuses a reply over 8 MB before any tool sees it; the pure rules
    // refuse 10 MB the same way: `machine::tasks` unit tests).
    let huge = json!({"tasks": [{"content": "x".repeat(1024 * 1024), "status": "pending"}]});
    let s = Setup::new(
        vec![
            tool(
                "call_0",
                "task_write",
                json!({"tasks": [{"id": "keep", "content": "Keep me", "status": "pending"}]}),
            ),
            tool("call_1", "task_write", two_in_progress),
            tool("call_2", "task_write", repeated),
            tool(
                "call_3",
                "task_update",
                json!({"id": "nope", "status": "completed"}),
            ),
            tool("call_4", "task_complete", json!({"id": "nope"})),
            tool("call_5", "task_write", json!({ "tasks": many })),
            tool("call_6", "task_write", huge),
            text("still here"),
        ],
        None,
    )
    .await;
    let mut session = s.session("build").await;
    let outcome = session.send_message("go").await.expect("run");
    assert!(completed(&outcome), "the session goes on: {outcome:?}");
    let results = s.tool_results(7).await;
    assert_eq!(results.len(), 7, "{results:?}");
    assert!(
        results[1].contains("Only one task can be in_progress"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("`a` is given to tasks 1 and 2"),
        "{}",
        results[2]
    );
    for result in &results[3..5] {
        assert!(result.contains("Task not found: `nope`"), "{result}");
        assert!(
            result.contains("`keep`"),
            "the known ids are listed: {result}"
        );
    }
    assert!(results[5].contains("10000"), "{}", &results[5]);
    assert!(
        results[6].len() < 2_000,
        "the refusal does not echo 10 MB back"
    );
    assert!(
        results[6].contains("2000"),
        "the refusal says the bound: {}",
        results[6]
    );
    // Only the first write changed the list.
    assert_eq!(statuses(session.tasks()), [("keep", TaskStatus::Pending)]);
    assert_eq!(s.updates().len(), 1);
}

#[tokio::test]
async fn a_planning_mode_with_no_list_offers_them_and_a_mode_whose_list_lacks_them_does_not() {
    let s = Setup::new(vec![text("planned"), text("bare")], None).await;
    let mut plan = s.session("plan").await;
    plan.send_message("think").await.expect("run");
    let mut bare = s.session("bare").await;
    bare.send_message("look").await.expect("run");
    let bodies = s.server.bodies().await;
    let planning = tool_names(&bodies[0]);
    for name in ["task_write", "task_update", "task_complete", "task_check"] {
        assert!(
            planning.iter().any(|n| n == name),
            "a planning mode with no list offers {name}: they change no file ({planning:?})"
        );
    }
    assert!(!planning.iter().any(|n| n == "write_file"), "{planning:?}");
    assert_eq!(tool_names(&bodies[1]), ["read_file"]);
}

#[tokio::test]
async fn the_list_is_saved_and_back_after_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let store: Arc<dyn SessionStore> =
        Arc::new(FileStore::open(dir.path().join("sessions")).expect("store"));
    let s = Setup::new(
        vec![
            tool(
                "call_1",
                "task_write",
                json!({"tasks": [
                    {"id": "one", "content": "Première étape", "status": "completed"},
                    {"id": "two", "content": "Second", "status": "in_progress", "activeForm": "Doing the second"},
                ]}),
            ),
            text("ok"),
        ],
        Some(store.clone()),
    )
    .await;
    let mut session = s.session("build").await;
    session.send_message("go").await.expect("run");
    let id = session.id().to_owned();
    let before = session.tasks().to_vec();
    drop(session);
    let record = store.load(&id).await.expect("load").expect("saved");
    assert_eq!(record.tasks, before, "the record keeps the list");
    // Another controller on the same store (a restart) has the list back.
    let again = controller(&s.server, &s.ws, Some(store));
    let restored = again
        .restore_session(&id, agent_controller::SessionOptions::new())
        .await
        .expect("restore");
    assert_eq!(restored.tasks(), before.as_slice());
    assert_eq!(restored.tasks()[1].active_form, "Doing the second");
}

const PLAN: &str = "# Add dark mode\n\nWhy: users asked.\n\n1. Add the theme flag\n2) Wire the toggle\n   3. Test both themes\n\n```\n4. not a step\n```\n";

#[tokio::test]
async fn an_approved_plan_seeds_the_list_of_a_mode_that_offers_the_task_tools() {
    let ws_plan = "add-dark-mode.md";
    let s = Setup::new(
        vec![
            calls([submit("call_1", &format!(".agent/plans/{ws_plan}"))]),
            tool("call_2", "task_complete", json!({"id": "step_1"})),
            text("built"),
        ],
        None,
    )
    .await;
    s.ws.plan(ws_plan, PLAN);
    let mut session = s.session("plan").await;
    let outcome = session.send_message("dark mode").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "{outcome:?}"
    );
    assert!(session.tasks().is_empty());
    s.recorder.take();
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    assert!(completed(&outcome), "{outcome:?}");
    let updates: Vec<Event> = s
        .recorder
        .take()
        .into_iter()
        .filter(|e| e.kind() == "tasks_updated")
        .collect();
    assert_eq!(updates.len(), 2, "seeded, then completed: {updates:?}");
    let Event::TasksUpdated { tasks, .. } = &updates[0] else {
        panic!("tasks_updated");
    };
    let seeded: Vec<(&str, &str, TaskStatus)> = tasks
        .iter()
        .map(|t| (t.id.as_str(), t.content.as_str(), t.status))
        .collect();
    assert_eq!(
        seeded,
        [
            ("step_1", "Add the theme flag", TaskStatus::Pending),
            ("step_2", "Wire the toggle", TaskStatus::Pending),
            ("step_3", "Test both themes", TaskStatus::Pending),
        ]
    );
    // The approval's result tells the model the steps are its list.
    let results = s.tool_results(1).await;
    assert!(
        results[0].contains("3 numbered steps are now your task list"),
        "{results:?}"
    );
    assert_eq!(session.tasks()[0].status, TaskStatus::Completed);
}

/// Trial 5 (M2): a plan of more steps than a list holds seeds the first ones, and the
/// approval's result says how many the plan has and that the rest are not in the list; a step
/// cut at the bound ends in `…` and is named. Before, the model read "The plan's 200
/// numbered steps" of a plan of 250, and a cut step carried no mark.
#[tokio::test]
async fn a_plan_longer_than_the_list_says_what_was_left_out_and_cut() {
    let mut plan = String::from("# Many\n\n");
    plan.push_str(&format!("1. {}\n", "x".repeat(5_000)));
    for k in 2..=250 {
        plan.push_str(&format!("{k}. step {k}\n"));
    }
    let s = Setup::new(
        vec![
            calls([submit("call_1", ".agent/plans/many.md")]),
            text("built"),
        ],
        None,
    )
    .await;
    s.ws.plan("many.md", &plan);
    let mut session = s.session("plan").await;
    session.send_message("go").await.expect("run");
    session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    assert_eq!(session.tasks().len(), 200);
    assert!(session.tasks()[0].content.ends_with('…'));
    assert_eq!(session.tasks()[0].content.chars().count(), 2_000);
    let results = s.tool_results(1).await;
    let told = &results[0];
    assert!(
        told.contains("Only the first 200 of the plan's 250 numbered steps are now your task list"),
        "{told}"
    );
    assert!(
        told.contains(
            "The plan's other 50 numbered steps (from its step number 201 on) are not in the list"
        ),
        "{told}"
    );
    assert!(
        told.contains("The text of `step_1` was cut at 2000 characters"),
        "{told}"
    );
}

#[tokio::test]
async fn a_plan_approved_into_a_mode_without_the_task_tools_seeds_nothing() {
    const NO_TASKS: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file"]
"#;
    let server = ScriptedServer::start(vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        text("built"),
    ])
    .await;
    let ws = Workspace::new();
    ws.plan("p.md", PLAN);
    let controller = AgentController::builder(
        config::parse(NO_TASKS, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    session.send_message("go").await.expect("run");
    session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    assert!(session.tasks().is_empty());
    assert!(!recorder.kinds().contains(&"tasks_updated"));
}

/// `run` shows each change of the list as a checklist (the task in progress with its
/// `activeForm` and its content, trial 5 L2); `--json` prints `tasks_updated` whole.
#[cfg(feature = "cli")]
#[test]
fn the_cli_shows_the_list_as_a_checklist_and_json_carries_it_whole() {
    use common::cli::world::World;
    use common::cli::{DONE, stdout};
    let script = || {
        vec![
            tool(
                "call_1",
                "task_write",
                json!({"tasks": [
                    {"id": "a", "content": "Read the code", "status": "completed"},
                    {"id": "b", "content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug\u{1b}[2J"},
                    {"id": "c", "content": "Test it", "status": "pending"},
                ]}),
            ),
            text("done"),
        ]
    };
    let world = World::with_config("dir", CONFIG, script());
    let out = world.cli("run", false, &["go"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", common::stderr(&out));
    let shown = stdout(&out);
    assert!(
        shown.contains(
            "tasks (1/3 completed):\n  [x] Read the code (a)\n  [~] Fix the bug — Fixing the bug\\u{1b}[2J (b)\n  [ ] Test it (c)\n"
        ),
        "{shown}"
    );
    // Trial 5 (L11): the tool's result of several lines is shown as lines, as submit_plan's.
    assert!(
        shown.contains(
            "tool task_write ok: Task list written. [1/3 completed]\n  [x] a: Read the code\n  [~] b: Fix the bug\n"
        ),
        "{shown}"
    );
    let world = World::with_config("dir", CONFIG, script());
    let out = world.cli("run", false, &["--json", "go"], None);
    assert_eq!(out.status.code(), Some(DONE), "{}", common::stderr(&out));
    let updated: Vec<Value> = common::json_lines(&out)
        .into_iter()
        .filter(|e| e["type"] == "tasks_updated")
        .collect();
    assert_eq!(updated.len(), 1);
    assert_eq!(
        updated[0]["tasks"][1]["activeForm"],
        "Fixing the bug\u{1b}[2J"
    );
    assert_eq!(updated[0]["tasks"][2]["status"], "pending");
}

/// A mode whose `requireApproval` names a task tool makes its call wait like any tool's; once
/// approved, the call is applied to the list (the path of approved calls), and a rejected one
/// changes nothing.
#[tokio::test]
async fn a_task_call_that_waits_for_approval_changes_the_list_only_once_approved() {
    const GATED: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["task_write", "task_complete"]
requireApproval = ["task_write", "task_complete"]
"#;
    let server = ScriptedServer::start(vec![
        tool(
            "call_1",
            "task_write",
            json!({"tasks": [{"id": "a", "content": "A", "status": "pending"}]}),
        ),
        tool("call_2", "task_complete", json!({"id": "a"})),
        text("done"),
    ])
    .await;
    let ws = Workspace::new();
    let controller = AgentController::builder(
        config::parse(GATED, "modes.toml").expect("config"),
        Arc::new(server.model()),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    let outcome = session.send_message("go").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    assert!(
        session.tasks().is_empty(),
        "nothing changes before the approval"
    );
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    assert_eq!(statuses(session.tasks()), [("a", TaskStatus::Pending)]);
    let outcome = session
        .decide("decision_2", Decision::reject())
        .await
        .expect("reject");
    assert!(completed(&outcome), "{outcome:?}");
    assert_eq!(
        statuses(session.tasks()),
        [("a", TaskStatus::Pending)],
        "a rejected task_complete changes nothing"
    );
    let updates = recorder
        .take()
        .into_iter()
        .filter(|e| e.kind() == "tasks_updated")
        .count();
    assert_eq!(updates, 1);
}

/// Trial F3: a plan without numbered steps, approved into a mode that offers the task tools,
/// replaces the list too: the list written before (for other work) is gone, a `tasks_updated`
/// says so, and the approval's result tells the model its list is empty.
#[tokio::test]
async fn a_plan_without_steps_empties_the_list_it_is_approved_over() {
    let s = Setup::new(
        vec![
            tool(
                "call_1",
                "task_write",
                json!({"tasks": [
                    {"id": "old", "content": "Earlier work", "status": "in_progress", "activeForm": "Working"},
                ]}),
            ),
            calls([submit("call_2", ".agent/plans/prose.md")]),
            text("built"),
        ],
        None,
    )
    .await;
    s.ws.plan(
        "prose.md",
        "# Dark mode\n\nAdd a theme flag, then wire the toggle.\n",
    );
    let mut session = s.session("plan").await;
    session.send_message("go").await.expect("run");
    assert_eq!(session.tasks().len(), 1, "the list written in plan");
    s.recorder.take();
    let outcome = session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    assert!(completed(&outcome), "{outcome:?}");
    assert!(session.tasks().is_empty(), "{:?}", session.tasks());
    let updates = s.updates();
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0]["tasks"], json!([]));
    let results = s.tool_results(2).await;
    let approval = results.last().expect("the approval's result");
    assert!(
        approval.contains("The plan has no numbered steps: your task list is now empty"),
        "{results:?}"
    );
}
