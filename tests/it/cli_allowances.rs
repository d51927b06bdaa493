//! The CLI of allowances with a scope (issue 23, item 2): `decide --always --scope workspace`
//! keeps an allowance in the store, `allowances list` shows it, a later run in the same
//! workspace runs the tool without asking, `allowances revoke` ends it; at the prompt `a
//! session` and `a workspace` choose the scope. The model is the real OpenAI provider against
//! the scripted OpenAI-compatible server, on the directory store, SQLite and PostgreSQL
//! (`AGENT_CONTROLLER_TEST_POSTGRES`).
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::Workspace;
use common::json_lines;
use common::openai_server::{Reply, ScriptedServer, call, calls, text};
use common::stderr;
use serde_json::json;
use snapbox::str;

const DONE: i32 = 0;
const INVALID: i32 = 2;
const PENDING: i32 = 4;
const REFUSED: i32 = 5;

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

struct World {
    ws: Workspace,
    config: PathBuf,
    spec: String,
    server: ScriptedServer,
    #[cfg(feature = "postgres")]
    _schema: Option<common::postgres::TestSchema>,
}

impl World {
    fn new(kind: &str, script: Vec<Reply>) -> Self {
        let ws = Workspace::new();
        let config = ws.path().join("modes.toml");
        std::fs::write(&config, CONFIG).expect("config");
        #[cfg(feature = "postgres")]
        let schema = (kind == "postgres")
            .then(common::postgres::TestSchema::new)
            .flatten();
        let spec = match kind {
            "sqlite" => format!("sqlite:{}", ws.path().join("sessions.db").display()),
            #[cfg(feature = "postgres")]
            "postgres" => schema.as_ref().expect("a schema").url.clone(),
            _ => ws.path().join("sessions").display().to_string(),
        };
        Self {
            ws,
            config,
            spec,
            server: ScriptedServer::start_blocking(script),
            #[cfg(feature = "postgres")]
            _schema: schema,
        }
    }

    fn cli(&self, command: &str, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-controller"));
        cmd.arg(command)
            .arg("--config")
            .arg(&self.config)
            .arg("--workspace")
            .arg(self.ws.path())
            .args(["--model", "openai/test-model", "--store", &self.spec])
            .args(args)
            .envs(self.server.env())
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        let mut pipe = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            pipe.write_all(text.as_bytes()).expect("write stdin");
        }
        drop(pipe);
        child.wait_with_output().expect("wait")
    }

    /// `run --json PROMPT` with stdin closed: a waiting call stays pending (exit 4).
    fn run_stored(&self, prompt: &str) -> (Output, String) {
        let out = self.cli("run", &["--json", prompt], None);
        let session = json_lines(&out)
            .first()
            .and_then(|e| e["sessionId"].as_str())
            .unwrap_or_default()
            .to_owned();
        (out, session)
    }

    /// `agent-controller allowances ARGS --store SPEC`.
    fn allowances(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_agent-controller"))
            .arg("allowances")
            .args(args)
            .args(["--store", &self.spec])
            .stdin(Stdio::null())
            .output()
            .expect("allowances")
    }
}

fn stores() -> Vec<&'static str> {
    let mut stores = vec!["dir"];
    if cfg!(feature = "sqlite") {
        stores.push("sqlite");
    }
    #[cfg(feature = "postgres")]
    if !common::postgres::skipped() {
        stores.push("postgres");
    }
    stores
}

fn write(id: &str, path: &str) -> common::openai_server::Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": "x" }).to_string(),
    )
}

#[track_caller]
fn same(actual: String, expected: impl snapbox::IntoData) {
    snapbox::Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .normalize_paths(false)
        .eq(actual, expected);
}

#[test]
fn decide_always_scope_workspace_keeps_it_for_the_next_run_until_it_is_revoked() {
    for kind in stores() {
        let world = World::new(
            kind,
            vec![
                calls([write("call_1", "a.txt")]),
                text("done"),
                calls([write("call_2", "b.txt")]),
                text("done"),
                calls([write("call_3", "c.txt")]),
            ],
        );
        let (out, session) = world.run_stored("Write a.txt");
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        let out = world.cli(
            "decide",
            &[
                &session,
                "--approve",
                "--always",
                "--scope",
                "workspace",
                "--by",
                "ana",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));

        let out = world.allowances(&["list"]);
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        same(
            String::from_utf8_lossy(&out.stdout).into_owned(),
            str![[r#"
ws_[..]  mode build  write_file  workspace [..]  (session [..], decision_1 by ana at [..])

"#]],
        );
        let listed = json_lines(&world.allowances(&["list", "--json"]));
        assert_eq!(listed.len(), 1, "{kind}: {listed:?}");
        assert_eq!(listed[0]["scope"], "workspace");
        assert_eq!(listed[0]["modeId"], "build");
        let id = listed[0]["id"].as_str().expect("id").to_owned();
        // Another workspace has none.
        let elsewhere = tempfile::tempdir().expect("elsewhere");
        let out = world.allowances(&[
            "list",
            "--workspace",
            &elsewhere.path().display().to_string(),
        ]);
        assert_eq!(out.status.code(), Some(DONE), "{kind}");
        assert!(
            out.stdout.is_empty(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stdout)
        );

        // A new session in the same workspace runs the tool without asking.
        let (out, _) = world.run_stored("Write b.txt");
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert!(world.ws.path().join("b.txt").exists(), "{kind}");
        let ended = json_lines(&out)
            .into_iter()
            .find(|e| e["type"] == "tool_end" && e["toolCallId"] == "call_2")
            .expect("tool_end");
        assert_eq!(ended["decision"]["allowedBy"], json!(id), "{kind}: {ended}");
        assert_eq!(
            ended["decision"]["decidedBy"],
            json!(format!("allowance {id} (workspace)")),
            "{kind}"
        );

        let out = world.allowances(&["revoke", &id]);
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("revoked workspace allowance"),
            "{kind}"
        );
        let out = world.allowances(&["revoke", &id]);
        assert_eq!(out.status.code(), Some(REFUSED), "{kind}: {}", stderr(&out));
        let (out, _) = world.run_stored("Write c.txt");
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: asked again");
    }
}

#[test]
fn scope_without_always_is_a_usage_error_and_the_prompt_takes_a_session() {
    let world = World::new(
        "dir",
        vec![
            calls([write("call_1", "a.txt")]),
            text("done"),
            calls([write("call_2", "b.txt")]),
            text("done"),
        ],
    );
    let (_, session) = world.run_stored("Write a.txt");
    let out = world.cli(
        "decide",
        &[&session, "--approve", "--scope", "session"],
        None,
    );
    assert_eq!(out.status.code(), Some(INVALID), "{}", stderr(&out));
    let out = world.cli("decide", &[&session], Some("a session\n"));
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert!(stderr(&out).contains("`a session`"), "{}", stderr(&out));
    assert!(world.ws.path().join("a.txt").exists());
    let out = world.allowances(&["list"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "a session allowance is not a workspace one"
    );
}
