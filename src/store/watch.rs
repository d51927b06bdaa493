//! Waiting for what changes in the pending decisions of any store ([`PendingWatch`]): a host that
//! shows what waits (a web inbox, a chat relay) learns of a decision another process made
//! waiting, or took, without reading every session itself. On a store that pushes its changes
//! ([`SessionStore::change_notices`]: PostgreSQL's `LISTEN`/`NOTIFY`) it reads each session a
//! notice names as the notice arrives; on the others it polls
//! [`SessionStore::list_pending_decisions`], which works on every store.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;

use serde::Serialize;

use super::{PendingSummary, SessionStore, StoreError};

/// What [`SessionStore::change_notices`] returns: a stream of the ids of the sessions saved or
/// deleted, each as its write is committed; it ends after an `Err` (notices may have been
/// missed since).
pub type ChangeNotices = Pin<Box<dyn Stream<Item = Result<String, StoreError>> + Send>>;

/// A change of what waits in a store, as [`PendingWatch::changes`] finds it. Serialized with
/// its `type` (snake_case) and camelCase fields, as the events of a session are.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum PendingChange {
    /// A decision began to wait.
    DecisionWaiting {
        /// The session it waits in.
        session_id: String,
        /// The decision id.
        decision_id: String,
        /// What waits, as `pending --json` lists it.
        decision: Box<PendingSummary>,
    },
    /// A decision no longer waits: it was decided (here or by another process), cancelled, or
    /// it expired.
    DecisionSettled {
        /// The session it waited in.
        session_id: String,
        /// The decision id.
        decision_id: String,
        /// The mode the session is in now (an approved plan's target); absent when the session
        /// is gone.
        #[serde(skip_serializing_if = "Option::is_none")]
        mode_id: Option<String>,
    },
}

impl PendingChange {
    /// The session the change is in.
    pub fn session_id(&self) -> &str {
        match self {
            PendingChange::DecisionWaiting { session_id, .. }
            | PendingChange::DecisionSettled { session_id, .. } => session_id,
        }
    }
}

/// Watches the pending decisions of a store: each [`PendingWatch::changes`] compares what waits
/// now with what waited at the previous look. On a store that pushes notices of its changes
/// ([`SessionStore::change_notices`], PostgreSQL) a look reads only the sessions named by the
/// notices that arrived, as they arrive (no polling); when the notices fail it reads the whole
/// listing once, subscribes again, and polls while it cannot. On the other stores it polls the
/// listing. A decision that starts and stops waiting between two looks is not reported (the
/// session's own events say it, in the process that ran it).
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use agent_controller::{AgentController, MemoryStore, SessionOptions, ToolRegistry};
/// use agent_controller::model::scripted::ScriptedModel;
/// use agent_controller::store::{PendingChange, PendingWatch};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let workspace = tempfile::tempdir()?;
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
///     "modes.toml",
/// )?;
/// let store = Arc::new(MemoryStore::new());
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
///     .tools(ToolRegistry::with_workspace_tools())
///     .workspace(workspace.path())
///     .store(store.clone())
///     .build()?;
/// let mut watch = PendingWatch::new(store, Duration::from_millis(10)).await?;
/// let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
/// session.send_message("Add dark mode").await?;
/// let changes = watch.changes().await?;
/// assert!(matches!(&changes[..], [PendingChange::DecisionWaiting { .. }]));
/// # Ok(())
/// # }
/// ```
pub struct PendingWatch {
    store: Arc<dyn SessionStore>,
    every: Duration,
    /// What waited at the last look, by (session id, decision id).
    known: HashSet<(String, String)>,
    /// The store's notices of its changes, while it pushes them.
    notices: Option<ChangeNotices>,
    /// Whether the store pushed notices when the watch began (so it subscribes again after
    /// they fail).
    pushes: bool,
}

impl std::fmt::Debug for PendingWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingWatch")
            .field("every", &self.every)
            .field("known", &self.known.len())
            .field("notified", &self.notices.is_some())
            .finish_non_exhaustive()
    }
}

impl PendingWatch {
    /// A watch of `store`: what waits now is known already, and only what changes from here is
    /// reported. It listens to the store's notices when the store pushes them
    /// ([`SessionStore::change_notices`], subscribed before the first look, so nothing is
    /// missed); otherwise, or while they fail, it looks every `every` (at least 10 ms).
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the store cannot be read.
    pub async fn new(store: Arc<dyn SessionStore>, every: Duration) -> Result<Self, StoreError> {
        let notices = subscribe(&*store).await;
        let mut watch = Self {
            store,
            every: every.max(Duration::from_millis(10)),
            known: HashSet::new(),
            pushes: notices.is_some(),
            notices,
        };
        watch.look().await?;
        Ok(watch)
    }

    /// Whether the watch listens to the store's notices now (rather than polling).
    pub fn is_notified(&self) -> bool {
        self.notices.is_some()
    }

    /// The next changes: waits until a look finds one or more, in the store's order (the new
    /// waiting decisions oldest first, then the settled ones; by notice, those of each session
    /// in the order the notices came). A record that cannot be read is skipped (`pending`
    /// reports it). When polling, between two looks it waits `every`, or twice as long as the
    /// last look took when that is longer: a big store is not read continuously.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the store cannot be read; the watch can be asked again.
    pub async fn changes(&mut self) -> Result<Vec<PendingChange>, StoreError> {
        loop {
            if let Some(notices) = self.notices.as_mut() {
                let first = std::future::poll_fn(|cx| notices.as_mut().poll_next(cx)).await;
                let mut named: Vec<String> = Vec::new();
                let mut failed = false;
                let mut next = first;
                loop {
                    match next {
                        Some(Ok(session_id)) => {
                            if !named.contains(&session_id) {
                                named.push(session_id);
                            }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "the store's change notices failed: reading it whole");
                            failed = true;
                            break;
                        }
                        None => {
                            failed = true;
                            break;
                        }
                    }
                    // The notices already here, read in the same look (bounded).
                    if named.len() >= 1000 {
                        break;
                    }
                    next = match std::future::poll_fn(|cx| {
                        std::task::Poll::Ready(match notices.as_mut().poll_next(cx) {
                            std::task::Poll::Ready(item) => Some(item),
                            std::task::Poll::Pending => None,
                        })
                    })
                    .await
                    {
                        Some(item) => item,
                        None => break,
                    };
                }
                let mut changes = Vec::new();
                for session_id in &named {
                    match self.look_at(session_id).await {
                        Ok(found) => changes.extend(found),
                        Err(e) => {
                            // The notices taken are lost with this look: read the store whole
                            // next time (polling, then listening again).
                            self.notices = None;
                            return Err(e);
                        }
                    }
                }
                if failed {
                    // Changes may have been missed: subscribe again, then read everything.
                    self.notices = subscribe(&*self.store).await;
                    changes.extend(self.look().await?);
                }
                if !changes.is_empty() {
                    return Ok(changes);
                }
                continue;
            }
            let started = std::time::Instant::now();
            let changes = self.look().await?;
            if !changes.is_empty() {
                return Ok(changes);
            }
            tokio::time::sleep(next_wait(self.every, started.elapsed())).await;
            if self.pushes {
                // Notices failed before: listen again when they work, after one more whole look
                // (what changed before the subscription).
                self.notices = subscribe(&*self.store).await;
                if self.notices.is_some() {
                    let changes = self.look().await?;
                    if !changes.is_empty() {
                        return Ok(changes);
                    }
                }
            }
        }
    }

    /// Reads what waits in session `session_id` now and returns what changed there since the
    /// last look: its new waiting decisions in the session's order, then its settled ones.
    async fn look_at(&mut self, session_id: &str) -> Result<Vec<PendingChange>, StoreError> {
        let record = match self.store.load(session_id).await {
            Ok(record) => record,
            // Unreadable: `pending` reports it; what it held is left as it was.
            Err(StoreError::Corrupt { .. } | StoreError::NewerSchema { .. }) => {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e),
        };
        let waiting = record
            .as_ref()
            .map(super::SessionRecord::pending_summaries)
            .unwrap_or_default();
        let mut changes = Vec::new();
        let mut now: Vec<(String, String)> = Vec::with_capacity(waiting.len());
        for summary in waiting {
            let key = (summary.session_id.clone(), summary.decision_id.clone());
            if !self.known.contains(&key) {
                changes.push(PendingChange::DecisionWaiting {
                    session_id: key.0.clone(),
                    decision_id: key.1.clone(),
                    decision: Box::new(summary),
                });
            }
            now.push(key);
        }
        let mut gone: Vec<(String, String)> = self
            .known
            .iter()
            .filter(|(s, _)| s == session_id)
            .filter(|key| !now.contains(key))
            .cloned()
            .collect();
        gone.sort();
        for key in gone {
            self.known.remove(&key);
            changes.push(PendingChange::DecisionSettled {
                session_id: key.0,
                decision_id: key.1,
                mode_id: record.as_ref().map(|r| r.mode_id.clone()),
            });
        }
        self.known.extend(now);
        Ok(changes)
    }

    /// Reads what waits now and returns what changed since the last look.
    async fn look(&mut self) -> Result<Vec<PendingChange>, StoreError> {
        let listing = self.store.list_pending_decisions().await?;
        let mut now = HashSet::with_capacity(listing.pending.len());
        let mut changes = Vec::new();
        for summary in listing.pending {
            let key = (summary.session_id.clone(), summary.decision_id.clone());
            if !self.known.contains(&key) {
                changes.push(PendingChange::DecisionWaiting {
                    session_id: key.0.clone(),
                    decision_id: key.1.clone(),
                    decision: Box::new(summary),
                });
            }
            now.insert(key);
        }
        let mut gone: Vec<(String, String)> = self
            .known
            .iter()
            .filter(|key| !now.contains(*key))
            .cloned()
            .collect();
        gone.sort();
        for (session_id, decision_id) in gone {
            let mode_id = match self.store.load(&session_id).await {
                Ok(record) => record.map(|r| r.mode_id),
                Err(_) => None,
            };
            changes.push(PendingChange::DecisionSettled {
                session_id,
                decision_id,
                mode_id,
            });
        }
        self.known = now;
        Ok(changes)
    }
}

/// The store's notices, when it pushes them and the subscription works (a failed one is
/// logged, and the watch polls).
async fn subscribe(store: &dyn SessionStore) -> Option<ChangeNotices> {
    match store.change_notices().await {
        Ok(notices) => notices,
        Err(e) => {
            tracing::warn!(error = %e, "the store's change notices cannot be subscribed to: polling it");
            None
        }
    }
}

/// How long a [`PendingWatch`] waits before its next look when the last one took `took`: its
/// interval `every`, or twice `took` when that is longer, so that reading the store takes at
/// most a third of the time whatever its size.
fn next_wait(every: Duration, took: Duration) -> Duration {
    every.max(took.saturating_mul(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_look_spaces_the_next_one_out() {
        let every = Duration::from_millis(250);
        assert_eq!(next_wait(every, Duration::from_millis(5)), every);
        assert_eq!(next_wait(every, Duration::from_millis(125)), every);
        assert_eq!(
            next_wait(every, Duration::from_secs(1)),
            Duration::from_secs(2)
        );
        assert_eq!(next_wait(every, Duration::MAX), Duration::MAX);
    }
}
