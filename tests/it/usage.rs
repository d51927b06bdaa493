//! Usage errors found before anything runs (hostile-model trial, low-medium): a workspace that is
//! missing or not a directory, and `pending`/`decide` on a store that does not exist, exit 2 and
//! create nothing (before, `pending` created an empty store and listed nothing).
// Drives the binary.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::{Output, Stdio};

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");

fn cli(args: &[&str]) -> Output {
    crate::common::agent_controller()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the CLI")
}

fn assert_usage_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(needle), "{stderr}");
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn run_refuses_a_workspace_that_is_missing_or_not_a_directory_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("sessions");
    let file = dir.path().join("file.txt");
    std::fs::write(&file, "x").expect("write");
    for ws in [dir.path().join("missing"), file] {
        let out = cli(&[
            "run",
            "--config",
            SHIPPED,
            "--workspace",
            s(&ws),
            "--store",
            s(&store),
            "--mode",
            "plan",
            "--approve",
            "Add dark mode",
        ]);
        assert_usage_error(&out, "workspace");
        assert!(
            !store.exists(),
            "the store was created for {}",
            ws.display()
        );
    }
    assert!(!dir.path().join("missing").exists());
}

#[test]
fn pending_decide_and_continue_refuse_a_store_that_does_not_exist_and_create_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing_dir = dir.path().join("sessions");
    let missing_db = dir.path().join("sessions.db");
    let mut specs = vec![s(&missing_dir).to_owned()];
    // A store spec of a feature left out is refused as such: the `sqlite` case needs it.
    if cfg!(feature = "sqlite") {
        specs.push(format!("sqlite:{}", s(&missing_db)));
    }
    for spec in &specs {
        assert_usage_error(&cli(&["pending", "--store", spec]), "no store at");
        let out = cli(&[
            "decide",
            "--config",
            SHIPPED,
            "--workspace",
            s(dir.path()),
            "--store",
            spec,
            "someone",
            "--approve",
        ]);
        assert_usage_error(&out, "no store at");
        // `continue` shares `decide`'s setup: it created an empty store, then found no session.
        let out = cli(&[
            "continue",
            "--config",
            SHIPPED,
            "--workspace",
            s(dir.path()),
            "--store",
            spec,
            "someone",
        ]);
        assert_usage_error(&out, "no store at");
    }
    assert!(!missing_dir.exists());
    assert!(!missing_db.exists());
}
