//! Comments anchored to plan lines (issue 23, item 5): a rejection may carry comments on lines
//! of the plan shown; the model receives each with the line it quotes (neutralized, bounded),
//! the audit record keeps them pinned to the plan's sha256, and the next revision shows them
//! again. A line outside the plan, a blank text, or a comment on an approval or a tool call is
//! refused and changes nothing. The property test numbers the lines itself (an oracle apart from
//! the crate's `plan_lines`), so a comment attached to the wrong line is caught.

use crate::common;

use std::sync::Arc;

use agent_controller::comment::{PlanComment, QUOTE_MAX_CHARS, QuotedComment};
use agent_controller::display::neutralize_line_within;
use agent_controller::model::Message;
use agent_controller::model::scripted::ReplayModel;
use agent_controller::{AgentController, Decision, RunOutcome, SessionError, ToolRegistry};
use common::{PLAN_BUILD, Workspace, graph};
use proptest::prelude::*;
use serde_json::json;

const PLAN: &str = "# Deploy\n\n1. Build the image.\n2. Deploy to production.\n3. Tell the team.\n";

fn submit(id: &str, path: &str) -> agent_controller::ModelResponse {
    ReplayModel::call(id, "submit_plan", json!({ "path": path }))
}

fn controller(ws: &Workspace, model: Arc<ReplayModel>) -> AgentController {
    AgentController::builder(graph(PLAN_BUILD), model)
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(Arc::new(agent_controller::MemoryStore::new()))
        .build()
        .expect("controller")
}

/// The tool results the model saw in its requests, last request first.
fn last_tool_result(model: &ReplayModel) -> String {
    let requests = model.requests();
    let last = requests.last().expect("a request");
    last.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .expect("a tool result")
}

#[tokio::test]
async fn a_rejection_with_comments_sends_each_with_its_line_and_asks_for_a_revision() {
    let ws = Workspace::new();
    let first = ws.plan("deploy.md", PLAN);
    let second = ws.plan(
        "deploy-2.md",
        "# Deploy\n\n1. Build the image.\n2. Deploy to staging, then production.\n3. Tell the team.\n",
    );
    let model = Arc::new(ReplayModel::new([
        submit("c1", &first),
        submit("c2", &second),
    ]));
    let controller = controller(&ws, model.clone());
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    session.send_message("deploy").await.expect("run");
    let shown = session.pending_plan().expect("a plan").payload().clone();
    let decision = Decision::reject()
        .comment(4, "staging first")
        .comment(1, " a clearer title ")
        .with_sha256(&shown.submission.sha256);
    let outcome = session
        .decide(&shown.decision_id, decision)
        .await
        .expect("decided");
    // Comments without feedback still ask for a revision: the model submitted the next one.
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "{outcome:?}"
    );
    let result = last_tool_result(&model);
    assert!(
        result.contains("Comments from the user on lines of the plan:"),
        "{result}"
    );
    assert!(
        result.contains("\n- line 4 \"2. Deploy to production.\": staging first"),
        "{result}"
    );
    assert!(
        result.contains("\n- line 1 \"# Deploy\": a clearer title"),
        "{result}"
    );
    // The audit record keeps them with the sha256 of the plan they were made on.
    let record = session.decision_history().last().expect("a record").clone();
    assert_eq!(
        record.sha256.as_deref(),
        Some(shown.submission.sha256.as_str())
    );
    let expected = vec![
        QuotedComment {
            line: 4,
            text: "staging first".to_owned(),
            quote: "2. Deploy to production.".to_owned(),
        },
        QuotedComment {
            line: 1,
            text: "a clearer title".to_owned(),
            quote: "# Deploy".to_owned(),
        },
    ];
    assert_eq!(record.comments, expected);
    // The next revision carries them beside its diff.
    let revision = session
        .pending_plan()
        .expect("revision 2")
        .payload()
        .clone();
    assert_eq!(revision.revision, 2);
    assert_eq!(
        revision.previous_sha256,
        Some(shown.submission.sha256.clone())
    );
    assert_eq!(revision.comments, expected);
    // And so does what the store lists as pending.
    let listed = controller
        .store()
        .expect("a store")
        .list_pending(0)
        .await
        .expect("listed");
    assert_eq!(listed.pending[0].comments, expected);
}

#[tokio::test]
async fn a_comment_outside_the_plan_blank_or_on_an_approval_is_refused_and_changes_nothing() {
    let ws = Workspace::new();
    let path = ws.plan("deploy.md", PLAN);
    let model = Arc::new(ReplayModel::new([submit("c1", &path)]));
    let controller = controller(&ws, model.clone());
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    session.send_message("deploy").await.expect("run");
    let id = session.pending()[0].decision_id().to_owned();
    let version = session.version();
    // The plan shows 5 lines: `# Deploy`, a blank line, three steps.
    for (decision, what) in [
        (Decision::reject().comment(0, "x"), "line 0"),
        (Decision::reject().comment(6, "x"), "past the end"),
        (
            Decision::reject().comment(u64::MAX, "x"),
            "far past the end",
        ),
        (Decision::reject_with("no").comment(3, "  "), "blank"),
    ] {
        let refused = session.decide(&id, decision).await;
        assert!(
            matches!(refused, Err(SessionError::PlanComment(_))),
            "{what}: {refused:?}"
        );
    }
    let approval = session
        .decide(&id, Decision::approve().comment(4, "x"))
        .await;
    assert!(
        matches!(approval, Err(SessionError::MalformedDecision(_))),
        "{approval:?}"
    );
    let json = session
        .decide_json(
            &id,
            &json!({ "action": "rejected", "comments": [{ "line": 4, "text": "x", "quote": "forged" }] }),
        )
        .await;
    assert!(
        matches!(json, Err(SessionError::MalformedDecision(_))),
        "{json:?}"
    );
    assert_eq!(session.version(), version, "nothing was saved");
    assert_eq!(
        session.pending()[0].decision_id(),
        id,
        "the plan still waits"
    );
    assert!(session.decision_history().is_empty());
    assert_eq!(model.requests().len(), 1, "the model was not called again");
    // The last line is line 5.
    // The model has no revision to give: the run fails after the decision is saved.
    session
        .decide(&id, Decision::reject().comment(5, "who?"))
        .await
        .expect("decided");
    let record = session.decision_history().last().expect("decided").clone();
    assert_eq!(record.comments[0].quote, "3. Tell the team.");
}

#[tokio::test]
async fn a_comment_on_a_tool_call_is_refused() {
    let ws = Workspace::new();
    let config = r#"
[[modes]]
id = "build"
default = true
requireApproval = ["write_file"]
"#;
    let model = Arc::new(ReplayModel::new([ReplayModel::call(
        "w1",
        "write_file",
        json!({ "path": "a.txt", "content": "x" }),
    )]));
    let controller = common::controller(config, &ws, model);
    let mut session = controller
        .start_session(agent_controller::SessionOptions::new())
        .await
        .expect("session");
    session.send_message("write").await.expect("run");
    let id = session.pending()[0].decision_id().to_owned();
    let refused = session
        .decide(&id, Decision::reject().comment(1, "x"))
        .await;
    assert!(
        matches!(refused, Err(SessionError::MalformedDecision(_))),
        "{refused:?}"
    );
    assert!(session.pending()[0].is_waiting());
}

/// A plan as the test writes it: a title, then body lines (no blank line at the start or the
/// end, so the shown text is exactly `# title`, a blank line, the lines).
fn plan_parts() -> impl Strategy<Value = (String, Vec<String>)> {
    let line = prop_oneof![
        "[a-z0-9 .]{1,20}",
        "[^\n\r]{1,40}",
        Just("\u{1b}[2J\u{202e}hidden".to_owned()),
        Just("y".repeat(QUOTE_MAX_CHARS * 2)),
    ]
    .prop_filter("not blank", |l: &String| {
        !l.trim().is_empty() && !l.trim_start().starts_with('#')
    });
    ("[A-Z][a-z]{1,10}", prop::collection::vec(line, 1..8))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn each_comment_quotes_the_line_it_names(
        (title, body) in plan_parts(),
        comments in prop::collection::vec((0u64..12, "[a-z ]{0,12}"), 1..4),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let body: Vec<String> = body.iter().map(|l| l.trim().to_owned()).collect();
            // The oracle: the lines as shown, numbered from 1, written out here.
            let mut shown = vec![format!("# {title}"), String::new()];
            shown.extend(body.iter().cloned());
            let text = format!("{}\n", shown.join("\n"));
            let ws = Workspace::new();
            let path = ws.plan("p.md", &text);
            let model = Arc::new(ReplayModel::new([submit("c1", &path), submit("c2", &path)]));
            let controller = controller(&ws, model.clone());
            let mut session = controller
                .start_session(agent_controller::SessionOptions::new().mode("plan"))
                .await
                .expect("session");
            session.send_message("plan").await.expect("run");
            let id = session.pending()[0].decision_id().to_owned();
            let mut decision = Decision::reject();
            for (line, text) in &comments {
                decision = decision.comment(*line, text.clone());
            }
            let valid = comments
                .iter()
                .all(|(line, text)| (1..=shown.len() as u64).contains(line) && !text.trim().is_empty());
            let outcome = session.decide(&id, decision).await;
            if !valid {
                prop_assert!(matches!(outcome, Err(SessionError::PlanComment(_))), "{:?}", outcome);
                prop_assert!(session.decision_history().is_empty());
                return Ok(());
            }
            prop_assert!(outcome.is_ok(), "{:?}", outcome);
            let record = session.decision_history().last().expect("decided").clone();
            let expected: Vec<QuotedComment> = comments
                .iter()
                .map(|(line, text)| QuotedComment {
                    line: *line,
                    text: text.trim().to_owned(),
                    quote: neutralize_line_within(&shown[*line as usize - 1], QUOTE_MAX_CHARS).into_owned(),
                })
                .collect();
            prop_assert_eq!(&record.comments, &expected);
            let result = last_tool_result(&model);
            for c in &expected {
                let quote = serde_json::to_string(&c.quote).expect("json");
                let line = format!("\n- line {} {quote}: {}", c.line, c.text);
                prop_assert!(result.contains(&line), "{} not in {}", line, result);
            }
            Ok(())
        })?;
    }
}

#[test]
fn a_plan_comment_is_its_line_and_text_and_nothing_else() {
    let comment: PlanComment =
        serde_json::from_value(json!({ "line": 4, "text": "staging first" })).expect("valid");
    assert_eq!(comment.line, 4);
    assert!(serde_json::from_value::<PlanComment>(json!({ "line": -1, "text": "x" })).is_err());
    assert!(serde_json::from_value::<PlanComment>(json!({ "line": 1 })).is_err());
}
