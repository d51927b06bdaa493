//! Measures every performance figure of the controller and prints them: a readable table, or with
//! `--json` one JSON object.
//!
//! ```sh
//! cargo run --release --features sqlite --example bench -- --json
//! cargo run --release --example bench            # the same without SQLite (its figure is null)
//! cargo run --release --example bench -- --quick # smaller counts, for a smoke test
//! cargo build --release && cargo run --release --example bench -- --only serve
//! ```
//!
//! `serve`'s figures (`bench/serve.rs`) run the release binary, so only with `--only serve`.
//!
//! How it measures (see BENCHMARKS.md):
//! - Times are medians over rounds; each round times a batch and divides by its size.
//! - Memory comes from a counting global allocator: the bytes of live allocations as requested
//!   (`Layout::size`). malloc's own per-allocation overhead is not in that figure; the allocation
//!   count is printed beside it, and the RSS growth read from `/proc/self/statm` as a cross-check.
//! - fsyncs are counted by interposing libc's `fsync` and `fdatasync` in this binary: every call,
//!   from the JSON-file store and from the bundled SQLite alike, goes through the counters below.
//! - The counting allocator costs a few relaxed atomic adds per allocation; the criterion benches
//!   (`cargo bench`) run without it and give the same timings within noise.

#[path = "../benches/fixture/mod.rs"]
mod fixture;
#[cfg(feature = "postgres")]
#[path = "bench/postgres.rs"]
mod postgres;
#[cfg(feature = "cli")]
#[path = "bench/serve.rs"]
mod serve;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use agent_controller::store::{FileStore, SessionStore};
use agent_controller::{AgentController, ToolRegistry};
use fixture::Fixture;
use serde_json::{Value, json};

/// A global allocator that counts live bytes and allocations, then defers to the system's.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Off while the throughput figure runs: two workers adding to the same counters would bounce
/// their cache line between the cores and slow every allocation. Switched off only after every
/// memory figure is taken (the live-byte count is meaningless from then on).
static COUNTING: AtomicBool = AtomicBool::new(true);

fn count(added: usize, removed: usize, allocations: u64) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_BYTES.fetch_add(added, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(removed, Ordering::Relaxed);
        ALLOCATIONS.fetch_add(allocations, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `System`; the counters have no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0, 1);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0, 1);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(0, layout.size(), 0);
        // SAFETY: `ptr` was allocated by `System` with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc` and `alloc`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(new_size, layout.size(), 1);
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations per mode of the last config load, and live heap bytes per mode of its graph.
static LOAD_ALLOCATIONS_PER_MODE: AtomicU64 = AtomicU64::new(0);
static GRAPH_BYTES_PER_MODE: AtomicU64 = AtomicU64::new(0);

/// fsync and fdatasync calls made by this process (see [`fsync`]).
static FSYNCS: AtomicU64 = AtomicU64::new(0);

/// Interposes libc's `fsync` for this binary: counts the call, then makes the system call.
/// Rust's `File::sync_all` and the bundled SQLite both link to this symbol.
#[unsafe(no_mangle)]
pub extern "C" fn fsync(fd: libc::c_int) -> libc::c_int {
    FSYNCS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the fsync system call on a descriptor the caller owns, as libc's wrapper makes it;
    // it returns -1 and sets errno on failure just like the wrapper.
    unsafe { libc::syscall(libc::SYS_fsync, fd) as libc::c_int }
}

/// Interposes libc's `fdatasync` (`File::sync_data`, SQLite's WAL sync); see [`fsync`].
#[unsafe(no_mangle)]
pub extern "C" fn fdatasync(fd: libc::c_int) -> libc::c_int {
    FSYNCS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: as for `fsync`.
    unsafe { libc::syscall(libc::SYS_fdatasync, fd) as libc::c_int }
}

/// How many of everything to run.
#[derive(Clone, Copy)]
struct Counts {
    rounds: usize,
    cycle_batch: usize,
    switch_batch: usize,
    held_sessions: usize,
    dropped_cycles: usize,
    concurrent_sessions: usize,
    cycles_per_task: usize,
    decisions: usize,
    big_config_rounds: usize,
}

const FULL: Counts = Counts {
    rounds: 21,
    cycle_batch: 1_000,
    switch_batch: 10_000,
    held_sessions: 100_000,
    dropped_cycles: 100_000,
    concurrent_sessions: 10_000,
    cycles_per_task: 10,
    decisions: 200,
    big_config_rounds: 5,
};

const QUICK: Counts = Counts {
    rounds: 5,
    cycle_batch: 200,
    switch_batch: 1_000,
    held_sessions: 5_000,
    dropped_cycles: 5_000,
    concurrent_sessions: 1_000,
    cycles_per_task: 2,
    decisions: 20,
    big_config_rounds: 1,
};

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`), in seconds.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Wall-clock and thread-CPU timings of rounds. On a shared machine wall time also counts the
/// time other processes held the core; CPU time does not, so both are reported.
#[derive(Default)]
struct Samples {
    wall: Vec<f64>,
    cpu: Vec<f64>,
}

impl Samples {
    /// Times `work`, recording seconds divided by `per` and scaled by `scale`.
    fn time<T>(&mut self, per: usize, scale: f64, work: impl FnOnce() -> T) -> T {
        let cpu = thread_cpu_seconds();
        let start = Instant::now();
        let out = work();
        let wall = start.elapsed().as_secs_f64();
        let cpu = thread_cpu_seconds() - cpu;
        self.wall.push(wall * scale / per as f64);
        self.cpu.push(cpu * scale / per as f64);
        out
    }

    /// Median wall time and median CPU time.
    fn medians(self) -> (f64, f64) {
        (median(self.wall), median(self.cpu))
    }
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

/// Resident set size in bytes, from `/proc/self/statm` (0 where it is unavailable).
fn rss_bytes() -> usize {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Median microseconds per full in-memory cycle (wall, CPU), and allocations per cycle.
fn cycle_us(counts: Counts) -> ((f64, f64), f64) {
    let fixture = Fixture::new();
    let rt = current_thread();
    rt.block_on(async {
        for _ in 0..counts.cycle_batch {
            fixture.cycle().await;
        }
    });
    let mut per_cycle = Samples::default();
    let mut allocations = Vec::new();
    for _ in 0..counts.rounds {
        let allocs = ALLOCATIONS.load(Ordering::Relaxed);
        per_cycle.time(counts.cycle_batch, 1e6, || {
            rt.block_on(async {
                for _ in 0..counts.cycle_batch {
                    fixture.cycle().await;
                }
            })
        });
        allocations.push(
            (ALLOCATIONS.load(Ordering::Relaxed) - allocs) as f64 / counts.cycle_batch as f64,
        );
    }
    let expected = (counts.cycle_batch * (counts.rounds + 1)) as u64;
    assert_eq!(fixture.mode_changes.load(Ordering::Relaxed), expected);
    (per_cycle.medians(), median(allocations))
}

/// Median microseconds per question cycle (wall, CPU), and allocations per cycle: the plan
/// cycle's measure, on [`fixture::QuestionFixture`].
fn question_cycle_us(counts: Counts) -> ((f64, f64), f64) {
    let fixture = fixture::QuestionFixture::new();
    cycles_us(counts, || fixture.cycle())
}

/// Median microseconds per cycle of `fixture` (wall, CPU) and allocations per cycle.
fn subagent_cycle_us(fixture: &fixture::SubagentFixture, counts: Counts) -> ((f64, f64), f64) {
    cycles_us(counts, || fixture.cycle())
}

/// Median microseconds per `cycle` (wall, CPU) and allocations per cycle, measured as
/// `cycle_us` measures the plan cycle: a warm-up batch, then `counts.rounds` batches.
fn cycles_us<F: std::future::Future<Output = ()>>(
    counts: Counts,
    mut cycle: impl FnMut() -> F,
) -> ((f64, f64), f64) {
    let rt = current_thread();
    rt.block_on(async {
        for _ in 0..counts.cycle_batch {
            cycle().await;
        }
    });
    let mut per_cycle = Samples::default();
    let mut allocations = Vec::new();
    for _ in 0..counts.rounds {
        let allocs = ALLOCATIONS.load(Ordering::Relaxed);
        per_cycle.time(counts.cycle_batch, 1e6, || {
            rt.block_on(async {
                for _ in 0..counts.cycle_batch {
                    cycle().await;
                }
            })
        });
        allocations.push(
            (ALLOCATIONS.load(Ordering::Relaxed) - allocs) as f64 / counts.cycle_batch as f64,
        );
    }
    (per_cycle.medians(), median(allocations))
}

/// Sessions held per memory figure of the subagent fixture.
fn finished_sessions(counts: Counts) -> usize {
    counts.held_sessions / 100
}

/// Live heap bytes per finished session of `fixture` held (after one warm-up cycle), and its
/// allocations.
fn finished_session_bytes(fixture: &fixture::SubagentFixture, counts: Counts) -> (f64, f64) {
    let rt = current_thread();
    rt.block_on(fixture.cycle());
    let n = finished_sessions(counts);
    let live = LIVE_BYTES.load(Ordering::Relaxed);
    let allocs = ALLOCATIONS.load(Ordering::Relaxed);
    let held = rt.block_on(async {
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            held.push(fixture.finished().await);
        }
        held
    });
    let bytes = (LIVE_BYTES.load(Ordering::Relaxed) - live) as f64 / n as f64;
    let allocs_per = (ALLOCATIONS.load(Ordering::Relaxed) - allocs) as f64 / n as f64;
    drop(held);
    (bytes, allocs_per)
}

/// Median nanoseconds per manual switch with one subscriber (alternating `build` and `plan`),
/// wall and CPU.
fn switch_ns(counts: Counts) -> (f64, f64) {
    let fixture = Fixture::new();
    let rt = current_thread();
    let mut per_switch = Samples::default();
    for round in 0..=counts.rounds {
        let mut session = rt
            .block_on(fixture.controller.start_session(fixture.options()))
            .expect("session");
        let mut switch_all = || {
            rt.block_on(async {
                for i in 0..counts.switch_batch {
                    let target = if i % 2 == 0 { "plan" } else { "build" };
                    let changed = session.switch_mode(target).await.expect("switch");
                    debug_assert!(changed);
                }
            })
        };
        // Round 0 warms up.
        if round == 0 {
            switch_all();
        } else {
            per_switch.time(counts.switch_batch, 1e9, switch_all);
        }
    }
    per_switch.medians()
}

/// Live bytes (and RSS bytes, and allocations) per session held suspended.
fn suspended_session_bytes(counts: Counts) -> (f64, f64, f64) {
    let fixture = Fixture::new();
    let rt = current_thread();
    // Warm up: the first session builds any lazily-initialised state.
    rt.block_on(fixture.cycle());
    let live = LIVE_BYTES.load(Ordering::Relaxed);
    let allocs = ALLOCATIONS.load(Ordering::Relaxed);
    let rss = rss_bytes();
    // The Vec's slots are part of the cost: a host keeps each session somewhere.
    let held = rt.block_on(async {
        let mut held = Vec::with_capacity(counts.held_sessions);
        for _ in 0..counts.held_sessions {
            held.push(fixture.suspended().await);
        }
        held
    });
    let n = counts.held_sessions as f64;
    let bytes = (LIVE_BYTES.load(Ordering::Relaxed) - live) as f64 / n;
    let rss_per = (rss_bytes().saturating_sub(rss)) as f64 / n;
    let allocs_per = (ALLOCATIONS.load(Ordering::Relaxed) - allocs) as f64 / n;
    assert!(held.iter().all(|(s, _, _)| s.pending_plan().is_some()));
    drop(held);
    (bytes, rss_per, allocs_per)
}

/// Live bytes left behind per finished, dropped session after many cycles (signed).
fn retained_bytes_per_cycle(counts: Counts) -> f64 {
    let fixture = Fixture::new();
    let rt = current_thread();
    rt.block_on(async {
        for _ in 0..1_000 {
            fixture.cycle().await;
        }
    });
    let before = LIVE_BYTES.load(Ordering::Relaxed) as f64;
    rt.block_on(async {
        for _ in 0..counts.dropped_cycles {
            fixture.cycle().await;
        }
    });
    let after = LIVE_BYTES.load(Ordering::Relaxed) as f64;
    (after - before) / counts.dropped_cycles as f64
}

/// Median milliseconds to load and validate a config of `modes` modes from a file (wall, CPU).
///
/// Warm (`cold == false`): each graph is dropped before the next load, as criterion measures, so
/// a load reuses memory the allocator already has. Cold: every graph stays alive until the
/// rounds are over, so each load runs in fresh memory as at a host's start (page faults
/// included), and no load pays for merging the blocks a dropped graph freed (glibc merges them
/// during the next large allocation).
fn load_ms(modes: usize, rounds: usize, cold: bool) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("modes.toml");
    std::fs::write(&path, fixture::many_modes_toml(modes)).expect("write config");
    let tools = ToolRegistry::with_workspace_tools();
    let mut times = Samples::default();
    let mut held = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let allocations = ALLOCATIONS.load(Ordering::Relaxed);
        let live = LIVE_BYTES.load(Ordering::Relaxed);
        let graph = times.time(1, 1e3, || fixture::load_and_validate(&path, &tools));
        assert_eq!(graph.len(), modes);
        LOAD_ALLOCATIONS_PER_MODE.store(
            (ALLOCATIONS.load(Ordering::Relaxed) - allocations) / modes as u64,
            Ordering::Relaxed,
        );
        GRAPH_BYTES_PER_MODE.store(
            (LIVE_BYTES.load(Ordering::Relaxed) - live) as u64 / modes as u64,
            Ordering::Relaxed,
        );
        if cold {
            held.push(graph);
        }
    }
    drop(held);
    times.medians()
}

/// Median milliseconds to build a controller over a loaded `modes`-mode graph (system prompts
/// and tool specs, once per mode).
fn build_ms(modes: usize, rounds: usize) -> f64 {
    let graph =
        agent_controller::config::parse(&fixture::many_modes_toml(modes), "many.toml").expect("ok");
    let model = Arc::new(agent_controller::model::scripted::ScriptedModel::new());
    let mut times = Vec::new();
    for _ in 0..rounds {
        let graph = graph.clone();
        let start = Instant::now();
        let controller = AgentController::builder(graph, model.clone())
            .tools(ToolRegistry::with_workspace_tools())
            .build()
            .expect("build");
        times.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(controller.modes().len(), modes);
    }
    median(times)
}

/// Cycles per second with `concurrent_sessions` tasks on a 2-worker runtime; each task runs
/// `cycles_per_task` cycles and yields while its plan is pending, so the sessions are suspended
/// at the same time. Returns the median over rounds of cycles per wall-clock second, and of cycles
/// per second of CPU time used by the process (other processes on a shared machine take wall
/// time, not this process's CPU time).
fn cycles_per_sec(counts: Counts) -> (f64, f64) {
    let fixture = Arc::new(Fixture::new());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    let mut rates = Vec::new();
    let mut cpu_rates = Vec::new();
    for round in 0..6 {
        let cpu = cpu_seconds();
        let start = Instant::now();
        rt.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..counts.concurrent_sessions {
                let fixture = fixture.clone();
                tasks.spawn(async move {
                    for _ in 0..counts.cycles_per_task {
                        let (mut session, run_id, call_id) = fixture.suspended().await;
                        tokio::task::yield_now().await;
                        Fixture::approve(&mut session, &run_id, &call_id).await;
                    }
                });
            }
            while let Some(done) = tasks.join_next().await {
                done.expect("task");
            }
        });
        let cycles = (counts.concurrent_sessions * counts.cycles_per_task) as f64;
        // Round 0 warms up the workers and the allocator.
        if round > 0 {
            rates.push(cycles / start.elapsed().as_secs_f64());
            cpu_rates.push(cycles / (cpu_seconds() - cpu));
        }
    }
    (median(rates), median(cpu_rates))
}

/// CPU time (user + system) this process has used, in seconds, from `/proc/self/stat`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime is the 12th, stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / per_second.max(1.0)
}

/// What deciding a pending plan costs on a store.
struct DecisionFigures {
    /// Median microseconds from `resume` until the decision is saved and `mode_changed` is
    /// delivered (one save).
    decision_us: f64,
    /// fsyncs in that span, per decision.
    decision_fsyncs: f64,
    /// Median microseconds for the whole `resume`: the decision, the build-mode reply and the
    /// save of the run's end (two saves).
    resume_us: f64,
    /// fsyncs per whole `resume`.
    resume_fsyncs: f64,
}

/// Decides `decisions` plans (approve -> hand-over -> run completes) on `store`; each session is
/// suspended before the clock starts.
fn decision(store: Arc<dyn SessionStore>, decisions: usize) -> DecisionFigures {
    let fixture = Fixture::with_store(store);
    let rt = current_thread();
    let (mut decided, mut resumed) = (Vec::new(), Vec::new());
    let (mut decided_fsyncs, mut resumed_fsyncs) = (0, 0);
    for i in 0..=decisions {
        let (mut session, run_id, call_id) = rt.block_on(fixture.suspended());
        let mark = Arc::new(std::sync::Mutex::new(None));
        let sink = mark.clone();
        session
            .subscribe(move |event| {
                if matches!(event, agent_controller::Event::ModeChanged { .. }) {
                    let fsyncs = FSYNCS.load(Ordering::Relaxed);
                    *sink.lock().expect("mark") = Some((Instant::now(), fsyncs));
                }
            })
            .detach();
        let before = FSYNCS.load(Ordering::Relaxed);
        let start = Instant::now();
        rt.block_on(Fixture::approve(&mut session, &run_id, &call_id));
        let elapsed = start.elapsed();
        let after = FSYNCS.load(Ordering::Relaxed);
        let (at, fsyncs_at) = mark.lock().expect("mark").expect("mode_changed");
        // Decision 0 warms up (files, statements, caches).
        if i > 0 {
            decided.push((at - start).as_secs_f64() * 1e6);
            resumed.push(elapsed.as_secs_f64() * 1e6);
            decided_fsyncs += fsyncs_at - before;
            resumed_fsyncs += after - before;
        }
    }
    let n = decisions as f64;
    DecisionFigures {
        decision_us: median(decided),
        decision_fsyncs: decided_fsyncs as f64 / n,
        resume_us: median(resumed),
        resume_fsyncs: resumed_fsyncs as f64 / n,
    }
}

fn json_store_decision(counts: Counts) -> DecisionFigures {
    let dir = tempfile::tempdir().expect("tmp");
    let store = Arc::new(FileStore::open(dir.path()).expect("file store"));
    decision(store, counts.decisions)
}

#[cfg(feature = "sqlite")]
fn sqlite_store_decision(counts: Counts) -> Option<DecisionFigures> {
    let dir = tempfile::tempdir().expect("tmp");
    let store = agent_controller::store::SqliteStore::open(dir.path().join("sessions.db"))
        .expect("sqlite store");
    Some(decision(Arc::new(store), counts.decisions))
}

#[cfg(not(feature = "sqlite"))]
fn sqlite_store_decision(_: Counts) -> Option<DecisionFigures> {
    None
}

fn round_to(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

/// Runs one workload `times` times and nothing else, for a profiler (`valgrind --tool=callgrind`,
/// `perf record`): `--profile cycle|question|switch|load|suspend|subagent|plain`.
fn profile(what: &str, times: usize) {
    let fixture = Fixture::new();
    let rt = current_thread();
    match what {
        "cycle" => rt.block_on(async {
            for _ in 0..times {
                fixture.cycle().await;
            }
        }),
        "question" => rt.block_on(async {
            let questions = fixture::QuestionFixture::new();
            for _ in 0..times {
                questions.cycle().await;
            }
        }),
        "suspend" => rt.block_on(async {
            let mut held = Vec::with_capacity(times);
            for _ in 0..times {
                held.push(fixture.suspended().await);
            }
        }),
        "switch" => rt.block_on(async {
            let mut session = fixture
                .controller
                .start_session(fixture.options())
                .await
                .expect("session");
            for i in 0..times {
                let target = if i % 2 == 0 { "plan" } else { "build" };
                session.switch_mode(target).await.expect("switch");
            }
        }),
        "load" | "load100k" => {
            let modes = if what == "load" { 10_000 } else { 100_000 };
            let dir = tempfile::tempdir().expect("tmp");
            let path = dir.path().join("modes.toml");
            std::fs::write(&path, fixture::many_modes_toml(modes)).expect("write config");
            let tools = ToolRegistry::with_workspace_tools();
            for _ in 0..times {
                fixture::load_and_validate(&path, &tools);
            }
        }
        "build" => {
            let graph = agent_controller::config::parse(&fixture::many_modes_toml(10_000), "m")
                .expect("ok");
            let model = Arc::new(agent_controller::model::scripted::ScriptedModel::new());
            for _ in 0..times {
                AgentController::builder(graph.clone(), model.clone())
                    .tools(ToolRegistry::with_workspace_tools())
                    .build()
                    .expect("build");
            }
        }
        "subagent" | "plain" => rt.block_on(async {
            let calls = usize::from(what == "subagent");
            let subagents = fixture::SubagentFixture::new(calls);
            for _ in 0..times {
                subagents.cycle().await;
            }
        }),
        other => panic!("unknown workload `{other}`"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--profile") {
        let what = args.get(i + 1).map_or("cycle", String::as_str);
        let times = args
            .get(i + 2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(1_000);
        profile(what, times);
        return;
    }
    let as_json = args.iter().any(|a| a == "--json");
    let counts = if args.iter().any(|a| a == "--quick") {
        QUICK
    } else {
        FULL
    };
    let only: Option<&str> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let wanted = |name: &str| only.is_none_or(|o| o.split(',').any(|w| w == name));
    let progress = |name: &str| {
        if !as_json {
            eprintln!("measuring {name} ...");
        }
    };
    let started = Instant::now();
    let mut out = serde_json::Map::new();
    let mut put = |key: &str, value: Value| {
        out.insert(key.to_owned(), value);
    };

    if wanted("cycle") {
        progress("cycle");
        let ((us, cpu_us), allocs) = cycle_us(counts);
        put("cycle_us", json!(round_to(us, 2)));
        put("cycle_cpu_us", json!(round_to(cpu_us, 2)));
        put("allocations_per_cycle", json!(round_to(allocs, 1)));
        progress("question cycle");
        let ((us, cpu_us), allocs) = question_cycle_us(counts);
        put("question_cycle_us", json!(round_to(us, 2)));
        put("question_cycle_cpu_us", json!(round_to(cpu_us, 2)));
        put("allocations_per_question_cycle", json!(round_to(allocs, 1)));
    }
    if wanted("subagent") {
        progress("subagent");
        let plain = fixture::SubagentFixture::new(0);
        let one = fixture::SubagentFixture::new(1);
        let ((plain_us, plain_cpu), plain_allocs) = subagent_cycle_us(&plain, counts);
        let ((us, cpu), allocs) = subagent_cycle_us(&one, counts);
        put("plain_cycle_us", json!(round_to(plain_us, 2)));
        put("plain_cycle_cpu_us", json!(round_to(plain_cpu, 2)));
        put(
            "allocations_per_plain_cycle",
            json!(round_to(plain_allocs, 1)),
        );
        put("subagent_cycle_us", json!(round_to(us, 2)));
        put("subagent_cycle_cpu_us", json!(round_to(cpu, 2)));
        put("allocations_per_subagent_cycle", json!(round_to(allocs, 1)));
        put("subagent_call_us", json!(round_to(us - plain_us, 2)));
        put("subagent_call_cpu_us", json!(round_to(cpu - plain_cpu, 2)));
        put(
            "allocations_per_subagent_call",
            json!(round_to(allocs - plain_allocs, 1)),
        );
        progress("subagent memory");
        let ten = fixture::SubagentFixture::new(10);
        let (plain_bytes, _) = finished_session_bytes(&plain, counts);
        let (ten_bytes, ten_allocs) = finished_session_bytes(&ten, counts);
        put(
            "bytes_per_finished_plain_session",
            json!(round_to(plain_bytes, 0)),
        );
        put(
            "bytes_per_session_with_10_children",
            json!(round_to(ten_bytes, 0)),
        );
        put(
            "allocations_per_session_with_10_children",
            json!(round_to(ten_allocs, 1)),
        );
        let rt = current_thread();
        let plain_record = rt.block_on(fixture::finished_record_bytes(0));
        let ten_record = rt.block_on(fixture::finished_record_bytes(10));
        put("record_bytes_plain_session", json!(plain_record));
        put("record_bytes_session_with_10_children", json!(ten_record));
        put(
            "bytes_per_finished_child",
            json!(round_to((ten_bytes - plain_bytes) / 10.0, 0)),
        );
    }
    if wanted("switch") {
        progress("switch");
        let (ns, cpu_ns) = switch_ns(counts);
        put("switch_ns", json!(round_to(ns, 1)));
        put("switch_cpu_ns", json!(round_to(cpu_ns, 1)));
    }
    if wanted("memory") {
        progress("memory");
        let (bytes, rss, allocs) = suspended_session_bytes(counts);
        put("bytes_per_suspended_session", json!(round_to(bytes, 0)));
        put("rss_bytes_per_suspended_session", json!(round_to(rss, 0)));
        put(
            "allocations_per_suspended_session",
            json!(round_to(allocs, 1)),
        );
        progress("retention");
        put(
            "retained_bytes_per_cycle",
            json!(round_to(retained_bytes_per_cycle(counts), 3)),
        );
    }
    if wanted("load") {
        progress("config load");
        let rounds = counts.rounds.min(11);
        let (ten, ten_cpu) = load_ms(10_000, rounds, false);
        let (hundred, hundred_cpu) = load_ms(100_000, counts.big_config_rounds, false);
        put("load_10k_modes_ms", json!(round_to(ten, 2)));
        put("load_100k_modes_ms", json!(round_to(hundred, 2)));
        put("load_100k_over_10k", json!(round_to(hundred / ten, 2)));
        put("load_10k_modes_cpu_ms", json!(round_to(ten_cpu, 2)));
        put("load_100k_modes_cpu_ms", json!(round_to(hundred_cpu, 2)));
        put(
            "load_allocations_per_mode",
            json!(LOAD_ALLOCATIONS_PER_MODE.load(Ordering::Relaxed)),
        );
        put(
            "graph_bytes_per_mode",
            json!(GRAPH_BYTES_PER_MODE.load(Ordering::Relaxed)),
        );
        let (ten_cold, _) = load_ms(10_000, rounds, true);
        let (hundred_cold, _) = load_ms(100_000, counts.big_config_rounds, true);
        put("load_10k_modes_cold_ms", json!(round_to(ten_cold, 2)));
        put("load_100k_modes_cold_ms", json!(round_to(hundred_cold, 2)));
        put(
            "load_100k_over_10k_cold",
            json!(round_to(hundred_cold / ten_cold, 2)),
        );
        put(
            "build_10k_modes_ms",
            json!(round_to(build_ms(10_000, counts.rounds.min(11)), 2)),
        );
    }
    if wanted("store") {
        progress("json store");
        let json = json_store_decision(counts);
        put(
            "json_store_decision_us",
            json!(round_to(json.decision_us, 1)),
        );
        put(
            "json_store_fsyncs_per_decision",
            json!(json.decision_fsyncs),
        );
        put(
            "json_store_resume_to_complete_us",
            json!(round_to(json.resume_us, 1)),
        );
        put("json_store_fsyncs_per_resume", json!(json.resume_fsyncs));
        progress("sqlite store");
        let sqlite = sqlite_store_decision(counts);
        put(
            "sqlite_store_decision_us",
            json!(sqlite.as_ref().map(|f| round_to(f.decision_us, 1))),
        );
        put(
            "sqlite_store_fsyncs_per_decision",
            json!(sqlite.as_ref().map(|f| f.decision_fsyncs)),
        );
        put(
            "sqlite_store_resume_to_complete_us",
            json!(sqlite.as_ref().map(|f| round_to(f.resume_us, 1))),
        );
        put(
            "sqlite_store_fsyncs_per_resume",
            json!(sqlite.as_ref().map(|f| f.resume_fsyncs)),
        );
        // The worst of the measured stores.
        let worst = sqlite.as_ref().map_or(json.decision_fsyncs, |f| {
            f.decision_fsyncs.max(json.decision_fsyncs)
        });
        put("fsyncs_per_decision", json!(worst));
    }
    #[cfg(feature = "postgres")]
    if wanted("postgres") {
        progress("postgres (1,000,000 records: a few minutes)");
        for (key, value) in postgres::figures(counts.decisions < FULL.decisions) {
            put(&key, value);
        }
    }
    #[cfg(feature = "cli")]
    if only.is_some() && wanted("serve") {
        progress("serve (1,000 pending plans; needs target/release/agent-controller)");
        for (key, value) in serve::all(counts.decisions < FULL.decisions) {
            put(&key, value);
        }
    }
    if wanted("throughput") {
        progress("throughput");
        // The last figure: the allocation counters stop here (see COUNTING).
        COUNTING.store(false, Ordering::Relaxed);
        let (wall, cpu) = cycles_per_sec(counts);
        put("cycles_per_sec", json!(wall.round()));
        put("cycles_per_cpu_sec", json!(cpu.round()));
    }
    out.insert(
        "bench_seconds".to_owned(),
        json!(round_to(started.elapsed().as_secs_f64(), 1)),
    );

    if as_json {
        println!("{}", Value::Object(out));
    } else {
        print_table(&out);
    }
}

fn print_table(out: &serde_json::Map<String, Value>) {
    let rows: [(&str, &str, &str); 12] = [
        ("cycle_us", "full in-memory cycle (us)", "<= 40"),
        ("allocations_per_cycle", "allocations per cycle", ""),
        ("switch_ns", "manual switch, 1 subscriber (ns)", "<= 1000"),
        (
            "bytes_per_suspended_session",
            "bytes per suspended session (100k held)",
            "<= 4096",
        ),
        (
            "retained_bytes_per_cycle",
            "bytes retained per dropped session",
            "0 (flat)",
        ),
        ("load_10k_modes_ms", "load+validate 10k modes (ms)", "<= 20"),
        (
            "load_100k_modes_ms",
            "load+validate 100k modes (ms)",
            "<= 10x 10k",
        ),
        (
            "cycles_per_sec",
            "cycles/s, 10k sessions, 2 workers",
            ">= 50000",
        ),
        (
            "json_store_decision_us",
            "JSON-file store decision (us)",
            "report",
        ),
        (
            "sqlite_store_decision_us",
            "SQLite store decision (us)",
            "report",
        ),
        (
            "json_store_fsyncs_per_decision",
            "fsyncs per decision, JSON files",
            "<= 2",
        ),
        (
            "sqlite_store_fsyncs_per_decision",
            "fsyncs per decision, SQLite",
            "<= 2",
        ),
    ];
    println!("{:<44} {:>12}  target", "figure", "measured");
    for (key, label, target) in rows {
        if let Some(value) = out.get(key) {
            println!("{label:<44} {:>12}  {target}", value.to_string());
        }
    }
    for (key, value) in out {
        if !rows.iter().any(|(k, _, _)| k == key) {
            println!("{key:<44} {:>12}", value.to_string());
        }
    }
}
