//! Deciding a pending plan with a durable store (fsync on): the JSON-file store and, with
//! `--features sqlite`, SQLite. Each sample times only the decisions; the suspended sessions
//! are made before the clock starts. `cargo bench --features sqlite --bench store_decision`
//!
//! Two figures per store: `decision` stops when the decision is saved and `mode_changed` is
//! delivered (one save); `resume_to_complete` also runs the build-mode reply and saves the end
//! of the run (two saves). fsyncs are counted by `examples/bench.rs`.

mod fixture;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_controller::Event;
use agent_controller::store::{FileStore, SessionStore};
use criterion::{Criterion, criterion_group, criterion_main};
use fixture::Fixture;

fn bench_store(c: &mut Criterion, name: &str, store: Arc<dyn SessionStore>) {
    let fixture = Fixture::with_store(store);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group(format!("store_decision/{name}"));
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("decision", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (mut session, run_id, call_id) = rt.block_on(fixture.suspended());
                let decided = Arc::new(Mutex::new(None));
                let mark = decided.clone();
                session
                    .subscribe(move |event| {
                        if matches!(event, Event::ModeChanged { .. }) {
                            *mark.lock().expect("mark") = Some(Instant::now());
                        }
                    })
                    .detach();
                let start = Instant::now();
                rt.block_on(Fixture::approve(&mut session, &run_id, &call_id));
                let at = decided.lock().expect("mark").expect("mode_changed");
                total += at - start;
            }
            total
        });
    });
    group.bench_function("resume_to_complete", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (mut session, run_id, call_id) = rt.block_on(fixture.suspended());
                let start = Instant::now();
                rt.block_on(Fixture::approve(&mut session, &run_id, &call_id));
                total += start.elapsed();
            }
            total
        });
    });
    group.finish();
}

fn store_decision(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tmp");
    let files = FileStore::open(dir.path().join("files")).expect("file store");
    bench_store(c, "json_files", Arc::new(files));
    #[cfg(feature = "sqlite")]
    {
        let sqlite = agent_controller::store::SqliteStore::open(dir.path().join("sessions.db"))
            .expect("sqlite store");
        bench_store(c, "sqlite", Arc::new(sqlite));
    }
}

criterion_group!(benches, store_decision);
criterion_main!(benches);
