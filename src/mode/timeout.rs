//! A mode's `approvalTimeout` ([`ApprovalTimeout`]): how long what it submits may wait for a
//! decision. Re-exported by [`crate::deadline`], which applies it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

// Defined beside the payloads that carry it (`onTimeout`), which the event module owns.
pub use crate::event::OnTimeout;

/// The longest `approvalTimeout` accepted: 3650 days (about ten years).
pub const MAX_APPROVAL_TIMEOUT: Duration = Duration::from_secs(3650 * 86_400);

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
