//! Config for teams (issue 42): the config is read in layers, lowest first: the user's file
//! (`$XDG_CONFIG_HOME/agent-controller/modes.toml`), the project's, the local file beside it
//! (`modes.local.toml`) and a managed file (`AGENT_CONTROLLER_MANAGED_CONFIG`), which wins.
//! Modes merge by id, key by key; a list replaces the lower one's; a higher layer's default
//! wins; a managed `deny` and `requireApproval` cannot be undone below it. The cases are files
//! under `tests/fixtures/configs/layers/`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use agent_controller::config::{ConfigErrorKind, ConfigSources, LayerKind};
use common::fixture;

/// A folder holding the layer fixtures as the CLI finds them: `xdg/agent-controller/modes.toml`
/// (the user's), `project/modes.toml` and `project/modes.local.toml`, and `managed.toml`.
struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    /// Every layer of the fixtures; `local`: the local file's fixture (`None`: no local file).
    fn new(local: Option<&str>, managed: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let copy = |from: &str, to: &str| {
            let to = dir.path().join(to);
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(fixture(&format!("configs/layers/{from}")), to).expect("copy");
        };
        copy("user.toml", "xdg/agent-controller/modes.toml");
        copy("project/modes.toml", "project/modes.toml");
        if let Some(local) = local {
            copy(local, "project/modes.local.toml");
        }
        copy(managed, "managed.toml");
        Self { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The library's sources of this layout.
    fn sources(&self) -> ConfigSources {
        ConfigSources::new(self.path("project/modes.toml"))
            .user_file(Some(self.path("xdg/agent-controller/modes.toml")))
            .managed_file(Some(self.path("managed.toml")))
    }

    /// The CLI with `args`, run in the layout's folder with its user and managed files.
    fn cli(&self, args: &[&str]) -> Output {
        let mut command = common::cli::command(self.dir.path(), args);
        command
            .env("XDG_CONFIG_HOME", self.path("xdg"))
            .env("AGENT_CONTROLLER_MANAGED_CONFIG", self.path("managed.toml"));
        common::cli::output(command, "")
    }
}

/// Modes merge by id, key by key: a key only a lower layer sets stays (the user's
/// `description`, `approvalTimeout`), one a higher layer sets wins (the project's `name`), a
/// list in a higher layer replaces the lower one's (the local `availableTools`), and a
/// `default = true` in a higher layer wins over a lower `defaultModeId`.
#[test]
fn modes_merge_by_id_key_by_key_lists_replace_and_a_higher_default_wins() {
    let layout = Layout::new(Some("project/modes.local.toml"), "managed.toml");
    let layers = layout.sources().load().expect("merged");
    let kinds: Vec<LayerKind> = layers.layers().iter().map(|l| l.kind()).collect();
    assert_eq!(
        kinds,
        [
            LayerKind::User,
            LayerKind::Project,
            LayerKind::Local,
            LayerKind::Managed
        ]
    );
    let graph = layers.graph().expect("valid");
    let build = graph.get("build").map(|id| graph.mode(id)).expect("build");
    assert_eq!(build.name(), "Build", "the project's name over the user's");
    assert_eq!(build.description(), "the user's description");
    assert!(
        build.approval_timeout().is_some(),
        "the user's timeout stays"
    );
    let tools: Vec<&str> = build
        .available_tools()
        .expect("listed")
        .iter()
        .map(|t| &**t)
        .collect();
    assert_eq!(
        tools,
        ["read_file", "write_file"],
        "the local list replaces"
    );
    assert_eq!(graph.default_mode().id(), "build", "the local default wins");
    assert!(build.managed_rules(), "the managed file's rules");
    assert!(!build.managed_approval());
}

/// A managed `deny` survives a lower layer's `allow` of the same calls: the lower one gets a
/// warning naming both places, and the call is refused.
#[test]
fn a_managed_deny_survives_a_lower_layer_which_is_warned_naming_both_places() {
    let layout = Layout::new(Some("project/modes.local.toml"), "managed.toml");
    let layers = layout.sources().load().expect("merged");
    let warning = layers.warnings().first().expect("a warning").clone();
    assert_eq!(warning.kind(), ConfigErrorKind::ManagedOverride);
    let shown = warning.to_string();
    assert!(
        shown.starts_with(&format!(
            "{}:7:1:",
            layout.path("project/modes.local.toml").display()
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("{}:4:9", layout.path("managed.toml").display())),
        "{shown}"
    );
    let out = layout.cli(&[
        "explain",
        "--config",
        "project/modes.toml",
        "--mode",
        "build",
        "write_file",
        r#"{"path":"secrets/key","content":"x"}"#,
    ]);
    assert_eq!(
        out.status.code(),
        Some(common::cli::NOT_APPROVED),
        "{}",
        common::cli::text(&out)
    );
    let check = layout.cli(&["check", "project/modes.toml"]);
    let text = common::cli::text(&check);
    assert!(text.contains("managed `rules` cannot be undone"), "{text}");
}

/// Layers whose one key has values of different types cannot be merged: the error names the
/// higher layer's file, line and column, and the lower one's place.
#[test]
fn a_type_conflict_across_layers_names_the_file_line_and_column() {
    let layout = Layout::new(Some("conflict.toml"), "managed.toml");
    let error = layout.sources().load().expect_err("cannot merge");
    assert_eq!(error.kind(), ConfigErrorKind::LayerConflict);
    let local = layout.path("project/modes.local.toml");
    assert_eq!(error.origin(), local.display().to_string());
    let at = error.location().expect("placed");
    assert_eq!((at.line, at.column), (4, 18));
    assert!(
        error.message().contains(&format!(
            "{}:13:18",
            layout.path("project/modes.toml").display()
        )),
        "{error}"
    );
    let out = layout.cli(&["check", "project/modes.toml"]);
    assert_eq!(out.status.code(), Some(common::cli::INVALID));
    assert!(
        common::cli::text(&out).contains("modes.local.toml:4:18"),
        "{}",
        common::cli::text(&out)
    );
}

/// An error of the merged config is placed in the layer that wrote it.
#[test]
fn an_error_of_the_merged_config_is_placed_in_its_layer() {
    let layout = Layout::new(None, "managed.toml");
    std::fs::write(
        layout.path("project/modes.local.toml"),
        "[[modes]]\nid = \"build\"\n\n  requireApproval = [\"no_such_tool\"]\n",
    )
    .expect("write");
    let out = layout.cli(&["check", "project/modes.toml"]);
    let text = common::cli::text(&out);
    assert_eq!(out.status.code(), Some(common::cli::INVALID), "{text}");
    assert!(text.contains("modes.local.toml:4:"), "{text}");
}

/// A managed file that is named but cannot be read, or is not valid TOML: nothing starts,
/// and the error says so.
#[test]
fn an_unreadable_or_invalid_managed_file_refuses_to_start() {
    let layout = Layout::new(None, "managed-invalid.toml");
    for managed in [
        layout.path("no-such-managed.toml"),
        layout.path("managed.toml"),
    ] {
        let error = layout
            .sources()
            .managed_file(Some(managed.clone()))
            .load()
            .expect_err("refused");
        assert!(error.message().contains("managed config"), "{error}");
        let mut command = common::cli::command(layout.dir.path(), &["check", "project/modes.toml"]);
        command.env("AGENT_CONTROLLER_MANAGED_CONFIG", &managed);
        let out = common::cli::output(command, "");
        let text = common::cli::text(&out);
        assert_eq!(out.status.code(), Some(common::cli::INVALID), "{text}");
        assert!(text.contains("nothing starts"), "{text}");
    }
}

/// `--no-user-config` skips the user's file; `--only FILE` reads that file alone, and the
/// managed one.
#[test]
fn no_user_config_skips_the_users_file_and_only_reads_one_file_and_the_managed_one() {
    let layout = Layout::new(Some("project/modes.local.toml"), "managed.toml");
    let user = layout.path("xdg/agent-controller/modes.toml");
    let shown = |args: &[&str]| {
        let out = layout.cli(args);
        assert_eq!(
            out.status.code(),
            Some(common::cli::DONE),
            "{}",
            common::cli::text(&out)
        );
        common::cli::stdout(&out)
    };
    let all = shown(&["check", "--origin", "project/modes.toml"]);
    assert!(all.contains(&user.display().to_string()), "{all}");
    let without = shown(&[
        "check",
        "--origin",
        "--no-user-config",
        "project/modes.toml",
    ]);
    assert!(!without.contains(&user.display().to_string()), "{without}");
    assert!(without.contains("modes.local.toml"), "{without}");
    let only = shown(&["check", "--only", "project/modes.toml"]);
    assert!(only.contains("default mode: plan"), "{only}");
    let only = shown(&["check", "--origin", "--only", "project/modes.toml"]);
    assert!(!only.contains("modes.local.toml"), "{only}");
    assert!(
        only.contains("managed.toml:4"),
        "the managed file stays: {only}"
    );
}

/// `check --origin` prints the merged config, each line after the file:line it came from.
#[test]
fn check_origin_prints_each_value_with_its_file_and_line() {
    let layout = Layout::new(Some("project/modes.local.toml"), "managed.toml");
    let out = layout.cli(&["check", "--origin", "project/modes.toml"]);
    let text = common::cli::stdout(&out);
    assert_eq!(out.status.code(), Some(common::cli::DONE), "{text}");
    let line_of = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in {text}"))
            .to_owned()
    };
    let place = |rel: &str, line: usize| match rel.strip_prefix("project/") {
        // The project's files as the command line names them.
        Some(_) => format!("{rel}:{line} "),
        None => format!("{}:{line} ", layout.path(rel).display()),
    };
    assert!(
        line_of("description = ").starts_with(&place("xdg/agent-controller/modes.toml", 5)),
        "{text}"
    );
    assert!(
        line_of("name = \"Build\"").starts_with(&place("project/modes.toml", 12)),
        "{text}"
    );
    assert!(
        line_of("default = true").starts_with(&place("project/modes.local.toml", 5)),
        "{text}"
    );
    assert!(
        line_of("action = \"deny\"").starts_with(&place("managed.toml", 4)),
        "{text}"
    );
    assert!(
        !text.contains("defaultModeId"),
        "the lower default dropped: {text}"
    );
    let plan = text.find("id = \"plan\"").expect("plan");
    let build = text.find("id = \"build\"").expect("build");
    assert!(plan < build, "the project's order of modes: {text}");
    // `graph` draws the merged config.
    let out = layout.cli(&["graph", "project/modes.toml"]);
    assert_eq!(out.status.code(), Some(common::cli::DONE));
}

/// A managed `requireApproval` is not skipped by an approved plan's scope: a write inside the
/// plan's files still waits (without the managed file it runs unasked).
#[cfg(feature = "openai")]
#[tokio::test]
async fn a_managed_require_approval_survives_a_plan_scope_allowance() {
    use std::sync::Arc;

    use agent_controller::{AgentController, RunOutcome, ToolRegistry};
    use common::openai_server::{ScriptedServer, call, calls, submit, text};
    use serde_json::json;

    for managed in [false, true] {
        let server = ScriptedServer::start(vec![
            calls([submit("call_1", ".agent/plans/p.md")]),
            calls([call(
                "w_in",
                "write_file",
                &json!({ "path": "src/theme.rs", "content": "x" }).to_string(),
            )]),
            text("done"),
        ])
        .await;
        let ws = common::Workspace::new();
        let project = ws.path().join("modes.toml");
        std::fs::write(
            &project,
            "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\navailableTools = [\"read_file\", \"write_file\"]\nrequireApproval = [\"write_file\"]\n",
        )
        .expect("project");
        let sources = ConfigSources::new(&project).user_file(None);
        let sources = if managed {
            sources.managed_file(Some(fixture("configs/layers/managed-approval.toml")))
        } else {
            sources.managed_file(None)
        };
        let graph = sources.load().expect("merged").graph().expect("valid");
        assert_eq!(
            graph.get("build").map(|b| graph.mode(b).managed_approval()),
            Some(managed)
        );
        let controller = AgentController::builder(graph, Arc::new(server.model()))
            .tools(ToolRegistry::with_workspace_tools())
            .workspace(ws.path())
            .build()
            .expect("controller");
        ws.plan(
            "p.md",
            "# Theme\n\n1. Add the theme.\n\n## Files\n- `src/theme.rs`\n",
        );
        let recorder = common::Recorder::default();
        let mut session = controller
            .start_session(recorder.options().mode("plan"))
            .await
            .expect("session");
        let outcome = session.send_message("plan it").await.expect("run");
        assert!(
            matches!(outcome, RunOutcome::Suspended { .. }),
            "{outcome:?}"
        );
        let outcome = session
            .decide("decision_1", agent_controller::Decision::approve())
            .await
            .expect("approve");
        let written = ws.path().join("src/theme.rs").exists();
        if managed {
            assert!(
                matches!(outcome, RunOutcome::ToolCallsSuspended { .. }),
                "the managed requireApproval holds it: {outcome:?}"
            );
            assert!(!written, "it waits");
        } else {
            assert!(written, "the plan's scope lets it run: {outcome:?}");
        }
    }
}

/// A change to the managed file reaches a stored session at its next step: the next command
/// on it reads the managed file again.
#[test]
fn a_managed_file_change_reaches_a_stored_session_at_its_next_step() {
    let ws = common::Workspace::new();
    let managed = ws.path().join("managed.toml");
    std::fs::write(&managed, "").expect("no policy yet");
    let run = |args: &[&str]| {
        let mut command = common::cli::command(ws.path(), args);
        command.env("AGENT_CONTROLLER_MANAGED_CONFIG", &managed);
        common::cli::output(command, "")
    };
    let out = run(&[
        "run",
        "--config",
        common::cli::SHIPPED,
        "--store",
        common::cli::STORE,
        "--mode",
        "plan",
        "Add dark mode",
    ]);
    assert_eq!(
        out.status.code(),
        Some(common::cli::PENDING),
        "{}",
        common::cli::text(&out)
    );
    let listed = run(&["pending", "--store", common::cli::STORE, "--json"]);
    let first: serde_json::Value = serde_json::from_str(
        common::cli::stdout(&listed)
            .lines()
            .next()
            .expect("a pending plan"),
    )
    .expect("json");
    let session = first["sessionId"].as_str().expect("id").to_owned();
    let explain = || {
        run(&[
            "explain",
            "--session",
            &session,
            "--store",
            common::cli::STORE,
            "read_file",
            r#"{"path":"README.md"}"#,
        ])
    };
    let before = explain();
    assert_eq!(
        before.status.code(),
        Some(common::cli::DONE),
        "{}",
        common::cli::text(&before)
    );
    std::fs::write(
        &managed,
        "[[modes]]\nid = \"plan\"\nrules = [{ tool = \"read_file\", action = \"deny\" }]\n",
    )
    .expect("policy");
    let after = explain();
    assert_eq!(
        after.status.code(),
        Some(common::cli::NOT_APPROVED),
        "{}",
        common::cli::text(&after)
    );
}

/// The one-file path stays: `config::load` reads that file alone.
#[test]
fn one_file_alone_is_read_as_it_is() {
    let path = fixture("configs/layers/project/modes.toml");
    let graph = agent_controller::config::load(&path).expect("valid");
    assert_eq!(graph.default_mode().id(), "plan");
    let layers = ConfigSources::new(&path)
        .only()
        .managed_file(None)
        .load()
        .expect("read");
    assert_eq!(layers.text(), std::fs::read_to_string(&path).expect("text"));
    assert_eq!(layers.origin(), Path::new(&path).display().to_string());
}

/// A change to the managed file reaches an open session at its next step: the controller
/// watches the file ([`agent_controller::config::ManagedWatch`]), and a `deny` added to it
/// refuses the next call, without a new controller or session.
#[cfg(feature = "openai")]
#[tokio::test]
async fn a_managed_file_change_reaches_an_open_session_at_its_next_step() {
    use std::sync::Arc;

    use agent_controller::config::ManagedWatch;
    use agent_controller::{AgentController, ToolRegistry};
    use common::openai_server::{ScriptedServer, call, calls, text};

    let read = |id: &str| call(id, "read_file", r#"{"path":"notes.md"}"#);
    let server = ScriptedServer::start(vec![
        calls([read("r1")]),
        text("read"),
        calls([read("r2")]),
        text("done"),
    ])
    .await;
    let ws = common::Workspace::new();
    std::fs::write(ws.path().join("notes.md"), "notes").expect("notes");
    let project = ws.path().join("modes.toml");
    std::fs::write(
        &project,
        "[[modes]]\nid = \"build\"\navailableTools = [\"read_file\"]\n",
    )
    .expect("project");
    let managed = ws.path().join("managed.toml");
    std::fs::write(&managed, "").expect("no policy yet");
    let sources = ConfigSources::new(&project)
        .user_file(None)
        .managed_file(Some(managed.clone()));
    let graph = sources.load().expect("merged").graph().expect("valid");
    let controller = AgentController::builder(graph, Arc::new(server.model()))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .managed_watch(ManagedWatch::new(sources))
        .build()
        .expect("controller");
    let recorder = common::Recorder::default();
    let mut session = controller
        .start_session(recorder.options())
        .await
        .expect("session");
    session.send_message("read it").await.expect("first run");
    std::fs::write(
        &managed,
        "[[modes]]\nid = \"build\"\nrules = [{ tool = \"read_file\", action = \"deny\" }]\n",
    )
    .expect("policy");
    session
        .send_message("read it again")
        .await
        .expect("second run");
    let bodies = server.bodies().await;
    let result_of = |n: usize, id: &str| -> String {
        bodies[n]["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        result_of(1, "r1").contains("notes"),
        "{}",
        result_of(1, "r1")
    );
    let refused = result_of(3, "r2");
    assert!(refused.starts_with("Not executed"), "{refused}");
}

/// `verify`'s property-test kit checks the merged config, as the rest of `verify` and every
/// other command read it: a managed `deny` on `build`'s `write_file` changes the states the
/// kit explores (the project's file alone, read before, gave the same count with or without it).
#[test]
fn verify_checks_the_merged_config_with_the_managed_rule() {
    let states = |managed: &str| -> String {
        let layout = Layout::new(None, managed);
        let out = layout.cli(&[
            "verify",
            "project/modes.toml",
            "--cases",
            "2",
            "--seed",
            "1",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find(|l| l.contains(": explored "))
            .unwrap_or_else(|| panic!("no exploration line: {stdout}"));
        line.split(": explored ")
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    let without = states("managed-empty.toml");
    let with = states("managed.toml");
    assert_ne!(with, without, "the kit saw the project's file alone");
}
