//! The CLI acts in the workspace a session recorded (issue 19 item 1): `decide` and `continue`
//! take it from the record, wherever they run; a `--workspace` naming another directory is
//! refused (exit 2), a workspace that is gone or another directory now is refused (exit 5), and
//! nothing changes. `pending`, the prompt and `tool_suspended` show it. The model is the real
//! OpenAI provider against the scripted OpenAI-compatible server; the store is the directory
//! store, SQLite and PostgreSQL (`AGENT_CONTROLLER_TEST_POSTGRES`).
#![cfg(all(feature = "openai", feature = "cli"))]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use common::Workspace;
use common::cli::snapshots::{same, scrubbed, shown};
use common::cli::{DONE, PENDING};
use common::json_lines;
use common::openai_server::{Reply, ScriptedServer, call, calls, contents, submit, text};
use common::stderr;
use serde_json::{Value, json};
use snapbox::str;

const CONFIG: &str = r#"
[[modes]]
id = "plan"
name = "Plan"
transitionsTo = "build"
availableTools = ["read_file", "write_plan", "submit_plan"]

[[modes]]
id = "build"
name = "Build"
default = true
availableTools = ["read_file", "write_file", "list_files"]
requireApproval = ["write_file"]
"#;

/// A project (the workspace, with the config at its default place `config/modes.toml`), a
/// directory elsewhere (the decider's current directory), a store outside both, and the model.
struct World {
    project: Workspace,
    elsewhere: Workspace,
    spec: String,
    server: ScriptedServer,
    _store_dir: tempfile::TempDir,
    #[cfg(feature = "postgres")]
    _schema: Option<common::postgres::TestSchema>,
}

impl World {
    fn new(kind: &str, script: Vec<Reply>) -> Self {
        let project = Workspace::new();
        std::fs::create_dir_all(project.path().join("config")).expect("config dir");
        std::fs::write(project.path().join("config/modes.toml"), CONFIG).expect("config");
        let store_dir = tempfile::tempdir().expect("store dir");
        #[cfg(feature = "postgres")]
        let schema = (kind == "postgres")
            .then(common::postgres::TestSchema::new)
            .flatten();
        let spec = match kind {
            "sqlite" => format!("sqlite:{}", store_dir.path().join("sessions.db").display()),
            #[cfg(feature = "postgres")]
            "postgres" => schema.as_ref().expect("a schema").url.clone(),
            _ => store_dir.path().join("sessions").display().to_string(),
        };
        Self {
            project,
            elsewhere: Workspace::new(),
            spec,
            server: ScriptedServer::start_blocking(script),
            _store_dir: store_dir,
            #[cfg(feature = "postgres")]
            _schema: schema,
        }
    }

    /// What `out` printed (exit status, stdout, stderr) with the store spec, the project and
    /// the other directory (as given and canonical), ids and hashes replaced by placeholders:
    /// the same text on every store.
    fn shown(&self, out: &Output, session: &str) -> String {
        let canonical = |path: &Path| {
            std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.to_owned())
                .display()
                .to_string()
        };
        let project = self.project.path().display().to_string();
        let project_canonical = canonical(self.project.path());
        let elsewhere = self.elsewhere.path().display().to_string();
        let elsewhere_canonical = canonical(self.elsewhere.path());
        let text = shown(
            out,
            &[
                (&self.spec, "[STORE]"),
                (&project_canonical, "[PROJECT]"),
                (&project, "[PROJECT]"),
                (&elsewhere_canonical, "[ELSEWHERE]"),
                (&elsewhere, "[ELSEWHERE]"),
            ],
        );
        scrubbed(text, self.project.path(), session)
    }

    fn canonical(&self) -> PathBuf {
        std::fs::canonicalize(self.project.path()).expect("canonical")
    }

    /// `agent-controller COMMAND --store STORE --model ... ARGS`, run in `cwd`, stdin closed.
    fn cli(&self, cwd: &Path, command: &str, args: &[&str]) -> Output {
        crate::common::agent_controller()
            .current_dir(cwd)
            .arg(command)
            .args(["--store", &self.spec, "--model", "openai/test-model"])
            .args(args)
            .envs(self.server.env())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("spawn")
    }

    /// A plan detached in the project (run there, with the defaults); returns the session id.
    fn detached_plan(&self) -> String {
        let out = self.cli(
            self.project.path(),
            "run",
            &["--mode", "plan", "--detach", "--json", "Add a marker"],
        );
        assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
        let events = json_lines(&out);
        let suspended = events
            .iter()
            .find(|e| e["type"] == "tool_suspended")
            .expect("tool_suspended");
        assert_eq!(
            suspended["suspendPayload"]["workspace"],
            self.canonical().to_str().expect("ok"),
            "the payload names the workspace"
        );
        events[0]["sessionId"].as_str().expect("id").to_owned()
    }

    fn pending(&self, json: bool) -> Output {
        let mut cmd = crate::common::agent_controller();
        cmd.args(["pending", "--store", &self.spec]);
        if json {
            cmd.arg("--json");
        }
        cmd.stdin(Stdio::null()).output().expect("pending")
    }

    fn pending_json(&self) -> Vec<Value> {
        let out = self.pending(true);
        assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
        json_lines(&out)
    }
}

/// The plan's model replies: write the plan, submit it; then the build mode's: write the marker
/// (it waits for approval), then finish.
fn script() -> Vec<Reply> {
    vec![
        calls([call(
            "call_1",
            "write_plan",
            &json!({"path": "marker.md", "content": "# Marker\n\nWrite marker.txt.\n"}).to_string(),
        )]),
        calls([submit("call_2", ".agent/plans/marker.md")]),
        calls([call(
            "call_3",
            "write_file",
            &json!({"path": "marker.txt", "content": "written"}).to_string(),
        )]),
        text("Wrote the marker."),
    ]
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

/// Detach a plan in the project, `cd` elsewhere, `decide --approve` without `--workspace`: the
/// plan's build mode and its waiting `write_file` act in the project, never in the current
/// directory (the guide's "approve tomorrow", `src/guide/cli.md`).
#[test]
fn decide_without_workspace_acts_in_the_recorded_workspace_wherever_it_runs() {
    for kind in stores() {
        let world = World::new(kind, script());
        let session = world.detached_plan();
        let out = world.cli(
            world.elsewhere.path(),
            "decide",
            &[&session, "--approve", "--json"],
        );
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
        let events = json_lines(&out);
        let waiting = events
            .iter()
            .find(|e| e["type"] == "tool_suspended")
            .expect("write_file waits");
        assert_eq!(
            waiting["suspendPayload"]["workspace"],
            world.canonical().to_str().expect("ok"),
            "{kind}"
        );
        let out = world.cli(
            world.elsewhere.path(),
            "decide",
            &[&session, "--approve", "--json"],
        );
        assert_eq!(out.status.code(), Some(DONE), "{kind}: {}", stderr(&out));
        assert_eq!(
            std::fs::read_to_string(world.project.path().join("marker.txt")).ok(),
            Some("written".to_owned()),
            "{kind}: written in the project"
        );
        assert!(
            !world.elsewhere.path().join("marker.txt").exists(),
            "{kind}: nothing in the current directory"
        );
    }
}

/// `--workspace` naming another directory than the recorded one is refused (exit 2), naming
/// both, and nothing changes; the recorded one named explicitly (another spelling of it) is
/// fine.
#[test]
fn decide_with_a_workspace_other_than_the_recorded_one_is_refused_naming_both() {
    for kind in stores() {
        let world = World::new(kind, script());
        let session = world.detached_plan();
        let before = world.pending_json();
        let other = world.elsewhere.path().to_str().expect("ok");
        let config = world.project.path().join("config/modes.toml");
        let out = world.cli(
            world.project.path(),
            "decide",
            &[
                &session,
                "--approve",
                "--workspace",
                other,
                "--config",
                config.to_str().expect("ok"),
            ],
        );
        // The same text on every store, naming both directories.
        same(
            world.shown(&out, &session),
            str![[r#"
exit 2
--- stdout
--- stderr
error: --workspace: session `[SESSION]` works in [PROJECT], but this controller's workspace is [ELSEWHERE]: it acts only where it started; nothing was done

"#]],
        );
        assert_eq!(world.pending_json(), before, "{kind}: nothing changed");
        assert!(!world.elsewhere.path().join("marker.txt").exists());

        // The recorded workspace, spelled another way (`DIR/.`), is the same directory.
        let same = format!("{}/.", world.project.path().display());
        let out = world.cli(
            world.elsewhere.path(),
            "decide",
            &[&session, "--approve", "--workspace", &same],
        );
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
    }
}

/// The recorded workspace moved aside and another directory made at its path, or gone: refused
/// (exit 5) with a clear error, nothing changes, and the decision goes through once it is back.
#[test]
fn decide_refuses_a_workspace_that_is_gone_or_another_directory_now() {
    for kind in stores() {
        let world = World::new(kind, script());
        let session = world.detached_plan();
        let before = world.pending_json();
        let path = world.project.path().to_path_buf();
        let aside = path.with_extension("aside");
        std::fs::rename(&path, &aside).expect("move aside");
        std::fs::create_dir_all(path.join("config")).expect("new directory");
        std::fs::write(path.join("config/modes.toml"), CONFIG).expect("config");
        let out = world.cli(world.elsewhere.path(), "decide", &[&session, "--approve"]);
        same(
            world.shown(&out, &session),
            str![[r#"
exit 5
--- stdout
--- stderr
error: [PROJECT] is another directory now than the workspace session `[SESSION]` started in (deleted and made again, or replaced); nothing was done

"#]],
        );
        assert_eq!(world.pending_json(), before, "{kind}: nothing changed");
        assert!(!path.join("marker.txt").exists());

        std::fs::remove_dir_all(&path).expect("remove");
        let out = world.cli(world.elsewhere.path(), "decide", &[&session, "--approve"]);
        same(
            world.shown(&out, &session),
            str![[r#"
exit 5
--- stdout
--- stderr
error: the workspace [PROJECT] of session `[SESSION]` cannot be opened: No such file or directory (os error 2); nothing was done

"#]],
        );
        assert_eq!(world.pending_json(), before, "{kind}: nothing changed");

        std::fs::rename(&aside, &path).expect("put back");
        let out = world.cli(world.elsewhere.path(), "decide", &[&session, "--approve"]);
        assert_eq!(out.status.code(), Some(PENDING), "{kind}: {}", stderr(&out));
    }
}

/// `pending` (text and JSON) and the `decide` prompt show the workspace the decision acts in.
#[test]
fn pending_and_the_decide_prompt_show_the_workspace() {
    let world = World::new("dir", script());
    let session = world.detached_plan();
    let canonical = world.canonical();
    let listed = world.pending_json();
    assert_eq!(listed[0]["workspace"], canonical.to_str().expect("ok"));
    let out = world.pending(false);
    same(
        world.shown(&out, &session),
        str![[r#"
exit 0
--- stdout
[SESSION]	run_1	decision_1	plan -> build	[SHA12]	Marker	workspace [PROJECT]
--- stderr

"#]],
    );
    // The prompt (no verdict flag), dismissed by end of input.
    let out = world.cli(world.elsewhere.path(), "decide", &[&session]);
    same(
        world.shown(&out, &session),
        str![[r#"
exit 4
--- stdout
suspended: session [SESSION] run run_1 decision decision_1
--- stderr

# Marker

Write marker.txt.
(plan file .agent/plans/marker.md, sha256 [SHA12]...)
workspace: [PROJECT] (where an approval carries the run on)
Approve this plan and switch to ● Build (build)?
[y]es approve  [n]o reject  or type feedback to reject with it  [e] edit the plan  [m MODEL] approve with another model  [c LINE TEXT] comment on a line (c numbers them)  [s MODE] switch to build, not approving
> 
end of input: the plan is not approved; the mode stays `plan`
the plan stays pending; decide later with: agent-controller decide --store [STORE] [SESSION] --model openai/test-model --decision decision_1 (--approve [--to MODE] | --reject) [--feedback TEXT]

"#]],
    );
    // A waiting tool call: its `pending` line and its prompt name the workspace too.
    let out = world.cli(world.elsewhere.path(), "decide", &[&session, "--approve"]);
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let out = world.pending(false);
    same(
        world.shown(&out, &session),
        str![[r#"
exit 0
--- stdout
[SESSION]	run_1	decision_2	build	tool call write_file	{"content": "written", "path": "marker.txt"}	argsSha256 [SHA256]	workspace [PROJECT]
--- stderr

"#]],
    );
    let out = world.cli(world.elsewhere.path(), "decide", &[&session]);
    same(
        world.shown(&out, &session),
        str![[r#"
exit 4
--- stdout
suspended: session [SESSION] run run_1 tool calls wait for approval: decision_2 (write_file)
--- stderr

tool call waits for approval: write_file (decision decision_2, argsSha256 [SHA256])
  "content": "written"
  "path": "marker.txt"
workspace: [PROJECT] (where the call runs if approved)
Run this write_file call?
[y]es run it  [a]lways allow write_file until the mode changes (`a session`, `a workspace` for longer)  [n]o reject  [f]eedback reject with a note  [v]iew every argument whole  [q] leave it pending  or type feedback to reject with it
> 
end of input: the tool call decision_2 (write_file) is not decided and does not run
the tool call stays pending; decide it later with: agent-controller decide --store [STORE] [SESSION] --model openai/test-model --decision decision_2 (--approve [--always] | --reject) [--feedback TEXT]

"#]],
    );
}

/// `continue` protects the loaded config file from the tools, as `run` and `decide` do: a model
/// that reads `config/modes.toml` in an interrupted run gets an error, not the config.
#[test]
fn continue_protects_the_config_file_from_the_tools() {
    let world = World::new(
        "dir",
        vec![
            calls([call(
                "call_1",
                "write_file",
                &json!({"path": "a.txt", "content": "x"}).to_string(),
            )]),
            calls([call(
                "call_2",
                "read_file",
                &json!({"path": "config/modes.toml"}).to_string(),
            )]),
            text("Done."),
        ],
    );
    let out = world.cli(world.project.path(), "run", &["--json", "Look around"]);
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let session = json_lines(&out)[0]["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    // Make the run interrupted: `running`, with no lease, before the model's reply (as a record
    // of a host that stopped right after its save).
    let dir = Path::new(&world.spec);
    let pending = dir.join(format!("{session}.pending.json"));
    let mut record: Value =
        serde_json::from_str(&std::fs::read_to_string(&pending).expect("record")).expect("json");
    record["run"]["state"] = json!("running");
    let object = record.as_object_mut().expect("object");
    object.remove("pendingToolCalls");
    let messages = object["messages"].as_array_mut().expect("messages");
    messages.truncate(1);
    std::fs::remove_file(&pending).expect("remove");
    std::fs::write(
        dir.join(format!("{session}.running.json")),
        serde_json::to_vec(&record).expect("ok"),
    )
    .expect("write");

    // `pending` lists the interrupted run with the workspace `continue` carries it on in.
    let canonical = world.canonical();
    let listed = world.pending_json();
    let interrupted = listed
        .iter()
        .find(|l| l["interrupted"]["sessionId"] == session.as_str())
        .expect("listed as interrupted");
    assert_eq!(
        interrupted["interrupted"]["workspace"],
        canonical.to_str().expect("utf-8")
    );
    let text = String::from_utf8_lossy(&world.pending(false).stdout).into_owned();
    assert!(
        text.contains(&format!("\tworkspace {}\t", canonical.display())),
        "{text}"
    );

    let out = world.cli(world.project.path(), "continue", &[&session, "--json"]);
    assert_eq!(out.status.code(), Some(DONE), "{}", stderr(&out));
    let bodies = world.server.bodies_blocking();
    let results = contents(bodies.last().expect("the last request"), "tool");
    let result = results.last().expect("the read_file result");
    assert!(
        !result.contains("requireApproval"),
        "the config leaked: {result}"
    );
    let end = json_lines(&out)
        .into_iter()
        .find(|e| e["type"] == "tool_end" && e["toolName"] == "read_file")
        .expect("read_file ended");
    assert_eq!(end["isError"], true, "{end}");
}

/// A record saved before workspaces were recorded: `decide` without `--workspace` says it needs
/// one (exit 2) and changes nothing; with it, the session adopts that workspace.
#[test]
fn decide_on_a_record_without_a_workspace_needs_workspace_and_adopts_it() {
    let world = World::new("dir", script());
    let session = world.detached_plan();
    let dir = PathBuf::from(&world.spec);
    let file = ["json", "pending.json", "running.json"]
        .iter()
        .map(|suffix| dir.join(format!("{session}.{suffix}")))
        .find(|p| p.exists())
        .expect("a record file");
    let mut old: Value =
        serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("json");
    let object = old.as_object_mut().expect("object");
    object.remove("workspace");
    object.insert("schemaVersion".into(), json!(4));
    object["pending"]["suspendPayload"]
        .as_object_mut()
        .expect("payload")
        .remove("workspace");
    std::fs::write(&file, serde_json::to_vec(&old).expect("ok")).expect("write old record");
    let before = world.pending_json();

    let config = world.project.path().join("config/modes.toml");
    let config = config.to_str().expect("ok");
    let out = world.cli(
        world.elsewhere.path(),
        "decide",
        &[&session, "--approve", "--config", config],
    );
    same(
        world.shown(&out, &session),
        str![[r#"
exit 2
--- stdout
--- stderr
error: --workspace DIR is needed: session `[SESSION]` was saved by an older release and records no workspace: name the directory it works in (it is recorded from then on); nothing was done

"#]],
    );
    assert_eq!(world.pending_json(), before, "nothing changed");

    let project = world.project.path().to_str().expect("ok");
    let out = world.cli(
        world.elsewhere.path(),
        "decide",
        &[&session, "--approve", "--workspace", project],
    );
    assert_eq!(out.status.code(), Some(PENDING), "{}", stderr(&out));
    let listed = world.pending_json();
    assert_eq!(listed.len(), 1, "the build mode's write waits: {listed:?}");
    assert_eq!(
        listed[0]["workspace"],
        world.canonical().to_str().expect("ok"),
        "recorded from then on"
    );
}
