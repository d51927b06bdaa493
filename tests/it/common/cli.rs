//! The CLI tests' shared fixture: the binary run in a workspace with text on stdin, its output as
//! text, a stored session with the scripted plan pending (the shipped config, the file store
//! `st` in the workspace), the store's records, whole-text snapshots with redactions, and a
//! [`world::World`] of a config, a store of each kind and the scripted OpenAI-compatible model.
#![cfg(feature = "cli")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The shipped config, `config/modes.toml`.
pub const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");

/// The file store the fixture's sessions are kept in, relative to the workspace.
pub const STORE: &str = "st";

// The exit statuses `--help` and the guide (`src/guide/cli.md`) document.
pub const DONE: i32 = 0;
pub const RUNTIME_ERROR: i32 = 1;
pub const INVALID: i32 = 2;
pub const NOT_APPROVED: i32 = 3;
pub const PENDING: i32 = 4;
pub const REFUSED: i32 = 5;
pub const UNREADABLE: i32 = 6;
pub const STDOUT_CLOSED: i32 = 141;

/// The binary with `args`, run in `ws`, its three streams piped; `OPENAI_MODEL` and `NO_COLOR`
/// are removed, so the caller's environment does not choose a model or the styling.
pub fn command(ws: &Path, args: &[&str]) -> Command {
    let mut command = crate::common::agent_controller();
    command
        .current_dir(ws)
        .args(args)
        .env_remove("OPENAI_MODEL")
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs `command` with `input` on stdin (then closed); its output.
pub fn output(mut command: Command, input: &str) -> Output {
    let mut child = command.spawn().expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    child.wait_with_output().expect("wait")
}

/// The binary in `ws` with `args` and `input` on stdin ([`command`], [`output`]).
pub fn bin(ws: &Path, args: &[&str], input: &str) -> Output {
    output(command(ws, args), input)
}

/// What a command printed, stdout then stderr.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What a command printed on stdout.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A session in `plan` with the scripted plan of "Add dark mode" pending, in the store
/// [`STORE`] of `ws` (`run` exits 4 and leaves it there); its id, as `pending --json` lists it.
pub fn pending_plan(ws: &Path) -> String {
    let out = bin(
        ws,
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            STORE,
            "--mode",
            "plan",
            "Add dark mode",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(PENDING), "{}", text(&out));
    let listed = bin(ws, &["pending", "--store", STORE, "--json"], "");
    let line = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .next()
        .map(str::to_owned);
    let first: serde_json::Value =
        serde_json::from_str(&line.expect("a pending plan")).expect("json");
    first["sessionId"].as_str().expect("sessionId").to_owned()
}

/// Every record file of the store [`STORE`] in `ws` (`ID.json`, `ID.pending.json`,
/// `ID.running.json`): (file name, text), by name.
pub fn records(ws: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(ws.join(STORE)).expect("the store") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            found.push((name, std::fs::read_to_string(&path).expect("read")));
        }
    }
    found.sort();
    found
}

/// The one record of `session` in the store: its file name and text.
pub fn record_of(ws: &Path, session: &str) -> (String, String) {
    let mut found: Vec<_> = records(ws)
        .into_iter()
        .filter(|(name, _)| name.starts_with(session))
        .collect();
    assert_eq!(found.len(), 1, "one record: {found:?}");
    found.remove(0)
}

/// The one record of `session`, as JSON.
pub fn record_json(ws: &Path, session: &str) -> serde_json::Value {
    serde_json::from_str(&record_of(ws, session).1).expect("json")
}

/// Whole-text snapshots of what the binary printed (snapbox), with the values a run makes up
/// (ids, times, paths) replaced by placeholders.
pub mod snapshots {
    use std::process::Output;

    /// `actual` is `expected`, whole; backslashes stay backslashes (the event lines escape
    /// control characters as `\u{a}`, which path normalization would turn into `/u{a}`).
    /// `SNAPSHOTS=overwrite` rewrites the expected text in the test's source.
    #[track_caller]
    pub fn same(actual: String, expected: impl snapbox::IntoData) {
        snapbox::Assert::new()
            .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
            .normalize_paths(false)
            .eq(actual, expected);
    }

    /// `out`'s status, stdout and stderr as one text, `(value, placeholder)` pairs replaced in
    /// order (put the longest first).
    pub fn shown(out: &Output, redact: &[(&str, &str)]) -> String {
        redacted(
            format!(
                "exit {}\n--- stdout\n{}--- stderr\n{}",
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            redact,
        )
    }

    /// `text` with each `(value, placeholder)` pair replaced, in order; an empty value is
    /// skipped.
    pub fn redacted(mut text: String, redact: &[(&str, &str)]) -> String {
        for (value, placeholder) in redact {
            if !value.is_empty() {
                text = text.replace(value, placeholder);
            }
        }
        text
    }

    /// `text` with what a run makes up replaced: `ws`'s path by `[WORKSPACE]`, `session` and
    /// any other session id (a UUID) by `[SESSION]`, a sha256 (64 hex digits) by `[SHA256]` and
    /// its short form (12) by `[SHA12]`.
    pub fn scrubbed(text: String, ws: &std::path::Path, session: &str) -> String {
        let ws = ws.display().to_string();
        let text = redacted(text, &[(&ws, "[WORKSPACE]"), (session, "[SESSION]")]);
        let uuid =
            regex::Regex::new(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
                .expect("regex");
        let text = uuid.replace_all(&text, "[SESSION]");
        let sha = regex::Regex::new(r"\b[0-9a-f]{64}\b").expect("regex");
        let text = sha.replace_all(&text, "[SHA256]");
        let short = regex::Regex::new(r"\b[0-9a-f]{12}\b").expect("regex");
        short.replace_all(&text, "[SHA12]").into_owned()
    }
}

/// One test's world for the commands that act on a store of each kind: a workspace with a
/// config, a store (the directory store, SQLite or PostgreSQL), and the real OpenAI provider
/// against the scripted OpenAI-compatible server.
#[cfg(feature = "openai")]
pub mod world {
    use std::io::Write;
    use std::path::PathBuf;
    use std::process::{Output, Stdio};

    use serde_json::Value;

    use super::DONE;
    use super::snapshots::{scrubbed, shown};
    use crate::common::openai_server::{Reply, ScriptedServer, contents};
    use crate::common::{Workspace, json_lines, stderr};

    /// The kinds of store a world can have: `dir`, then `sqlite` and `postgres` where this
    /// build (and the environment, `AGENT_CONTROLLER_TEST_POSTGRES`) has them.
    pub fn stores() -> Vec<&'static str> {
        let mut stores = vec!["dir"];
        if cfg!(feature = "sqlite") {
            stores.push("sqlite");
        }
        #[cfg(feature = "postgres")]
        if !crate::common::postgres::skipped() {
            stores.push("postgres");
        }
        stores
    }

    /// `agent-controller pending --store SPEC [--json]`.
    pub fn pending(spec: &str, json: bool) -> Output {
        let mut cmd = crate::common::agent_controller();
        cmd.args(["pending", "--store", spec]);
        if json {
            cmd.arg("--json");
        }
        cmd.stdin(Stdio::null()).output().expect("pending")
    }

    /// A workspace with the config, a store of a kind, and the scripted model.
    pub struct World {
        pub ws: Workspace,
        pub config: PathBuf,
        pub spec: String,
        pub server: ScriptedServer,
        /// The PostgreSQL schema of a `postgres` world, dropped with it.
        #[cfg(feature = "postgres")]
        _schema: Option<crate::common::postgres::TestSchema>,
    }

    impl World {
        /// A world whose modes are `modes` (TOML, written to `modes.toml` in the workspace),
        /// with a store of `kind` ([`stores`]), the model scripted by `script`.
        pub fn with_config(kind: &str, modes: &str, script: Vec<Reply>) -> Self {
            let ws = Workspace::new();
            let config = ws.path().join("modes.toml");
            std::fs::write(&config, modes).expect("config");
            #[cfg(feature = "postgres")]
            let schema = (kind == "postgres")
                .then(crate::common::postgres::TestSchema::new)
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

        /// `agent-controller COMMAND --config --workspace --model [--store] ARGS` with `stdin`.
        pub fn cli(
            &self,
            command: &str,
            store: bool,
            args: &[&str],
            stdin: Option<&str>,
        ) -> Output {
            let mut cmd = crate::common::agent_controller();
            cmd.arg(command)
                .arg("--config")
                .arg(&self.config)
                .arg("--workspace")
                .arg(self.ws.path())
                .args(["--model", "openai/test-model"]);
            if store {
                cmd.args(["--store", &self.spec]);
            }
            cmd.args(args)
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

        /// `run --store ... --json PROMPT` with stdin closed: waiting tool calls stay pending.
        /// Its output and the session's id.
        pub fn run_stored(&self, prompt: &str) -> (Output, String) {
            let out = self.cli("run", true, &["--json", prompt], None);
            let session = json_lines(&out)
                .first()
                .and_then(|e| e["sessionId"].as_str())
                .unwrap_or_default()
                .to_owned();
            (out, session)
        }

        /// `decide --store ... SESSION FLAGS`.
        pub fn decide(&self, session: &str, flags: &[&str]) -> Output {
            let mut args = vec![session];
            args.extend_from_slice(flags);
            self.cli("decide", true, &args, None)
        }

        /// The lines of `pending --json` (which must exit 0).
        pub fn pending_json(&self) -> Vec<Value> {
            let out = pending(&self.spec, true);
            assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
            json_lines(&out)
        }

        /// What `out` printed (exit status, stdout, stderr), with the store spec, the
        /// workspace, the session ids and the hashes replaced by placeholders: the same text on
        /// every store.
        pub fn shown(&self, out: &Output, session: &str) -> String {
            let text = shown(out, &[(&self.spec, "[STORE]")]);
            scrubbed(text, self.ws.path(), session)
        }

        /// The text of file `name` in the workspace, if it is there.
        pub fn file(&self, name: &str) -> Option<String> {
            std::fs::read_to_string(self.ws.path().join(name)).ok()
        }

        /// The content of every `tool` message the model received in request `n` (from 0).
        pub fn tool_results(&self, n: usize) -> Vec<String> {
            let bodies = self.server.bodies_blocking();
            contents(&bodies[n], "tool")
                .into_iter()
                .map(str::to_owned)
                .collect()
        }
    }
}

/// `import FORMAT SOURCE` in a fresh directory: exit 0 with `reported` on stderr, and the TOML it
/// prints passes `check`; then `import FORMAT BAD_NAME` of a file holding `bad_text` is exit 2
/// with nothing on stdout. Returns the failed import's stderr, for the caller's own checks.
#[cfg(feature = "cli")]
pub fn import_round_trip(
    format: &str,
    source: &Path,
    reported: &str,
    bad_name: &str,
    bad_text: &str,
) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = source.to_str().expect("utf-8");
    let out = bin(dir.path(), &["import", format, source], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(reported), "{stderr}");
    std::fs::write(dir.path().join("modes.toml"), &out.stdout).expect("write");
    let checked = bin(dir.path(), &["check", "modes.toml"], "");
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    std::fs::write(dir.path().join(bad_name), bad_text).expect("write");
    let bad = bin(dir.path(), &["import", format, bad_name], "");
    assert_eq!(bad.status.code(), Some(2));
    assert!(bad.stdout.is_empty());
    String::from_utf8_lossy(&bad.stderr).into_owned()
}
