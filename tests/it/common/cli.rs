//! The CLI tests' shared fixture: the binary run in a workspace with text on stdin, its output as
//! text, a stored session with the scripted plan pending (the shipped config, the file store
//! `st` in the workspace), the store's records, and whole-text snapshots with redactions.
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
pub const INVALID: i32 = 2;
pub const NOT_APPROVED: i32 = 3;
pub const PENDING: i32 = 4;
pub const REFUSED: i32 = 5;

/// The binary with `args`, run in `ws`, its three streams piped; `OPENAI_MODEL` and `NO_COLOR`
/// are removed, so the caller's environment does not choose a model or the styling.
pub fn command(ws: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-controller"));
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
