//! Choosing the model at approval (issue 23, item 6): `Decision::approve().model(id)` runs the
//! mode the plan hands over to with the model the host's chooser builds for `id`, until the
//! session's next change of mode; the audit record keeps the id; a model the host cannot build
//! is refused before anything changes.

use crate::common;

use std::sync::Arc;

use agent_controller::model::scripted::ReplayModel;
use agent_controller::model::{LanguageModel, ModelChooser};
use agent_controller::{
    AgentController, Decision, MemoryStore, RunOutcome, SessionError, SessionOptions, ToolRegistry,
};
use common::{PLAN_BUILD, Workspace, graph};
use serde_json::json;

/// A chooser that knows `cheap` only, and counts what it built.
struct Cheap {
    model: Arc<ReplayModel>,
    built: std::sync::Mutex<Vec<String>>,
}

impl ModelChooser for Cheap {
    fn build(&self, id: &str) -> Result<Arc<dyn LanguageModel>, String> {
        self.built.lock().expect("lock").push(id.to_owned());
        match id {
            "cheap" => Ok(self.model.clone()),
            other => Err(format!("no model `{other}` here")),
        }
    }
}

struct Setup {
    ws: Workspace,
    main: Arc<ReplayModel>,
    cheap: Arc<ReplayModel>,
    chooser: Arc<Cheap>,
    store: Arc<MemoryStore>,
}

impl Setup {
    fn new(
        main: Vec<agent_controller::ModelResponse>,
        cheap: Vec<agent_controller::ModelResponse>,
    ) -> Self {
        let cheap = Arc::new(ReplayModel::new(cheap));
        Self {
            ws: Workspace::new(),
            main: Arc::new(ReplayModel::new(main)),
            chooser: Arc::new(Cheap {
                model: cheap.clone(),
                built: std::sync::Mutex::default(),
            }),
            cheap,
            store: Arc::new(MemoryStore::new()),
        }
    }

    fn controller(&self) -> AgentController {
        let chooser = self.chooser.clone();
        AgentController::builder(graph(PLAN_BUILD), self.main.clone())
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(self.ws.path())
            .store(self.store.clone())
            .model_chooser(move |id: &str| chooser.build(id))
            .build()
            .expect("controller")
    }
}

fn submit(path: &str) -> agent_controller::ModelResponse {
    ReplayModel::call("c1", "submit_plan", json!({ "path": path }))
}

#[tokio::test]
async fn the_next_mode_runs_with_the_chosen_model_until_the_next_switch() {
    let ws_plan = "# Deploy\n\n1. Build.\n";
    let setup = Setup::new(
        vec![],
        vec![ReplayModel::text("built it"), ReplayModel::text("again")],
    );
    let path = setup.ws.plan("p.md", ws_plan);
    setup.main.push(Ok(submit(&path)));
    let controller = setup.controller();
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    session.send_message("deploy").await.expect("run");
    let id = session.pending()[0].decision_id().to_owned();
    let outcome = session
        .decide(&id, Decision::approve().model("cheap"))
        .await
        .expect("approved");
    assert!(
        matches!(outcome, RunOutcome::Completed { ref text, .. } if text == "built it"),
        "{outcome:?}"
    );
    // The planning mode's call went to the session's model, the build mode's to the chosen one.
    assert_eq!(setup.main.requests().len(), 1);
    let cheap = setup.cheap.requests();
    assert_eq!(cheap.len(), 1);
    assert_eq!(cheap[0].mode_id, "build");
    assert_eq!(session.chosen_model(), Some("cheap"));
    let record = session.decision_history().last().expect("record").clone();
    assert_eq!(record.model.as_deref(), Some("cheap"));
    assert_eq!(record.target_mode_id.as_deref(), Some("build"));
    // A restored session (another process) keeps it, built again by the chooser.
    let session_id = session.id().to_owned();
    drop(session);
    let mut session = setup
        .controller()
        .restore_session(&session_id, SessionOptions::new())
        .await
        .expect("restored");
    assert_eq!(session.chosen_model(), Some("cheap"));
    session.send_message("more").await.expect("run");
    assert_eq!(setup.cheap.requests().len(), 2, "the next run in build too");
    assert_eq!(
        setup.chooser.built.lock().expect("lock").as_slice(),
        ["cheap", "cheap"],
        "built at the approval, and again by the restored session"
    );
    assert_eq!(setup.main.requests().len(), 1);
    // A switch ends it: the session's own model again.
    session.switch_mode("plan").await.expect("switched");
    assert_eq!(session.chosen_model(), None);
    setup.main.push(Ok(ReplayModel::text("planning")));
    session.send_message("plan again").await.expect("run");
    assert_eq!(setup.main.requests().len(), 2);
    assert_eq!(setup.cheap.requests().len(), 2);
}

#[tokio::test]
async fn a_model_the_host_cannot_build_is_refused_and_changes_nothing() {
    let setup = Setup::new(vec![], vec![]);
    let path = setup.ws.plan("p.md", "# P\n\n1. Step.\n");
    setup.main.push(Ok(submit(&path)));
    let controller = setup.controller();
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    session.send_message("go").await.expect("run");
    let id = session.pending()[0].decision_id().to_owned();
    let version = session.version();
    let refused = session
        .decide(&id, Decision::approve().model("gpt-9"))
        .await;
    match refused {
        Err(SessionError::UnknownModel { model, reason }) => {
            assert_eq!(model, "gpt-9");
            assert!(reason.contains("no model `gpt-9` here"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(session.version(), version);
    assert_eq!(session.mode().id(), "plan");
    assert!(session.pending()[0].is_waiting());
    assert!(session.decision_history().is_empty());
    // With a rejection, or on a tool call, a model is malformed.
    let rejected = session.decide(&id, Decision::reject().model("cheap")).await;
    assert!(
        matches!(rejected, Err(SessionError::MalformedDecision(_))),
        "{rejected:?}"
    );
    // Without a chooser every model is refused.
    let bare = common::controller(PLAN_BUILD, &setup.ws, setup.main.clone());
    setup.main.push(Ok(submit(&path)));
    let mut other = bare
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    other.send_message("go").await.expect("run");
    let id = other.pending()[0].decision_id().to_owned();
    let refused = other.decide(&id, Decision::approve().model("cheap")).await;
    assert!(
        matches!(refused, Err(SessionError::UnknownModel { .. })),
        "{refused:?}"
    );
    assert_eq!(other.mode().id(), "plan");
}

/// An approval that names a model and cannot be saved changes nothing: not even the model the
/// session's mode runs with. The model it named was kept for the next mode before the save,
/// and so replaced the one the mode was running with: the next model call in that mode asked
/// the chooser again, and failed once the chooser could no longer build it.
#[tokio::test]
async fn an_approval_that_cannot_be_saved_leaves_the_model_as_it_was() {
    use common::faulty::{Faulty, SAVE_CONFLICTS, SAVE_OK};
    const MODES: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
default = true
transitionsTo = "deploy"
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "deploy"
"#;
    let ws = Workspace::new();
    let plan = ws.plan("p.md", "# Build\n\n1. Build.\n");
    let deploy = ws.plan("d.md", "# Deploy\n\n1. Ship.\n");
    let main = Arc::new(ReplayModel::new([submit(&plan)]));
    let cheap = Arc::new(ReplayModel::new([
        submit(&deploy),
        ReplayModel::text("revised"),
    ]));
    let fast = Arc::new(ReplayModel::new([]));
    let built = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    // Once `closed`, the chooser builds nothing (its credentials are gone).
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let store = Arc::new(Faulty::default());
    let chooser = {
        let (cheap, fast, built, closed) =
            (cheap.clone(), fast.clone(), built.clone(), closed.clone());
        move |id: &str| -> Result<Arc<dyn LanguageModel>, String> {
            built.lock().expect("lock").push(id.to_owned());
            if closed.load(std::sync::atomic::Ordering::SeqCst) {
                return Err("no credentials".to_owned());
            }
            match id {
                "cheap" => Ok(cheap.clone() as Arc<dyn LanguageModel>),
                "fast" => Ok(fast.clone() as Arc<dyn LanguageModel>),
                other => Err(format!("no model `{other}` here")),
            }
        }
    };
    let controller = AgentController::builder(graph(MODES), main.clone())
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(store.clone())
        .model_chooser(chooser)
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    session.send_message("go").await.expect("run");
    let id = session.pending()[0].decision_id().to_owned();
    // Built with `cheap`, which submits the deploy plan.
    let outcome = session
        .decide(&id, Decision::approve().model("cheap"))
        .await
        .expect("approved");
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "{outcome:?}"
    );
    assert_eq!(session.mode().id(), "build");
    assert_eq!(session.chosen_model(), Some("cheap"));
    let id = session.pending()[0].decision_id().to_owned();
    // Approving the deploy plan with `fast` cannot be saved.
    store.set(SAVE_CONFLICTS);
    let version = session.version();
    let failed = session
        .decide(&id, Decision::approve().model("fast"))
        .await
        .expect_err("the save fails");
    assert!(failed.is_conflict(), "{failed:?}");
    assert_eq!(session.version(), version);
    assert_eq!(session.mode().id(), "build");
    assert_eq!(session.chosen_model(), Some("cheap"));
    store.set(SAVE_OK);
    closed.store(true, std::sync::atomic::Ordering::SeqCst);
    // The revision runs in `build` with `cheap`, as before the failed approval.
    let outcome = session
        .decide(&id, Decision::reject_with("smaller steps"))
        .await
        .expect("rejected");
    assert!(
        matches!(outcome, RunOutcome::Completed { ref text, .. } if text == "revised"),
        "{outcome:?}"
    );
    assert_eq!(cheap.requests().len(), 2);
    assert!(fast.requests().is_empty());
    assert_eq!(
        built.lock().expect("lock").as_slice(),
        ["cheap", "fast"],
        "each approval asked the chooser once, and nothing else did"
    );
}

/// Two modes that name their models, `planner` and `cheap`.
const NAMED: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
defaultModelId = "planner"

[[modes]]
id = "build"
default = true
defaultModelId = "cheap"

[[modes]]
id = "review"
defaultModelId = "planner"
"#;

/// Choosing the session's model by hand (issue 36 item 12): the models offered are the
/// controller's own (`AgentControllerBuilder::model_id`) and every mode's `defaultModelId`,
/// each once; a choice outside them is refused and changes nothing; a choice is saved, kept by
/// a restored session, and ends with the mode, as an approval's choice does.
#[tokio::test]
async fn a_model_chosen_by_hand_runs_the_mode_until_it_changes() {
    let ws = Workspace::new();
    let main = Arc::new(ReplayModel::new([
        ReplayModel::text("planned"),
        ReplayModel::text("planned again"),
    ]));
    let other = Arc::new(ReplayModel::new([ReplayModel::text("by main, chosen")]));
    let built = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let store = Arc::new(MemoryStore::new());
    let controller = || {
        let (other, built) = (other.clone(), built.clone());
        AgentController::builder(graph(NAMED), main.clone())
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(ws.path())
            .store(store.clone())
            .model_id("main")
            .model_chooser(move |id: &str| -> Result<Arc<dyn LanguageModel>, String> {
                built.lock().expect("lock").push(id.to_owned());
                match id {
                    "main" => Ok(other.clone() as Arc<dyn LanguageModel>),
                    other => Err(format!("no model `{other}` here")),
                }
            })
            .build()
            .expect("controller")
    };
    let controller = controller();
    assert_eq!(controller.models(), ["main", "planner", "cheap"]);
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    assert_eq!(session.models(), ["main", "planner", "cheap"]);
    assert_eq!(session.model_id(), Some("planner"), "the mode's own");
    assert_eq!(session.chosen_model(), None);
    // Not offered: refused, nothing changes, nothing is built.
    let version = session.version();
    let refused = session.choose_model("gpt-9").await;
    match refused {
        Err(SessionError::UnknownModel { model, reason }) => {
            assert_eq!(model, "gpt-9");
            assert!(
                reason.contains("not offered") && reason.contains("`main`, `planner`, `cheap`"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(session.version(), version);
    assert_eq!(session.model_id(), Some("planner"));
    assert!(built.lock().expect("lock").is_empty());
    // Offered but the chooser cannot build it: refused too, nothing changes.
    let refused = session.choose_model("cheap").await;
    assert!(
        matches!(refused, Err(SessionError::UnknownModel { ref model, .. }) if model == "cheap"),
        "{refused:?}"
    );
    assert_eq!(session.version(), version);
    assert_eq!(session.chosen_model(), None);
    // The mode's own model: nothing to change.
    assert!(!session.choose_model("planner").await.expect("same"));
    assert_eq!(session.version(), version);
    // Chosen and saved: the next call goes to it.
    assert!(session.choose_model("main").await.expect("chosen"));
    assert!(session.version() > version, "saved");
    assert_eq!(session.model_id(), Some("main"));
    assert_eq!(session.chosen_model(), Some("main"));
    session.send_message("hello").await.expect("run");
    assert_eq!(other.requests().len(), 1);
    assert!(main.requests().is_empty());
    // A restored session keeps it.
    let id = session.id().to_owned();
    drop(session);
    let mut session = controller
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restored");
    assert_eq!(session.model_id(), Some("main"));
    // Choosing the mode's own model again ends the choice.
    assert!(session.choose_model("planner").await.expect("back"));
    assert_eq!(session.chosen_model(), None);
    assert_eq!(session.model_id(), Some("planner"));
    session.send_message("again").await.expect("run");
    assert_eq!(main.requests().len(), 1);
    // A change of mode ends a choice: the next mode runs with its own.
    assert!(session.choose_model("main").await.expect("chosen"));
    session.switch_mode("review").await.expect("switched");
    assert_eq!(session.chosen_model(), None);
    assert_eq!(session.model_id(), Some("planner"));
}

/// Without a named controller model, a mode that names none runs with a model that has no id:
/// the session names none, and every choice still goes through the offered list.
#[tokio::test]
async fn a_mode_without_a_model_id_names_none() {
    let ws = Workspace::new();
    let main = Arc::new(ReplayModel::new([]));
    let controller = common::controller(PLAN_BUILD, &ws, main);
    assert!(controller.models().is_empty());
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    assert_eq!(session.model_id(), None);
    let refused = session.choose_model("anything").await;
    assert!(
        matches!(refused, Err(SessionError::UnknownModel { .. })),
        "{refused:?}"
    );
}
