//! The events `serve` streams (`GET /v1/events`, `GET /v1/sessions/{id}/events`): every event
//! of the sessions this server runs, as `--json` prints them, and what the store shows other
//! processes did (`decision_waiting`, `decision_settled`), each with an id. The last
//! [`KEPT`] are kept, so a client that reconnects with `Last-Event-ID` gets what it missed; a
//! client that falls [`LIVE`] events behind is dropped (its stream ends, so it reconnects) and
//! never holds up the others. Events the feed itself missed (it fell behind a controller) are
//! told to every client, `events_missed`, never skipped in silence.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_controller::Event;
use agent_controller::display::json_line;
use agent_controller::store::{PendingChange, PendingWatch};
use axum::response::sse;
use futures_core::Stream;
use futures_util::StreamExt;
use tokio::sync::broadcast;

/// How many events are kept for clients that reconnect.
pub(crate) const KEPT: usize = 10_000;

/// How far behind a client may fall before it is dropped.
pub(crate) const LIVE: usize = 1024;

/// One event as the clients get it.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    id: u64,
    /// The session it is of; `None` for one of every session ([`Feed::missed`]).
    session_id: Option<Arc<str>>,
    data: Arc<str>,
}

/// The events, numbered in the order they happened.
#[derive(Clone)]
pub(crate) struct Feed {
    inner: Arc<Inner>,
}

struct Inner {
    /// The next id and the kept events, oldest first; sending to `live` happens under this lock
    /// too, so the live order is the id order.
    kept: Mutex<(u64, VecDeque<Item>)>,
    live: broadcast::Sender<Item>,
    /// Set once the server stops ([`Feed::close`]): every stream ends.
    closed: tokio::sync::watch::Sender<bool>,
    /// The id of the first event: a `Last-Event-ID` from it on is one this server gave.
    first: u64,
}

impl Feed {
    /// A feed whose ids start past every id an earlier run of the server gave: at the
    /// microseconds since the epoch now, so a client that reconnects with the `Last-Event-ID`
    /// of a server that was restarted is replayed all the new one keeps, not only what came
    /// after that id's number.
    pub(crate) fn new() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2));
        Self::starting_at(now.max(1))
    }

    /// A feed whose first event has id `first`.
    fn starting_at(first: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                kept: Mutex::new((first, VecDeque::new())),
                live: broadcast::channel(LIVE).0,
                closed: tokio::sync::watch::channel(false).0,
                first,
            }),
        }
    }

    /// Ends every stream, those open and those opened later: the server stops, and a client
    /// that follows the events must not hold its shutdown (an open page always follows them).
    pub(crate) fn close(&self) {
        self.inner.closed.send_replace(true);
    }

    /// Adds an event of `session_id` whose JSON is `data`.
    pub(crate) fn push(&self, session_id: &str, data: String) {
        self.add(Some(Arc::from(session_id)), data);
    }

    /// Adds `{"type": "events_missed", "missed": N}`, to the streams of every session: the
    /// feed fell behind a controller's events and `missed` of them are gone, for every client
    /// and every replay. A client that gets it reads again what it shows (what waits, a
    /// session's state) instead of missing events in silence.
    fn missed(&self, missed: u64) {
        self.add(None, missed_data(missed));
    }

    fn add(&self, session_id: Option<Arc<str>>, data: String) {
        let mut kept = self
            .inner
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let item = Item {
            id: kept.0,
            session_id,
            data: Arc::from(data),
        };
        kept.0 += 1;
        if kept.1.len() == KEPT {
            kept.1.pop_front();
        }
        kept.1.push_back(item.clone());
        let _ = self.inner.live.send(item);
    }

    /// Adds every event of `events` (a controller's), in order, until it closes.
    pub(crate) fn follow(&self, mut events: broadcast::Receiver<Event>) {
        let feed = self.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => {
                        if let Ok(line) = json_line(&event) {
                            feed.push(event.session_id(), line);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        note!(
                            "warning: serve: {missed} session events were missed (too many at once)"
                        );
                        feed.missed(missed);
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }

    /// Adds what `watch` finds the store shows other processes did, each change also handed
    /// to `on_change` (which must not wait).
    pub(crate) fn watch(
        &self,
        mut watch: PendingWatch,
        on_change: impl Fn(&PendingChange) + Send + 'static,
    ) {
        let feed = self.clone();
        tokio::spawn(async move {
            loop {
                match watch.changes().await {
                    Ok(changes) => {
                        for change in changes {
                            on_change(&change);
                            if let Ok(line) = json_line(&change) {
                                feed.push(change.session_id(), line);
                            }
                        }
                    }
                    Err(e) => {
                        note!(
                            "warning: serve: the store cannot be watched: {}",
                            agent_controller::display::neutralize_line(&e.to_string())
                        );
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
    }

    /// The events after id `after` that are still kept, then each new one, of `session` only
    /// when given. Ends when the client falls [`LIVE`] events behind. When events this server
    /// gave after `after` are no longer kept, the stream starts with `events_missed` saying
    /// how many (an event without an id: the client's last id stays its own).
    pub(crate) fn stream(
        &self,
        after: Option<u64>,
        session: Option<String>,
    ) -> impl Stream<Item = Result<sse::Event, Infallible>> + Send + 'static {
        let (replay, live, after, gone) = {
            let kept = self
                .inner
                .kept
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let live = self.inner.live.subscribe();
            // An id this server never gave (of another run of it, or made up): every event
            // kept is one the client has not seen.
            let after = after.map(|id| if id < kept.0 { id } else { 0 });
            let replay: VecDeque<Item> = match after {
                Some(after) => kept.1.iter().filter(|i| i.id > after).cloned().collect(),
                None => VecDeque::new(),
            };
            // Given here, after `after`, and no longer kept.
            let gone = match (after, kept.1.front()) {
                (Some(after), Some(oldest)) if after >= self.inner.first => {
                    oldest.id.saturating_sub(after + 1)
                }
                _ => 0,
            };
            (replay, live, after, gone)
        };
        let closed = self.inner.closed.subscribe();
        let told = (gone > 0 && !*closed.borrow())
            .then(|| Ok(sse::Event::default().data(missed_data(gone))));
        let last = after.unwrap_or(0);
        let events = futures_util::stream::unfold(
            (replay, live, last, session, closed),
            |(mut replay, mut live, mut last, session, mut closed)| async move {
                loop {
                    if *closed.borrow() {
                        return None;
                    }
                    let item = match replay.pop_front() {
                        Some(item) => item,
                        None => tokio::select! {
                            received = live.recv() => match received {
                                Ok(item) => item,
                                // Too slow, or the server stops: the client is dropped.
                                Err(_) => return None,
                            },
                            // The server stops.
                            _ = closed.wait_for(|closed| *closed) => return None,
                        },
                    };
                    if item.id <= last {
                        continue;
                    }
                    last = item.id;
                    let of_another = match (&session, &item.session_id) {
                        (Some(wanted), Some(of)) => wanted.as_str() != &**of,
                        // Not filtered, or of every session.
                        _ => false,
                    };
                    if of_another {
                        continue;
                    }
                    let event = sse::Event::default()
                        .id(item.id.to_string())
                        .data(&*item.data);
                    return Some((Ok(event), (replay, live, last, session, closed)));
                }
            },
        );
        futures_util::stream::iter(told).chain(events)
    }
}

/// The JSON of `events_missed`: `missed` events are gone for the client that gets it.
fn missed_data(missed: u64) -> String {
    serde_json::json!({ "type": "events_missed", "missed": missed }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events a stream after `after` replays, of those kept (nothing new comes).
    async fn replayed(feed: &Feed, after: u64) -> usize {
        let mut stream = Box::pin(feed.stream(Some(after), None));
        let mut got = 0;
        while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(50), stream.next()).await
        {
            got += 1;
        }
        got
    }

    #[tokio::test]
    async fn an_id_this_server_never_gave_replays_every_event_kept() {
        let feed = Feed::starting_at(100);
        feed.push("s", "{}".to_owned());
        feed.push("s", "{}".to_owned());
        assert_eq!(replayed(&feed, 99).await, 2);
        assert_eq!(replayed(&feed, 100).await, 1);
        assert_eq!(replayed(&feed, 101).await, 0);
        // Of another run of the server, or made up: everything kept.
        assert_eq!(replayed(&feed, 102).await, 2);
        assert_eq!(replayed(&feed, u64::MAX).await, 2);
    }

    /// Issue 39: a client that reconnects with the id of an event this server gave but no
    /// longer keeps (more than [`KEPT`] came since) cannot be replayed what came between: it is
    /// told how many it missed first (`events_missed`, without an id of its own), then gets
    /// every event kept; one whose next event is kept is told nothing.
    #[tokio::test]
    async fn a_replay_that_cannot_reach_back_says_how_many_events_are_gone() {
        let feed = Feed::starting_at(1);
        for _ in 0..KEPT + 5 {
            feed.push("s", "{}".to_owned());
        }
        // Kept: 6 to KEPT + 5. After 2, events 3, 4 and 5 are gone.
        let got = drained(Box::pin(feed.stream(Some(2), None))).await;
        assert_eq!(got.len(), KEPT + 1);
        assert!(got[0].contains("events_missed"), "{}", got[0]);
        assert!(got[0].contains("missed\\\":3"), "{}", got[0]);
        assert!(!got[0].contains("id:"), "{}", got[0]);
        assert!(got[1].contains("id: 6"), "{}", got[1]);
        let got = drained(Box::pin(feed.stream(Some(5), None))).await;
        assert_eq!(got.len(), KEPT);
        assert!(got[0].contains("id: 6"), "{}", got[0]);
        // Of the session's stream too.
        let got = drained(Box::pin(feed.stream(Some(2), Some("s".to_owned())))).await;
        assert!(got[0].contains("events_missed"), "{}", got[0]);
    }

    #[tokio::test]
    async fn closing_ends_every_stream_open_or_opened_later() {
        let feed = Feed::starting_at(1);
        feed.push("s", "{}".to_owned());
        let mut open = Box::pin(feed.stream(None, None));
        let mut replaying = Box::pin(feed.stream(Some(0), None));
        feed.close();
        assert_eq!(ended(open.as_mut()).await, 0);
        assert_eq!(ended(replaying.as_mut()).await, 0);
        assert_eq!(ended(Box::pin(feed.stream(Some(0), None))).await, 0);
    }

    /// How many events `stream` gives before it ends (within 10 s).
    async fn ended(stream: impl Stream + Unpin) -> usize {
        tokio::time::timeout(Duration::from_secs(10), stream.count())
            .await
            .expect("the stream ends")
    }

    /// An event of session `id`, as a controller sends it.
    fn started(id: &str) -> Event {
        Event::SessionStarted {
            session_id: Arc::from(id),
            mode_id: Arc::from("plan"),
        }
    }

    /// The events `stream` gives until none comes for a while, as JSON.
    async fn drained(
        stream: impl Stream<Item = Result<sse::Event, Infallible>> + Unpin,
    ) -> Vec<String> {
        let mut stream = stream;
        let mut got = Vec::new();
        while let Ok(Some(Ok(event))) =
            tokio::time::timeout(Duration::from_millis(200), stream.next()).await
        {
            got.push(format!("{event:?}"));
        }
        got
    }

    /// Issue 39: when the feed falls behind a controller's events (its broadcast lags), the
    /// events it missed are gone for every client, and a replay cannot give them back: the
    /// clients are told, by an `events_missed` event in order where they were lost (to the
    /// streams of every session), never left to skip them in silence.
    #[tokio::test(flavor = "current_thread")]
    async fn events_the_feed_missed_are_told_to_every_client_in_order() {
        let feed = Feed::starting_at(1);
        let mut all = Box::pin(feed.stream(None, None));
        let mut one = Box::pin(feed.stream(None, Some("s".to_owned())));
        let (sender, receiver) = broadcast::channel(2);
        // The follower does not run before this task waits: the channel overflows first.
        feed.follow(receiver);
        for _ in 0..5 {
            sender.send(started("s")).expect("a receiver");
        }
        drop(sender);
        for stream in [&mut all, &mut one] {
            let got = drained(stream.as_mut()).await;
            assert_eq!(got.len(), 3, "{got:#?}");
            // `{"type":"events_missed","missed":3}`, as the SSE event's debug text escapes it.
            assert!(got[0].contains("events_missed"), "{got:#?}");
            assert!(got[0].contains("missed\\\":3"), "{got:#?}");
            assert!(got[1].contains("session_started"), "{got:#?}");
        }
    }

    #[tokio::test]
    async fn a_client_that_falls_behind_is_dropped_and_the_others_get_every_event() {
        let feed = Feed::new();
        let mut readers: Vec<_> = (0..100)
            .map(|_| Box::pin(feed.stream(None, None)))
            .collect();
        // Subscribed, and never read while the events come.
        let slow = Box::pin(feed.stream(None, None));
        let total = LIVE + 10;
        for n in 0..total {
            // Never waits on the slow client.
            feed.push("s", format!("{{\"n\":{n}}}"));
            for reader in &mut readers {
                assert!(
                    reader.next().await.is_some(),
                    "event {n} reaches every reader"
                );
            }
        }
        // The slow client, once it reads: its stream ends (dropped), short of the events.
        let got = tokio::time::timeout(Duration::from_secs(30), slow.count())
            .await
            .expect("the slow stream ends");
        assert!(got < total, "{got} of {total}");
        // A reader that kept up still gets what comes next.
        feed.push("s", "{}".to_owned());
        assert!(readers[0].next().await.is_some());
    }
}
