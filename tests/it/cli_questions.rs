//! The CLI for questions (issue 37): `pending` lists a question of `ask_user` (its text, its
//! options, every character visible), `decide SESSION --answer TEXT` (repeatable for a
//! multi-select question) or `--answer-json JSON` answers it and carries the run on, and an
//! answer that does not fit is refused with nothing changed. The model is the real OpenAI
//! provider against the scripted OpenAI-compatible server, on every store.
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use common::cli::world::{World, pending, stores};
use common::cli::{DONE, INVALID, NOT_APPROVED, PENDING, stdout};
use common::openai_server::{Reply, call, calls, text};
use common::stderr;
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "ask_user"]
requireApproval = ["write_file"]
"#;

fn ask(args: Value) -> Reply {
    calls([call("call_1", "ask_user", &args.to_string())])
}

/// The `tool` message contents of the `n`-th request (0-based).
fn tool_results(world: &World, n: usize) -> Vec<String> {
    world.server.bodies_blocking()[n]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn pending_lists_a_question_and_decide_answer_carries_the_run_on() {
    for kind in stores() {
        let options = json!([
            { "label": "a", "description": "first\u{202e}" },
            { "label": "b" },
            { "label": "c" },
        ]);
        let world = World::with_config(
            kind,
            CONFIG,
            vec![
                ask(
                    json!({ "question": "Which\nones?", "options": options, "selectionMode": "multi_select" }),
                ),
                text("Thanks."),
            ],
        );
        let (out, session) = world.run_stored("Pick");
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));

        let listed = world.pending_json();
        assert_eq!(listed.len(), 1, "{kind}: {listed:?}");
        assert_eq!(listed[0]["kind"], "question", "{kind}");
        assert_eq!(listed[0]["payload"]["question"], "Which\nones?", "{kind}");
        let text = stdout(&pending(&world.spec, false));
        assert!(
            text.contains("question \"Which\\nones?\"") && text.contains("multi_select: 1. \"a\""),
            "{kind}: {text}"
        );
        assert!(
            !text.contains('\u{202e}'),
            "{kind}: every character visible: {text}"
        );

        // An answer that does not fit: refused, nothing changed.
        let refused = world.decide(&session, &["--answer", "z"]);
        assert_eq!(
            refused.status.code(),
            Some(INVALID),
            "{kind}: {}",
            stderr(&refused)
        );
        assert_eq!(world.pending_json().len(), 1, "{kind}");
        assert_eq!(world.server.served(), 1, "{kind}");
        // Approving a question is refused too.
        let approved = world.decide(&session, &["--approve"]);
        assert_eq!(
            approved.status.code(),
            Some(INVALID),
            "{kind}: {}",
            stderr(&approved)
        );

        // Trial 5 (L5): the refusal lists the labels and numbers.
        assert!(
            stderr(&refused).contains("(`a`, `b`, `c`) or its number (1 to 3)"),
            "{kind}: {}",
            stderr(&refused)
        );
        // An option's number, as the prompt takes it, or its label.
        let out = world.decide(&session, &["--answer", "1", "--answer", "c"]);
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert!(world.pending_json().is_empty(), "{kind}");
        assert_eq!(tool_results(&world, 1), ["The user chose: a, c"], "{kind}");
    }
}

#[test]
fn decide_answer_json_and_an_answer_to_a_tool_call_is_refused() {
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![
            calls([
                call(
                    "call_1",
                    "write_file",
                    &json!({ "path": "a.txt", "content": "x" }).to_string(),
                ),
                call(
                    "call_2",
                    "ask_user",
                    &json!({ "question": "Name?" }).to_string(),
                ),
            ]),
            text("done"),
        ],
    );
    let (out, session) = world.run_stored("go");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let refused = world.decide(&session, &["--decision", "decision_1", "--answer", "x"]);
    assert_eq!(refused.status.code(), Some(INVALID), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("goes with a question"),
        "{}",
        stderr(&refused)
    );
    let out = world.decide(
        &session,
        &["--decision", "decision_2", "--answer-json", "\"Settings\""],
    );
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    // The last decision carries the run on: the write rejected (exit 3), the answer resumed.
    let out = world.decide(&session, &["--decision", "decision_1", "--reject"]);
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{}", stderr(&out));
    let results = tool_results(&world, 1);
    assert!(
        results.contains(&"The user answered: Settings".to_owned()),
        "{results:?}"
    );
}

/// `run` without `--json`, the answers typed on stdin; no store unless `store`.
fn run_typing(world: &World, store: bool, input: &str) -> std::process::Output {
    world.cli("run", store, &["Pick"], Some(input))
}

#[test]
fn the_terminal_shows_a_question_numbered_and_reads_picks() {
    let options = json!([
        { "label": "a", "description": "first\u{202e}" },
        { "label": "b\u{1b}[2K" },
        { "label": "c" },
    ]);
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![
            ask(
                json!({ "question": "Which\u{200b} ones?", "options": options, "selectionMode": "multi_select" }),
            ),
            text("Thanks."),
        ],
    );
    // A number out of range and a bad pick are refused with the reason; then `1,3` picks two.
    let out = run_typing(&world, false, "4\n1,x\n1,3\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{err}");
    assert!(err.contains("Which\\u{200b} ones?"), "{err}");
    assert!(
        err.contains("1. a (first\\u{202e})")
            && err.contains("2. b\\u{1b}[2K")
            && err.contains("3. c"),
        "{err}"
    );
    assert!(
        !err.contains('\u{202e}') && !err.contains('\u{1b}'),
        "{err}"
    );
    assert!(err.contains("`4` is not an option"), "{err}");
    assert!(err.contains("`x` is not an option"), "{err}");
    assert_eq!(tool_results(&world, 1), ["The user chose: a, c"]);
}

#[test]
fn the_terminal_reads_a_single_pick_and_free_text() {
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![
            ask(json!({ "question": "Which?", "options": [{ "label": "a" }, { "label": "b" }] })),
            text("Thanks."),
        ],
    );
    // Two numbers for a single-select question are refused.
    let out = run_typing(&world, false, "1,2\n2\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{err}");
    assert!(err.contains("pick one"), "{err}");
    assert_eq!(tool_results(&world, 1), ["The user chose: b"]);

    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![ask(json!({ "question": "Name?" })), text("Thanks.")],
    );
    let out = run_typing(&world, false, "\nthe 2 settings, page\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{err}");
    assert!(err.contains("Name?"), "{err}");
    assert_eq!(
        tool_results(&world, 1),
        ["The user answered: the 2 settings, page"]
    );
}

#[test]
fn end_of_input_at_a_question_answers_nothing() {
    for store in [true, false] {
        let world = World::with_config(
            stores()[0],
            CONFIG,
            vec![ask(json!({ "question": "Name?" })), text("Thanks.")],
        );
        let out = run_typing(&world, store, "");
        let err = stderr(&out);
        assert!(err.contains("Name?"), "{err}");
        assert!(err.contains("not answered"), "{err}");
        if store {
            assert_eq!(out.status.code(), Some(PENDING), "{err}");
            assert!(
                err.contains("the question stays pending; answer it later"),
                "{err}"
            );
            assert!(err.contains("--answer TEXT"), "{err}");
            assert_eq!(world.pending_json().len(), 1);
        } else {
            assert_eq!(out.status.code(), Some(NOT_APPROVED), "{err}");
        }
        assert_eq!(world.server.served(), 1, "nothing was made up: {err}");
    }
}

#[test]
fn decide_flags_that_do_not_fit_a_question_are_refused_by_their_own_name() {
    // Trial findings L4 to L7: a repeated choice, `--always` with an answer, a wrong sha256 and
    // `--answer-json` on a tool call are refused, each naming what was wrong, nothing changed.
    let options = json!([{ "label": "a" }, { "label": "b" }]);
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![
            calls([
                call(
                    "call_1",
                    "write_file",
                    &json!({ "path": "a.txt", "content": "x" }).to_string(),
                ),
                call(
                    "call_2",
                    "ask_user",
                    &json!({ "question": "Which?", "options": options, "selectionMode": "multi_select" })
                        .to_string(),
                ),
            ]),
            text("done"),
        ],
    );
    let (out, session) = world.run_stored("go");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let question = ["--decision", "decision_2"];
    let refused = |flags: &[&str], code: i32, says: &[&str], lacks: &str| {
        let mut args = question.to_vec();
        args.extend_from_slice(flags);
        let out = world.decide(&session, &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{flags:?}: {err}");
        for said in says {
            assert!(err.contains(said), "{flags:?}: {err}");
        }
        assert!(lacks.is_empty() || !err.contains(lacks), "{flags:?}: {err}");
        assert_eq!(world.pending_json().len(), 2, "{flags:?}: nothing changed");
    };
    // L7: a choice picked twice, as the prompt refuses `1,1`.
    refused(
        &["--answer", "a", "--answer", "a"],
        INVALID,
        &["repeats"],
        "",
    );
    refused(
        &["--answer-json", "[\"a\",\"a\"]"],
        INVALID,
        &["repeats"],
        "",
    );
    // L6: an answer cannot be always allowed.
    refused(&["--answer", "a", "--always"], INVALID, &["--always"], "");
    // L4: the pin names a question, not a plan.
    refused(
        &["--answer", "a", "--sha256", "0000000000000000"],
        common::cli::REFUSED,
        &["question decision_2", "not the question you meant"],
        "plan",
    );
    // L5: `--answer-json` on a tool call names `--answer-json`.
    let out = world.decide(
        &session,
        &["--decision", "decision_1", "--answer-json", "true"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(INVALID), "{err}");
    assert!(err.contains("--answer-json goes with a question"), "{err}");
    assert_eq!(world.server.served(), 1);
}

/// Trial 5 (M3): a flag that does not go with the verdict given is refused (exit 2), naming
/// it, and nothing is answered, whatever the combination: `--to`, `--plan-file`, `--comment`,
/// `--model-for-next` and `--feedback` with an answer; `--to`, `--plan-file` and
/// `--model-for-next` with a rejection. Before, `--answer bob --to build --plan-file
/// /etc/passwd` answered and dropped the two flags without a word.
#[test]
fn decide_refuses_every_flag_that_does_not_go_with_its_verdict_and_answers_nothing() {
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![ask(json!({ "question": "Name?" })), text("Thanks.")],
    );
    let (out, session) = world.run_stored("go");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let edited = world.ws.path().join("edited.md");
    std::fs::write(&edited, "# Plan\n\n1. Step.\n").expect("plan");
    let edited = edited.to_str().expect("utf-8");
    let before = world.pending_json();
    let extras: [&[&str]; 5] = [
        &["--to", "build"],
        &["--plan-file", edited],
        &["--comment", "1:x"],
        &["--model-for-next", "scripted"],
        &["--feedback", "x"],
    ];
    let mut tried = Vec::new();
    for verdict in [&["--answer", "bob"][..], &["--answer-json", "\"bob\""][..]] {
        for extra in extras {
            tried.push([verdict, extra].concat());
        }
    }
    for extra in &extras[..2] {
        tried.push([&["--reject"][..], extra].concat());
    }
    tried.push(vec!["--reject", "--model-for-next", "scripted"]);
    for flags in tried {
        let out = world.decide(&session, &flags);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(INVALID), "{flags:?}: {err}");
        let named = flags
            .iter()
            .rev()
            .find(|f| f.starts_with("--") && !["--answer", "--answer-json", "--reject"].contains(f))
            .expect("a flag");
        assert!(err.contains(named), "{flags:?} names {named}: {err}");
        assert_eq!(world.pending_json(), before, "{flags:?}: nothing changed");
        assert_eq!(world.server.served(), 1, "{flags:?}: nothing answered");
    }
    let out = world.decide(&session, &["--answer", "bob"]);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert_eq!(tool_results(&world, 1), ["The user answered: bob"]);
}

/// Trial 5 (L8): an answer that loses the race (another `decide` answered the question after
/// this one loaded the session) is refused in words about the question, not a plan.
#[test]
fn an_answer_that_loses_the_race_speaks_of_the_question() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::process::Stdio;
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![ask(json!({ "question": "Name?" })), text("Thanks.")],
    );
    let (out, session) = world.run_stored("go");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let mut slow = crate::common::agent_controller();
    slow.arg("decide")
        .arg("--config")
        .arg(&world.config)
        .args([
            "--model",
            "openai/test-model",
            "--store",
            &world.spec,
            &session,
        ])
        .envs(world.server.env())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut slow = slow.spawn().expect("spawn");
    let mut err = BufReader::new(slow.stderr.take().expect("stderr"));
    // The prompt shows the question once the session is loaded.
    let mut seen = String::new();
    while !seen.contains("Name?") {
        let mut line = String::new();
        assert!(err.read_line(&mut line).expect("read") > 0, "{seen}");
        seen.push_str(&line);
    }
    let fast = world.decide(&session, &["--answer", "alice"]);
    assert_eq!(fast.status.code(), Some(DONE), "{}", stderr(&fast));
    let mut stdin = slow.stdin.take().expect("stdin");
    stdin.write_all(b"bob\n").expect("answer");
    drop(stdin);
    err.read_to_string(&mut seen).expect("read");
    let status = slow.wait().expect("wait");
    assert_eq!(status.code(), Some(common::cli::REFUSED), "{seen}");
    assert!(
        seen.contains("the question was answered or declined by someone else"),
        "{seen}"
    );
    assert!(!seen.contains("the plan was"), "{seen}");
}

#[test]
fn a_question_or_label_of_invisible_characters_is_blank_for_the_model() {
    // L1: a question of zero-width spaces or a Hangul filler, and an option labelled with a
    // zero-width space, were asked; they are blank, an error for the model, and nobody is asked.
    for args in [
        json!({ "question": "\u{200b}\u{200b}" }),
        json!({ "question": " \u{3164} \u{2800}" }),
        json!({ "question": "Which?", "options": [{ "label": "\u{200b}" }, { "label": "b" }] }),
    ] {
        let world = World::with_config(stores()[0], CONFIG, vec![ask(args.clone()), text("ok")]);
        let out = run_typing(&world, false, "1\n");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(DONE), "{args}: {err}");
        assert!(
            !err.contains("question from the model"),
            "{args}: not asked: {err}"
        );
        let results = tool_results(&world, 1);
        assert!(
            results.len() == 1 && results[0].contains("blank"),
            "{args}: {results:?}"
        );
    }
}

/// Trial 5 (L12): a question of 20 options, each with a long description, is listed with
/// every option: each description is cut on its own, saying so, never the list of options.
#[test]
fn pending_lists_every_option_of_a_question_cutting_only_descriptions() {
    let options: Vec<Value> = (1..=20)
        .map(|k| json!({ "label": format!("o{k}"), "description": "d".repeat(1_000) }))
        .collect();
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![ask(json!({ "question": "pick", "options": options }))],
    );
    let (out, _) = world.run_stored("Pick");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let text = stdout(&pending(&world.spec, false));
    for k in 1..=20 {
        assert!(
            text.contains(&format!("{k}. \"o{k}\" (\"d")),
            "option {k}: {text}"
        );
    }
    assert_eq!(text.matches("characters not shown").count(), 20, "{text}");
}

#[test]
fn pending_separates_a_question_from_its_options_by_a_real_tab() {
    // L3: the tab between a question and its options was printed as `\u{9}`.
    let options = json!([{ "label": "a" }, { "label": "b" }]);
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![ask(json!({ "question": "pick", "options": options }))],
    );
    let (out, _) = world.run_stored("Pick");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let text = stdout(&pending(&world.spec, false));
    assert!(
        text.contains("question \"pick\"\tsingle_select: 1. \"a\"; 2. \"b\"\tsha256 "),
        "{text}"
    );
    assert!(!text.contains("\\u{9}"), "{text}");
}

#[test]
fn a_question_cannot_pass_for_the_approval_prompt() {
    // L2: a question imitating the plan-approval prompt was printed line for line as the tool's
    // own; every line of it is now behind the gutter that marks the model's words.
    let fake = "# Harmless plan\n\n1. Fix typo.\n\n(plan file .agent/plans/p.md, sha256 0123456789ab...)\nApprove this plan and switch to ● Build (build)?\n[y]es approve  [n]o reject";
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![ask(json!({ "question": fake })), text("Thanks.")],
    );
    let out = run_typing(&world, false, "y\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{err}");
    for line in fake.lines() {
        assert!(
            err.contains(&format!("│ {line}\n")),
            "{line:?} behind the gutter: {err}"
        );
    }
    assert!(
        !err.lines()
            .any(|l| l.starts_with("Approve this plan") || l.starts_with("[y]es")),
        "no line passes for the prompt: {err}"
    );
}

#[test]
fn a_question_cut_off_by_end_of_input_is_not_answered_rather_than_not_approved() {
    // L13: the run's end said `ask_user cancelled (aborted): not approved`.
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![ask(json!({ "question": "Name?" })), text("Thanks.")],
    );
    let out = run_typing(&world, false, "");
    let shown = stdout(&out);
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{}", stderr(&out));
    assert!(
        shown.contains("ask_user cancelled (aborted): not answered"),
        "{shown}"
    );
    assert!(!shown.contains("not approved"), "{shown}");
}

#[test]
fn a_question_over_a_limit_tells_the_model_the_limit() {
    // L13: ask_user over a limit got the checker's bare `options has too many items` or
    // `question is too long`, which says neither how many nor how many are allowed.
    let many: Vec<Value> = (1..=21)
        .map(|n| json!({ "label": format!("o{n}") }))
        .collect();
    for (args, said) in [
        (
            json!({ "question": "Which?", "options": many }),
            "too many items: 21, at most 20",
        ),
        (
            json!({ "question": "x".repeat(4_001) }),
            "too long: 4001 characters, at most 4000",
        ),
    ] {
        let world = World::with_config(stores()[0], CONFIG, vec![ask(args), text("ok")]);
        let out = run_typing(&world, false, "");
        assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
        let results = tool_results(&world, 1);
        assert!(
            results.len() == 1 && results[0].contains(said),
            "{said}: {results:?}"
        );
    }
}

/// Issue 37: `decide --answer` of a tool of the user's own, which the CLI does not have. The
/// CLI records the validated answer (the question no longer waits for one), does not carry the
/// run on (its model is not called, the tool does not run here), and says that the host that
/// has the tool carries it on; a library host with the tool then does so
/// (`Session::continue_run`), its tool getting the answer and the model the tool's result.
#[test]
fn decide_answers_a_tool_the_cli_lacks_and_the_host_with_it_carries_the_run_on() {
    use std::sync::{Arc, Mutex};

    use agent_controller::model::Message;
    use agent_controller::model::scripted::ReplayModel;
    use agent_controller::{
        AgentController, FileStore, RunOutcome, SessionOptions, Tool, ToolContext, ToolOutput,
        ToolRegistry, async_trait,
    };

    const OWN: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "confirm_deploy"]
"#;

    struct ConfirmDeploy(Arc<Mutex<Vec<Value>>>);

    #[async_trait]
    impl Tool for ConfirmDeploy {
        fn name(&self) -> &str {
            "confirm_deploy"
        }
        fn description(&self) -> String {
            "Deploys once the user confirms.".to_owned()
        }
        fn input_schema(&self) -> Value {
            json!({ "type": "object", "properties": { "target": { "type": "string" } } })
        }
        async fn execute(&self, args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
            ToolOutput::suspend(
                "Deploy?",
                json!({ "target": args["target"] }),
                json!({ "type": "object", "properties": { "confirm": { "type": "boolean" } }, "required": ["confirm"] }),
            )
        }
        async fn resume(&self, args: &Value, answer: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
            self.0.lock().expect("answers").push(answer.clone());
            ToolOutput::ok(format!(
                "Deployed to {}.",
                args["target"].as_str().unwrap_or_default()
            ))
        }
    }

    let world = World::with_config("dir", OWN, vec![text("The CLI's model is never called.")]);
    let answers = Arc::new(Mutex::new(Vec::new()));
    let host = |model: ReplayModel| {
        let graph = agent_controller::config::parse(OWN, "modes.toml").expect("config");
        let mut tools = ToolRegistry::with_workspace_tools();
        tools
            .register(Arc::new(ConfirmDeploy(answers.clone())))
            .expect("register");
        let store = FileStore::open(&world.spec).expect("store");
        let model = Arc::new(model);
        let controller = AgentController::builder(graph, model.clone())
            .tools(tools)
            .workspace(world.ws.path())
            .store(Arc::new(store))
            .build()
            .expect("controller");
        (controller, model)
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (controller, _) = host(ReplayModel::new([ReplayModel::call(
        "call_1",
        "confirm_deploy",
        json!({ "target": "staging" }),
    )]));
    let session_id = runtime.block_on(async {
        let mut session = controller
            .start_session(SessionOptions::new())
            .await
            .expect("session");
        let outcome = session.send_message("Deploy").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::AwaitingAnswer { .. }),
            "{outcome:?}"
        );
        session.id().to_owned()
    });

    // An answer that does not fit is refused, and nothing changes.
    let refused = world.decide(&session_id, &["--answer-json", r#"{"confirm": "yes"}"#]);
    let why = stderr(&refused);
    assert_eq!(refused.status.code(), Some(INVALID), "{why}");
    assert!(
        why.contains("answer") && !why.contains("unknown tool"),
        "{why}"
    );
    let out = world.decide(&session_id, &["--answer-json", r#"{"confirm": true}"#]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(PENDING), "{err}");
    assert!(
        err.contains("confirm_deploy") && err.contains("carries the run on"),
        "{err}"
    );
    assert_eq!(
        world.server.served(),
        0,
        "the CLI does not carry the run on"
    );
    assert!(answers.lock().expect("answers").is_empty());
    // A second answer is refused: it was answered.
    let again = world.decide(&session_id, &["--answer-json", r#"{"confirm": false}"#]);
    assert_ne!(again.status.code(), Some(DONE), "{}", stderr(&again));

    let (controller, model) = host(ReplayModel::new([ReplayModel::text(
        "Staging is deployed.",
    )]));
    runtime.block_on(async {
        let mut session = controller
            .restore_session(&session_id, SessionOptions::new())
            .await
            .expect("restore");
        let outcome = session.continue_run().await.expect("carried on");
        assert!(
            matches!(outcome, RunOutcome::Completed { .. }),
            "{outcome:?}"
        );
    });
    assert_eq!(
        *answers.lock().expect("answers"),
        [json!({ "confirm": true })]
    );
    let results: Vec<String> = model.requests()[0]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["Deployed to staging."]);
}

/// Trial 5 L4: `decide` at the prompt (no verdict flag) answers the question and then asks
/// about what the resumed run waits on next, as `run` and `continue` do, in the same process;
/// with a verdict flag it still leaves that for the next `decide`.
#[test]
fn decide_at_the_prompt_carries_on_asking_as_run_does() {
    let world = World::with_config(
        stores()[0],
        CONFIG,
        vec![
            ask(
                json!({ "question": "Which theme?", "options": [{ "label": "dark" }, { "label": "light" }] }),
            ),
            calls([call(
                "call_2",
                "write_file",
                &json!({ "path": "theme.txt", "content": "dark" }).to_string(),
            )]),
            text("Done."),
        ],
    );
    let (out, session) = world.run_stored("Pick a theme");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let out = world.cli("decide", true, &[&session], Some("1\ny\n"));
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert!(world.pending_json().is_empty());
    assert_eq!(
        std::fs::read_to_string(world.ws.path().join("theme.txt")).expect("written"),
        "dark"
    );
    assert_eq!(world.server.served(), 3);
}
