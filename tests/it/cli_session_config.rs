//! `decide`, `continue` and `switch` act under the config the session ran under (issue 36,
//! item 3): the record keeps the file and what each mode may do; without `--config` that file
//! is read again (not the workspace's own `config/modes.toml`, which the repository or the model
//! controls); a config that lets the modes do more is refused, naming what would do more,
//! unless `--allow-config-change`; one that only narrows them passes with a note. The model is
//! the real OpenAI provider against the scripted OpenAI-compatible server.
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use std::path::Path;
use std::process::Output;

use common::cli::{DONE, PENDING, REFUSED};
use common::openai_server::{Reply, ScriptedServer, call, calls, submit, text};
use common::{Workspace, json_lines, stderr};
use serde_json::json;

/// The session's config: `build` asks before `write_file`.
const ASKING: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

/// The repository's own config (or one the model wrote): `build` does not ask.
const SILENT: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
"#;

/// Narrower than [`ASKING`]: `build` asks before `read_file` too.
const NARROWER: &str = r#"
[[modes]]
id = "plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file", "read_file"]
"#;

/// A workspace whose own `config/modes.toml` is [`SILENT`], a session config [`ASKING`] outside
/// it, a file store, and a plan submitted, approved, then `write_file a.txt` in `build`.
struct Setup {
    ws: Workspace,
    elsewhere: tempfile::TempDir,
    server: ScriptedServer,
}

impl Setup {
    fn new() -> Self {
        let ws = Workspace::new();
        std::fs::create_dir_all(ws.path().join("config")).expect("config dir");
        std::fs::write(ws.path().join("config/modes.toml"), SILENT).expect("repo config");
        let plan = ws.plan("p.md", "# Write a\n\n1. Write a.txt.\n");
        let elsewhere = tempfile::tempdir().expect("elsewhere");
        std::fs::write(elsewhere.path().join("asking.toml"), ASKING).expect("config");
        let write = call(
            "call_2",
            "write_file",
            &json!({"path": "a.txt", "content": "A"}).to_string(),
        );
        let script: Vec<Reply> = vec![
            calls([submit("call_1", &plan)]),
            calls([write]),
            text("done"),
        ];
        Self {
            ws,
            elsewhere,
            server: ScriptedServer::start_blocking(script),
        }
    }

    fn config(&self) -> std::path::PathBuf {
        self.elsewhere.path().join("asking.toml")
    }

    fn store(&self) -> String {
        self.elsewhere.path().join("sessions").display().to_string()
    }

    /// The binary with `args`, run in the workspace, the model the scripted server.
    fn cli(&self, args: &[&str]) -> Output {
        let mut command = common::cli::command(self.ws.path(), args);
        command.envs(self.server.env()).env("NO_COLOR", "1");
        common::cli::output(command, "")
    }

    /// `run --config asking.toml --mode plan`: the plan stays pending; the session id.
    fn run_to_pending(&self) -> String {
        let config = self.config().display().to_string();
        let store = self.store();
        let out = self.cli(&[
            "run",
            "--config",
            &config,
            "--store",
            &store,
            "--model",
            "openai/test-model",
            "--mode",
            "plan",
            "--json",
            "Write a.txt",
        ]);
        assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
        json_lines(&out)[0]["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned()
    }

    /// `decide --store S SESSION --approve FLAGS` without `--config`.
    fn approve(&self, session: &str, flags: &[&str]) -> Output {
        let store = self.store();
        let mut args = vec![
            "decide",
            "--store",
            &store,
            session,
            "--approve",
            "--model",
            "openai/test-model",
        ];
        args.extend_from_slice(flags);
        self.cli(&args)
    }

    fn wrote(&self) -> bool {
        self.ws.path().join("a.txt").exists()
    }
}

fn rewrite(path: &Path, text: &str) {
    std::fs::write(path, text).expect("rewrite config");
}

#[test]
fn decide_without_config_runs_under_the_file_the_session_ran_under_not_the_workspaces() {
    let setup = Setup::new();
    let session = setup.run_to_pending();
    let out = setup.approve(&session, &[]);
    assert_eq!(
        out.status.code(),
        Some(PENDING),
        "the session's build asks before write_file: {}",
        stderr(&out)
    );
    assert!(
        !setup.wrote(),
        "the write ran unasked under the workspace's config"
    );
}

#[test]
fn decide_refuses_a_config_that_lets_the_modes_do_more_unless_told_to() {
    let setup = Setup::new();
    let session = setup.run_to_pending();
    rewrite(&setup.config(), SILENT);
    let out = setup.approve(&session, &[]);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("mode `build` runs `write_file` without asking (it asked before)"),
        "{said}"
    );
    assert!(said.contains("--allow-config-change"), "{said}");
    assert!(!setup.wrote());
    // Nothing was decided: the plan still waits, and the flag lets it run under this config.
    let out = setup.approve(&session, &["--allow-config-change"]);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("write_file` without asking"),
        "{}",
        stderr(&out)
    );
    assert!(setup.wrote());
}

#[test]
fn decide_under_a_config_that_only_narrows_the_modes_passes_with_a_note() {
    let setup = Setup::new();
    let session = setup.run_to_pending();
    rewrite(&setup.config(), NARROWER);
    let out = setup.approve(&session, &[]);
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("mode `build` asks before `read_file`")
            && said.contains("it only narrows what the modes may do"),
        "{said}"
    );
    assert!(!setup.wrote());
}

#[test]
fn switch_and_continue_refuse_a_config_that_lets_the_modes_do_more() {
    let setup = Setup::new();
    let session = setup.run_to_pending();
    // The workspace's own config, named: it does more than the session's.
    let store = setup.store();
    let out = setup.cli(&[
        "switch",
        "--store",
        &store,
        &session,
        "build",
        "--config",
        "config/modes.toml",
    ]);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("mode `build` runs `write_file` without asking"),
        "{}",
        stderr(&out)
    );
    let out = setup.cli(&[
        "continue",
        "--store",
        &store,
        &session,
        "--config",
        "config/modes.toml",
    ]);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("mode `build` runs `write_file` without asking"),
        "{}",
        stderr(&out)
    );
}
