//! A mode's `onTimeout` as written: what its deadline does to a plan nobody decided in time.
//! A deadline never approves, so `"approve"` is refused at its line and column, saying why.

use std::str::FromStr;

use toml::Spanned;

use super::{ConfigError, ConfigErrorKind, Source};
use crate::deadline::OnTimeout;

/// The `onTimeout` of mode `id` (`has_deadline`: it sets `approvalTimeout`); an error goes to
/// `errors` and the default ([`OnTimeout::Reject`]) is used.
pub(super) fn on_timeout_of(
    raw: Option<Spanned<String>>,
    has_deadline: bool,
    id: &str,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> OnTimeout {
    let Some(raw) = raw else {
        return OnTimeout::default();
    };
    let err = |message: String| {
        ConfigError::at(
            ConfigErrorKind::InvalidOnTimeout,
            source,
            raw.span(),
            message,
        )
    };
    let text = raw.get_ref().as_str();
    let parsed = match OnTimeout::from_str(text) {
        Ok(parsed) => parsed,
        Err(_) if text.eq_ignore_ascii_case("approve") => {
            errors.push(err(format!(
                "mode `{id}` has onTimeout `{text}`, but a deadline never approves: a plan nobody decided in time was never approved by anyone; use `reject` (the default) or `abort`"
            )));
            return OnTimeout::default();
        }
        Err(_) => {
            errors.push(err(format!(
                "mode `{id}` has onTimeout `{text}`: use `reject` (the default: the plan counts as rejected) or `abort` (the run is aborted)"
            )));
            return OnTimeout::default();
        }
    };
    if !has_deadline {
        errors.push(err(format!(
            "mode `{id}` sets onTimeout but no approvalTimeout, so it could never apply: add `approvalTimeout = \"24h\"` (for example) or leave onTimeout out"
        )));
    }
    parsed
}
