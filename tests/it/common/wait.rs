//! Waiting for another process or thread: a child to exit, output to appear, a server to be
//! called. A child's exit wakes its waiter ([`exit_within`]); [`until`] polls what it waits
//! for, with the suite's one polling sleep between looks;
//! nothing here waits for time to pass (time is a [`super::clock::TestClock`], and a lease a
//! test needs ended is ended in the record: [`end_lease`]).

use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// How long a test waits for another process before it fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How long a test waits for a command that explores every state of a config (`verify`): it
/// takes some seconds on an idle machine and several times that beside the rest of the suite on
/// two cores, so this detects a hang and never times a run. The largest, `verify` of
/// `questions.toml` (916 states and 48,327 transitions with an approved plan's files), took
/// 296 s of CPU in a debug build, and more than 600 s of wall time on two cores shared with
/// other builds (2026-12-07).
pub const EXPLORATION_PATIENCE: Duration = Duration::from_secs(1800);

/// Polls `done` until it holds; fails with `what()` when it has not within [`PATIENCE`].
pub fn until(done: impl FnMut() -> bool, what: impl Fn() -> String) {
    assert!(polled(done), "{}", what());
}

/// Polls `done` until it holds (true) or [`PATIENCE`] ran out (false).
fn polled(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() >= PATIENCE {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Waits for `child` to exit, killing it (and failing) when it has not within [`PATIENCE`]; its
/// output.
pub fn exit_of(child: Child) -> Output {
    exit_within(child, PATIENCE).unwrap_or_else(|| panic!("the command hung"))
}

/// Waits for `child` to exit and returns its output, or kills it and returns `None` when it has
/// not exited within `patience`. Woken by the exit itself (a thread waits on the child), so it
/// does not poll.
pub fn exit_within(child: Child, patience: Duration) -> Option<Output> {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(patience) {
        Ok(output) => Some(output.expect("output")),
        Err(_) => {
            // The child is the waiting thread's: kill it by its id, which that thread then reaps.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            None
        }
    }
}

/// Ends the lease of session `session_id`'s running run in the store at `spec`, as if its
/// owner's lease had run out: the record says it ended at the epoch. A compare-and-swap save,
/// as any host's.
pub fn end_lease(spec: &str, session_id: &str) {
    end_lease_at(spec, session_id, 0);
}

/// Ends the lease of session `session_id`'s running run in the store at `spec` at
/// `expires_at_ms` (milliseconds since the epoch), as [`end_lease`] does at the epoch itself.
pub fn end_lease_at(spec: &str, session_id: &str, expires_at_ms: u64) {
    let store = agent_controller::store::open_store(spec).expect("the store opens");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async {
            let mut record = store
                .load(session_id)
                .await
                .expect("load")
                .expect("the session");
            let run = record.run.as_mut().expect("a run");
            assert!(run.lease_expires_at_ms.is_some(), "a leased run: {run:?}");
            run.lease_expires_at_ms = Some(expires_at_ms);
            let expected = record.version;
            record.version += 1;
            store
                .save(&record, Some(expected))
                .await
                .expect("the lease ends");
        });
}
