//! What a host needs to test its own code without a session (issue 21): a `ModelRequest` and
//! `ModelResponse`s built directly, and errors matched by kind.

use agent_controller::json::{Value, json};
use agent_controller::model::TextSink;
use agent_controller::{
    LanguageModel, ModelError, ModelRequest, ModelResponse, ToolCall, extensions::Extensions,
    model::Message, tool::ToolAccess, tool::ToolSpec,
};
use tokio_util::sync::CancellationToken;

/// A host's model: reads the file the user names with `read_file` when it is offered, then
/// answers with what the tool returned; streams its answer and says which user it serves.
struct FileReader;

#[derive(Debug)]
struct UserName(&'static str);

#[agent_controller::async_trait]
impl LanguageModel for FileReader {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        if request.cancel.is_cancelled() {
            return Err(ModelError::new("cancelled"));
        }
        let user = request
            .extensions
            .get::<UserName>()
            .map_or("someone", |u| u.0);
        match request.messages.last() {
            Some(Message::User { content })
                if request.tools.iter().any(|t| &*t.name == "read_file") =>
            {
                Ok(ModelResponse::tool_calls([ToolCall::new(
                    format!("{}-{}-1", request.session_id, request.run_id),
                    "read_file",
                    json!({ "path": content }),
                )])
                .with_text(format!("Reading {content} for {user}.")))
            }
            Some(Message::Tool { content, .. }) => {
                request.text.send(content);
                Ok(ModelResponse::text(format!(
                    "[{}] {content}",
                    request.mode_id
                )))
            }
            _ => Ok(ModelResponse::text(format!(
                "{}: nothing to read",
                request.model_id.unwrap_or("no model")
            ))),
        }
    }
}

fn read_file_spec() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Reads a file".into(),
        input_schema: json!({ "type": "object" }),
        access: ToolAccess::ReadOnly,
    }
}

#[tokio::test]
async fn a_hosts_model_is_unit_tested_with_built_requests_and_responses() {
    let tools = [read_file_spec()];
    let asked = [Message::User {
        content: "notes.md".into(),
    }];
    let mut extensions = Extensions::new();
    extensions.insert(UserName("ada"));
    let request = ModelRequest::new(&asked)
        .with_session_id("s1")
        .with_run_id("r1")
        .with_tools(&tools)
        .with_extensions(&extensions);
    let reply = FileReader.generate(request).await.expect("a reply");
    assert_eq!(
        reply,
        ModelResponse::tool_calls([ToolCall::new(
            "s1-r1-1",
            "read_file",
            json!({ "path": "notes.md" })
        )])
        .with_text("Reading notes.md for ada.")
    );
    assert_eq!(reply.finish_reason, None);

    // Without the tool offered (and no extensions) it says so, naming the preferred model.
    let reply = FileReader
        .generate(ModelRequest::new(&asked).with_model_id("openai/gpt-4.1"))
        .await
        .expect("a reply");
    assert_eq!(
        reply,
        ModelResponse::text("openai/gpt-4.1: nothing to read")
    );
    let reply = FileReader
        .generate(ModelRequest::new(&[]))
        .await
        .expect("ok");
    assert_eq!(reply.text, "no model: nothing to read");

    // A tool result is answered in the request's mode and streamed through its sink.
    let answered = [
        asked[0].clone(),
        Message::Tool {
            tool_call_id: "s1-r1-1".into(),
            tool_name: "read_file".into(),
            content: "# Notes".into(),
            is_error: false,
        },
    ];
    let streamed = std::sync::Mutex::new(String::new());
    let deliver = |piece: &str| streamed.lock().expect("lock").push_str(piece);
    let request = ModelRequest::new(&answered)
        .with_mode_id("build")
        .with_system_prompt("Answer briefly.")
        .with_text(TextSink::new(&deliver));
    assert_eq!(request.system_prompt, "Answer briefly.");
    let reply = FileReader.generate(request).await.expect("ok");
    assert_eq!(reply, ModelResponse::text("[build] # Notes"));
    assert_eq!(*streamed.lock().expect("lock"), "# Notes");

    // A cancelled token reaches the model.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = FileReader
        .generate(ModelRequest::new(&asked).with_cancel(cancel))
        .await
        .expect_err("cancelled");
    assert_eq!(err.message(), "cancelled");
}

#[test]
fn a_built_request_starts_empty_but_for_its_messages() {
    let messages = [Message::User {
        content: "hi".into(),
    }];
    let request = ModelRequest::new(&messages);
    assert_eq!(
        (request.session_id, request.run_id, request.mode_id),
        ("", "", "")
    );
    assert_eq!(request.model_id, None);
    assert_eq!(request.system_prompt, "");
    assert!(request.tools.is_empty());
    assert_eq!(request.messages, &messages);
    assert!(!request.cancel.is_cancelled());
    assert!(request.extensions.get::<UserName>().is_none());
    // The built responses serialize like any other.
    let value: Value = serde_json::to_value(ModelResponse::text("x")).expect("ok");
    assert_eq!(value, json!({ "text": "x", "toolCalls": [] }));
}

/// `SessionError::kind()` sorts real refusals of a session's operations into a few kinds a
/// host can match on.
#[tokio::test]
async fn session_errors_are_matched_by_kind() {
    use agent_controller::model::scripted::ReplayModel;
    use agent_controller::{Decision, RunOutcome, SessionOptions, session::SessionErrorKind};

    let ws = crate::common::Workspace::new();
    let path = ws.plan("p.md", "# Plan\n\n1. Do it\n");
    let model = crate::common::replay(vec![
        ReplayModel::call("c1", "submit_plan", json!({ "path": path })),
        ModelResponse::text("built"),
    ]);
    let controller = crate::common::controller(crate::common::PLAN_BUILD, &ws, model);
    let kind = |e: agent_controller::SessionError| e.kind();

    let err = controller
        .start_session(SessionOptions::new().mode("Plan"))
        .await
        .expect_err("no mode `Plan`");
    assert_eq!(kind(err), SessionErrorKind::NotFound);
    let err = controller
        .start_session(SessionOptions::new().id("not an id"))
        .await
        .expect_err("bad id");
    assert_eq!(kind(err), SessionErrorKind::InvalidInput);
    let err = controller
        .restore_session("s1", SessionOptions::new())
        .await
        .expect_err("no store");
    assert_eq!(kind(err), SessionErrorKind::Store);

    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    let err = session
        .decide("nope", Decision::approve())
        .await
        .expect_err("refused");
    assert_eq!(kind(err), SessionErrorKind::NotFound);
    let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        payload,
    } = session.send_message("Plan it").await.expect("run")
    else {
        panic!("must suspend");
    };
    let decision_id = payload.decision_id.to_string();
    let err = session
        .decide(
            &decision_id,
            Decision::approve().with_sha256("0".repeat(64)),
        )
        .await
        .expect_err("refused");
    assert_eq!(kind(err), SessionErrorKind::Mismatch);
    let err = session
        .decide(&decision_id, Decision::approve().to("Build"))
        .await
        .expect_err("refused");
    assert_eq!(kind(err), SessionErrorKind::InvalidInput);
    session
        .decide(&decision_id, Decision::approve())
        .await
        .expect("approved");
    let err = session
        .decide(&decision_id, Decision::approve())
        .await
        .expect_err("refused");
    assert_eq!(kind(err), SessionErrorKind::AlreadyDecided);
    let err = session
        .resume(&run_id, &tool_call_id, Decision::approve())
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err.kind(),
            SessionErrorKind::WrongState | SessionErrorKind::AlreadyDecided
        ),
        "{err:?}"
    );
    // Kinds have stable names.
    assert_eq!(SessionErrorKind::NotFound.to_string(), "not_found");
    assert_eq!(
        "already_decided".parse::<SessionErrorKind>(),
        Ok(SessionErrorKind::AlreadyDecided)
    );
}
