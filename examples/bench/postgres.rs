//! The PostgreSQL figures (feature `postgres`): decision latency to the decision's save with 1
//! and with 16 concurrent deciders on 16 sessions, decisions per second, a race of 16 deciders on
//! one session, and the first page of `list_pending` with 100,000 pending sessions among
//! 1,000,000 records loaded with `COPY`.
//!
//! The server is `AGENT_CONTROLLER_TEST_POSTGRES` (default
//! `postgres://postgres@127.0.0.1:5432/test`), as for the tests; the bench works in schemas of
//! its own and drops them at the end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_controller::store::postgres::PostgresStore;
use agent_controller::store::{SessionRecord, SessionStore};
use agent_controller::{Decision, Event, SessionOptions};
use futures_util::SinkExt;
use serde_json::{Map, Value, json};

use super::fixture::Fixture;

/// A schema of the bench's own, dropped on drop.
pub(super) struct Schema {
    server: String,
    name: String,
    pub(super) url: String,
}

impl Schema {
    pub(super) fn new(rt: &tokio::runtime::Runtime, tag: &str) -> Self {
        let server = std::env::var("AGENT_CONTROLLER_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let name = format!("ac_bench_{tag}_{}", std::process::id());
        rt.block_on(exec(&server, &format!("CREATE SCHEMA {name}")))
            .unwrap_or_else(|e| panic!("no PostgreSQL server at {server}: {e}"));
        let sep = if server.contains('?') { '&' } else { '?' };
        let url = format!("{server}{sep}options=-c%20search_path%3D{name}");
        Self { server, name, url }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        let server = self.server.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(exec(&server, &sql))
        })
        .join();
    }
}

async fn client(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn exec(url: &str, sql: &str) -> Result<(), tokio_postgres::Error> {
    client(url).await?.batch_execute(sql).await
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(rank).copied().unwrap_or(f64::NAN)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Sessions suspended in `plan` and dropped, as a host that detached leaves them.
async fn suspended_ids(fixture: &Fixture, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let (session, _, _) = fixture.suspended().await;
        ids.push(session.id().to_owned());
    }
    ids
}

/// One decider: restores the session (as a host that did not suspend it) and approves; returns
/// milliseconds from `resume` until `mode_changed`, which is emitted once the decision is saved.
async fn decide(fixture: &Fixture, id: &str) -> f64 {
    let mark = Arc::new(Mutex::new(None));
    let sink = mark.clone();
    let options = SessionOptions::new().on_event(move |event: &Event| {
        if matches!(event, Event::ModeChanged { .. }) {
            *sink.lock().expect("mark") = Some(Instant::now());
        }
    });
    let mut session = fixture
        .controller
        .restore_session(id, options)
        .await
        .expect("restore");
    let pending = session.pending_plan().cloned().expect("pending");
    let start = Instant::now();
    session
        .resume(
            pending.run_id(),
            pending.tool_call_id(),
            Decision::approve(),
        )
        .await
        .expect("approve");
    let at = mark.lock().expect("mark").expect("mode_changed");
    ms(at - start)
}

/// `deciders` concurrent deciders, each deciding `per_decider` sessions of its own one after
/// another: (median ms, p99 ms, decisions per second).
fn decisions(
    rt: &tokio::runtime::Runtime,
    url: &str,
    deciders: usize,
    per_decider: usize,
) -> (f64, f64, f64) {
    let store: Arc<dyn SessionStore> =
        Arc::new(rt.block_on(PostgresStore::connect(url)).expect("connect"));
    let fixture = Arc::new(Fixture::with_store(store));
    let ids = rt.block_on(suspended_ids(&fixture, deciders * (per_decider + 1)));
    let chunks: Vec<Vec<String>> = ids
        .chunks(per_decider + 1)
        .map(<[String]>::to_vec)
        .collect();
    // Warm-up: every decider decides one session first (connections, prepared statements).
    let wall = Instant::now();
    let latencies: Vec<f64> = rt.block_on(async {
        let tasks: Vec<_> = chunks
            .into_iter()
            .map(|ids| {
                let fixture = fixture.clone();
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for (i, id) in ids.iter().enumerate() {
                        let latency = decide(&fixture, id).await;
                        if i > 0 {
                            out.push(latency);
                        }
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("decider"));
        }
        all
    });
    let seconds = wall.elapsed().as_secs_f64();
    let mut latencies = latencies;
    let per_second = (deciders * (per_decider + 1)) as f64 / seconds;
    let median = percentile(&mut latencies, 0.5);
    let p99 = percentile(&mut latencies, 0.99);
    (median, p99, per_second)
}

/// `rounds` races of 16 deciders (each restored from the store) on one pending plan: the number
/// of winners per round and the median ms until all 16 had their answer.
fn race(rt: &tokio::runtime::Runtime, url: &str, rounds: usize) -> (Vec<usize>, f64) {
    let store: Arc<dyn SessionStore> =
        Arc::new(rt.block_on(PostgresStore::connect(url)).expect("connect"));
    let fixture = Arc::new(Fixture::with_store(store));
    let mut winners = Vec::new();
    let mut times = Vec::new();
    for _ in 0..rounds {
        let id = rt.block_on(suspended_ids(&fixture, 1)).remove(0);
        let (won, elapsed) = rt.block_on(async {
            let mut sessions = Vec::new();
            for _ in 0..16 {
                sessions.push(
                    fixture
                        .controller
                        .restore_session(&id, SessionOptions::new())
                        .await
                        .expect("restore"),
                );
            }
            let start = Instant::now();
            let tasks: Vec<_> = sessions
                .into_iter()
                .map(|mut session| {
                    tokio::spawn(async move {
                        let pending = session.pending_plan().cloned().expect("pending");
                        session
                            .resume(
                                pending.run_id(),
                                pending.tool_call_id(),
                                Decision::approve(),
                            )
                            .await
                            .is_ok()
                    })
                })
                .collect();
            let mut won = 0;
            for task in tasks {
                won += usize::from(task.await.expect("decider"));
            }
            (won, start.elapsed())
        });
        winners.push(won);
        times.push(ms(elapsed));
    }
    let median = percentile(&mut times, 0.5);
    (winners, median)
}

/// Loads `total` records (every `total / pending`-th pending) with COPY, then times the first
/// page of 100 of `list_pending` and a page from the middle: (first median ms, first p99 ms,
/// middle median ms, load seconds, table MB, the plan).
fn list_pending_page(
    rt: &tokio::runtime::Runtime,
    url: &str,
    total: usize,
    pending: usize,
) -> (f64, f64, f64, f64, f64, String) {
    let store = rt.block_on(PostgresStore::connect(url)).expect("connect");
    // Two real records as templates: one suspended session, one decided and completed.
    let fixture = Fixture::with_store(Arc::new(store.clone()));
    let ids = rt.block_on(suspended_ids(&fixture, 2));
    rt.block_on(async {
        let mut session = fixture
            .controller
            .restore_session(&ids[1], SessionOptions::new())
            .await
            .expect("restore");
        let pending = session.pending_plan().cloned().expect("pending");
        session
            .resume(
                pending.run_id(),
                pending.tool_call_id(),
                Decision::approve(),
            )
            .await
            .expect("approve");
    });
    let waiting = rt
        .block_on(store.load(&ids[0]))
        .expect("load")
        .expect("some");
    let done = rt
        .block_on(store.load(&ids[1]))
        .expect("load")
        .expect("some");
    rt.block_on(store.delete(&ids[0])).expect("delete");
    rt.block_on(store.delete(&ids[1])).expect("delete");

    let every = total / pending;
    let started = Instant::now();
    rt.block_on(async {
        let client = client(url).await.expect("connect");
        let sink = client
            .copy_in(
                "COPY agent_controller_sessions (id, version, schema_version, updated_at, pending, record) \
                 FROM STDIN (FORMAT csv)",
            )
            .await
            .expect("copy");
        let mut sink = std::pin::pin!(sink);
        let mut chunk = String::with_capacity(4 << 20);
        for i in 0..total {
            let template: &SessionRecord = if i % every == 0 { &waiting } else { &done };
            let mut record = template.clone();
            record.session_id = format!("s{i:07}");
            // Saved over about 11 days, one a second.
            record.updated_at = 1_700_000_000 + i as u64;
            let summary = record
                .pending_summary()
                .map(|s| csv(&serde_json::to_string(&s).expect("json")))
                .unwrap_or_default();
            let text = serde_json::to_string(&record).expect("json");
            chunk.push_str(&format!(
                "{},{},{},{},{summary},{}\n",
                record.session_id,
                record.version,
                record.schema_version,
                record.updated_at,
                csv(&text)
            ));
            if chunk.len() > (4 << 20) - 8192 {
                sink.send(bytes::Bytes::from(std::mem::take(&mut chunk)))
                    .await
                    .expect("copy data");
            }
        }
        sink.send(bytes::Bytes::from(chunk)).await.expect("copy data");
        sink.as_mut().finish().await.expect("copy done");
        client
            .batch_execute("VACUUM ANALYZE agent_controller_sessions")
            .await
            .expect("analyze");
    });
    let load_seconds = started.elapsed().as_secs_f64();
    let (size, plan) = rt.block_on(async {
        let client = client(url).await.expect("connect");
        let size: i64 = client
            .query_one(
                "SELECT pg_total_relation_size('agent_controller_sessions')",
                &[],
            )
            .await
            .expect("size")
            .get(0);
        let plan: Vec<String> = client
            .query(
                "EXPLAIN SELECT id, pending::text FROM agent_controller_sessions \
                 WHERE pending IS NOT NULL ORDER BY updated_at, id LIMIT 100",
                &[],
            )
            .await
            .expect("explain")
            .iter()
            .map(|row| row.get(0))
            .collect();
        (size, plan.join("\n"))
    });
    let (mut first, mut middle) = (Vec::new(), Vec::new());
    rt.block_on(async {
        let _ = store.pending_page(None, 100).await.expect("warm");
        let middle_of = store
            .pending_page(None, pending / 2)
            .await
            .expect("page")
            .pop()
            .expect("a summary");
        for _ in 0..101 {
            let start = Instant::now();
            let page = store.pending_page(None, 100).await.expect("page");
            first.push(ms(start.elapsed()));
            assert_eq!(page.len(), 100);
            let start = Instant::now();
            let page = store
                .pending_page(Some(&middle_of), 100)
                .await
                .expect("page");
            middle.push(ms(start.elapsed()));
            assert_eq!(page.len(), 100);
        }
    });
    (
        percentile(&mut first, 0.5),
        percentile(&mut first, 0.99),
        percentile(&mut middle, 0.5),
        load_seconds,
        size as f64 / 1e6,
        plan,
    )
}

/// A CSV field: quoted, inner quotes doubled.
fn csv(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Every PostgreSQL figure, keyed `pg_*`. `quick` uses 10 times fewer records and decisions.
pub(crate) fn figures(quick: bool) -> Map<String, Value> {
    let rt = runtime();
    let mut out = Map::new();
    out.insert("pg_load_average_before".into(), json!(load_average()));
    let scale = if quick { 10 } else { 1 };

    let schema = Schema::new(&rt, "decide");
    let (median, p99, per_second) = decisions(&rt, &schema.url, 1, 200 / scale);
    out.insert("pg_decision_1_median_ms".into(), json!(round(median, 2)));
    out.insert("pg_decision_1_p99_ms".into(), json!(round(p99, 2)));
    out.insert("pg_decisions_per_sec_1".into(), json!(per_second.round()));
    let (median, p99, per_second) = decisions(&rt, &schema.url, 16, 40 / scale);
    out.insert("pg_decision_16_median_ms".into(), json!(round(median, 2)));
    out.insert("pg_decision_16_p99_ms".into(), json!(round(p99, 2)));
    out.insert("pg_decisions_per_sec_16".into(), json!(per_second.round()));
    let (winners, race_ms) = race(&rt, &schema.url, 20 / scale.min(4));
    out.insert(
        "pg_race_16_exactly_one_winner".into(),
        json!(winners.iter().all(|&w| w == 1)),
    );
    out.insert("pg_race_16_rounds".into(), json!(winners.len()));
    out.insert(
        "pg_race_16_all_answered_ms".into(),
        json!(round(race_ms, 2)),
    );
    drop(schema);

    let schema = Schema::new(&rt, "list");
    let (first, first_p99, middle, load_s, size_mb, plan) =
        list_pending_page(&rt, &schema.url, 1_000_000 / scale, 100_000 / scale);
    out.insert("pg_list_records".into(), json!(1_000_000 / scale));
    out.insert("pg_list_pending".into(), json!(100_000 / scale));
    out.insert(
        "pg_list_first_page_median_ms".into(),
        json!(round(first, 3)),
    );
    out.insert(
        "pg_list_first_page_p99_ms".into(),
        json!(round(first_p99, 3)),
    );
    out.insert(
        "pg_list_middle_page_median_ms".into(),
        json!(round(middle, 3)),
    );
    out.insert("pg_copy_load_seconds".into(), json!(round(load_s, 1)));
    out.insert("pg_table_mb".into(), json!(round(size_mb, 0)));
    out.insert("pg_list_plan".into(), json!(plan));
    out.insert("pg_load_average_after".into(), json!(load_average()));
    out
}
