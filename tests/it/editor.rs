//! The prompt's `e`: editing a plan in `$VISUAL` / `$EDITOR` before approving it, driving the
//! binary with the editor set to small scripts this test writes.
// Drives the binary.
#![cfg(all(unix, feature = "cli"))]

use crate::common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use agent_controller::tool::submit_plan::sha256_hex;
use common::Workspace;
use common::cli::{DONE, NOT_APPROVED, PENDING, SHIPPED};
use common::json_lines as events;
use serde_json::Value;

/// Editor scripts in a temporary directory.
struct Editors {
    dir: tempfile::TempDir,
}

impl Editors {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// An executable `name` running `body` (sh), its path.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    /// An editor that must be called as `SCRIPT --wait FILE` (as `EDITOR="code --wait"` calls
    /// it), keeps what it was given in `seen.md`, and replaces the file with `text`.
    fn rewriting(&self, text: &str) -> String {
        std::fs::write(self.dir.path().join("edited.md"), text).expect("edited");
        let script = self.script(
            "rewrite.sh",
            "[ \"$1\" = --wait ] || exit 9\nd=$(dirname \"$0\")\ncp \"$2\" \"$d/seen.md\"\ncp \"$d/edited.md\" \"$2\"",
        );
        format!("{} --wait", script.display())
    }

    fn seen(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("seen.md")).expect("the editor ran")
    }
}

/// The binary with `args`, the editor `EDITOR` (and no `VISUAL`), `stdin` typed at the prompt.
fn run_with_editor(args: &[&str], editor: &str, stdin: &str, env: &[(&str, String)]) -> Output {
    let mut child = crate::common::agent_controller()
        .args(args)
        .env_remove("VISUAL")
        .env("EDITOR", editor)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.as_bytes()).expect("write stdin");
    drop(pipe);
    child.wait_with_output().expect("wait")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn mode_changes(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "mode_changed")
        .map(|e| {
            (
                e["previousModeId"].as_str().expect("prev").to_owned(),
                e["modeId"].as_str().expect("mode").to_owned(),
            )
        })
        .collect()
}

/// The `tool_end` of the decided `submit_plan`.
fn decided(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["type"] == "tool_end" && e["toolName"] == "submit_plan")
        .expect("the decision's tool_end")
}

/// `run --mode plan --json` with the scripted model on `config` in `ws`, plus `extra` flags.
fn run_args<'a>(config: &'a str, ws: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--config",
        config,
        "--workspace",
        ws.to_str().expect("utf-8"),
        "--mode",
        "plan",
        "--json",
    ];
    args.extend_from_slice(extra);
    args.push("Add dark mode");
    args
}

fn stored_record(spec: &str, session: &str) -> Value {
    let store = agent_controller::store::open_existing_store(spec).expect("the store");
    let record = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(store.load(session))
        .expect("load")
        .expect("the session's record");
    serde_json::to_value(&record).expect("json")
}

/// Issue 12, "edit before approving" at the prompt: `e` opens the submitted plan in `$EDITOR`
/// (a command with an argument, split as git splits it), shows the edit as a diff against the
/// submitted plan and asks again; `y` approves the edited text, pinned to the plan shown. The
/// next mode's model (the real OpenAI provider against the scripted server) receives the edited
/// text in the approval result, and the event and the stored record carry both hashes.
#[cfg(feature = "openai")]
#[test]
fn e_at_the_prompt_hands_the_edited_plan_to_the_next_mode_and_records_both_hashes() {
    use common::openai_server::{ScriptedServer, calls, contents, submit, text};

    let ws = Workspace::new();
    let submitted = "# Add dark mode\n\n1. Add a toggle.\n2. Test it.\n";
    let path = ws.plan("dark.md", submitted);
    let edited = "# Add dark mode\n\n1. Add a toggle.\n2. EDITED: test both themes.\n";
    let editors = Editors::new();
    let editor = editors.rewriting(edited);
    let server =
        ScriptedServer::start_blocking(vec![calls([submit("call_1", &path)]), text("Built it.")]);
    let spec = ws.path().join("sessions").display().to_string();
    let args = run_args(
        SHIPPED,
        ws.path(),
        &["--model", "openai/test-model", "--store", &spec],
    );
    let out = run_with_editor(&args, &editor, "e\ny\n", &server.env());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{err}");
    assert_eq!(
        editors.seen(),
        submitted,
        "the editor opened the plan shown"
    );
    assert!(
        err.contains("your edit, changes against the submitted plan"),
        "{err}"
    );
    assert!(
        err.contains("--- submitted plan\n+++ edited plan\n"),
        "{err}"
    );
    assert!(
        err.contains("-2. Test it.\n+2. EDITED: test both themes.\n"),
        "{err}"
    );
    assert!(
        err.contains("Approve the edited plan and switch to ● Build (build)?"),
        "{err}"
    );
    let events = self::events(&out);
    assert_eq!(
        mode_changes(&events),
        [("plan".to_owned(), "build".to_owned())]
    );
    let shown = sha256_hex(submitted.as_bytes());
    let approved = sha256_hex(edited.as_bytes());
    let decision = &decided(&events)["decision"];
    assert_eq!(
        decision["sha256"],
        shown.as_str(),
        "pinned to the plan shown"
    );
    assert_eq!(decision["approvedSha256"], approved.as_str());

    // The next mode's model call carries the edited text, not the submitted one.
    let bodies = server.bodies_blocking();
    assert_eq!(bodies.len(), 2);
    let handed = contents(&bodies[1], "tool").join("\n");
    assert!(handed.contains("2. EDITED: test both themes."), "{handed}");
    assert!(!handed.contains("2. Test it."), "{handed}");
    assert!(
        handed.contains(&shown) && handed.contains(&approved),
        "{handed}"
    );

    let session = events[0]["sessionId"].as_str().expect("session id");
    let record = stored_record(&spec, session);
    assert_eq!(record["lastDecided"]["sha256"], shown.as_str());
    assert_eq!(record["lastDecided"]["approvedSha256"], approved.as_str());
}

/// An edit approved to a listed target that is not the first (`2` after `e`), found by
/// `$VISUAL` before `$EDITOR`; `n` about an edit asks again (the edit is not lost), `d`
/// discards it, and then `n` rejects.
#[test]
fn an_edit_goes_to_the_chosen_target_visual_wins_and_n_needs_the_edit_discarded() {
    let config = common::fixture("configs/valid/targets-list.toml")
        .display()
        .to_string();
    let edited = "# Add dark mode\n\n1. Only the EDITED step.\n";
    let editors = Editors::new();
    let visual = editors.rewriting(edited);
    let failing = editors.script("fail.sh", "exit 1");
    let failing = failing.to_str().expect("utf-8");
    let ws = Workspace::new();
    let args = run_args(&config, ws.path(), &[]);
    let out = run_with_editor(&args, failing, "e\n2\n", &[("VISUAL", visual)]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{err}");
    assert!(
        err.contains("Approve the edited plan and switch to one of:\n  1  ● build (build)  (y)\n  2  ● build-auto (build-auto)\n[y]es approve it to build  [1-2] approve it to that mode  [e] edit again  [d] discard the edit\n> "),
        "{err}"
    );
    let events = self::events(&out);
    assert_eq!(
        mode_changes(&events),
        [("plan".to_owned(), "build-auto".to_owned())]
    );
    let end = decided(&events);
    assert_eq!(
        end["decision"]["approvedSha256"],
        sha256_hex(edited.as_bytes()).as_str()
    );
    assert_eq!(end["decision"]["targetModeId"], "build-auto");
    assert!(
        end["result"]
            .as_str()
            .expect("result")
            .contains("1. Only the EDITED step."),
        "{end}"
    );

    let ws = Workspace::new();
    let args = run_args(SHIPPED, ws.path(), &[]);
    let editor = editors.rewriting(edited);
    let out = run_with_editor(&args, &editor, "e\nn\nadd tests\nd\nn\n", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{err}");
    assert_eq!(
        err.matches("is not an answer about the edited plan")
            .count(),
        2,
        "{err}"
    );
    assert!(err.contains("the edit is discarded"), "{err}");
    let events = self::events(&out);
    assert!(mode_changes(&events).is_empty());
    let end = decided(&events);
    assert_eq!(end["decision"]["outcome"], "rejected");
    assert!(end["decision"].get("approvedSha256").is_none(), "{end}");
}

/// An editor that fails, cannot be started, or leaves the file empty, blank or unchanged
/// changes nothing: the prompt says why and asks again, and `y` approves the plan as submitted
/// (no `approvedSha256`).
#[test]
fn a_failing_editor_or_an_emptied_file_changes_nothing_and_says_why() {
    let editors = Editors::new();
    let failing = editors.script("fail.sh", "exit 3");
    let emptying = editors.script("empty.sh", ": > \"$1\"");
    let blanking = editors.script("blank.sh", "printf '  \\n\\n' > \"$1\"");
    let cases = [
        (failing.display().to_string(), "exited with exit status: 3"),
        (
            "/no/such/editor".to_owned(),
            "the editor `/no/such/editor` could not be started",
        ),
        (
            "no-such-editor-anywhere --wait".to_owned(),
            "the shell did not find the command",
        ),
        (emptying.display().to_string(), "the edited plan is empty"),
        (blanking.display().to_string(), "the edited plan is empty"),
        (
            "true".to_owned(),
            "the edited plan is the submitted plan: there is no edit to approve",
        ),
    ];
    for (editor, why) in cases {
        let ws = Workspace::new();
        let args = run_args(SHIPPED, ws.path(), &[]);
        let out = run_with_editor(&args, &editor, "e\ny\n", &[]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(DONE), "{editor}: {err}");
        assert!(err.contains(why), "{editor}: {err}");
        if !why.contains("no edit to approve") {
            assert!(err.contains(": nothing changed\n"), "{editor}: {err}");
        }
        assert!(
            !err.contains("Approve the edited plan"),
            "{editor}: asked about the plan shown: {err}"
        );
        let events = events(&out);
        assert_eq!(
            mode_changes(&events),
            [("plan".to_owned(), "build".to_owned())],
            "{editor}"
        );
        let end = decided(&events);
        assert!(
            end["decision"].get("approvedSha256").is_none(),
            "{editor}: {end}"
        );
        assert!(
            end["result"]
                .as_str()
                .expect("result")
                .contains("exactly as submitted"),
            "{editor}: {end}"
        );
    }
}

/// A second edit that fails keeps the first; end of input with an edit in hand decides nothing
/// (the plan stays pending in the store) and keeps the edit in a file `decide --plan-file`
/// approves.
#[test]
fn a_dismissed_prompt_keeps_the_edit_in_a_file_decide_can_approve() {
    let edited = "# Add dark mode\n\n1. KEPT edit.\n";
    let editors = Editors::new();
    let editor = editors.rewriting(edited);
    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let args = run_args(SHIPPED, ws.path(), &["--store", &spec]);
    let out = run_with_editor(&args, &editor, "e\n", &[]);
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let err = stderr(&out);
    let kept = err
        .lines()
        .find_map(|l| l.strip_prefix("your edited plan is kept in "))
        .unwrap_or_else(|| panic!("no kept edit: {err}"))
        .to_owned();
    assert_eq!(std::fs::read_to_string(&kept).expect("kept"), edited);
    let events = self::events(&out);
    assert!(mode_changes(&events).is_empty());
    let session = events[0]["sessionId"].as_str().expect("session id");
    let out = crate::common::agent_controller()
        .args(["decide", "--store", &spec, session, "--config", SHIPPED])
        .args(["--workspace", ws.path().to_str().expect("utf-8")])
        .args(["--approve", "--plan-file", &kept, "--json"])
        .output()
        .expect("decide");
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let end = decided(&self::events(&out)).clone();
    assert_eq!(
        end["decision"]["approvedSha256"],
        sha256_hex(edited.as_bytes()).as_str()
    );
    let _ = std::fs::remove_file(&kept);

    // Edit, edit again with an editor that now fails: the first edit is kept and approved.
    let ws = Workspace::new();
    let args = run_args(SHIPPED, ws.path(), &[]);
    let once = editors.script(
        "once.sh",
        "d=$(dirname \"$0\")\nif [ -e \"$d/ran\" ]; then exit 4; fi\n: > \"$d/ran\"\ncp \"$d/edited.md\" \"$1\"",
    );
    let out = run_with_editor(&args, once.to_str().expect("utf-8"), "e\ne\ny\n", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(DONE), "{err}");
    assert!(
        err.contains("exited with exit status: 4: your earlier edit is kept"),
        "{err}"
    );
    let end = decided(&self::events(&out)).clone();
    assert_eq!(
        end["decision"]["approvedSha256"],
        sha256_hex(edited.as_bytes()).as_str()
    );
}

/// Without `--json`, the decision's line says the edited plan was approved, with its hash.
#[test]
fn the_event_line_says_an_edited_plan_was_approved() {
    let edited = "# Add dark mode\n\n1. The EDITED step.\n";
    let editors = Editors::new();
    let editor = editors.rewriting(edited);
    let ws = Workspace::new();
    let workspace = ws.path().to_str().expect("utf-8");
    let args = [
        "run",
        "--config",
        SHIPPED,
        "--workspace",
        workspace,
        "--mode",
        "plan",
        "Add dark mode",
    ];
    let out = run_with_editor(&args, &editor, "e\ny\n", &[]);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    let approved = sha256_hex(edited.as_bytes());
    let line = shown
        .lines()
        .find(|l| l.starts_with("tool submit_plan ok: Plan approved. Proceed with implementation following the approved plan."))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        line.ends_with(&format!("(the edited plan, sha256 {}...)", &approved[..12])),
        "{line}"
    );
}

/// `decide` in a fresh process asks with the same prompt: `e` there approves the edit too.
#[test]
fn decide_at_the_prompt_approves_an_edit_made_with_e() {
    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let args = run_args(SHIPPED, ws.path(), &["--store", &spec, "--detach"]);
    let out = run_with_editor(&args, "true", "", &[]);
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let session = self::events(&out)[0]["sessionId"]
        .as_str()
        .expect("session id")
        .to_owned();
    let edited = "# Add dark mode\n\n1. DECIDED with an edit.\n";
    let editors = Editors::new();
    let editor = editors.rewriting(edited);
    let workspace = ws.path().to_str().expect("utf-8");
    let args = [
        "decide",
        "--store",
        &spec,
        &session,
        "--config",
        SHIPPED,
        "--workspace",
        workspace,
        "--json",
    ];
    let out = run_with_editor(&args, &editor, "e\ny\n", &[]);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert!(
        editors.seen().contains("## Steps"),
        "the pending plan was opened"
    );
    let events = self::events(&out);
    assert_eq!(
        mode_changes(&events),
        [("plan".to_owned(), "build".to_owned())]
    );
    let end = decided(&events);
    assert_eq!(
        end["decision"]["approvedSha256"],
        sha256_hex(edited.as_bytes()).as_str()
    );
    let record = stored_record(&spec, &session);
    assert_eq!(
        record["lastDecided"]["approvedSha256"],
        sha256_hex(edited.as_bytes()).as_str()
    );
    assert_eq!(record["lastDecided"]["sha256"], end["decision"]["sha256"]);
}
