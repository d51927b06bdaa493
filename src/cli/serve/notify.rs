//! `serve --notify URL`: a JSON notification POSTed to each URL when a decision starts waiting
//! and when it is decided, signed with HMAC-SHA256 over the exact body
//! (`X-Agent-Controller-Signature: sha256=HEX`, the key from [`SECRET_VAR`]), so a chat bot can
//! relay it and check it came from this server. Each URL has a queue of its own and a task that
//! delivers in order, with a timeout per attempt and a bounded number of retries with backoff;
//! a full queue drops the notification with a warning. Nothing here ever waits on a request of
//! the API.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_controller::display::neutralize_line;
use agent_controller::event::{DecidedRecord, SuspensionKind};
use agent_controller::store::{PendingChange, PendingKind, SessionStore};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc;

/// The environment variable that holds the key the notifications are signed with.
pub(crate) const SECRET_VAR: &str = "AGENT_CONTROLLER_WEBHOOK_SECRET";

/// The header that carries the signature, `sha256=HEX`.
pub(crate) const SIGNATURE_HEADER: &str = "x-agent-controller-signature";

/// How long one attempt may take, connecting included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How many times a notification is sent at most (the first attempt and the retries).
const ATTEMPTS: u32 = 4;

/// The wait before the first retry; it doubles for each further one.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// How many notifications wait, per URL and for signing, before new ones are dropped.
const QUEUE: usize = 1024;

/// What `serve` notifies of; cheap to clone.
#[derive(Clone)]
pub(crate) struct Notifier {
    changes: mpsc::Sender<PendingChange>,
}

/// What a notification is built with.
struct Source {
    /// The base of the links, without a trailing `/`.
    base: String,
    store: Arc<dyn SessionStore>,
    /// The kind of each decision that waits, to name it once it is decided.
    kinds: HashMap<(String, String), PendingKind>,
}

impl Notifier {
    /// Starts the delivery to `urls` (none: `None`) of notifications linking to the page at
    /// `base`, signed with the key in [`SECRET_VAR`].
    ///
    /// # Errors
    /// When URLs are given and the key is not set (or empty), or the HTTP client cannot be
    /// built: the message says which.
    pub(crate) fn start(
        urls: &[String],
        base: &str,
        store: Arc<dyn SessionStore>,
    ) -> Result<Option<Self>, String> {
        if urls.is_empty() {
            return Ok(None);
        }
        let secret = std::env::var(SECRET_VAR).unwrap_or_default();
        if secret.is_empty() {
            return Err(format!(
                "--notify needs the key its notifications are signed with: set {SECRET_VAR} (a long random string the receiver knows too); nothing was served"
            ));
        }
        // Err means another TLS provider is installed already, which reqwest then uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client of --notify: {e}"))?;
        let secret: Arc<[u8]> = Arc::from(secret.into_bytes());
        let queues: Vec<mpsc::Sender<Arc<[u8]>>> = urls
            .iter()
            .map(|url| {
                let (tx, rx) = mpsc::channel(QUEUE);
                tokio::spawn(deliver(client.clone(), url.clone(), secret.clone(), rx));
                tx
            })
            .collect();
        let (changes, rx) = mpsc::channel(QUEUE);
        let source = Source {
            base: base.trim_end_matches('/').to_owned(),
            store,
            kinds: HashMap::new(),
        };
        tokio::spawn(build(source, rx, queues));
        Ok(Some(Self { changes }))
    }

    /// Notifies of `change`, without waiting: dropped with a warning when too many wait.
    pub(crate) fn notify(&self, change: &PendingChange) {
        if self.changes.try_send(change.clone()).is_err() {
            note!("warning: serve: a notification was dropped (too many wait to be sent)");
        }
    }
}

/// Turns each change into its body and queues it for every URL.
async fn build(
    mut source: Source,
    mut changes: mpsc::Receiver<PendingChange>,
    queues: Vec<mpsc::Sender<Arc<[u8]>>>,
) {
    while let Some(change) = changes.recv().await {
        let Some(body) = source.body(&change).await else {
            continue;
        };
        let Ok(bytes) = serde_json::to_vec(&body) else {
            continue;
        };
        let bytes: Arc<[u8]> = Arc::from(bytes);
        for queue in &queues {
            if queue.try_send(bytes.clone()).is_err() {
                note!("warning: serve: a notification was dropped (its receiver is behind)");
            }
        }
    }
}

impl Source {
    /// The notification of `change`: its `type`, the session and decision, the decision's
    /// `kind`, the `link` to it in the page, when it was sent (`sentAt`, milliseconds since the
    /// epoch, so a receiver can refuse an old one played again), and what waits (`decision`,
    /// as `pending --json` lists it) or how it was decided (`decided`, the audit record, and
    /// `modeId`, the session's mode after it).
    async fn body(&mut self, change: &PendingChange) -> Option<Value> {
        let sent_at = agent_controller::deadline::millis_since_epoch(std::time::SystemTime::now());
        match change {
            PendingChange::DecisionWaiting {
                session_id,
                decision_id,
                decision,
            } => {
                self.kinds
                    .insert((session_id.clone(), decision_id.clone()), decision.kind);
                Some(json!({
                    "type": "decision_waiting",
                    "sessionId": session_id,
                    "decisionId": decision_id,
                    "kind": decision.kind,
                    "link": self.link(session_id, decision_id),
                    "sentAt": sent_at,
                    "decision": decision,
                }))
            }
            PendingChange::DecisionSettled {
                session_id,
                decision_id,
                mode_id,
            } => {
                let known = self
                    .kinds
                    .remove(&(session_id.clone(), decision_id.clone()));
                let decided = self.decided(session_id, decision_id).await;
                let kind = known.or_else(|| decided.as_ref().map(kind_of));
                let mut body = json!({
                    "type": "decision_settled",
                    "sessionId": session_id,
                    "decisionId": decision_id,
                    "link": self.link(session_id, decision_id),
                    "sentAt": sent_at,
                });
                if let Some(kind) = kind {
                    body["kind"] = json!(kind);
                }
                if let Some(mode_id) = mode_id {
                    body["modeId"] = json!(mode_id);
                }
                if let Some(decided) = decided {
                    body["decided"] = json!(decided);
                }
                Some(body)
            }
            _ => None,
        }
    }

    /// The decision's place in the page: `{base}/#/sessions/{sid}/decisions/{did}` (the ids
    /// are of URL-safe characters, as the store and the API check them).
    fn link(&self, session_id: &str, decision_id: &str) -> String {
        format!(
            "{}/#/sessions/{session_id}/decisions/{decision_id}",
            self.base
        )
    }

    /// The audit record of decision `decision_id` in session `session_id`, if the store has it.
    async fn decided(&self, session_id: &str, decision_id: &str) -> Option<DecidedRecord> {
        let record = self.store.load(session_id).await.ok()??;
        record
            .history
            .iter()
            .chain(&record.last_decided)
            .rev()
            .find(|d| d.decision_id == decision_id)
            .cloned()
    }
}

/// The kind of the decision `decided` records.
fn kind_of(decided: &DecidedRecord) -> PendingKind {
    match (&decided.tool_name, &decided.suspension_kind) {
        (_, Some(SuspensionKind::Question)) => PendingKind::Question,
        (_, Some(_)) => PendingKind::Suspension,
        (Some(_), None) => PendingKind::ToolCall,
        (None, None) => PendingKind::Plan,
    }
}

/// `sha256=HEX`: the HMAC-SHA256 of `body` under `secret`.
pub(crate) fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        // HMAC takes a key of any length.
        Err(_) => return String::new(),
    };
    mac.update(body);
    let code = mac.finalize().into_bytes();
    let hex: String = code.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Sends each body of `bodies` to `url` in order: each attempt within [`TIMEOUT`]; a network
/// error, a 5xx or a 429 is tried again after a backoff, at most [`ATTEMPTS`] times in all;
/// another answer ends it (a 4xx says the receiver will not take it).
async fn deliver(
    client: reqwest::Client,
    url: String,
    secret: Arc<[u8]>,
    mut bodies: mpsc::Receiver<Arc<[u8]>>,
) {
    while let Some(body) = bodies.recv().await {
        let signed = signature(&secret, &body);
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            let sent = client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(SIGNATURE_HEADER, &signed)
                .body(body.to_vec())
                .send()
                .await;
            let why = match sent {
                Ok(answer) if answer.status().is_success() => break,
                Ok(answer)
                    if !(answer.status().is_server_error()
                        || answer.status() == reqwest::StatusCode::TOO_MANY_REQUESTS) =>
                {
                    note!(
                        "warning: serve: {} refused a notification: {}",
                        neutralize_line(&url),
                        answer.status()
                    );
                    break;
                }
                Ok(answer) => answer.status().to_string(),
                Err(e) => e.to_string(),
            };
            if attempt == ATTEMPTS {
                note!(
                    "warning: serve: a notification to {} was not delivered after {ATTEMPTS} attempts: {}",
                    neutralize_line(&url),
                    neutralize_line(&why)
                );
                break;
            }
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
