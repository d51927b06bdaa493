//! [`SqliteStore`]: sessions in an SQLite database (bundled SQLite, WAL, `synchronous = FULL`).
//!
//! One row per session; the compare-and-swap is an `UPDATE ... WHERE version = ?` (or an
//! `INSERT` that fails on an existing id) inside one transaction, so several processes can share
//! the file. Calls run on tokio's blocking pool; the connection mutex is never held across an
//! `await`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};

use super::pending_page::PageFill;
use super::{
    PendingCursor, PendingListing, PendingPage, SessionListing, SessionRecord, SessionStore,
    StoreError, UnreadableRecord, check_next_version, check_session_id, decode,
};

/// Sessions in an SQLite database file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
}

fn db(err: rusqlite::Error) -> StoreError {
    StoreError::backend("sqlite", err)
}

impl SqliteStore {
    /// Opens (creating it if needed) the database at `path`, in WAL mode with full sync.
    ///
    /// `path` is handed to SQLite as it is: `:memory:`, an empty path and URI filenames such as
    /// `file::memory:` open databases that are gone when the process ends. The CLI refuses those
    /// ([`check_spec`](super::check_spec)); a host that wants one says so with
    /// [`SqliteStore::in_memory`].
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the file cannot be opened or the schema created.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::SessionStore;
    /// use agent_controller::store::sqlite::SqliteStore;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = tempfile::tempdir()?;
    /// let store = SqliteStore::open(dir.path().join("sessions.db"))?;
    /// assert!(store.load("s1").await?.is_none());
    /// assert!(dir.path().join("sessions.db").exists());
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::with_connection(Connection::open(path).map_err(db)?)
    }

    /// A store in a private in-memory database: nothing outlives the store (for tests, or a host
    /// that wants SQLite's behaviour without a file).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the schema cannot be created.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::{SessionStore, SqliteStore};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = SqliteStore::in_memory()?;
    /// assert_eq!(store.load("nobody").await?, None);
    /// # Ok::<(), agent_controller::store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub fn in_memory() -> Result<Self, StoreError> {
        Self::with_connection(Connection::open_in_memory().map_err(db)?)
    }

    fn with_connection(conn: Connection) -> Result<Self, StoreError> {
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(db)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(db)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS sessions (
                 id TEXT PRIMARY KEY,
                 version INTEGER NOT NULL,
                 pending INTEGER NOT NULL,
                 updated_at INTEGER NOT NULL,
                 record TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS sessions_pending ON sessions (pending) WHERE pending = 1;
             CREATE INDEX IF NOT EXISTS sessions_pending_order ON sessions (updated_at, id)
                 WHERE pending = 1;
             CREATE TABLE IF NOT EXISTS workspace_allowances (
                 id TEXT PRIMARY KEY,
                 workspace TEXT NOT NULL,
                 allowance TEXT NOT NULL
             );",
        )
        .map_err(db)?;
        add_lease_column(&conn)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        let work = move || {
            let mut guard = conn
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut guard)
        };
        // On the blocking pool on every runtime, a current-thread one too: its only thread
        // must not wait on an fsync while other sessions could run.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle
                .spawn_blocking(work)
                .await
                .map_err(|e| StoreError::backend("sqlite task failed", e))?,
            Err(_) => work(),
        }
    }
}

/// Adds `lease_until` (when the lease of a running run ends, in milliseconds; `NULL` unless the
/// run is running) and its partial index to a database made before leases, filling it in for
/// running runs; one transaction, so processes opening the file together add it once.
fn add_lease_column(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
    let added = (|| {
        let has: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM pragma_table_info('sessions') WHERE name = 'lease_until'",
                [],
                |row| row.get(0),
            )
            .map_err(db)?;
        if !has {
            conn.execute_batch(
                "ALTER TABLE sessions ADD COLUMN lease_until INTEGER;
                 UPDATE sessions SET lease_until = 0 WHERE CASE WHEN json_valid(record)
                     THEN json_extract(record, '$.run.state') END = 'running';",
            )
            .map_err(db)?;
        }
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS sessions_running ON sessions (lease_until)
                 WHERE lease_until IS NOT NULL;",
        )
        .map_err(db)
    })();
    let end = if added.is_ok() { "COMMIT" } else { "ROLLBACK" };
    conn.execute_batch(end).map_err(db)?;
    added
}

/// The text of an `id` cell as it may be shown (a non-text id, which this crate never writes,
/// is shown as what it is).
/// The key of a workspace in the allowance tables: its path, lossily as text.
fn workspace_key(workspace: Option<&Path>) -> String {
    workspace
        .map(|w| w.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn key_text(cell: ValueRef<'_>) -> String {
    match cell {
        ValueRef::Text(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => format!("{other:?}"),
    }
}

/// Decodes the `record` cell of the row keyed `id`: anything but text is corrupt.
fn decode_column(id: &str, cell: ValueRef<'_>) -> Result<SessionRecord, StoreError> {
    match cell {
        ValueRef::Text(bytes) => decode(id, bytes),
        other => Err(StoreError::Corrupt {
            session_id: id.to_owned(),
            message: format!(
                "the record column holds {}, not JSON text",
                other.data_type()
            ),
        }),
    }
}

/// Adds the interrupted runs to `listing`, read through the `sessions_running` index (rows whose
/// lease has ended); a row that cannot be read goes to `unreadable`.
fn list_interrupted(
    conn: &Connection,
    now: u64,
    listing: &mut PendingListing,
) -> Result<(), StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT id, record FROM sessions WHERE lease_until IS NOT NULL AND lease_until <= ?1",
        )
        .map_err(db)?;
    let rows = stmt
        .query_map(params![i64::try_from(now).unwrap_or(i64::MAX)], |row| {
            let id = key_text(row.get_ref(0)?);
            let record = decode_column(&id, row.get_ref(1)?);
            Ok((id, record))
        })
        .map_err(db)?;
    for row in rows {
        match row.map_err(db)? {
            (_, Ok(record)) => listing.interrupted.extend(record.interrupted_run(now)),
            // A row both flags name (never written so) is reported once.
            (id, Err(_)) if listing.unreadable.iter().any(|u| u.session_id == id) => {}
            (id, Err(error)) => listing.unreadable.push(UnreadableRecord::new(
                &id,
                format!("sessions row {id}"),
                &error,
            )),
        }
    }
    Ok(())
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let id = session_id.to_owned();
        self.with(move |conn| {
            conn.query_row(
                "SELECT record FROM sessions WHERE id = ?1",
                params![id],
                |row| Ok(decode_column(&id, row.get_ref(0)?)),
            )
            .optional()
            .map_err(db)?
            .transpose()
        })
        .await
    }

    /// Every record in one query (`WHERE id IN (...)`, in chunks under SQLite's bound on
    /// parameters), each decoded as [`SessionStore::load`] decodes it.
    async fn load_many(&self, session_ids: &[&str]) -> Result<Vec<super::Loaded>, StoreError> {
        let ids: Vec<String> = session_ids.iter().map(|&id| id.to_owned()).collect();
        self.with(move |conn| {
            // The stored cells by id, decoded for each id asked (an id asked twice, twice).
            let mut found: std::collections::HashMap<String, rusqlite::types::Value> =
                std::collections::HashMap::new();
            for chunk in ids.chunks(500) {
                let marks = vec!["?"; chunk.len()].join(", ");
                let mut stmt = conn
                    .prepare(&format!(
                        "SELECT id, record FROM sessions WHERE id IN ({marks})"
                    ))
                    .map_err(db)?;
                let mut rows = stmt
                    .query(rusqlite::params_from_iter(chunk.iter()))
                    .map_err(db)?;
                while let Some(row) = rows.next().map_err(db)? {
                    let id: String = row.get(0).map_err(db)?;
                    let cell: rusqlite::types::Value = row.get(1).map_err(db)?;
                    found.insert(id, cell);
                }
            }
            Ok(ids
                .iter()
                .map(|id| {
                    found
                        .get(id)
                        .map(|cell| decode_column(id, cell.into()).map(Arc::new))
                        .transpose()
                })
                .collect())
        })
        .await
    }

    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        check_session_id(&record.session_id)?;
        check_next_version(record, expected)?;
        let text =
            serde_json::to_string(record).map_err(|e| StoreError::backend("encode session", e))?;
        let id = record.session_id.clone();
        let version = record.version as i64;
        let pending = record.has_pending();
        let updated_at = record.updated_at as i64;
        let lease_until = record
            .lease_until()
            .map(|t| i64::try_from(t).unwrap_or(i64::MAX));
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(db)?;
            let found: Option<i64> = tx
                .query_row("SELECT version FROM sessions WHERE id = ?1", params![id], |row| row.get(0))
                .optional()
                .map_err(db)?;
            let found = found.map(|v| v as u64);
            if found != expected {
                return Err(StoreError::Conflict { session_id: id, expected, found });
            }
            tx.execute(
                "INSERT INTO sessions (id, version, pending, updated_at, record, lease_until) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(id) DO UPDATE SET version = ?2, pending = ?3, updated_at = ?4, record = ?5, lease_until = ?6",
                params![id, version, pending, updated_at, text, lease_until],
            )
            .map_err(db)?;
            tx.commit().map_err(db)
        })
        .await
    }

    async fn delete(&self, session_id: &str) -> Result<bool, StoreError> {
        let id = session_id.to_owned();
        self.with(move |conn| {
            conn.execute("DELETE FROM sessions WHERE id = ?1", params![id])
                .map(|n| n > 0)
                .map_err(db)
        })
        .await
    }

    /// A row whose record cannot be read is reported in `unreadable` as `sessions row ID`.
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        self.with(move |conn| {
            let mut stmt = conn
                .prepare("SELECT id, record FROM sessions WHERE pending = 1")
                .map_err(db)?;
            let rows = stmt
                .query_map([], |row| {
                    let id = key_text(row.get_ref(0)?);
                    let record = decode_column(&id, row.get_ref(1)?);
                    Ok((id, record))
                })
                .map_err(db)?;
            let mut listing = PendingListing::default();
            for row in rows {
                match row.map_err(db)? {
                    (_, Ok(record)) => listing.pending.extend(record.pending_summaries()),
                    (id, Err(error)) => listing.unreadable.push(UnreadableRecord::new(
                        &id,
                        format!("sessions row {id}"),
                        &error,
                    )),
                }
            }
            list_interrupted(conn, now_ms, &mut listing)?;
            listing.sort();
            Ok(listing)
        })
        .await
    }

    /// Reads the page through the partial index `sessions_pending_order` on `(updated_at, id)
    /// WHERE pending = 1`: `WHERE (updated_at, id) >= (cursor) ORDER BY updated_at, id LIMIT` a
    /// few more sessions than the page holds (again from the last one read while a page is not
    /// full); only those records are parsed. A row whose record cannot be read is reported on
    /// the page where it stands, as `sessions row ID`.
    async fn list_pending_page(
        &self,
        after: Option<&PendingCursor>,
        limit: usize,
    ) -> Result<PendingPage, StoreError> {
        let after = after.cloned();
        self.with(move |conn| {
            let mut fill = PageFill::new(after.as_ref(), limit);
            let batch = fill.limit().saturating_add(2);
            let batch_sql = i64::try_from(batch).unwrap_or(i64::MAX);
            // Where the next read starts: the cursor's session included, then past the last row.
            let mut from: Option<(i64, String, bool)> = after.as_ref().map(|c| {
                (
                    i64::try_from(c.updated_at()).unwrap_or(i64::MAX),
                    c.session_id().to_owned(),
                    true,
                )
            });
            loop {
                let (sql, at, id) = match &from {
                    None => (
                        "SELECT id, updated_at, record FROM sessions WHERE pending = 1
                         ORDER BY updated_at, id LIMIT ?3",
                        0,
                        String::new(),
                    ),
                    Some((at, id, true)) => (
                        "SELECT id, updated_at, record FROM sessions WHERE pending = 1
                         AND (updated_at, id) >= (?1, ?2) ORDER BY updated_at, id LIMIT ?3",
                        *at,
                        id.clone(),
                    ),
                    Some((at, id, false)) => (
                        "SELECT id, updated_at, record FROM sessions WHERE pending = 1
                         AND (updated_at, id) > (?1, ?2) ORDER BY updated_at, id LIMIT ?3",
                        *at,
                        id.clone(),
                    ),
                };
                let mut stmt = conn.prepare_cached(sql).map_err(db)?;
                let rows = stmt
                    .query_map(params![at, id, batch_sql], |row| {
                        let id = key_text(row.get_ref(0)?);
                        let updated_at: i64 = row.get(1)?;
                        let record = decode_column(&id, row.get_ref(2)?);
                        Ok((id, updated_at, record))
                    })
                    .map_err(db)?;
                let mut read = 0;
                let mut last: Option<(i64, String)> = None;
                for row in rows {
                    let (id, updated_at, record) = row.map_err(db)?;
                    read += 1;
                    match record {
                        Ok(record) => {
                            let at = updated_at.max(0).cast_unsigned();
                            if fill.session(at, &id, record.pending_summaries()) {
                                return Ok(fill.finish());
                            }
                        }
                        Err(error) => fill.unreadable([UnreadableRecord::new(
                            &id,
                            format!("sessions row {id}"),
                            &error,
                        )]),
                    }
                    last = Some((updated_at, id));
                }
                match last {
                    Some((at, id)) if read >= batch => from = Some((at, id, false)),
                    _ => return Ok(fill.finish()),
                }
            }
        })
        .await
    }

    /// A row whose record cannot be read is reported in `unreadable` as `sessions row ID`.
    async fn list_sessions(&self, workspace: Option<&Path>) -> Result<SessionListing, StoreError> {
        let workspace = workspace.map(Path::to_path_buf);
        self.with(move |conn| {
            let mut stmt = conn
                .prepare("SELECT id, record FROM sessions")
                .map_err(db)?;
            let rows = stmt
                .query_map([], |row| {
                    let id = key_text(row.get_ref(0)?);
                    let record = decode_column(&id, row.get_ref(1)?);
                    Ok((id, record))
                })
                .map_err(db)?;
            let mut listing = SessionListing::default();
            for row in rows {
                let (id, record) = row.map_err(db)?;
                let location = || format!("sessions row {id}");
                listing.add(workspace.as_deref(), &id, location, record);
            }
            listing.sort();
            Ok(listing)
        })
        .await
    }

    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.with(move |conn| {
            conn.execute(
                "DELETE FROM sessions WHERE pending = 0 AND lease_until IS NULL AND updated_at < ?1",
                params![i64::try_from(before).unwrap_or(i64::MAX)],
            )
            .map_err(db)
        })
        .await
    }

    /// A row of `workspace_allowances`, replaced when its id is there.
    async fn save_workspace_allowance(
        &self,
        allowance: &crate::allowance::Allowance,
    ) -> Result<(), StoreError> {
        super::check_workspace_allowance(allowance)?;
        let id = allowance.id.clone();
        let workspace = workspace_key(allowance.workspace.as_deref());
        let text = serde_json::to_string(allowance)
            .map_err(|e| StoreError::backend("serialize allowance", e))?;
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO workspace_allowances (id, workspace, allowance) VALUES (?1, ?2, ?3)
                 ON CONFLICT(id) DO UPDATE SET workspace = ?2, allowance = ?3",
                params![id, workspace, text],
            )
            .map(drop)
            .map_err(db)
        })
        .await
    }

    /// A row that cannot be read as an allowance is skipped (an allowance in doubt allows
    /// nothing).
    async fn list_workspace_allowances(
        &self,
        workspace: Option<&Path>,
    ) -> Result<Vec<crate::allowance::Allowance>, StoreError> {
        let workspace = workspace.map(|w| workspace_key(Some(w)));
        self.with(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT allowance FROM workspace_allowances
                     WHERE ?1 IS NULL OR workspace = ?1 ORDER BY rowid",
                )
                .map_err(db)?;
            let rows = stmt
                .query_map(params![workspace], |row| row.get::<_, String>(0))
                .map_err(db)?;
            let mut found = Vec::new();
            for text in rows {
                let text = text.map_err(db)?;
                match serde_json::from_str(&text) {
                    Ok(allowance) => found.push(allowance),
                    Err(e) => tracing::warn!(error = %e, "an allowance row that cannot be read is skipped"),
                }
            }
            Ok(found)
        })
        .await
    }

    async fn revoke_workspace_allowance(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.with(move |conn| {
            conn.execute(
                "DELETE FROM workspace_allowances WHERE id = ?1",
                params![id],
            )
            .map(|n| n > 0)
            .map_err(db)
        })
        .await
    }

    /// The database file and the files SQLite keeps beside it (`-wal`, `-shm`, `-journal`);
    /// none for an in-memory database.
    fn protected_paths(&self) -> Vec<PathBuf> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(file) = conn.path().filter(|p| !p.is_empty()) else {
            return Vec::new();
        };
        ["", "-wal", "-shm", "-journal"]
            .iter()
            .map(|suffix| PathBuf::from(format!("{file}{suffix}")))
            .collect()
    }
}
