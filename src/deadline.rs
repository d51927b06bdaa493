//! Approval deadlines: a mode's `approvalTimeout` ([`ApprovalTimeout`]), the deadline a plan
//! submitted in it records (`deadlineAtMs` in its suspend payload), and what happens when no
//! decision was taken by then: the plan *expires* (issue 12, "Deadlines").
//!
//! An expired plan counts as rejected. The model gets a result saying so
//! ([`expired_result`]), the decision history records the outcome `expired`
//! ([`crate::DecisionOutcome::Expired`]), the run ends (`completed`, as after a rejection without
//! feedback: no model call happens without a host) and the mode stays.
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

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::event::{DecidedRecord, RunState};
use crate::machine::expiry::{self, Waiting};
pub use crate::machine::expiry::{
    APPROVED_NOT_RUN_RESULT, deadline_text, expired_result, expired_tool_result,
};
use crate::store::{SessionRecord, SessionStore, StoreError};

named_enum! {
    /// What a mode's deadline does to a plan nobody decided in time (`onTimeout`): a deadline
    /// never approves.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub enum OnTimeout {
        /// The plan counts as rejected: the model is told, the run ends, the mode stays (the
        /// default).
        #[default]
        Reject = "reject",
        /// The run is aborted: the plan counts as not approved and the run ends `aborted`.
        Abort = "abort",
    }
}

/// The longest `approvalTimeout` accepted: 3650 days (about ten years).
pub const MAX_APPROVAL_TIMEOUT: Duration = Duration::from_secs(3650 * 86_400);

/// The time source of a controller ([`crate::AgentControllerBuilder::clock`]): now, as wall-clock
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

/// How long a plan submitted in a mode may wait for a decision (`approvalTimeout = "24h"`):
/// a whole number of days, hours, minutes and seconds, written as it was configured.
///
/// The text is one or more `<number><unit>` parts with units `d`, `h`, `m`, `s`, largest unit
/// first, each unit at most once, no spaces or signs: `"90s"`, `"15m"`, `"24h"`, `"1h30m"`,
/// `"2d12h"`. It must be more than zero and at most [`MAX_APPROVAL_TIMEOUT`].
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use agent_controller::deadline::ApprovalTimeout;
///
/// let timeout: ApprovalTimeout = "1h30m".parse()?;
/// assert_eq!(timeout.duration(), Duration::from_secs(5400));
/// assert_eq!(timeout.to_string(), "1h30m");
/// assert!("soon".parse::<ApprovalTimeout>().is_err());
/// assert!("0s".parse::<ApprovalTimeout>().is_err());
/// # Ok::<(), agent_controller::deadline::ApprovalTimeoutError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalTimeout {
    text: String,
    duration: Duration,
}

impl ApprovalTimeout {
    /// The duration.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The text as configured (`"24h"`).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The deadline of a plan submitted at `now_ms` (milliseconds since the Unix epoch).
    pub(crate) fn deadline_after(&self, now_ms: u64) -> u64 {
        let millis = u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX);
        now_ms.saturating_add(millis)
    }
}

impl fmt::Display for ApprovalTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.text)
    }
}

/// Why a text is not an [`ApprovalTimeout`]: the message names the text and what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalTimeoutError {
    /// Not of the form `<number><unit>...` (units `d`, `h`, `m`, `s`, largest first, each once).
    #[error(
        "approvalTimeout `{0}` is not a duration: write whole numbers with the units d, h, m, s, largest first (\"90s\", \"15m\", \"24h\", \"1h30m\")"
    )]
    Malformed(String),
    /// Zero: a plan would expire as it is submitted.
    #[error(
        "approvalTimeout `{0}` is zero: a plan would expire as it is submitted (leave approvalTimeout out for no deadline)"
    )]
    Zero(String),
    /// Longer than [`MAX_APPROVAL_TIMEOUT`] (or too large to compute).
    #[error("approvalTimeout `{0}` is too long: at most 3650d")]
    TooLong(String),
}

impl FromStr for ApprovalTimeout {
    type Err = ApprovalTimeoutError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let malformed = || ApprovalTimeoutError::Malformed(text.to_owned());
        let too_long = || ApprovalTimeoutError::TooLong(text.to_owned());
        const UNITS: [(char, u64); 4] = [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)];
        let mut rest = text;
        // Index into UNITS of the next unit allowed: each at most once, largest first.
        let mut next_unit = 0;
        let mut seconds: u64 = 0;
        if rest.is_empty() {
            return Err(malformed());
        }
        while !rest.is_empty() {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return Err(malformed());
            }
            let (number, after) = rest.split_at(digits);
            let unit = after.chars().next().ok_or_else(malformed)?;
            let at = UNITS[next_unit..]
                .iter()
                .position(|(u, _)| *u == unit)
                .ok_or_else(malformed)?
                + next_unit;
            next_unit = at + 1;
            // Digits only: a parse failure is an overflow.
            let number: u64 = number.parse().map_err(|_| too_long())?;
            let part = number.checked_mul(UNITS[at].1).ok_or_else(too_long)?;
            seconds = seconds.checked_add(part).ok_or_else(too_long)?;
            rest = &after[unit.len_utf8()..];
        }
        let duration = Duration::from_secs(seconds);
        if duration.is_zero() {
            return Err(ApprovalTimeoutError::Zero(text.to_owned()));
        }
        if duration > MAX_APPROVAL_TIMEOUT {
            return Err(too_long());
        }
        Ok(Self {
            text: text.to_owned(),
            duration,
        })
    }
}

/// Applies the expiry of `record`'s pending plan, or of its waiting tool calls, if a deadline
/// passed at `now_ms`: the results for the model, the history entries, the run ended
/// `completed`; the same change a [`crate::Session`] makes. Returns the records of what expired
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
    let Some(expiry) = expiry::expire(plan.chain(calls), now_ms) else {
        return Vec::new();
    };
    record.pending = None;
    record.pending_tool_calls.clear();
    let expired = expiry.expired();
    for answer in expiry.answers {
        let (message, decided) = answer.into_parts();
        record.messages.push(message);
        record.history.push(decided);
    }
    record.last_decided = record.history.last().cloned();
    record.run = Some(crate::store::RunRecord {
        run_id: expiry.run_id,
        state: RunState::Completed,
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
    let now_ms = millis_since_epoch(now);
    let listing = store.list_pending(now_ms).await?;
    let mut expired = Vec::new();
    for summary in listing.pending {
        if summary.deadline_at_ms.is_none_or(|at| at > now_ms) {
            continue;
        }
        // A session with several waiting calls is listed once per call: the first expires
        // them all, the others find nothing due.
        for decision in expire_session(store, &summary.session_id, now_ms).await? {
            expired.push(ExpiredDecision {
                session_id: summary.session_id.clone(),
                decision,
            });
        }
    }
    Ok(expired)
}

/// Expires the pending plan (or waiting tool calls) of session `session_id` if due at `now_ms`:
/// loads the record, applies the expiry and saves it in place of the version it read. Empty
/// when nothing was due (any more), or when another writer saved first (it applied the expiry,
/// or decided).
async fn expire_session(
    store: &dyn SessionStore,
    session_id: &str,
    now_ms: u64,
) -> Result<Vec<DecidedRecord>, StoreError> {
    let mut record = match store.load(session_id).await {
        Ok(Some(record)) => record,
        // Gone, or unreadable: nothing to expire here (the listing reports unreadable records).
        Ok(None) | Err(StoreError::Corrupt { .. } | StoreError::NewerSchema { .. }) => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let decided = expire_record(&mut record, now_ms);
    if decided.is_empty() {
        return Ok(Vec::new());
    }
    let expected = record.version;
    record.version += 1;
    record.updated_at = now_ms / 1000;
    match store.save(&record, Some(expected)).await {
        Ok(()) => Ok(decided),
        Err(StoreError::Conflict { .. }) => Ok(Vec::new()),
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

    #[test]
    fn refuses_words_signs_spaces_order_repeats_and_other_units() {
        for text in [
            "", "soon", "24", "h", "-5m", "+5m", "5 m", " 5m", "5m ", "30m1h", "1h1h", "5ms", "1w",
            "1.5h", "1H", "5m30", "٣s",
        ] {
            assert!(
                matches!(secs(text), Err(ApprovalTimeoutError::Malformed(_))),
                "{text:?} gave {:?}",
                secs(text)
            );
        }
    }

    #[test]
    fn refuses_zero_and_overflow() {
        assert!(matches!(secs("0s"), Err(ApprovalTimeoutError::Zero(_))));
        assert!(matches!(secs("0d0h"), Err(ApprovalTimeoutError::Zero(_))));
        for text in [
            "3651d",
            "3650d1s",
            "99999999999999999999s",
            "18446744073709551615d",
        ] {
            assert!(
                matches!(secs(text), Err(ApprovalTimeoutError::TooLong(_))),
                "{text:?} gave {:?}",
                secs(text)
            );
        }
    }

    #[test]
    fn a_deadline_saturates_instead_of_overflowing() {
        let timeout: ApprovalTimeout = "1s".parse().expect("valid");
        assert_eq!(timeout.deadline_after(5), 1_005);
        assert_eq!(timeout.deadline_after(u64::MAX - 1), u64::MAX);
    }
}
