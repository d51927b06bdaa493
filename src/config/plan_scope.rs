//! A planning mode's `planScope` as written: what the files an approved plan declares do in
//! the mode it hands over to ([`PlanScopePolicy`]). A value other than `ask`, `enforce` or
//! `off`, or the key on a mode that plans nothing, is refused at its line and column.

use std::str::FromStr;

use toml::Spanned;

use super::{ConfigError, ConfigErrorKind, Source};
use crate::plan::PlanScopePolicy;

/// The `planScope` of mode `id` (`plans`: it is a planning mode); an error goes to `errors`
/// and the default ([`PlanScopePolicy::Ask`]) is used.
pub(super) fn plan_scope_of(
    raw: Option<Spanned<String>>,
    plans: bool,
    id: &str,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> PlanScopePolicy {
    let Some(raw) = raw else {
        return PlanScopePolicy::default();
    };
    let err = |message: String| {
        ConfigError::at(
            ConfigErrorKind::InvalidPlanScope,
            source,
            raw.span(),
            message,
        )
    };
    let text = raw.get_ref().as_str();
    let Ok(parsed) = PlanScopePolicy::from_str(text) else {
        errors.push(err(format!(
            "mode `{id}` has planScope `{text}`: use `ask` (the default: writes outside the approved plan's files wait for approval), `enforce` (they are refused) or `off` (the files are shown and bind nothing)"
        )));
        return PlanScopePolicy::default();
    };
    if !plans {
        errors.push(err(format!(
            "mode `{id}` sets planScope but plans nothing (no transitionsTo, no `submit_plan` in its availableTools), so it could never apply: set it on the planning mode whose plans hand over, or leave it out"
        )));
    }
    parsed
}
