//! [`PostgresStore`]: sessions in PostgreSQL, shared by several hosts (feature `postgres`).
//!
//! One row per session in `agent_controller_sessions`, in the schema the connection's
//! `search_path` names first (`public` unless the URL's `options` say otherwise):
//!
//! | column | what |
//! |---|---|
//! | `id` | the session id (primary key) |
//! | `version` | the compare-and-swap version |
//! | `schema_version` | the record's [`SCHEMA_VERSION`](crate::store::SCHEMA_VERSION) |
//! | `updated_at` | seconds since the Unix epoch |
//! | `pending` | while a decision waits, its [`PendingSummary`] as JSON (a list of them when several tool calls wait), else `NULL` |
//! | `lease_until` | while the run is running, when its lease ends (milliseconds since the Unix epoch), else `NULL` |
//! | `record` | the [`SessionRecord`] as JSON (`json`, kept verbatim: `jsonb` refuses `\u0000`, which a model may send) |
//!
//! - A save is a compare-and-swap in one statement (`UPDATE ... WHERE id = $1 AND version = $2`,
//!   or `INSERT ... ON CONFLICT DO NOTHING` for a new session) inside `BEGIN ... COMMIT`; the same
//!   statement sends the `NOTIFY` that [`PostgresStore::changes`] hears, so a host hears about a
//!   save exactly when it is committed. A connection lost before `COMMIT` is a
//!   [`StoreError::Backend`] and nothing was saved; lost during `COMMIT` it is
//!   [`StoreError::OutcomeUnknown`]: reload the session to see whether the save happened.
//! - `list_pending` reads the partial index `agent_controller_sessions_pending` on
//!   `(updated_at, id) WHERE pending IS NOT NULL`, so sessions with nothing pending are never
//!   read; `expire` deletes through `agent_controller_sessions_idle` on `updated_at WHERE pending
//!   IS NULL`. `tests/it/postgres.rs` checks the plans with `EXPLAIN`:
//!
//!   ```text
//!   Index Scan using agent_controller_sessions_pending on agent_controller_sessions
//!     Index Cond: (ROW(updated_at, id) > ROW($1, $2))
//!   ```
//! - The schema is created or migrated when the store is first used: numbered migrations in
//!   `agent_controller_migrations`, applied in one transaction under an advisory lock, so hosts
//!   starting together migrate once; a database migrated by a newer version is refused.
//!
//! Why `tokio-postgres` with `deadpool-postgres` rather than `sqlx`: a small dependency tree
//! (no macros, no query checking against a database at build time), `LISTEN` on a plain
//! connection (`Connection::poll_message`), and errors that tell a server's answer from a lost
//! connection, which is what separates "nothing saved" from "outcome unknown". TLS goes through
//! rustls (`tokio-postgres-rustls`), never OpenSSL.

pub mod config;
mod listen;
mod migrations;

use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Manager, Pool, Runtime};
use tokio::sync::OnceCell;

pub use self::config::{PostgresConfig, RootCerts, SslMode, is_postgres_url};
pub use self::listen::{ChangeStream, SessionChange};

use super::pending_page::PageFill;
use super::{
    ChangeNotices, PendingCursor, PendingListing, PendingPage, PendingSummary, SessionListing,
    SessionRecord, SessionStore, StoreError, UnreadableRecord, check_next_version,
    check_session_id, decode,
};

/// The sessions table.
const TABLE: &str = "agent_controller_sessions";
/// The table of the workspace allowances (migration 3).
const ALLOWANCES: &str = "agent_controller_allowances";

/// Sessions in a PostgreSQL database, shared by every host that opens the same URL.
///
/// It runs on tokio with IO enabled (`enable_io`, or `enable_all`). Cloning is cheap (the pool is
/// shared). The store connects lazily: [`PostgresStore::open`]
/// does no I/O, the first call connects and migrates; [`PostgresStore::connect`] does both at
/// once, so an unreachable server is reported there.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use agent_controller::store::{PostgresStore, SessionStore, now_millis};
///
/// # async fn demo() -> Result<(), agent_controller::store::StoreError> {
/// let store = PostgresStore::connect("postgres://app@db.internal:5432/agents?sslmode=verify-full").await?;
/// for plan in store.list_pending(now_millis()).await?.pending {
///     println!("{} {}", plan.session_id, plan.title);
/// }
/// let shared: Arc<dyn SessionStore> = Arc::new(store);
/// # let _ = shared; Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    config: Arc<PostgresConfig>,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    ready: Arc<OnceCell<Ready>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.config.redacted())
            .finish_non_exhaustive()
    }
}

/// What the first use learns: the schema is migrated, and the channel its changes go to.
#[derive(Debug)]
struct Ready {
    channel: String,
}

impl PostgresStore {
    /// Opens a store on `config` without connecting yet (the first call connects and migrates).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the TLS settings cannot be used (unreadable root
    /// certificates for `verify-ca`/`verify-full`).
    pub fn open(config: PostgresConfig) -> Result<Self, StoreError> {
        let tls = config.tls()?;
        // No default connect timeout: it would need tokio's timers, which a host's runtime may
        // not enable; `connect_timeout=SECONDS` in the URL sets one (then enable them).
        let manager = Manager::new(config.pg.clone(), tls.clone());
        let pool = Pool::builder(manager)
            .max_size(config.pool_size())
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::backend("postgres pool", e))?;
        Ok(Self {
            pool,
            config: Arc::new(config),
            tls,
            ready: Arc::new(OnceCell::new()),
        })
    }

    /// Connects to `url` (see [`PostgresConfig::from_url`]) and creates or migrates the schema.
    ///
    /// # Errors
    /// [`StoreError::Backend`] for a malformed URL, an unreachable server, failed
    /// authentication, or a schema migrated by a newer version of this crate.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let store = Self::open(PostgresConfig::from_url(url)?)?;
        store.ready().await?;
        Ok(store)
    }

    /// The connection settings (the URL without its password is [`PostgresConfig::redacted`]).
    pub fn config(&self) -> &PostgresConfig {
        &self.config
    }

    /// One page of pending decisions in `list_pending`'s order (oldest first): those of at most
    /// `limit` sessions (every tool call waiting in a session is its own summary), after `after`
    /// (the last summary of the previous page; `None` for the first page).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the database fails, [`StoreError::Corrupt`] for a summary that
    /// cannot be read.
    pub async fn pending_page(
        &self,
        after: Option<&PendingSummary>,
        limit: usize,
    ) -> Result<Vec<PendingSummary>, StoreError> {
        let client = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = match after {
            None => {
                let stmt = self
                    .prepare(
                        &client,
                        &format!(
                            "SELECT id, pending::text FROM {TABLE} WHERE pending IS NOT NULL \
                             ORDER BY updated_at, id LIMIT $1"
                        ),
                    )
                    .await?;
                client.query(&stmt, &[&limit]).await
            }
            Some(last) => {
                let stmt = self.prepare(&client, &Self::page_after_sql()).await?;
                client
                    .query(&stmt, &[&to_i64(last.updated_at), &last.session_id, &limit])
                    .await
            }
        }
        .map_err(|e| self.db(e))?;
        let mut page = Vec::with_capacity(rows.len());
        for row in &rows {
            page.extend(summaries(row.get(0), row.get(1))?);
        }
        Ok(page)
    }

    /// The statement of a page after a given summary (public for the `EXPLAIN` test).
    #[doc(hidden)]
    pub fn page_after_sql() -> String {
        format!(
            "SELECT id, pending::text FROM {TABLE} WHERE pending IS NOT NULL \
             AND (updated_at, id) > ($1, $2) ORDER BY updated_at, id LIMIT $3"
        )
    }

    /// The pending decisions of one session: its plan, or each tool call that waits for
    /// approval; empty when nothing waits.
    ///
    /// # Errors
    /// As [`PostgresStore::pending_page`].
    pub async fn pending_of(&self, session_id: &str) -> Result<Vec<PendingSummary>, StoreError> {
        let client = self.client().await?;
        let stmt = self
            .prepare(
                &client,
                &format!(
                    "SELECT id, pending::text FROM {TABLE} WHERE id = $1 AND pending IS NOT NULL"
                ),
            )
            .await?;
        let row = client
            .query_opt(&stmt, &[&session_id])
            .await
            .map_err(|e| self.db(e))?;
        match row {
            Some(row) => summaries(row.get(0), row.get(1)),
            None => Ok(Vec::new()),
        }
    }

    /// A pooled connection to a migrated database.
    async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        self.ready().await?;
        self.pool.get().await.map_err(|e| self.unreachable(e))
    }

    async fn ready(&self) -> Result<&Ready, StoreError> {
        self.ready
            .get_or_try_init(|| async {
                let mut client = self.pool.get().await.map_err(|e| self.unreachable(e))?;
                let schema = migrations::run(&mut client)
                    .await
                    .map_err(|e| self.db(e))??;
                Ok(Ready {
                    channel: listen::channel_for(&schema),
                })
            })
            .await
    }

    fn unreachable(&self, err: deadpool_postgres::PoolError) -> StoreError {
        let what = format!(
            "cannot connect to {}{}",
            self.config.redacted(),
            causes(&err)
        );
        StoreError::backend(what, err)
    }

    /// `sql` prepared on `client` (and cached there).
    async fn prepare(
        &self,
        client: &deadpool_postgres::Client,
        sql: &str,
    ) -> Result<tokio_postgres::Statement, StoreError> {
        client.prepare_cached(sql).await.map_err(|e| self.db(e))
    }

    fn db(&self, err: tokio_postgres::Error) -> StoreError {
        let what = format!("postgres ({}){}", self.config.redacted(), causes(&err));
        StoreError::backend(what, err)
    }

    /// Adds the interrupted runs to `listing`, read through the partial index on `lease_until`
    /// (rows whose lease has ended); a row that cannot be read goes to `unreadable`.
    async fn list_interrupted(
        &self,
        client: &deadpool_postgres::Client,
        now: u64,
        listing: &mut PendingListing,
    ) -> Result<(), StoreError> {
        let stmt = self
            .prepare(
                client,
                &format!(
                    "SELECT id, record::text FROM {TABLE} \
                     WHERE lease_until IS NOT NULL AND lease_until <= $1"
                ),
            )
            .await?;
        let rows = client
            .query(&stmt, &[&to_i64(now)])
            .await
            .map_err(|e| self.db(e))?;
        for row in &rows {
            let id: &str = row.get(0);
            match decode(id, row.get::<_, &str>(1).as_bytes()) {
                Ok(record) => listing.interrupted.extend(record.interrupted_run(now)),
                // A row both columns name (never written so) is reported once.
                Err(_) if listing.unreadable.iter().any(|u| u.session_id == id) => {}
                Err(error) => listing.unreadable.push(UnreadableRecord::new(
                    id,
                    format!("{TABLE} row {id}"),
                    &error,
                )),
            }
        }
        Ok(())
    }

    /// The compare-and-swap: one statement that writes the row if the version matches and
    /// notifies listeners, returning one row when it wrote. Runs inside the caller's transaction.
    async fn cas(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        record: &SessionRecord,
        expected: Option<u64>,
        text: &str,
        pending: Option<&str>,
        channel: &str,
    ) -> Result<bool, tokio_postgres::Error> {
        let notify = "SELECT pg_notify($7, json_build_object('sessionId', $1::text, \
                      'version', $2::bigint, 'pending', $5::json IS NOT NULL)::text) FROM saved";
        let id = &record.session_id;
        let version = to_i64(record.version);
        let schema_version = i32::try_from(record.schema_version).unwrap_or(i32::MAX);
        let updated_at = to_i64(record.updated_at);
        let lease_until = record.lease_until().map(to_i64);
        let previous = expected.map(to_i64);
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
            id,
            &version,
            &schema_version,
            &updated_at,
            &pending,
            &text,
            &channel,
            &lease_until,
        ];
        let sql = match &previous {
            None => format!(
                "WITH saved AS (INSERT INTO {TABLE} \
                 (id, version, schema_version, updated_at, pending, record, lease_until) \
                 VALUES ($1, $2, $3, $4, $5::text::json, $6::text::json, $8) \
                 ON CONFLICT (id) DO NOTHING RETURNING id) {notify}"
            ),
            Some(previous) => {
                params.push(previous);
                format!(
                    "WITH saved AS (UPDATE {TABLE} SET version = $2, schema_version = $3, \
                     updated_at = $4, pending = $5::text::json, record = $6::text::json, \
                     lease_until = $8 WHERE id = $1 AND version = $9 RETURNING id) {notify}"
                )
            }
        };
        let stmt = tx.prepare_cached(&sql).await?;
        let rows = tx.query(&stmt, &params).await?;
        Ok(rows.len() == 1)
    }
}

/// The causes under `err` (its sources), as `: cause (: deeper cause)`, for a message that says
/// more than "error performing TLS handshake". Sources never hold the password.
fn causes(err: &dyn std::error::Error) -> String {
    let mut out = String::new();
    let mut source = err.source();
    while let Some(cause) = source {
        out.push_str(&format!(" (because: {cause})"));
        source = cause.source();
    }
    out
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Decodes the `pending` column of the row keyed `session_id`: one summary, or a list of them
/// (several tool calls waiting). A summary naming another session is corrupt, like one that is
/// not a summary at all.
fn summaries(session_id: &str, text: &str) -> Result<Vec<PendingSummary>, StoreError> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Column {
        One(Box<PendingSummary>),
        Many(Vec<PendingSummary>),
    }
    let corrupt = |message: String| StoreError::Corrupt {
        session_id: session_id.to_owned(),
        message,
    };
    let summaries = match serde_json::from_str(text) {
        Ok(Column::One(one)) => vec![*one],
        Ok(Column::Many(many)) => many,
        Err(e) => return Err(corrupt(format!("pending summary: {e}"))),
    };
    if let Some(other) = summaries.iter().find(|s| s.session_id != session_id) {
        return Err(corrupt(format!(
            "the pending summary is stored as session `{session_id}` but names session `{}`",
            other.session_id
        )));
    }
    Ok(summaries)
}

#[async_trait]
impl SessionStore for PostgresStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let client = self.client().await?;
        let stmt = self
            .prepare(
                &client,
                &format!("SELECT record::text FROM {TABLE} WHERE id = $1"),
            )
            .await?;
        let row = client
            .query_opt(&stmt, &[&session_id])
            .await
            .map_err(|e| self.db(e))?;
        row.map(|row| decode(session_id, row.get::<_, &str>(0).as_bytes()))
            .transpose()
    }

    /// Every record in one query (`WHERE id = ANY($1)`), each decoded as
    /// [`SessionStore::load`] decodes it.
    async fn load_many(
        &self,
        session_ids: &[&str],
    ) -> Result<Vec<crate::store::Loaded>, StoreError> {
        if session_ids.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let stmt = self
            .prepare(
                &client,
                &format!("SELECT id, record::text FROM {TABLE} WHERE id = ANY($1)"),
            )
            .await?;
        let rows = client
            .query(&stmt, &[&session_ids])
            .await
            .map_err(|e| self.db(e))?;
        // The stored records by id, decoded for each id asked (an id asked twice, twice).
        let found: std::collections::HashMap<String, String> = rows
            .iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, String>(1)))
            .collect();
        Ok(session_ids
            .iter()
            .map(|&id| {
                found
                    .get(id)
                    .map(|text| decode(id, text.as_bytes()).map(Arc::new))
                    .transpose()
            })
            .collect())
    }

    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        check_session_id(&record.session_id)?;
        check_next_version(record, expected)?;
        let text = serde_json::to_string(record)
            .map_err(|e| StoreError::backend("cannot encode the record", e))?;
        // One summary as an object (as before tool-call approvals), several as a list.
        let pending = match record.pending_summaries().as_slice() {
            [] => Ok(None),
            [one] => serde_json::to_string(one).map(Some),
            many => serde_json::to_string(many).map(Some),
        }
        .map_err(|e| StoreError::backend("cannot encode the pending summary", e))?;
        let mut client = self.client().await?;
        let channel = &self.ready().await?.channel;
        let lost_before_commit = |e: tokio_postgres::Error| {
            StoreError::backend(
                format!(
                    "postgres ({}): saving session `{}` failed before COMMIT, nothing was saved",
                    self.config.redacted(),
                    record.session_id
                ),
                e,
            )
        };
        let tx = client.transaction().await.map_err(lost_before_commit)?;
        let wrote = self
            .cas(&tx, record, expected, &text, pending.as_deref(), channel)
            .await
            .map_err(lost_before_commit)?;
        if !wrote {
            let stmt = tx
                .prepare_cached(&format!("SELECT version FROM {TABLE} WHERE id = $1"))
                .await
                .map_err(lost_before_commit)?;
            let found = tx
                .query_opt(&stmt, &[&record.session_id])
                .await
                .map_err(lost_before_commit)?
                .map(|row| row.get::<_, i64>(0).cast_unsigned());
            tx.rollback().await.map_err(lost_before_commit)?;
            return Err(StoreError::Conflict {
                session_id: record.session_id.clone(),
                expected,
                found,
            });
        }
        tx.commit().await.map_err(|e| {
            if e.as_db_error().is_some() {
                // The server answered: the transaction was rolled back.
                lost_before_commit(e)
            } else {
                StoreError::OutcomeUnknown {
                    session_id: record.session_id.clone(),
                    version: record.version,
                    message: format!("postgres ({}): {e}", self.config.redacted()),
                }
            }
        })
    }

    async fn delete(&self, session_id: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let channel = &self.ready().await?.channel;
        let stmt = self
            .prepare(
                &client,
                &format!(
                    "WITH gone AS (DELETE FROM {TABLE} WHERE id = $1 RETURNING id) \
                     SELECT pg_notify($2, json_build_object('sessionId', $1::text)::text) FROM gone"
                ),
            )
            .await?;
        let rows = client
            .query(&stmt, &[&session_id, channel])
            .await
            .map_err(|e| self.db(e))?;
        Ok(!rows.is_empty())
    }

    /// A row whose `pending` summary cannot be read is reported in `unreadable` as
    /// `agent_controller_sessions row ID`.
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        let client = self.client().await?;
        let stmt = self
            .prepare(
                &client,
                &format!(
                    "SELECT id, pending::text FROM {TABLE} WHERE pending IS NOT NULL \
                     ORDER BY updated_at, id"
                ),
            )
            .await?;
        let rows = client.query(&stmt, &[]).await.map_err(|e| self.db(e))?;
        let mut listing = PendingListing::default();
        for row in &rows {
            let id: &str = row.get(0);
            match summaries(id, row.get(1)) {
                Ok(summaries) => listing.pending.extend(summaries),
                Err(error) => listing.unreadable.push(UnreadableRecord::new(
                    id,
                    format!("{TABLE} row {id}"),
                    &error,
                )),
            }
        }
        self.list_interrupted(&client, now_ms, &mut listing).await?;
        listing.sort();
        Ok(listing)
    }

    /// Reads the page through the partial index `agent_controller_sessions_pending`: `WHERE
    /// (updated_at, id) >= (cursor) ORDER BY updated_at, id LIMIT` a few more sessions than the
    /// page holds (again from the last one read while a page is not full), and only the
    /// `pending` column. Sessions are ordered by id in the database's collation. A row whose
    /// `pending` summary cannot be read is reported on the page where it stands.
    async fn list_pending_page(
        &self,
        after: Option<&PendingCursor>,
        limit: usize,
    ) -> Result<PendingPage, StoreError> {
        let client = self.client().await?;
        let mut fill = PageFill::new(after, limit);
        let batch = fill.limit().saturating_add(2);
        let batch_sql = i64::try_from(batch).unwrap_or(i64::MAX);
        let first = self
            .prepare(
                &client,
                &format!(
                    "SELECT id, updated_at, pending::text FROM {TABLE} WHERE pending IS NOT NULL \
                     ORDER BY updated_at, id LIMIT $1"
                ),
            )
            .await?;
        let from_sql = |op: &str| {
            format!(
                "SELECT id, updated_at, pending::text FROM {TABLE} WHERE pending IS NOT NULL \
                 AND (updated_at, id) {op} ($1, $2) ORDER BY updated_at, id LIMIT $3"
            )
        };
        let including = self.prepare(&client, &from_sql(">=")).await?;
        let past = self.prepare(&client, &from_sql(">")).await?;
        // Where the next read starts: the cursor's session included, then past the last row.
        let mut from: Option<(i64, String, bool)> =
            after.map(|c| (to_i64(c.updated_at()), c.session_id().to_owned(), true));
        loop {
            let rows = match &from {
                None => client.query(&first, &[&batch_sql]).await,
                Some((at, id, true)) => client.query(&including, &[at, id, &batch_sql]).await,
                Some((at, id, false)) => client.query(&past, &[at, id, &batch_sql]).await,
            }
            .map_err(|e| self.db(e))?;
            for row in &rows {
                let id: &str = row.get(0);
                let updated_at: i64 = row.get(1);
                match summaries(id, row.get(2)) {
                    Ok(summaries) => {
                        if fill.session(updated_at.max(0).cast_unsigned(), id, summaries) {
                            return Ok(fill.finish());
                        }
                    }
                    Err(error) => fill.unreadable([UnreadableRecord::new(
                        id,
                        format!("{TABLE} row {id}"),
                        &error,
                    )]),
                }
            }
            match rows.last() {
                Some(last) if rows.len() >= batch => {
                    from = Some((last.get(1), last.get::<_, &str>(0).to_owned(), false));
                }
                _ => return Ok(fill.finish()),
            }
        }
    }

    /// Every committed save and delete, by `LISTEN` on a connection of its own
    /// ([`PostgresStore::changes`]).
    async fn change_notices(&self) -> Result<Option<ChangeNotices>, StoreError> {
        use futures_util::StreamExt;
        let changes = self.changes().await?;
        Ok(Some(Box::pin(
            changes.map(|change| change.map(|c| c.session_id)),
        )))
    }

    /// A row whose record cannot be read is reported in `unreadable` as
    /// `agent_controller_sessions row ID`.
    async fn list_sessions(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<SessionListing, StoreError> {
        let client = self.client().await?;
        let stmt = self
            .prepare(&client, &format!("SELECT id, record::text FROM {TABLE}"))
            .await?;
        let rows = client.query(&stmt, &[]).await.map_err(|e| self.db(e))?;
        let mut listing = SessionListing::default();
        for row in &rows {
            let id: &str = row.get(0);
            let record = decode(id, row.get::<_, &str>(1).as_bytes());
            listing.add(workspace, id, || format!("{TABLE} row {id}"), record);
        }
        listing.sort();
        Ok(listing)
    }

    async fn save_workspace_allowance(
        &self,
        allowance: &crate::allowance::Allowance,
    ) -> Result<(), StoreError> {
        super::check_workspace_allowance(allowance)?;
        let workspace = allowance
            .workspace
            .as_deref()
            .map(|w| w.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = serde_json::to_string(allowance)
            .map_err(|e| StoreError::backend("serialize allowance", e))?;
        let client = self.client().await?;
        let sql = format!(
            "INSERT INTO {ALLOWANCES} (id, workspace, allowance) VALUES ($1, $2, $3::text::json) \
             ON CONFLICT (id) DO UPDATE SET workspace = $2, allowance = $3::text::json"
        );
        let stmt = self.prepare(&client, &sql).await?;
        client
            .execute(&stmt, &[&allowance.id, &workspace, &text])
            .await
            .map_err(|e| self.db(e))?;
        Ok(())
    }

    /// A row that cannot be read as an allowance is skipped (an allowance in doubt allows
    /// nothing).
    async fn list_workspace_allowances(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<Vec<crate::allowance::Allowance>, StoreError> {
        let workspace = workspace.map(|w| w.to_string_lossy().into_owned());
        let client = self.client().await?;
        let sql = format!(
            "SELECT allowance::text FROM {ALLOWANCES} \
             WHERE $1::text IS NULL OR workspace = $1 ORDER BY seq"
        );
        let stmt = self.prepare(&client, &sql).await?;
        let rows = client
            .query(&stmt, &[&workspace])
            .await
            .map_err(|e| self.db(e))?;
        let mut found = Vec::new();
        for row in &rows {
            let text: &str = row.get(0);
            match serde_json::from_str(text) {
                Ok(allowance) => found.push(allowance),
                Err(e) => {
                    tracing::warn!(error = %e, "an allowance row that cannot be read is skipped");
                }
            }
        }
        Ok(found)
    }

    async fn revoke_workspace_allowance(&self, id: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let sql = format!("DELETE FROM {ALLOWANCES} WHERE id = $1");
        let stmt = self.prepare(&client, &sql).await?;
        let n = client
            .execute(&stmt, &[&id])
            .await
            .map_err(|e| self.db(e))?;
        Ok(n > 0)
    }

    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let stmt = self.prepare(&client, &format!(
                "DELETE FROM {TABLE} WHERE pending IS NULL AND lease_until IS NULL AND updated_at < $1"
            )).await?;
        let n = client
            .execute(&stmt, &[&to_i64(before)])
            .await
            .map_err(|e| self.db(e))?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
