//! How a prompt shows a plan revision: as what changed since the previous revision only when
//! this same prompt showed that revision; whole otherwise, the diff after it as an addition
//! (issue 36, item 4: a second reviewer of revision 2, in a new process, saw only the diff
//! against revision 1, which they never saw, and approved text nobody had shown them).

use crate::event::SuspendPayload;

/// How a prompt shows one plan revision ([`RevisionsShown::show`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionView<'a> {
    /// The whole plan: a first revision, or one without a diff.
    Whole,
    /// The whole plan, then this diff against the previous revision, which this prompt did not
    /// show.
    WholeThenDiff(&'a str),
    /// This diff alone (with a key that shows the whole plan): this prompt showed the previous
    /// revision.
    Diff(&'a str),
}

/// The plan revisions a prompt has shown, by their sha256: what [`RevisionsShown::show`] reads
/// to choose how the next one is shown. One per prompt (a process, a terminal), never shared
/// with another reviewer.
///
/// # Examples
/// ```
/// use agent_controller::event::SuspendPayload;
/// use agent_controller::terminal::{RevisionView, RevisionsShown};
/// let first: SuspendPayload = serde_json::from_value(serde_json::json!({
///     "path": "p.md", "title": "T", "plan": "1. A", "sha256": "aa",
///     "targetModeId": "build", "decisionId": "decision_1", "revision": 1
/// }))?;
/// let mut second = first.clone();
/// second.submission.sha256 = "bb".into();
/// second.revision = 2;
/// second.previous_sha256 = Some("aa".into());
/// second.diff = Some("-1. A\n+1. B\n".into());
/// // A second reviewer, who never saw revision 1: the whole plan, then the diff.
/// let mut other = RevisionsShown::default();
/// assert_eq!(other.show(&second), RevisionView::WholeThenDiff("-1. A\n+1. B\n"));
/// // The prompt that showed revision 1: the diff alone.
/// let mut shown = RevisionsShown::default();
/// assert_eq!(shown.show(&first), RevisionView::Whole);
/// assert_eq!(shown.show(&second), RevisionView::Diff("-1. A\n+1. B\n"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct RevisionsShown {
    sha256s: Vec<String>,
}

impl RevisionsShown {
    /// How to show the plan of `payload`, which this prompt is about to show (it is counted as
    /// shown): its diff alone when the previous revision is one this prompt showed, else the
    /// whole plan, with the diff after it when there is one.
    pub fn show<'a>(&mut self, payload: &'a SuspendPayload) -> RevisionView<'a> {
        let seen_previous = payload
            .previous_sha256
            .as_ref()
            .is_some_and(|previous| self.sha256s.contains(previous));
        let sha256 = &payload.submission.sha256;
        if !self.sha256s.contains(sha256) {
            self.sha256s.push(sha256.clone());
        }
        match (payload.diff.as_deref(), payload.previous_sha256.is_some()) {
            (Some(diff), true) if seen_previous => RevisionView::Diff(diff),
            (Some(diff), true) => RevisionView::WholeThenDiff(diff),
            _ => RevisionView::Whole,
        }
    }
}
