//! Subagents (issue 38): the `subagent` tool runs a child with its type's instructions, in the
//! parent's workspace, and never with more than the parent's mode allows (its tools are the
//! intersection, the parent's rules and `requireApproval` apply in it, a child of a planning
//! mode is read-only). Bad input (an unknown or forbidden type, an empty or a 10 MB task, a
//! looping child, more calls than the cap) is an error result and the session goes on. Driven
//! by the real `OpenAiModel` against the scripted server, which answers parent and child.
#![cfg(feature = "openai")]

use crate::common;

use std::sync::Arc;

use agent_controller::{AgentController, Event, RunOutcome, ToolRegistry, config};
use common::openai_server::{Reply, ScriptedServer, call, calls, contents, text, tool_names};
use common::{Recorder, Workspace};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[subagents]]
id = "explore"
description = "Reads the code and reports."
instructions = "EXPLORE-INSTRUCTIONS: read, then report."
availableTools = ["read_file", "write_file", "list_files", "ask_user"]

[[subagents]]
id = "writer"
description = "Writes files."
instructions = "WRITER-INSTRUCTIONS"
defaultModelId = "openai/writer-model"

[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_file", "write_plan", "submit_plan", "subagent"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "subagent", "task_write"]

[[modes]]
id = "careful"
availableTools = ["read_file", "write_file", "subagent", "ask_user"]
requireApproval = ["write_file"]
rules = [
  { tool = "read_file", path = "secret/**", action = "deny" },
  { tool = "read_file", path = "private/**", action = "ask" },
]
subagents = ["explore"]

[[modes]]
id = "narrow"
availableTools = ["read_file", "subagent"]
subagents = ["explore"]
"#;

struct Setup {
    server: ScriptedServer,
    controller: AgentController,
    recorder: Recorder,
    ws: Workspace,
}

impl Setup {
    async fn new(script: Vec<Reply>) -> Self {
        Self::with(script, |b| b).await
    }

    async fn with(
        script: Vec<Reply>,
        tune: impl FnOnce(
            agent_controller::controller::AgentControllerBuilder,
        ) -> agent_controller::controller::AgentControllerBuilder,
    ) -> Self {
        Self::on(CONFIG, script, tune).await
    }

    /// As [`Setup::with`], on the config `text`.
    async fn on(
        text: &str,
        script: Vec<Reply>,
        tune: impl FnOnce(
            agent_controller::controller::AgentControllerBuilder,
        ) -> agent_controller::controller::AgentControllerBuilder,
    ) -> Self {
        let server = ScriptedServer::start(script).await;
        let ws = Workspace::new();
        let builder = AgentController::builder(
            config::parse(text, "modes.toml").expect("config"),
            Arc::new(server.model()),
        )
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path());
        let controller = tune(builder).build().expect("controller");
        Self {
            server,
            controller,
            recorder: Recorder::default(),
            ws,
        }
    }

    async fn run(&self, mode: &str, message: &str) -> RunOutcome {
        let mut session = self
            .controller
            .start_session(self.recorder.options().mode(mode))
            .await
            .expect("session");
        session.send_message(message).await.expect("run")
    }

    async fn bodies(&self) -> Vec<Value> {
        self.server.bodies().await
    }

    /// The `tool` message contents of the `n`-th request (0-based).
    async fn tool_results(&self, n: usize) -> Vec<String> {
        self.server.tool_results(n).await
    }

    fn events(&self) -> Vec<Event> {
        self.recorder.take()
    }
}

fn subagent(id: &str, agent_type: &str, task: &str) -> common::openai_server::Call {
    call(
        id,
        "subagent",
        &json!({"agentType": agent_type, "task": task}).to_string(),
    )
}

fn tool(id: &str, name: &str, args: Value) -> Reply {
    calls([call(id, name, &args.to_string())])
}

fn system(body: &Value) -> String {
    contents(body, "system").join("\n")
}

fn completed(outcome: &RunOutcome) -> bool {
    matches!(outcome, RunOutcome::Completed { .. })
}

#[tokio::test]
async fn a_child_runs_with_its_types_instructions_and_its_final_text_is_the_parents_result() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "explore", "Find the entry point.")]),
        text("The entry point is src/main.rs."),
        text("Done."),
    ])
    .await;
    let outcome = s.run("build", "Where does it start?").await;
    assert!(completed(&outcome), "{outcome:?}");
    let bodies = s.bodies().await;
    assert_eq!(bodies.len(), 3);
    let child = &bodies[1];
    assert!(
        system(child).contains("EXPLORE-INSTRUCTIONS"),
        "the child's request carries its type's instructions: {}",
        system(child)
    );
    assert!(!system(&bodies[0]).contains("EXPLORE-INSTRUCTIONS"));
    assert_eq!(
        contents(child, "user"),
        ["Find the entry point."],
        "the child's own transcript: its task only"
    );
    // The intersection of the type's list and the build mode's: no `list_files` (the mode
    // does not offer it), no `ask_user` (nor that), no task tools, no `subagent` (depth 1).
    assert_eq!(tool_names(child), ["read_file", "write_file"]);
    assert_eq!(s.tool_results(2).await, ["The entry point is src/main.rs."]);
}

#[tokio::test]
async fn the_child_events_come_wrapped_with_its_id_between_started_and_ended() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "explore", "Look around.")]),
        text("Nothing to see."),
        text("Done."),
    ])
    .await;
    s.run("build", "Look").await;
    let events: Vec<Value> = s
        .events()
        .iter()
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect();
    let started = events
        .iter()
        .position(|e| e["type"] == "subagent_started")
        .expect("subagent_started");
    let ended = events
        .iter()
        .position(|e| e["type"] == "subagent_ended")
        .expect("subagent_ended");
    let child_id = events[started]["childId"].as_str().expect("childId");
    assert_eq!(events[started]["agentType"], "explore");
    assert_eq!(events[started]["toolCallId"], "call_1");
    assert_eq!(events[ended]["childId"], child_id);
    assert_eq!(events[ended]["outcome"], "completed");
    let wrapped: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "subagent_event")
        .collect();
    assert!(!wrapped.is_empty());
    for event in &wrapped {
        assert_eq!(event["childId"], child_id);
        assert_eq!(event["toolCallId"], "call_1");
        assert_eq!(event["event"]["sessionId"], child_id);
    }
    let inner: Vec<&str> = wrapped
        .iter()
        .map(|e| e["event"]["type"].as_str().expect("type"))
        .collect();
    assert!(
        inner.contains(&"agent_start") && inner.contains(&"agent_end"),
        "{inner:?}"
    );
    let positions: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "subagent_event")
        .map(|(i, _)| i)
        .collect();
    assert!(positions.iter().all(|p| *p > started && *p < ended));
    // The parent's own tool_end for the call comes after the child ended.
    let tool_end = events
        .iter()
        .position(|e| e["type"] == "tool_end" && e["toolCallId"] == "call_1")
        .expect("tool_end");
    assert!(tool_end > ended);
}

#[tokio::test]
async fn a_child_of_a_planning_mode_is_read_only_whatever_its_type_or_the_mode_lists() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "explore", "Write notes.")]),
        tool(
            "c_1",
            "write_file",
            json!({"path": "notes.txt", "content": "x"}),
        ),
        text("Could not write."),
        text("Done."),
    ])
    .await;
    let outcome = s.run("plan", "Plan it").await;
    assert!(completed(&outcome), "{outcome:?}");
    let bodies = s.bodies().await;
    // The plan mode lists write_file and write_plan, and the type lists write_file: a child
    // of a planning mode gets neither, nor submit_plan.
    assert_eq!(tool_names(&bodies[1]), ["read_file"]);
    let results = s.tool_results(2).await;
    assert!(
        results[0].contains("not available"),
        "the child's write is refused: {results:?}"
    );
    assert!(
        !s.ws.path().join("notes.txt").exists(),
        "no file was written"
    );
}

#[tokio::test]
async fn the_parent_modes_require_approval_holds_in_the_child_and_the_call_waits_for_the_user() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "explore", "Write notes.")]),
        tool(
            "c_1",
            "write_file",
            json!({"path": "notes.txt", "content": "x"}),
        ),
    ])
    .await;
    let outcome = s.run("careful", "Go").await;
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = &outcome else {
        panic!("the child's call waits in the parent: {outcome:?}");
    };
    assert_eq!(tool_calls[0].tool_name(), "write_file");
    assert_eq!(
        tool_calls[0]
            .payload()
            .subagent
            .as_ref()
            .expect("named")
            .agent_type,
        "explore"
    );
    assert!(
        !s.ws.path().join("notes.txt").exists(),
        "never auto-approved"
    );
}

#[tokio::test]
async fn the_parent_modes_deny_rule_holds_in_the_child() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "explore", "Read the secret.")]),
        tool("c_1", "read_file", json!({"path": "secret/key.txt"})),
        text("Denied."),
        text("Done."),
    ])
    .await;
    std::fs::create_dir_all(s.ws.path().join("secret")).expect("dir");
    std::fs::write(s.ws.path().join("secret/key.txt"), "TOP-SECRET").expect("write");
    let outcome = s.run("careful", "Go").await;
    assert!(completed(&outcome), "{outcome:?}");
    let results = s.tool_results(2).await;
    assert!(!results[0].contains("TOP-SECRET"), "{results:?}");
    assert!(results[0].contains("rule"), "{results:?}");
}

#[tokio::test]
async fn a_childs_question_waits_for_the_users_answer_in_the_parent() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "explore", "Ask.")]),
        tool("c_1", "ask_user", json!({"question": "Which one?"})),
    ])
    .await;
    let outcome = s.run("careful", "Go").await;
    let RunOutcome::AwaitingAnswer { pending, .. } = &outcome else {
        panic!("the child's question waits in the parent: {outcome:?}");
    };
    assert_eq!(pending[0].tool_name(), "ask_user");
    assert_eq!(pending[0].subagent().expect("named").tool_call_id, "call_1");
}

#[tokio::test]
async fn unknown_and_forbidden_types_and_empty_or_huge_tasks_are_error_results_and_the_session_goes_on()
 {
    // Past the task limit; a 10 MB task is beyond what the provider reads in a reply, and is
    // sent by a replayed model below.
    let huge = "x".repeat(agent_controller::subagent::MAX_TASK_CHARS * 2);
    let s = Setup::new(vec![
        calls([
            subagent("call_1", "nobody", "Do it."),
            subagent("call_2", "writer", "Do it."),
            subagent("call_3", "explore", "   "),
            subagent("call_4", "explore", &huge),
        ]),
        text("Done."),
    ])
    .await;
    let outcome = s.run("narrow", "Go").await;
    assert!(completed(&outcome), "{outcome:?}");
    let bodies = s.bodies().await;
    assert_eq!(bodies.len(), 2, "no child started");
    let results = s.tool_results(1).await;
    assert_eq!(results.len(), 4);
    assert!(
        results[0].contains("names no subagent type"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("may not start"), "{}", results[1]);
    assert!(results[2].contains("empty"), "{}", results[2]);
    assert!(
        results[3].len() < 10_000,
        "the huge task is not echoed back"
    );
    assert!(
        results[3].contains("task") || results[3].contains("large"),
        "{}",
        results[3]
    );
}

#[tokio::test]
async fn the_type_s_default_model_id_is_asked_for_and_the_parents_model_otherwise() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "writer", "Write.")]),
        text("Written."),
        calls([subagent("call_2", "explore", "Look.")]),
        text("Looked."),
        text("Done."),
    ])
    .await;
    let outcome = s.run("build", "Go").await;
    assert!(completed(&outcome), "{outcome:?}");
    let bodies = s.bodies().await;
    assert_eq!(bodies[1]["model"], "writer-model");
    assert!(system(&bodies[1]).contains("WRITER-INSTRUCTIONS"));
    assert_eq!(bodies[3]["model"], bodies[0]["model"]);
}

#[tokio::test]
async fn a_looping_child_ends_at_its_own_step_limit_and_the_parent_reads_why() {
    let s = Setup::with(
        vec![
            calls([subagent("call_1", "explore", "Loop.")]),
            tool("c_1", "read_file", json!({"path": "a.txt"})),
            tool("c_2", "read_file", json!({"path": "a.txt"})),
            text("Done."),
        ],
        |b| b.subagent_max_steps(2),
    )
    .await;
    let outcome = s.run("build", "Go").await;
    assert!(completed(&outcome), "{outcome:?}");
    let results = s.tool_results(3).await;
    assert!(
        results[0].contains("failed") && results[0].contains("limit of 2"),
        "{results:?}"
    );
    let ended: Vec<Value> = s
        .events()
        .iter()
        .filter(|e| e.kind() == "subagent_ended")
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect();
    assert_eq!(ended[0]["outcome"], "failed");
}

#[tokio::test]
async fn parallel_calls_all_run_and_past_the_cap_each_gets_an_error_result() {
    let cap = agent_controller::subagent::MAX_PER_REPLY;
    let mut script = vec![calls(
        (0..=cap).map(|i| subagent(&format!("call_{i}"), "explore", "Look.")),
    )];
    script.extend((0..cap).map(|_| text("child done")));
    script.push(text("Done."));
    let s = Setup::with(script, |b| b.subagent_concurrency(3)).await;
    let outcome = s.run("build", "Go").await;
    assert!(completed(&outcome), "{outcome:?}");
    let results = s.tool_results(cap + 1).await;
    assert_eq!(results.len(), cap + 1);
    assert!(
        results[..cap].iter().all(|r| r == "child done"),
        "{results:?}"
    );
    assert!(results[cap].contains("at most"), "{}", results[cap]);
}

#[tokio::test]
async fn sibling_children_run_at_the_same_time_up_to_the_bound() {
    // Two children, bound 2: both have asked the model before either has its answer.
    let s = Setup::with(
        vec![
            calls([
                subagent("call_1", "explore", "One."),
                subagent("call_2", "explore", "Two."),
            ]),
            text("first"),
            text("second"),
            text("Done."),
        ],
        |b| b.subagent_concurrency(2),
    )
    .await;
    let outcome = s.run("build", "Go").await;
    assert!(completed(&outcome), "{outcome:?}");
    let events = s.events();
    let starts: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind() == "subagent_started")
        .map(|(i, _)| i)
        .collect();
    let first_end = events
        .iter()
        .position(|e| e.kind() == "subagent_ended")
        .expect("ended");
    assert_eq!(starts.len(), 2);
    assert!(
        starts[1] < first_end,
        "the second started before the first ended"
    );
}

#[tokio::test]
async fn a_10_mb_task_is_an_error_result_and_the_session_goes_on() {
    use agent_controller::model::scripted::ReplayModel;
    let ws = Workspace::new();
    let huge = "x".repeat(10 * 1024 * 1024);
    let model = ReplayModel::new([
        ReplayModel::call(
            "call_1",
            "subagent",
            json!({"agentType": "explore", "task": huge}),
        ),
        ReplayModel::text("Done."),
    ]);
    let controller = AgentController::builder(
        config::parse(CONFIG, "modes.toml").expect("config"),
        Arc::new(model),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("build"))
        .await
        .expect("session");
    let outcome = session.send_message("Go").await.expect("run");
    assert!(completed(&outcome), "{outcome:?}");
    let result = session
        .messages()
        .iter()
        .find_map(|m| match m {
            agent_controller::model::Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .expect("a tool result");
    assert!(result.len() < 10_000, "the task is not echoed back");
    assert!(
        !recorder.kinds().contains(&"subagent_started"),
        "no child started"
    );
}

/// A model whose children never answer (until cancelled), and whose parent calls `subagent`
/// once: to cancel the parent while its child runs.
struct StuckChild {
    child_asked: Arc<tokio::sync::Notify>,
}

#[agent_controller::async_trait]
impl agent_controller::LanguageModel for StuckChild {
    async fn generate(
        &self,
        request: agent_controller::ModelRequest<'_>,
    ) -> Result<agent_controller::ModelResponse, agent_controller::ModelError> {
        use agent_controller::model::scripted::ReplayModel;
        if request.system_prompt.contains("subagent of type") {
            self.child_asked.notify_one();
            request.cancel.cancelled().await;
            return Err(agent_controller::ModelError::new("cancelled"));
        }
        if request.messages.len() <= 2 {
            return Ok(ReplayModel::call(
                "call_1",
                "subagent",
                json!({"agentType": "explore", "task": "Wait."}),
            ));
        }
        Ok(ReplayModel::text("Done."))
    }
}

#[tokio::test]
async fn cancelling_the_parent_ends_its_running_child_as_aborted() {
    let ws = Workspace::new();
    let child_asked = Arc::new(tokio::sync::Notify::new());
    let model = StuckChild {
        child_asked: child_asked.clone(),
    };
    let controller = AgentController::builder(
        config::parse(CONFIG, "modes.toml").expect("config"),
        Arc::new(model),
    )
    .tools(ToolRegistry::with_workspace_tools())
    .workspace(ws.path())
    .build()
    .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().mode("build"))
        .await
        .expect("session");
    let cancel = session.cancel_handle();
    let canceller = tokio::spawn(async move {
        child_asked.notified().await;
        cancel.cancel()
    });
    let outcome = session.send_message("Go").await.expect("run");
    assert!(canceller.await.expect("join"), "the run was cancelled");
    assert!(matches!(outcome, RunOutcome::Aborted { .. }), "{outcome:?}");
    let ended: Vec<Value> = recorder
        .take()
        .iter()
        .filter(|e| e.kind() == "subagent_ended")
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect();
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["outcome"], "aborted");
    // The parent's call has a result, as every call of an aborted run has.
    let results: Vec<&str> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            agent_controller::model::Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
}

/// A host tool that needs the host's state: the tenant in the session's extensions.
struct Tenant;

#[derive(Debug)]
struct TenantId(&'static str);

#[agent_controller::async_trait]
impl agent_controller::Tool for Tenant {
    fn name(&self) -> &str {
        "tenant"
    }
    fn description(&self) -> String {
        "The tenant this session works for.".to_owned()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(
        &self,
        _: &Value,
        ctx: &agent_controller::ToolContext<'_>,
    ) -> agent_controller::ToolOutput {
        match ctx.extensions.get::<TenantId>() {
            Some(TenantId(id)) => agent_controller::ToolOutput::ok(*id),
            None => agent_controller::ToolOutput::error("no tenant in the extensions"),
        }
    }
}

#[tokio::test]
async fn a_child_gets_the_parents_extensions_so_host_tools_work_in_it() {
    let server = ScriptedServer::start(vec![
        calls([subagent("call_1", "helper", "Who is the tenant?")]),
        tool("c_1", "tenant", json!({})),
        text("The tenant is acme."),
        text("Done."),
    ])
    .await;
    let graph = config::parse(
        r#"
[[subagents]]
id = "helper"
instructions = "Help."

[[modes]]
id = "build"
availableTools = ["tenant", "subagent"]
"#,
        "modes.toml",
    )
    .expect("config");
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Tenant)).expect("register");
    let ws = Workspace::new();
    let controller = AgentController::builder(graph, Arc::new(server.model()))
        .tools(tools)
        .workspace(ws.path())
        .build()
        .expect("controller");
    let recorder = Recorder::default();
    let mut session = controller
        .start_session(recorder.options().extension(TenantId("acme")))
        .await
        .expect("session");
    let outcome = session.send_message("Go").await.expect("run");
    assert!(completed(&outcome), "{outcome:?}");
    assert_eq!(
        server.tool_results(2).await,
        ["acme"],
        "the child's host tool saw the tenant"
    );
}

/// The events as JSON, in order.
fn json_events(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect()
}

#[tokio::test]
async fn a_childs_call_an_ask_rule_holds_waits_with_the_rule_shown() {
    let s = Setup::new(vec![
        calls([subagent("call_1", "explore", "Read the private notes.")]),
        tool("c_1", "read_file", json!({"path": "private/notes.txt"})),
    ])
    .await;
    std::fs::create_dir_all(s.ws.path().join("private")).expect("dir");
    std::fs::write(s.ws.path().join("private/notes.txt"), "PRIVATE").expect("write");
    let outcome = s.run("careful", "Go").await;
    let RunOutcome::ToolCallsSuspended { tool_calls, .. } = &outcome else {
        panic!("the child's call waits in the parent: {outcome:?}");
    };
    let rule = tool_calls[0].payload().rule.as_ref().expect("the ask rule");
    assert_eq!(rule.number, 2);
    assert_eq!(rule.mode_id, "careful");
    let events = json_events(&s.events());
    let suspended = events
        .iter()
        .find(|e| e["type"] == "tool_suspended" && e["toolCallId"] == "c_1")
        .expect("the parent's tool_suspended for the child's call");
    assert_eq!(
        suspended["suspendPayload"]["subagent"]["toolCallId"], "call_1",
        "{suspended}"
    );
}

#[tokio::test]
async fn each_sibling_calls_tool_start_comes_before_its_childs_events() {
    let s = Setup::with(
        vec![
            calls([
                subagent("call_1", "explore", "One."),
                subagent("call_2", "explore", "Two."),
                subagent("call_3", "explore", "Three."),
            ]),
            text("first"),
            text("second"),
            text("third"),
            text("Done."),
        ],
        |b| b.subagent_concurrency(2),
    )
    .await;
    let outcome = s.run("build", "Go").await;
    assert!(completed(&outcome), "{outcome:?}");
    let events = json_events(&s.events());
    for id in ["call_1", "call_2", "call_3"] {
        let starts: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e["type"] == "tool_start" && e["toolCallId"] == id)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(starts.len(), 1, "one tool_start for {id}");
        let first_of_child = events
            .iter()
            .position(|e| {
                e["toolCallId"] == id
                    && (e["type"] == "subagent_started" || e["type"] == "subagent_event")
            })
            .expect("the child's events");
        assert!(
            starts[0] < first_of_child,
            "{id}: tool_start at {} comes after its child's first event at {first_of_child}",
            starts[0]
        );
        let end = events
            .iter()
            .position(|e| e["type"] == "tool_end" && e["toolCallId"] == id)
            .expect("tool_end");
        let last_of_child = events
            .iter()
            .rposition(|e| e["toolCallId"] == id && e["type"] == "subagent_ended")
            .expect("subagent_ended");
        assert!(
            last_of_child < end,
            "{id}: the child ended before its call's tool_end"
        );
    }
    let results = s.tool_results(4).await;
    let mut sorted = results.clone();
    sorted.sort();
    assert_eq!(sorted, ["first", "second", "third"], "{results:?}");
}

#[tokio::test]
async fn a_parent_dropped_mid_batch_keeps_the_result_of_a_child_that_finished() {
    use std::time::Duration;
    // Whichever child asks first gets its answer; the other's model never answers.
    let hang = Reply::Raw(wiremock::ResponseTemplate::new(500).set_delay(Duration::from_secs(600)));
    let s = Setup::with(
        vec![
            calls([
                subagent("call_1", "explore", "One."),
                subagent("call_2", "explore", "Two."),
            ]),
            text("finished child"),
            hang,
        ],
        |b| b.subagent_concurrency(2),
    )
    .await;
    let controller = &s.controller;
    let events = Arc::new(std::sync::Mutex::new(Vec::<Event>::new()));
    let ended = Arc::new(tokio::sync::Notify::new());
    let options = {
        let (events, ended) = (events.clone(), ended.clone());
        agent_controller::SessionOptions::new()
            .mode("build")
            .on_event(move |e| {
                events.lock().expect("lock").push(e.clone());
                if e.kind() == "subagent_ended" {
                    ended.notify_one();
                }
            })
    };
    let mut session = controller.start_session(options).await.expect("session");
    tokio::select! {
        outcome = session.send_message("Go") => panic!("the run ended: {outcome:?}"),
        () = ended.notified() => {}
    }
    // The run's future is dropped here, one child finished and the other still asking.
    let events = json_events(&events.lock().expect("lock"));
    let finished = events
        .iter()
        .find(|e| e["type"] == "subagent_ended")
        .expect("subagent_ended");
    assert_eq!(finished["outcome"], "completed", "{finished}");
    let finished_id = finished["toolCallId"].as_str().expect("id").to_owned();
    let results: Vec<(String, String)> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            agent_controller::model::Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    for (id, content) in &results {
        if *id == finished_id {
            assert_eq!(
                content, "finished child",
                "the finished child's answer is kept"
            );
        } else {
            assert!(
                content.contains("ancel") && !content.contains("Not executed"),
                "the child cut off is cancelled: {content}"
            );
        }
    }
}

#[tokio::test]
async fn a_parent_cancelled_mid_batch_keeps_the_result_of_a_child_that_finished() {
    use std::time::Duration;
    let hang = Reply::Raw(wiremock::ResponseTemplate::new(500).set_delay(Duration::from_secs(600)));
    let s = Setup::with(
        vec![
            calls([
                subagent("call_1", "explore", "One."),
                subagent("call_2", "explore", "Two."),
            ]),
            text("finished child"),
            hang,
        ],
        |b| b.subagent_concurrency(2),
    )
    .await;
    let controller = &s.controller;
    let events = Arc::new(std::sync::Mutex::new(Vec::<Event>::new()));
    let cancel = Arc::new(std::sync::Mutex::new(
        None::<agent_controller::session::CancelHandle>,
    ));
    let options = {
        let (events, cancel) = (events.clone(), cancel.clone());
        agent_controller::SessionOptions::new()
            .mode("build")
            .on_event(move |e| {
                events.lock().expect("lock").push(e.clone());
                if e.kind() == "subagent_ended"
                    && let Some(handle) = &*cancel.lock().expect("lock")
                {
                    handle.cancel();
                }
            })
    };
    let mut session = controller.start_session(options).await.expect("session");
    *cancel.lock().expect("lock") = Some(session.cancel_handle());
    let outcome = session.send_message("Go").await.expect("run");
    assert!(matches!(outcome, RunOutcome::Aborted { .. }), "{outcome:?}");
    let events = json_events(&events.lock().expect("lock"));
    let finished = events
        .iter()
        .find(|e| e["type"] == "subagent_ended" && e["outcome"] == "completed")
        .expect("a child completed");
    let finished_id = finished["toolCallId"].as_str().expect("id").to_owned();
    let results: Vec<(String, String)> = session
        .messages()
        .iter()
        .filter_map(|m| match m {
            agent_controller::model::Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    for (id, content) in &results {
        if *id == finished_id {
            assert_eq!(
                content, "finished child",
                "the finished child's answer is kept"
            );
        } else {
            assert!(
                content.contains("ancel"),
                "the child cut off is cancelled: {content}"
            );
        }
    }
    for id in ["call_1", "call_2"] {
        let starts = events
            .iter()
            .filter(|e| e["type"] == "tool_start" && e["toolCallId"] == id)
            .count();
        assert_eq!(starts, 1, "one tool_start for {id}");
    }
}

/// `subagent_depth(0)`: no mode may start a subagent, so no mode offers the tool (the model is
/// never offered a tool whose every call would be refused); at depth 1 the modes that list it
/// offer it.
#[tokio::test]
async fn at_depth_0_no_mode_offers_the_subagent_tool() {
    let offers = |controller: &AgentController| -> Vec<String> {
        let modes = controller.modes();
        ["plan", "build", "careful", "narrow"]
            .into_iter()
            .filter(|id| {
                let mode = modes.get(id).expect("a mode of the config");
                controller
                    .tool_specs(mode)
                    .iter()
                    .any(|spec| &*spec.name == "subagent")
            })
            .map(str::to_owned)
            .collect()
    };
    let none = Setup::with(vec![], |b| b.subagent_depth(0)).await;
    assert!(
        offers(&none.controller).is_empty(),
        "{:?}",
        offers(&none.controller)
    );
    let one = Setup::new(vec![]).await;
    assert_eq!(
        offers(&one.controller),
        ["plan", "build", "careful", "narrow"]
    );
}

/// A type's `requireApproval` only adds waits: the parent mode's `allow` rule on the same tool
/// does not let the child's call run unasked (it waits for the user).
#[tokio::test]
async fn a_types_require_approval_holds_against_the_parent_modes_allow_rule() {
    const LOOSE_PARENT: &str = r#"
[[subagents]]
id = "cautious"
description = "Writes carefully."
instructions = "CAUTIOUS-INSTRUCTIONS"
availableTools = ["write_file"]
requireApproval = ["write_file"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "subagent"]
rules = [ { tool = "write_file", path = "notes/**", action = "allow" } ]
"#;
    let s = Setup::on(
        LOOSE_PARENT,
        vec![
            calls([subagent("call_1", "cautious", "Write notes.")]),
            tool(
                "c_1",
                "write_file",
                json!({"path": "notes/a.txt", "content": "x"}),
            ),
        ],
        |b| b,
    )
    .await;
    let outcome = s.run("build", "Go").await;
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "{outcome:?}"
    );
    assert!(
        !s.ws.path().join("notes/a.txt").exists(),
        "the type asks before every write_file: never run unasked"
    );
}

/// F8: a child's call a rule decided names that rule where it is written. A rule of the
/// subagent type's own (on top of the parent mode's) is the type's rule N (`agentType`, its
/// number in the type's `rules` list, a reason naming the type), not rule N+M of the parent's
/// mode; a parent mode's rule that decides in the child stays that mode's rule N.
#[tokio::test]
async fn a_childs_call_a_types_own_rule_decided_names_the_type_and_its_number() {
    const GUARDED: &str = r#"
[[subagents]]
id = "guarded"
description = "Reads, never the secrets."
instructions = "GUARDED-INSTRUCTIONS"
availableTools = ["read_file"]
rules = [ { tool = "read_file", path = "secret/**", action = "deny" } ]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "subagent"]
rules = [
  { tool = "read_file", path = "private/**", action = "deny" },
  { tool = "read_file", path = "docs/**", action = "allow" },
]
"#;
    let s = Setup::on(
        GUARDED,
        vec![
            calls([subagent(
                "call_1",
                "guarded",
                "Read the secret and the private notes.",
            )]),
            tool("c_1", "read_file", json!({"path": "secret/key.txt"})),
            tool("c_2", "read_file", json!({"path": "private/notes.txt"})),
            text("Both refused."),
            text("Done."),
        ],
        |b| b,
    )
    .await;
    for dir in ["secret", "private"] {
        std::fs::create_dir_all(s.ws.path().join(dir)).expect("dir");
    }
    std::fs::write(s.ws.path().join("secret/key.txt"), "TOP-SECRET").expect("write");
    std::fs::write(s.ws.path().join("private/notes.txt"), "PRIVATE").expect("write");
    let outcome = s.run("build", "Go").await;
    assert!(completed(&outcome), "{outcome:?}");
    let events = json_events(&s.events());
    let record_of = |id: &str| -> Value {
        events
            .iter()
            .filter(|e| e["type"] == "subagent_event")
            .map(|e| &e["event"])
            .find(|e| e["type"] == "tool_end" && e["toolCallId"] == id)
            .unwrap_or_else(|| panic!("the child's tool_end of {id}"))["decision"]["rule"]
            .clone()
    };
    let by_type = record_of("c_1");
    assert_eq!(by_type["agentType"], "guarded", "{by_type}");
    assert_eq!(by_type["number"], 1, "the type's rule 1: {by_type}");
    assert_eq!(by_type["action"], "deny", "{by_type}");
    assert_eq!(
        by_type["rule"], "deny read_file path `secret/**`",
        "{by_type}"
    );
    assert_eq!(
        by_type["modeId"], "build",
        "the mode the child ran under: {by_type}"
    );
    let reason = by_type["reason"].as_str().expect("a reason");
    assert!(reason.contains("subagent type `guarded`"), "{reason}");
    assert!(!reason.contains("rule 3"), "{reason}");
    let by_mode = record_of("c_2");
    assert_eq!(by_mode["modeId"], "build", "{by_mode}");
    assert_eq!(by_mode["number"], 1, "{by_mode}");
    assert_eq!(by_mode["agentType"], Value::Null, "{by_mode}");
    let reason = by_mode["reason"].as_str().expect("a reason");
    assert!(reason.starts_with("rule 1 of mode `build`"), "{reason}");
}
