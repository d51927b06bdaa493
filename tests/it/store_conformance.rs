//! The store conformance suite of the testing kit (`testing::StoreConformance`): the crate's
//! own stores pass it, and stores planted the way a user would write them (a wrapper from
//! outside the crate) fail it with a message that says what is wrong.
#![cfg(feature = "testing")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_controller::store::{PendingListing, SessionRecord};
use agent_controller::testing::{
    ConformanceOutcome, ConformanceReport, StoreConformance, store_conformance,
};
use agent_controller::{FileStore, MemoryStore, SessionStore, store::StoreError};

/// Every check of `report` passed.
fn assert_all_passed(report: &ConformanceReport) {
    assert!(
        report
            .checks
            .iter()
            .all(|c| c.outcome == ConformanceOutcome::Passed),
        "{report}"
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Writes raw record text where a [`FileStore`] on `dir` keeps a pending record.
fn plant_file(dir: &Path) -> impl Fn(&str, &str) -> Result<(), String> + Send + Sync + 'static {
    let dir = dir.to_owned();
    move |id, text| {
        std::fs::write(dir.join(format!("{id}.pending.json")), text).map_err(|e| e.to_string())
    }
}

#[test]
fn the_memory_store_conforms() {
    runtime().block_on(async {
        let store = Arc::new(MemoryStore::new());
        let report = store_conformance(move || store.clone())
            .await
            .expect("conforms");
        let skipped: Vec<&str> = report
            .checks
            .iter()
            .filter(|c| matches!(c.outcome, ConformanceOutcome::Skipped(_)))
            .map(|c| c.name)
            .collect();
        assert_eq!(
            skipped,
            [
                "unreadable records kept apart",
                "migration of older records"
            ],
            "{report}"
        );
    });
}

#[test]
fn the_file_store_conforms_with_raw_records() {
    runtime().block_on(async {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir: PathBuf = tmp.path().join("sessions");
        let open_dir = dir.clone();
        FileStore::open(&dir).expect("store");
        let report = StoreConformance::new(move || FileStore::open(&open_dir).expect("store"))
            .raw_records(plant_file(&dir))
            .run()
            .await
            .expect("conforms");
        assert_all_passed(&report);
        assert_eq!(report.checks.len(), 13, "{report}");
        // It cleaned up after itself.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().ends_with(".json"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    });
}

#[cfg(feature = "sqlite")]
#[test]
fn the_sqlite_store_conforms_with_raw_records() {
    use agent_controller::store::SqliteStore;
    runtime().block_on(async {
        let tmp = tempfile::tempdir().expect("tmp");
        let file = tmp.path().join("sessions.db");
        let open_file = file.clone();
        let report = StoreConformance::new(move || SqliteStore::open(&open_file).expect("sqlite"))
            .raw_records(move |id, text| {
                let db = rusqlite::Connection::open(&file).map_err(|e| e.to_string())?;
                db.execute(
                    "INSERT INTO sessions (id, version, pending, updated_at, record) \
                     VALUES (?1, 1, 1, 0, ?2)",
                    rusqlite::params![id, text],
                )
                .map(drop)
                .map_err(|e| e.to_string())
            })
            .run()
            .await
            .expect("conforms");
        assert_all_passed(&report);
    });
}

#[cfg(feature = "postgres")]
#[test]
fn the_postgres_store_conforms_with_raw_records() {
    use crate::common::postgres::{TestSchema, exec};
    use agent_controller::store::postgres::PostgresStore;
    let Some(schema) = TestSchema::new() else {
        eprintln!("skipped: AGENT_CONTROLLER_SKIP_POSTGRES=1");
        return;
    };
    runtime().block_on(async {
        let url = schema.url.clone();
        let open_url = url.clone();
        let report = StoreConformance::new(move || {
            let config = agent_controller::store::postgres::PostgresConfig::from_url(&open_url)
                .expect("url");
            PostgresStore::open(config).expect("postgres")
        })
        .raw_records(move |id, text| {
            // A row as another host would leave it: the `pending` column is the record's own
            // summary where the text is a record, and garbage where it is not.
            let (pending, record) = match serde_json::from_str::<SessionRecord>(text) {
                Ok(r) => (
                    serde_json::to_string(&r.pending_summary()).map_err(|e| e.to_string())?,
                    text.to_owned(),
                ),
                Err(_) if serde_json::from_str::<serde_json::Value>(text).is_ok() => {
                    (r#"{"garbage":true}"#.to_owned(), text.to_owned())
                }
                Err(_) => (r#"{"garbage":true}"#.to_owned(), "[1, 2]".to_owned()),
            };
            let quote = |s: &str| s.replace('\'', "''");
            exec(
                &url,
                &format!(
                    "INSERT INTO agent_controller_sessions \
                     (id, version, schema_version, updated_at, pending, record) \
                     VALUES ('{}', 1, 1, 0, '{}'::json, '{}'::json)",
                    quote(id),
                    quote(&pending),
                    quote(&record)
                ),
            )
        })
        .run()
        .await
        .expect("conforms");
        assert_all_passed(&report);
    });
}

/// A store a user might write: records in a map, saved by overwriting, without looking at the
/// version the caller expects.
#[derive(Default)]
struct Overwriting(Mutex<HashMap<String, SessionRecord>>);

impl Overwriting {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionRecord>> {
        self.0.lock().expect("lock")
    }
}

#[agent_controller::async_trait]
impl SessionStore for Overwriting {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self.map().get(id).cloned())
    }
    async fn save(&self, record: &SessionRecord, _expected: Option<u64>) -> Result<(), StoreError> {
        self.map().insert(record.session_id.clone(), record.clone());
        Ok(())
    }
    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.map().remove(id).is_some())
    }
    async fn list_pending(&self, now: u64) -> Result<PendingListing, StoreError> {
        let mut listing = PendingListing::default();
        for record in self.map().values() {
            listing.pending.extend(record.pending_summaries());
            listing.interrupted.extend(record.interrupted_run(now));
        }
        listing.sort();
        Ok(listing)
    }
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        let mut map = self.map();
        let old = map.len();
        map.retain(|_, r| r.has_pending() || r.lease_until().is_some() || r.updated_at >= before);
        Ok(old - map.len())
    }
}

#[test]
fn a_store_without_compare_and_swap_fails_with_a_clear_message() {
    runtime().block_on(async {
        let store = Arc::new(Overwriting::default());
        let failure = store_conformance(move || store.clone())
            .await
            .expect_err("no compare-and-swap");
        println!("{failure}");
        let failed: Vec<&str> = failure.0.failures().map(|c| c.name).collect();
        assert!(
            failed.contains(&"compare-and-swap")
                && failed.contains(&"racing savers")
                && failed.contains(&"racing deciders"),
            "{failure}"
        );
        let shown = failure.to_string();
        assert!(
            shown.contains("FAIL  compare-and-swap")
                && shown.contains("ignores the expected version (no compare-and-swap)")
                && shown.contains("StoreError::Conflict"),
            "{shown}"
        );
        assert_eq!(format!("{failure:?}"), shown, "Debug reads as Display");
    });
}

/// Faults a user's `list_pending` can have, planted on a [`FileStore`].
#[derive(Clone, Copy)]
enum ListingFault {
    /// One unreadable record fails the whole listing (issue 10's fault).
    FailsOnUnreadable,
    /// Interrupted runs are never listed.
    NoInterrupted,
}

struct FaultyListing(FileStore, ListingFault);

#[agent_controller::async_trait]
impl SessionStore for FaultyListing {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.0.load(id).await
    }
    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        self.0.save(record, expected).await
    }
    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.0.delete(id).await
    }
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        let mut listing = self.0.list_pending(now_ms).await?;
        match self.1 {
            ListingFault::FailsOnUnreadable if !listing.is_healthy() => Err(
                StoreError::backend_message(listing.unreadable[0].reason.clone()),
            ),
            ListingFault::FailsOnUnreadable => Ok(listing),
            ListingFault::NoInterrupted => {
                listing.interrupted.clear();
                Ok(listing)
            }
        }
    }
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.0.expire(before).await
    }
}

#[test]
fn a_listing_that_one_bad_record_breaks_or_that_forgets_interrupted_runs_fails() {
    for (fault, check, says) in [
        (
            ListingFault::FailsOnUnreadable,
            "unreadable records kept apart",
            "one bad record must not hide the others",
        ),
        (
            ListingFault::NoInterrupted,
            "interrupted runs and leases",
            "lease has ended or that has none",
        ),
    ] {
        runtime().block_on(async {
            let tmp = tempfile::tempdir().expect("tmp");
            let dir = tmp.path().join("sessions");
            FileStore::open(&dir).expect("store");
            let open_dir = dir.clone();
            let failure = StoreConformance::new(move || {
                FaultyListing(FileStore::open(&open_dir).expect("store"), fault)
            })
            .raw_records(plant_file(&dir))
            .run()
            .await
            .expect_err("a faulty listing");
            let failed: Vec<&str> = failure.0.failures().map(|c| c.name).collect();
            assert_eq!(failed, [check], "{failure}");
            assert!(failure.to_string().contains(says), "{failure}");
        });
    }
}
