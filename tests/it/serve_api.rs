//! `agent-controller serve` against a real server on loopback (a process of the binary, port 0),
//! over the file store and SQLite, and PostgreSQL when `AGENT_CONTROLLER_TEST_POSTGRES` is set:
//! tokens, a plan approved over HTTP, two clients racing on one decision, bad bodies and ids,
//! and the events over SSE, a decision of the CLI's (another process) among them.
#![cfg(feature = "cli")]

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Workspace;
use common::cli::SHIPPED;
use reqwest::StatusCode;
use serde_json::{Value, json};

const TOKEN: &str = "test-token-0123456789";
const WAIT: Duration = Duration::from_secs(30);

/// A store the tests run on: its kind, its spec, and what keeps it (a PostgreSQL schema).
type Store = (&'static str, String, Option<Box<dyn std::any::Any>>);

/// The stores the tests run on, PostgreSQL only when its URL is set.
fn stores(ws: &Workspace) -> Vec<Store> {
    let mut stores: Vec<Store> = vec![(
        "dir",
        ws.path().join("sessions").display().to_string(),
        None,
    )];
    if cfg!(feature = "sqlite") {
        stores.push((
            "sqlite",
            format!("sqlite:{}", ws.path().join("sessions.db").display()),
            None,
        ));
    }
    #[cfg(feature = "postgres")]
    if std::env::var(common::postgres::URL_VAR).is_ok()
        && let Some(schema) = common::postgres::TestSchema::new()
    {
        let url = schema.url.clone();
        stores.push(("postgres", url, Some(Box::new(schema))));
    }
    stores
}

/// A `serve` process and its address; killed when dropped.
struct Served {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Served {
    fn start(ws: &Workspace, spec: &str) -> Self {
        // Built before the server starts, so a failure here leaves no process behind. With every
        // feature on, reqwest is built with rustls and no provider: plain HTTP only needs one
        // installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-controller"))
            .args([
                "serve",
                "--store",
                spec,
                "--config",
                SHIPPED,
                "--bind",
                "127.0.0.1:0",
            ])
            .arg("--workspace")
            .arg(ws.path())
            .env("AGENT_CONTROLLER_TOKEN", TOKEN)
            .env_remove("AGENT_CONTROLLER_TOKENS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        // From here a panic kills the server (`Drop`).
        let mut served = Self {
            child,
            base: String::new(),
            client,
        };
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("the first line");
        served.base = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the first line says where it listens: {first:?}"))
            .to_owned();
        assert!(
            served.base.starts_with("http://127.0.0.1:"),
            "{}",
            served.base
        );
        served
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET");
        answer(response).await
    }

    async fn post(&self, path: &str, body: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .expect("POST");
        answer(response).await
    }

    /// A plan waiting in a session started over the API: (session id, its pending entry).
    async fn plan_waiting(&self) -> (String, Value) {
        let body = json!({ "modeId": "plan", "message": "Add dark mode" }).to_string();
        let (status, session) = self.post("/v1/sessions", &body).await;
        assert_eq!(status, StatusCode::CREATED, "{session}");
        let id = session["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned();
        let entry = self.waiting_in(&id).await;
        (id, entry)
    }

    /// The first decision listed as waiting in session `id`, once there is one.
    async fn waiting_in(&self, id: &str) -> Value {
        let start = Instant::now();
        loop {
            let (status, listing) = self.get("/v1/pending").await;
            assert_eq!(status, StatusCode::OK, "{listing}");
            if let Some(entry) = listing["pending"]
                .as_array()
                .expect("pending")
                .iter()
                .find(|e| e["sessionId"] == id)
            {
                return entry.clone();
            }
            assert!(start.elapsed() < WAIT, "nothing waits in {id}: {listing}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The session, once its run is no longer running.
    async fn settled(&self, id: &str) -> Value {
        let start = Instant::now();
        loop {
            let (status, session) = self.get(&format!("/v1/sessions/{id}")).await;
            assert_eq!(status, StatusCode::OK, "{session}");
            if session["runState"] != "running" {
                return session;
            }
            assert!(start.elapsed() < WAIT, "still running: {session}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A Server-Sent Events stream of `path`, after event `after` when given.
    async fn events(&self, path: &str, after: Option<u64>) -> Events {
        let mut request = self.client.get(self.url(path)).bearer_auth(TOKEN);
        if let Some(after) = after {
            request = request.header("last-event-id", after.to_string());
        }
        let response = request.send().await.expect("GET events");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["content-type"]
                .to_str()
                .expect("as expected"),
            "text/event-stream"
        );
        Events {
            response,
            buffer: String::new(),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn answer(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// The events of an SSE stream: (id, JSON data).
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn next(&mut self) -> (u64, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                // A keep-alive comment has neither.
                if let Some(id) = id {
                    let value = serde_json::from_str(&data).expect("an event is JSON");
                    return (id, value);
                }
                continue;
            }
            let chunk = tokio::time::timeout(WAIT, self.response.chunk())
                .await
                .expect("an event in time")
                .expect("the stream")
                .expect("the stream goes on");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The first event for which `wanted` holds, with every event before it.
    async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Vec<(u64, Value)> {
        let mut seen = Vec::new();
        loop {
            let event = self.next().await;
            let done = wanted(&event.1);
            seen.push(event);
            if done {
                return seen;
            }
        }
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
fn every_route_but_healthz_needs_the_token() {
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        let client = served.client.clone();
        let health = client
            .get(served.url("/healthz"))
            .send()
            .await
            .expect("as expected");
        assert_eq!(health.status(), StatusCode::OK);
        for path in [
            "/v1/pending",
            "/v1/events",
            "/v1/openapi.json",
            "/v1/sessions/abc",
        ] {
            let none = client
                .get(served.url(path))
                .send()
                .await
                .expect("as expected");
            assert_eq!(none.status(), StatusCode::UNAUTHORIZED, "{path}");
            assert!(none.headers().get("access-control-allow-origin").is_none());
            let wrong = client
                .get(served.url(path))
                .bearer_auth("test-token-0123456780")
                .send()
                .await
                .expect("as expected");
            assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "{path}");
        }
        let posted = client
            .post(served.url("/v1/sessions/abc/decisions/decision_1"))
            .body("{}")
            .send()
            .await
            .expect("as expected");
        assert_eq!(posted.status(), StatusCode::UNAUTHORIZED);
        let (status, document) = served.get("/v1/openapi.json").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(document["openapi"], "3.1.0");
        assert!(document["paths"]["/v1/pending"]["get"].is_object());
    });
}

#[test]
fn a_plan_approved_over_http_moves_the_session_to_its_target() {
    let ws = Workspace::new();
    for (kind, spec, _keep) in stores(&ws) {
        let served = Served::start(&ws, &spec);
        runtime().block_on(async {
            let (session, entry) = served.plan_waiting().await;
            assert_eq!(entry["kind"], "plan", "{kind}");
            assert_eq!(entry["title"], "Add dark mode", "{kind}");
            let (_, before) = served.get(&format!("/v1/sessions/{session}")).await;
            assert_eq!(before["modeId"], "plan", "{kind}");
            let decision = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
            let path = format!(
                "/v1/sessions/{session}/decisions/{}",
                entry["decisionId"].as_str().expect("as expected")
            );
            let (status, taken) = served.post(&path, &decision).await;
            assert_eq!(status, StatusCode::OK, "{kind}: {taken}");
            assert_eq!(taken["modeId"], "build", "{kind}");
            assert_eq!(taken["decision"]["outcome"], "approved", "{kind}");
            let after = served.settled(&session).await;
            assert_eq!(after["modeId"], "build", "{kind}: {after}");
            assert_eq!(after["runState"], "completed", "{kind}: {after}");
            // The store says so too: nothing waits.
            let (_, listing) = served.get("/v1/pending").await;
            assert_eq!(listing["pending"], json!([]), "{kind}");
        });
    }
}

/// Issue 40: the decision body's `steps` passes through: a step the plan lacks is 422 and the
/// plan still waits; steps it has approve only those, and the decision taken names them.
#[test]
fn a_decision_body_with_steps_approves_only_those_steps() {
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        let (session, entry) = served.plan_waiting().await;
        let path = format!(
            "/v1/sessions/{session}/decisions/{}",
            entry["decisionId"].as_str().expect("as expected")
        );
        let missing = json!({ "action": "approved", "steps": [1, 9] }).to_string();
        let (status, why) = served.post(&path, &missing).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
        assert!(why.to_string().contains("no step 9"), "{why}");
        let still = served.waiting_in(&session).await;
        assert_eq!(still["decisionId"], entry["decisionId"]);
        let some =
            json!({ "action": "approved", "steps": [1, 3], "sha256": entry["sha256"] }).to_string();
        let (status, taken) = served.post(&path, &some).await;
        assert_eq!(status, StatusCode::OK, "{taken}");
        assert_eq!(taken["decision"]["steps"], json!([1, 3]), "{taken}");
        assert_eq!(taken["modeId"], "build", "{taken}");
    });
}

#[test]
fn of_two_clients_racing_on_one_decision_exactly_one_wins() {
    let ws = Workspace::new();
    for (kind, spec, _keep) in stores(&ws) {
        let served = Served::start(&ws, &spec);
        runtime().block_on(async {
            let (session, entry) = served.plan_waiting().await;
            let decision = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
            let path = format!(
                "/v1/sessions/{session}/decisions/{}",
                entry["decisionId"].as_str().expect("as expected")
            );
            let (a, b) = tokio::join!(served.post(&path, &decision), served.post(&path, &decision));
            let mut statuses = [a.0, b.0];
            statuses.sort();
            assert_eq!(
                statuses,
                [StatusCode::OK, StatusCode::CONFLICT],
                "{kind}: {a:?} {b:?}"
            );
            let loser = if a.0 == StatusCode::CONFLICT {
                a.1
            } else {
                b.1
            };
            assert!(
                ["conflict", "already_decided"]
                    .contains(&loser["error"]["kind"].as_str().expect("as expected")),
                "{kind}: {loser}"
            );
            // Once the run is over, deciding again is 409 (already decided).
            served.settled(&session).await;
            let (status, again) = served.post(&path, &decision).await;
            assert_eq!(status, StatusCode::CONFLICT, "{kind}: {again}");
            assert_eq!(again["error"]["kind"], "already_decided", "{kind}");
        });
    }
}

#[test]
fn bad_bodies_are_422_bad_ids_404_and_a_body_over_the_bound_413() {
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        let (session, entry) = served.plan_waiting().await;
        let path = format!(
            "/v1/sessions/{session}/decisions/{}",
            entry["decisionId"].as_str().expect("as expected")
        );
        let (status, why) = served.post(&path, "not json").await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
        assert!(why["error"]["message"].as_str().expect("as expected").contains("not JSON"));
        let (status, why) = served.post(&path, r#"{"action": "approve"}"#).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
        let (status, why) = served.post(&path, "[\"approved\"]").await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{why}");
        // A pin of other content: 409, and the plan still waits.
        let wrong = json!({ "action": "approved", "sha256": "0".repeat(64) }).to_string();
        let (status, why) = served.post(&path, &wrong).await;
        assert_eq!(status, StatusCode::CONFLICT, "{why}");
        assert_eq!(why["error"]["kind"], "mismatch");
        // Ids that are no ids, and ids nothing has.
        for bad in [
            "/v1/sessions/not.an.id/decisions/decision_1".to_owned(),
            format!("/v1/sessions/{session}/decisions/decision%2F1"),
            format!("/v1/sessions/{}/decisions/decision_1", "a".repeat(200)),
            "/v1/sessions/no-such-session/decisions/decision_1".to_owned(),
            format!("/v1/sessions/{session}/decisions/decision_99"),
        ] {
            let (status, why) = served.post(&bad, &wrong).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{bad}: {why}");
        }
        let (status, _) = served.get("/v1/sessions/not.an.id").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // Over four times the largest plan: refused from its length, before the body is read.
        let limit = 4 * agent_controller::tool::submit_plan::MAX_PLAN_BYTES as usize;
        let address = served.base.trim_start_matches("http://").to_owned();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            limit + 1
        );
        let answer = tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(address).expect("connect");
            stream.set_read_timeout(Some(WAIT)).expect("timeout");
            stream.write_all(head.as_bytes()).expect("send the head");
            let mut answer = String::new();
            let _ = stream.read_to_string(&mut answer);
            answer
        })
        .await
        .expect("as expected");
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        // Nothing of it changed the plan: it still waits.
        let still = served.waiting_in(&session).await;
        assert_eq!(still["decisionId"], entry["decisionId"]);
        // Paging: a bad limit is 422.
        let (status, _) = served.get("/v1/pending?limit=0").await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    });
}

#[test]
fn sse_shows_a_decision_taken_here_and_one_taken_by_the_cli() {
    let ws = Workspace::new();
    for (kind, spec, _keep) in stores(&ws) {
        let served = Served::start(&ws, &spec);
        runtime().block_on(async {
            let mut all = served.events("/v1/events", None).await;
            // Decided over HTTP: the decision's `tool_end` and the mode change reach the client.
            let (session, entry) = served.plan_waiting().await;
            let decision_id = entry["decisionId"]
                .as_str()
                .expect("as expected")
                .to_owned();
            let mut one = served
                .events(&format!("/v1/sessions/{session}/events"), None)
                .await;
            let decision = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
            let (status, _) = served
                .post(
                    &format!("/v1/sessions/{session}/decisions/{decision_id}"),
                    &decision,
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{kind}");
            let seen = all
                .until(|e| {
                    e["type"] == "tool_end" && e["decision"]["decisionId"] == decision_id.as_str()
                })
                .await;
            let ids: Vec<u64> = seen.iter().map(|(id, _)| *id).collect();
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "{kind}: ids in order {ids:?}"
            );
            let mine = one.until(|e| e["type"] == "mode_changed").await;
            assert!(
                mine.iter().all(|(_, e)| e["sessionId"] == session.as_str()),
                "{kind}"
            );
            served.settled(&session).await;

            // A reconnecting client gets what it missed.
            let (first_id, _) = seen[0];
            let mut again = served.events("/v1/events", Some(first_id)).await;
            let (id, replayed) = again.next().await;
            assert_eq!(id, first_id + 1, "{kind}");
            assert_eq!(replayed, seen[1].1, "{kind}");

            // Decided by the CLI, another process: the server sees the store change.
            let (session, entry) = served.plan_waiting().await;
            let decision_id = entry["decisionId"]
                .as_str()
                .expect("as expected")
                .to_owned();
            // The server's look at the store has found it waiting (a decision that starts and
            // stops waiting between two looks is not reported).
            all.until(|e| e["type"] == "decision_waiting" && e["sessionId"] == session.as_str())
                .await;
            let out = Command::new(env!("CARGO_BIN_EXE_agent-controller"))
                .args([
                    "decide",
                    "--store",
                    &spec,
                    &session,
                    "--approve",
                    "--config",
                    SHIPPED,
                ])
                .arg("--workspace")
                .arg(ws.path())
                .output()
                .expect("decide");
            assert!(
                out.status.success(),
                "{kind}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let seen = all
                .until(|e| {
                    e["type"] == "decision_settled"
                        && e["sessionId"] == session.as_str()
                        && e["decisionId"] == decision_id.as_str()
                })
                .await;
            let settled = &seen.last().expect("as expected").1;
            assert_eq!(settled["modeId"], "build", "{kind}: {settled}");
            // Read over the API, the session is as the CLI left it.
            let (_, after) = served.get(&format!("/v1/sessions/{session}")).await;
            assert_eq!(after["modeId"], "build", "{kind}: {after}");
            assert_eq!(after["pending"], json!([]), "{kind}: {after}");
        });
    }
}

#[test]
fn a_bind_past_loopback_needs_a_token_from_the_environment() {
    let ws = Workspace::new();
    let out = Command::new(env!("CARGO_BIN_EXE_agent-controller"))
        .args([
            "serve",
            "--config",
            SHIPPED,
            "--bind",
            "0.0.0.0:0",
            "--store",
        ])
        .arg(ws.path().join("sessions"))
        .arg("--workspace")
        .arg(ws.path())
        .env_remove("AGENT_CONTROLLER_TOKEN")
        .env_remove("AGENT_CONTROLLER_TOKENS")
        .output()
        .expect("serve");
    assert_eq!(out.status.code(), Some(common::cli::INVALID));
    assert!(out.stdout.is_empty(), "nothing was served");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
}

#[test]
fn sigterm_stops_the_server() {
    let ws = Workspace::new();
    let mut served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    let pid = served.child.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let start = Instant::now();
    loop {
        if let Some(status) = served.child.try_wait().expect("wait") {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(start.elapsed() < WAIT, "still serving after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}
