//! The hostile trial of trust round 4 (issue 36): the user sees exactly what they approve, and
//! the next mode carries out exactly that.
//!
//! - M1: a path argument is shown where it leads, not only as the model typed it: `notes.md`,
//!   a symlink in the workspace to `src/main.rs`, is shown `notes.md -> src/main.rs` at the
//!   terminal prompt, in `pending` (text and `--json`) and in ACP's permission request.
//! - M2: "always allow" at one waiting call does not approve the other waiting calls of the
//!   tool in the same reply, which were never shown: each is asked about on its own.
//! - M3: a plan's sha256 pins the text the approver is shown (and the next mode is handed), not
//!   the file's bytes (front matter the screen never shows); a record whose plan text does not
//!   match its sha256 is refused on load and changes nothing.
//!
//! The model is the real OpenAI provider against the scripted server.
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use common::cli::world::{World, pending};
use common::cli::{DONE, NOT_APPROVED, PENDING, stdout};
use common::openai_server::{Call, call, calls, submit, text};
use common::stderr;
use serde_json::json;

/// `build` asks before `write_file`; `plan` hands over to `build`.
const CONFIG: &str = r#"
[[modes]]
id = "plan"
availableTools = ["read_file", "write_plan", "submit_plan"]
transitionsTo = "build"

[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
requireApproval = ["write_file"]
"#;

fn write(id: &str, path: &str, content: &str) -> Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": content }).to_string(),
    )
}

/// `src/main.rs`, and `notes.md`, a symlink to it, in the workspace `ws`.
#[cfg(unix)]
fn linked_notes(ws: &std::path::Path) {
    std::fs::create_dir_all(ws.join("src")).expect("src");
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").expect("main.rs");
    std::os::unix::fs::symlink("src/main.rs", ws.join("notes.md")).expect("link");
}

/// M1, at the terminal prompt: the call to write `notes.md` is shown as writing
/// `src/main.rs`, where the symlink leads; a path that leads where it reads has no arrow.
#[cfg(unix)]
#[test]
fn the_prompt_shows_where_a_symlinked_path_leads() {
    let world = World::with_config(
        "dir",
        CONFIG,
        vec![
            calls([
                write("call_1", "notes.md", "overwritten"),
                write("call_2", "plain.txt", "x"),
            ]),
            text("Done."),
        ],
    );
    linked_notes(world.ws.path());
    let out = world.cli("run", false, &["Write notes"], Some("n\nn\n"));
    // The call decided last was rejected.
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{}", stderr(&out));
    let shown = stderr(&out);
    assert!(shown.contains("notes.md -> src/main.rs"), "{shown}");
    assert!(
        !shown.contains("plain.txt ->"),
        "no arrow where it reads: {shown}"
    );
    assert_eq!(
        world.file("src/main.rs").as_deref(),
        Some("fn main() {}\n"),
        "rejected: nothing written"
    );
}

/// M1, in `pending`: the line says where the path leads, and `--json` carries it
/// (`locations`: the argument, its value as typed, and the path it leads to).
#[cfg(unix)]
#[test]
fn pending_shows_where_a_symlinked_path_leads() {
    let world = World::with_config(
        "dir",
        CONFIG,
        vec![calls([write("call_1", "notes.md", "overwritten")])],
    );
    linked_notes(world.ws.path());
    let (out, _) = world.run_stored("Write notes");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let line = stdout(&pending(&world.spec, false));
    assert!(line.contains("notes.md -> src/main.rs"), "{line}");
    let listed = world.pending_json();
    assert_eq!(
        listed[0]["locations"],
        json!([{ "arg": "path", "given": "notes.md", "path": "src/main.rs" }]),
        "{:#}",
        listed[0]
    );
}

/// M1, over ACP: the permission request's location is the file the call writes
/// (`src/main.rs`), and its content says where the path the model typed leads.
#[cfg(unix)]
#[test]
fn acps_permission_request_shows_where_a_symlinked_path_leads() {
    use crate::acp::{APPROVING, Agent, workspace};
    use common::openai_server::ScriptedServer;
    let ws = workspace(APPROVING);
    linked_notes(ws.path());
    let server = ScriptedServer::start_blocking(vec![
        calls([write("call_1", "notes.md", "overwritten")]),
        text("Not written."),
    ]);
    let mut agent = Agent::start(ws.path(), &["--model", "openai/test-model"], &server.env());
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Write notes");
    let (request, _) = agent.until_method("session/request_permission");
    let call = &request["params"]["toolCall"];
    assert_eq!(
        call["locations"][0]["path"],
        json!(ws.path().join("src/main.rs")),
        "{call:#}"
    );
    assert!(
        call["content"]
            .to_string()
            .contains("notes.md -> src/main.rs"),
        "{call:#}"
    );
    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": "reject" } }),
    );
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/main.rs")).expect("main.rs"),
        "fn main() {}\n"
    );
}

/// M1, in a two-step flow: `notes.md -> src/main.rs` is shown in `pending`; before `decide`
/// approves it, `notes.md` is pointed at `secret.txt`. The approved write used to land in
/// `secret.txt`, which nobody was shown: it is not run, nothing is written, the model is told
/// which path changed and where it leads now, and the run goes on.
#[cfg(unix)]
#[test]
fn an_approved_write_whose_symlink_changed_before_decide_never_runs() {
    let world = World::with_config(
        "dir",
        CONFIG,
        vec![
            calls([write("call_1", "notes.md", "overwritten")]),
            text("Not written."),
        ],
    );
    linked_notes(world.ws.path());
    std::fs::write(world.ws.path().join("secret.txt"), "secret\n").expect("secret");
    let (out, session) = world.run_stored("Write notes");
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let line = stdout(&pending(&world.spec, false));
    assert!(line.contains("notes.md -> src/main.rs"), "{line}");
    let link = world.ws.path().join("notes.md");
    std::fs::remove_file(&link).expect("unlink");
    std::os::unix::fs::symlink("secret.txt", &link).expect("relink");
    let out = world.decide(&session, &["--approve"]);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert_eq!(world.file("secret.txt").as_deref(), Some("secret\n"));
    assert_eq!(world.file("src/main.rs").as_deref(), Some("fn main() {}\n"));
    let results = world.tool_results(1);
    assert_eq!(
        results,
        [
            "Not executed: where its path leads changed after it was approved: \
          `path notes.md` led to `src/main.rs` and now leads to `secret.txt`; \
          call it again to have it approved where it leads now."
        ],
    );
}

/// M1, over ACP, before the permission request: the session updates that announce the call
/// leave it located where its path leads (`src/main.rs`), not only as the model typed it
/// (`notes.md`), so a client that shows the call before it asks shows where it acts.
#[cfg(unix)]
#[test]
fn acps_tool_call_updates_locate_a_waiting_call_where_its_path_leads() {
    use crate::acp::{APPROVING, Agent, workspace};
    use common::openai_server::ScriptedServer;
    let ws = workspace(APPROVING);
    linked_notes(ws.path());
    let server = ScriptedServer::start_blocking(vec![
        calls([write("call_1", "notes.md", "overwritten")]),
        text("Not written."),
    ]);
    let mut agent = Agent::start(ws.path(), &["--model", "openai/test-model"], &server.env());
    let (session, _) = agent.open(ws.path());
    let prompt = agent.prompt(&session, "Write notes");
    let (request, before) = agent.until_method("session/request_permission");
    let id = &request["params"]["toolCall"]["toolCallId"];
    // The call's updates before the request, in order: the last locations a client was given.
    let located: Vec<&serde_json::Value> = before
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| &u["toolCallId"] == id && u.get("locations").is_some())
        .map(|u| &u["locations"])
        .collect();
    assert_eq!(
        located.last().map(|l| l[0]["path"].clone()),
        Some(json!(ws.path().join("src/main.rs"))),
        "{before:#?}"
    );
    agent.respond(
        &request["id"],
        json!({ "outcome": { "outcome": "selected", "optionId": "reject" } }),
    );
    let (response, _) = agent.response(prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response:#}");
}

/// M2, at the terminal: `a` at the first of two `write_file` calls of one reply runs the
/// call shown and allows the tool from now on; the second call, which was never shown, is
/// shown and asked about (here rejected), not run unseen.
#[test]
fn always_allow_at_one_call_asks_about_the_other_waiting_calls() {
    let world = World::with_config(
        "dir",
        CONFIG,
        vec![
            calls([write("call_1", "a.txt", "A"), write("call_2", "b.txt", "B")]),
            text("One written."),
        ],
    );
    let out = world.cli("run", false, &["Write two"], Some("a\nn\n"));
    // The call decided last was rejected.
    assert_eq!(out.status.code(), Some(NOT_APPROVED), "{}", stderr(&out));
    let shown = stderr(&out);
    assert_eq!(
        shown.matches("Run this write_file call?").count(),
        2,
        "each call is asked about: {shown}"
    );
    assert!(
        shown.contains("\"path\": \"b.txt\""),
        "the second is shown: {shown}"
    );
    assert!(!shown.contains("also runs"), "{shown}");
    assert_eq!(world.file("a.txt").as_deref(), Some("A"));
    assert_eq!(world.file("b.txt"), None, "rejected, never run");
}

/// M3: a plan file with YAML front matter. The approver is shown the title and the body (the
/// front matter is not shown, nor handed over): the sha256 they pin is of that text, so anyone
/// can check it against what `pending --json` carries.
#[test]
fn a_plans_sha256_pins_the_text_shown_not_bytes_never_shown() {
    let file = "---\nnote: never shown\n---\n# Tidy up\n\n1. Remove dead code.\n";
    let plan = json!({ "path": "t.md", "content": file });
    let world = World::with_config(
        "dir",
        CONFIG,
        vec![
            calls([call("call_1", "write_plan", &plan.to_string())]),
            calls([submit("call_2", ".agent/plans/t.md")]),
        ],
    );
    let out = world.cli("run", true, &["--mode", "plan", "Plan it"], None);
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let listed = world.pending_json();
    // What the approver is shown: the plan as the record keeps it (title and body).
    let record = std::fs::read_dir(&world.spec)
        .expect("the store")
        .map(|e| e.expect("an entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a record");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record).expect("read")).expect("json");
    let payload = &record["pending"]["suspendPayload"];
    assert_eq!(payload["title"], "Tidy up");
    let shown = format!(
        "# {}\n\n{}\n",
        payload["title"].as_str().expect("title"),
        payload["plan"].as_str().expect("plan")
    );
    assert_eq!(shown, "# Tidy up\n\n1. Remove dead code.\n");
    let pinned = agent_controller::tool::submit_plan::sha256_hex(shown.as_bytes());
    assert_eq!(
        payload["sha256"],
        pinned.as_str(),
        "the sha256 of the text shown"
    );
    assert_eq!(listed[0]["sha256"], pinned.as_str(), "{:#}", listed[0]);
}

/// M3: a record whose pending plan text was changed (its sha256 left as it was) is refused on
/// load: `pending` does not list it (it reports it unreadable) and `decide` refuses, saying
/// the text does not match its sha256; the record is left as it was.
#[test]
fn a_record_whose_plan_text_does_not_match_its_sha256_is_refused() {
    use common::cli::{SHIPPED, STORE, UNREADABLE, bin, pending_plan, records, text};
    let ws = tempfile::tempdir().expect("tempdir");
    let session = pending_plan(ws.path());
    let (name, record) = records(ws.path())
        .into_iter()
        .find(|(name, _)| name.starts_with(&session))
        .expect("the record");
    // The pending plan's text changed, its sha256 left as it was.
    let mut json: serde_json::Value = serde_json::from_str(&record).expect("json");
    let plan = &mut json["pending"]["suspendPayload"]["plan"];
    let changed = plan.as_str().expect("the plan text").replacen(
        "1. Read the code this change touches.",
        "1. Delete the repository.",
        1,
    );
    assert_ne!(
        plan.as_str(),
        Some(changed.as_str()),
        "the step is in the plan"
    );
    *plan = json!(changed);
    let tampered = json.to_string();
    let path = ws.path().join(STORE).join(&name);
    std::fs::write(&path, &tampered).expect("tamper");
    let out = bin(ws.path(), &["pending", "--store", STORE], "");
    assert_eq!(out.status.code(), Some(UNREADABLE), "{}", text(&out));
    assert!(text(&out).contains("sha256"), "{}", text(&out));
    let out = bin(
        ws.path(),
        &[
            "decide",
            "--store",
            STORE,
            "--config",
            SHIPPED,
            &session,
            "--approve",
        ],
        "",
    );
    assert!(
        !matches!(out.status.code(), Some(DONE | NOT_APPROVED)),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("sha256"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(&path).expect("record"),
        tampered,
        "nothing changed"
    );
}

/// M3: a record saved before plan hashes pinned the text shown (schema 6: the hash of the
/// file's bytes, which the record does not keep) is read with the hash of the text it keeps;
/// the same record in the current schema, its hash not its text's, is refused.
#[test]
fn an_older_records_plan_hash_is_computed_again_and_a_current_ones_is_checked() {
    use agent_controller::store::SCHEMA_VERSION;
    use common::cli::{STORE, UNREADABLE, bin, text};
    let mut raw: serde_json::Value =
        serde_json::from_str(&common::read_fixture("records/schema-1.pending.json")).expect("json");
    let id = raw["sessionId"].as_str().expect("id").to_owned();
    let payload = &raw["pending"]["suspendPayload"];
    let shown = format!(
        "# {}\n\n{}\n",
        payload["title"].as_str().expect("title"),
        payload["plan"].as_str().expect("plan")
    );
    let pinned = agent_controller::tool::submit_plan::sha256_hex(shown.as_bytes());
    // The hash of bytes the record does not keep (a front matter, say).
    raw["pending"]["suspendPayload"]["sha256"] = json!("ab".repeat(32));
    for (version, listed) in [(6, true), (SCHEMA_VERSION, false)] {
        raw["schemaVersion"] = json!(version);
        let ws = tempfile::tempdir().expect("tempdir");
        let store = ws.path().join(STORE);
        std::fs::create_dir_all(&store).expect("store");
        let path = store.join(format!("{id}.pending.json"));
        std::fs::write(&path, raw.to_string()).expect("write");
        let out = bin(ws.path(), &["pending", "--store", STORE, "--json"], "");
        if listed {
            assert_eq!(out.status.code(), Some(DONE), "{}", text(&out));
            let line: serde_json::Value =
                serde_json::from_str(stdout(&out).lines().next().expect("a line")).expect("json");
            assert_eq!(line["sha256"], pinned.as_str(), "{line:#}");
        } else {
            assert_eq!(out.status.code(), Some(UNREADABLE), "{}", text(&out));
            assert!(
                text(&out).contains("does not match its sha256"),
                "{}",
                text(&out)
            );
        }
        assert_eq!(
            std::fs::read_to_string(&path).expect("record"),
            raw.to_string(),
            "listing changes nothing"
        );
    }
}
