//! `log`: a session's decisions in order, from its stored record (its audit log: who, how,
//! when, what and why of each, [`DecidedRecord`](agent_controller::event::DecidedRecord)).

use agent_controller::display::{json_line, neutralize_line};
use agent_controller::event::DecidedRecord;
use agent_controller::quorum::Approval;

use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{open_existing, runtime};

/// `log SESSION`: one line per decision of the session, oldest first (with `--json`, each
/// record whole with its `how`), each quorum approval on a line of its own (`approval`), those
/// given on what still waits last; exit 2 when the store keeps no such session.
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
        if json {
            let mut value = serde_json::to_value(decided).map_err(Failure::runtime)?;
            if let Some(object) = value.as_object_mut() {
                object.insert("how".to_owned(), serde_json::json!(decided.how()));
            }
            say!("{}", json_line(&value).map_err(Failure::runtime)?);
        } else {
            // Under a quorum, each approval on a line of its own before the decision.
            for approval in &decided.approvals {
                say!(
                    "{}",
                    approval_line(&decided.decision_id, approval, decided.tool_name.as_deref())
                );
            }
            say!("{}", decision_line(decided));
        }
    }
    // Approvals given toward a quorum on what still waits: recorded, not yet a decision.
    let waiting = record
        .pending
        .iter()
        .map(|p| {
            (
                &p.suspend_payload.decision_id,
                &p.suspend_payload.terms,
                None,
            )
        })
        .chain(record.pending_tool_calls.iter().map(|c| {
            (
                &c.suspend_payload.decision_id,
                &c.suspend_payload.terms,
                Some(c.suspend_payload.tool_name.as_str()),
            )
        }));
    let mut approvals = 0;
    for (decision_id, terms, tool) in waiting {
        for approval in &terms.approvals {
            approvals += 1;
            if json {
                let value = serde_json::json!({
                    "decisionId": decision_id,
                    "outcome": "pending",
                    "how": "approval",
                    "approversNeeded": terms.approvers_needed,
                    "approval": approval,
                });
                say!("{}", json_line(&value).map_err(Failure::runtime)?);
            } else {
                say!("{}", approval_line(decision_id, approval, tool));
            }
        }
    }
    if !json && record.history.is_empty() && approvals == 0 {
        note!("no decisions");
    }
    Ok(Exit::Done)
}

/// An approval given toward a quorum on one line, in the columns of [`decision_line`]: when,
/// the decision id, `approval`, `person`, through which channel, who, what (the tool or
/// `submit_plan` and the first 12 hex digits of the sha256 approved), and `-`.
fn approval_line(decision_id: &str, a: &Approval, tool: Option<&str>) -> String {
    let what = format!(
        "{} {}",
        tool.unwrap_or("submit_plan"),
        a.sha256
            .as_deref()
            .map_or("-", |s| s.get(..12).unwrap_or(s))
    );
    [
        a.at.clone(),
        decision_id.to_owned(),
        "approval".to_owned(),
        "person".to_owned(),
        a.via.map_or_else(|| "-".to_owned(), |v| v.to_string()),
        a.by.clone(),
        what,
        "-".to_owned(),
    ]
    .iter()
    .map(|field| neutralize_line(field).into_owned())
    .collect::<Vec<_>>()
    .join("\t")
}

/// A decision on one line, tab-separated and neutralized: when, the decision id, the outcome,
/// how, through which channel (`via`), who, what (the tool or `submit_plan`, the first 12 hex digits of the sha256 decided, the
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
        d.via.map_or_else(|| "-".to_owned(), |v| v.to_string()),
        d.decided_by.clone().unwrap_or_else(|| "-".to_owned()),
        what,
        d.why().unwrap_or("-").to_owned(),
    ]
    .iter()
    .map(|field| neutralize_line(field).into_owned())
    .collect::<Vec<_>>()
    .join("\t")
}
