//! `sessions`: lists the sessions of a store, newest first (the library's
//! [`SessionStore::list_sessions`](agent_controller::SessionStore::list_sessions)).

use std::path::Path;

use agent_controller::display::{json_line, neutralize_line};
use agent_controller::store::SessionSummary;

use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::pending::warn_unreadable;
use crate::cli::setup::{check_workspace, open_existing, runtime};

/// `sessions`: one line per readable session on stdout (of `workspace` only, when given), one
/// `warning:` line on stderr per record that cannot be read (with `--json`, also an
/// `{"unreadable": {...}}` line on stdout), and exit 6 when there was any.
pub(crate) fn sessions(spec: &str, workspace: Option<&Path>, json: bool) -> Outcome {
    let workspace = match workspace {
        Some(dir) => {
            check_workspace(dir)?;
            Some(dir.canonicalize().map_err(Failure::runtime)?)
        }
        None => None,
    };
    let store = open_existing(spec)?;
    let listing = runtime()?
        .block_on(store.list_sessions(workspace.as_deref()))
        .map_err(Failure::runtime)?;
    for session in &listing.sessions {
        let line = if json {
            json_line(session).map_err(Failure::runtime)?
        } else {
            session_line(session)
        };
        say!("{line}");
    }
    for record in &listing.unreadable {
        warn_unreadable(&record.session_id, Some(&record.location), &record.reason);
        if json {
            let line = json_line(&serde_json::json!({ "unreadable": record }))
                .map_err(Failure::runtime)?;
            say!("{line}");
        }
    }
    if !json && listing.sessions.is_empty() && listing.is_healthy() {
        note!("no sessions");
    }
    Ok(if listing.is_healthy() {
        Exit::Done
    } else {
        Exit::Unreadable
    })
}

/// A session as `sessions` prints it: id, mode, updated (UTC), `pending` or `-`, workspace
/// (`-` when none is recorded) and title, tab-separated, each neutralized.
fn session_line(s: &SessionSummary) -> String {
    let workspace = s
        .workspace
        .as_deref()
        .map_or_else(|| "-".to_owned(), |w| w.display().to_string());
    [
        neutralize_line(&s.session_id).into_owned(),
        neutralize_line(&s.mode_id).into_owned(),
        s.updated_at_rfc3339(),
        if s.pending { "pending" } else { "-" }.to_owned(),
        neutralize_line(&workspace).into_owned(),
        neutralize_line(s.title.as_deref().unwrap_or("")).into_owned(),
    ]
    .join("\t")
}
