//! Reviewers (issue 41): a mode's `reviewBy` sends its plans (and, with `reviewToolCalls`, its
//! waiting tool calls) to a command or a model before a person is asked. Under `reviewerMay =
//! "decide"` an approval (pinned to the sha256 it was given) or a rejection stands; under
//! `"advise"` a person decides, seeing the verdict. Anything that is not one well-formed
//! answer (garbage, two objects, a timeout, a model's tool call) escalates, saying why. The
//! audit log says how each decision was taken.

use crate::common;

use std::sync::Arc;

use agent_controller::event::{DecidedHow, DecisionOutcome};
use agent_controller::model::scripted::ReplayModel;
use agent_controller::review::{ReviewDecision, ReviewRecord};
use agent_controller::{
    AgentController, Decision, FileStore, LanguageModel, PendingDecision, RunOutcome, Session,
    SessionOptions, ToolRegistry, config,
};
use common::{Workspace, replay, tool_results};
use serde_json::{Value, json};

const PLAN: &str = "# Add a greeting\n\n1. Write hello.txt\n2. Test it\n";

/// Modes `plan` (its plans reviewed) and `build` (its `write_file` calls wait, and are
/// reviewed), both by reviewer `critic` under `may`, a command running `review/critic.sh`
/// within `timeout`.
fn config(may: &str, timeout: &str) -> String {
    format!(
        r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
reviewBy = "critic"
reviewerMay = "{may}"

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
reviewBy = "critic"
reviewerMay = "{may}"
reviewToolCalls = true

[[reviewers]]
id = "critic"
command = ["sh", "review/critic.sh"]
timeout = "{timeout}"
"#
    )
}

/// A session's world: its workspace (the reviewer's script and what it saw in it), its store.
struct World {
    ws: Workspace,
    store_dir: tempfile::TempDir,
}

impl World {
    /// A workspace with `script` as `review/critic.sh`, and an empty store.
    fn new(script: &str) -> Self {
        let ws = Workspace::new();
        std::fs::create_dir_all(ws.path().join("review")).expect("mkdir");
        std::fs::write(ws.path().join("review/critic.sh"), script).expect("script");
        Self {
            ws,
            store_dir: tempfile::tempdir().expect("store dir"),
        }
    }

    /// The controller of `config` with `model`, storing in this world's store.
    fn controller(&self, config: &str, model: Arc<dyn LanguageModel>) -> AgentController {
        self.builder(config, model).build().expect("controller")
    }

    fn builder(
        &self,
        config: &str,
        model: Arc<dyn LanguageModel>,
    ) -> agent_controller::controller::AgentControllerBuilder {
        let store = Arc::new(FileStore::open(self.store_dir.path()).expect("store"));
        AgentController::builder(config::parse(config, "modes.toml").expect("config"), model)
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(self.ws.path())
            .store(store)
    }

    /// The object the reviewer saw on stdin (the script keeps it in `review/seen.json`).
    fn seen(&self) -> Value {
        let text = std::fs::read_to_string(self.ws.path().join("review/seen.json")).expect("seen");
        serde_json::from_str(&text).expect("one JSON object on stdin")
    }

    fn store(&self) -> String {
        self.store_dir.path().to_str().expect("utf-8").to_owned()
    }

    /// `log SESSION --json`: each decision's `how`, `decidedBy` and `review`.
    fn log(&self, session: &str) -> Vec<Value> {
        let out = common::cli::output(
            common::cli::command(
                self.ws.path(),
                &["log", session, "--store", &self.store(), "--json"],
            ),
            "",
        );
        assert!(out.status.success(), "{}", common::stderr(&out));
        common::json_lines(&out)
    }

    /// `log SESSION`, as text.
    fn log_text(&self, session: &str) -> String {
        let out = common::cli::output(
            common::cli::command(self.ws.path(), &["log", session, "--store", &self.store()]),
            "",
        );
        assert!(out.status.success(), "{}", common::stderr(&out));
        common::cli::stdout(&out)
    }

    /// `pending --json`, one value per line.
    fn pending_json(&self) -> Vec<Value> {
        let out = common::cli::output(
            common::cli::command(
                self.ws.path(),
                &["pending", "--store", &self.store(), "--json"],
            ),
            "",
        );
        assert!(out.status.success(), "{}", common::stderr(&out));
        common::json_lines(&out)
    }
}

/// A reviewer script that keeps what it was given and answers `answer` (shell-quoted).
fn answering(answer: &str) -> String {
    format!("cat > review/seen.json\nprintf '%s\\n' '{answer}'\n")
}

/// Submits the plan in mode `plan` of `world` (config `config`), the model replying `after`
/// once the run carries on: the outcome and the session.
async fn submit(world: &World, config: &str, after: &str) -> (RunOutcome, Session) {
    let path = world.ws.plan("greet.md", PLAN);
    let model = replay(vec![
        ReplayModel::call("p1", "submit_plan", json!({ "path": path })),
        ReplayModel::text(after),
    ]);
    let controller = world.controller(config, model);
    let mut session = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("session");
    let outcome = session.send_message("plan it").await.expect("runs");
    (outcome, session)
}

fn plan_review(session: &Session) -> Option<ReviewRecord> {
    match session.pending().first() {
        Some(PendingDecision::Plan(plan)) => plan.payload().review.as_deref().cloned(),
        _ => None,
    }
}

fn sha256_of_plan(session: &Session) -> String {
    session
        .decision_history()
        .last()
        .and_then(|r| r.sha256.clone())
        .expect("a decided sha256")
}

#[tokio::test]
async fn a_command_reviewer_that_may_decide_approves_the_plan_it_saw() {
    let world = World::new(&answering(
        r#"{"decision": "approve", "reason": "it tests its step"}"#,
    ));
    let (outcome, session) = submit(&world, &config("decide", "10s"), "building").await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "approved, the run carried on in build: {outcome:?}"
    );
    assert_eq!(session.mode().id(), "build");
    let record = session.decision_history().last().expect("the approval");
    assert_eq!(record.outcome, Some(DecisionOutcome::Approved));
    assert_eq!(record.decided_by.as_deref(), Some("reviewer critic"));
    assert_eq!(record.how(), DecidedHow::Reviewer);
    let review = record.review.as_deref().expect("the review");
    assert!(review.decided);
    assert_eq!(review.decision, ReviewDecision::Approve);
    assert_eq!(review.reason.as_deref(), Some("it tests its step"));
    // What it approved is what it was given, the plan shown.
    let seen = world.seen();
    assert_eq!(seen["on"], "plan");
    assert_eq!(seen["modeId"], "plan");
    assert_eq!(seen["title"], "Add a greeting");
    assert!(
        seen["plan"]
            .as_str()
            .is_some_and(|p| p.contains("2. Test it"))
    );
    assert_eq!(seen["sessionId"], session.id());
    assert_eq!(
        seen["sha256"].as_str(),
        Some(sha256_of_plan(&session).as_str())
    );
    assert_eq!(review.sha256, sha256_of_plan(&session), "pinned");
    // The audit log says a reviewer decided, which one, and why.
    let log = world.log(session.id());
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["how"], "reviewer");
    assert_eq!(log[0]["via"], "reviewer");
    assert_eq!(log[0]["decidedBy"], "reviewer critic");
    assert_eq!(log[0]["review"]["reviewer"], "critic");
    assert_eq!(log[0]["review"]["decision"], "approve");
    let text = world.log_text(session.id());
    assert!(
        text.contains("\tapproved\treviewer\treviewer\treviewer critic\tsubmit_plan ")
            && text.trim_end().ends_with("it tests its step"),
        "{text}"
    );
}

#[tokio::test]
async fn under_a_quorum_a_reviewers_approval_never_counts_and_the_people_decide() {
    let world = World::new(&answering(
        r#"{"decision": "approve", "reason": "fine by me"}"#,
    ));
    let config = config("decide", "10s").replace(
        "reviewerMay = \"decide\"\n\n[[modes]]",
        "reviewerMay = \"decide\"\napprovers = 2\n\n[[modes]]",
    );
    assert!(config.contains("approvers = 2"), "{config}");
    let (outcome, session) = submit(&world, &config, "building").await;
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "the plan waits for two people: {outcome:?}"
    );
    assert_eq!(session.mode().id(), "plan");
    assert!(session.decision_history().is_empty(), "nothing decided");
    // The people see the reviewer's approval as advice.
    let review = plan_review(&session).expect("the verdict is shown");
    assert_eq!(review.decision, ReviewDecision::Approve);
    assert!(!review.decided);
}

#[tokio::test]
async fn a_command_reviewer_that_may_decide_rejects_with_its_reason_as_feedback() {
    let world = World::new(&answering(
        r#"{"decision": "reject", "reason": "step 2 names no test"}"#,
    ));
    let (outcome, session) = submit(&world, &config("decide", "10s"), "revising").await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert_eq!(session.mode().id(), "plan", "no hand-over");
    let record = session.decision_history().last().expect("the rejection");
    assert_eq!(record.outcome, Some(DecisionOutcome::Rejected));
    assert_eq!(record.how(), DecidedHow::Reviewer);
    let results = tool_results(session.messages());
    assert!(
        results[0].1.contains("step 2 names no test"),
        "the model gets the reason: {results:?}"
    );
    let log = world.log(session.id());
    assert_eq!(log[0]["how"], "reviewer");
    assert_eq!(log[0]["outcome"], "rejected");
    assert_eq!(log[0]["review"]["reason"], "step 2 names no test");
}

#[tokio::test]
async fn an_advising_reviewer_leaves_the_person_to_decide_seeing_its_verdict() {
    let world = World::new(&answering(
        r#"{"decision": "reject", "reason": "too vague"}"#,
    ));
    let (outcome, mut session) = submit(&world, &config("advise", "10s"), "building").await;
    assert!(
        matches!(outcome, RunOutcome::Suspended { .. }),
        "a person decides: {outcome:?}"
    );
    assert!(session.decision_history().is_empty());
    let review = plan_review(&session).expect("the verdict shown beside the plan");
    assert_eq!(review.decision, ReviewDecision::Reject);
    assert!(!review.decided);
    assert_eq!(review.shown(), "reviewer critic: reject: too vague");
    // Every host lists it: `pending --json` has it beside the plan.
    let pending = world.pending_json();
    assert_eq!(pending[0]["review"]["decision"], "reject", "{pending:?}");
    assert_eq!(pending[0]["review"]["reason"], "too vague");
    // The person approves all the same: their decision, with the advice they saw.
    let id = session.pending()[0].decision_id().to_owned();
    session
        .decide(&id, Decision::approve().decided_by("alice"))
        .await
        .expect("approved");
    assert_eq!(session.mode().id(), "build");
    let record = session.decision_history().last().expect("the approval");
    assert_eq!(record.how(), DecidedHow::Person);
    assert_eq!(record.decided_by.as_deref(), Some("alice"));
    assert_eq!(
        record.review.as_deref().map(|r| (r.decision, r.decided)),
        Some((ReviewDecision::Reject, false))
    );
    let log = world.log(session.id());
    assert_eq!(log[0]["how"], "person");
}

/// Garbage, two objects, a timeout, a crash: each escalates (a person decides), saying why.
#[tokio::test]
async fn a_reviewer_that_answers_badly_escalates_saying_why() {
    for (script, timeout, why) in [
        (
            "cat > /dev/null\necho 'looks fine to me'\n",
            "10s",
            "not a JSON object",
        ),
        (
            "cat > /dev/null\necho '{\"decision\": \"approve\"}{\"decision\": \"approve\"}'\n",
            "10s",
            "more than one JSON value",
        ),
        ("cat > /dev/null\nsleep 5\n", "1s", "timed out after 1s"),
        ("cat > /dev/null\necho boom >&2\nexit 3\n", "10s", "boom"),
    ] {
        let world = World::new(script);
        let (outcome, session) = submit(&world, &config("decide", timeout), "building").await;
        assert!(
            matches!(outcome, RunOutcome::Suspended { .. }),
            "{why}: {outcome:?}"
        );
        assert!(session.decision_history().is_empty(), "{why}");
        let review = plan_review(&session).expect("the failed review, shown");
        assert_eq!(review.decision, ReviewDecision::Escalate, "{why}");
        assert!(
            review.error.as_deref().is_some_and(|e| e.contains(why)),
            "{why}: {review:?}"
        );
        assert!(world.log(session.id()).is_empty(), "nothing decided: {why}");
    }
}

/// Every reviewer is bounded in time, where the driver asks it: a reviewer that never answers
/// (a model whose provider hangs, a reviewer a host registered) escalates within its entry's
/// `timeout`, saying it timed out, and is stopped; it never holds the run for ever.
mod bounded {
    use super::*;
    use crate::common::dropped::{SetOnDrop, is_set_soon};
    use agent_controller::review::{ReviewError, ReviewRequest, ReviewVerdict, Reviewer};
    use agent_controller::{ModelError, ModelRequest, ModelResponse};
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    /// A model whose provider never answers.
    struct Silent;

    #[agent_controller::async_trait]
    impl LanguageModel for Silent {
        async fn generate(&self, _: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
            std::future::pending().await
        }
    }

    /// A reviewer a host registered that never answers: `started` is notified when a review
    /// starts, `stopped` set once it is dropped.
    #[derive(Default)]
    struct NeverAnswers {
        started: Arc<tokio::sync::Notify>,
        stopped: Arc<AtomicBool>,
    }

    #[agent_controller::async_trait]
    impl Reviewer for NeverAnswers {
        async fn review(&self, _: &ReviewRequest) -> Result<ReviewVerdict, ReviewError> {
            let _stopped = SetOnDrop(self.stopped.clone());
            self.started.notify_one();
            std::future::pending().await
        }
    }

    /// Submits the plan under `config` with the controller `build` makes of the world's
    /// builder: the outcome, the session, and how long the run took. A run that is not back
    /// within 20s fails the test (the reviewer held it).
    async fn submit_bounded(
        world: &World,
        config: &str,
        build: impl FnOnce(
            agent_controller::controller::AgentControllerBuilder,
        ) -> agent_controller::controller::AgentControllerBuilder,
    ) -> (RunOutcome, Session, Duration) {
        let path = world.ws.plan("greet.md", PLAN);
        let model = replay(vec![
            ReplayModel::call("p1", "submit_plan", json!({ "path": path })),
            ReplayModel::text("building"),
        ]);
        let controller = build(world.builder(config, model))
            .build()
            .expect("controller");
        let mut session = controller
            .start_session(SessionOptions::new().mode("plan"))
            .await
            .expect("session");
        let started = Instant::now();
        let outcome =
            tokio::time::timeout(Duration::from_secs(20), session.send_message("plan it"))
                .await
                .expect("the reviewer held the run past 20s: it is not bounded")
                .expect("runs");
        (outcome, session, started.elapsed())
    }

    /// The plan waits for a person, nothing decided, the review escalated saying it timed out
    /// after 1s, within the entry's 1s (not the 2m default).
    fn assert_timed_out(world: &World, outcome: &RunOutcome, session: &Session, took: Duration) {
        assert!(
            matches!(outcome, RunOutcome::Suspended { .. }),
            "a person decides: {outcome:?}"
        );
        assert_eq!(session.mode().id(), "plan");
        assert!(session.decision_history().is_empty());
        let review = plan_review(session).expect("the failed review, shown");
        assert_eq!(review.decision, ReviewDecision::Escalate);
        assert!(
            review
                .error
                .as_deref()
                .is_some_and(|e| e.contains("timed out after 1s")),
            "{review:?}"
        );
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(8),
            "bounded by the entry's 1s: {took:?}"
        );
        assert!(world.log(session.id()).is_empty(), "nothing decided");
    }

    #[tokio::test]
    async fn a_model_reviewer_whose_provider_hangs_escalates_within_its_timeout() {
        let world = World::new("");
        let config = config("decide", "1s").replace(
            "command = [\"sh\", \"review/critic.sh\"]",
            "model = \"test/silent\"",
        );
        assert!(
            config.contains("model = \"test/silent\"\ntimeout = \"1s\""),
            "{config}"
        );
        let (outcome, session, took) = submit_bounded(&world, &config, |builder| {
            builder.model_chooser(|_: &str| Ok(Arc::new(Silent) as Arc<dyn LanguageModel>))
        })
        .await;
        assert_timed_out(&world, &outcome, &session, took);
    }

    #[tokio::test]
    async fn a_host_reviewer_that_never_answers_escalates_within_the_entrys_timeout_and_is_stopped()
    {
        let world = World::new("");
        let reviewer = NeverAnswers::default();
        let stopped = reviewer.stopped.clone();
        let (outcome, session, took) = submit_bounded(&world, &config("decide", "1s"), |builder| {
            builder.reviewer("critic", reviewer)
        })
        .await;
        assert_timed_out(&world, &outcome, &session, took);
        // Its review is dropped, not left running behind the run.
        assert!(is_set_soon(&stopped).await, "the review was stopped");
    }

    /// A run cancelled while its reviewer reviews (within a 10m timeout) stops the review too.
    #[tokio::test]
    async fn a_review_still_running_when_the_run_is_cancelled_is_stopped() {
        let world = World::new("");
        let reviewer = NeverAnswers::default();
        let (started, stopped) = (reviewer.started.clone(), reviewer.stopped.clone());
        let path = world.ws.plan("greet.md", PLAN);
        let model = replay(vec![
            ReplayModel::call("p1", "submit_plan", json!({ "path": path })),
            ReplayModel::text("building"),
        ]);
        let controller = world
            .builder(&config("decide", "10m"), model)
            .reviewer("critic", reviewer)
            .build()
            .expect("controller");
        let mut session = controller
            .start_session(SessionOptions::new().mode("plan"))
            .await
            .expect("session");
        let handle = session.cancel_handle();
        let canceller = tokio::spawn(async move {
            started.notified().await;
            handle.cancel()
        });
        tokio::time::timeout(Duration::from_secs(20), session.send_message("plan it"))
            .await
            .expect("the cancelled run is back")
            .expect("runs");
        assert!(canceller.await.expect("task"), "a run was in progress");
        assert!(is_set_soon(&stopped).await, "the review was stopped");
    }
}

/// With `reviewToolCalls`, a waiting call goes to the reviewer too: under `decide` its
/// approval runs the call unasked, pinned to the arguments it saw.
#[tokio::test]
async fn a_reviewer_with_review_tool_calls_decides_a_waiting_call() {
    let world = World::new(&answering(
        r#"{"decision": "approve", "reason": "a harmless file"}"#,
    ));
    let model = replay(vec![
        ReplayModel::call(
            "w1",
            "write_file",
            json!({ "path": "hello.txt", "content": "hi" }),
        ),
        ReplayModel::text("done"),
    ]);
    let controller = world.controller(&config("decide", "10s"), model);
    let mut session = controller
        .start_session(SessionOptions::new().mode("build"))
        .await
        .expect("session");
    let outcome = session.send_message("write").await.expect("runs");
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(world.ws.path().join("hello.txt").exists(), "it ran");
    let seen = world.seen();
    assert_eq!(seen["on"], "toolCall");
    assert_eq!(seen["toolName"], "write_file");
    let record = session.decision_history().last().expect("the approval");
    assert_eq!(record.how(), DecidedHow::Reviewer);
    assert_eq!(record.tool_name.as_deref(), Some("write_file"));
    assert_eq!(
        record.sha256.as_ref(),
        seen["argsSha256"].as_str().map(str::to_owned).as_ref()
    );
    let log = world.log(session.id());
    assert_eq!(log[0]["how"], "reviewer");
}

/// `config(may, "10s")` whose `build` mode may start subagent `helper`, which may write: a
/// child runs under its parent mode's rules with its own on top, the parent's reviewer among
/// them.
fn subagent_config(may: &str) -> String {
    config(may, "10s").replace(
        "availableTools = [\"read_file\", \"write_file\"]\n",
        "availableTools = [\"read_file\", \"write_file\", \"subagent\"]\nsubagents = [\"helper\"]\n",
    ) + "\n[[subagents]]\nid = \"helper\"\ndescription = \"Writes files.\"\navailableTools = [\"read_file\", \"write_file\"]\n"
}

/// The parent's model starts a `helper`, whose model writes `hello.txt` (a call that waits in
/// the parent's `build` mode), then each says it is done: the session and how its run ended.
async fn child_writes(world: &World, config: &str) -> (RunOutcome, Session) {
    assert!(config.contains("subagents = [\"helper\"]"), "{config}");
    let model = replay(vec![
        ReplayModel::call(
            "s1",
            "subagent",
            json!({ "agentType": "helper", "task": "write hello.txt" }),
        ),
        ReplayModel::call(
            "w1",
            "write_file",
            json!({ "path": "hello.txt", "content": "hi" }),
        ),
        ReplayModel::text("CHILD-DONE"),
        ReplayModel::text("parent done"),
    ]);
    let controller = world
        .builder(config, model)
        .subagent_concurrency(1)
        .build()
        .expect("controller");
    let mut session = controller
        .start_session(SessionOptions::new().mode("build"))
        .await
        .expect("session");
    let outcome = session.send_message("delegate").await.expect("runs");
    (outcome, session)
}

/// A subagent's waiting call goes to its parent mode's reviewer as the parent's own would
/// (the child runs under its parent mode's rules): under `decide` the reviewer's approval runs
/// it and nobody is asked.
#[tokio::test]
async fn a_subagents_waiting_call_goes_to_the_parent_modes_reviewer_which_may_decide() {
    let world = World::new(&answering(
        r#"{"decision": "approve", "reason": "a harmless file"}"#,
    ));
    let (outcome, session) = child_writes(&world, &subagent_config("decide")).await;
    assert!(
        matches!(outcome, RunOutcome::Completed { .. }),
        "the reviewer approved the child's call: {outcome:?}"
    );
    assert!(world.ws.path().join("hello.txt").exists(), "it ran");
    let seen = world.seen();
    assert_eq!(seen["on"], "toolCall");
    assert_eq!(seen["toolName"], "write_file");
    assert!(session.pending().is_empty());
}

/// Under `advise` a subagent's waiting call reaches the person in the parent's session with
/// the reviewer's verdict shown beside it, as the parent's own call would.
#[tokio::test]
async fn a_subagents_waiting_call_shows_the_parent_modes_reviewers_advice() {
    let world = World::new(&answering(
        r#"{"decision": "reject", "reason": "not that file"}"#,
    ));
    let (outcome, session) = child_writes(&world, &subagent_config("advise")).await;
    assert!(
        matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
        "a person decides: {outcome:?}"
    );
    assert!(!world.ws.path().join("hello.txt").exists());
    let pending = session.pending();
    let call = pending
        .iter()
        .find_map(PendingDecision::as_tool_call)
        .expect("the child's call waits in the parent's session");
    assert_eq!(call.tool_name(), "write_file");
    let review = call.payload().review.as_deref().expect("the verdict shown");
    assert_eq!(review.decision, ReviewDecision::Reject);
    assert!(!review.decided);
    let listed = world.pending_json();
    let write = listed
        .iter()
        .find(|p| p["toolName"] == "write_file")
        .expect("pending lists the child's call");
    assert_eq!(write["review"]["reason"], "not that file", "{listed:?}");
}

/// A reviewer's approval never lets through a call the managed config holds (its
/// `requireApproval`, or an `ask` rule of its `rules`): the call waits for a person, who sees
/// the verdict (without the managed file the reviewer's approval runs it:
/// `a_reviewer_with_review_tool_calls_decides_a_waiting_call`).
#[tokio::test]
async fn a_reviewers_approval_never_lets_through_a_call_the_managed_config_holds() {
    let managed_files = [
        "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n",
        "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", action = \"ask\" }]\n",
    ];
    for managed in managed_files {
        let world = World::new(&answering(
            r#"{"decision": "approve", "reason": "a harmless file"}"#,
        ));
        let project = world.ws.path().join("modes.toml");
        std::fs::write(&project, config("decide", "10s")).expect("project");
        let managed_path = world.store_dir.path().join("managed.toml");
        std::fs::write(&managed_path, managed).expect("managed");
        let graph = agent_controller::config::ConfigSources::new(&project)
            .user_file(None)
            .managed_file(Some(managed_path))
            .load()
            .expect("merged")
            .graph()
            .expect("valid");
        let model = replay(vec![
            ReplayModel::call(
                "w1",
                "write_file",
                json!({ "path": "hello.txt", "content": "hi" }),
            ),
            ReplayModel::text("done"),
        ]);
        let store = Arc::new(FileStore::open(world.store_dir.path()).expect("store"));
        let controller = AgentController::builder(graph, model)
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(world.ws.path())
            .store(store)
            .build()
            .expect("controller");
        let mut session = controller
            .start_session(SessionOptions::new().mode("build"))
            .await
            .expect("session");
        let outcome = session.send_message("write").await.expect("runs");
        assert!(
            matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
            "{managed}: the managed config holds it for a person: {outcome:?}"
        );
        assert!(!world.ws.path().join("hello.txt").exists(), "{managed}");
        assert_eq!(
            world.seen()["toolName"],
            "write_file",
            "{managed}: reviewed"
        );
        let call = common::waiting_calls(&session).remove(0);
        let review = call.payload().review.as_deref().expect("the verdict shown");
        assert_eq!(review.decision, ReviewDecision::Approve, "{managed}");
        assert!(!review.decided, "{managed}: advice only");
        assert!(session.decision_history().is_empty(), "{managed}");
        let id = call.decision_id().to_owned();
        session
            .decide(&id, Decision::approve().decided_by("alice"))
            .await
            .expect("the person approves");
        assert!(world.ws.path().join("hello.txt").exists(), "{managed}");
        let log = world.log(session.id());
        assert_eq!(log[0]["how"], "person", "{managed}: {log:?}");
        assert_eq!(log[0]["decidedBy"], "alice", "{managed}");
    }
}

/// A reviewer's script is protected from the model's writes, like a hook's.
#[tokio::test]
async fn a_reviewers_script_is_protected_from_the_models_writes() {
    let world = World::new(&answering(r#"{"decision": "escalate"}"#));
    let model = replay(vec![
        ReplayModel::call(
            "w1",
            "write_file",
            json!({ "path": "review/critic.sh", "content": "echo approve" }),
        ),
        ReplayModel::text("done"),
    ]);
    let config = config("advise", "10s").replace("reviewToolCalls = true\n", "");
    let controller = world.controller(&config, model);
    let mut session = controller
        .start_session(SessionOptions::new().mode("build"))
        .await
        .expect("session");
    let outcome = session.send_message("write").await.expect("runs");
    if let RunOutcome::ToolCallsSuspended { .. } = outcome {
        let id = session.pending()[0].decision_id().to_owned();
        session
            .decide(&id, Decision::approve())
            .await
            .expect("decided");
    }
    let script = std::fs::read_to_string(world.ws.path().join("review/critic.sh")).expect("script");
    assert!(
        script.starts_with("cat > review/seen.json"),
        "untouched: {script}"
    );
}

/// `check` refuses a `reviewBy` naming no reviewer at its line and column, and no longer says
/// reviewers are not enforced.
#[test]
fn check_places_an_unknown_reviewer_and_warns_no_more() {
    let errors = config::check(
        "[[modes]]\nid = \"plan\"\nreviewBy = \"critc\"\n\n[[reviewers]]\nid = \"critic\"\ncommand = [\"x\"]\n",
        "modes.toml",
    );
    let placed: Vec<(usize, usize, &str)> = errors
        .iter()
        .map(|e| {
            let at = e.location().expect("placed");
            (at.line, at.column, e.message())
        })
        .collect();
    assert!(
        placed
            .iter()
            .any(|(l, c, m)| *l == 3 && *c == 12 && m.contains("did you mean `critic`")),
        "{placed:?}"
    );
    let graph = config::parse(&config("decide", "10s"), "modes.toml").expect("valid");
    let warnings = config::warnings_of(&graph, &ToolRegistry::with_workspace_tools());
    assert!(
        warnings
            .iter()
            .all(|w| w.kind() != config::ConfigErrorKind::NotEnforced),
        "{warnings:?}"
    );
}

/// A model reviewer takes a `timeout` as a command reviewer does (default 2m for a model, 10s
/// for a command, at most 10m),
/// and a bad or too long one is refused at its line and column.
#[test]
fn a_model_reviewer_takes_a_timeout_and_a_bad_one_is_placed() {
    let text = |timeout: &str| {
        format!(
            "[[modes]]\nid = \"plan\"\nreviewBy = \"critic\"\n\n[[reviewers]]\nid = \"critic\"\nmodel = \"openai/gpt-4o\"\ntimeout = \"{timeout}\"\n"
        )
    };
    let graph = config::parse(&text("30s"), "modes.toml").expect("a model reviewer's timeout");
    assert_eq!(graph.reviewers()[0].timeout().as_secs(), 30);
    let graph = config::parse(
        "[[modes]]\nid = \"plan\"\nreviewBy = \"critic\"\n\n[[reviewers]]\nid = \"critic\"\nmodel = \"openai/gpt-4o\"\n",
        "modes.toml",
    )
    .expect("valid");
    // A model's review takes longer than a script's: its default is two minutes.
    assert_eq!(
        graph.reviewers()[0].timeout(),
        agent_controller::review::DEFAULT_MODEL_REVIEW_TIMEOUT,
        "the default"
    );
    assert_eq!(
        agent_controller::review::DEFAULT_MODEL_REVIEW_TIMEOUT.as_secs(),
        120
    );
    let graph = config::parse(
        "[[modes]]\nid = \"plan\"\nreviewBy = \"lint\"\n\n[[reviewers]]\nid = \"lint\"\ncommand = [\"true\"]\n",
        "modes.toml",
    )
    .expect("valid");
    assert_eq!(
        graph.reviewers()[0].timeout().as_secs(),
        10,
        "a command's default"
    );
    for (timeout, says) in [("11m", "longer than"), ("soon", "soon")] {
        let error = config::parse(&text(timeout), "modes.toml").expect_err(timeout);
        let shown = error.to_string();
        assert!(
            shown.starts_with("modes.toml:8:11: ") && shown.contains(says),
            "{timeout}: {shown}"
        );
    }
}

/// A model reviewer, driven by the scripted OpenAI-compatible server: offered no tools, told its
/// instructions, given the plan; its answer decides.
#[cfg(feature = "openai")]
mod model {
    use super::*;
    use agent_controller::model::reviewer::ModelReviewer;
    use common::openai_server::{ScriptedServer, call, calls, text};

    /// Submits the plan under a model reviewer answering `reply`: the outcome, the session, and
    /// the body of the reviewer's request.
    async fn submit_to_model(
        world: &World,
        reply: common::openai_server::Reply,
    ) -> (RunOutcome, Session, Value) {
        let server = ScriptedServer::start(vec![reply]).await;
        let reviewer = ModelReviewer::new(Arc::new(server.model()), "Reject plans without tests.");
        let config = config("decide", "10s").replace(
            "command = [\"sh\", \"review/critic.sh\"]\ntimeout = \"10s\"",
            "model = \"openai/test-model\"\ninstructions = \"Reject plans without tests.\"",
        );
        let path = world.ws.plan("greet.md", PLAN);
        let model = replay(vec![
            ReplayModel::call("p1", "submit_plan", json!({ "path": path })),
            ReplayModel::text("building"),
        ]);
        let controller = world
            .builder(&config, model)
            .reviewer("critic", reviewer)
            .build()
            .expect("controller");
        let mut session = controller
            .start_session(SessionOptions::new().mode("plan"))
            .await
            .expect("session");
        let outcome = session.send_message("plan it").await.expect("runs");
        let body = server
            .bodies()
            .await
            .pop()
            .expect("the reviewer asked the model");
        (outcome, session, body)
    }

    #[tokio::test]
    async fn a_model_reviewer_decides_offered_no_tools() {
        let world = World::new("");
        let (outcome, session, body) = submit_to_model(
            &world,
            text(r#"{"decision": "approve", "reason": "step 2 tests it"}"#),
        )
        .await;
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
        assert_eq!(session.mode().id(), "build");
        assert!(
            body.get("tools")
                .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)),
            "no tools offered: {body}"
        );
        let said = body.to_string();
        assert!(said.contains("Reject plans without tests."), "{said}");
        assert!(
            said.contains("2. Test it"),
            "the plan is in its prompt: {said}"
        );
        let record = session.decision_history().last().expect("the approval");
        assert_eq!(record.how(), DecidedHow::Reviewer);
        let log = world.log(session.id());
        assert_eq!(log[0]["how"], "reviewer");
        assert_eq!(log[0]["review"]["reason"], "step 2 tests it");
    }

    /// A model that answers prose, a JSON object with an unknown decision or field, or two
    /// objects escalates, saying why: nothing is decided and the plan waits for a person.
    #[tokio::test]
    async fn a_model_reviewer_that_answers_malformed_json_escalates() {
        for (answer, why) in [
            ("Looks good to me, approve.", "not a JSON object"),
            (r#"{"decision": "approve""#, "not a JSON object"),
            (
                r#"{"decision": "yes"}"#,
                "is not approve, reject or escalate",
            ),
            (
                r#"{"decision": "approve", "grant": "write_file"}"#,
                "not a JSON object",
            ),
            (
                r#"{"decision": "approve"} {"decision": "approve"}"#,
                "more than one JSON value",
            ),
            (r#"["approve"]"#, "not a JSON object"),
        ] {
            let world = World::new("");
            let (outcome, session, _) = submit_to_model(&world, text(answer)).await;
            assert!(
                matches!(outcome, RunOutcome::Suspended { .. }),
                "{answer}: {outcome:?}"
            );
            assert_eq!(session.mode().id(), "plan", "{answer}");
            assert!(session.decision_history().is_empty(), "{answer}");
            let review = plan_review(&session).expect("shown");
            assert_eq!(review.decision, ReviewDecision::Escalate, "{answer}");
            assert!(
                review.error.as_deref().is_some_and(|e| e.contains(why)),
                "{answer}: {review:?}"
            );
            assert!(world.log(session.id()).is_empty(), "{answer}");
        }
    }

    #[tokio::test]
    async fn a_model_reviewer_that_calls_a_tool_escalates() {
        let world = World::new("");
        let (outcome, session, _) = submit_to_model(
            &world,
            calls([call("c1", "write_file", r#"{"path": "x", "content": "y"}"#)]),
        )
        .await;
        assert!(
            matches!(outcome, RunOutcome::Suspended { .. }),
            "{outcome:?}"
        );
        let review = plan_review(&session).expect("shown");
        assert_eq!(review.decision, ReviewDecision::Escalate);
        assert!(
            review
                .error
                .as_deref()
                .is_some_and(|e| e.contains("called a tool")),
            "{review:?}"
        );
        assert!(!world.ws.path().join("x").exists());
        assert!(world.log(session.id()).is_empty());
    }
}

/// The CLI builds a config's model reviewer with its `--model` chooser: `run` with the plan,
/// the reviewer (the same scripted server) advises, and the terminal prompt shows its verdict
/// beside the plan before the person's `y`.
#[cfg(feature = "openai")]
#[test]
fn the_cli_runs_a_config_model_reviewer_and_its_prompt_shows_the_verdict() {
    use common::cli::world::World;
    use common::openai_server::{calls, submit, text};
    const CONFIG: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "submit_plan"]
reviewBy = "critic"

[[modes]]
id = "build"
default = true

[[reviewers]]
id = "critic"
model = "openai/test-model"
instructions = "Be brief."
"#;
    let world = World::with_config(
        "dir",
        CONFIG,
        vec![
            calls([submit("call_1", ".agent/plans/greet.md")]),
            text(r#"{"decision": "escalate", "reason": "a person should see step 2"}"#),
            text("Built."),
        ],
    );
    world.ws.plan("greet.md", PLAN);
    let out = world.cli("run", true, &["--mode", "plan", "Plan it"], Some("y\n"));
    let said = common::cli::text(&out);
    assert_eq!(out.status.code(), Some(common::cli::DONE), "{said}");
    assert!(
        said.contains("reviewer critic: escalate: a person should see step 2"),
        "{said}"
    );
    // The person's `y` approved the plan, and the build ran.
    assert!(said.contains("Built."), "{said}");
}
