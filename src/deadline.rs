//! Approval deadlines: a mode's `approvalTimeout` ([`ApprovalTimeout`]), the deadline a plan
//! submitted in it records (`deadlineAtMs` in its suspend payload), and what happens when no
//! decision was taken by then: the plan *expires* (issue 12, "Deadlines").
//!
//! An expired plan counts as rejected. The model gets a result saying so
//! ([`expired_result`]), the decision history records the outcome `expired`
//! ([`crate::event::DecisionOutcome::Expired`]), the run ends (`completed`, as after a rejection
//! without feedback: no model call happens without a host) and the mode stays. With
//! `onTimeout = "abort"` ([`OnTimeout`]) the same happens, but the run ends `aborted` and the
//! results say so. A deadline never approves. What a deadline does is fixed with the deadline,
//! in the payload (`onTimeout`), so a host without the config (a store's [`expire_due`])
//! applies it the same.
//!
//! Nothing runs at the deadline itself: whoever looks next applies the expiry, exactly once.
//! Every operation of a [`crate::Session`] first applies it ([`crate::Session::decide`],
//! [`crate::Session::resume`], [`crate::Session::send_message`], [`crate::Session::abort`],
//! [`crate::Session::switch_mode`], or [`crate::Session::expire_if_due`] alone); so do [`crate::AgentController::restore_session`] (and so
//! `decide` and `continue` on the command line) and [`crate::AgentController::list_pending`]; for
//! a store without a controller, [`expire_due`] (what `agent-controller pending` calls). With a
//! store each applies it by a compare-and-swap save, so of hosts racing to apply it one does and
//! the others see it applied. A decision taken after the deadline is refused with
//! [`crate::SessionError::Expired`] and changes nothing more.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::event::{DecidedRecord, RunState};
use crate::machine::expiry::{self, Waiting};
pub use crate::machine::expiry::{
    ANSWERED_NOT_RESUMED_RESULT, APPROVED_NOT_RUN_RESULT, deadline_text, expired_outcome,
    expired_result, expired_suspension_result, expired_tool_result,
};
pub use crate::mode::timeout::{
    ApprovalTimeout, ApprovalTimeoutError, MAX_APPROVAL_TIMEOUT, OnTimeout,
};
use crate::store::{SessionRecord, SessionStore, StoreError};

/// The time source of a controller ([`crate::controller::AgentControllerBuilder::clock`]): now, as wall-clock
/// time. Deadlines are computed and compared with it.
pub(crate) type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The clock of a controller that was given none: the system's.
pub(crate) fn system_clock() -> Clock {
    Arc::new(SystemTime::now)
}

/// Milliseconds since the Unix epoch of `time` (0 before the epoch, `u64::MAX` far after it).
pub fn millis_since_epoch(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Applies the expiry of `record`'s pending plan, or of its waiting tool calls, if a deadline
/// passed at `now_ms`: the results for the model, the history entries, the run ended
/// `completed` (or `aborted`, for `onTimeout = "abort"`); the same change a [`crate::Session`]
/// makes. Returns the records of what expired
/// (empty when nothing is due). The caller saves the record.
pub(crate) fn expire_record(record: &mut SessionRecord, now_ms: u64) -> Vec<DecidedRecord> {
    let plan = record.pending.iter().map(|p| Waiting::Plan {
        run_id: &p.run_id,
        tool_call_id: &p.tool_call_id,
        payload: &p.suspend_payload,
    });
    let calls = record.pending_tool_calls.iter().map(|c| Waiting::ToolCall {
        run_id: &c.run_id,
        tool_call_id: &c.tool_call_id,
        payload: &c.suspend_payload,
        decided: c.decided.as_ref(),
        feedback: c.feedback.as_deref(),
    });
    let suspensions = record
        .pending_suspensions
        .iter()
        .map(|s| Waiting::Suspended {
            run_id: &s.run_id,
            tool_call_id: &s.tool_call_id,
            payload: &s.suspend_payload,
            decided: s.decided.as_ref(),
            feedback: s.feedback.as_deref(),
        });
    let Some(expiry) = expiry::expire(plan.chain(calls).chain(suspensions), now_ms) else {
        return Vec::new();
    };
    record.pending = None;
    record.pending_tool_calls.clear();
    record.pending_suspensions.clear();
    let expired = expiry.expired();
    for answer in expiry.answers {
        let (message, decided) = answer.into_parts();
        record.messages.push(message);
        record.history.push(decided);
    }
    record.last_decided = record.history.last().cloned();
    record.run = Some(crate::store::RunRecord {
        run_id: expiry.run_id,
        state: expiry.ends,
        owner: None,
        lease_expires_at_ms: None,
    });
    expired
}

/// One plan or tool call [`expire_due`] expired: the session and the audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredDecision {
    /// The session id.
    pub session_id: String,
    /// The audit record (outcome `expired`), as the session's history now ends with it.
    pub decision: DecidedRecord,
    /// How the expiry ended the session's run: `completed` for `onTimeout = "reject"`,
    /// `aborted` for `"abort"`.
    pub run_state: RunState,
}

/// Expires every pending plan (and every tool call waiting for approval) in `store` whose
/// deadline passed at `now`, each by a compare-and-swap save of its session; returns those this
/// call expired (one another host expired or decided first is left to it). Records that cannot be read are skipped (the
/// listing reports them). What `agent-controller pending` does before it lists; a controller's
/// [`crate::AgentController::list_pending`] does it too.
///
/// # Errors
/// [`StoreError::Backend`] (and the other errors of [`SessionStore::list_pending`],
/// [`SessionStore::load`] and [`SessionStore::save`] except a lost race) when the store fails.
pub async fn expire_due(
    store: &dyn SessionStore,
    now: SystemTime,
) -> Result<Vec<ExpiredDecision>, StoreError> {
    Ok(expire_due_then_list(store, now).await?.0)
}

/// [`expire_due`], and what waits once it is done: the listing it read when nothing was
/// due, read again when something was (the store is read once, not twice, when nothing was
/// due, as is most often the case). What `agent-controller pending` and
/// [`crate::AgentController::list_pending`] do.
///
/// # Errors
/// As for [`expire_due`].
pub async fn expire_due_then_list(
    store: &dyn SessionStore,
    now: SystemTime,
) -> Result<(Vec<ExpiredDecision>, crate::store::PendingListing), StoreError> {
    let now_ms = millis_since_epoch(now);
    let listing = store.list_pending(now_ms).await?;
    let mut expired = Vec::new();
    let mut any_due = false;
    for summary in &listing.pending {
        if summary.terms.deadline_at_ms.is_none_or(|at| at > now_ms) {
            continue;
        }
        any_due = true;
        // A session with several waiting calls is listed once per call: the first expires
        // them all, the others find nothing due.
        let (decisions, run_state) = expire_session(store, &summary.session_id, now_ms).await?;
        for decision in decisions {
            expired.push(ExpiredDecision {
                session_id: summary.session_id.clone(),
                decision,
                run_state,
            });
        }
    }
    if !any_due {
        return Ok((expired, listing));
    }
    // Something was due: expired here, or decided by another host since the read.
    Ok((expired, store.list_pending(now_ms).await?))
}

/// How many times [`expire_due_then_page`] reads a page again after expiring what it showed
/// due; past that, the due decisions still on the page are left off it.
const PAGE_ROUNDS: usize = 8;

/// Whether `summary` waits past its deadline at `now_ms`.
fn is_due(summary: &crate::store::PendingSummary, now_ms: u64) -> bool {
    summary.terms.deadline_at_ms.is_some_and(|at| at <= now_ms)
}

/// [`expire_due_then_list`] for one page ([`SessionStore::list_pending_page`]): reads the page
/// after `after`, expires the decisions on it whose deadline passed at `now` (each by a
/// compare-and-swap save of its session, as [`expire_due`] does), and when it expired any reads
/// the page again, so the page never shows a decision past its deadline. Only the sessions on
/// the page are read in full: the due decisions further on expire when a page (or a listing)
/// shows them. What `serve`'s `GET /v1/pending` and
/// [`crate::AgentController::list_pending_page`] do.
///
/// # Errors
/// As for [`expire_due`].
pub async fn expire_due_then_page(
    store: &dyn SessionStore,
    now: SystemTime,
    after: Option<&crate::store::PendingCursor>,
    limit: usize,
) -> Result<(Vec<ExpiredDecision>, crate::store::PendingPage), StoreError> {
    let now_ms = millis_since_epoch(now);
    let mut expired = Vec::new();
    let mut rounds = 0;
    loop {
        let mut page = store.list_pending_page(after, limit).await?;
        let mut due: Vec<&str> = Vec::new();
        for summary in page.pending.iter().filter(|s| is_due(s, now_ms)) {
            if !due.contains(&summary.session_id.as_str()) {
                due.push(&summary.session_id);
            }
        }
        if due.is_empty() {
            return Ok((expired, page));
        }
        if rounds == PAGE_ROUNDS {
            // Expired here or by another host since, but never shown.
            page.pending.retain(|s| !is_due(s, now_ms));
            return Ok((expired, page));
        }
        rounds += 1;
        for session_id in due {
            let (decisions, run_state) = expire_session(store, session_id, now_ms).await?;
            for decision in decisions {
                expired.push(ExpiredDecision {
                    session_id: session_id.to_owned(),
                    decision,
                    run_state,
                });
            }
        }
    }
}

/// Expires the pending plan (or waiting tool calls) of session `session_id` if due at `now_ms`:
/// loads the record, applies the expiry and saves it in place of the version it read. Empty
/// when nothing was due (any more), or when another writer saved first (it applied the expiry,
/// or decided).
async fn expire_session(
    store: &dyn SessionStore,
    session_id: &str,
    now_ms: u64,
) -> Result<(Vec<DecidedRecord>, RunState), StoreError> {
    let mut record = match store.load(session_id).await {
        Ok(Some(record)) => record,
        // Gone, or unreadable: nothing to expire here (the listing reports unreadable records).
        Ok(None) | Err(StoreError::Corrupt { .. } | StoreError::NewerSchema { .. }) => {
            return Ok((Vec::new(), RunState::Completed));
        }
        Err(e) => return Err(e),
    };
    let decided = expire_record(&mut record, now_ms);
    if decided.is_empty() {
        return Ok((Vec::new(), RunState::Completed));
    }
    let ended = record.run.as_ref().map_or(RunState::Completed, |r| r.state);
    let expected = record.version;
    record.version += 1;
    record.updated_at = now_ms / 1000;
    match store.save(&record, Some(expected)).await {
        Ok(()) => Ok((decided, ended)),
        Err(StoreError::Conflict { .. }) => Ok((Vec::new(), RunState::Completed)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(text: &str) -> Result<u64, ApprovalTimeoutError> {
        text.parse::<ApprovalTimeout>()
            .map(|t| t.duration().as_secs())
    }

    #[test]
    fn accepts_each_unit_and_combinations_largest_first() {
        assert_eq!(secs("90s"), Ok(90));
        assert_eq!(secs("15m"), Ok(900));
        assert_eq!(secs("24h"), Ok(86_400));
        assert_eq!(secs("2d"), Ok(172_800));
        assert_eq!(secs("1h30m"), Ok(5_400));
        assert_eq!(secs("1d2h3m4s"), Ok(93_784));
        assert_eq!(secs("0h1s"), Ok(1));
        assert_eq!(secs("3650d"), Ok(3650 * 86_400));
    }

    /// Asserts that each of `texts` is refused with the error `why` makes of it.
    fn assert_refused(texts: &[&str], why: fn(String) -> ApprovalTimeoutError) {
        for text in texts {
            assert_eq!(secs(text), Err(why((*text).to_owned())), "{text:?}");
        }
    }

    #[test]
    fn refuses_words_signs_spaces_order_repeats_and_other_units() {
        assert_refused(
            &[
                "", "soon", "24", "h", "-5m", "+5m", "5 m", " 5m", "5m ", "30m1h", "1h1h", "5ms",
                "1w", "1.5h", "1H", "5m30", "٣s",
            ],
            ApprovalTimeoutError::Malformed,
        );
    }

    #[test]
    fn refuses_zero_and_overflow() {
        assert_refused(&["0s", "0d0h"], ApprovalTimeoutError::Zero);
        assert_refused(
            &[
                "3651d",
                "3650d1s",
                "99999999999999999999s",
                "18446744073709551615d",
            ],
            ApprovalTimeoutError::TooLong,
        );
    }

    #[test]
    fn a_deadline_saturates_instead_of_overflowing() {
        let timeout: ApprovalTimeout = "1s".parse().expect("valid");
        assert_eq!(timeout.deadline_after(5), 1_005);
        assert_eq!(timeout.deadline_after(u64::MAX - 1), u64::MAX);
    }
}
