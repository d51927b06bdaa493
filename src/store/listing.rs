//! The sessions a store holds, as [`SessionStore::list_sessions`](super::SessionStore::list_sessions)
//! lists them: one [`SessionSummary`] per readable session (its id, workspace, title, mode,
//! model, when it was last saved), the records that cannot be read apart, and pages of them
//! behind an opaque cursor ([`SessionListing::page`]) for hosts that list a few at a time (the
//! ACP agent's `session/list`, the CLI's `sessions`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{SessionRecord, StoreError, UnreadableRecord};
use crate::event::RunState;
use crate::model::Message;

/// The most characters of a [`SessionSummary::title`]: a longer title is cut there and ends
/// with `…`. A title is a label for a list; the whole first prompt is in the session.
pub const TITLE_CHARS: usize = 120;

/// One session of a store, as [`SessionStore::list_sessions`](super::SessionStore::list_sessions)
/// lists it: what a host shows to let the user pick a session to load or resume.
///
/// # Examples
/// ```
/// use agent_controller::store::SessionSummary;
///
/// let summary: SessionSummary = serde_json::from_value(serde_json::json!({
///     "sessionId": "s1", "modeId": "plan", "updatedAt": 1_700_000_000,
///     "title": "Add dark mode", "workspace": "/home/me/app"
/// }))?;
/// assert_eq!(summary.updated_at_rfc3339(), "2023-11-14T22:13:20Z");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionSummary {
    /// The session id.
    pub session_id: String,
    /// The workspace the session works in (its recorded canonical path); absent for a record
    /// written before workspaces were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// A title for people: the host's `title` metadata ([`crate::SessionOptions::metadata`])
    /// when it is a string, else the first line of the session's first prompt; at most
    /// [`TITLE_CHARS`] characters (cut with `…`), surrounding whitespace trimmed. Absent when
    /// the session has neither. Typed by a user or a host, shown as text: escape it for a
    /// terminal ([`crate::display::neutralize`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The mode the session is in.
    pub mode_id: String,
    /// The model an approval chose for the current mode ([`SessionRecord::model_id`]); absent
    /// when the session's own model runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// Whether a plan or a tool call waits for a decision.
    #[serde(default)]
    pub pending: bool,
    /// The state of the session's latest run; absent before its first run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_state: Option<RunState>,
    /// When the session was last saved (seconds since the Unix epoch).
    pub updated_at: u64,
}

impl SessionSummary {
    /// [`SessionSummary::updated_at`] as RFC 3339 in UTC (`2026-12-05T21:51:22Z`), as ACP's
    /// `updatedAt` takes it.
    pub fn updated_at_rfc3339(&self) -> String {
        crate::event::rfc3339(self.updated_at)
    }

    /// Whether the session works in `workspace` (a canonical path): its recorded workspace is
    /// that path. A record without a workspace is in none.
    pub fn is_in(&self, workspace: &Path) -> bool {
        self.workspace.as_deref() == Some(workspace)
    }

    /// The key sessions are listed and paged by: newest first, then by id.
    fn key(&self) -> (std::cmp::Reverse<u64>, &str) {
        (std::cmp::Reverse(self.updated_at), &self.session_id)
    }
}

impl SessionRecord {
    /// This session as [`SessionStore::list_sessions`](super::SessionStore::list_sessions) lists
    /// it.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::SessionRecord;
    ///
    /// let record: SessionRecord = serde_json::from_value(serde_json::json!({
    ///     "schemaVersion": 5, "sessionId": "s1", "version": 1, "configFingerprint": "f",
    ///     "modeId": "plan", "runCounter": 0, "run": null, "pending": null, "lastDecided": null,
    ///     "updatedAt": 60,
    ///     "messages": [{"role": "user", "content": "  Add dark mode\nto the settings page"}],
    /// }))?;
    /// let summary = record.summary();
    /// assert_eq!(summary.title.as_deref(), Some("Add dark mode"));
    /// assert_eq!((summary.mode_id.as_str(), summary.updated_at), ("plan", 60));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn summary(&self) -> SessionSummary {
        let named = self
            .metadata
            .get("title")
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.trim().is_empty());
        let first_prompt = || {
            self.messages.iter().find_map(|m| match m {
                Message::User { content } if !content.trim().is_empty() => Some(content.as_str()),
                _ => None,
            })
        };
        SessionSummary {
            session_id: self.session_id.clone(),
            workspace: self.workspace.as_ref().map(|w| w.path.clone()),
            title: named.or_else(first_prompt).map(title_of),
            mode_id: self.mode_id.clone(),
            model_id: self.model_id.clone(),
            pending: self.has_pending(),
            run_state: self.run.as_ref().map(|r| r.state),
            updated_at: self.updated_at,
        }
    }
}

/// The first non-blank line of `text`, trimmed, cut at [`TITLE_CHARS`] characters with `…`.
fn title_of(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    match line.char_indices().nth(TITLE_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// What [`SessionStore::list_sessions`](super::SessionStore::list_sessions) finds: every
/// readable session (of the workspace asked for), newest first, and apart every record that
/// cannot be read, so one bad record never hides the others.
///
/// # Examples
/// ```
/// use agent_controller::store::SessionListing;
///
/// let listing = SessionListing::default();
/// assert!(listing.is_healthy());
/// let page = listing.page(None, 50)?;
/// assert!(page.sessions.is_empty() && page.next_cursor.is_none());
/// # Ok::<(), agent_controller::store::InvalidCursor>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionListing {
    /// Every readable session, newest first (by `updatedAt`, then session id).
    pub sessions: Vec<SessionSummary>,
    /// Every record that cannot be read (garbage, a newer schema, a record naming another
    /// session, a file that is not a regular file), by session id. Whatever its workspace: a
    /// record that cannot be read does not say which it is.
    pub unreadable: Vec<UnreadableRecord>,
}

impl SessionListing {
    /// Whether every record could be read (`unreadable` is empty).
    pub fn is_healthy(&self) -> bool {
        self.unreadable.is_empty()
    }

    /// Sorts `sessions` newest first (by `updated_at`, then session id) and `unreadable` by
    /// session id: the order [`SessionStore::list_sessions`](super::SessionStore::list_sessions)
    /// promises.
    pub fn sort(&mut self) {
        self.sessions.sort_by(|a, b| a.key().cmp(&b.key()));
        self.unreadable
            .sort_by(|a, b| (&a.session_id, &a.location).cmp(&(&b.session_id, &b.location)));
    }

    /// Adds what a store read under key `id`: the session's summary when the record was read
    /// and is in `workspace` (any, for `None`), nothing when it is in another; `location` (the
    /// file or row, for people) with the error when it could not be read.
    pub fn add(
        &mut self,
        workspace: Option<&Path>,
        id: &str,
        location: impl FnOnce() -> String,
        read: Result<SessionRecord, StoreError>,
    ) {
        match read {
            Ok(record) => {
                let summary = record.summary();
                if workspace.is_none_or(|w| summary.is_in(w)) {
                    self.sessions.push(summary);
                }
            }
            Err(error) => self
                .unreadable
                .push(UnreadableRecord::new(id, location(), &error)),
        }
    }

    /// The page of at most `limit` sessions (at least one) that follows `cursor` (the
    /// [`SessionPage::next_cursor`] of the previous page; `None` for the first page), in the
    /// listing's order (newest first, as the stores return it: call [`SessionListing::sort`]
    /// after changing `sessions`), and the cursor of the page after it when there is one. A cursor names
    /// the last session of its page by when it was saved and its id, so sessions saved or
    /// deleted between two pages shift nothing: none is listed twice on the pages of one
    /// listing, and none that stays unchanged is skipped.
    ///
    /// # Errors
    /// [`InvalidCursor`] for a cursor this method did not write (the client's bad input).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::{SessionListing, SessionSummary};
    ///
    /// let mut listing = SessionListing::default();
    /// for (id, at) in [("a", 30), ("b", 20), ("c", 10)] {
    ///     listing.sessions.push(serde_json::from_value(serde_json::json!({
    ///         "sessionId": id, "modeId": "plan", "updatedAt": at
    ///     }))?);
    /// }
    /// let first = listing.page(None, 2)?;
    /// assert_eq!(first.sessions.iter().map(|s| s.session_id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    /// let second = listing.page(first.next_cursor.as_deref(), 2)?;
    /// assert_eq!(second.sessions[0].session_id, "c");
    /// assert!(second.next_cursor.is_none());
    /// assert!(listing.page(Some("not a cursor"), 2).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn page(&self, cursor: Option<&str>, limit: usize) -> Result<SessionPage, InvalidCursor> {
        let after = cursor.map(parse_cursor).transpose()?;
        let start = after.map_or(0, |(at, id)| {
            let key = (std::cmp::Reverse(at), id.as_str());
            self.sessions.partition_point(|s| s.key() <= key)
        });
        let rest = &self.sessions[start..];
        let limit = limit.max(1);
        let sessions: Vec<SessionSummary> = rest.iter().take(limit).cloned().collect();
        let next_cursor = (rest.len() > limit)
            .then(|| sessions.last().map(cursor_of))
            .flatten();
        Ok(SessionPage {
            sessions,
            next_cursor,
        })
    }
}

/// One page of a [`SessionListing`] ([`SessionListing::page`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionPage {
    /// The page's sessions, in the listing's order.
    pub sessions: Vec<SessionSummary>,
    /// The cursor of the next page; `None` on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A page cursor [`SessionListing::page`] did not write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a session listing cursor: give the nextCursor of the previous page, or none for the first"
)]
pub struct InvalidCursor(pub String);

/// The cursor after `last`: `UPDATED_AT:SESSION_ID` (a session id holds no `:`).
fn cursor_of(last: &SessionSummary) -> String {
    format!("{}:{}", last.updated_at, last.session_id)
}

/// Reads a cursor [`cursor_of`] wrote; anything else is refused.
fn parse_cursor(cursor: &str) -> Result<(u64, String), InvalidCursor> {
    let shown = || {
        let mut shown: String = cursor.chars().take(80).collect();
        if shown.len() < cursor.len() {
            shown.push('…');
        }
        InvalidCursor(crate::display::neutralize(&shown).into_owned())
    };
    let (at, id) = cursor.split_once(':').ok_or_else(shown)?;
    let at = at
        .parse::<u64>()
        .ok()
        .filter(|_| at.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(shown)?;
    super::check_session_id(id).map_err(|_| shown())?;
    Ok((at, id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(id: &str, at: u64) -> SessionSummary {
        SessionSummary {
            session_id: id.to_owned(),
            workspace: None,
            title: None,
            mode_id: "plan".to_owned(),
            model_id: None,
            pending: false,
            run_state: None,
            updated_at: at,
        }
    }

    fn ids(page: &SessionPage) -> Vec<&str> {
        page.sessions
            .iter()
            .map(|s| s.session_id.as_str())
            .collect()
    }

    #[test]
    fn pages_cover_the_listing_once_even_when_sessions_change_between_pages() {
        let mut listing = SessionListing::default();
        for (id, at) in [("e", 10), ("a", 30), ("c", 20), ("b", 30), ("d", 20)] {
            listing.sessions.push(summary(id, at));
        }
        listing.sort();
        let first = listing.page(None, 2).expect("page");
        assert_eq!(ids(&first), ["a", "b"]);
        // `a` saved again (newest now) and `c` deleted before the next page.
        listing.sessions.retain(|s| s.session_id != "c");
        listing.sessions.push(summary("a", 40));
        listing
            .sessions
            .retain(|s| !(s.session_id == "a" && s.updated_at == 30));
        listing.sort();
        let second = listing.page(first.next_cursor.as_deref(), 2).expect("page");
        assert_eq!(ids(&second), ["d", "e"]);
        assert_eq!(second.next_cursor, None);
    }

    #[test]
    fn a_cursor_not_written_by_the_listing_is_refused() {
        let listing = SessionListing::default();
        for bad in [
            "",
            ":",
            "10",
            "x:s1",
            "+10:s1",
            "10:../s1",
            "10:",
            "99999999999999999999999:s1",
            "10:s1:s2",
        ] {
            assert!(listing.page(Some(bad), 10).is_err(), "{bad:?}");
        }
        let long = "\u{1b}[31m".repeat(1000);
        let err = listing.page(Some(&long), 10).expect_err("refused");
        assert!(err.0.chars().count() < 400, "shown bounded: {}", err.0);
        assert!(!err.0.contains('\u{1b}'), "neutralized: {}", err.0);
    }

    #[test]
    fn a_title_is_the_first_line_bounded() {
        assert_eq!(title_of("\n\n  Fix it  \nmore"), "Fix it");
        let long = "é".repeat(TITLE_CHARS + 5);
        let title = title_of(&long);
        assert_eq!(title.chars().count(), TITLE_CHARS + 1);
        assert!(title.ends_with('…'));
        assert_eq!(title_of(&"x".repeat(TITLE_CHARS)), "x".repeat(TITLE_CHARS));
    }
}
