//! The approval page of `agent-controller serve`: its headers and assets over plain HTTP, and the
//! page itself in a real browser. The browser test starts the `serve` binary on loopback (port 0,
//! the scripted model, a file store), lets three sessions wait (a plan, a hostile plan, a
//! question; a stored record that cannot be read beside them), and runs `tests/browser/approve.mjs`: playwright-core (pinned by
//! `tests/browser/package-lock.json`) driving Debian's chromium headless, at desktop size and at
//! 390x844. It enters the token, sees the plan's title and text, approves it (a second open page
//! sees it go), rejects the hostile plan with feedback and a comment (its `<script>`, bidi
//! override, zero-width space and escape sequence shown, none of them run or hidden) and answers
//! the question; the CLI (`sessions --json`) then shows where each session went. Screenshots of
//! each state go to `target/browser-artifacts/`.
//!
//! `scripts/browser-deps` installs chromium (apt) and the npm packages (`npm ci`); CI runs it
//! first. Without them the test fails saying so, unless `AGENT_CONTROLLER_SKIP_BROWSER=1`.
#![cfg(feature = "cli")]

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Workspace;
use common::cli::SHIPPED;
use serde_json::{Value, json};

const TOKEN: &str = "page-token-0123456789";
const WAIT: Duration = Duration::from_secs(30);
/// How long the browser script may take before it counts as hung.
const BROWSER_PATIENCE: Duration = Duration::from_secs(180);
const CHROMIUM: &str = "/usr/bin/chromium";

/// A `serve` process on the file store `sessions` of a workspace; killed when dropped.
struct Served {
    child: Child,
    base: String,
    store: String,
    client: reqwest::Client,
}

impl Served {
    fn start(ws: &Workspace) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let store = ws.path().join("sessions").display().to_string();
        let mut child = crate::common::agent_controller()
            .args(["serve", "--store", &store, "--config", SHIPPED])
            .args(["--bind", "127.0.0.1:0", "--workspace"])
            .arg(ws.path())
            .env("AGENT_CONTROLLER_TOKEN", TOKEN)
            .env_remove("AGENT_CONTROLLER_TOKENS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut served = Self {
            child,
            base: String::new(),
            store,
            client: reqwest::Client::new(),
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
        served
    }

    /// Starts a session in mode `plan` with `message`; its id once a decision waits in it, and
    /// that decision as `GET /v1/pending` lists it.
    async fn waiting(&self, message: &str) -> (String, Value) {
        let response = self
            .client
            .post(format!("{}/v1/sessions", self.base))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(json!({ "modeId": "plan", "message": message }).to_string())
            .send()
            .await
            .expect("POST /v1/sessions");
        assert_eq!(response.status(), reqwest::StatusCode::CREATED);
        let session: Value = response.json().await.expect("JSON");
        let id = session["sessionId"].as_str().expect("id").to_owned();
        let start = Instant::now();
        loop {
            let listing: Value = self
                .client
                .get(format!("{}/v1/pending", self.base))
                .bearer_auth(TOKEN)
                .send()
                .await
                .expect("GET /v1/pending")
                .json()
                .await
                .expect("JSON");
            let found = listing["pending"]
                .as_array()
                .expect("pending")
                .iter()
                .find(|e| e["sessionId"] == id.as_str())
                .cloned();
            if let Some(entry) = found {
                return (id, entry);
            }
            assert!(start.elapsed() < WAIT, "nothing waits in {id}: {listing}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Each session's mode, as `agent-controller sessions --json` lists it.
    fn modes(&self) -> Vec<(String, String)> {
        let out = crate::common::agent_controller()
            .args(["sessions", "--store", &self.store, "--json"])
            .output()
            .expect("run sessions");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| {
                let v: Value = serde_json::from_str(line).expect("a JSON line");
                let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
                (field("sessionId"), field("modeId"))
            })
            .collect()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn the_page_is_served_without_a_token_with_its_security_headers() {
    let ws = Workspace::new();
    let served = Served::start(&ws);
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/assets/page.js", "text/javascript; charset=utf-8"),
        ("/assets/page.css", "text/css; charset=utf-8"),
    ] {
        let response = served
            .client
            .get(format!("{}{path}", served.base))
            .header("origin", "https://evil.example")
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), reqwest::StatusCode::OK, "{path}");
        let headers = response.headers();
        assert_eq!(headers["content-type"], content_type, "{path}");
        let csp = headers["content-security-policy"].to_str().expect("ASCII");
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert!(
            headers
                .keys()
                .all(|k| !k.as_str().starts_with("access-control-")),
            "{path}: {headers:?}"
        );
        let body = response.text().await.expect("body");
        if path == "/" {
            // No inline script (the policy would block it) and no data in the page.
            assert!(body.contains("<script src=\"/assets/page.js\""), "{body}");
            assert!(!body.contains("<script>"), "{body}");
        }
        if path == "/assets/page.js" {
            // Data is only ever written as text.
            assert!(!body.contains("innerHTML"), "the script uses innerHTML");
        }
    }
    // The API still wants the token.
    let response = served
        .client
        .get(format!("{}/v1/pending", served.base))
        .send()
        .await
        .expect("GET");
    assert_eq!(response.status(), reqwest::StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn pending_entries_carry_their_texts_as_shown() {
    let ws = Workspace::new();
    let served = Served::start(&ws);
    let (_, entry) = served
        .waiting("Dark \u{202e}mode\u{200b} \u{1b}[2K<b>x</b>")
        .await;
    let shown = &entry["shown"];
    assert_eq!(
        shown["title"], "Dark \\u{202e}mode\\u{200b} \\u{1b}[2K<b>x</b>",
        "{entry}"
    );
    assert_eq!(
        shown["lines"][0],
        "# Dark \\u{202e}mode\\u{200b} \\u{1b}[2K<b>x</b>"
    );
    assert_eq!(shown["targetModeIds"], json!(["build"]));
    assert_eq!(shown["sha256"], entry["sha256"]);
    // The raw fields are as `pending --json` lists them.
    assert_eq!(
        entry["title"],
        "Dark \u{202e}mode\u{200b} \u{1b}[2K<b>x</b>"
    );
}

/// The directory of the browser test's npm packages, or `None` when the test is to be skipped
/// (`AGENT_CONTROLLER_SKIP_BROWSER=1`). Panics, saying how to install them, when chromium or the
/// packages are missing.
fn browser_dir() -> Option<PathBuf> {
    if std::env::var("AGENT_CONTROLLER_SKIP_BROWSER").is_ok_and(|v| v == "1") {
        eprintln!("AGENT_CONTROLLER_SKIP_BROWSER=1: the browser test of the page is skipped");
        return None;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    let installed = dir.join("node_modules/playwright-core/package.json");
    let missing: Vec<String> = [Path::new(CHROMIUM), installed.as_path()]
        .iter()
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "the browser test of serve's page needs {}: run scripts/browser-deps (apt installs \
         chromium, npm ci installs playwright-core in tests/browser), or set \
         AGENT_CONTROLLER_SKIP_BROWSER=1 to skip it",
        missing.join(" and ")
    );
    Some(dir)
}

#[tokio::test]
async fn a_real_browser_approves_rejects_and_answers_on_the_page() {
    let Some(dir) = browser_dir() else {
        return;
    };
    let ws = Workspace::new();
    let served = Served::start(&ws);
    let (plan, _) = served.waiting("Add dark mode").await;
    let hostile_title = "Evil <script>window.__pwned=1</script> \u{202e}gpj.exe \u{200b}zw \u{1b}[31mred <img src=x onerror=alert(1)>";
    let (hostile, hostile_entry) = served.waiting(hostile_title).await;
    let (question, _) = served
        .waiting("ask me which database to use: Postgres, SQLite")
        .await;

    // A stored record that cannot be read: the page says so, with its session and why.
    let garbage = Path::new(&served.store).join("garbage.pending.json");
    std::fs::write(&garbage, "{ not json").expect("a garbage record");

    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser-artifacts");
    let _ = std::fs::remove_dir_all(&artifacts);
    let mut child = Command::new("node")
        .arg("approve.mjs")
        .current_dir(&dir)
        .env("SERVE_URL", &served.base)
        .env("SERVE_TOKEN", TOKEN)
        .env("ARTIFACTS", &artifacts)
        .env("PLAN_TITLE", "Add dark mode")
        .env(
            "HOSTILE_TITLE",
            hostile_entry["shown"]["title"]
                .as_str()
                .expect("shown title"),
        )
        .env("QUESTION", "Which database to use?")
        .env("ANSWER", "SQLite")
        .env("UNREADABLE", "garbage")
        .stdin(Stdio::null())
        .spawn()
        .expect("node runs (Node 20 is needed for the browser test)");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break status;
        }
        if start.elapsed() > BROWSER_PATIENCE {
            let _ = child.kill();
            panic!("the browser script hung for {BROWSER_PATIENCE:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        status.success(),
        "the browser script failed ({status}); its screenshots are in {}",
        artifacts.display()
    );
    for shot in [
        "desktop-1-token",
        "desktop-2-pending",
        "desktop-3-approved",
        "desktop-4-second-page",
        "phone-1-pending",
        "phone-3-revised",
        "phone-5-answered",
    ] {
        assert!(
            artifacts.join(format!("{shot}.png")).exists(),
            "no screenshot {shot}"
        );
    }

    std::fs::remove_file(&garbage).expect("the garbage record goes");
    // The CLI sees where each session went: the approved plan handed over to `build`; the
    // rejected one and the answered question still plan.
    let start = Instant::now();
    loop {
        let modes = served.modes();
        let mode = |id: &str| {
            modes
                .iter()
                .find(|(s, _)| s == id)
                .map(|(_, m)| m.clone())
                .unwrap_or_default()
        };
        if mode(&plan) == "build" {
            assert_eq!(mode(&hostile), "plan", "{modes:?}");
            assert_eq!(mode(&question), "plan", "{modes:?}");
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "the plan was not approved: {modes:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The rejection's feedback reached the model: its revision waits, pinned by a new sha256.
    let out = crate::common::agent_controller()
        .args(["pending", "--store", &served.store, "--json"])
        .output()
        .expect("run pending");
    let pending = String::from_utf8_lossy(&out.stdout);
    let revised = pending
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["sessionId"] == hostile.as_str())
        .unwrap_or_else(|| panic!("the hostile plan's revision waits: {pending}"));
    assert!(
        revised["plan"]
            .as_str()
            .is_some_and(|p| p.contains("Addressed: too risky")),
        "{revised}"
    );
    assert_ne!(revised["sha256"], hostile_entry["sha256"]);
}
