//! The PostgreSQL server the tests run against: its URL, a schema of their own per test, and
//! the message that says how to get a server when none answers.
//!
//! `AGENT_CONTROLLER_TEST_POSTGRES` names the server (default
//! `postgres://postgres@127.0.0.1:5432/test`); `AGENT_CONTROLLER_SKIP_POSTGRES=1` skips the
//! Postgres tests explicitly. Without it, a server that does not answer fails them.

use std::path::Path;
use std::sync::OnceLock;

pub const URL_VAR: &str = "AGENT_CONTROLLER_TEST_POSTGRES";
pub const SKIP_VAR: &str = "AGENT_CONTROLLER_SKIP_POSTGRES";
const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Whether the Postgres tests are skipped on purpose (`AGENT_CONTROLLER_SKIP_POSTGRES=1`).
pub fn skipped() -> bool {
    std::env::var(SKIP_VAR).is_ok_and(|v| v == "1")
}

/// The server's URL; panics with how to start one when it does not answer (checked once).
pub fn server_url() -> String {
    static CHECKED: OnceLock<Result<String, String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let url = std::env::var(URL_VAR).unwrap_or_else(|_| DEFAULT_URL.to_owned());
        match exec(&url, "SELECT 1") {
            Ok(()) => Ok(url),
            Err(e) => Err(format!(
                "no PostgreSQL server answers at {url} ({e}).\n\
                 The Postgres tests need one: start it (Debian/Ubuntu: `apt-get install postgresql && \
                 service postgresql start`, with trust authentication for 127.0.0.1 and a database \
                 `test`), or point {URL_VAR} at a server (postgres://USER@HOST:PORT/DB), or set \
                 {SKIP_VAR}=1 to skip these tests explicitly."
            )),
        }
    });
    match checked {
        Ok(url) => url.clone(),
        Err(message) => panic!("{message}"),
    }
}

/// `url` with its `search_path` set to `schema` (through the `options` parameter).
pub fn url_in_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20search_path%3D{schema}")
}

/// Runs `sql` on `url` on a thread of its own (usable from inside and outside a runtime).
pub fn exec(url: &str, sql: &str) -> Result<(), String> {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let driver = tokio::spawn(connection);
            let result = client.batch_execute(&sql).await.map_err(|e| e.to_string());
            drop(client);
            let _ = driver.await;
            result
        })
    })
    .join()
    .map_err(|_| "the SQL thread panicked".to_owned())?
}

/// A schema of the test's own, created now and dropped (with everything in it) on drop.
pub struct TestSchema {
    pub name: String,
    /// The server URL with `search_path` set to this schema.
    pub url: String,
    server: String,
}

impl TestSchema {
    /// A fresh schema; `None` when the Postgres tests are skipped.
    pub fn new() -> Option<Self> {
        if skipped() {
            return None;
        }
        let name = format!("ac_test_{}", unique());
        Some(Self::named(name))
    }

    /// The schema for a test directory: the same name each time for the same directory, created
    /// if missing. Not dropped by this value: see [`drop_schema_of`].
    pub fn for_dir(dir: &Path) -> Self {
        let name = schema_name_of(dir);
        let mut schema = Self::named(name);
        // The owner of the directory drops it.
        schema.server.clear();
        schema
    }

    fn named(name: String) -> Self {
        let server = server_url();
        exec(&server, &format!("CREATE SCHEMA IF NOT EXISTS {name}")).expect("create the schema");
        Self {
            url: url_in_schema(&server, &name),
            name,
            server,
        }
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        if !self.server.is_empty() {
            let _ = exec(
                &self.server,
                &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
            );
        }
    }
}

/// A name part no other test (in this or another process) uses at the same time.
pub fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn schema_name_of(dir: &Path) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(dir.as_os_str().as_encoded_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("ac_test_{hex}")
}

/// Drops the schema [`TestSchema::for_dir`] made for `dir`, if it made one.
pub fn drop_schema_of(dir: &Path) {
    if skipped() {
        return;
    }
    let marker = dir.join(".postgres-schema");
    if marker.exists() {
        let _ = exec(
            &server_url(),
            &format!("DROP SCHEMA IF EXISTS {} CASCADE", schema_name_of(dir)),
        );
    }
}

/// Marks `dir` as having a schema, so [`drop_schema_of`] drops it.
pub fn mark_schema_of(dir: &Path) {
    std::fs::write(dir.join(".postgres-schema"), schema_name_of(dir)).expect("marker");
}
