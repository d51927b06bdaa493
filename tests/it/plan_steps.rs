//! Approving some of a plan's steps (issue 40): `Decision::steps` (`"steps": [1, 2, 3, 5]`,
//! `decide --approve --steps 1-3,5`, the terminal's `y 1-3,5`) approves only those steps. The
//! next mode gets the plan shown with the other steps marked as not approved and a line naming
//! both, the task list holds only the approved steps, the approval stays pinned to the plan's
//! sha256, and the decision record (and the stored session) keeps the steps. A list naming
//! steps the plan does not have, twice, none, or with a rejection or an edit is refused and
//! changes nothing. Driven by the real `OpenAiModel` against the scripted OpenAI-compatible
//! server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::store::{FileStore, SessionStore};
use agent_controller::{
    AgentController, Decision, RunOutcome, Session, SessionError, ToolRegistry, config,
};
use common::openai_server::{Reply, ScriptedServer, calls, submit, text};
use common::{Recorder, Workspace};
use serde_json::json;

const CONFIG: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "task_write", "task_update", "task_complete", "task_check"]
"#;

/// Five numbered steps (a fenced `3.` that is no step among them) and a `## Files` section.
const PLAN: &str = "# Dark mode\n\n1. Add the theme.\n2. Use it in the UI.\n\n```\n3. not a step: code\n```\n\n3. Test both themes.\n4. Remove the old colours.\n5. Update the docs.\n\n## Files\n- `src/theme.rs`\n";

/// The mark a step not approved carries in the text the next mode gets.
const MARK: &str = "(NOT APPROVED: do not carry out this step)";

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    store: Arc<FileStore>,
    recorder: Recorder,
    ws: Workspace,
}

impl Setup {
    async fn new(script: Vec<Reply>) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let store = Arc::new(FileStore::open(ws.path().join("st")).expect("store"));
        let controller = AgentController::builder(
            config::parse(CONFIG, "modes.toml").expect("config"),
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

    /// A session in `plan` whose plan ([`PLAN`]) waits for the decision.
    async fn waiting(&self) -> (Session, String) {
        self.ws.plan("p.md", PLAN);
        let mut session = self
            .controller
            .start_session(self.recorder.options().mode("plan"))
            .await
            .expect("session");
        let outcome = session.send_message("dark mode").await.expect("run");
        let RunOutcome::Suspended { payload, .. } = outcome else {
            panic!("suspended: {outcome:?}");
        };
        let plan = payload.submission.sha256.clone();
        (session, plan)
    }
}

fn script() -> Vec<Reply> {
    vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        text("built"),
    ]
}

#[tokio::test]
async fn an_approval_of_some_steps_reaches_the_model_the_task_list_and_the_record() {
    let s = Setup::new(script()).await;
    let (mut session, sha256) = s.waiting().await;
    let outcome = session
        .decide(
            "decision_1",
            Decision::approve()
                .steps(Decision::parse_steps("1-3,5").expect("list"))
                .with_sha256(&sha256),
        )
        .await
        .expect("approve");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(session.mode().id(), "build");

    // The model reads which steps are approved, and the plan with step 4 marked.
    let result = s.server.tool_results(1).await.join("\n");
    assert!(
        result.contains("Approved steps: 1, 2, 3, 5; not approved: 4."),
        "{result}"
    );
    assert!(
        result.contains(&format!("4. {MARK} Remove the old colours.")),
        "{result}"
    );
    for kept in [
        "1. Add the theme.",
        "2. Use it in the UI.",
        "3. not a step: code",
        "3. Test both themes.",
        "5. Update the docs.",
    ] {
        assert!(result.contains(kept), "{kept}: {result}");
    }
    assert_eq!(
        result.matches(MARK).count(),
        2,
        "the line naming it, step 4: {result}"
    );
    assert!(
        result.contains(&format!("end of approved plan {sha256}")),
        "pinned to the plan shown: {result}"
    );
    // The task list holds only the approved steps, and the model is told the others are out.
    let ids: Vec<&str> = session.tasks().iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["step_1", "step_2", "step_3", "step_5"]);
    assert!(
        result.contains("Not approved, so not in the list: the plan's step numbers 4;"),
        "{result}"
    );

    // The record keeps the steps, in the session and in the store.
    let record = session
        .decision_history()
        .iter()
        .find(|r| r.decision_id == "decision_1")
        .expect("record");
    assert_eq!(record.steps, [1, 2, 3, 5]);
    assert_eq!(record.sha256.as_deref(), Some(sha256.as_str()));
    let stored = s
        .store
        .load(session.id())
        .await
        .expect("load")
        .expect("stored");
    let json = serde_json::to_value(&stored).expect("json");
    let decided = json["history"]
        .as_array()
        .expect("history")
        .iter()
        .find(|r| r["decisionId"] == "decision_1")
        .expect("stored record");
    assert_eq!(decided["steps"], json!([1, 2, 3, 5]));
}

#[tokio::test]
async fn an_approval_of_every_step_is_one_of_the_whole_plan() {
    let s = Setup::new(script()).await;
    let (mut session, _) = s.waiting().await;
    session
        .decide("decision_1", Decision::approve().steps([5, 4, 3, 2, 1]))
        .await
        .expect("approve");
    let result = s.server.tool_results(1).await.join("\n");
    assert!(!result.contains(MARK), "{result}");
    assert_eq!(session.tasks().len(), 5);
    assert_eq!(session.decision_history()[0].steps, [1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn step_lists_that_name_no_step_once_are_refused_and_change_nothing() {
    let s = Setup::new(script()).await;
    let (mut session, _) = s.waiting().await;
    let version = session.version();
    for (decision, says) in [
        (Decision::approve().steps([]), "empty"),
        (Decision::approve().steps([0]), "no step 0"),
        (
            Decision::approve().steps([6]),
            "no step 6 (its steps: 1, 2, 3, 4, 5)",
        ),
        (Decision::approve().steps([2, 2]), "step 2 is named twice"),
        (Decision::approve().steps([u64::MAX]), "no step"),
        (Decision::approve().steps(1..=1000), "1000 steps named"),
    ] {
        let err = session
            .decide("decision_1", decision.clone())
            .await
            .expect_err("refused");
        assert!(
            matches!(&err, SessionError::PlanSteps(why) if why.contains(says)),
            "{decision:?}: {err}"
        );
    }
    for (decision, says) in [
        (Decision::reject().steps([1]), "a rejection names no steps"),
        (
            Decision::approve().steps([1]).with_plan("# P\n\n1. One\n"),
            "not both",
        ),
    ] {
        let err = session
            .decide("decision_1", decision.clone())
            .await
            .expect_err("refused");
        assert!(
            matches!(&err, SessionError::MalformedDecision(why) if why.contains(says)),
            "{decision:?}: {err}"
        );
    }
    assert_eq!(session.version(), version, "nothing saved");
    assert_eq!(session.mode().id(), "plan");
    assert!(session.pending_plan().is_some(), "the plan still waits");
    // The JSON form is the same decision.
    let parsed =
        Decision::from_json(&json!({"action": "approved", "steps": [1, 3]})).expect("json");
    assert_eq!(parsed, Decision::approve().steps([1, 3]));
    session
        .decide_json(
            "decision_1",
            &json!({"action": "approved", "steps": [1, 3]}),
        )
        .await
        .expect("approve");
    assert_eq!(session.decision_history()[0].steps, [1, 3]);
}
