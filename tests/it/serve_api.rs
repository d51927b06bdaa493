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
const SECRET: &str = "webhook-secret-0123456789";
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
        Self::start_under(ws, spec, std::path::Path::new(SHIPPED), &[])
    }

    /// A server under the config in file `config`, with the further arguments `more`.
    fn start_under(ws: &Workspace, spec: &str, config: &std::path::Path, more: &[&str]) -> Self {
        Self::start_with_env(ws, spec, config, more, &[])
    }

    /// [`Served::start_under`] with the further environment variables `env`.
    fn start_with_env(
        ws: &Workspace,
        spec: &str,
        config: &std::path::Path,
        more: &[&str],
        env: &[(&'static str, String)],
    ) -> Self {
        // Built before the server starts, so a failure here leaves no process behind. With every
        // feature on, reqwest is built with rustls and no provider: plain HTTP only needs one
        // installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let mut child = crate::common::agent_controller()
            .args(["serve", "--store", spec, "--bind", "127.0.0.1:0"])
            .arg("--config")
            .arg(config)
            .args(more)
            .arg("--workspace")
            .arg(ws.path())
            .env("AGENT_CONTROLLER_TOKEN", TOKEN)
            .env("AGENT_CONTROLLER_WEBHOOK_SECRET", SECRET)
            .env_remove("AGENT_CONTROLLER_TOKENS")
            .envs(env.iter().map(|(k, v)| (*k, v)))
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

    /// The session once decision `decision_id` no longer waits in it and no run is running.
    /// A session shows what waits as the last operation on it left it, and a decision holds
    /// the session from when it is taken until the run it carries on ends: so the decision was
    /// taken and nothing of it still goes on.
    async fn decided(&self, id: &str, decision_id: &str) -> Value {
        let start = Instant::now();
        loop {
            let (status, session) = self.get(&format!("/v1/sessions/{id}")).await;
            assert_eq!(status, StatusCode::OK, "{session}");
            let waits = session["pending"]
                .as_array()
                .expect("pending")
                .iter()
                .any(|p| p["decisionId"] == decision_id);
            if !waits && session["runState"] != "running" {
                return session;
            }
            assert!(
                start.elapsed() < WAIT,
                "{decision_id} was never taken: {session}"
            );
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
        // Issue 40: a session's view documents its last plan report.
        let view = &document["components"]["schemas"]["SessionView"]["properties"];
        assert_eq!(view["planReport"]["type"], "object", "{view}");
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
            assert!(
                before.get("planReport").is_none(),
                "{kind}: no run of a plan yet: {before}"
            );
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
            // Issue 40: the session shows the report of its run of the approved plan.
            let report = &after["planReport"];
            assert_eq!(report["modeId"], "build", "{kind}: {after}");
            assert_eq!(report["decisionId"], entry["decisionId"], "{kind}: {after}");
            assert_eq!(report["reason"], "completed", "{kind}: {after}");
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
        let missing =
            json!({ "action": "approved", "steps": [1, 9], "sha256": entry["sha256"] }).to_string();
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
        // The payload listed the steps by their numbers; the report counts those approved.
        assert_eq!(entry["steps"][2]["number"], 3, "{entry}");
        let after = served.settled(&session).await;
        assert_eq!(
            after["planReport"]["stepsApproved"],
            json!([1, 3]),
            "{after}"
        );
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
            let out = crate::common::agent_controller()
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
    let out = crate::common::agent_controller()
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

/// The shipped config with its `build` mode offering only `read_file` and `list_files`: the
/// shipped one lets `build` do more (every tool).
fn narrow_build() -> String {
    let shipped = std::fs::read_to_string(SHIPPED).expect("the shipped config");
    let narrow = shipped.replace(
        "id = \"build\"\n",
        "id = \"build\"\navailableTools = [\"read_file\", \"list_files\"]\n",
    );
    assert_ne!(narrow, shipped);
    narrow
}

#[test]
fn a_session_is_served_under_the_config_it_ran_under_never_a_wider_one() {
    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let ran_under = ws.path().join("a.toml");
    std::fs::write(&ran_under, narrow_build()).expect("write");
    let (session, path, decision) = {
        let served = Served::start_under(&ws, &spec, &ran_under, &[]);
        runtime().block_on(async {
            let (session, entry) = served.plan_waiting().await;
            let path = format!(
                "/v1/sessions/{session}/decisions/{}",
                entry["decisionId"].as_str().expect("as expected")
            );
            let decision = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
            (session, path, decision)
        })
    };
    let refused = |served: &Served, why: &str| {
        runtime().block_on(async {
            let (status, body) = served.post(&path, &decision).await;
            assert_eq!(status, StatusCode::CONFLICT, "{why}: {body}");
            assert_eq!(body["error"]["kind"], "wrong_state", "{why}: {body}");
            let message = body["error"]["message"].as_str().expect("a message");
            assert!(
                message.contains("do more than the one it ran under"),
                "{why}: {message}"
            );
            assert!(
                message.contains("mode `build` offers every tool"),
                "{why}: {message}"
            );
            // Nothing was decided: the plan still waits.
            let still = served.waiting_in(&session).await;
            assert_eq!(still["kind"], "plan", "{why}");
        });
    };
    // The file it ran under is gone: the server's own config, which lets `build` do more, is
    // refused as `decide` refuses it.
    let kept = ws.path().join("a.toml.kept");
    std::fs::rename(&ran_under, &kept).expect("rename");
    refused(
        &Served::start_under(&ws, &spec, std::path::Path::new(SHIPPED), &[]),
        "the server's config widens",
    );
    // The file it ran under now lets `build` do more: refused, though the server's own config
    // is the narrow one.
    std::fs::write(&ran_under, std::fs::read(SHIPPED).expect("read")).expect("write");
    refused(
        &Served::start_under(&ws, &spec, &kept, &[]),
        "the recorded file widens",
    );
    // The file it ran under, as it was: the run is carried on under it, whatever the server's
    // own config.
    std::fs::rename(&kept, &ran_under).expect("rename");
    let served = Served::start_under(&ws, &spec, std::path::Path::new(SHIPPED), &[]);
    runtime().block_on(async {
        let (status, taken) = served.post(&path, &decision).await;
        assert_eq!(status, StatusCode::OK, "{taken}");
        assert_eq!(taken["modeId"], "build");
        let after = served.settled(&session).await;
        assert_eq!(after["runState"], "completed", "{after}");
    });
}

/// Whether `signature` (`sha256=HEX`) is the HMAC-SHA256 of `body` under [`SECRET`], checked as
/// the guide tells a receiver to check it.
fn signed(body: &[u8], signature: &str) -> bool {
    use hmac::{Hmac, KeyInit, Mac};
    let Some(hex) = signature.strip_prefix("sha256=") else {
        return false;
    };
    let Some(code) = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
    else {
        return false;
    };
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).expect("any key");
    mac.update(body);
    mac.verify_slice(&code).is_ok()
}

#[test]
fn a_webhook_is_signed_retried_after_a_500_and_links_to_the_decision() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let rt = runtime();
    let receiver = rt.block_on(async {
        let receiver = MockServer::start().await;
        // The first notification fails once; every other one is taken.
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500))
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&receiver)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(204))
            .with_priority(2)
            .mount(&receiver)
            .await;
        receiver
    });
    let notify = format!("{}/hook", receiver.uri());
    let served = Served::start_under(
        &ws,
        &spec,
        std::path::Path::new(SHIPPED),
        &[
            "--notify",
            &notify,
            "--public-url",
            "https://inbox.example/approvals/",
        ],
    );
    rt.block_on(async {
        let (session, entry) = served.plan_waiting().await;
        let decision_id = entry["decisionId"]
            .as_str()
            .expect("as expected")
            .to_owned();
        let decision = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
        // Decided once the server has noticed it waiting (a decision that starts and stops
        // waiting between two looks at the store is not notified).
        let bodies = |requests: Vec<wiremock::Request>| -> Vec<(Vec<u8>, Value)> {
            requests
                .into_iter()
                .map(|r| {
                    let signature = r
                        .headers
                        .get("x-agent-controller-signature")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    assert!(signed(&r.body, &signature), "signed: {signature}");
                    assert_eq!(r.url.path(), "/hook");
                    let value: Value = serde_json::from_slice(&r.body).expect("JSON");
                    (r.body, value)
                })
                .collect()
        };
        let start = Instant::now();
        let waiting = loop {
            let got = bodies(receiver.received_requests().await.expect("recorded"));
            let tries: Vec<_> = got
                .iter()
                .filter(|(_, v)| v["type"] == "decision_waiting")
                .collect();
            // The failed attempt and its retry, the very same bytes.
            if tries.len() >= 2 {
                assert_eq!(tries[0].0, tries[1].0, "a retry sends the same body");
                break tries[1].1.clone();
            }
            assert!(start.elapsed() < WAIT, "no retried notification: {got:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(waiting["sessionId"], session.as_str());
        assert_eq!(waiting["decisionId"], decision_id.as_str());
        assert_eq!(waiting["kind"], "plan");
        assert_eq!(waiting["decision"]["title"], "Add dark mode");
        assert_eq!(
            waiting["link"],
            format!("https://inbox.example/approvals/#/sessions/{session}/decisions/{decision_id}")
        );
        let path = format!("/v1/sessions/{session}/decisions/{decision_id}");
        let (status, _) = served.post(&path, &decision).await;
        assert_eq!(status, StatusCode::OK);
        let start = Instant::now();
        let settled = loop {
            let got = bodies(receiver.received_requests().await.expect("recorded"));
            if let Some((_, v)) = got.iter().find(|(_, v)| v["type"] == "decision_settled") {
                break v.clone();
            }
            assert!(start.elapsed() < WAIT, "no settled notification: {got:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(settled["decisionId"], decision_id.as_str());
        assert_eq!(settled["kind"], "plan");
        assert_eq!(settled["modeId"], "build");
        assert_eq!(settled["decided"]["outcome"], "approved", "{settled}");
        assert_eq!(settled["link"], waiting["link"]);
    });
}

#[test]
fn notify_without_a_secret_is_refused_at_start() {
    let ws = Workspace::new();
    let out = crate::common::agent_controller()
        .args([
            "serve",
            "--config",
            SHIPPED,
            "--bind",
            "127.0.0.1:0",
            "--notify",
            "http://127.0.0.1:9/hook",
            "--store",
        ])
        .arg(ws.path().join("sessions"))
        .arg("--workspace")
        .arg(ws.path())
        .env("AGENT_CONTROLLER_TOKEN", TOKEN)
        .env_remove("AGENT_CONTROLLER_WEBHOOK_SECRET")
        .output()
        .expect("serve");
    assert_eq!(out.status.code(), Some(common::cli::INVALID));
    assert!(out.stdout.is_empty(), "nothing was served");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("AGENT_CONTROLLER_WEBHOOK_SECRET"),
        "{stderr}"
    );
}

/// The model a session ran with is the one it carries on with, as `decide` does: a session
/// `run --model openai/planner` started, approved over HTTP on a server whose `--model` is the
/// scripted one, runs its next mode with `openai/planner` (checked on a scripted
/// OpenAI-compatible server); a session the server starts records `--model`'s.
#[cfg(feature = "openai")]
#[test]
fn a_stored_session_carries_on_with_the_model_it_ran_with() {
    use crate::common::openai_server::{ScriptedServer, calls, submit, text};
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join(".agent/plans")).expect("mkdir");
    std::fs::write(
        ws.path().join(".agent/plans/p.md"),
        "# Add dark mode\n\n1. Add a theme setting.\n",
    )
    .expect("write the plan");
    let scripted = ScriptedServer::start_blocking(vec![
        calls([submit("c1", ".agent/plans/p.md")]),
        text("built by the planner's model"),
    ]);
    let dir = ws.path().join("sessions");
    let spec = dir.display().to_string();
    let mut run = common::cli::command(
        ws.path(),
        &[
            "run",
            "--config",
            SHIPPED,
            "--store",
            &spec,
            "--mode",
            "plan",
            "--model",
            "openai/planner",
            "Add dark mode",
        ],
    );
    run.envs(scripted.env());
    let run = common::cli::output(run, "");
    assert_eq!(run.status.code(), Some(4), "{}", common::cli::text(&run));
    let served = Served::start_with_env(
        &ws,
        &spec,
        std::path::Path::new(SHIPPED),
        &[],
        &scripted.env(),
    );
    runtime().block_on(async {
        let (status, listing) = served.get("/v1/pending").await;
        assert_eq!(status, StatusCode::OK, "{listing}");
        let entry = listing["pending"][0].clone();
        let id = entry["sessionId"].as_str().expect("an id").to_owned();
        let path = format!(
            "/v1/sessions/{id}/decisions/{}",
            entry["decisionId"].as_str().expect("a decision id")
        );
        let decision = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
        let (status, taken) = served.post(&path, &decision).await;
        assert_eq!(status, StatusCode::OK, "{taken}");
        let settled = served.settled(&id).await;
        assert_eq!(settled["runState"], "completed", "{settled}");
        let models: Vec<Value> = scripted
            .bodies()
            .await
            .iter()
            .map(|b| b["model"].clone())
            .collect();
        assert_eq!(models, [json!("planner"), json!("planner")], "{settled}");
        // A session the server starts records the server's --model.
        let (started, _) = served.plan_waiting().await;
        let stored = std::fs::read_to_string(dir.join(format!("{started}.pending.json")))
            .expect("the pending record");
        let stored: Value = serde_json::from_str(&stored).expect("json");
        assert_eq!(stored["metadata"]["model"], "scripted", "{stored}");
    });
}

#[test]
fn ten_thousand_pending_decisions_come_a_bounded_page_at_a_time() {
    const MANY: usize = 10_000;
    let ws = Workspace::new();
    let dir = ws.path().join("sessions");
    let spec = dir.display().to_string();
    let session = {
        let served = Served::start(&ws, &spec);
        runtime().block_on(served.plan_waiting()).0
    };
    // The one record copied under other ids (written directly: no fsync per copy).
    let record = std::fs::read_to_string(dir.join(format!("{session}.pending.json")))
        .expect("the pending record");
    for i in 1..MANY {
        let id = format!("copy-{i:05}");
        std::fs::write(
            dir.join(format!("{id}.pending.json")),
            record.replace(&session, &id),
        )
        .expect("write a copy");
    }
    let served = Served::start(&ws, &spec);
    runtime().block_on(async {
        let (status, first) = served.get("/v1/pending").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            first["pending"].as_array().expect("a page").len(),
            100,
            "the default page"
        );
        let mut seen = std::collections::HashSet::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v1/pending?limit=1000&cursor={c}"),
                None => "/v1/pending?limit=1000".to_owned(),
            };
            let (status, page) = served.get(&path).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            let entries = page["pending"].as_array().expect("a page");
            assert!(entries.len() <= 1000);
            for entry in entries {
                let key = format!("{}/{}", entry["sessionId"], entry["decisionId"]);
                assert!(seen.insert(key), "listed once: {entry}");
            }
            pages += 1;
            assert!(pages <= MANY / 1000 + 1, "the pages end");
            match page["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        assert_eq!(seen.len(), MANY);
        assert_eq!(pages, MANY / 1000);
        let (status, _) = served.get("/v1/pending?limit=1001").await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        let (status, _) = served.get("/v1/pending?cursor=garbage").await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    });
}

/// `GET /v1/pending` pages in the store itself on every store: pages of any size cover what
/// waits once each, in the order of the whole list, and a cursor the server did not give is 422.
#[test]
fn pages_of_pending_decisions_cover_each_once_in_order_on_every_store() {
    let ws = Workspace::new();
    for (kind, spec, _keep) in stores(&ws) {
        let served = Served::start(&ws, &spec);
        runtime().block_on(async {
            for _ in 0..4 {
                served.plan_waiting().await;
            }
            let key = |e: &Value| format!("{}/{}", e["sessionId"], e["decisionId"]);
            let (status, whole) = served.get("/v1/pending?limit=1000").await;
            assert_eq!(status, StatusCode::OK, "{kind}: {whole}");
            assert!(whole.get("nextCursor").is_none(), "{kind}: {whole}");
            let all: Vec<String> = whole["pending"]
                .as_array()
                .expect("a page")
                .iter()
                .map(key)
                .collect();
            assert_eq!(all.len(), 4, "{kind}: {whole}");
            for limit in [1, 3] {
                let mut seen = Vec::new();
                let mut cursor: Option<String> = None;
                loop {
                    let path = match &cursor {
                        Some(c) => format!("/v1/pending?limit={limit}&cursor={c}"),
                        None => format!("/v1/pending?limit={limit}"),
                    };
                    let (status, page) = served.get(&path).await;
                    assert_eq!(status, StatusCode::OK, "{kind}: {page}");
                    let entries = page["pending"].as_array().expect("a page");
                    assert!(entries.len() <= limit, "{kind}: {page}");
                    seen.extend(entries.iter().map(key));
                    match page["nextCursor"].as_str() {
                        Some(next) => cursor = Some(encoded(next)),
                        None => break,
                    }
                    assert!(seen.len() <= all.len(), "{kind}: the pages end");
                }
                assert_eq!(seen, all, "{kind}, limit {limit}");
            }
            for bad in [
                "garbage",
                "1.s1",
                "x.s1.decision_1",
                "1.a%2Fb.decision_1",
                "1.s1.",
            ] {
                let (status, body) = served.get(&format!("/v1/pending?cursor={bad}")).await;
                assert_eq!(
                    status,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "{kind}: {bad}: {body}"
                );
            }
        });
    }
}

#[test]
fn a_hundred_sse_clients_each_get_every_event_and_one_that_reads_nothing_holds_none_up() {
    const CLIENTS: usize = 100;
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        // A client that asks for the events and never reads a byte of them.
        let address = served.base.trim_start_matches("http://").to_owned();
        let mut idle = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        let head = format!(
            "GET /v1/events HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        );
        tokio::io::AsyncWriteExt::write_all(&mut idle, head.as_bytes())
            .await
            .expect("send the head");
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(served.events("/v1/events", None).await);
        }
        let mut sessions = Vec::new();
        for _ in 0..3 {
            sessions.push(served.plan_waiting().await.0);
        }
        // Each client sees, in order, the same events up to the last session's plan waiting.
        let last = sessions.last().expect("as expected").clone();
        let mut first: Option<Vec<u64>> = None;
        for (n, client) in clients.iter_mut().enumerate() {
            let seen = client
                .until(|e| e["type"] == "decision_waiting" && e["sessionId"] == last.as_str())
                .await;
            let ids: Vec<u64> = seen.iter().map(|(id, _)| *id).collect();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "client {n}: in order");
            for session in &sessions {
                assert!(
                    seen.iter().any(|(_, e)| e["sessionId"] == session.as_str()),
                    "client {n} saw session {session}"
                );
            }
            match &first {
                None => first = Some(ids),
                Some(first) => assert_eq!(&ids, first, "client {n} saw what the first saw"),
            }
        }
        drop(idle);
    });
}

#[test]
fn a_client_that_hangs_up_mid_decision_changes_nothing() {
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        let (session, entry) = served.plan_waiting().await;
        let decision_id = entry["decisionId"].as_str().expect("as expected").to_owned();
        let path = format!("/v1/sessions/{session}/decisions/{decision_id}");
        let decision = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
        // Half the body sent, then the connection is closed.
        let address = served.base.trim_start_matches("http://").to_owned();
        let mut stream = tokio::net::TcpStream::connect(&address).await.expect("connect");
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
            decision.len(),
            &decision[..decision.len() / 2]
        );
        tokio::io::AsyncWriteExt::write_all(&mut stream, head.as_bytes())
            .await
            .expect("send half");
        drop(stream);
        // The plan still waits, in the store and in the session.
        let (status, view) = served.get(&format!("/v1/sessions/{session}")).await;
        assert_eq!(status, StatusCode::OK, "{view}");
        assert_eq!(view["modeId"], "plan", "{view}");
        assert_eq!(view["pending"][0]["decisionId"], decision_id.as_str(), "{view}");
        let still = served.waiting_in(&session).await;
        assert_eq!(still["decisionId"], decision_id.as_str());
        // Whole, and the client gone before the answer: the decision it finished is taken.
        let mut stream = tokio::net::TcpStream::connect(&address).await.expect("connect");
        let whole = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{decision}",
            decision.len(),
        );
        tokio::io::AsyncWriteExt::write_all(&mut stream, whole.as_bytes())
            .await
            .expect("send the whole");
        drop(stream);
        // Whether the server took it is not for the test to know (a handler is dropped when
        // its client goes, wherever it got to). If it did, the session is busy with the run
        // the decision carries on until that run ends: the client that stays is refused (409
        // busy) until then, and waits for the run to end before it asks again. Then it gets its
        // answer: taken now, or taken already by the client that hung up.
        let start = Instant::now();
        let (status, body) = loop {
            let (status, body) = served.post(&path, &decision).await;
            let busy = body["error"]["kind"] == "conflict"
                && body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("is busy"));
            if !busy {
                break (status, body);
            }
            assert!(start.elapsed() < WAIT, "busy for good: {body}");
            served.settled(&session).await;
        };
        assert!(
            status == StatusCode::OK || body["error"]["kind"] == "already_decided",
            "{status}: {body}"
        );
        // Either way the whole decision was taken, once: never a half-made one.
        let after = served.decided(&session, &decision_id).await;
        assert_eq!(after["modeId"], "build", "{after}");
        assert_eq!(after["pending"], json!([]), "{after}");
    });
}

#[test]
fn a_session_works_in_a_workspace_under_the_servers_and_nowhere_else() {
    let ws = Workspace::new();
    std::fs::create_dir(ws.path().join("sub")).expect("mkdir");
    let outside = tempfile::tempdir().expect("a directory outside");
    std::os::unix::fs::symlink(outside.path(), ws.path().join("away")).expect("symlink");
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        let body = json!({ "modeId": "plan", "message": "Add dark mode", "workspace": "sub" });
        let (status, view) = served.post("/v1/sessions", &body.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{view}");
        let sub = ws.path().join("sub").canonicalize().expect("canonical");
        assert_eq!(view["workspace"], sub.display().to_string(), "{view}");
        let id = view["sessionId"].as_str().expect("an id").to_owned();
        let (_, read) = served.get(&format!("/v1/sessions/{id}")).await;
        assert_eq!(read["workspace"], sub.display().to_string(), "{read}");
        assert_eq!(read["allowancesInForce"], json!([]), "{read}");
        let root = ws.path().canonicalize().expect("canonical");
        for bad in [
            json!(".."),
            json!("sub/../.."),
            json!(outside.path()),
            json!("/"),
            json!("away"),
            json!("no-such-dir"),
            json!(root.join("sessions").join("..").join("..")),
        ] {
            let body = json!({ "message": "hello", "workspace": bad });
            let (status, why) = served.post("/v1/sessions", &body.to_string()).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {why}");
            assert!(
                why["error"]["message"]
                    .as_str()
                    .expect("a message")
                    .contains("--workspace"),
                "{why}"
            );
        }
        // Nothing was started in any of them.
        let (_, listing) = served.get("/v1/pending").await;
        let sessions: std::collections::HashSet<&str> = listing["pending"]
            .as_array()
            .expect("pending")
            .iter()
            .filter_map(|e| e["sessionId"].as_str())
            .collect();
        assert!(sessions.len() <= 1, "{listing}");
    });
}

/// `text` with every byte but ASCII letters, digits, `-`, `_` and `~` percent-encoded.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::from),
        "[a-z0-9]{0,64}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-zA-Z]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A body a route might take, or not: garbage bytes, any JSON, or JSON shaped like a decision
/// or a new session or message with any values in it.
fn any_body() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let action = prop_oneof![
        Just(json!("approved")),
        Just(json!("rejected")),
        Just(json!("answered")),
        any_json(),
    ];
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        any_json().prop_map(|v| v.to_string().into_bytes()),
        (action, any_json(), any_json()).prop_map(|(action, sha256, feedback)| {
            json!({ "action": action, "sha256": sha256, "feedback": feedback })
                .to_string()
                .into_bytes()
        }),
        (any_json(), any_json(), any_json()).prop_map(|(mode, message, workspace)| {
            json!({ "modeId": mode, "message": message, "workspace": workspace })
                .to_string()
                .into_bytes()
        }),
        (any::<String>(), proptest::option::of("[a-z./]{0,12}")).prop_map(
            |(message, workspace)| {
                let mut body = json!({ "message": message });
                if let Some(workspace) = workspace {
                    body["workspace"] = json!(workspace);
                }
                body.to_string().into_bytes()
            }
        ),
    ]
}

#[test]
fn no_request_to_a_route_of_the_openapi_document_gets_a_5xx_or_an_undocumented_status() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    let rt = runtime();
    let (session, entry, document) = rt.block_on(async {
        let (session, entry) = served.plan_waiting().await;
        let (_, document) = served.get("/v1/openapi.json").await;
        (session, entry, document)
    });
    let decision = entry["decisionId"]
        .as_str()
        .expect("as expected")
        .to_owned();
    // (method, path template, documented statuses) of every route.
    let mut routes: Vec<(String, String, Vec<u16>)> = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("an item") {
            let statuses = operation["responses"]
                .as_object()
                .expect("responses")
                .keys()
                .map(|s| s.parse().expect("a status"))
                .collect();
            routes.push((method.to_uppercase(), path.clone(), statuses));
        }
    }
    assert!(routes.len() >= 10, "{routes:?}");
    let id = || {
        prop_oneof![
            Just(session.clone()),
            Just(decision.clone()),
            "[a-z0-9_-]{1,24}",
            "[ -~]{0,40}",
            any::<String>(),
            Just("..".to_owned()),
            "[a-z]{250,300}",
        ]
    };
    let query = proptest::option::of((
        proptest::option::of(prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            "[ -~]{0,8}"
        ]),
        proptest::option::of(any::<String>()),
        proptest::option::of(("[a-z]{1,8}", "[a-z]{0,8}")),
    ));
    let token = prop_oneof![
        Just(Some(TOKEN.to_owned())),
        Just(None),
        "[ -~]{0,30}".prop_map(Some)
    ];
    let cases = (0..routes.len(), id(), id(), query, any_body(), token);
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&cases, |(route, a, b, query, body, token)| {
        let (method, template, documented) = &routes[route];
        let mut path = template
            .replace("{sessionId}", &encoded(&a))
            .replace("{decisionId}", &encoded(&b));
        let ids = path != *template;
        if let Some((limit, cursor, other)) = &query {
            let mut pairs = Vec::new();
            if let Some(limit) = limit {
                pairs.push(format!("limit={}", encoded(limit)));
            }
            if let Some(cursor) = cursor {
                pairs.push(format!("cursor={}", encoded(cursor)));
            }
            if let Some((key, value)) = other {
                pairs.push(format!("{key}={value}"));
            }
            path = format!("{path}?{}", pairs.join("&"));
        }
        let status = rt.block_on(async {
            let mut request = match method.as_str() {
                "GET" => served.client.get(served.url(&path)),
                _ => served
                    .client
                    .post(served.url(&path))
                    .header("content-type", "application/json")
                    .body(body.clone()),
            };
            if let Some(token) = &token {
                request = request.header("authorization", format!("Bearer {token}"));
            }
            // The answer's head only: an event stream does not end.
            let response = tokio::time::timeout(WAIT, request.send())
                .await
                .expect("an answer in time")
                .expect("an answer");
            response.status().as_u16()
        });
        if status >= 500 {
            return Err(TestCaseError::fail(format!("{method} {path}: {status}")));
        }
        // An id of dots may take the request to another path (the URL is normalized): that
        // path's answer is a 404.
        let allowed = documented.contains(&status) || (ids && status == 404);
        if !allowed {
            return Err(TestCaseError::fail(format!(
                "{method} {path}: {status} is not one of {documented:?}"
            )));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The hostile-client pass (issue 39): the scheme of `Authorization` is case-insensitive
/// (RFC 9110, 11.1), so a client that sends `bearer TOKEN` is let in, with the right token only.
#[test]
fn the_bearer_scheme_is_taken_in_any_case_and_only_with_the_token() {
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        for (header, status) in [
            (format!("bearer {TOKEN}"), StatusCode::OK),
            (format!("BEARER {TOKEN}"), StatusCode::OK),
            (format!("Bearer {TOKEN}"), StatusCode::OK),
            (
                "bearer test-token-0123456780".to_owned(),
                StatusCode::UNAUTHORIZED,
            ),
            (format!("Basic {TOKEN}"), StatusCode::UNAUTHORIZED),
            (format!("Bearer{TOKEN}"), StatusCode::UNAUTHORIZED),
            (TOKEN.to_owned(), StatusCode::UNAUTHORIZED),
        ] {
            let answer = served
                .client
                .get(served.url("/v1/pending"))
                .header("authorization", &header)
                .send()
                .await
                .expect("GET");
            assert_eq!(answer.status(), status, "{header}");
        }
    });
}

/// The hostile-client pass (issue 39): a client that reconnects with the `Last-Event-ID` a
/// previous run of the server gave (the server was restarted) misses nothing the new one holds:
/// the new server's ids never fall at or below an id the old one gave.
#[test]
fn a_last_event_id_of_a_previous_server_misses_nothing_the_new_one_holds() {
    let ws = Workspace::new();
    let spec = ws.path().join("sessions").display().to_string();
    let before = {
        let served = Served::start(&ws, &spec);
        runtime().block_on(async {
            let mut all = served.events("/v1/events", None).await;
            // Two sessions here: more events than the next server will have given.
            let (first, _) = served.plan_waiting().await;
            let (second, _) = served.plan_waiting().await;
            let seen = all
                .until(|e| e["sessionId"] == second && e["type"] == "agent_end")
                .await;
            assert!(seen.iter().any(|(_, e)| e["sessionId"] == first));
            seen.last().expect("an event").0
        })
    };
    let served = Served::start(&ws, &spec);
    runtime().block_on(async {
        let (session, _) = served.plan_waiting().await;
        // Every event of the new session is in, before the client reconnects.
        drop(served.settled(&session).await);
        let mut again = served.events("/v1/events", Some(before)).await;
        let seen = tokio::time::timeout(
            Duration::from_secs(10),
            again.until(|e| e["sessionId"] == session && e["type"] == "agent_end"),
        )
        .await
        .unwrap_or_else(|_| {
            panic!("the events of session {session} are not replayed after id {before}")
        });
        assert!(seen.iter().all(|(id, _)| *id > before), "{seen:?}");
    });
}

/// The hostile-client pass (issue 39): a stored session whose recorded workspace, under
/// `--workspace` as written, now leads outside it (a directory swapped for a symlink) is
/// refused (409), and nothing is decided or run there.
#[test]
fn a_recorded_workspace_that_now_leads_outside_is_refused() {
    let ws = Workspace::new();
    std::fs::create_dir(ws.path().join("sub")).expect("mkdir");
    let outside = tempfile::tempdir().expect("a directory outside");
    let spec = ws.path().join("sessions").display().to_string();
    let (session, entry) = {
        let served = Served::start(&ws, &spec);
        runtime().block_on(async {
            let body = json!({ "modeId": "plan", "message": "Add dark mode", "workspace": "sub" });
            let (status, view) = served.post("/v1/sessions", &body.to_string()).await;
            assert_eq!(status, StatusCode::CREATED, "{view}");
            let id = view["sessionId"].as_str().expect("an id").to_owned();
            let entry = served.waiting_in(&id).await;
            drop(served.settled(&id).await);
            (id, entry)
        })
    };
    std::fs::remove_dir_all(ws.path().join("sub")).expect("rm sub");
    std::os::unix::fs::symlink(outside.path(), ws.path().join("sub")).expect("symlink");
    let served = Served::start(&ws, &spec);
    runtime().block_on(async {
        let decision = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
        let path = format!(
            "/v1/sessions/{session}/decisions/{}",
            entry["decisionId"].as_str().expect("an id")
        );
        let (status, why) = served.post(&path, &decision).await;
        assert_eq!(status, StatusCode::CONFLICT, "{why}");
        let (status, why) = served.get(&format!("/v1/sessions/{session}")).await;
        assert_eq!(status, StatusCode::CONFLICT, "{why}");
        // Still waiting, and nothing was written outside.
        let still = served.waiting_in(&session).await;
        assert_eq!(still["decisionId"], entry["decisionId"]);
        let written: Vec<_> = std::fs::read_dir(outside.path())
            .expect("read outside")
            .collect();
        assert!(written.is_empty(), "{written:?}");
    });
}

/// The hostile-model pass (issue 39): the answer schema of a tool's suspension, which the page
/// draws, comes through `shown` too, every hidden character as its escape (a bidi override in
/// a field's description read as other text).
#[test]
fn a_suspensions_answer_schema_is_shown_with_every_character_visible() {
    let summary: agent_controller::store::PendingSummary = serde_json::from_value(json!({
        "sessionId": "s", "runId": "run_1", "toolCallId": "call_1", "kind": "suspension",
        "decisionId": "decision_1", "modeId": "build", "targetModeId": "", "title": "",
        "sha256": "abc",
        "toolName": "deploy",
        "payload": { "message": "Deploy?" },
        "answerSchema": {
            "type": "object",
            "properties": { "ok": { "type": "boolean", "description": "yes\u{202e}on\u{200b}" } }
        },
        "updatedAt": 1
    }))
    .expect("a summary");
    let shown = serde_json::to_value(summary.shown()).expect("JSON");
    let schema = shown["answerSchema"]
        .as_str()
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(schema.contains("yes\\u{202e}on\\u{200b}"), "{schema}");
    assert!(
        !schema.contains('\u{202e}') && !schema.contains('\u{200b}'),
        "{schema}"
    );
}

/// Issue 39 (as `pending --json` does): a stored record that cannot be read is said by
/// `GET /v1/pending` (`unreadable`: its session id, where it is, why), not dropped in silence,
/// and the decisions that can be read are listed still.
#[test]
fn pending_over_http_says_which_records_cannot_be_read() {
    let ws = Workspace::new();
    let dir = ws.path().join("sessions");
    let served = Served::start(&ws, &dir.display().to_string());
    runtime().block_on(async {
        let (session, _) = served.plan_waiting().await;
        std::fs::write(dir.join("garbage.pending.json"), "{ not json").expect("garbage");
        let (status, listing) = served.get("/v1/pending").await;
        assert_eq!(status, StatusCode::OK, "{listing}");
        let pending = listing["pending"].as_array().expect("pending");
        assert!(
            pending.iter().any(|e| e["sessionId"] == session),
            "{listing}"
        );
        let unreadable = listing["unreadable"]
            .as_array()
            .unwrap_or_else(|| panic!("{listing}"));
        assert_eq!(unreadable.len(), 1, "{listing}");
        assert_eq!(unreadable[0]["sessionId"], "garbage", "{listing}");
        assert!(
            unreadable[0]["location"]
                .as_str()
                .is_some_and(|l| l.ends_with("garbage.pending.json")),
            "{listing}"
        );
        assert!(unreadable[0]["reason"].as_str().is_some(), "{listing}");
    });
}

/// The hostile-client pass (issue 39): SIGTERM stops the server while clients follow the
/// events (an open page does, always): their streams end, and the server exits, instead of
/// waiting for them for ever (and being killed mid-run by the supervisor's SIGKILL).
#[test]
fn sigterm_stops_the_server_while_clients_follow_the_events() {
    let ws = Workspace::new();
    let mut served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    let rt = runtime();
    let (mut all, mut one) = rt.block_on(async {
        let (session, _) = served.plan_waiting().await;
        let all = served.events("/v1/events", None).await;
        let one = served
            .events(&format!("/v1/sessions/{session}/events"), None)
            .await;
        (all, one)
    });
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
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "still serving 15 s after SIGTERM, with two clients following the events"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Both streams ended (no event, no error past the end).
    rt.block_on(async {
        for events in [&mut all, &mut one] {
            let end = tokio::time::timeout(WAIT, events.response.chunk())
                .await
                .expect("the stream ends");
            assert!(!matches!(end, Ok(Some(_))), "{end:?}");
        }
    });
}

/// The hostile-client pass (issue 39): a client that opens a connection and never finishes
/// its request's headers (slowloris; it needs no token) is cut off after a bound, instead of
/// holding the connection, and a file descriptor, for ever.
#[test]
fn a_client_that_never_finishes_its_headers_is_cut_off() {
    use std::io::{Read, Write};
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    let address = served.base.trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&address).expect("connect");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .expect("a part of the headers");
    stream
        .set_read_timeout(Some(Duration::from_secs(25)))
        .expect("timeout");
    let start = Instant::now();
    let mut buffer = [0u8; 256];
    let read = stream.read(&mut buffer);
    assert!(
        read.is_ok() && start.elapsed() < Duration::from_secs(25),
        "the connection is still open after {:?}: {read:?}",
        start.elapsed()
    );
    // The server still answers others.
    let mut other = std::net::TcpStream::connect(&address).expect("connect");
    other
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("a request");
    let mut answer = String::new();
    other.read_to_string(&mut answer).expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// The hostile-client pass (issue 39): over HTTP an identity is the token's name, never what
/// the body claims. With one unnamed token, a client that approves twice as `alice` and as
/// `bob` does not meet a quorum of two (the body's `decidedBy` is no identity): the plan still
/// waits, and the session stays in its mode.
#[test]
fn one_unnamed_token_cannot_meet_a_quorum_by_claiming_names() {
    let ws = Workspace::new();
    let shipped = std::fs::read_to_string(SHIPPED).expect("the shipped config");
    let quorum = shipped.replacen("id = \"plan\"\n", "id = \"plan\"\napprovers = 2\n", 1);
    assert_ne!(quorum, shipped, "the plan mode is found");
    let config = ws.path().join("quorum.toml");
    std::fs::write(&config, quorum).expect("config");
    let spec = ws.path().join("sessions").display().to_string();
    let served = Served::start_under(&ws, &spec, &config, &[]);
    runtime().block_on(async {
        let (session, entry) = served.plan_waiting().await;
        let path = format!(
            "/v1/sessions/{session}/decisions/{}",
            entry["decisionId"].as_str().expect("an id")
        );
        for who in ["alice", "bob"] {
            let decision =
                json!({ "action": "approved", "sha256": entry["sha256"], "decidedBy": who });
            let (status, answer) = served.post(&path, &decision.to_string()).await;
            assert!(
                status.is_client_error(),
                "an approval claimed as {who} is refused: {status} {answer}"
            );
        }
        let (_, view) = served.get(&format!("/v1/sessions/{session}")).await;
        assert_eq!(view["modeId"], "plan", "{view}");
        let still = served.waiting_in(&session).await;
        assert_eq!(still["decisionId"], entry["decisionId"]);
    });
}

/// What a raw HTTP/1.1 client reads on `stream` until the server closes it, within `patience`:
/// `None` when the connection is still open then.
fn read_until_closed(stream: &mut std::net::TcpStream, patience: Duration) -> Option<String> {
    use std::io::Read;
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buffer = [0u8; 4096];
    while start.elapsed() < patience {
        stream
            .set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        match stream.read(&mut buffer) {
            Ok(0) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buffer[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // Reset: closed too.
            Err(_) => return Some(String::from_utf8_lossy(&got).into_owned()),
        }
    }
    None
}

/// The hostile-client pass (issue 39): a client that sends a request's headers and then its
/// body a byte at a time, never all of it (`Content-Length: 1000`, one byte sent), holds no
/// connection for ever. With the token its request is answered 408 and the connection closed
/// once the body has not all come within the bound; without one it is answered 401 at once,
/// nothing read. An event stream opened before stays open past the bound: only bodies are
/// timed.
#[test]
fn a_body_that_never_finishes_is_answered_408_and_the_connection_closed() {
    use std::io::Write;
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    let rt = runtime();
    let mut events = rt.block_on(served.events("/v1/events", None));
    let address = served.base.trim_start_matches("http://").to_owned();
    let slow = |token: Option<&str>| {
        let mut stream = std::net::TcpStream::connect(&address).expect("connect");
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        let head = format!(
            "POST /v1/sessions HTTP/1.1\r\nHost: {address}\r\n{auth}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
        );
        stream
            .write_all(head.as_bytes())
            .expect("the head and a byte");
        stream
    };
    let mut stranger = slow(None);
    let answer = read_until_closed(&mut stranger, Duration::from_secs(10))
        .expect("without a token: answered and closed at once");
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");

    let mut holder = slow(Some(TOKEN));
    let start = Instant::now();
    let answer = read_until_closed(&mut holder, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("still open after {:?}", start.elapsed()));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"kind\":\"timeout\""), "{answer}");

    // The event stream opened before the bound is still open: it gets the next event.
    rt.block_on(async {
        let (session, _) = served.plan_waiting().await;
        events.until(|e| e["sessionId"] == session.as_str()).await;
    });
}

/// The hostile-client pass (issue 39): the events of a session that no store holds are 404,
/// as the session itself is, not a stream open for ever; those of a session the store holds
/// are a stream.
#[test]
fn the_events_of_an_unknown_session_are_404() {
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        let (status, why) = served.get("/v1/sessions/no-such-session").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{why}");
        let response = served
            .client
            .get(served.url("/v1/sessions/no-such-session/events"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let why: Value =
            serde_json::from_str(&response.text().await.expect("a body")).expect("JSON");
        assert_eq!(why["error"]["kind"], "not_found", "{why}");
        let (session, _) = served.plan_waiting().await;
        served
            .events(&format!("/v1/sessions/{session}/events"), Some(0))
            .await
            .until(|e| e["sessionId"] == session.as_str())
            .await;
    });
}

/// The hostile-client pass (issue 39): over HTTP an approval pins what it approves. An
/// approval without `sha256` (a page that approves "whatever waits now" could approve a plan
/// revised after the person read it) is 422 saying the field is missing, and nothing changes;
/// the same approval with the pin is taken.
#[test]
fn an_approval_without_its_sha256_is_422_and_changes_nothing() {
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        let (session, entry) = served.plan_waiting().await;
        let path = format!(
            "/v1/sessions/{session}/decisions/{}",
            entry["decisionId"].as_str().expect("an id")
        );
        for unpinned in [
            json!({ "action": "approved" }),
            json!({ "action": "approved", "targetModeId": "build", "feedback": "go" }),
            // A blank pin, a null one, an approval of some steps only, one that claims a name.
            json!({ "action": "approved", "sha256": " \t\n" }),
            json!({ "action": "approved", "sha256": "" }),
            json!({ "action": "approved", "sha256": null }),
            json!({ "action": "approved", "steps": [1] }),
            json!({ "action": "approved", "decidedBy": "alice" }),
        ] {
            let (status, why) = served.post(&path, &unpinned.to_string()).await;
            assert_eq!(
                status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{unpinned}: {why}"
            );
            assert_eq!(why["error"]["kind"], "invalid_input", "{why}");
            let message = why["error"]["message"].as_str().expect("a message");
            assert!(message.contains("`sha256`"), "{message}");
        }
        let (_, view) = served.get(&format!("/v1/sessions/{session}")).await;
        assert_eq!(view["modeId"], "plan", "{view}");
        let still = served.waiting_in(&session).await;
        assert_eq!(still["decisionId"], entry["decisionId"]);
        let pinned = json!({ "action": "approved", "sha256": entry["sha256"] }).to_string();
        let (status, taken) = served.post(&path, &pinned).await;
        assert_eq!(status, StatusCode::OK, "{taken}");
        assert_eq!(taken["modeId"], "build", "{taken}");
    });
}

/// The hostile-client pass (issue 39): a record that cannot be read is listed with `shown`,
/// its session id, location and reason as a person must read them (every character that could
/// hide or fake text as its escape), as every other text the page draws is: here a store
/// whose directory name holds a bidi override.
#[test]
fn an_unreadable_record_is_shown_with_every_character_visible() {
    let ws = Workspace::new();
    let dir = ws.path().join("sessions\u{202e}txt");
    let served = Served::start(&ws, &dir.display().to_string());
    runtime().block_on(async {
        served.plan_waiting().await;
        std::fs::write(dir.join("garbage.pending.json"), "{ not json").expect("garbage");
        let (status, listing) = served.get("/v1/pending").await;
        assert_eq!(status, StatusCode::OK, "{listing}");
        let shown = &listing["unreadable"][0]["shown"];
        assert_eq!(shown["sessionId"], "garbage", "{listing}");
        let location = shown["location"].as_str().expect("a location");
        assert!(location.contains("sessions\\u{202e}txt"), "{location}");
        assert!(!location.contains('\u{202e}'), "{location}");
        assert!(shown["reason"].as_str().is_some(), "{listing}");
        // The record as stored is listed too, for a client that acts on it.
        let raw = listing["unreadable"][0]["location"].as_str().expect("raw");
        assert!(raw.contains('\u{202e}'), "{raw}");
    });
}

/// The body of a chunked HTTP/1.1 answer in `raw` (head included), and whether its last chunk
/// came (the answer ended).
fn dechunked(raw: &[u8]) -> (String, bool) {
    let text = String::from_utf8_lossy(raw);
    let Some((_, mut rest)) = text.split_once("\r\n\r\n") else {
        return (String::new(), false);
    };
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 {
            return (body, true);
        }
        if after.len() < size + 2 {
            break;
        }
        body.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    (body, false)
}

/// The ids of the Server-Sent Events in `body`, those that came whole.
fn event_ids(body: &str) -> Vec<u64> {
    let whole = body.rsplit_once("\n\n").map_or("", |(whole, _)| whole);
    whole
        .split("\n\n")
        .flat_map(|block| block.lines())
        .filter_map(|line| line.strip_prefix("id:"))
        .filter_map(|id| id.trim().parse().ok())
        .collect()
}

/// A client of `GET /v1/events` on `served` that reads nothing until its test reads: a small
/// receive buffer, its request sent.
async fn silent_events_client(served: &Served) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let address: std::net::SocketAddr = served
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small buffer");
    let mut client = socket.connect(address).await.expect("connect");
    let head = format!(
        "GET /v1/events HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    );
    client.write_all(head.as_bytes()).await.expect("the head");
    client
}

/// The hostile-client pass (issue 39): a client that stops reading the events falls behind;
/// once past 1,024 events its stream ends (it is dropped: the stream's last chunk, or the
/// connection closed when it took nothing for 30 s), and never skips an event in silence: what
/// it got is every event up to where it ended, and reconnecting with `Last-Event-ID` gives it
/// the rest, as a client that kept reading got them. Meanwhile the other clients got every
/// event.
/// Starts sessions on `served` until a client that reads every event, as they come, has read
/// `count` of them; their ids. Each session's message is long, so that what the buffers between
/// a server and a client that stops reading hold is a few hundred events, not thousands.
async fn events_read_by_another_client(served: &Served, count: usize) -> Vec<u64> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut reader = served.events("/v1/events", None).await;
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    let reading = tokio::spawn(async move {
        let mut ids = Vec::new();
        while ids.len() < count {
            ids.push(reader.next().await.0);
            counted.store(ids.len(), Ordering::Release);
        }
        ids
    });
    let mut sessions = 0;
    while seen.load(Ordering::Acquire) < count {
        let message = format!("Plan {sessions} {}", "x".repeat(20_000));
        let body = json!({ "modeId": "plan", "message": message });
        let (status, why) = served.post("/v1/sessions", &body.to_string()).await;
        assert_eq!(status, StatusCode::CREATED, "{why}");
        sessions += 1;
        assert!(
            sessions < 1_000,
            "{} events only",
            seen.load(Ordering::Acquire)
        );
    }
    tokio::time::timeout(WAIT, reading)
        .await
        .expect("the reader got them")
        .expect("the reader")
}

#[test]
fn a_client_that_stops_reading_gets_the_end_of_its_stream_and_the_rest_on_reconnecting() {
    use tokio::io::AsyncReadExt;
    // Enough that it falls 1,024 events behind once the buffers between the two ends are full.
    const EVENTS: usize = 3_000;
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        // The slow client: a small receive buffer, and it reads nothing until told.
        let mut slow = silent_events_client(&served).await;
        let all = events_read_by_another_client(&served, EVENTS).await;

        // The slow client reads now: its stream ends, after a run of events with no gap.
        let mut raw = Vec::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let start = Instant::now();
        let body = loop {
            let (body, ended) = dechunked(&raw);
            if ended {
                break body;
            }
            assert!(
                start.elapsed() < WAIT,
                "the slow client's stream has not ended: {} events of {} read",
                event_ids(&body).len(),
                all.len()
            );
            match tokio::time::timeout(Duration::from_secs(1), slow.read(&mut buffer)).await {
                // Closed: it took nothing for longer than the server waits on a write.
                Ok(Ok(0) | Err(_)) => break body,
                Ok(Ok(n)) => raw.extend_from_slice(&buffer[..n]),
                Err(_) => {}
            }
        };
        let got = event_ids(&body);
        assert!(
            got.len() < all.len(),
            "it fell behind: {} events",
            got.len()
        );
        assert_eq!(
            got,
            all[..got.len()],
            "what it got is every event, in order, up to its end"
        );

        // Reconnecting with the last id it got: the rest, as the reader got them.
        let last = *got.last().expect("some events before it fell behind");
        let mut again = served.events("/v1/events", Some(last)).await;
        let end = *all.last().expect("events");
        let mut rest = Vec::new();
        while rest.last() != Some(&end) {
            rest.push(again.next().await.0);
        }
        assert_eq!(rest, all[got.len()..], "the replay is what it missed");
    });
}

/// The hostile-client pass (issue 39): a client that asks for the events and then takes
/// nothing more of them for good (its receive window stays shut) is cut off once the server's
/// writes to it have waited 30 seconds: it holds no connection, task or buffer for ever. What
/// it finds when it reads at last is the events the buffers held, then the connection closed,
/// not a stream that goes on.
#[test]
fn a_client_that_stops_reading_for_good_is_cut_off() {
    use tokio::io::AsyncReadExt;
    const EVENTS: usize = 1_500;
    let ws = Workspace::new();
    let served = Served::start(&ws, &ws.path().join("sessions").display().to_string());
    runtime().block_on(async {
        let mut stuck = silent_events_client(&served).await;
        // More events than the buffers between the two ends hold (as in the test above).
        events_read_by_another_client(&served, EVENTS).await;
        // Past the bound, with a margin.
        tokio::time::sleep(Duration::from_secs(40)).await;
        let mut raw = Vec::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let start = Instant::now();
        loop {
            match tokio::time::timeout(Duration::from_secs(1), stuck.read(&mut buffer)).await {
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(n)) => raw.extend_from_slice(&buffer[..n]),
                Err(_) => {}
            }
            let (body, ended) = dechunked(&raw);
            assert!(
                !ended && start.elapsed() < WAIT,
                "the connection is still open, 40 s after the client took nothing more ({} events read{})",
                event_ids(&body).len(),
                if ended { ", then the stream's end" } else { "" }
            );
        }
    });
}
