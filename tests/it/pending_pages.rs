//! The pending decisions a page at a time (`SessionStore::list_pending_page`), on every store:
//! the pages cover every pending decision exactly once, in the listing's order, whatever the
//! page size; a cursor that is no cursor is a typed error; no page shows a decision past its
//! deadline (`deadline::expire_due_then_page`); and a watch on PostgreSQL hears another
//! process's decision by notice, not by polling.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_controller::deadline;
use agent_controller::store::{
    FileStore, InvalidPendingCursor, MemoryStore, PendingChange, PendingCursor, PendingWatch,
    SCHEMA_VERSION, SessionRecord, SessionStore,
};
use serde_json::{Value, json};

/// A record of session `id` saved at `updated_at`: a plan waiting (with a deadline at
/// `deadline_ms` when given) when `calls` is 0, else `calls` tool calls waiting; nothing
/// waiting with `idle`.
fn record(
    id: &str,
    updated_at: u64,
    calls: usize,
    deadline_ms: Option<u64>,
    idle: bool,
) -> SessionRecord {
    let sha = agent_controller::tool::submit_plan::sha256_hex(
        format!("# Plan of {id}\n\n1. step\n").as_bytes(),
    );
    let mut payload = json!({
        "path": ".agent/plans/p.md",
        "title": format!("Plan of {id}"),
        "plan": "1. step",
        "sha256": sha,
        "targetModeId": "build",
        "decisionId": "decision_1",
    });
    if let Some(at) = deadline_ms {
        payload["approvalTimeout"] = json!("1h");
        payload["deadlineAtMs"] = json!(at);
    }
    let plan = (!idle && calls == 0).then(|| {
        json!({
            "runId": "run_1", "toolCallId": "call_1", "toolName": "submit_plan",
            "suspendPayload": payload,
        })
    });
    let tool_calls: Vec<Value> = if idle {
        Vec::new()
    } else {
        (1..=calls)
            .map(|n| {
                let args = json!({ "path": format!("f{n}.txt"), "content": "x" });
                json!({
                    "runId": "run_1", "toolCallId": format!("call_{n}"),
                    "suspendPayload": {
                        "decisionId": format!("decision_{n}"),
                        "toolName": "write_file",
                        "argsSha256": agent_controller::jcs::sha256(&args),
                        "args": args,
                    },
                })
            })
            .collect()
    };
    let waiting = !idle;
    serde_json::from_value(json!({
        "schemaVersion": SCHEMA_VERSION,
        "sessionId": id,
        "version": 1,
        "configFingerprint": "pages",
        "modeId": "plan",
        "messages": [{"role": "user", "content": format!("task of {id}")}],
        "runCounter": 1,
        "run": {"runId": "run_1", "state": if waiting { "suspended" } else { "completed" }},
        "pending": plan,
        "pendingToolCalls": tool_calls,
        "lastDecided": null,
        "decisionCounter": calls.max(1),
        "updatedAt": updated_at,
    }))
    .expect("a record")
}

/// A store under test: its name, the store, and what keeps it (a folder, a schema).
type Tested = (&'static str, Arc<dyn SessionStore>, Box<dyn std::any::Any>);

/// The stores under test.
fn stores() -> Vec<Tested> {
    let mut stores: Vec<Tested> = vec![("memory", Arc::new(MemoryStore::new()), Box::new(()))];
    let dir = tempfile::tempdir().expect("tmp");
    let file = FileStore::open(dir.path().join("sessions")).expect("file store");
    stores.push(("file", Arc::new(file), Box::new(dir)));
    #[cfg(feature = "sqlite")]
    {
        let dir = tempfile::tempdir().expect("tmp");
        let sqlite = agent_controller::store::SqliteStore::open(dir.path().join("s.db"))
            .expect("sqlite store");
        stores.push(("sqlite", Arc::new(sqlite), Box::new(dir)));
    }
    #[cfg(feature = "postgres")]
    if let Some(schema) = common::postgres::TestSchema::new() {
        let store = agent_controller::store::PostgresStore::open(
            agent_controller::store::postgres::PostgresConfig::from_url(&schema.url).expect("url"),
        )
        .expect("postgres store");
        stores.push(("postgres", Arc::new(store), Box::new(schema)));
    }
    stores
}

/// `session/decision` of each pending decision.
fn keys<'a>(
    pending: impl IntoIterator<Item = &'a agent_controller::store::PendingSummary>,
) -> Vec<String> {
    pending
        .into_iter()
        .map(|p| format!("{}/{}", p.session_id, p.decision_id))
        .collect()
}

/// Every page of `store` of at most `limit`, each cursor handed back as text.
async fn all_pages(store: &dyn SessionStore, limit: usize) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut after: Option<PendingCursor> = None;
    loop {
        let page = store
            .list_pending_page(after.as_ref(), limit)
            .await
            .expect("a page");
        assert!(
            page.pending.len() <= limit,
            "{limit}: {:?}",
            keys(&page.pending)
        );
        pages.push(keys(&page.pending));
        match page.next_cursor {
            Some(next) => after = Some(next.to_string().parse().expect("its own cursor")),
            None => return pages,
        }
        assert!(pages.len() <= 200, "the pages end");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn pages_cover_every_pending_decision_once_in_order_on_every_store() {
    runtime().block_on(async {
        for (name, store, _keep) in stores() {
            // 40 sessions, three saved in each second (ties broken by id), every fifth with three
            // tool calls waiting, every seventh idle.
            for i in 0..40 {
                let id = format!("s-{:02}", 39 - i);
                let calls = if i % 5 == 0 { 3 } else { 0 };
                let r = record(&id, 100 + i / 3, calls, None, i % 7 == 3);
                store.save(&r, None).await.expect("save");
            }
            let listing = store.list_pending_decisions().await.expect("listing");
            let all = keys(&listing.pending);
            assert_eq!(all.len(), 34 + 7 * 2, "{name}: {all:?}");
            for limit in [1, 2, 3, 7, 50, 1000] {
                let pages = all_pages(&*store, limit).await;
                assert_eq!(
                    pages.len(),
                    all.len().div_ceil(limit),
                    "{name}, limit {limit}"
                );
                let seen: Vec<String> = pages.into_iter().flatten().collect();
                assert_eq!(seen, all, "{name}, limit {limit}: once each, in order");
            }
            // Between two pages a decision is taken on the first page and one further on, and
            // a listed session is saved again (later now): every session left unchanged is
            // listed exactly once, and nothing decided shows.
            let first = store.list_pending_page(None, 4).await.expect("page");
            let shown = keys(&first.pending);
            let first_id = first.pending[0].session_id.clone();
            let later_id = listing.pending[30].session_id.clone();
            let resaved_id = first.pending[3].session_id.clone();
            for (id, idle) in [(&first_id, true), (&later_id, true), (&resaved_id, false)] {
                let r = store.load(id).await.expect("load").expect("saved");
                let calls = r.pending_tool_calls.len();
                let mut next = record(id, 500, calls, None, idle);
                next.version = r.version + 1;
                store.save(&next, Some(r.version)).await.expect("save");
            }
            let mut rest = Vec::new();
            let mut after = first.next_cursor.clone();
            loop {
                let page = store
                    .list_pending_page(after.as_ref(), 4)
                    .await
                    .expect("a page");
                rest.extend(keys(&page.pending));
                after = page.next_cursor;
                if after.is_none() {
                    break;
                }
            }
            let unchanged: Vec<&String> = all
                .iter()
                .filter(|k| !shown.contains(k))
                .filter(|k| {
                    ![&first_id, &later_id, &resaved_id]
                        .iter()
                        .any(|id| k.starts_with(&format!("{id}/")))
                })
                .collect();
            for key in &unchanged {
                assert_eq!(
                    rest.iter().filter(|k| k == key).count(),
                    1,
                    "{name}: {key} listed once after the first page: {rest:?}"
                );
            }
            assert!(
                !rest.iter().any(|k| k.starts_with(&format!("{later_id}/"))),
                "{name}: a decided session is not listed: {rest:?}"
            );
            assert!(
                rest.last()
                    .is_some_and(|k| k.starts_with(&format!("{resaved_id}/"))),
                "{name}: the session saved again comes last: {rest:?}"
            );
        }
    });
}

#[test]
fn a_cursor_that_is_no_cursor_is_a_typed_error() {
    for bad in [
        "",
        "garbage",
        "12.s1",
        "12..decision_1",
        "-1.s1.decision_1",
        "12.../etc.decision_1",
        "12.s1.decision 1",
        "12.s1.\u{1b}[2J",
    ] {
        let err: InvalidPendingCursor = bad.parse::<PendingCursor>().expect_err(bad);
        assert!(
            err.to_string().contains("is not a pending-decision cursor"),
            "{bad:?}: {err}"
        );
        assert!(!err.to_string().contains('\u{1b}'), "{err}");
    }
    let cursor: PendingCursor = "12.s1.decision_1".parse().expect("a cursor");
    assert_eq!(
        serde_json::to_value(&cursor).expect("json"),
        json!("12.s1.decision_1")
    );
    assert!(serde_json::from_value::<PendingCursor>(json!("12.s1")).is_err());
}

#[test]
fn a_page_never_shows_a_decision_past_its_deadline() {
    runtime().block_on(async {
        let now = SystemTime::now();
        let now_ms = u64::try_from(
            now.duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_millis(),
        )
        .expect("ms");
        for (name, store, _keep) in stores() {
            // Oldest first: two past their deadline, one without, one not yet due.
            for (id, at, deadline) in [
                ("due-1", 10, Some(now_ms - 1)),
                ("due-2", 11, Some(now_ms - 60_000)),
                ("open", 12, None),
                ("later", 13, Some(now_ms + 3_600_000)),
            ] {
                store
                    .save(&record(id, at, 0, deadline, false), None)
                    .await
                    .expect("save");
            }
            let (expired, page) = deadline::expire_due_then_page(&*store, now, None, 1)
                .await
                .expect("a page");
            assert_eq!(keys(&page.pending), ["open/decision_1"], "{name}");
            let mut gone: Vec<&str> = expired.iter().map(|e| e.session_id.as_str()).collect();
            gone.sort_unstable();
            assert_eq!(gone, ["due-1", "due-2"], "{name}");
            for id in ["due-1", "due-2"] {
                let r = store.load(id).await.expect("load").expect("kept");
                assert!(!r.has_pending(), "{name}: {id} expired in the store");
            }
            let next = page.next_cursor.expect("one more page");
            let (expired, page) = deadline::expire_due_then_page(&*store, now, Some(&next), 1)
                .await
                .expect("a page");
            assert!(expired.is_empty(), "{name}");
            assert_eq!(keys(&page.pending), ["later/decision_1"], "{name}");
            assert!(page.next_cursor.is_none(), "{name}");
        }
    });
}

/// A file that is no record is reported on the first page only; the others page on.
#[test]
fn an_unreadable_record_is_reported_on_the_first_page_of_the_file_store() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().expect("tmp");
        let store = FileStore::open(dir.path()).expect("store");
        for (id, at) in [("a", 1), ("b", 2)] {
            store
                .save(&record(id, at, 0, None, false), None)
                .await
                .expect("save");
        }
        std::fs::write(dir.path().join("bad.pending.json"), "not json").expect("plant");
        let first = store.list_pending_page(None, 1).await.expect("page");
        assert_eq!(keys(&first.pending), ["a/decision_1"]);
        assert_eq!(first.unreadable.len(), 1, "{:?}", first.unreadable);
        assert_eq!(first.unreadable[0].session_id, "bad");
        let second = store
            .list_pending_page(first.next_cursor.as_ref(), 1)
            .await
            .expect("page");
        assert_eq!(keys(&second.pending), ["b/decision_1"]);
        assert!(second.unreadable.is_empty());
    });
}

#[test]
fn a_store_without_notices_is_polled() {
    runtime().block_on(async {
        let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::new());
        let watch = PendingWatch::new(store, Duration::from_millis(10))
            .await
            .expect("watch");
        assert!(!watch.is_notified());
    });
}

/// Two stores on one PostgreSQL schema, as two processes hold them: what one saves reaches a
/// watch on the other by `NOTIFY`. The watch polls once an hour, so only a notice can bring it
/// within the test's patience, and the changes come in the order they were committed.
#[cfg(feature = "postgres")]
#[test]
fn a_decision_saved_by_another_process_reaches_a_postgres_watch_by_notice() {
    use agent_controller::store::PostgresStore;
    let Some(schema) = common::postgres::TestSchema::new() else {
        return;
    };
    runtime().block_on(async {
        let here = PostgresStore::connect(&schema.url).await.expect("connect");
        let there = PostgresStore::connect(&schema.url).await.expect("connect");
        there
            .save(&record("before", 1, 0, None, false), None)
            .await
            .expect("save");
        let mut watch = PendingWatch::new(Arc::new(here), Duration::from_secs(3600))
            .await
            .expect("watch");
        assert!(watch.is_notified());
        let patience = Duration::from_secs(60);
        // A plan starts waiting there.
        there
            .save(&record("w1", 2, 0, None, false), None)
            .await
            .expect("save");
        let changes = tokio::time::timeout(patience, watch.changes())
            .await
            .expect("heard without polling")
            .expect("changes");
        assert!(
            matches!(&changes[..], [PendingChange::DecisionWaiting { session_id, decision_id, .. }]
                if session_id == "w1" && decision_id == "decision_1"),
            "{changes:?}"
        );
        // Then, in this order: two tool calls wait in `w2`, and `before` is decided.
        there
            .save(&record("w2", 3, 2, None, false), None)
            .await
            .expect("save");
        let mut decided = record("before", 4, 0, None, true);
        decided.version = 2;
        decided.mode_id = "build".to_owned();
        there.save(&decided, Some(1)).await.expect("decide");
        let mut heard: Vec<PendingChange> = Vec::new();
        while heard.len() < 3 {
            let more = tokio::time::timeout(patience, watch.changes())
                .await
                .expect("heard without polling")
                .expect("changes");
            heard.extend(more);
        }
        let shown: Vec<(String, String, &str)> = heard
            .iter()
            .map(|c| match c {
                PendingChange::DecisionWaiting {
                    session_id,
                    decision_id,
                    ..
                } => (session_id.clone(), decision_id.clone(), "waiting"),
                PendingChange::DecisionSettled {
                    session_id,
                    decision_id,
                    mode_id,
                } => {
                    assert_eq!(mode_id.as_deref(), Some("build"));
                    (session_id.clone(), decision_id.clone(), "settled")
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("w2".to_owned(), "decision_1".to_owned(), "waiting"),
                ("w2".to_owned(), "decision_2".to_owned(), "waiting"),
                ("before".to_owned(), "decision_1".to_owned(), "settled"),
            ]
        );
    });
}

/// A store that counts the calls a listing of pending entries makes to the store it wraps.
struct Counting {
    inner: Arc<dyn SessionStore>,
    loads: std::sync::atomic::AtomicUsize,
    batches: std::sync::atomic::AtomicUsize,
    workspace_listings: std::sync::atomic::AtomicUsize,
}

#[agent_controller::async_trait]
impl SessionStore for Counting {
    async fn load(
        &self,
        id: &str,
    ) -> Result<Option<SessionRecord>, agent_controller::store::StoreError> {
        self.loads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.load(id).await
    }
    async fn load_many(
        &self,
        ids: &[&str],
    ) -> Result<Vec<agent_controller::store::Loaded>, agent_controller::store::StoreError> {
        self.batches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.load_many(ids).await
    }
    async fn save(
        &self,
        record: &SessionRecord,
        expected: Option<u64>,
    ) -> Result<(), agent_controller::store::StoreError> {
        self.inner.save(record, expected).await
    }
    async fn delete(&self, id: &str) -> Result<bool, agent_controller::store::StoreError> {
        self.inner.delete(id).await
    }
    async fn list_pending(
        &self,
        now_ms: u64,
    ) -> Result<agent_controller::store::PendingListing, agent_controller::store::StoreError> {
        self.inner.list_pending(now_ms).await
    }
    async fn expire(&self, before: u64) -> Result<usize, agent_controller::store::StoreError> {
        self.inner.expire(before).await
    }
    async fn list_workspace_allowances(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<Vec<agent_controller::allowance::Allowance>, agent_controller::store::StoreError>
    {
        self.workspace_listings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.list_workspace_allowances(workspace).await
    }
}

#[test]
fn pending_entries_read_the_sessions_in_one_batch_and_each_workspace_once_on_every_store() {
    use std::sync::atomic::Ordering::Relaxed;
    let workspace = tempfile::tempdir().expect("tmp");
    let recorded =
        agent_controller::workspace::WorkspaceRecord::of(workspace.path()).expect("workspace");
    for (name, store, _keep) in stores() {
        runtime().block_on(async {
            // Sessions in one workspace, one of them with two tool calls waiting, one without a
            // workspace, and one deleted once listed (its entry has no allowance).
            let ids = ["ent-a", "ent-b", "ent-c", "ent-d"];
            for (n, id) in ids.iter().enumerate() {
                let mut r = record(id, 100 + n as u64, usize::from(n == 1) * 2, None, false);
                if n != 2 {
                    r.workspace = Some(recorded.clone());
                }
                // Session `ent-a` keeps an allowance in its mode, `ent-b` one of another mode.
                let mode = ["plan", "build"].get(n).copied();
                if let Some(mode) = mode {
                    r.allowances = vec![
                        serde_json::from_value(json!({
                            "id": format!("allow_{n}"), "scope": "session", "modeId": mode,
                            "toolName": "write_file", "sessionId": id,
                        }))
                        .expect("an allowance"),
                    ];
                }
                store.save(&r, None).await.expect("saved");
            }
            let listing = store.list_pending_decisions().await.expect("listing");
            assert_eq!(listing.pending.len(), 5, "{name}");
            assert!(store.delete("ent-d").await.expect("deleted"), "{name}");
            let counting = Counting {
                inner: store.clone(),
                loads: 0.into(),
                batches: 0.into(),
                workspace_listings: 0.into(),
            };
            let entries =
                agent_controller::session::pending_entries(&counting, listing.pending.clone())
                    .await;
            assert_eq!(
                counting.batches.load(Relaxed),
                1,
                "{name}: one batch of loads"
            );
            assert_eq!(
                counting.loads.load(Relaxed),
                0,
                "{name}: no load one at a time"
            );
            assert_eq!(
                counting.workspace_listings.load(Relaxed),
                1,
                "{name}: the one workspace's allowances listed once"
            );
            assert!(entries.unread_allowances.is_empty(), "{name}");
            assert!(entries.next_cursor.is_none(), "{name}");
            // The same entries, in the same order, as a session at a time gives them.
            assert_eq!(entries.pending.len(), listing.pending.len(), "{name}");
            let in_force = |id: &str| {
                let entry = entries.pending.iter().find(|e| e.summary.session_id == id);
                entry.map(|e| e.allowances_in_force.len())
            };
            assert_eq!(
                in_force("ent-a"),
                Some(1),
                "{name}: its allowance is in force"
            );
            assert_eq!(
                in_force("ent-b"),
                Some(0),
                "{name}: of another mode, not in force"
            );
            for (entry, summary) in entries.pending.iter().zip(&listing.pending) {
                assert_eq!(&entry.summary, summary, "{name}");
                let one_by_one = match store.load(&summary.session_id).await.expect("load") {
                    Some(r) => agent_controller::session::allowances_in_force(&*store, &r)
                        .await
                        .expect("allowances"),
                    None => Vec::new(),
                };
                assert_eq!(entry.allowances_in_force, one_by_one, "{name}");
            }
        });
    }
}

/// Sets the modification time of `path` back an hour: a file the store need not read again
/// while it stays as it is.
fn backdate(path: &std::path::Path) -> SystemTime {
    let then = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(then))
        .expect("backdate");
    then
}

/// Waits until the file at `path`, changed just now, has settled for the file store: its
/// status-change time (the kernel's, which [`backdate`] does not put back) is past the settle
/// window, a quarter of a second where file times have nanoseconds, three seconds where not.
fn wait_settled(path: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let fine = std::fs::metadata(path).expect("stat").ctime_nsec() != 0;
    std::thread::sleep(Duration::from_millis(if fine { 300 } else { 3100 }));
}

/// A listing of a file store parses each pending record once while its file stays unchanged:
/// the next listing, and the load of the page's sessions (`pending_entries`), read none again.
#[test]
fn the_file_store_parses_an_unchanged_pending_record_once() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Arc::new(FileStore::open(dir.path()).expect("store"));
        for n in 0..20 {
            let id = format!("s{n:02}");
            store
                .save(&record(&id, 100 + n, 0, None, false), None)
                .await
                .expect("save");
            backdate(&dir.path().join(format!("{id}.pending.json")));
        }
        wait_settled(&dir.path().join("s19.pending.json"));
        let before = store.records_read();
        let page = store.list_pending_page(None, 10).await.expect("page");
        assert_eq!(page.pending.len(), 10);
        assert_eq!(store.records_read() - before, 20, "each record read once");
        let entries = agent_controller::session::pending_entries(&*store, page.pending).await;
        assert_eq!(entries.pending.len(), 10);
        let again = store
            .list_pending_page(page.next_cursor.as_ref(), 10)
            .await
            .expect("page");
        assert_eq!(again.pending.len(), 10);
        let listing = store.list_pending_decisions().await.expect("listing");
        assert_eq!(listing.pending.len(), 20);
        assert_eq!(
            store.records_read() - before,
            20,
            "no unchanged record read again"
        );
    });
}

/// Session `s1` at `version`, its pending plan titled `title` (pinned to that text): records
/// of one session the same size whatever `title` of one length.
fn titled(version: u64, title: &str) -> SessionRecord {
    let mut value = serde_json::to_value(record("s1", 100, 0, None, false)).expect("json");
    value["version"] = json!(version);
    value["pending"]["suspendPayload"]["title"] = json!(title);
    value["pending"]["suspendPayload"]["sha256"] =
        json!(agent_controller::tool::submit_plan::sha256_hex(
            format!("# {title}\n\n1. step\n").as_bytes()
        ));
    serde_json::from_value(value).expect("a record")
}

/// A file store's listing sees what another process wrote, even when it kept the same size
/// within the same second: saved again (renamed into place), and rewritten in place with its
/// modification time put back.
#[test]
fn a_file_store_listing_sees_a_same_size_rewrite_by_another_process() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().expect("tmp");
        let ours = FileStore::open(dir.path()).expect("store");
        let theirs = FileStore::open(dir.path()).expect("another process's store");
        let path = dir.path().join("s1.pending.json");
        let listed = |store: &FileStore| {
            let store = store.clone();
            async move {
                let page = store.list_pending_page(None, 10).await.expect("page");
                let listing = store.list_pending_decisions().await.expect("listing");
                assert!(page.unreadable.is_empty(), "{:?}", page.unreadable);
                assert!(listing.unreadable.is_empty(), "{:?}", listing.unreadable);
                let loaded = store.load_many(&["s1"]).await.expect("load");
                let loaded = loaded[0]
                    .as_ref()
                    .expect("readable")
                    .as_ref()
                    .expect("there");
                (
                    page.pending[0].title.clone(),
                    listing.pending[0].title.clone(),
                    loaded.version,
                )
            }
        };
        theirs
            .save(&titled(1, "Plan of s1"), None)
            .await
            .expect("save");
        let then = backdate(&path);
        let size = std::fs::metadata(&path).expect("stat").len();
        assert_eq!(
            listed(&ours).await,
            ("Plan of s1".to_owned(), "Plan of s1".to_owned(), 1)
        );

        // Saved again by the other process: the same size, the same second, the same mtime.
        theirs
            .save(&titled(2, "Plan of t1"), Some(1))
            .await
            .expect("save");
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(then))
            .expect("mtime put back");
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), size);
        assert_eq!(
            listed(&ours).await,
            ("Plan of t1".to_owned(), "Plan of t1".to_owned(), 2)
        );

        // Rewritten in place (the same file), then its mtime put back.
        let bytes = serde_json::to_vec(&titled(3, "Plan of u1")).expect("json");
        assert_eq!(bytes.len() as u64, size);
        let file = std::fs::File::options()
            .write(true)
            .truncate(true)
            .open(&path)
            .expect("open");
        std::io::Write::write_all(&mut &file, &bytes).expect("write");
        file.set_modified(then).expect("mtime put back");
        drop(file);
        assert_eq!(
            listed(&ours).await,
            ("Plan of u1".to_owned(), "Plan of u1".to_owned(), 3)
        );
    });
}

/// Two stores over the same data, and what keeps it (a folder, a schema).
type Paired = (
    &'static str,
    Arc<dyn SessionStore>,
    Arc<dyn SessionStore>,
    Box<dyn std::any::Any>,
);

/// Two stores over the same data, as two processes open it: the file store and SQLite on the
/// same path, PostgreSQL on the same schema.
fn store_pairs() -> Vec<Paired> {
    let mut pairs: Vec<Paired> = Vec::new();
    let dir = tempfile::tempdir().expect("tmp");
    let open = || Arc::new(FileStore::open(dir.path().join("sessions")).expect("file store"));
    let (a, b) = (open(), open());
    pairs.push(("file", a, b, Box::new(dir)));
    #[cfg(feature = "sqlite")]
    {
        let dir = tempfile::tempdir().expect("tmp");
        let open = || {
            Arc::new(
                agent_controller::store::SqliteStore::open(dir.path().join("s.db"))
                    .expect("sqlite store"),
            )
        };
        let (a, b) = (open(), open());
        pairs.push(("sqlite", a, b, Box::new(dir)));
    }
    #[cfg(feature = "postgres")]
    if let Some(schema) = common::postgres::TestSchema::new() {
        let open = || {
            Arc::new(
                agent_controller::store::PostgresStore::open(
                    agent_controller::store::postgres::PostgresConfig::from_url(&schema.url)
                        .expect("url"),
                )
                .expect("postgres store"),
            )
        };
        let (a, b) = (open(), open());
        pairs.push(("postgres", a, b, Box::new(schema)));
    }
    pairs
}

/// `load_many`, which lists a page's sessions, answers what is stored now on every store, even
/// after another process saved the session again at the same size, or deleted it and started
/// it again under the same id at version 1.
#[test]
fn load_many_sees_what_another_process_saved_on_every_store() {
    runtime().block_on(async {
        for (name, ours, theirs, _keep) in store_pairs() {
            let loaded = |store: Arc<dyn SessionStore>| async move {
                let loaded = store.load_many(&["s1", "s1"]).await.expect("load");
                loaded
                    .into_iter()
                    .map(|each| {
                        let record = each.expect("readable").expect("there");
                        let title = record.pending_summaries()[0].title.clone();
                        (record.version, title)
                    })
                    .collect::<Vec<_>>()
            };
            theirs
                .save(&titled(1, "Plan of s1"), None)
                .await
                .expect("save");
            let first = (1, "Plan of s1".to_owned());
            assert_eq!(loaded(ours.clone()).await, [first.clone(), first], "{name}");
            theirs
                .save(&titled(2, "Plan of t1"), Some(1))
                .await
                .expect("save");
            let second = (2, "Plan of t1".to_owned());
            assert_eq!(
                loaded(ours.clone()).await,
                [second.clone(), second],
                "{name}"
            );
            assert!(theirs.delete("s1").await.expect("delete"), "{name}");
            theirs
                .save(&titled(1, "Plan of u1"), None)
                .await
                .expect("save");
            let again = (1, "Plan of u1".to_owned());
            assert_eq!(loaded(ours.clone()).await, [again.clone(), again], "{name}");
        }
    });
}
