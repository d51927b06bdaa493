//! No blocking on the runtime: the stores' fsyncing I/O runs on tokio's blocking pool, so on a
//! current-thread runtime a save yields (the first poll is pending) instead of holding the only
//! thread until the disk is done.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use agent_controller::FileStore;
use agent_controller::store::{SCHEMA_VERSION, SessionRecord, SessionStore};

fn record(id: &str) -> SessionRecord {
    serde_json::from_value(serde_json::json!({
        "schemaVersion": SCHEMA_VERSION, "sessionId": id, "version": 1, "configFingerprint": "f",
        "modeId": "plan", "messages": [], "runCounter": 0, "run": null, "pending": null,
        "lastDecided": null, "updatedAt": 1
    }))
    .expect("record")
}

/// Whether the first poll of `future` is pending (it handed its work to another thread).
async fn first_poll_is_pending<F: Future>(future: F) -> (bool, F::Output) {
    let mut future = pin!(future);
    let first = std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(output) => (false, output),
        Poll::Pending => (true, future.await),
    }
}

async fn saves_and_loads_yield(store: Arc<dyn SessionStore>) {
    let (pending, saved) = first_poll_is_pending(store.save(&record("s-1"), None)).await;
    saved.expect("save");
    assert!(pending, "the save ran on the runtime thread");
    // (A load may finish on the blocking pool before the first poll returns, so only its
    // result is checked.)
    let loaded = store.load("s-1").await.expect("load");
    assert_eq!(loaded.map(|r| r.version), Some(1));
}

#[tokio::test(flavor = "current_thread")]
async fn file_store_io_runs_off_the_runtime_thread() {
    let tmp = tempfile::tempdir().expect("tmp");
    let store = FileStore::open(tmp.path()).expect("open");
    saves_and_loads_yield(Arc::new(store)).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "current_thread")]
async fn sqlite_store_io_runs_off_the_runtime_thread_on_a_current_thread_runtime() {
    let tmp = tempfile::tempdir().expect("tmp");
    let store = agent_controller::store::SqliteStore::open(tmp.path().join("s.db")).expect("open");
    saves_and_loads_yield(Arc::new(store)).await;
}
