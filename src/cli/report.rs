//! `report`: prints the report of a stored session's last run of an approved plan
//! ([`agent_controller::plan_report::PlanReport`], the record's `planReport`).

use agent_controller::display::{json_line, neutralize_line};

use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{open_existing, runtime};

/// `report`: the report of session `id` in store `spec`, as lines for a person or, with
/// `json`, as one JSON object. A session the store lacks, or one without a report (no run of
/// an approved plan ended yet), is refused (exit 5) with a message saying which.
pub(crate) fn report(spec: &str, id: &str, json: bool) -> Outcome {
    let store = open_existing(spec)?;
    let record = runtime()?
        .block_on(store.load(id))
        .map_err(Failure::runtime)?
        .ok_or_else(|| {
            Failure::refused(format!(
                "the store keeps no session {} (`sessions` lists them)",
                neutralize_line(id)
            ))
        })?;
    let Some(report) = record.plan_report else {
        return Err(Failure::refused(format!(
            "session {} has no plan report: no run of an approved plan that declares its files or numbers its steps has ended in it",
            neutralize_line(id)
        )));
    };
    if json {
        say!("{}", json_line(&report).map_err(Failure::runtime)?);
    } else {
        for line in report.lines() {
            say!("{line}");
        }
    }
    Ok(Exit::Done)
}
