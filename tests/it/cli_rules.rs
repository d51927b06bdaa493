//! `agent-controller check` on a mode's rules (issue 23): a valid config lists each rule under
//! its mode; a bad rule is reported at its line and column, with the rest of the file.
#![cfg(feature = "cli")]

use snapbox::str;

use crate::common::cli::{self, snapshots::same, snapshots::shown};

/// `check modes.toml` on `text`, in a fresh directory: exit status, stdout and stderr.
fn check(text: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("modes.toml"), text).expect("write");
    shown(&cli::bin(dir.path(), &["check", "modes.toml"], ""), &[])
}

#[test]
fn check_lists_each_rule_under_its_mode() {
    let text = r#"[[modes]]
id = "build"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "**/.env*", action = "deny" },
  { tool = "write_file", path = "src/**", action = "allow" },
  { tool = "write_file", arg = "content", regex = ".*BEGIN PRIVATE KEY.*", action = "deny" },
]
"#;
    same(
        check(text),
        str![[r#"
exit 0
--- stdout
modes.toml: ok, 1 mode
  build (build) [default]  tools: read_file, write_file  requireApproval: write_file
    rule 1: deny write_file path `**/.env*`
    rule 2: allow write_file path `src/**`
    rule 3: deny write_file content regex `.*BEGIN PRIVATE KEY.*`
default mode: build
hand-over edges (on approval):
--- stderr

"#]],
    );
}

#[test]
fn check_reports_bad_rules_at_line_and_column() {
    let text = r#"[[modes]]
id = "build"
rules = [
  { tool = "write_file", arg = "pth", path = "src/**", action = "allow" },
  { tool = "run_command", action = "ask" },
  { tool = "write_file", path = "src/[", action = "deny" },
  { tool = "write_file", action = "ask" },
  { tool = "write_file", path = "docs/**", action = "allow" },
]
"#;
    same(
        check(text),
        str![[r#"
exit 2
--- stdout
--- stderr
error: modes.toml:4:3: rule 1 of mode `build` (allow write_file pth path `src/**`) can never decide a call: rule 4 (ask write_file) matches every call it matches, and ask beats allow: to ask about the calls no rule allows, list `write_file` in requireApproval and leave rule 4 out
4 |   { tool = "write_file", arg = "pth", path = "src/**", action = "allow" },
  |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^

error: modes.toml:4:32: rule 1 of mode `build` reads argument `pth`, which `write_file` does not declare, so it could never match: did you mean `path`?
4 |   { tool = "write_file", arg = "pth", path = "src/**", action = "allow" },
  |                                ^^^^^

error: modes.toml:5:12: rule 2 of mode `build` is on unknown tool `run_command`
5 |   { tool = "run_command", action = "ask" },
  |            ^^^^^^^^^^^^^

error: modes.toml:6:33: rule 3 of mode `build` has path `src/[`, which is not valid: unclosed character class; missing ']'
6 |   { tool = "write_file", path = "src/[", action = "deny" },
  |                                 ^^^^^^^

error: modes.toml:8:3: rule 5 of mode `build` (allow write_file path `docs/**`) can never decide a call: rule 4 (ask write_file) matches every call it matches, and ask beats allow: to ask about the calls no rule allows, list `write_file` in requireApproval and leave rule 4 out
8 |   { tool = "write_file", path = "docs/**", action = "allow" },
  |   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^

modes.toml: 5 errors

"#]],
    );
}

#[test]
fn check_refuses_an_unknown_action_with_the_ones_there_are() {
    let text =
        "[[modes]]\nid = \"build\"\nrules = [{ tool = \"write_file\", action = \"approve\" }]\n";
    same(
        check(text),
        str![[r#"
exit 2
--- stdout
--- stderr
error: modes.toml:3:42: unknown variant `approve`, expected one of `allow`, `ask`, `deny`
3 | rules = [{ tool = "write_file", action = "approve" }]
  |                                          ^^^^^^^^^

modes.toml: 1 error

"#]],
    );
}

/// `run` and `decide` apply a mode's rules: a deny rule refuses the call and the model is told
/// which rule; an ask rule makes the call wait, names the rule in the prompt, `pending --json`
/// and the events, and refuses `--always`; the audit record names the rule.
#[cfg(feature = "openai")]
mod applied {
    use std::io::Write;
    use std::process::{Output, Stdio};

    use serde_json::Value;

    use crate::common::openai_server::{ScriptedServer, call, calls, contents, text};
    use crate::common::{Workspace, json_lines, stderr};

    const CONFIG: &str = r#"
[[modes]]
id = "build"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
rules = [
  { tool = "write_file", path = "**/.env*", action = "deny" },
  { tool = "write_file", path = "src/**", action = "allow" },
  { tool = "read_file", path = "secret/**", action = "ask" },
]
"#;

    fn cli(ws: &Workspace, server: &ScriptedServer, args: &[&str], stdin: &str) -> Output {
        let mut cmd = crate::common::agent_controller();
        cmd.arg(args[0])
            .arg("--config")
            .arg(ws.path().join("modes.toml"))
            .arg("--workspace")
            .arg(ws.path())
            .args(["--model", "openai/test-model"])
            .args(&args[1..])
            .envs(server.env())
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(stdin.as_bytes()).expect("stdin");
        drop(pipe);
        child.wait_with_output().expect("wait")
    }

    fn world() -> (Workspace, ScriptedServer) {
        let ws = Workspace::new();
        std::fs::write(ws.path().join("modes.toml"), CONFIG).expect("config");
        std::fs::create_dir_all(ws.path().join("secret")).expect("secret");
        std::fs::write(ws.path().join("secret/key"), "k").expect("key");
        let server = ScriptedServer::start_blocking(vec![
            calls([
                call(
                    "c1",
                    "write_file",
                    r#"{"path": "src/../.env", "content": "x"}"#,
                ),
                call(
                    "c2",
                    "write_file",
                    r#"{"path": "src/a.rs", "content": "y"}"#,
                ),
                call("c3", "read_file", r#"{"path": "secret/key"}"#),
            ]),
            text("done"),
        ]);
        (ws, server)
    }

    fn rule_number(event: &Value) -> Option<u64> {
        event["decision"]["rule"]["number"].as_u64()
    }

    #[test]
    fn run_applies_each_rule_and_decide_records_the_one_that_asked() {
        let (ws, server) = world();
        let store = ws.path().join("sessions");
        let store = store.to_str().expect("utf-8");
        let out = cli(&ws, &server, &["run", "--store", store, "--json", "go"], "");
        assert_eq!(out.status.code(), Some(4), "pending: {}", stderr(&out));
        let events = json_lines(&out);
        let ended: Vec<(&str, Option<u64>)> = events
            .iter()
            .filter(|e| e["type"] == "tool_end")
            .map(|e| (e["toolCallId"].as_str().unwrap_or_default(), rule_number(e)))
            .collect();
        assert_eq!(ended, [("c1", Some(1)), ("c2", Some(2))], "{events:?}");
        assert!(!ws.path().join(".env").exists());
        assert_eq!(
            std::fs::read_to_string(ws.path().join("src/a.rs"))
                .ok()
                .as_deref(),
            Some("y")
        );
        let suspended: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "tool_suspended")
            .collect();
        assert_eq!(suspended.len(), 1, "{events:?}");
        assert_eq!(suspended[0]["suspendPayload"]["rule"]["number"], 3);
        assert_eq!(
            suspended[0]["suspendPayload"]["rule"]["rule"],
            "ask read_file path `secret/**`"
        );
        let session = events[0]["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned();
        // `--always` would let the rule's later calls through: refused, nothing changes.
        let always = cli(
            &ws,
            &server,
            &[
                "decide",
                "--store",
                store,
                &session,
                "--approve",
                "--always",
            ],
            "",
        );
        assert_ne!(always.status.code(), Some(0), "refused");
        assert!(
            stderr(&always).contains("rule 3 of mode `build`"),
            "{}",
            stderr(&always)
        );
        let out = cli(
            &ws,
            &server,
            &["decide", "--store", store, "--json", &session, "--approve"],
            "",
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let events = json_lines(&out);
        let read = events
            .iter()
            .find(|e| e["type"] == "tool_end" && e["toolCallId"] == "c3")
            .expect("c3 ran");
        assert_eq!(rule_number(read), Some(3));
        assert_eq!(read["decision"]["outcome"], "approved");
        // The model was told which rule refused c1.
        let bodies = server.bodies_blocking();
        let results = contents(&bodies[1], "tool");
        assert!(
            results.iter().any(|r| r.starts_with(
                "Not executed: rule 1 of mode `build` (deny write_file path `**/.env*`)"
            )),
            "{results:?}"
        );
    }

    #[test]
    fn always_at_the_prompt_on_a_call_a_rule_asks_about_is_refused_and_asked_again() {
        let (ws, server) = world();
        let out = cli(&ws, &server, &["run", "go"], "a\ny\n");
        let shown = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{shown}");
        assert!(
            // The prompt does not take `a` here (nor would the library: the CLI's decider
            // checks too), and says why.
            shown.contains("`a` is not offered here: rule 3 of mode `build`"),
            "{shown}"
        );
        // Asked again, then approved once: the call ran and the run went on.
        assert_eq!(
            shown.matches("Run this read_file call?").count(),
            2,
            "{shown}"
        );
        assert_eq!(server.served(), 2, "{shown}");
    }

    #[test]
    fn the_prompt_names_the_rule_that_asks() {
        let (ws, server) = world();
        let out = cli(&ws, &server, &["run", "go"], "y\n");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let shown = stderr(&out) + &String::from_utf8_lossy(&out.stdout);
        assert!(
            shown.contains("asked by rule 3 of mode `build`: ask read_file path `secret/**`"),
            "{shown}"
        );
    }

    /// The prompt offered `[a]lways allow` on a call an ask rule made wait; `a` was refused by
    /// the library and the CLI exited, losing the run. The key is not offered there, and `a`
    /// typed anyway asks again, saying why.
    #[test]
    fn always_allow_at_an_ask_rule_prompt_asks_again() {
        let (ws, server) = world();
        let out = cli(&ws, &server, &["run", "go"], "a\ny\n");
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let shown = stderr(&out);
        let question = shown
            .split("asked by rule 3 of mode `build`")
            .nth(1)
            .expect("the call the rule asks about is shown");
        assert!(question.contains("Run this read_file call?"), "{question}");
        assert!(
            !question.contains("[a]lways allow"),
            "`a` is not offered at a rule's question: {question}"
        );
        assert!(
            question.contains("`a` is not offered here: rule 3 of mode `build`")
                && question.contains("always allowing the tool does not cover them"),
            "{question}"
        );
        assert_eq!(
            question.matches("Run this read_file call?").count(),
            2,
            "asked again: {question}"
        );
        // The call ran once approved, and the run went on.
        let bodies = server.bodies_blocking();
        let results = contents(&bodies[1], "tool");
        assert!(results.contains(&"k"), "{results:?}");
    }
}
