//! The CLI of allowances with a scope (issue 23, item 2): `decide --always --scope workspace`
//! keeps an allowance in the store, `allowances list` shows it, a later run in the same
//! workspace runs the tool without asking, `allowances revoke` ends it; at the prompt `a
//! session` and `a workspace` choose the scope; `allowances list|revoke --session` list and
//! revoke a session's own, `pending` shows those in force, and `--allow-arg` with `--allow-glob`
//! or `--allow-regex` narrows one to some values of an argument. The model is the real OpenAI provider against
//! the scripted OpenAI-compatible server, on the directory store, SQLite and PostgreSQL
//! (`AGENT_CONTROLLER_TEST_POSTGRES`).
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use std::process::{Output, Stdio};

use common::cli::snapshots::same;
use common::cli::world::{World, pending, stores};
use common::cli::{DONE, INVALID, NOT_APPROVED, PENDING, REFUSED, stdout};
use common::json_lines;
use common::openai_server::{Reply, call, calls, text};
use common::stderr;
use serde_json::json;
use snapbox::str;

const CONFIG: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]

[[modes]]
id = "review"
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file"]
"#;

/// A world with [`CONFIG`].
fn new_world(kind: &str, script: Vec<Reply>) -> World {
    World::with_config(kind, CONFIG, script)
}

/// `agent-controller allowances ARGS --store SPEC`.
fn allowances(world: &World, args: &[&str]) -> Output {
    crate::common::agent_controller()
        .arg("allowances")
        .args(args)
        .args(["--store", &world.spec])
        .stdin(Stdio::null())
        .output()
        .expect("allowances")
}

fn write(id: &str, path: &str) -> common::openai_server::Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": "x" }).to_string(),
    )
}

#[test]
fn decide_always_scope_workspace_keeps_it_for_the_next_run_until_it_is_revoked() {
    for kind in stores() {
        let world = new_world(
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
        let out = world.decide(
            &session,
            &[
                "--approve",
                "--always",
                "--scope",
                "workspace",
                "--by",
                "ana",
            ],
        );
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));

        let out = allowances(&world, &["list"]);
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        same(
            String::from_utf8_lossy(&out.stdout).into_owned(),
            str![[r#"
ws_[..]  mode build  write_file  workspace [..]  (session [..], decision_1 by ana at [..])

"#]],
        );
        let listed = json_lines(&allowances(&world, &["list", "--json"]));
        assert_eq!(listed.len(), 1, "{kind}: {listed:?}");
        assert_eq!(listed[0]["scope"], "workspace");
        assert_eq!(listed[0]["modeId"], "build");
        let id = listed[0]["id"].as_str().expect("id").to_owned();
        // Another workspace has none.
        let elsewhere = tempfile::tempdir().expect("elsewhere");
        let out = allowances(
            &world,
            &[
                "list",
                "--workspace",
                &elsewhere.path().display().to_string(),
            ],
        );
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

        let out = allowances(&world, &["revoke", &id]);
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("revoked workspace allowance"),
            "{kind}"
        );
        let out = allowances(&world, &["revoke", &id]);
        assert_eq!(out.status.code(), Some(REFUSED), "{kind}: {}", stderr(&out));
        let (out, _) = world.run_stored("Write c.txt");
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: asked again");
    }
}

#[test]
fn scope_without_always_is_a_usage_error_and_the_prompt_takes_a_session() {
    let world = new_world(
        "dir",
        vec![
            calls([write("call_1", "a.txt")]),
            text("done"),
            calls([write("call_2", "b.txt")]),
            text("done"),
        ],
    );
    let (_, session) = world.run_stored("Write a.txt");
    let out = world.decide(&session, &["--approve", "--scope", "session"]);
    assert_eq!(out.status.code(), Some(INVALID), "{}", stderr(&out));
    let out = world.cli("decide", true, &[&session], Some("a session\n"));
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    assert!(stderr(&out).contains("`a session`"), "{}", stderr(&out));
    assert!(world.ws.path().join("a.txt").exists());
    let out = allowances(&world, &["list"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "a session allowance is not a workspace one"
    );
}

/// `write_file` of `content` to `path`.
fn write_text(id: &str, path: &str, content: &str) -> common::openai_server::Call {
    call(
        id,
        "write_file",
        &json!({ "path": path, "content": content }).to_string(),
    )
}

/// `allowances ARGS --session SESSION --config CONFIG` (the world's config, which is not the
/// workspace's `config/modes.toml`).
fn of_session(world: &World, args: &[&str], session: &str) -> Output {
    let config = world.config.display().to_string();
    let mut all = args.to_vec();
    all.extend_from_slice(&["--session", session]);
    if args.first() == Some(&"revoke") {
        all.extend_from_slice(&["--config", &config]);
    }
    allowances(world, &all)
}

/// `switch --store SPEC --config CONFIG SESSION MODE`.
fn switch(world: &World, session: &str, mode: &str) -> Output {
    crate::common::agent_controller()
        .args(["switch", "--store", &world.spec, session, mode, "--config"])
        .arg(&world.config)
        .stdin(Stdio::null())
        .output()
        .expect("switch")
}

/// Issue 23, review finding 13: a session's own allowances (scopes `mode` and `session`) are
/// listed with `allowances list --session` (text and JSON), shown by `pending` while they are
/// in force, and revoked by id with `allowances revoke --session`, saved: the next call asks
/// again, and a second revoke is refused.
#[test]
fn a_session_allowance_is_listed_shown_by_pending_and_revoked_by_id() {
    for kind in stores() {
        let world = new_world(
            kind,
            vec![
                calls([write("call_1", "src/a.txt")]),
                calls([write("call_2", "src/b.txt")]),
                calls([write("call_3", "top.txt")]),
            ],
        );
        std::fs::create_dir(world.ws.path().join("src")).expect("src");
        let (_, session) = world.run_stored("Write src/a.txt");
        let out = world.decide(
            &session,
            &[
                "--approve",
                "--always",
                "--scope",
                "session",
                "--allow-path",
                "src/**",
                "--by",
                "ana",
            ],
        );
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        assert!(world.file("src/b.txt").is_some(), "{kind}: ran unasked");
        assert!(
            world.file("top.txt").is_none(),
            "{kind}: outside src/**, it waits"
        );

        let out = pending(&world.spec, false);
        same(
            world.shown(&out, &session),
            str![[r#"
exit 0
--- stdout
[SESSION]	[..]	decision_3	build	tool call write_file	[..]	argsSha256 [SHA256]	workspace [WORKSPACE]	allowances in force: decision_1 (session): write_file path `src/**` in mode `build`
--- stderr

"#]],
        );
        let listed = world.pending_json();
        assert_eq!(listed.len(), 1, "{kind}: {listed:?}");
        let in_force = &listed[0]["allowancesInForce"];
        let invalid: Vec<String> =
            jsonschema::validator_for(&agent_controller::schema::pending_entry())
                .expect("a valid schema")
                .iter_errors(&listed[0])
                .map(|e| e.to_string())
                .collect();
        assert!(
            invalid.is_empty(),
            "{kind}: `schema pending` describes the line: {invalid:?}"
        );
        assert_eq!(in_force[0]["id"], "decision_1", "{kind}: {in_force}");
        assert_eq!(in_force[0]["scope"], "session", "{kind}");
        assert_eq!(
            in_force[0]["pattern"],
            json!({ "path": "src/**" }),
            "{kind}"
        );

        let out = of_session(&world, &["list"], &session[..8]);
        same(
            world.shown(&out, &session),
            str![[r#"
exit 0
--- stdout
session  decision_1  mode build  write_file path `src/**`  (session [SESSION], decision_1 by ana at [..])  in force
--- stderr

"#]],
        );
        let kept = json_lines(&of_session(&world, &["list", "--json"], &session));
        assert_eq!(kept.len(), 1, "{kind}: {kept:?}");
        assert_eq!(kept[0]["id"], "decision_1", "{kind}");
        assert_eq!(kept[0]["inForce"], true, "{kind}");
        assert_eq!(kept[0]["modeId"], "build", "{kind}");

        let out = of_session(&world, &["revoke", "decision_1"], &session);
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("revoked allowance decision_1 (session)"),
            "{kind}: {}",
            stderr(&out)
        );
        let out = of_session(&world, &["revoke", "decision_1"], &session);
        assert_eq!(out.status.code(), Some(REFUSED), "{kind}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("keeps no allowance decision_1"),
            "{kind}"
        );
        let out = of_session(&world, &["list"], &session);
        assert_eq!(out.status.code(), Some(DONE), "{kind}");
        assert!(out.stdout.is_empty(), "{kind}: {}", stdout(&out));
        assert!(stderr(&out).contains("keeps no allowances"), "{kind}");
        let listed = world.pending_json();
        assert_eq!(listed.len(), 1, "{kind}: still waiting");
        assert!(
            listed[0].get("allowancesInForce").is_none(),
            "{kind}: {listed:?}"
        );
    }
}

/// An unknown session, and a workspace allowance's id given without the session that keeps it,
/// are refused and change nothing.
#[test]
fn revoking_from_an_unknown_session_is_refused() {
    let world = new_world("dir", vec![calls([write("call_1", "a.txt")])]);
    let (_, session) = world.run_stored("Write a.txt");
    let unknown = "00000000-0000-4000-8000-000000000000";
    let out = of_session(&world, &["list"], unknown);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    let out = of_session(&world, &["revoke", "decision_1"], unknown);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    let out = of_session(&world, &["revoke", "decision_1"], &session);
    assert_eq!(out.status.code(), Some(REFUSED), "{}", stderr(&out));
    assert_eq!(world.pending_json().len(), 1, "nothing changed");
}

/// Issue 23, review finding 12 (`switch --help` said every always-allowed tool ends at a
/// switch): a switch ends the `mode` allowance; the `session` one stops applying and applies
/// again when the session returns to its mode; the `workspace` one stays.
#[test]
fn a_switch_ends_mode_allowances_only_and_session_ones_come_back_with_their_mode() {
    let world = new_world(
        "dir",
        vec![
            calls([
                write("call_1", "src/a.txt"),
                write("call_2", "b.txt"),
                write("call_3", "c.txt"),
            ]),
            text("done"),
        ],
    );
    std::fs::create_dir(world.ws.path().join("src")).expect("src");
    let (_, session) = world.run_stored("Write three files");
    for (decision, flags) in [
        (
            "decision_1",
            &["--scope", "session", "--allow-path", "src/**"][..],
        ),
        (
            "decision_2",
            &["--scope", "workspace", "--allow-path", "b.txt"][..],
        ),
        ("decision_3", &[][..]),
    ] {
        let mut args = vec!["--decision", decision, "--approve", "--always"];
        args.extend_from_slice(flags);
        let out = world.decide(&session, &args);
        assert!(
            matches!(out.status.code(), Some(DONE | PENDING)),
            "{decision}: {}",
            stderr(&out)
        );
    }
    let scopes = |world: &World| -> Vec<(String, String, bool)> {
        json_lines(&of_session(world, &["list", "--json"], &session))
            .iter()
            .map(|a| {
                (
                    a["scope"].as_str().unwrap_or_default().to_owned(),
                    a["modeId"].as_str().unwrap_or_default().to_owned(),
                    a["inForce"] == true,
                )
            })
            .collect()
    };
    let all_in_build = |in_force: bool| {
        ["session", "mode", "workspace"]
            .map(|s| (s.to_owned(), "build".to_owned(), in_force))
            .to_vec()
    };
    assert_eq!(scopes(&world), all_in_build(true));

    let out = switch(&world, &session, "review");
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let mut away = all_in_build(false);
    away.remove(1);
    assert_eq!(
        scopes(&world),
        away,
        "the mode allowance ended; the others wait for build"
    );
    let out = of_session(&world, &["list"], &session);
    assert!(
        stdout(&out).contains("not in force: the session is in mode review"),
        "{}",
        stdout(&out)
    );

    let out = switch(&world, &session, "build");
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let mut back = all_in_build(true);
    back.remove(1);
    assert_eq!(scopes(&world), back, "back in build: both apply again");
}

/// Review finding 13: `--allow-arg NAME` with `--allow-glob` or `--allow-regex` narrows an
/// allowance to some values of an argument (as an `allow` rule's `glob`/`regex`); a pattern the
/// library refuses (one that does not compile, a string pattern on `path`, an argument the tool
/// does not declare) and flags that do not go together are usage errors (exit 2) and nothing is
/// decided.
#[test]
fn decide_narrows_an_allowance_to_an_argument_and_refuses_bad_patterns() {
    let world = new_world(
        "dir",
        vec![
            calls([write_text("call_1", "a.txt", "x")]),
            calls([write_text("call_2", "b.txt", "xyz")]),
            calls([write_text("call_3", "c.txt", "no")]),
        ],
    );
    let (_, session) = world.run_stored("Write a.txt");
    let before = world.pending_json();
    for (flags, says) in [
        (&["--allow-glob", "x*"][..], "--allow-arg"),
        (&["--allow-arg", "content"][..], "--allow-"),
        (
            &[
                "--allow-arg",
                "content",
                "--allow-glob",
                "x*",
                "--allow-regex",
                "x+",
            ][..],
            "cannot be used with",
        ),
        (
            &["--allow-arg", "content", "--allow-regex", "("][..],
            "--allow-regex cannot narrow",
        ),
        (
            &["--allow-arg", "content", "--allow-glob", "[x"][..],
            "--allow-glob cannot narrow",
        ),
        (
            &["--allow-arg", "path", "--allow-glob", "src/*"][..],
            "use `path`",
        ),
        (
            &["--allow-arg", "nope", "--allow-glob", "x*"][..],
            "does not declare",
        ),
    ] {
        let mut args = vec!["--approve", "--always", "--scope", "session"];
        args.extend_from_slice(flags);
        let out = world.decide(&session, &args);
        assert_eq!(
            out.status.code(),
            Some(INVALID),
            "{flags:?}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(says), "{flags:?}: {}", stderr(&out));
        assert_eq!(
            world.pending_json(),
            before,
            "{flags:?}: nothing was decided"
        );
        assert!(world.file("a.txt").is_none(), "{flags:?}");
    }
    let out = world.decide(
        &session,
        &[
            "--approve",
            "--always",
            "--scope",
            "session",
            "--allow-arg",
            "content",
            "--allow-glob",
            "x*",
        ],
    );
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    assert_eq!(
        world.file("b.txt").as_deref(),
        Some("xyz"),
        "`xyz` fits `x*`"
    );
    assert!(world.file("c.txt").is_none(), "`no` does not: it waits");
    let kept = json_lines(&of_session(&world, &["list", "--json"], &session));
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        kept[0]["pattern"],
        json!({ "arg": "content", "glob": "x*" })
    );
    assert_eq!(
        world.pending_json()[0]["allowancesInForce"][0]["pattern"],
        json!({ "arg": "content", "glob": "x*" })
    );
}

/// Both tools wait in `build`: the reply's `read_file` keeps the run suspended while its two
/// `write_file` calls are decided.
const BOTH_WAIT: &str = r#"
[[modes]]
id = "build"
default = true
availableTools = ["read_file", "write_file"]
requireApproval = ["write_file", "read_file"]
"#;

/// The hostile review's finding 1 and trust round 4, M2: an "always allow" approved the reply's
/// other `write_file` call unseen. It approves the call it names only: the other waits to be
/// asked about; revoked before the run resumes (by `allowances revoke --session`, or a
/// workspace one in the store with `allowances revoke ID`), it still waits, and never runs
/// unless the user approves it.
#[test]
fn a_revoked_allowance_takes_back_what_it_approved_before_the_run_resumed() {
    let mut cases = vec![("dir", "session"), ("dir", "workspace")];
    if cfg!(feature = "sqlite") {
        cases.push(("sqlite", "workspace"));
    }
    for (kind, scope) in cases {
        let world = World::with_config(
            kind,
            BOTH_WAIT,
            vec![
                calls([
                    write("call_1", "a.txt"),
                    write("call_2", "b.txt"),
                    call(
                        "call_3",
                        "read_file",
                        &json!({ "path": "a.txt" }).to_string(),
                    ),
                ]),
                text("done"),
            ],
        );
        let (out, session) = world.run_stored("Write a.txt and b.txt");
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        let args = [
            "--decision",
            "decision_1",
            "--approve",
            "--always",
            "--scope",
            scope,
        ];
        let out = world.decide(&session, &args);
        assert_eq!(
            out.status.code(),
            Some(PENDING),
            "{kind} {scope}: {}",
            stderr(&out)
        );
        let waiting = |world: &World| -> Vec<String> {
            world
                .pending_json()
                .iter()
                .map(|p| p["decisionId"].as_str().unwrap_or("?").to_owned())
                .collect()
        };
        assert_eq!(
            waiting(&world),
            ["decision_2", "decision_3"],
            "{kind} {scope}: b.txt is asked about, not approved unseen"
        );

        let out = if scope == "session" {
            of_session(&world, &["revoke", "decision_1"], &session)
        } else {
            let listed = json_lines(&allowances(&world, &["list", "--json"]));
            let id = listed[0]["id"].as_str().expect("an id").to_owned();
            allowances(&world, &["revoke", &id])
        };
        assert_eq!(
            out.status.code(),
            Some(DONE),
            "{kind} {scope}: {}",
            stderr(&out)
        );
        if scope == "session" {
            assert_eq!(
                waiting(&world),
                ["decision_2", "decision_3"],
                "{kind} {scope}: the revoke leaves them waiting"
            );
        }

        let out = world.decide(&session, &["--decision", "decision_3", "--approve"]);
        assert_eq!(
            out.status.code(),
            Some(PENDING),
            "{kind} {scope}: b.txt waits, so the run does not resume: {}",
            stderr(&out)
        );
        assert!(
            world.file("b.txt").is_none(),
            "{kind} {scope}: never run unasked"
        );
        assert_eq!(waiting(&world), ["decision_2"], "{kind} {scope}");
        let out = world.decide(&session, &["--decision", "decision_2", "--reject"]);
        assert_eq!(
            out.status.code(),
            Some(NOT_APPROVED),
            "{kind} {scope}: {}",
            stderr(&out)
        );
        assert!(world.file("b.txt").is_none(), "{kind} {scope}: rejected");
        assert_eq!(
            world.file("a.txt").as_deref(),
            Some("x"),
            "{kind} {scope}: approved by hand"
        );
    }
}
