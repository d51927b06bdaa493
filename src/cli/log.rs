//! `log`: a session's decisions in order, from its stored record (its audit log: who, how,
//! when, what and why of each, [`DecidedRecord`](agent_controller::event::DecidedRecord)).

use agent_controller::display::{json_line, neutralize_line};
use agent_controller::event::DecidedRecord;

use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{open_existing, runtime};

/// `log SESSION`: one line per decision of the session, oldest first (with `--json`, each
/// record whole with its `how`); exit 2 when the store keeps no such session.
pub(crate) fn log(spec: &str, session_id: &str, json: bool) -> Outcome {
    let store = open_existing(spec)?;
    let record = runtime()?
        .block_on(store.load(session_id))
        .map_err(Failure::runtime)?
        .ok_or_else(|| {
            Failure::invalid(format!(
                "the store keeps no session {} (`sessions` lists them)",
                neutralize_line(session_id)
            ))
        })?;
    for decided in &record.history {
        let line = if json {
            let mut value = serde_json::to_value(decided).map_err(Failure::runtime)?;
            if let Some(object) = value.as_object_mut() {
                object.insert("how".to_owned(), serde_json::json!(decided.how()));
            }
            json_line(&value).map_err(Failure::runtime)?
        } else {
            decision_line(decided)
        };
        say!("{line}");
    }
    if !json && record.history.is_empty() {
        note!("no decisions");
    }
    Ok(Exit::Done)
}

/// A decision on one line, tab-separated and neutralized: when, the decision id, the outcome,
/// how, who, what (the tool or `submit_plan`, the first 12 hex digits of the sha256 decided, the
/// mode it handed over to) and why.
fn decision_line(d: &DecidedRecord) -> String {
    let what = format!(
        "{} {}{}",
        d.tool_name.as_deref().unwrap_or("submit_plan"),
        d.sha256
            .as_deref()
            .map_or("-", |s| s.get(..12).unwrap_or(s)),
        d.target_mode_id
            .as_deref()
            .map_or_else(String::new, |t| format!(" -> {t}"))
    );
    [
        d.decided_at.clone().unwrap_or_else(|| "-".to_owned()),
        d.decision_id.clone(),
        d.outcome.map_or("-", |o| o.as_str()).to_owned(),
        d.how().to_string(),
        d.decided_by.clone().unwrap_or_else(|| "-".to_owned()),
        what,
        d.why().unwrap_or("-").to_owned(),
    ]
    .iter()
    .map(|field| neutralize_line(field).into_owned())
    .collect::<Vec<_>>()
    .join("\t")
}
