//! The workspace jail: every workspace tool (read_file, list_files, write_file, write_plan) and
//! submit_plan's read stay inside the workspace (plans: inside the plans directory) against
//! dangling and swapped symlinks, FIFOs and devices, and never change a plan pending a decision.
//! Each fault of the jail issue is a test here, plus a swap race and a property test.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_controller::tool::fs::{ListFiles, ReadFile, WriteFile, WritePlan};
use agent_controller::tool::submit_plan::{PlanError, read_plan};
use agent_controller::tool::{Tool, ToolContext, ToolOutput};
use common::Workspace;
use serde_json::{Value, json};

const PLANS: &str = ".agent/plans";

async fn call_with(tool: &dyn Tool, ws: &Path, args: Value, pending: Vec<String>) -> ToolOutput {
    let plans = ws.join(PLANS);
    let ctx = ToolContext::new(ws, &plans, "plan").with_pending_plans(&pending);
    tool.execute(&args, &ctx).await
}

async fn call(tool: &dyn Tool, ws: &Path, args: Value) -> ToolOutput {
    call_with(tool, ws, args, Vec::new()).await
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(status.success());
}

#[tokio::test]
async fn a_dangling_symlink_never_writes_outside() {
    let ws = Workspace::new();
    let outside = tempfile::tempdir().expect("outside");
    let target = outside.path().join("new.txt");
    // Absolute and relative dangling links, in the workspace and in the plans directory.
    std::os::unix::fs::symlink(&target, ws.path().join("dangling")).expect("symlink");
    // `rel -> ../../<outside>/rel.txt`: leaves by `..`.
    let up: PathBuf = std::iter::repeat_n("..", ws.path().components().count() - 1).collect();
    let out_rel = outside.path().strip_prefix("/").expect("absolute");
    std::os::unix::fs::symlink(up.join(out_rel).join("rel.txt"), ws.path().join("rel"))
        .expect("symlink");
    std::os::unix::fs::symlink(&target, ws.path().join(PLANS).join("dangling.md"))
        .expect("symlink");

    for path in ["dangling", "rel"] {
        let out = call(&WriteFile, ws.path(), json!({"path": path, "content": "x"})).await;
        assert!(out.is_error, "write_file {path}: {out:?}");
        assert!(out.content.contains("outside"), "{out:?}");
    }
    let out = call(
        &WritePlan,
        ws.path(),
        json!({"path": "dangling.md", "content": "# P\n"}),
    )
    .await;
    assert!(out.is_error, "write_plan: {out:?}");
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("outside").count(),
        0,
        "nothing was created outside"
    );
}

#[tokio::test]
async fn symlinks_that_stay_inside_are_followed() {
    let ws = Workspace::new();
    std::fs::create_dir(ws.path().join("real")).expect("mkdir");
    std::os::unix::fs::symlink("real", ws.path().join("alias")).expect("symlink");
    let out = call(
        &WriteFile,
        ws.path(),
        json!({"path": "alias/a.txt", "content": "hi"}),
    )
    .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("real/a.txt")).expect("read"),
        "hi"
    );
    let out = call(&ReadFile, ws.path(), json!({"path": "alias/a.txt"})).await;
    assert_eq!(out, ToolOutput::ok("hi"));
    let out = call(&ListFiles, ws.path(), json!({"path": "alias"})).await;
    assert_eq!(out, ToolOutput::ok("a.txt"));
    // An absolute path under the workspace counts as that relative path; elsewhere it is refused.
    let abs = ws.path().join("real/a.txt");
    let out = call(&ReadFile, ws.path(), json!({"path": abs})).await;
    assert_eq!(out, ToolOutput::ok("hi"));
    let out = call(&ReadFile, ws.path(), json!({"path": "/etc/hostname"})).await;
    assert!(out.is_error, "{out:?}");
    let out = call(
        &ReadFile,
        ws.path(),
        json!({"path": "../../../../etc/hostname"}),
    )
    .await;
    assert!(out.is_error && out.content.contains("outside"), "{out:?}");
}

#[tokio::test]
async fn fifos_and_devices_are_refused_at_once() {
    let ws = Workspace::new();
    mkfifo(&ws.path().join("pipe"));
    mkfifo(&ws.path().join(PLANS).join("pipe.md"));
    let started = Instant::now();
    let out = call(&ReadFile, ws.path(), json!({"path": "pipe"})).await;
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{out:?}"
    );
    let out = call(
        &WriteFile,
        ws.path(),
        json!({"path": "pipe", "content": "x"}),
    )
    .await;
    assert!(out.is_error, "{out:?}");
    let out = call(
        &WritePlan,
        ws.path(),
        json!({"path": "pipe.md", "content": "x"}),
    )
    .await;
    assert!(out.is_error, "{out:?}");
    let err =
        read_plan(ws.path(), &ws.path().join(PLANS), ".agent/plans/pipe.md").expect_err("fifo");
    assert!(matches!(err, PlanError::NotAFile(_)), "{err:?}");
    let out = call(&ReadFile, ws.path(), json!({"path": "."})).await;
    assert!(
        out.is_error && out.content.contains("not a regular file"),
        "{out:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "returned at once"
    );
}

#[tokio::test]
async fn read_file_has_a_size_limit() {
    let ws = Workspace::new();
    let limit = agent_controller::tool::fs::MAX_READ_BYTES as usize;
    std::fs::write(ws.path().join("big.txt"), "x".repeat(limit + 1)).expect("write");
    std::fs::write(ws.path().join("ok.txt"), "x".repeat(limit)).expect("write");
    let out = call(&ReadFile, ws.path(), json!({"path": "big.txt"})).await;
    assert!(
        out.is_error && out.content.contains("larger than"),
        "{out:?}"
    );
    let out = call(&ReadFile, ws.path(), json!({"path": "ok.txt"})).await;
    assert!(!out.is_error);
}

#[tokio::test]
async fn write_plan_writes_only_markdown_inside_the_plans_directory() {
    let ws = Workspace::new();
    let out = call(
        &WritePlan,
        ws.path(),
        json!({"path": "not-a-plan.sh", "content": "rm -rf /"}),
    )
    .await;
    assert!(out.is_error && out.content.contains(".md"), "{out:?}");
    assert!(!ws.path().join(PLANS).join("not-a-plan.sh").exists());
    let out = call(
        &WritePlan,
        ws.path(),
        json!({"path": "../escape.md", "content": "# E\n"}),
    )
    .await;
    assert!(out.is_error, "{out:?}");
    assert!(!ws.path().join(".agent/escape.md").exists());
    let out = call(
        &WritePlan,
        ws.path(),
        json!({"path": ".agent/plans/sub/p.md", "content": "# P\n"}),
    )
    .await;
    assert_eq!(out, ToolOutput::ok(".agent/plans/sub/p.md"));
}

/// Issue 19 item 4 (anomalyco/opencode#50241): `write_plan` takes the paths its own results,
/// `submit_plan` and the system prompt speak (relative to the workspace, inside the plans
/// directory); a bare file name lands in the plans directory. `./`, subfolders and a `..` that
/// stays inside are resolved like any workspace path, and what the result names is the file
/// written, which `submit_plan` reads.
#[tokio::test]
async fn write_plan_takes_the_workspace_relative_paths_its_results_and_submit_plan_use() {
    let ws = Workspace::new();
    let absolute = ws.path().join(PLANS).join("absolute.md");
    let cases = [
        ("bare.md", ".agent/plans/bare.md"),
        (".agent/plans/p.md", ".agent/plans/p.md"),
        ("./.agent/plans/dot.md", ".agent/plans/dot.md"),
        (".agent//plans/./slashes.md", ".agent/plans/slashes.md"),
        (".agent/plans/sub/deep.md", ".agent/plans/sub/deep.md"),
        (".agent/plans/sub/../up.md", ".agent/plans/up.md"),
        (".agent/plans/../plans/back.md", ".agent/plans/back.md"),
        (
            absolute.to_str().expect("utf-8"),
            ".agent/plans/absolute.md",
        ),
    ];
    for (given, landed) in cases {
        let content = format!("# Written as {given}\n\n1. Step.\n");
        let out = call(
            &WritePlan,
            ws.path(),
            json!({"path": given, "content": content}),
        )
        .await;
        assert_eq!(out, ToolOutput::ok(landed), "{given}");
        assert_eq!(
            std::fs::read_to_string(ws.path().join(landed)).expect("written"),
            content,
            "{given}"
        );
        // The path the result names is the one submit_plan reads.
        let plan = read_plan(ws.path(), &ws.path().join(PLANS), &out.content).expect("readable");
        assert_eq!(plan.title, format!("Written as {given}"));
    }
    assert!(
        !ws.path().join(PLANS).join(".agent").exists(),
        "no plans directory inside the plans directory"
    );
}

/// Issue 19 item 4: a path that leaves the plans directory (by `..`, by naming another folder of
/// the workspace, `./` at the workspace root, or an absolute path elsewhere) is refused with a
/// message that says where plans go, and nothing is written anywhere.
#[tokio::test]
async fn write_plan_refuses_paths_outside_the_plans_directory_and_says_where_plans_go() {
    let ws = Workspace::new();
    let outside = tempfile::tempdir().expect("outside");
    let elsewhere = outside.path().join("elsewhere.md");
    for given in [
        "../escape.md",
        "../../escape.md",
        "./escape.md",
        "sub/escape.md",
        "src/escape.md",
        ".agent/escape.md",
        ".agent/plans/../escape.md",
        ".agent/plans/sub/../../escape.md",
        "../../../../../../../../tmp/escape.md",
        elsewhere.to_str().expect("utf-8"),
    ] {
        let out = call(
            &WritePlan,
            ws.path(),
            json!({"path": given, "content": "# Escape\n"}),
        )
        .await;
        assert!(out.is_error, "{given}: {out:?}");
        assert!(
            out.content.contains("outside the plans directory")
                && out.content.contains(".agent/plans/"),
            "{given}: the message says where plans go: {out:?}"
        );
    }
    let written: Vec<_> = walk(ws.path())
        .into_iter()
        .chain(walk(outside.path()))
        .filter(|p| p.is_file())
        .collect();
    assert!(written.is_empty(), "nothing was written: {written:?}");
}

/// Issue 21: `submit_plan` reads a plan path exactly as `write_plan` writes it (one function
/// resolves both): a bare file name is the file of that name in the plans directory, and the
/// submission names it relative to the workspace, as `write_plan`'s result does; every path
/// `write_plan` refuses, `submit_plan` refuses too, and a bare name that is a symlink out of the
/// plans directory is refused.
#[tokio::test]
async fn submit_plan_resolves_a_plan_path_as_write_plan_does() {
    let ws = Workspace::new();
    let plans = ws.path().join(PLANS);
    for (given, landed) in [
        ("bare.md", ".agent/plans/bare.md"),
        ("BARE-2.MD", ".agent/plans/BARE-2.MD"),
        (".agent/plans/p.md", ".agent/plans/p.md"),
        (".agent/plans/sub/../up.md", ".agent/plans/up.md"),
    ] {
        let content = format!("# Written as {given}\n\n1. Step.\n");
        let out = call(
            &WritePlan,
            ws.path(),
            json!({"path": given, "content": content}),
        )
        .await;
        assert_eq!(out, ToolOutput::ok(landed), "{given}");
        // The name the model gave write_plan is one submit_plan takes, for the same file.
        let plan = read_plan(ws.path(), &plans, given).expect(given);
        assert_eq!(plan.title, format!("Written as {given}"), "{given}");
        if !given.contains('/') {
            assert_eq!(plan.path, landed, "a bare name is recorded where it lies");
        }
    }
    // A bare name for a file that is not in the plans directory (only at the workspace root).
    std::fs::write(ws.path().join("root.md"), "# Root\n").expect("write");
    assert!(
        matches!(
            read_plan(ws.path(), &plans, "root.md"),
            Err(PlanError::NotFound(..))
        ),
        "a bare name never means the workspace root"
    );
    // A bare name that is a symlink leaving the plans directory.
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.md"), "# Secret\n").expect("write");
    std::os::unix::fs::symlink(outside.path().join("secret.md"), plans.join("link.md"))
        .expect("symlink");
    assert!(
        matches!(
            read_plan(ws.path(), &plans, "link.md"),
            Err(PlanError::OutsidePlansDir(..))
        ),
        "{:?}",
        read_plan(ws.path(), &plans, "link.md")
    );
    // What write_plan refuses, submit_plan refuses: each has a plan file to find if it misread.
    std::fs::write(ws.path().join("escape.md"), "# Escape\n").expect("write");
    std::fs::create_dir_all(ws.path().join(".agent/sub")).expect("mkdir");
    std::fs::write(ws.path().join(".agent/escape.md"), "# Escape\n").expect("write");
    for given in [
        "../escape.md",
        "./escape.md",
        "escape.md/",
        "sub/escape.md",
        ".agent/escape.md",
        ".agent/plans/../escape.md",
        ".agent/plans/sub/../../escape.md",
        "..",
        ".",
        "/escape.md",
        "../../../../../../../../tmp/escape.md",
    ] {
        let written = call(
            &WritePlan,
            ws.path(),
            json!({"path": given, "content": "# Escape\n"}),
        )
        .await;
        assert!(written.is_error, "{given}: {written:?}");
        let read = read_plan(ws.path(), &plans, given);
        assert!(
            matches!(
                read,
                Err(PlanError::OutsidePlansDir(..)
                    | PlanError::NotMarkdown(_)
                    | PlanError::NotFound(..))
            ),
            "{given}: {read:?}"
        );
        assert!(
            !matches!(read, Err(PlanError::NotFound(..))) || !given.contains(".."),
            "{given}: a path that leaves is refused as outside, not looked up: {read:?}"
        );
    }
}

/// Every path under `dir`, depth first (symlinks not followed).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() && !path.is_symlink() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

#[tokio::test]
async fn a_pending_plan_file_is_never_changed_by_a_tool() {
    let ws = Workspace::new();
    let rel = ws.plan("add-dark-mode.md", "# Add dark mode\n\n1. Theme\n");
    std::os::unix::fs::symlink("add-dark-mode.md", ws.path().join(PLANS).join("alias.md"))
        .expect("symlink");
    let pending = vec![rel.clone()];
    // write_file under its own name and under an alias: refused.
    for path in [
        rel.as_str(),
        ".agent/plans/alias.md",
        "./.agent/plans/../plans/add-dark-mode.md",
    ] {
        let out = call_with(
            &WriteFile,
            ws.path(),
            json!({"path": path, "content": "# Evil\n"}),
            pending.clone(),
        )
        .await;
        assert!(
            out.is_error && out.content.contains("pending"),
            "{path}: {out:?}"
        );
    }
    // write_plan with the pending name: the new plan gets a fresh name beside it.
    let out = call_with(
        &WritePlan,
        ws.path(),
        json!({"path": "add-dark-mode.md", "content": "# Other\n"}),
        pending.clone(),
    )
    .await;
    assert_eq!(out, ToolOutput::ok(".agent/plans/add-dark-mode-2.md"));
    assert_eq!(
        std::fs::read_to_string(ws.path().join(&rel)).expect("read"),
        "# Add dark mode\n\n1. Theme\n",
        "the pending plan is unchanged"
    );
    // Once nothing is pending, the file can be revised.
    let out = call(
        &WritePlan,
        ws.path(),
        json!({"path": "add-dark-mode.md", "content": "# Revised\n"}),
    )
    .await;
    assert_eq!(out, ToolOutput::ok(".agent/plans/add-dark-mode.md"));
}

/// Fault 2: a thread swaps `ws/sub` between an inside folder and a symlink to an outside folder
/// while `write_file sub/x.txt` runs a few hundred times: nothing may land outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swapped_folder_never_lets_a_write_escape() {
    let ws = Workspace::new();
    let outside = tempfile::tempdir().expect("outside");
    let root = ws.path().to_owned();
    std::fs::create_dir(root.join("inside")).expect("mkdir");
    std::fs::create_dir(root.join("sub")).expect("mkdir");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root, outside) = (stop.clone(), root.clone(), outside.path().to_owned());
        std::thread::spawn(move || {
            let mut swaps = 0u32;
            while !stop.load(Ordering::Relaxed) {
                // sub: a real folder <-> a symlink to the outside folder, swapped by rename.
                let _ = std::fs::remove_file(root.join("tmp-link"));
                let _ = std::os::unix::fs::symlink(&outside, root.join("tmp-link"));
                let _ = std::fs::rename(root.join("tmp-link"), root.join("sub"));
                let _ = std::fs::create_dir(root.join("tmp-dir"));
                let _ = std::fs::rename(root.join("tmp-dir"), root.join("sub"));
                swaps += 1;
            }
            swaps
        })
    };
    let mut written = 0;
    for i in 0..300 {
        let out = call(
            &WriteFile,
            &root,
            json!({"path": "sub/x.txt", "content": format!("{i}")}),
        )
        .await;
        if !out.is_error {
            written += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("swapper");
    assert!(swaps > 10, "the swapper ran ({swaps} swaps)");
    let escaped: Vec<_> = std::fs::read_dir(outside.path())
        .expect("outside")
        .collect();
    assert!(
        escaped.is_empty(),
        "{} writes landed outside ({written} succeeded)",
        escaped.len()
    );
}

mod property {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;

    /// One entry of a generated tree, relative to the workspace (or to the outside tree).
    #[derive(Debug, Clone)]
    enum Entry {
        File(String, Vec<u8>),
        Dir(String),
        /// A symlink at the path to the target (inside, `..` out, absolute outside, dangling).
        Link(String, Target),
        Fifo(String),
    }

    #[derive(Debug, Clone)]
    enum Target {
        Inside(String),
        UpAndOut(String),
        AbsoluteOutside(String),
        Dangling(String),
    }

    #[derive(Debug, Clone)]
    enum Call {
        Read(String),
        List(String),
        Write(String, String),
        WritePlan(String, String),
        Submit(String),
    }

    fn name() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "a", "b", "c", "sub", "x.md", "y.txt", ".agent", "plans",
        ])
        .prop_map(str::to_owned)
    }

    fn rel_path() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                8 => name(),
                1 => Just("..".to_owned()),
                1 => Just(".".to_owned()),
            ],
            1..4,
        )
        .prop_map(|parts| parts.join("/"))
    }

    fn entry() -> impl Strategy<Value = Entry> {
        let target = prop_oneof![
            rel_path().prop_map(Target::Inside),
            rel_path().prop_map(Target::UpAndOut),
            rel_path().prop_map(Target::AbsoluteOutside),
            rel_path().prop_map(Target::Dangling),
        ];
        prop_oneof![
            (rel_path(), prop::collection::vec(any::<u8>(), 0..8))
                .prop_map(|(p, b)| Entry::File(p, b)),
            rel_path().prop_map(Entry::Dir),
            (rel_path(), target).prop_map(|(p, t)| Entry::Link(p, t)),
            rel_path().prop_map(Entry::Fifo),
        ]
    }

    fn tool_call() -> impl Strategy<Value = Call> {
        let path = prop_oneof![
            6 => rel_path(),
            1 => Just(String::new()),
            1 => rel_path().prop_map(|p| format!(".agent/plans/{p}")),
            1 => rel_path().prop_map(|p| format!("/{p}")),
        ];
        prop_oneof![
            path.clone().prop_map(Call::Read),
            path.clone().prop_map(Call::List),
            (path.clone(), "[a-z]{0,4}").prop_map(|(p, c)| Call::Write(p, c)),
            (path.clone(), "[a-z]{0,4}").prop_map(|(p, c)| Call::WritePlan(p, c)),
            path.prop_map(Call::Submit),
        ]
    }

    /// Lays out `entries` under `root` (the outside tree's folder is `outside`); entries that
    /// cannot be made (a parent is a file, the name is taken) are skipped.
    fn lay_out(root: &Path, outside: &Path, entries: &[Entry]) {
        for entry in entries {
            let (Entry::File(p, _) | Entry::Dir(p) | Entry::Link(p, _) | Entry::Fifo(p)) = entry;
            // The layout itself must stay under `root`: paths with `..` are for tool calls.
            if p.split('/').any(|part| part == "..") {
                continue;
            }
            let at = |p: &str| root.join(p);
            let parent = |p: &Path| {
                if let Some(parent) = p.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
            };
            match entry {
                Entry::File(p, bytes) => {
                    parent(&at(p));
                    // create_new: never through a symlink or into a FIFO laid out before.
                    use std::io::Write;
                    if let Ok(mut file) = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(at(p))
                    {
                        let _ = file.write_all(bytes);
                    }
                }
                Entry::Dir(p) => {
                    let _ = std::fs::create_dir_all(at(p));
                }
                Entry::Link(p, target) => {
                    parent(&at(p));
                    let to = match target {
                        Target::Inside(t) => PathBuf::from(t),
                        Target::UpAndOut(t) => PathBuf::from("../../../../../../..")
                            .join(outside.strip_prefix("/").expect("absolute"))
                            .join(t),
                        Target::AbsoluteOutside(t) => outside.join(t),
                        Target::Dangling(t) => outside.join("missing").join(t),
                    };
                    let _ = std::os::unix::fs::symlink(to, at(p));
                }
                Entry::Fifo(p) => {
                    parent(&at(p));
                    let _ = nix_mkfifo(&at(p));
                }
            }
        }
    }

    fn nix_mkfifo(path: &Path) -> std::io::Result<()> {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .stderr(std::process::Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other("mkfifo failed"))
        }
    }

    /// Every file, folder and link under `root` with its bytes or target, sorted.
    fn snapshot(root: &Path) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let rel = path.strip_prefix(root).expect("under root").to_owned();
                let meta = std::fs::symlink_metadata(&path).expect("meta");
                let what = if meta.file_type().is_symlink() {
                    format!("link {:?}", std::fs::read_link(&path).expect("link"))
                } else if meta.is_dir() {
                    stack.push(path.clone());
                    "dir".to_owned()
                } else if meta.is_file() {
                    format!("file {:?}", std::fs::read(&path).expect("read"))
                } else {
                    "other".to_owned()
                };
                out.push((rel, what));
            }
        }
        out.sort();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn no_tool_call_changes_anything_outside_the_workspace(
            inside in prop::collection::vec(entry(), 0..12),
            outside_files in prop::collection::vec((rel_path(), prop::collection::vec(any::<u8>(), 0..8)), 0..6),
            calls in prop::collection::vec(tool_call(), 1..12),
        ) {
            // One folder holds the workspace and the outside tree: an escape into either the
            // outside tree or the folder around the workspace changes the snapshot.
            let fail = |e: std::io::Error| TestCaseError::fail(e.to_string());
            let top = tempfile::tempdir().map_err(fail)?;
            let outer = top.path().join("tree");
            let ws = top.path().join("ws");
            std::fs::create_dir(&outer).map_err(fail)?;
            std::fs::create_dir_all(ws.join(PLANS)).map_err(fail)?;
            let files: Vec<Entry> = outside_files.into_iter().map(|(p, b)| Entry::File(p, b)).collect();
            lay_out(&outer, &outer, &files);
            lay_out(&ws, &outer, &inside);
            let outside_ws = |top: &Path| -> Vec<(PathBuf, String)> {
                snapshot(top).into_iter().filter(|(p, _)| !p.starts_with("ws/")).collect()
            };
            let before = outside_ws(top.path());
            let started = Instant::now();
            let runtime = tokio::runtime::Builder::new_current_thread().build().map_err(|e| TestCaseError::fail(e.to_string()))?;
            runtime.block_on(async {
                for c in &calls {
                    match c {
                        Call::Read(p) => { call(&ReadFile, &ws, json!({"path": p})).await; }
                        Call::List(p) => { call(&ListFiles, &ws, json!({"path": p})).await; }
                        Call::Write(p, text) => { call(&WriteFile, &ws, json!({"path": p, "content": text})).await; }
                        Call::WritePlan(p, text) => { call(&WritePlan, &ws, json!({"path": p, "content": text})).await; }
                        Call::Submit(p) => { let _ = read_plan(&ws, &ws.join(PLANS), p); }
                    }
                }
            });
            prop_assert!(started.elapsed() < Duration::from_secs(10), "no call blocks");
            prop_assert_eq!(outside_ws(top.path()), before, "everything outside the workspace is unchanged");
        }
    }
}

/// Issue 9's file side, through the run loop: session A's plan is pending in the store; session
/// B, writing another plan under the same name with `write_plan`, never overwrites A's file: its
/// plan gets a fresh name, and A's plan file stays byte-identical.
#[tokio::test]
async fn another_sessions_pending_plan_is_never_overwritten_through_the_store() {
    use agent_controller::model::scripted::ScriptedModel;
    use agent_controller::store::MemoryStore;
    use agent_controller::{AgentController, RunOutcome, SessionOptions, ToolRegistry};
    let ws = Workspace::new();
    let graph =
        agent_controller::config::load(concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml"))
            .expect("config");
    let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .tools(ToolRegistry::with_workspace_tools())
        .workspace(ws.path())
        .store(Arc::new(MemoryStore::new()))
        .build()
        .expect("controller");
    let mut a = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("a");
    let RunOutcome::Suspended { payload: first, .. } =
        a.send_message("Add dark mode").await.expect("run a")
    else {
        panic!("a suspends");
    };
    let path = ws.path().join(&first.submission.path);
    let before = std::fs::read(&path).expect("a's plan");
    let mut b = controller
        .start_session(SessionOptions::new().mode("plan"))
        .await
        .expect("b");
    let RunOutcome::Suspended {
        payload: second, ..
    } = b.send_message("Add dark mode!").await.expect("run b")
    else {
        panic!("b suspends");
    };
    assert_eq!(first.submission.path, ".agent/plans/add-dark-mode.md");
    assert_eq!(second.submission.path, ".agent/plans/add-dark-mode-2.md");
    assert_eq!(std::fs::read(&path).expect("a's plan"), before);
    assert_ne!(first.submission.sha256, second.submission.sha256);
    assert_eq!(second.submission.title, "Add dark mode!");
}

/// What a model writes and what a listing returns have bounds, as `read_file` has: a plan larger
/// than `submit_plan` reads is refused when written, not only when submitted; a file larger than
/// `MAX_WRITE_BYTES` is refused; a folder of many entries is listed in part, saying how many
/// were left out.
#[tokio::test]
async fn writes_and_listings_have_bounds() {
    use agent_controller::tool::fs::{MAX_LIST_ENTRIES, MAX_WRITE_BYTES};
    use agent_controller::tool::submit_plan::MAX_PLAN_BYTES;
    let ws = tempfile::tempdir().expect("tempdir");
    let big_plan = "x".repeat(MAX_PLAN_BYTES as usize + 1);
    let out = call(
        &WritePlan,
        ws.path(),
        json!({"path": "big.md", "content": big_plan}),
    )
    .await;
    assert!(out.is_error, "{out:?}");
    assert!(!ws.path().join(PLANS).join("big.md").exists());

    let big_file = "x".repeat(MAX_WRITE_BYTES + 1);
    let out = call(
        &WriteFile,
        ws.path(),
        json!({"path": "big.txt", "content": big_file}),
    )
    .await;
    assert!(out.is_error, "{:.200}", out.content);
    assert!(!ws.path().join("big.txt").exists());

    let many = ws.path().join("many");
    std::fs::create_dir(&many).expect("dir");
    for i in 0..MAX_LIST_ENTRIES + 5 {
        std::fs::write(many.join(format!("f{i:05}")), "").expect("file");
    }
    let out = call(&ListFiles, ws.path(), json!({"path": "many"})).await;
    assert!(!out.is_error, "{:.200}", out.content);
    assert_eq!(
        out.content.lines().filter(|l| l.starts_with('f')).count(),
        MAX_LIST_ENTRIES
    );
    assert!(
        out.content.ends_with("(5 more entries not listed)"),
        "{}",
        &out.content[out.content.len() - 80..]
    );
}

/// Found in issue 19: a write through a symlink that leaves the workspace said `File exists (os
/// error 17)`. Every way out (a link to an outside file, to an outside folder, absolute or by
/// `..`, in the workspace or the plans directory) says that the path leads outside, and nothing
/// outside changes.
#[tokio::test]
async fn a_write_through_a_symlink_that_leaves_says_it_leads_outside() {
    let ws = Workspace::new();
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("file.txt"), "keep").expect("outside file");
    std::fs::write(outside.path().join("plan.md"), "keep").expect("outside plan");
    let link = |to: &Path, at: &str| std::os::unix::fs::symlink(to, ws.path().join(at));
    link(&outside.path().join("file.txt"), "file-link").expect("symlink");
    link(outside.path(), "dir-link").expect("symlink");
    link(&outside.path().join("plan.md"), ".agent/plans/plan-link.md").expect("symlink");
    link(outside.path(), ".agent/plans/dir-link").expect("symlink");
    let up: PathBuf = std::iter::repeat_n("..", ws.path().components().count() - 1).collect();
    let out_rel = outside.path().strip_prefix("/").expect("absolute");
    link(&up.join(out_rel), "up-link").expect("symlink");

    for path in [
        "file-link",
        "dir-link/file.txt",
        "dir-link/new.txt",
        "dir-link/sub/new.txt",
        "up-link/file.txt",
        "up-link/new.txt",
    ] {
        let out = call(&WriteFile, ws.path(), json!({"path": path, "content": "x"})).await;
        assert!(out.is_error, "write_file {path}: {out:?}");
        assert!(
            out.content.contains("leads outside"),
            "write_file {path}: {}",
            out.content
        );
    }
    for path in [
        "plan-link.md",
        ".agent/plans/plan-link.md",
        ".agent/plans/dir-link/plan.md",
        ".agent/plans/dir-link/new.md",
        ".agent/plans/dir-link/sub/new.md",
    ] {
        let out = call(
            &WritePlan,
            ws.path(),
            json!({"path": path, "content": "# P\n"}),
        )
        .await;
        assert!(out.is_error, "write_plan {path}: {out:?}");
        assert!(
            out.content.contains("leads outside"),
            "write_plan {path}: {}",
            out.content
        );
    }
    let mut names: Vec<_> = std::fs::read_dir(outside.path())
        .expect("outside")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["file.txt", "plan.md"],
        "nothing was created outside"
    );
    for name in ["file.txt", "plan.md"] {
        let text = std::fs::read_to_string(outside.path().join(name)).expect("read");
        assert_eq!(text, "keep", "{name} unchanged");
    }
}

/// What the jail promises for hard links that already exist (issue 19; the module docs of
/// `agent_controller::jail` and the guide's jail page, `src/guide/jail.md`): a hard link in the workspace to a
/// file elsewhere is that file under a second name, so `read_file` and `submit_plan` read it like
/// any workspace file; no tool writes through it, so the outside file never changes; and no
/// tool makes one.
#[tokio::test]
async fn a_hard_link_that_already_exists_is_read_but_never_written_through() {
    use agent_controller::tool::submit_plan::read_plan;
    let ws = Workspace::new();
    let outside = tempfile::tempdir_in(ws.path().parent().expect("parent")).expect("outside");
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "outside text").expect("outside file");
    std::fs::hard_link(&secret, ws.path().join("link.txt")).expect("hard link");
    let plan = outside.path().join("plan.md");
    std::fs::write(&plan, "# Outside plan\n").expect("outside plan");
    std::fs::hard_link(&plan, ws.path().join(PLANS).join("linked.md")).expect("hard link");

    let out = call(&ReadFile, ws.path(), json!({"path": "link.txt"})).await;
    assert_eq!(
        out,
        ToolOutput::ok("outside text"),
        "read like a workspace file"
    );
    let text = read_plan(ws.path(), &ws.path().join(PLANS), ".agent/plans/linked.md")
        .expect("a linked plan is read");
    assert_eq!(text.title, "Outside plan");

    let out = call(
        &WriteFile,
        ws.path(),
        json!({"path": "link.txt", "content": "changed"}),
    )
    .await;
    assert!(out.is_error, "{out:?}");
    assert!(out.content.contains("other hard links"), "{}", out.content);
    let out = call(
        &WritePlan,
        ws.path(),
        json!({"path": "linked.md", "content": "# Changed\n"}),
    )
    .await;
    assert!(out.is_error, "{out:?}");
    assert!(out.content.contains("other hard links"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(&secret).expect("read"),
        "outside text"
    );
    assert_eq!(
        std::fs::read_to_string(&plan).expect("read"),
        "# Outside plan\n"
    );
}

/// Issue 36, item 2: with `.agent/plans -> ..` in the workspace, `write_plan` in the read-only
/// plan mode overwrote `README.md` at the workspace root and created `AGENTS.md` there (the
/// result said `.agent/plans/README.md`); with `.agent -> .` it wrote into `plans/`. A plans
/// directory reached through a symlink that leads elsewhere in the workspace is refused, by
/// `write_plan` and `submit_plan` alike, and nothing is written.
#[tokio::test]
async fn a_plans_directory_linked_elsewhere_in_the_workspace_is_refused() {
    // (what is made a link, where it leads, a folder the plan would land in through it)
    for (link, target, landing) in [(".agent/plans", "..", ""), (".agent", ".", "plans")] {
        let ws = Workspace::new();
        std::fs::remove_dir_all(ws.path().join(".agent/plans")).expect("rm plans");
        if link == ".agent" {
            std::fs::remove_dir_all(ws.path().join(".agent")).expect("rm .agent");
        }
        std::fs::create_dir_all(ws.path().join(landing)).expect("landing");
        std::os::unix::fs::symlink(target, ws.path().join(link)).expect("symlink");
        let readme = ws.path().join(landing).join("README.md");
        std::fs::write(&readme, "# Readme\n").expect("readme");
        let listing = || {
            let mut found = walk(ws.path());
            found.sort();
            found
        };
        let before = listing();
        for path in [
            "README.md",
            "AGENTS.md",
            ".agent/plans/README.md",
            ".agent/plans/sub/p.md",
        ] {
            let args = json!({"path": path, "content": "# Overwritten\n"});
            let out = call(&WritePlan, ws.path(), args).await;
            assert!(out.is_error, "{link} -> {target}, {path}: {out:?}");
            assert!(
                out.content.contains("symbolic link") && out.content.contains(link),
                "{link} -> {target}, {path}: {}",
                out.content
            );
        }
        assert_eq!(
            std::fs::read_to_string(&readme).expect("readme"),
            "# Readme\n"
        );
        assert_eq!(listing(), before, "{link} -> {target}");
        let plans = ws.path().join(PLANS);
        for path in ["README.md", ".agent/plans/README.md"] {
            let read = read_plan(ws.path(), &plans, path);
            let why = read.as_ref().err().map(ToString::to_string);
            assert!(
                why.as_ref()
                    .is_some_and(|why| why.contains("symbolic link")),
                "{link} -> {target}, submit_plan {path}: {read:?}"
            );
        }
    }
}
