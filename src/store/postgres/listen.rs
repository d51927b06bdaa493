//! Hearing about saves without polling: `LISTEN` on a dedicated connection, as streams of
//! [`SessionChange`]s, of newly pending plans, and a wait for a decision.
//!
//! Every save and delete of a [`PostgresStore`] sends a `NOTIFY` in the statement that writes the
//! row, so it is delivered when (and only if) the transaction commits. The payload is small and
//! bounded (session id, version, whether a plan is pending); listeners read the rest from the
//! table. A stream subscribes before it returns, so nothing committed after the call is missed.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use super::PostgresStore;
use crate::store::{PendingListing, PendingSummary, SessionRecord, SessionStore, StoreError};

/// The `NOTIFY` channel of the sessions table in `schema`: `agent_controller_` and 16 hex
/// digits of the schema name's SHA-256 (channel names are limited to 63 bytes, schema names are
/// not short enough to append).
pub(super) fn channel_for(schema: &str) -> String {
    let digest = Sha256::digest(schema.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("agent_controller_{hex}")
}

/// One committed change to a session, as a `NOTIFY` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionChange {
    /// The session id.
    pub session_id: String,
    /// The saved version; `None` when the session was deleted.
    #[serde(default)]
    pub version: Option<u64>,
    /// Whether a plan is pending after the change.
    #[serde(default)]
    pub pending: bool,
}

/// The stream [`PostgresStore::changes`] returns: every committed save and delete in the store's
/// schema, in commit order, on a connection of its own. It ends after an `Err` (the connection
/// was lost: changes after it may have been missed, so subscribe again and reload).
pub struct ChangeStream {
    // Kept so the connection stays open; dropping the stream closes it.
    _client: tokio_postgres::Client,
    changes: mpsc::UnboundedReceiver<Result<SessionChange, StoreError>>,
    driver: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ChangeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeStream").finish_non_exhaustive()
    }
}

impl Drop for ChangeStream {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Stream for ChangeStream {
    type Item = Result<SessionChange, StoreError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.changes.poll_recv(cx)
    }
}

impl PostgresStore {
    /// Subscribes to every committed save and delete of this store's sessions (`LISTEN` on a
    /// connection of its own). Changes committed after this returns are all delivered.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the server cannot be reached or the `LISTEN` fails.
    pub async fn changes(&self) -> Result<ChangeStream, StoreError> {
        let channel = self.ready().await?.channel.clone();
        let (client, mut connection) = self
            .config
            .pg
            .connect(self.tls.clone())
            .await
            .map_err(|e| self.db(e))?;
        let (sender, changes) = mpsc::unbounded_channel();
        let redacted = self.config.redacted().to_owned();
        // Polling the connection also carries the client's requests (the LISTEN below).
        let driver = tokio::spawn(async move {
            loop {
                let message = std::future::poll_fn(|cx| connection.poll_message(cx)).await;
                let item = match message {
                    Some(Ok(AsyncMessage::Notification(note))) => {
                        serde_json::from_str::<SessionChange>(note.payload()).map_err(|e| {
                            StoreError::backend("postgres: unreadable notification", e)
                        })
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => Err(StoreError::backend(
                        format!("postgres ({redacted}): the listening connection failed"),
                        e,
                    )),
                    None => Err(StoreError::backend_message(format!(
                        "postgres ({redacted}): the listening connection was closed"
                    ))),
                };
                let last = item.is_err();
                if sender.send(item).is_err() || last {
                    return;
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {channel}"))
            .await
            .map_err(|e| self.db(e))?;
        Ok(ChangeStream {
            _client: client,
            changes,
            driver,
        })
    }

    /// A stream of pending decisions (plans, and each tool call that waits for approval): with
    /// `include_existing`, first every one pending now (in `list_pending`'s order), then each
    /// one that becomes pending, as its save is committed. A decision is yielded once (a session's later saves with the same plan pending are not
    /// repeated). A plan whose record cannot be read is yielded as [`StoreError::Corrupt`] (the
    /// existing ones after the readable ones) and the stream goes on; it ends after any other
    /// `Err`.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the subscription or the first listing fails.
    pub async fn watch_pending(
        &self,
        include_existing: bool,
    ) -> Result<impl Stream<Item = Result<PendingSummary, StoreError>> + Send + 'static, StoreError>
    {
        let changes = self.changes().await?;
        let existing = if include_existing {
            self.list_pending_decisions().await?
        } else {
            PendingListing::default()
        };
        // The decisions yielded per session, while they wait: bounded by what is pending.
        let mut seen: HashMap<String, Vec<String>> = HashMap::new();
        for p in &existing.pending {
            seen.entry(p.session_id.clone())
                .or_default()
                .push(p.decision_id.clone());
        }
        let unreadable = existing.unreadable.into_iter().map(|u| {
            Err(StoreError::Corrupt {
                session_id: u.session_id,
                message: u.reason,
            })
        });
        let existing = existing.pending.into_iter().map(Ok).chain(unreadable);
        let state = (changes, self.clone(), seen, VecDeque::new(), false);
        let arrivals = futures_util::stream::unfold(
            state,
            |(mut changes, store, mut seen, mut queue, done)| async move {
                if done {
                    return None;
                }
                loop {
                    if let Some(next) = queue.pop_front() {
                        return Some((Ok(next), (changes, store, seen, queue, false)));
                    }
                    let change = match changes.next().await? {
                        Ok(change) => change,
                        Err(e) => return Some((Err(e), (changes, store, seen, queue, true))),
                    };
                    if !change.pending {
                        seen.remove(&change.session_id);
                        continue;
                    }
                    match store.pending_of(&change.session_id).await {
                        Ok(summaries) => {
                            let known = seen.entry(change.session_id.clone()).or_default();
                            // What waits now; a decision no longer waiting is forgotten.
                            known.retain(|id| summaries.iter().any(|s| &s.decision_id == id));
                            for summary in summaries {
                                if !known.contains(&summary.decision_id) {
                                    known.push(summary.decision_id.clone());
                                    queue.push_back(summary);
                                }
                            }
                        }
                        Err(e @ StoreError::Corrupt { .. }) => {
                            seen.remove(&change.session_id);
                            return Some((Err(e), (changes, store, seen, queue, false)));
                        }
                        Err(e) => return Some((Err(e), (changes, store, seen, queue, true))),
                    }
                }
            },
        );
        Ok(futures_util::stream::iter(existing).chain(arrivals))
    }

    /// Waits, without polling, until the plan `tool_call_id` of `session_id` is no longer
    /// pending (decided, cancelled or the session deleted), and returns the session as it is then
    /// (`None` if deleted). Returns at once when it is not pending now.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the server cannot be reached or the listening connection is
    /// lost; [`StoreError::Corrupt`] for an unreadable record.
    pub async fn wait_for_decision(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let mut changes = self.changes().await?;
        loop {
            let record = self.load(session_id).await?;
            let waiting = record.as_ref().is_some_and(|r| {
                r.pending
                    .as_ref()
                    .is_some_and(|p| p.tool_call_id == tool_call_id)
                    || r.pending_tool_calls
                        .iter()
                        .any(|p| p.tool_call_id == tool_call_id && p.decided.is_none())
                    || r.pending_suspensions
                        .iter()
                        .any(|p| p.tool_call_id == tool_call_id && p.decided.is_none())
            });
            if !waiting {
                return Ok(record);
            }
            loop {
                match changes.next().await {
                    Some(Ok(change)) if change.session_id == session_id => break,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    None => {
                        return Err(StoreError::backend_message(
                            "postgres: the listening connection ended".to_owned(),
                        ));
                    }
                }
            }
        }
    }
}
