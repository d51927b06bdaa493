//! The numbered schema migrations of [`super::PostgresStore`], applied once per database schema.
//!
//! Each migration runs in the same transaction as the bookkeeping row that records it, under a
//! transaction-scoped advisory lock, so hosts that open the store at the same moment migrate once
//! and none sees a half-made schema. Add a migration by appending to [`MIGRATIONS`]; never edit
//! one that has shipped.

use crate::store::StoreError;

/// The migrations, in order; the version of `MIGRATIONS[i]` is `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the sessions table and its two partial indexes (see the module docs of PostgresStore).
    "CREATE TABLE agent_controller_sessions (
         id text PRIMARY KEY,
         version bigint NOT NULL,
         schema_version integer NOT NULL,
         updated_at bigint NOT NULL,
         pending json,
         record json NOT NULL
     );
     CREATE INDEX agent_controller_sessions_pending
         ON agent_controller_sessions (updated_at, id) WHERE pending IS NOT NULL;
     CREATE INDEX agent_controller_sessions_idle
         ON agent_controller_sessions (updated_at) WHERE pending IS NULL;",
    // 2: `lease_until`, when the lease of a running run ends (milliseconds since the Unix epoch;
    // NULL unless the run is running), and a partial index on it, so `list_pending` finds the
    // interrupted runs without reading the others. Running runs of older rows count as ended.
    "ALTER TABLE agent_controller_sessions ADD COLUMN lease_until bigint;
     UPDATE agent_controller_sessions SET lease_until = 0
         WHERE record -> 'run' ->> 'state' = 'running';
     CREATE INDEX agent_controller_sessions_running
         ON agent_controller_sessions (lease_until) WHERE lease_until IS NOT NULL;",
    // 3: the workspace allowances (`SessionStore::save_workspace_allowance`), in the order they
    // were first given, found by workspace.
    "CREATE TABLE agent_controller_allowances (
         id text PRIMARY KEY,
         seq bigserial NOT NULL,
         workspace text NOT NULL,
         allowance json NOT NULL
     );
     CREATE INDEX agent_controller_allowances_workspace
         ON agent_controller_allowances (workspace, seq);",
];

/// The schema version this build migrates to.
pub(super) const LATEST: i32 = MIGRATIONS.len() as i32;

/// Creates or migrates the schema the connection's `search_path` names first; returns its name.
/// The outer error is the database's, the inner one a schema this build cannot use.
pub(super) async fn run(
    client: &mut deadpool_postgres::Client,
) -> Result<Result<String, StoreError>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let schema: Option<String> = tx.query_one("SELECT current_schema()", &[]).await?.get(0);
    let Some(schema) = schema else {
        tx.rollback().await?;
        return Ok(Err(StoreError::backend_message(
            "postgres: no schema to create the session tables in: the search_path names no \
             existing schema (create it, or set search_path with the URL's `options`)"
                .to_owned(),
        )));
    };
    // One lock per schema: stores in other schemas of the same database migrate independently.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('agent_controller_migrations.' || $1::text))",
        &[&schema],
    )
    .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS agent_controller_migrations (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let applied: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM agent_controller_migrations",
            &[],
        )
        .await?
        .get(0);
    if applied > LATEST {
        // Rolled back here, not on drop: a dropped transaction's ROLLBACK waits for the runtime.
        tx.rollback().await?;
        return Ok(Err(StoreError::backend_message(format!(
            "postgres: schema `{schema}` is at migration {applied}, newer than this build's \
             {LATEST}: upgrade agent-controller on this host"
        ))));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(applied as usize) {
        tx.batch_execute(sql).await?;
        let version = index as i32 + 1;
        tx.execute(
            "INSERT INTO agent_controller_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Ok(schema))
}
