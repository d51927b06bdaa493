//! The terminal side of `run`: the plan rendered as markdown on stderr, the prompt, no spinner or
//! escape codes when piped, and Ctrl-C at the prompt counting as not approved.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");

fn run(ws: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-controller"));
    cmd.args(["run", "--config", SHIPPED, "--workspace"])
        .arg(ws)
        .args(["--mode", "plan"])
        .args(extra)
        .arg("Add dark mode")
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn answer(ws: &Path, extra: &[&str], input: &str) -> Output {
    let mut child = run(ws, extra).spawn().expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    child.wait_with_output().expect("wait")
}

#[test]
fn the_plan_is_rendered_as_markdown_on_stderr_and_the_prompt_names_the_target() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = answer(ws.path(), &[], "y\n");
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).expect("utf-8");
    // The heading markers and list syntax are rendered, not shown raw.
    assert!(err.contains("Add dark mode"), "{err}");
    assert!(err.contains("\nSteps\n"), "{err}");
    assert!(!err.contains("## Steps"), "{err}");
    assert!(
        err.contains("1. Read the code this change touches."),
        "{err}"
    );
    assert!(
        err.contains("Approve this plan and switch to ● Build (build)?"),
        "{err}"
    );
    assert!(
        err.contains("[y]es approve  [n]o reject  or type feedback to reject with it"),
        "{err}"
    );
    // Piped: no colours, no spinner.
    assert!(
        !err.contains('\u{1b}'),
        "no escape codes when piped: {err:?}"
    );
    assert!(
        !err.contains("model working"),
        "no spinner when stdout is piped: {err}"
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        !stdout.contains("Approve this plan"),
        "the prompt stays off stdout"
    );
    assert!(
        stdout.contains("mode changed: plan -> build (plan_approved)"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("mode: build"), "{stdout}");
}

#[test]
fn with_json_stdout_holds_only_events() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = answer(ws.path(), &["--json"], "more tests\nn\n");
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    for line in stdout.lines() {
        let event: serde_json::Value = serde_json::from_str(line).expect("one JSON event per line");
        assert!(event["type"].is_string(), "{line}");
    }
    assert!(!stdout.contains("mode_changed"), "rejected: {stdout}");
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(
        err.matches("Approve this plan").count(),
        2,
        "feedback, then the revision: {err}"
    );
}

#[test]
fn end_of_input_at_the_prompt_is_not_approved_and_says_so() {
    let ws = tempfile::tempdir().expect("tempdir");
    let out = answer(ws.path(), &[], "");
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert!(
        err.contains("end of input: the plan is not approved; the mode stays `plan`"),
        "{err}"
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(!stdout.contains("mode changed"), "{stdout}");
    assert!(stdout.trim_end().ends_with("mode: plan"), "{stdout}");
}

/// Reads a pipe on a thread into a shared buffer, so the test can wait for the prompt.
fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let sink = buffer.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().expect("lock").extend_from_slice(&chunk[..n]);
        }
    });
    buffer
}

fn text(buffer: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buffer.lock().expect("lock")).into_owned()
}

fn wait_for(child: &mut Child, buffer: &Arc<Mutex<Vec<u8>>>, needle: &str) {
    let start = Instant::now();
    while !text(buffer).contains(needle) {
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "exited early: {}",
            text(buffer)
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no `{needle}` in {}",
            text(buffer)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_at_the_prompt_is_not_approved_keeps_the_mode_and_says_so() {
    let ws = tempfile::tempdir().expect("tempdir");
    let mut child = run(ws.path(), &["--json"]).spawn().expect("spawn");
    let _stdin = child.stdin.take(); // kept open: the prompt waits
    let stdout = collect(child.stdout.take().expect("stdout"));
    let stderr = collect(child.stderr.take().expect("stderr"));
    wait_for(&mut child, &stderr, "> ");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let status = child.wait().expect("wait");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(status.code(), Some(130), "{}", text(&stderr));
    assert!(
        text(&stderr).contains("interrupted: the plan is not approved; the mode stays `plan`"),
        "{}",
        text(&stderr)
    );
    let events: Vec<serde_json::Value> = text(&stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON event"))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(!kinds.contains(&"mode_changed"), "{kinds:?}");
    let cancelled = events
        .iter()
        .find(|e| e["type"] == "tool_suspension_cancelled")
        .expect("the suspension is cancelled");
    assert_eq!(cancelled["reason"], "aborted");
    assert_eq!(events.last().expect("events")["type"], "agent_end");
    assert_eq!(events.last().expect("events")["reason"], "aborted");
}

/// Ctrl-C while the model works (not at the prompt) stops the run and names the mode the session
/// is in at that moment: after an approved hand-over that is the new mode.
#[cfg(feature = "openai")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_the_model_works_names_the_current_mode() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let submit = concat!(
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",",
        "\"type\":\"function\",\"function\":{\"name\":\"submit_plan\",",
        "\"arguments\":\"{\\\"path\\\": \\\".agent/plans/p.md\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(submit, "text/event-stream"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    // The build-mode call never answers in time.
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_delay(Duration::from_secs(60)))
        .mount(&server)
        .await;

    let ws = tempfile::tempdir().expect("tempdir");
    let plans = ws.path().join(".agent/plans");
    std::fs::create_dir_all(&plans).expect("mkdir");
    std::fs::write(plans.join("p.md"), "# P\n\nDo it.\n").expect("write");
    let mut child = run(ws.path(), &["--model", "openai/test-model"])
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env_remove("OPENAI_API_KEY")
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = collect(child.stdout.take().expect("stdout"));
    let stderr = collect(child.stderr.take().expect("stderr"));
    wait_for(&mut child, &stderr, "> ");
    stdin.write_all(b"y\n").expect("answer");
    wait_for(&mut child, &stdout, "mode changed: plan -> build");
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let status = child.wait().expect("wait");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(status.code(), Some(130), "{}", text(&stderr));
    assert!(
        text(&stderr).contains("interrupted: the mode stays `build`"),
        "{}",
        text(&stderr)
    );
}
