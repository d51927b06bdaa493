//! Hostile tool-call input from the model (findings of the hostile-model trial): arguments
//! nested too deep, or not I-JSON (duplicate names, unsafe integers), are refused and never
//! suspended, so no record the model can shape is unreadable; what a tool runs with is what
//! `argsSha256` hashes; a reply's tool calls, names and ids count against the reply cap; and
//! `resume` with an unknown tool-call id says so. Driven by the real `OpenAiModel` against the
//! scripted OpenAI-compatible server.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::{Arc, Mutex};

use agent_controller::store::{FileStore, SessionStore};
use agent_controller::tool::args::MAX_DEPTH;
use agent_controller::{
    AgentController, Decision, RunOutcome, Session, SessionError, SessionOptions, Tool,
    ToolContext, ToolOutput, ToolRegistry, config,
};
use common::Workspace;
use common::openai_server::{ScriptedServer, call, calls, text};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "record"]
requireApproval = ["write_file", "record"]
"#;

/// A tool that records the arguments it runs with.
#[derive(Default)]
struct Record(Mutex<Vec<Value>>);

#[async_trait::async_trait]
impl Tool for Record {
    fn name(&self) -> &str {
        "record"
    }
    fn description(&self) -> String {
        "records its arguments".into()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        self.0.lock().expect("lock").push(args.clone());
        ToolOutput::ok("recorded")
    }
}

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    store: Arc<FileStore>,
    record: Arc<Record>,
    _ws: Workspace,
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn new(script: Vec<common::openai_server::Reply>) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let dir = tempfile::tempdir().expect("dir");
        let store = Arc::new(FileStore::open(dir.path()).expect("store"));
        let record = Arc::new(Record::default());
        let mut tools = ToolRegistry::with_workspace_tools();
        tools.register(record.clone()).expect("register");
        let controller = AgentController::builder(
            config::parse(CONFIG, "modes.toml").expect("config"),
            Arc::new(server.model()),
        )
        .tools(tools)
        .workspace(ws.path())
        .store(store.clone())
        .build()
        .expect("controller");
        Self {
            server,
            controller,
            store,
            record,
            _ws: ws,
            _dir: dir,
        }
    }

    async fn session(&self) -> Session {
        self.controller
            .start_session(SessionOptions::new())
            .await
            .expect("session")
    }

    /// The content of the `tool` message for `id` in the `n`-th request.
    async fn result_of(&self, n: usize, id: &str) -> String {
        let bodies = self.server.bodies().await;
        bodies[n]["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .and_then(|m| m["content"].as_str())
            .unwrap_or_else(|| panic!("no result for {id} in request {n}"))
            .to_owned()
    }
}

fn nested(levels: usize) -> String {
    format!(
        "{{\"path\":\"a.txt\",\"content\":\"x\",\"z\":{}{}}}",
        "[".repeat(levels),
        "]".repeat(levels)
    )
}

/// Finding 1: arguments nested ~122 levels deep saved, and every later load of the session
/// failed (serde_json's limit of 128 over the whole record). They are now refused (deeper than
/// `MAX_DEPTH`), never suspended, and the record restores; the pending listing stays healthy.
#[tokio::test]
async fn arguments_nested_too_deep_are_refused_and_the_record_stays_readable() {
    let s = Setup::new(vec![
        calls([
            call("call_1", "write_file", &nested(122)),
            call("call_2", "read_file", &nested(MAX_DEPTH)),
            call("call_3", "write_file", &nested(200)),
        ]),
        text("ok"),
    ])
    .await;
    let mut session = s.session().await;
    let outcome = session.send_message("go").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(session.pending().is_empty());
    for id in ["call_1", "call_2", "call_3"] {
        let result = s.result_of(1, id).await;
        assert!(result.contains("Not executed"), "{id}: {result}");
        assert!(result.contains("deeper than 64"), "{id}: {result}");
    }
    let id = session.id().to_owned();
    drop(session);
    let listing = s
        .store
        .list_pending(agent_controller::store::now_millis())
        .await
        .expect("list");
    assert!(listing.is_healthy(), "{listing:?}");
    let mut restored = s
        .controller
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("the record restores");
    assert!(!restored.messages().is_empty());
    restored.abort().await.expect("still usable");
}

/// Just under the limit, the call still waits and the record restores with it.
#[tokio::test]
async fn arguments_at_the_limit_wait_and_restore() {
    let s = Setup::new(vec![
        calls([call("call_1", "record", &nested(MAX_DEPTH - 1))]),
        text("ok"),
    ])
    .await;
    let mut session = s.session().await;
    let outcome = session.send_message("go").await.expect("run");
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    let id = session.id().to_owned();
    drop(session);
    assert!(
        s.store
            .list_pending(agent_controller::store::now_millis())
            .await
            .expect("list")
            .is_healthy()
    );
    let restored = s
        .controller
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore");
    assert_eq!(restored.pending().len(), 1);
}

/// Found by a property test: while tool calls wait, `resume` with a tool-call id the run does
/// not have said `NotSuspended` though the run is suspended.
#[tokio::test]
async fn resume_with_an_unknown_tool_call_id_while_calls_wait_is_unknown_tool_call() {
    let s = Setup::new(vec![
        calls([call(
            "call_1",
            "write_file",
            r#"{"path":"a.txt","content":"x"}"#,
        )]),
        text("ok"),
    ])
    .await;
    let mut session = s.session().await;
    session.send_message("go").await.expect("run");
    assert_eq!(session.pending().len(), 1);
    assert_eq!(
        session
            .resume("run_1", "no-such-call", Decision::approve())
            .await,
        Err(SessionError::UnknownToolCall {
            run_id: "run_1".into(),
            tool_call_id: "no-such-call".into(),
        })
    );
    assert_eq!(session.pending().len(), 1);
    assert!(session.pending()[0].decision().is_none());
}

/// Finding 4: `-0.0` and `0` (and `1.0` and `1`) hash the same under RFC 8785, so the tool must
/// run with the canonical value: two calls with equal `argsSha256` carry identical arguments, in
/// the pending call (what `pending --json` shows) and to the tool.
#[tokio::test]
async fn calls_with_equal_args_sha256_run_with_identical_arguments() {
    let s = Setup::new(vec![
        calls([
            call("call_1", "record", r#"{"n":-0.0,"x":1.0,"e":1e2}"#),
            call("call_2", "record", r#"{"e":100,"x":1,"n":0}"#),
        ]),
        text("ok"),
    ])
    .await;
    let mut session = s.session().await;
    session.send_message("go").await.expect("run");
    let pending = common::waiting_calls(&session);
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0].args_sha256(), pending[1].args_sha256());
    assert_eq!(pending[0].args(), pending[1].args());
    assert_eq!(pending[0].args().to_string(), r#"{"e":100,"n":0,"x":1}"#);
    let id = session.id().to_owned();
    drop(session);
    let mut session = s
        .controller
        .restore_session(&id, SessionOptions::new())
        .await
        .expect("restore");
    for decision in ["decision_1", "decision_2"] {
        session
            .decide(decision, Decision::approve())
            .await
            .expect("approve");
    }
    let ran = s.record.0.lock().expect("lock").clone();
    assert_eq!(ran.len(), 2);
    assert_eq!(ran[0], ran[1]);
    assert_eq!(&ran[0], pending[0].args());
}

/// Finding 4: arguments that are not I-JSON (RFC 8785 assumes it) are refused and never wait:
/// an integer beyond 2^53-1 would run as written but hash (and read in JavaScript) as another
/// number, and of duplicate names serde_json kept the last silently.
#[tokio::test]
async fn arguments_that_are_not_i_json_are_refused_and_never_wait() {
    let s = Setup::new(vec![
        calls([
            call("call_1", "record", r#"{"big":9007199254740993}"#),
            call(
                "call_2",
                "record",
                r#"{"path":"a.txt","path":".git/hooks/x"}"#,
            ),
            call("call_3", "record", r#"{"small":-9007199254740991}"#),
        ]),
        text("ok"),
    ])
    .await;
    let mut session = s.session().await;
    let outcome = session.send_message("go").await.expect("run");
    let pending = common::waiting_calls(&session);
    assert_eq!(pending.len(), 1, "{outcome:?}");
    assert_eq!(pending[0].args(), &json!({"small": -9007199254740991_i64}));
    session
        .decide("decision_1", Decision::approve())
        .await
        .expect("approve");
    let big = s.result_of(1, "call_1").await;
    assert!(
        big.contains("Not executed") && big.contains("9007199254740993"),
        "{big}"
    );
    let dup = s.result_of(1, "call_2").await;
    assert!(
        dup.contains("Not executed") && dup.contains("`path` twice"),
        "{dup}"
    );
    assert_eq!(s.record.0.lock().expect("lock").len(), 1);
}
