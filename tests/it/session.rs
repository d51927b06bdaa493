//! Sessions and transitions: the rules of the plan -> approve -> build hand-over, each a test,
//! with exact event order.

use crate::common;

use std::sync::{Arc, Mutex};

use agent_controller::event::{CancelReason, Suspension};
use agent_controller::model::scripted::ReplayModel;
use agent_controller::model::{
    LanguageModel, ModelError, ModelErrorKind, ModelRequest, ModelResponse,
};
use agent_controller::tool::submit_plan::{APPROVAL_NOTE_PREFIX, APPROVED_RESULT, REJECTED_RESULT};
use agent_controller::{
    Decision, Event, RunOutcome, SessionError, SessionOptions, event::DecisionOutcome,
    event::ModeChangeReason, event::RunState, model::Message,
};
use async_trait::async_trait;
use common::{PLAN_BUILD, Recorder, Workspace, controller, kinds, replay};
use serde_json::json;

const PLAN_TEXT: &str = "# Add dark mode\n\n1. Theme setting\n2. Toggle\n";

fn submit(id: &str, path: &str) -> ModelResponse {
    ReplayModel::call(id, "submit_plan", json!({ "path": path }))
}

/// A session in plan mode suspended on `submit_plan`; returns (run id, tool call id).
async fn suspended(
    ws: &Workspace,
    extra: Vec<ModelResponse>,
) -> (
    agent_controller::Session,
    Arc<ReplayModel>,
    Recorder,
    String,
    String,
) {
    let path = ws.plan("p.md", PLAN_TEXT);
    let mut replies = vec![submit("c1", &path)];
    replies.extend(extra);
    let model = replay(replies);
    let controller = controller(PLAN_BUILD, ws, model.clone());
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("Add dark mode").await.expect("run");
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = outcome
    else {
        panic!("must suspend: {outcome:?}");
    };
    (session, model, recorder, run_id.to_string(), tool_call_id)
}

#[tokio::test]
async fn a_new_session_starts_in_the_default_mode_or_the_named_one() {
    let ws = Workspace::new();
    let controller = controller(PLAN_BUILD, &ws, replay(vec![]));
    let recorder = Recorder::default();
    let session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    assert_eq!(session.mode().id(), "build");
    assert_eq!(
        recorder.take(),
        vec![Event::SessionStarted {
            session_id: session.id().into(),
            mode_id: "build".into()
        }]
    );
    let session = controller
        .start_session(SessionOptions::new().mode("plan").id("s-1"))
        .await
        .expect("session");
    assert_eq!((session.mode().id(), session.id()), ("plan", "s-1"));
    let err = controller
        .start_session(SessionOptions::new().mode("Plan"))
        .await
        .expect_err("case-sensitive");
    assert_eq!(
        err,
        SessionError::UnknownMode {
            id: "Plan".into(),
            known: vec!["plan".into(), "build".into()],
        }
    );
    assert_eq!(
        err.to_string(),
        "unknown mode `Plan`: did you mean `plan`? (mode ids are case-sensitive)"
    );
}

#[tokio::test]
async fn manual_switch_emits_mode_changed_and_unknown_or_same_mode_change_nothing() {
    let ws = Workspace::new();
    let controller = controller(PLAN_BUILD, &ws, replay(vec![]));
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    recorder.take();
    assert_eq!(session.switch_mode("plan").await, Ok(true));
    assert_eq!(
        recorder.take(),
        vec![Event::ModeChanged {
            session_id: session.id().into(),
            mode_id: "plan".into(),
            previous_mode_id: "build".into(),
            reason: ModeChangeReason::Manual
        }]
    );
    assert_eq!(session.switch_mode("plan").await, Ok(false));
    assert_eq!(
        session.switch_mode("biuld").await,
        Err(SessionError::UnknownMode {
            id: "biuld".into(),
            known: vec!["plan".into(), "build".into()],
        })
    );
    let unknown = session
        .switch_mode("Build")
        .await
        .expect_err("case-sensitive");
    assert_eq!(
        unknown.to_string(),
        "unknown mode `Build`: did you mean `build`? (mode ids are case-sensitive)"
    );
    let unknown = session
        .switch_mode("review")
        .await
        .expect_err("no such mode");
    assert_eq!(
        unknown.to_string(),
        "unknown mode `review` (modes: plan, build)"
    );
    assert!(
        recorder.take().is_empty(),
        "no event for a no-op or an error"
    );
    assert_eq!(session.mode().id(), "plan");
    // The model is told about the switch.
    assert!(
        matches!(session.messages().last(), Some(Message::System { content }) if content.contains("`build`") && content.contains("`plan`"))
    );
}

#[tokio::test]
async fn approval_hands_over_before_the_next_model_call_with_the_new_modes_prompt_and_tools() {
    let ws = Workspace::new();
    let (mut session, model, recorder, run_id, call_id) =
        suspended(&ws, vec![ReplayModel::text("building")]).await;
    let events = recorder.take();
    assert_eq!(
        kinds(&events),
        [
            "session_started",
            "agent_start",
            "tool_start",
            "tool_suspended",
            "agent_end"
        ]
    );
    let Event::ToolSuspended {
        suspend_payload: Suspension::Plan(suspend_payload),
        tool_name,
        ..
    } = &events[3]
    else {
        unreachable!()
    };
    assert_eq!(tool_name, "submit_plan");
    assert_eq!(suspend_payload.submission.path, ".agent/plans/p.md");
    assert_eq!(suspend_payload.submission.title, "Add dark mode");
    assert_eq!(
        suspend_payload.submission.plan,
        "1. Theme setting\n2. Toggle"
    );
    assert_eq!(suspend_payload.submission.sha256.len(), 64);
    assert_eq!(&*suspend_payload.target_mode_id, "build");
    assert_eq!(
        events[4],
        Event::AgentEnd {
            session_id: session.id().into(),
            run_id: run_id.as_str().into(),
            reason: RunState::Suspended
        }
    );
    assert_eq!(
        session.run_state(),
        Some((run_id.as_str(), RunState::Suspended))
    );

    let outcome = session
        .resume(&run_id, &call_id, Decision::approve())
        .await
        .expect("approve");
    assert!(matches!(outcome, RunOutcome::Completed { ref text, .. } if text == "building"));
    let events = recorder.take();
    assert_eq!(
        kinds(&events),
        [
            "agent_start",
            "tool_end",
            "mode_changed",
            "assistant_message",
            // The run of the mode the plan handed over to ends: what it did of the plan.
            "plan_report",
            "agent_end"
        ]
    );
    let Event::ToolEnd {
        tool_call_id,
        tool_name,
        result,
        is_error: false,
        decision: Some(decision),
        ..
    } = &events[1]
    else {
        panic!("a tool_end with the decision: {:?}", events[1]);
    };
    assert_eq!(
        events[0],
        Event::AgentStart {
            session_id: session.id().into(),
            run_id: run_id.as_str().into(),
            mode_id: "plan".into()
        },
        "the resumed run starts again, with its id, before the hand-over"
    );
    assert_eq!(
        (tool_call_id, tool_name.as_str()),
        (&call_id, "submit_plan")
    );
    assert!(result.starts_with(APPROVED_RESULT), "{result}");
    assert!(
        result.contains("# Add dark mode\n\n1. Theme setting\n2. Toggle"),
        "the approved plan travels in the result: {result}"
    );
    assert_eq!(decision.outcome, Some(DecisionOutcome::Approved));
    assert_eq!(decision.decision_id, "decision_1");
    assert_eq!(
        events[2],
        Event::ModeChanged {
            session_id: session.id().into(),
            mode_id: "build".into(),
            previous_mode_id: "plan".into(),
            reason: ModeChangeReason::PlanApproved
        }
    );
    assert_eq!(session.mode().id(), "build");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].mode_id, "plan");
    assert_eq!(requests[0].tool_names, ["read_file", "submit_plan"]);
    assert!(requests[0].system_prompt.contains("PLAN INSTRUCTIONS"));
    let after = &requests[1];
    assert_eq!(after.mode_id, "build");
    assert!(
        after.system_prompt.contains("BUILD INSTRUCTIONS")
            && !after.system_prompt.contains("PLAN INSTRUCTIONS")
    );
    assert_eq!(
        after.tool_names,
        ["read_file", "list_files", "write_file", "write_plan"]
    );
    // The notice of the change travels in the approval result: no system message after the
    // first (many chat templates refuse one).
    assert!(
        matches!(after.messages.last(), Some(Message::Tool { content, .. }) if content.starts_with(APPROVED_RESULT) && content.contains("now in the Build mode")),
        "{:?}",
        after.messages.last()
    );
    assert!(
        !after
            .messages
            .iter()
            .any(|m| matches!(m, Message::System { .. }))
    );
}

/// A model that logs its calls into the same log as the events, to prove their order.
struct Logging {
    inner: ReplayModel,
    log: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl LanguageModel for Logging {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.log
            .lock()
            .expect("lock")
            .push(format!("model_call:{}", request.mode_id));
        self.inner.generate(request).await
    }
}

#[tokio::test]
async fn mode_changed_comes_before_any_model_call_in_the_new_mode() {
    let ws = Workspace::new();
    let path = ws.plan("p.md", PLAN_TEXT);
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = Arc::new(Logging {
        inner: ReplayModel::new([submit("c1", &path), ReplayModel::text("ok")]),
        log: log.clone(),
    });
    let controller = controller(PLAN_BUILD, &ws, model);
    let sink = log.clone();
    let mut session = controller
        .start_session(
            SessionOptions::new()
                .mode("plan")
                .on_event(move |e| sink.lock().expect("lock").push(e.kind().to_owned())),
        )
        .await
        .expect("session");
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        ..
    } = session.send_message("go").await.expect("run")
    else {
        panic!("suspends")
    };
    session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect("approve");
    let log = log.lock().expect("lock").clone();
    let changed = log
        .iter()
        .position(|l| l == "mode_changed")
        .expect("mode_changed");
    let build_call = log
        .iter()
        .position(|l| l == "model_call:build")
        .expect("model call in build");
    assert!(changed < build_call, "{log:?}");
}

#[tokio::test]
async fn rejection_with_feedback_keeps_the_mode_and_asks_for_a_revision() {
    let ws = Workspace::new();
    let (mut session, model, recorder, run_id, call_id) =
        suspended(&ws, vec![submit("c2", ".agent/plans/p.md")]).await;
    recorder.take();
    let outcome = session
        .resume(&run_id, &call_id, Decision::reject_with("add more tests"))
        .await
        .expect("reject");
    assert!(
        matches!(outcome, RunOutcome::Suspended { ref tool_call_id, .. } if tool_call_id == "c2")
    );
    assert_eq!(session.mode().id(), "plan");
    let events = recorder.take();
    assert!(!kinds(&events).contains(&"mode_changed"));
    assert_eq!(
        events[0],
        Event::AgentStart {
            session_id: session.id().into(),
            run_id: run_id.as_str().into(),
            mode_id: "plan".into()
        },
        "the resumed run starts again"
    );
    let Event::ToolEnd {
        result, is_error, ..
    } = &events[1]
    else {
        panic!("{events:?}")
    };
    assert!(!is_error);
    assert!(
        result.contains("add more tests") && result.contains("submit_plan again"),
        "{result}"
    );
    assert_eq!(
        model.requests()[1].mode_id,
        "plan",
        "the model revises in plan mode"
    );
    assert_eq!(session.pending_plan().map(|p| p.tool_call_id()), Some("c2"));
}

/// `Decision::approve_with` is the Rust form of an approval with a note: the model in the next
/// mode reads the note beside the approved plan, as with `{"action": "approved", "feedback": ...}`.
#[tokio::test]
async fn a_note_given_with_approve_with_reaches_the_model_in_the_next_mode() {
    let ws = Workspace::new();
    let (mut session, model, _recorder, run_id, call_id) =
        suspended(&ws, vec![ReplayModel::text("building")]).await;
    session
        .resume(
            &run_id,
            &call_id,
            Decision::approve_with("also update the docs page"),
        )
        .await
        .expect("approve");
    assert_eq!(session.mode().id(), "build");
    let seen = &model.requests()[1];
    assert_eq!(seen.mode_id, "build");
    let Some(Message::Tool { content, .. }) = seen.messages.last() else {
        panic!("{:?}", seen.messages)
    };
    assert!(content.starts_with(APPROVED_RESULT), "{content}");
    assert!(
        content.contains(&format!("{APPROVAL_NOTE_PREFIX} also update the docs page")),
        "{content}"
    );
}

#[tokio::test]
async fn rejection_without_feedback_ends_the_run_and_keeps_the_mode() {
    let ws = Workspace::new();
    let (mut session, model, recorder, run_id, call_id) = suspended(&ws, vec![]).await;
    recorder.take();
    // Blank feedback counts as none.
    let outcome = session
        .resume(&run_id, &call_id, Decision::reject_with("  "))
        .await
        .expect("reject");
    assert!(matches!(outcome, RunOutcome::Completed { .. }));
    assert_eq!(session.mode().id(), "plan");
    assert_eq!(
        kinds(&recorder.take()),
        ["agent_start", "tool_end", "agent_end"]
    );
    assert_eq!(
        model.requests().len(),
        1,
        "no model call after a rejection without feedback"
    );
    assert!(
        matches!(session.messages().last(), Some(Message::Tool { content, .. }) if content == REJECTED_RESULT)
    );
    assert_eq!(
        session.run_state(),
        Some((run_id.as_str(), RunState::Completed))
    );
    assert!(session.pending_plan().is_none());
}

#[tokio::test]
async fn abort_while_suspended_is_not_approved() {
    let ws = Workspace::new();
    let (mut session, _, recorder, run_id, call_id) = suspended(&ws, vec![]).await;
    recorder.take();
    assert_eq!(session.abort().await, Ok(true));
    assert_eq!(session.mode().id(), "plan");
    let events = recorder.take();
    let Some(Event::ToolSuspensionCancelled {
        decision: Some(decision),
        ..
    }) = events.get(1)
    else {
        panic!("a cancellation with its audit record: {events:?}");
    };
    assert_eq!(decision.outcome, Some(DecisionOutcome::Cancelled));
    assert!(decision.decided_at.is_some() && decision.decided_by.is_none());
    assert_eq!(
        events,
        vec![
            Event::AgentStart {
                session_id: session.id().into(),
                run_id: run_id.as_str().into(),
                mode_id: "plan".into(),
            },
            Event::ToolSuspensionCancelled {
                session_id: session.id().into(),
                run_id: run_id.as_str().into(),
                tool_call_id: call_id.clone(),
                tool_name: "submit_plan".into(),
                reason: CancelReason::Aborted,
                decision: Some(decision.clone()),
            },
            Event::AgentEnd {
                session_id: session.id().into(),
                run_id: run_id.as_str().into(),
                reason: RunState::Aborted
            },
        ]
    );
    assert_eq!(session.abort().await, Ok(false), "nothing left to abort");
    let err = session
        .resume(&run_id, &call_id, Decision::approve())
        .await
        .expect_err("too late");
    assert_eq!(err, SessionError::AlreadyDecided(call_id));
    assert_eq!(session.mode().id(), "plan");
}

#[tokio::test]
async fn a_dismissed_decision_prompt_is_not_approved() {
    let ws = Workspace::new();
    let (mut session, _, _, _run_id, _call_id) = suspended(&ws, vec![]).await;
    // A dismissed prompt decides nothing: the host aborts the run (or leaves it pending).
    assert_eq!(session.abort().await, Ok(true));
    assert_eq!(session.mode().id(), "plan");
    assert!(session.pending_plan().is_none());
}

#[tokio::test]
async fn a_user_message_while_pending_cancels_the_plan_and_keeps_the_mode() {
    let ws = Workspace::new();
    let (mut session, model, recorder, run_id, call_id) =
        suspended(&ws, vec![ReplayModel::text("ok, revising")]).await;
    recorder.take();
    let outcome = session.send_message("actually, wait").await.expect("run");
    assert!(matches!(outcome, RunOutcome::Completed { .. }));
    assert_eq!(session.mode().id(), "plan");
    let events = recorder.take();
    assert_eq!(
        kinds(&events),
        [
            "agent_start",
            "tool_suspension_cancelled",
            "agent_end",
            "agent_start",
            "assistant_message",
            "agent_end"
        ]
    );
    assert!(matches!(
        &events[1],
        Event::ToolSuspensionCancelled {
            reason: CancelReason::UserMessage,
            ..
        }
    ));
    // The model sees a result for the cancelled call before the new message.
    let seen = &model.requests()[1].messages;
    assert!(
        matches!(&seen[seen.len() - 2], Message::Tool { tool_call_id, content, .. } if *tool_call_id == call_id && content.contains("not approved"))
    );
    assert_eq!(
        session.resume(&run_id, &call_id, Decision::approve()).await,
        Err(SessionError::AlreadyDecided(call_id))
    );
}

#[tokio::test]
async fn a_manual_switch_while_pending_cancels_the_suspension_first() {
    let ws = Workspace::new();
    let (mut session, _, recorder, _, _) = suspended(&ws, vec![]).await;
    recorder.take();
    assert_eq!(session.switch_mode("build").await, Ok(true));
    assert_eq!(
        kinds(&recorder.take()),
        [
            "agent_start",
            "tool_suspension_cancelled",
            "agent_end",
            "mode_changed"
        ]
    );
    assert!(session.pending_plan().is_none());
}

#[tokio::test]
async fn bad_decisions_are_typed_errors_that_change_nothing() {
    let ws = Workspace::new();
    let (mut session, _, recorder, run_id, call_id) =
        suspended(&ws, vec![ReplayModel::text("ok")]).await;
    recorder.take();
    let before = (
        session.mode().id().to_owned(),
        session.pending_plan().cloned(),
        session.messages().len(),
    );
    let cases: Vec<(Result<RunOutcome, SessionError>, SessionError)> = vec![
        (
            session.resume("run_9", &call_id, Decision::approve()).await,
            SessionError::UnknownRun("run_9".into()),
        ),
        (
            session.resume(&run_id, "c9", Decision::approve()).await,
            SessionError::UnknownToolCall {
                run_id: run_id.clone(),
                tool_call_id: "c9".into(),
            },
        ),
        (
            session
                .resume_json(&run_id, &call_id, &json!({ "action": "approve" }))
                .await,
            SessionError::MalformedDecision(String::new()),
        ),
        (
            session
                .resume_json(
                    &run_id,
                    &call_id,
                    &json!({ "action": "approved", "extra": 1 }),
                )
                .await,
            SessionError::MalformedDecision(String::new()),
        ),
        (
            session
                .resume(
                    &run_id,
                    &call_id,
                    Decision::approve().with_sha256("00".repeat(32)),
                )
                .await,
            SessionError::Sha256Mismatch {
                expected: String::new(),
                given: String::new(),
            },
        ),
    ];
    for (got, want) in cases {
        let err = got.expect_err("refused");
        assert_eq!(
            std::mem::discriminant(&err),
            std::mem::discriminant(&want),
            "{err}"
        );
        if let SessionError::MalformedDecision(m) = &err {
            assert!(!m.is_empty());
        } else if !matches!(want, SessionError::Sha256Mismatch { .. }) {
            assert_eq!(err, want);
        }
    }
    assert!(recorder.take().is_empty(), "no events");
    assert_eq!(
        (
            session.mode().id().to_owned(),
            session.pending_plan().cloned(),
            session.messages().len()
        ),
        before
    );
    // Still suspended, and can still be decided, once, with the right hash.
    let sha = session
        .pending_plan()
        .expect("pending")
        .payload()
        .submission
        .sha256
        .clone();
    session
        .resume_json(
            &run_id,
            &call_id,
            &json!({ "action": "approved", "sha256": sha }),
        )
        .await
        .expect("approve");
    assert_eq!(session.mode().id(), "build");
    recorder.take();
    let err = session
        .resume(&run_id, &call_id, Decision::approve())
        .await
        .expect_err("second decision");
    assert_eq!(err, SessionError::AlreadyDecided(call_id));
    assert!(recorder.take().is_empty(), "no second switch");
    assert_eq!(session.mode().id(), "build");
}

#[tokio::test]
async fn a_decision_for_a_finished_run_is_refused() {
    let ws = Workspace::new();
    let controller = controller(PLAN_BUILD, &ws, replay(vec![ReplayModel::text("hi")]));
    let mut session = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    session.send_message("hello").await.expect("run");
    assert_eq!(
        session.resume("run_1", "c1", Decision::approve()).await,
        Err(SessionError::NotSuspended("run_1".into()))
    );
}

#[tokio::test]
async fn tools_outside_the_mode_are_not_offered_and_not_executed() {
    let ws = Workspace::new();
    std::fs::write(ws.path().join("a.txt"), "hello").expect("write");
    let model = replay(vec![
        ModelResponse {
            text: String::new(),
            tool_calls: vec![
                agent_controller::tool::ToolCall {
                    id: "r".into(),
                    name: "read_file".into(),
                    args: json!({ "path": "a.txt" }),
                },
                agent_controller::tool::ToolCall {
                    id: "w".into(),
                    name: "write_file".into(),
                    args: json!({ "path": "pwned.txt", "content": "x" }),
                },
                agent_controller::tool::ToolCall {
                    id: "n".into(),
                    name: "no_such_tool".into(),
                    args: json!({}),
                },
            ],
            ..ModelResponse::default()
        },
        ReplayModel::call(
            "w2",
            "write_file",
            json!({ "path": "pwned2.txt", "content": "x" }),
        ),
        ReplayModel::text("done"),
    ]);
    let controller = controller(PLAN_BUILD, &ws, model.clone());
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    session.send_message("look around").await.expect("run");
    assert!(!ws.path().join("pwned.txt").exists() && !ws.path().join("pwned2.txt").exists());
    let ends: Vec<(String, bool)> = recorder
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolEnd {
                tool_call_id,
                is_error,
                ..
            } => Some((tool_call_id, is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        [
            ("r".into(), false),
            ("w".into(), true),
            ("n".into(), true),
            ("w2".into(), true)
        ]
    );
    for request in model.requests() {
        assert_eq!(request.tool_names, ["read_file", "submit_plan"]);
    }
    assert_eq!(session.mode().id(), "plan");
}

#[tokio::test]
async fn calls_after_a_suspending_submit_plan_are_not_executed() {
    let ws = Workspace::new();
    let path = ws.plan("p.md", PLAN_TEXT);
    let model = replay(vec![ModelResponse {
        text: String::new(),
        tool_calls: vec![
            agent_controller::tool::ToolCall {
                id: "s".into(),
                name: "submit_plan".into(),
                args: json!({ "path": path }),
            },
            agent_controller::tool::ToolCall {
                id: "r".into(),
                name: "read_file".into(),
                args: json!({ "path": "p" }),
            },
        ],
        ..ModelResponse::default()
    }]);
    let controller = controller(PLAN_BUILD, &ws, model);
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("go").await.expect("run");
    assert!(matches!(outcome, RunOutcome::Suspended { .. }));
    let events = recorder.take();
    assert!(events.iter().any(
        |e| matches!(e, Event::ToolEnd { tool_call_id, is_error: true, .. } if tool_call_id == "r")
    ));
}

#[tokio::test]
async fn the_submit_plan_description_names_the_mode_it_hands_over_to() {
    let ws = Workspace::new();
    let chain = common::read_fixture("configs/valid/chain.toml");
    let controller = controller(&chain, &ws, replay(vec![]));
    let graph = controller.modes();
    for (from, to) in graph.transition_edges() {
        let spec = controller
            .tool_specs(from)
            .iter()
            .find(|s| &*s.name == "submit_plan")
            .expect("submit_plan offered in a planning mode");
        let target = graph.mode(to).id();
        assert!(
            spec.description.contains(&format!("`{target}`")),
            "{}: {}",
            graph.mode(from).id(),
            spec.description
        );
    }
    let build = graph.get("build").expect("build");
    assert!(
        controller
            .tool_specs(build)
            .iter()
            .all(|s| &*s.name != "submit_plan"),
        "not a planning mode"
    );
}

#[tokio::test]
async fn a_model_error_ends_the_run_with_error_and_keeps_the_session_usable() {
    let ws = Workspace::new();
    let model = replay(vec![]);
    model.push(Err(ModelError::new("503 from provider")));
    model.push(Ok(ReplayModel::text("back")));
    let controller = controller(PLAN_BUILD, &ws, model);
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("go").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Failed { ref error, .. } if error.message().contains("503") && error.kind() == ModelErrorKind::Other)
    );
    assert_eq!(kinds(&recorder.take())[2..], ["error", "agent_end"]);
    assert_eq!(session.mode().id(), "plan");
    let outcome = session.send_message("again").await.expect("run");
    assert!(matches!(outcome, RunOutcome::Completed { .. }));
}

#[tokio::test]
async fn a_model_that_never_stops_calling_tools_hits_the_step_limit() {
    let ws = Workspace::new();
    let model = replay(
        (0..10)
            .map(|i| ReplayModel::call(&format!("c{i}"), "read_file", json!({ "path": "x" })))
            .collect(),
    );
    let controller = agent_controller::AgentController::builder(common::graph(PLAN_BUILD), model)
        .tools(agent_controller::ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .max_steps(3)
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("loop").await.expect("run");
    let RunOutcome::Failed { error, .. } = outcome else {
        panic!("expected the step limit, got {outcome:?}");
    };
    assert_eq!(
        error.kind(),
        agent_controller::model::ModelErrorKind::StepLimit
    );
    assert_eq!(
        error.to_string(),
        "the run exceeded its limit of 3 model calls"
    );
}

/// A session can run with its own model and its own step limit; other sessions of the same
/// controller keep the controller's.
#[tokio::test]
async fn a_session_can_override_the_model_and_the_step_limit() {
    let ws = Workspace::new();
    let looping = || {
        replay(
            (0..10)
                .map(|i| ReplayModel::call(&format!("c{i}"), "read_file", json!({ "path": "x" })))
                .collect(),
        )
    };
    let controller =
        agent_controller::AgentController::builder(common::graph(PLAN_BUILD), looping())
            .tools(agent_controller::ToolRegistry::with_workspace_tools())
            .workspace(ws.path())
            .max_steps(5)
            .build()
            .expect("controller");

    let mut limited = controller
        .start_session(SessionOptions::new().max_steps(2))
        .await
        .expect("session");
    let outcome = limited.send_message("loop").await.expect("run");
    let RunOutcome::Failed { error, .. } = outcome else {
        panic!("expected the step limit, got {outcome:?}");
    };
    assert_eq!(
        error.to_string(),
        "the run exceeded its limit of 2 model calls"
    );

    let mut own_model = controller
        .start_session(SessionOptions::new().model(replay(vec![ReplayModel::text("mine")])))
        .await
        .expect("session");
    let outcome = own_model.send_message("hi").await.expect("run");
    assert!(
        matches!(&outcome, RunOutcome::Completed { text, .. } if text == "mine"),
        "{outcome:?}"
    );

    let mut plain = controller
        .start_session(SessionOptions::new())
        .await
        .expect("session");
    let outcome = plain.send_message("loop").await.expect("run");
    let RunOutcome::Failed { error, .. } = outcome else {
        panic!("expected the step limit, got {outcome:?}");
    };
    assert_eq!(
        error.to_string(),
        "the run exceeded its limit of 5 model calls"
    );
}

/// `plan` may hand over to `build` (the first: a plain approval) or `build-auto`.
const PLAN_CHOICE: &str = r#"
[[modes]]
id = "plan"
transitionsTo = ["build", "build-auto"]
availableTools = ["read_file", "submit_plan"]

[[modes]]
id = "build"
default = true

[[modes]]
id = "build-auto"
name = "Build (auto-accept edits)"
"#;

/// A session of PLAN_CHOICE in `plan`, suspended on a plan; the model then answers `replies`.
async fn suspended_with_choice(
    ws: &Workspace,
    replies: Vec<ModelResponse>,
) -> (agent_controller::Session, Arc<ReplayModel>, Recorder) {
    let path = ws.plan("p.md", PLAN_TEXT);
    let mut script = vec![submit("c1", &path)];
    script.extend(replies);
    let model = replay(script);
    let controller = controller(PLAN_CHOICE, ws, model.clone());
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("Add dark mode").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "{outcome:?}"
    );
    (session, model, recorder)
}

#[tokio::test]
async fn the_suspend_payload_lists_every_target_and_a_plain_approval_goes_to_the_first() {
    let ws = Workspace::new();
    let (mut session, model, recorder) =
        suspended_with_choice(&ws, vec![ReplayModel::text("building")]).await;
    let events = recorder.take();
    let Some(Event::ToolSuspended {
        suspend_payload: Suspension::Plan(suspend_payload),
        ..
    }) = events
        .iter()
        .find(|e| matches!(e, Event::ToolSuspended { .. }))
    else {
        panic!("tool_suspended: {events:?}")
    };
    assert_eq!(&*suspend_payload.target_mode_id, "build");
    let shown = serde_json::to_value(suspend_payload).expect("json");
    assert_eq!(shown["targetModeIds"], json!(["build", "build-auto"]));
    let pending = session.pending_plan().expect("pending");
    assert_eq!(pending.targets().len(), 2);
    assert_eq!(pending.targets()[0], pending.target());
    assert_eq!(
        pending.payload().target_mode_ids,
        ["build".into(), "build-auto".into()]
    );
    // The planning mode's prompt tells the model about the choice.
    let prompt = &model.requests()[0].system_prompt;
    assert!(
        prompt.contains("Build (auto-accept edits) (`build-auto`)"),
        "{prompt}"
    );
    let decision_id = pending.decision_id().to_owned();
    session
        .decide(&decision_id, Decision::approve())
        .await
        .expect("approve");
    assert_eq!(session.mode().id(), "build");
    assert_eq!(
        session.decision_history()[0].target_mode_id.as_deref(),
        Some("build")
    );
}

#[tokio::test]
async fn an_approval_to_a_listed_target_hands_over_there_and_tells_the_model() {
    let ws = Workspace::new();
    let (mut session, model, recorder) =
        suspended_with_choice(&ws, vec![ReplayModel::text("building")]).await;
    recorder.take();
    let decision_id = session
        .pending_plan()
        .expect("pending")
        .decision_id()
        .to_owned();
    session
        .decide(&decision_id, Decision::approve().to("build-auto"))
        .await
        .expect("approve");
    assert_eq!(session.mode().id(), "build-auto");
    let events = recorder.take();
    assert_eq!(
        kinds(&events),
        [
            "agent_start",
            "tool_end",
            "mode_changed",
            "assistant_message",
            // The run of the mode the plan handed over to ends: what it did of the plan.
            "plan_report",
            "agent_end"
        ]
    );
    let Some(Event::ToolEnd {
        result, decision, ..
    }) = events.iter().find(|e| matches!(e, Event::ToolEnd { .. }))
    else {
        panic!("tool_end: {events:?}")
    };
    assert!(result.starts_with(APPROVED_RESULT), "{result}");
    assert!(
        result.contains("`build-auto`"),
        "the notice names the chosen mode: {result}"
    );
    let record = decision.as_ref().expect("audit record");
    assert_eq!(record.target_mode_id.as_deref(), Some("build-auto"));
    assert!(events.contains(&Event::ModeChanged {
        session_id: session.id().into(),
        mode_id: "build-auto".into(),
        previous_mode_id: "plan".into(),
        reason: ModeChangeReason::PlanApproved
    }));
    let next = &model.requests()[1];
    assert_eq!(
        next.mode_id, "build-auto",
        "the next model call runs in the chosen mode"
    );
}

#[tokio::test]
async fn a_target_outside_the_list_is_refused_and_changes_nothing() {
    let ws = Workspace::new();
    let (mut session, model, recorder) =
        suspended_with_choice(&ws, vec![ReplayModel::text("building")]).await;
    recorder.take();
    let pending = session.pending_plan().cloned().expect("pending");
    let (run_id, call_id) = (
        pending.run_id().to_owned(),
        pending.tool_call_id().to_owned(),
    );
    let messages = session.messages().len();
    for to in ["plan", "nowhere", "", "BUILD", "build\n", "../build"] {
        let err = session
            .resume(&run_id, &call_id, Decision::approve().to(to))
            .await
            .expect_err(to);
        assert_eq!(
            err,
            SessionError::TargetNotAllowed {
                given: to.to_owned(),
                allowed: vec!["build".to_owned(), "build-auto".to_owned()],
            }
        );
        assert!(err.to_string().contains("build, build-auto"), "{err}");
    }
    // A case-only or near miss gets the config loader's hint; it quotes the plan's target,
    // never the id given.
    for (to, hint) in [
        (
            "BUILD",
            ": did you mean `build`? (mode ids are case-sensitive)",
        ),
        (
            "Build-auto",
            ": did you mean `build-auto`? (mode ids are case-sensitive)",
        ),
        ("biuld-auto", ": did you mean `build-auto`?"),
        ("nowhere", ""),
    ] {
        let err = session
            .resume(&run_id, &call_id, Decision::approve().to(to))
            .await
            .expect_err(to);
        assert_eq!(
            err.to_string(),
            format!(
                "mode `{to}` is not a target of the pending plan: approve to one of build, build-auto{hint}"
            )
        );
    }
    let err = session
        .resume(&run_id, &call_id, Decision::reject_with("no").to("build"))
        .await
        .expect_err("a rejection names no target");
    assert!(matches!(err, SessionError::MalformedDecision(_)), "{err}");
    let err = session
        .resume_json(
            &run_id,
            &call_id,
            &json!({ "action": "approved", "targetModeId": 3 }),
        )
        .await
        .expect_err("not a string");
    assert!(matches!(err, SessionError::MalformedDecision(_)), "{err}");
    assert!(recorder.take().is_empty(), "no event");
    assert_eq!(
        session.pending_plan(),
        Some(&pending),
        "still pending, unchanged"
    );
    assert_eq!(session.messages().len(), messages);
    assert_eq!(session.mode().id(), "plan");
    assert_eq!(model.requests().len(), 1, "no model call");
    session
        .resume(&run_id, &call_id, Decision::approve().to("build-auto"))
        .await
        .expect("a listed target");
    assert_eq!(session.mode().id(), "build-auto");
}

/// Every plan submitted in a session is its next revision: the payload carries the revision
/// number, the previous revision's sha256 and a unified diff against it.
/// The diff of a revision needs the `diff` feature.
#[cfg(feature = "diff")]
#[tokio::test]
async fn each_resubmission_is_a_revision_with_the_previous_sha256_and_a_diff() {
    let ws = Workspace::new();
    let first = ws.plan("p.md", PLAN_TEXT);
    let second = ws.plan(
        "p2.md",
        "# Add dark mode\n\n1. Theme setting\n2. Toggle, with tests\n",
    );
    let model = replay(vec![
        submit("c1", &first),
        submit("c2", &second),
        submit("c3", &second),
    ]);
    let controller = controller(PLAN_BUILD, &ws, model);
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    let RunOutcome::Suspended { payload: one, .. } =
        session.send_message("Add dark mode").await.expect("run")
    else {
        panic!("suspends")
    };
    assert_eq!(
        (
            one.revision,
            one.previous_sha256.as_deref(),
            one.diff.as_deref()
        ),
        (1, None, None)
    );
    let shown = serde_json::to_value(&one).expect("json");
    assert!(
        shown.get("previousSha256").is_none() && shown.get("diff").is_none(),
        "{shown}"
    );

    let RunOutcome::Suspended { payload: two, .. } = session
        .decide(&one.decision_id, Decision::reject_with("test the toggle"))
        .await
        .expect("revise")
    else {
        panic!("suspends again")
    };
    assert_eq!(two.revision, 2);
    assert_eq!(
        two.previous_sha256.as_deref(),
        Some(one.submission.sha256.as_str())
    );
    let diff = two.diff.as_deref().expect("a diff");
    assert!(
        diff.starts_with("--- revision 1\n+++ revision 2\n@@ "),
        "{diff}"
    );
    assert!(
        diff.contains("\n-2. Toggle\n+2. Toggle, with tests\n"),
        "{diff}"
    );
    assert!(
        diff.contains("\n # Add dark mode\n"),
        "context lines: {diff}"
    );
    let shown = serde_json::to_value(&two).expect("json");
    assert_eq!(shown["revision"], 2);
    assert_eq!(shown["previousSha256"], json!(one.submission.sha256));
    assert_eq!(shown["diff"], json!(diff));

    // The same text again: a new revision with an empty diff.
    let RunOutcome::Suspended { payload: three, .. } = session
        .decide(&two.decision_id, Decision::reject_with("again"))
        .await
        .expect("revise")
    else {
        panic!("suspends again")
    };
    assert_eq!(three.revision, 3);
    assert_eq!(
        three.previous_sha256.as_deref(),
        Some(two.submission.sha256.as_str())
    );
    assert_eq!(three.diff.as_deref(), Some(""));
    // The pending record carries the same payload.
    assert_eq!(session.pending_plan().expect("pending").payload(), &three);
}

/// Arguments a model sends that are not a JSON object (a string, an array, a broken JSON text
/// kept as a string) are refused before any tool runs, saying so: a tool never sees them, and
/// the model is not told a misleading "missing argument".
#[tokio::test]
async fn arguments_that_are_not_a_json_object_are_refused_before_any_tool_runs() {
    let ws = Workspace::new();
    let plan = ws.plan("p.md", "# P\n\n1. x\n");
    for (tool, args) in [
        ("write_file", json!("pwned.txt")),
        ("write_file", json!(["pwned.txt", "x"])),
        (
            "write_file",
            json!("{\"path\": \"pwned.txt\", \"content\": "),
        ),
        ("submit_plan", json!([plan.clone()])),
    ] {
        let model = replay(vec![
            ReplayModel::call("c1", tool, args.clone()),
            ReplayModel::text("done"),
        ]);
        let controller = controller(PLAN_BUILD, &ws, model);
        let mut session = controller
            .start_session(SessionOptions::new().mode(if tool == "submit_plan" {
                "plan"
            } else {
                "build"
            }))
            .await
            .expect("session");
        session.send_message("go").await.expect("run");
        let result = session.messages().iter().find_map(|m| match m {
            Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        });
        let (content, is_error) = result.expect("a tool result");
        assert!(is_error, "{tool} {args}: {content}");
        assert!(
            content.contains("not a JSON object"),
            "{tool} {args}: {content}"
        );
        assert!(!ws.path().join("pwned.txt").exists(), "{tool} {args}");
    }
}
