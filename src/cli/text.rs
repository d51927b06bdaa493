//! Small pieces of text several commands print (targets, short hashes, deadlines).

use agent_controller::deadline::deadline_text;
use agent_controller::display::neutralize_line;
use agent_controller::event::WaitTerms;

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

/// When a plan or a tool call with a deadline expires, for people: `(decide by
/// 2026-12-01T18:30:00Z, approvalTimeout 24h; after that it counts as rejected)`; `None` without
/// a deadline.
pub(crate) fn deadline_note(terms: &WaitTerms) -> Option<String> {
    let at = terms.deadline_at_ms?;
    let timeout = terms
        .approval_timeout
        .as_ref()
        .map_or(String::new(), |t| format!(", approvalTimeout {t}"));
    Some(format!(
        "(decide by {}{timeout}; after that it counts as rejected)",
        deadline_text(at)
    ))
}
