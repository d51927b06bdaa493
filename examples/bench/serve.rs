//! The figures of `agent-controller serve` (`--only serve`): with 1,000 pending plans in a file
//! store (and in PostgreSQL when `AGENT_CONTROLLER_TEST_POSTGRES` is set), the time from a
//! decision's POST to its event at another client's Server-Sent Events stream, the time of
//! `GET /v1/pending` (the default page of 100 and a page of 1,000), each as p50 and p99, and
//! the memory of the server per open SSE client (its RSS growth over 100 clients, / 100).
//!
//! It runs the release binary beside this example (`target/release/agent-controller`: build it
//! first with `cargo build --release`), on loopback, port 0.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN: &str = "bench-token-0123456789";
const PENDING: usize = 1_000;
/// The pending plans with `--quick`.
const PENDING_QUICK: usize = 100;
const CLIENTS: usize = 100;

/// A `serve` process; killed on drop.
struct Served {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary beside this example.
fn binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("this example's path");
    let dir = exe
        .parent()
        .and_then(|examples| examples.parent())
        .expect("target/PROFILE");
    let binary = dir.join("agent-controller");
    assert!(
        binary.is_file(),
        "{} is missing: build it first (cargo build --release)",
        binary.display()
    );
    binary
}

impl Served {
    fn start(workspace: &std::path::Path, store: &str) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");
        let mut child = Command::new(binary())
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--store",
                store,
                "--config",
                config,
            ])
            .arg("--workspace")
            .arg(workspace)
            .env("AGENT_CONTROLLER_TOKEN", TOKEN)
            .env_remove("AGENT_CONTROLLER_TOKENS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("the first line");
        let base = first
            .trim()
            .strip_prefix("listening on ")
            .expect("listening on ...")
            .to_owned();
        Self {
            child,
            base,
            client: reqwest::Client::new(),
        }
    }

    async fn get(&self, path: &str) -> Value {
        let answer = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET");
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
        answer.json().await.expect("JSON")
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let answer = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .json(body)
            .send()
            .await
            .expect("POST");
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    /// The server's resident set, in bytes.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }

    /// An SSE stream of every event.
    async fn events(&self) -> Events {
        let response = self
            .client
            .get(format!("{}/v1/events", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET /v1/events");
        assert!(response.status().is_success());
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// Every pending entry, all pages.
    async fn all_pending(&self) -> Vec<Value> {
        let mut all = Vec::new();
        let mut path = "/v1/pending?limit=1000".to_owned();
        loop {
            let page = self.get(&path).await;
            all.extend(page["pending"].as_array().cloned().unwrap_or_default());
            match page["nextCursor"].as_str() {
                Some(next) => path = format!("/v1/pending?limit=1000&cursor={next}"),
                None => return all,
            }
        }
    }
}

/// The events of an SSE stream.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    /// The data of the next event.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if !data.is_empty() {
                    return serde_json::from_str(&data).expect("an event is JSON");
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.response.chunk())
                .await
                .expect("an event in time")
                .expect("the stream")
                .expect("the stream goes on");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// p50 and p99 of `samples`, in milliseconds.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1000.0
    };
    (at(0.50), at(0.99))
}

/// Starts `count` sessions over the API, each with a plan waiting, 8 at a time. Each asks for
/// its own change, so the plan files (named by the title) differ: sessions started at once in
/// one workspace would otherwise write and submit the same plan file, and one could find it
/// emptied by another (its plan refused, never waiting).
async fn fill(served: &Served, count: usize) {
    let mut started = 0;
    while started < count {
        let batch = (count - started).min(8);
        let bodies: Vec<Value> = (started..started + batch)
            .map(|n| json!({ "modeId": "plan", "message": format!("Add dark mode {n}") }))
            .collect();
        let posts = bodies.iter().map(|body| served.post("/v1/sessions", body));
        for (status, answer) in futures_util::future::join_all(posts).await {
            assert_eq!(status, 201, "{answer}");
        }
        started += batch;
    }
    let start = Instant::now();
    while served.all_pending().await.len() < count {
        assert!(start.elapsed() < Duration::from_secs(300), "the plans wait");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The figures of one store (`store`, a spec), keys prefixed with `tag`.
fn figures(tag: &str, store: &str, quick: bool) -> Vec<(String, Value)> {
    let workspace = tempfile::tempdir().expect("a workspace");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let served = Served::start(workspace.path(), store);
    rt.block_on(async {
        fill(&served, if quick { PENDING_QUICK } else { PENDING }).await;
        let rounds = if quick { 20 } else { 500 };
        let mut page_100 = Vec::new();
        let mut page_1000 = Vec::new();
        for _ in 0..rounds {
            let start = Instant::now();
            served.get("/v1/pending").await;
            page_100.push(start.elapsed());
            let start = Instant::now();
            served.get("/v1/pending?limit=1000").await;
            page_1000.push(start.elapsed());
        }

        // Memory: the RSS growth over 100 open clients, each past its first event.
        let before = served.rss();
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(served.events().await);
        }
        let pending = served.all_pending().await;
        let decide = |entry: &Value| {
            let path = format!(
                "/v1/sessions/{}/decisions/{}",
                entry["sessionId"].as_str().expect("an id"),
                entry["decisionId"].as_str().expect("an id")
            );
            (
                path,
                json!({ "action": "approved", "sha256": entry["sha256"] }),
            )
        };
        let (path, body) = decide(&pending[0]);
        let (status, _) = served.post(&path, &body).await;
        assert_eq!(status, 200);
        for client in &mut clients {
            client.next().await;
        }
        let after = served.rss();
        let per_client = after.saturating_sub(before) as f64 / CLIENTS as f64;
        drop(clients);

        // A decision's POST to its event at another client.
        let decisions = if quick { 20 } else { 300 }.min(pending.len() - 1);
        let mut watcher = served.events().await;
        let mut latency = Vec::new();
        for entry in &pending[1..=decisions] {
            let (path, body) = decide(entry);
            let session = entry["sessionId"].clone();
            let start = Instant::now();
            let (status, answer) = served.post(&path, &body).await;
            assert_eq!(status, 200, "{answer}");
            loop {
                let event = watcher.next().await;
                if event["type"] == "mode_changed" && event["sessionId"] == session {
                    break;
                }
            }
            latency.push(start.elapsed());
        }
        let (decision_p50, decision_p99) = percentiles(latency);
        let (p100_p50, p100_p99) = percentiles(page_100);
        let (p1000_p50, p1000_p99) = percentiles(page_1000);
        let round = |x: f64| (x * 100.0).round() / 100.0;
        vec![
            (
                format!("serve_{tag}_decision_to_sse_p50_ms"),
                json!(round(decision_p50)),
            ),
            (
                format!("serve_{tag}_decision_to_sse_p99_ms"),
                json!(round(decision_p99)),
            ),
            (
                format!("serve_{tag}_pending_page_p50_ms"),
                json!(round(p100_p50)),
            ),
            (
                format!("serve_{tag}_pending_page_p99_ms"),
                json!(round(p100_p99)),
            ),
            (
                format!("serve_{tag}_pending_1000_p50_ms"),
                json!(round(p1000_p50)),
            ),
            (
                format!("serve_{tag}_pending_1000_p99_ms"),
                json!(round(p1000_p99)),
            ),
            (
                format!("serve_{tag}_rss_bytes_per_sse_client"),
                json!(per_client.round()),
            ),
        ]
    })
}

/// The figures: the file store, then PostgreSQL when `AGENT_CONTROLLER_TEST_POSTGRES` is set
/// (in a schema of its own, dropped at the end).
pub(crate) fn all(quick: bool) -> Vec<(String, Value)> {
    let dir = tempfile::tempdir().expect("a store");
    let mut out = figures(
        "file",
        &dir.path().join("sessions").display().to_string(),
        quick,
    );
    #[cfg(feature = "postgres")]
    if std::env::var("AGENT_CONTROLLER_TEST_POSTGRES").is_ok() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let schema = super::postgres::Schema::new(&rt, "serve");
        out.extend(figures("postgres", &schema.url, quick));
    }
    out
}
