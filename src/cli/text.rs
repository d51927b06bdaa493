//! Small pieces of text several commands print (targets, short hashes, deadlines).

use agent_controller::deadline::deadline_text;
use agent_controller::display::neutralize_line;
use agent_controller::event::{OnTimeout, WaitTerms};

/// How many characters of a tool call's argument values `pending` and the event lines show,
/// shared among the values (every argument is shown, a long value cut in its middle and the cut
/// counted: [`arguments_line`]; `pending --json` and `--json` events have them whole).
pub(crate) const PENDING_ARGS_MAX_CHARS: usize = 200;

/// The targets of a pending plan as one field: `build`, or `build | build-auto` when the user
/// may choose (the plain approval's first).
pub(crate) fn targets_text(target: &str, targets: &[impl AsRef<str>]) -> String {
    if targets.len() > 1 {
        targets
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(" | ")
    } else {
        target.to_owned()
    }
}

pub(crate) fn short_sha256(sha256: &str) -> &str {
    // Twelve characters, not bytes: a forged record's value need not be hex.
    sha256
        .char_indices()
        .nth(12)
        .map_or(sha256, |(at, _)| &sha256[..at])
}

/// Where the shown plan came from, so the person knows what approving binds to.
pub(crate) fn plan_origin(path: &str, sha256: &str) -> String {
    format!(
        "(plan file {}, sha256 {}...)",
        neutralize_line(path),
        neutralize_line(short_sha256(sha256))
    )
}

/// When a plan or a tool call with a deadline expires, and what happens then (its `onTimeout`),
/// for people: `(decide by 2026-12-01T18:30:00Z, approvalTimeout 24h; after that it counts as
/// rejected)`; `None` without a deadline.
pub(crate) fn deadline_note(terms: &WaitTerms) -> Option<String> {
    let at = terms.deadline_at_ms?;
    let timeout = terms
        .approval_timeout
        .as_ref()
        .map_or(String::new(), |t| format!(", approvalTimeout {t}"));
    let then = match terms.on_timeout {
        OnTimeout::Abort => "it counts as not approved and the run is aborted",
        OnTimeout::Reject => "it counts as rejected",
    };
    Some(format!(
        "(decide by {}{timeout}; after that {then})",
        deadline_text(at)
    ))
}

#[cfg(test)]
mod tests {
    use agent_controller::event::{OnTimeout, WaitTerms};

    use super::deadline_note;

    fn terms(on_timeout: OnTimeout) -> WaitTerms {
        WaitTerms {
            approval_timeout: Some("1h".to_owned()),
            deadline_at_ms: Some(3_600_000),
            on_timeout,
            ..WaitTerms::default()
        }
    }

    /// The note says what the deadline does: under `onTimeout = "abort"` the run is aborted,
    /// it does not just count as rejected.
    #[test]
    fn the_deadline_note_says_what_the_deadline_does() {
        let reject = deadline_note(&terms(OnTimeout::Reject)).expect("a deadline");
        assert_eq!(
            reject,
            "(decide by 1970-01-01T01:00:00Z, approvalTimeout 1h; after that it counts as rejected)"
        );
        let abort = deadline_note(&terms(OnTimeout::Abort)).expect("a deadline");
        assert_eq!(
            abort,
            "(decide by 1970-01-01T01:00:00Z, approvalTimeout 1h; after that it counts as not \
             approved and the run is aborted)"
        );
        assert_eq!(deadline_note(&WaitTerms::default()), None, "no deadline");
    }
}
