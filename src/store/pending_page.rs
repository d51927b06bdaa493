//! The pending decisions a page at a time ([`SessionStore::list_pending_page`](super::SessionStore::list_pending_page)):
//! a host that shows what waits in a big store (`serve`'s `GET /v1/pending`, an inbox) reads one
//! bounded page, not every pending decision of the store.
//!
//! The order is [`SessionStore::list_pending`](super::SessionStore::list_pending)'s: oldest first
//! by the session's `updatedAt`, then by session id, and within a session the session's own order
//! ([`SessionRecord::pending_summaries`](super::SessionRecord::pending_summaries): the plan, then
//! the tool calls, then the questions). A [`PendingCursor`] names the last decision of a page by
//! those three keys, so the stores read from there on (SQL: `WHERE (updated_at, id) >= (...)
//! ORDER BY updated_at, id LIMIT ...` through the pending index) and decisions that start or stop
//! waiting between two pages shift nothing: none is listed twice on the pages of one listing, and
//! none whose session stays unchanged is skipped.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{PendingListing, PendingSummary, UnreadableRecord, check_session_id};

/// The most characters of a decision id a [`PendingCursor`] takes: the controller's are
/// `decision_N`, a subagent's a little longer.
const MAX_DECISION_ID: usize = 200;

/// Where a page of pending decisions ends: the `updatedAt`, session id and decision id of its
/// last decision. Written as `UPDATED_AT.SESSION_ID.DECISION_ID` (what `serve` hands out as
/// `nextCursor`); [`str::parse`] reads it back and refuses anything else with
/// [`InvalidPendingCursor`].
///
/// # Examples
/// ```
/// use agent_controller::store::PendingCursor;
///
/// let cursor: PendingCursor = "1700000000.s1.decision_2".parse()?;
/// assert_eq!(cursor.updated_at(), 1_700_000_000);
/// assert_eq!((cursor.session_id(), cursor.decision_id()), ("s1", "decision_2"));
/// assert_eq!(cursor.to_string(), "1700000000.s1.decision_2");
/// assert!("garbage".parse::<PendingCursor>().is_err());
/// assert!("1.../etc.decision_1".parse::<PendingCursor>().is_err());
/// # Ok::<(), agent_controller::store::InvalidPendingCursor>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PendingCursor {
    updated_at: u64,
    session_id: String,
    decision_id: String,
}

impl PendingCursor {
    /// The cursor of the page that ends with `last`.
    pub fn after(last: &PendingSummary) -> Self {
        Self {
            updated_at: last.updated_at,
            session_id: last.session_id.clone(),
            decision_id: last.decision_id.clone(),
        }
    }

    /// When the last decision's session was saved (seconds since the Unix epoch).
    pub fn updated_at(&self) -> u64 {
        self.updated_at
    }

    /// The last decision's session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The last decision's id.
    pub fn decision_id(&self) -> &str {
        &self.decision_id
    }

    /// Where a session's decisions stand to this cursor: `Less` for a session wholly before it
    /// (listed on an earlier page), `Equal` for the cursor's own session, `Greater` after it.
    fn place(&self, updated_at: u64, session_id: &str) -> std::cmp::Ordering {
        (updated_at, session_id).cmp(&(self.updated_at, self.session_id.as_str()))
    }
}

impl fmt::Display for PendingCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}",
            self.updated_at, self.session_id, self.decision_id
        )
    }
}

impl FromStr for PendingCursor {
    type Err = InvalidPendingCursor;

    /// Reads a cursor [`PendingCursor`]'s `Display` wrote; anything else is refused (the
    /// client's bad input, shown bounded and neutralized in the error).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refused = || {
            let mut shown: String = text.chars().take(80).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            InvalidPendingCursor(crate::display::neutralize(&shown).into_owned())
        };
        let mut parts = text.splitn(3, '.');
        let (Some(at), Some(session_id), Some(decision_id)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(refused());
        };
        if at.is_empty() || !at.bytes().all(|b| b.is_ascii_digit()) {
            return Err(refused());
        }
        let updated_at = at.parse::<u64>().map_err(|_| refused())?;
        check_session_id(session_id).map_err(|_| refused())?;
        let decision_ok = !decision_id.is_empty()
            && decision_id.len() <= MAX_DECISION_ID
            && decision_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b));
        if !decision_ok {
            return Err(refused());
        }
        Ok(Self {
            updated_at,
            session_id: session_id.to_owned(),
            decision_id: decision_id.to_owned(),
        })
    }
}

impl Serialize for PendingCursor {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PendingCursor {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A text that is no [`PendingCursor`]: not one a page of pending decisions handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a pending-decision cursor: give the nextCursor of the previous page, or none for the first"
)]
pub struct InvalidPendingCursor(pub String);

/// One page of pending decisions, as [`SessionStore::list_pending_page`](super::SessionStore::list_pending_page)
/// reads it.
///
/// # Examples
/// ```
/// use agent_controller::store::PendingListing;
///
/// let page = PendingListing::default().page(None, 100);
/// assert!(page.pending.is_empty() && page.next_cursor.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PendingPage {
    /// At most `limit` pending decisions, in the listing's order.
    pub pending: Vec<PendingSummary>,
    /// The records that cannot be read which this page's reading met: a store that orders its
    /// records without reading them (SQLite's and PostgreSQL's rows) reports each on the page
    /// where it stands; one that must read a record to place it (the file store, the memory
    /// store) reports them all on the first page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableRecord>,
    /// The cursor of the next page; `None` on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<PendingCursor>,
}

impl PendingListing {
    /// The page of at most `limit` pending decisions (at least one) that follows `after` (the
    /// [`PendingPage::next_cursor`] of the previous page; `None` for the first page), in the
    /// listing's order (as the stores return it: call [`PendingListing::sort`] after changing
    /// `pending`). The unreadable records go on the first page. What
    /// [`SessionStore::list_pending_page`](super::SessionStore::list_pending_page) does by
    /// default.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::{PendingListing, PendingSummary};
    ///
    /// let mut listing = PendingListing::default();
    /// for (session, at) in [("a", 10), ("b", 20), ("c", 30)] {
    ///     listing.pending.push(serde_json::from_value(serde_json::json!({
    ///         "sessionId": session, "runId": "run_1", "toolCallId": "call_1", "kind": "plan",
    ///         "decisionId": "decision_1", "modeId": "plan", "targetModeId": "build",
    ///         "title": "", "updatedAt": at
    ///     }))?);
    /// }
    /// let first = listing.page(None, 2);
    /// assert_eq!(first.pending.len(), 2);
    /// let second = listing.page(first.next_cursor.as_ref(), 2);
    /// assert_eq!(second.pending[0].session_id, "c");
    /// assert!(second.next_cursor.is_none());
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn page(&self, after: Option<&PendingCursor>, limit: usize) -> PendingPage {
        let mut fill = PageFill::new(after, limit);
        if after.is_none() {
            fill.unreadable(self.unreadable.iter().cloned());
        }
        let mut rest = self.pending.as_slice();
        while let Some(first) = rest.first() {
            let same = rest
                .iter()
                .take_while(|p| {
                    p.session_id == first.session_id && p.updated_at == first.updated_at
                })
                .count();
            let (session, tail) = rest.split_at(same);
            rest = tail;
            if fill.session(first.updated_at, &first.session_id, session.iter().cloned()) {
                break;
            }
        }
        fill.finish()
    }
}

/// A page being filled by a store that reads sessions in the listing's order (by `updatedAt`,
/// then session id): each session's decisions are offered whole, and those up to the cursor
/// are left out.
#[derive(Debug)]
pub(crate) struct PageFill {
    after: Option<PendingCursor>,
    limit: usize,
    page: PendingPage,
    /// A decision past the page was offered: there is a next page.
    more: bool,
}

impl PageFill {
    /// An empty page of at most `limit` decisions (at least one) after `after`.
    pub(crate) fn new(after: Option<&PendingCursor>, limit: usize) -> Self {
        Self {
            after: after.cloned(),
            limit: limit.max(1),
            page: PendingPage::default(),
            more: false,
        }
    }

    /// How many decisions the page takes (one more tells whether a next page follows).
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres")),
        expect(dead_code, reason = "the SQL stores read it")
    )]
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Adds records that cannot be read.
    pub(crate) fn unreadable(&mut self, records: impl IntoIterator<Item = UnreadableRecord>) {
        self.page.unreadable.extend(records);
    }

    /// Offers the decisions of the session `session_id` saved at `updated_at`, in the session's
    /// order; the sessions must come in the listing's order. Returns whether the page is full
    /// and a decision past it was seen (read no more sessions then).
    pub(crate) fn session(
        &mut self,
        updated_at: u64,
        session_id: &str,
        decisions: impl IntoIterator<Item = PendingSummary>,
    ) -> bool {
        let decisions: Vec<PendingSummary> = decisions.into_iter().collect();
        let skip = match self
            .after
            .as_ref()
            .map(|c| (c.place(updated_at, session_id), c))
        {
            None | Some((std::cmp::Ordering::Greater, _)) => 0,
            Some((std::cmp::Ordering::Less, _)) => decisions.len(),
            // The cursor's own session, unchanged since: after the cursor's decision; when that
            // one no longer waits (decided within the same second), none of the session's is
            // skipped (one may show twice, none is lost).
            Some((std::cmp::Ordering::Equal, cursor)) => decisions
                .iter()
                .position(|d| d.decision_id == cursor.decision_id)
                .map_or(0, |at| at + 1),
        };
        for decision in decisions.into_iter().skip(skip) {
            if self.page.pending.len() == self.limit {
                self.more = true;
                return true;
            }
            self.page.pending.push(decision);
        }
        false
    }

    /// The page, with its next cursor when a decision past it was offered.
    pub(crate) fn finish(mut self) -> PendingPage {
        if self.more {
            self.page.next_cursor = self.page.pending.last().map(PendingCursor::after);
        }
        self.page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(at: u64, session: &str, decision: &str) -> PendingSummary {
        serde_json::from_value(serde_json::json!({
            "sessionId": session, "runId": "run_1", "toolCallId": "call_1", "kind": "tool_call",
            "decisionId": decision, "modeId": "build", "targetModeId": "", "title": "",
            "updatedAt": at
        }))
        .expect("a summary")
    }

    fn keys(page: &PendingPage) -> Vec<String> {
        page.pending
            .iter()
            .map(|p| format!("{}/{}", p.session_id, p.decision_id))
            .collect()
    }

    #[test]
    fn pages_cover_the_listing_once_in_order_with_every_limit() {
        let mut listing = PendingListing::default();
        for (at, session, decisions) in [
            (10, "a", 1),
            (10, "b", 3),
            (20, "a2", 2),
            (30, "c", 1),
            (30, "d", 4),
        ] {
            for n in 1..=decisions {
                listing
                    .pending
                    .push(summary(at, session, &format!("decision_{n}")));
            }
        }
        listing.sort();
        let all: Vec<String> = keys(&listing.page(None, 1000));
        assert_eq!(all.len(), 11);
        for limit in 1..=12 {
            let mut seen = Vec::new();
            let mut after: Option<PendingCursor> = None;
            loop {
                let page = listing.page(after.as_ref(), limit);
                assert!(page.pending.len() <= limit);
                seen.extend(keys(&page));
                match page.next_cursor {
                    // Through its text, as a client hands it back.
                    Some(next) => after = Some(next.to_string().parse().expect("a cursor")),
                    None => break,
                }
            }
            assert_eq!(seen, all, "limit {limit}");
        }
    }

    #[test]
    fn a_session_decided_between_pages_shifts_nothing_else() {
        let mut listing = PendingListing::default();
        for (at, session) in [(10, "a"), (20, "b"), (30, "c")] {
            listing.pending.push(summary(at, session, "decision_1"));
        }
        let first = listing.page(None, 1);
        assert_eq!(keys(&first), ["a/decision_1"]);
        // `a` decided (gone) and `b` saved again (later now) before the next page.
        listing.pending.remove(0);
        listing.pending[0].updated_at = 40;
        listing.sort();
        let second = listing.page(first.next_cursor.as_ref(), 5);
        assert_eq!(keys(&second), ["c/decision_1", "b/decision_1"]);
    }

    #[test]
    fn a_cursor_not_written_by_a_page_is_refused() {
        for bad in [
            "",
            "..",
            "10",
            "10.s1",
            "x.s1.decision_1",
            "+10.s1.decision_1",
            "10.../s1.decision_1",
            "10..decision_1",
            "10.s1.",
            "10.s1.a/b",
            "99999999999999999999999.s1.decision_1",
        ] {
            assert!(bad.parse::<PendingCursor>().is_err(), "{bad:?}");
        }
        let long = "\u{1b}[31m".repeat(1000);
        let err = long.parse::<PendingCursor>().expect_err("refused");
        assert!(err.0.chars().count() < 400, "shown bounded: {}", err.0);
        assert!(!err.0.contains('\u{1b}'), "neutralized: {}", err.0);
        let sub: PendingCursor = "5.s1.sub.run_1:decision_3"
            .parse()
            .expect("a subagent's id");
        assert_eq!(sub.decision_id(), "sub.run_1:decision_3");
    }
}
