//! The `[[hooks]]` and `[[reviewers]]` tables of a config and the modes' `reviewBy`,
//! `reviewerMay`, `reviewToolCalls` and `approvers`: their checks, at line and column.
//!
//! Hooks ([`crate::hook`]) and reviewers ([`crate::review`]) run; a mode's `approvers` is
//! enforced ([`crate::quorum`]).

use std::collections::HashSet;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigError, ConfigErrorKind, Source, did_you_mean, is_valid_id};
use crate::deadline::ApprovalTimeout;
use crate::hook::{DEFAULT_HOOK_TIMEOUT, HookConfig, HookOn, MAX_HOOK_TIMEOUT};
use crate::review::DEFAULT_MODEL_REVIEW_TIMEOUT;
use crate::review::{ModeReview, ReviewerConfig, ReviewerKind, ReviewerMay};

/// One `[[hooks]]` entry as written.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "Hook"))]
pub(super) struct RawHook {
    /// The program and its arguments (`["python3", "hooks/guard.py"]`), run in the
    /// workspace; required. It gets one JSON object on stdin and answers one on stdout:
    /// `{"decision": "allow" | "deny" | "ask", "reason": "..."}`.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<Vec<String>>", length(min = 1))
    )]
    command: Option<Spanned<Vec<String>>>,
    /// What it is consulted on: `toolCall`, `plan`, or a list of them; required.
    #[cfg_attr(feature = "schema", schemars(with = "serde_json::Value"))]
    on: Option<Spanned<toml::Value>>,
    /// Only calls of these tools (`submit_plan` for plans); absent: every tool.
    #[cfg_attr(feature = "schema", schemars(with = "Option<Vec<String>>"))]
    tools: Option<Spanned<Vec<String>>>,
    /// Only in these modes, by id; absent: every mode.
    #[cfg_attr(feature = "schema", schemars(with = "Option<Vec<String>>"))]
    modes: Option<Spanned<Vec<Spanned<String>>>>,
    /// How long the command may take (`"10s"`, default 10s, at most 10m): past it, it is
    /// killed and counts as `ask`.
    #[cfg_attr(feature = "schema", schemars(with = "Option<super::schema::Duration>"))]
    timeout: Option<Spanned<String>>,
}

/// One `[[reviewers]]` entry as written.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "Reviewer"))]
pub(super) struct RawReviewer {
    /// The reviewer's id, as a mode's `reviewBy` names it.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "String", pattern(r"^[A-Za-z0-9_-]+$"))
    )]
    id: Spanned<String>,
    /// A program that reviews (one JSON object in, one out); or `model`.
    #[cfg_attr(feature = "schema", schemars(with = "Option<Vec<String>>"))]
    command: Option<Spanned<Vec<String>>>,
    /// A model that reviews, as `provider/model`; or `command`.
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    model: Option<Spanned<String>>,
    /// What a model reviewer is told.
    instructions: Option<String>,
    /// How long a review may take (`"30s"`, default 2m for a model and 10s for a command, at
    /// most 10m), by the command, the model or a reviewer a host registered under this id:
    /// past it, it is stopped and counts as `escalate`.
    #[cfg_attr(feature = "schema", schemars(with = "Option<super::schema::Duration>"))]
    timeout: Option<Spanned<String>>,
}

/// A mode's review keys as written.
#[derive(Debug, Default)]
pub(super) struct RawModeReview {
    pub(super) review_by: Option<Spanned<String>>,
    pub(super) reviewer_may: Option<Spanned<String>>,
    pub(super) review_tool_calls: Option<Spanned<bool>>,
    pub(super) approvers: Option<Spanned<i64>>,
}

/// The validated hooks of `raw` (an entry with an error is left out, the error pushed), and the
/// ids of the reviewers (checked the same way).
pub(super) fn validate_hooks(
    raw: Vec<Spanned<RawHook>>,
    mode_ids: &[&str],
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> Vec<HookConfig> {
    let err = |span: Range<usize>, message: String| {
        ConfigError::at(ConfigErrorKind::InvalidHook, source, span, message)
    };
    let mut hooks = Vec::new();
    for (n, entry) in raw.into_iter().enumerate() {
        let n = n + 1;
        let span = entry.span();
        let entry = entry.into_inner();
        let before = errors.len();
        // A missing key is reported inside the table (at its first key), not at its header.
        let inside = entry
            .on
            .as_ref()
            .map(Spanned::span)
            .or(entry.tools.as_ref().map(Spanned::span))
            .or(entry.modes.as_ref().map(Spanned::span))
            .or(entry.timeout.as_ref().map(Spanned::span))
            .unwrap_or(span.clone());
        let command = match entry.command {
            None => {
                errors.push(err(
                    inside.clone(),
                    format!("[[hooks]] entry {n} has no `command`: add the program to run and its arguments, `command = [\"python3\", \"hooks/guard.py\"]`"),
                ));
                Vec::new()
            }
            Some(c) if c.get_ref().first().is_none_or(|p| p.trim().is_empty()) => {
                errors.push(err(
                    c.span(),
                    format!("[[hooks]] entry {n} has an empty `command`: name the program first"),
                ));
                Vec::new()
            }
            Some(c) => c.into_inner(),
        };
        let on = match entry.on {
            None => {
                errors.push(err(
                    inside.clone(),
                    format!("[[hooks]] entry {n} has no `on`: say what it is consulted on, `on = \"toolCall\"`, `on = \"plan\"` or both in a list"),
                ));
                Vec::new()
            }
            Some(on) => on_of(&on, n, &err, errors),
        };
        let modes = entry.modes.map(|modes| {
            modes
                .into_inner()
                .into_iter()
                .map(|m| {
                    if !mode_ids.contains(&m.get_ref().as_str()) {
                        let hint = hint_of(did_you_mean(m.get_ref(), mode_ids.iter().copied()));
                        errors.push(err(
                            m.span(),
                            format!(
                                "[[hooks]] entry {n} names mode `{}` in `modes`, which does not exist{hint}",
                                m.get_ref()
                            ),
                        ));
                    }
                    m.into_inner()
                })
                .collect()
        });
        let timeout = match entry.timeout {
            None => DEFAULT_HOOK_TIMEOUT,
            Some(text) => match text.get_ref().parse::<ApprovalTimeout>() {
                Ok(t) if t.duration() <= MAX_HOOK_TIMEOUT => t.duration(),
                Ok(_) => {
                    errors.push(err(
                        text.span(),
                        format!("[[hooks]] entry {n} has timeout `{}`, longer than the most a hook may hold a run (10m)", text.get_ref()),
                    ));
                    DEFAULT_HOOK_TIMEOUT
                }
                Err(e) => {
                    errors.push(err(
                        text.span(),
                        format!("[[hooks]] entry {n} timeout: {e}"),
                    ));
                    DEFAULT_HOOK_TIMEOUT
                }
            },
        };
        if errors.len() == before {
            hooks.push(HookConfig {
                command,
                on,
                tools: entry.tools.map(Spanned::into_inner),
                modes,
                timeout,
            });
        }
    }
    hooks
}

/// `on` as written: `"toolCall"`, `"plan"`, or a list of them.
fn on_of(
    on: &Spanned<toml::Value>,
    n: usize,
    err: &impl Fn(Range<usize>, String) -> ConfigError,
    errors: &mut Vec<ConfigError>,
) -> Vec<HookOn> {
    let one = |v: &toml::Value| match v.as_str() {
        Some("toolCall") => Some(HookOn::ToolCall),
        Some("plan") => Some(HookOn::Plan),
        _ => None,
    };
    let values: Vec<&toml::Value> = match on.get_ref() {
        toml::Value::Array(list) if !list.is_empty() => list.iter().collect(),
        toml::Value::Array(_) => Vec::new(),
        other => vec![other],
    };
    let kinds: Option<Vec<HookOn>> = values.iter().map(|v| one(v)).collect();
    match kinds {
        Some(kinds) if !kinds.is_empty() => kinds,
        _ => {
            errors.push(err(
                on.span(),
                format!("[[hooks]] entry {n} has `on = {}`: use \"toolCall\", \"plan\" or a list of them", on.get_ref()),
            ));
            Vec::new()
        }
    }
}

/// The valid reviewers of `raw`, pushing an error for a bad or duplicate id, for an entry with
/// neither or both of `command` and `model`, and for a bad or too long `timeout`.
pub(super) fn validate_reviewers(
    raw: Vec<RawReviewer>,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> Vec<ReviewerConfig> {
    let err = |span: Range<usize>, message: String| {
        ConfigError::at(ConfigErrorKind::InvalidReviewer, source, span, message)
    };
    let mut reviewers = Vec::new();
    let mut seen = HashSet::new();
    for entry in raw {
        let id = entry.id.get_ref().clone();
        if !is_valid_id(&id) {
            errors.push(err(
                entry.id.span(),
                format!(
                    "reviewer id `{id}` is invalid: use only ASCII letters, digits, `-` and `_`"
                ),
            ));
            continue;
        }
        if !seen.insert(id.clone()) {
            errors.push(err(
                entry.id.span(),
                format!("duplicate reviewer id `{id}`: another reviewer already uses it"),
            ));
            continue;
        }
        // A model reads the whole plan and may think before it answers: it gets longer.
        let default = if entry.command.is_none() && entry.model.is_some() {
            DEFAULT_MODEL_REVIEW_TIMEOUT
        } else {
            DEFAULT_HOOK_TIMEOUT
        };
        let timeout = match &entry.timeout {
            None => default,
            Some(text) => match text.get_ref().parse::<ApprovalTimeout>() {
                Ok(t) if t.duration() <= MAX_HOOK_TIMEOUT => t.duration(),
                Ok(_) => {
                    errors.push(err(
                        text.span(),
                        format!("reviewer `{id}` has timeout `{}`, longer than the most a reviewer may hold a run (10m)", text.get_ref()),
                    ));
                    default
                }
                Err(e) => {
                    errors.push(err(text.span(), format!("reviewer `{id}` timeout: {e}")));
                    default
                }
            },
        };
        // A bad timeout keeps the entry (its error is pushed all the same), so a mode's
        // `reviewBy` still finds the id and the timeout's error is the one shown.
        let before = errors.len();
        match (&entry.command, &entry.model) {
            (None, None) => errors.push(err(
                entry.id.span(),
                format!("reviewer `{id}` sets neither `command` nor `model`: set one"),
            )),
            (Some(_), Some(model)) => errors.push(err(
                model.span(),
                format!("reviewer `{id}` sets both `command` and `model`: set one"),
            )),
            (Some(c), None) if c.get_ref().first().is_none_or(|p| p.trim().is_empty()) => errors
                .push(err(
                    c.span(),
                    format!("reviewer `{id}` has an empty `command`: name the program first"),
                )),
            _ => {}
        }
        if errors.len() > before {
            continue;
        }
        let kind = match (entry.command, entry.model) {
            (Some(command), _) => ReviewerKind::Command {
                command: command.into_inner(),
                timeout,
            },
            (None, Some(model)) => ReviewerKind::Model {
                model: model.into_inner(),
                instructions: entry.instructions.unwrap_or_default(),
            },
            (None, None) => continue,
        };
        reviewers.push(ReviewerConfig { id, kind, timeout });
    }
    reviewers
}

/// The checks of mode `mode_id`'s review keys: `reviewBy` names a reviewer, `reviewerMay` is
/// `decide` or `advise`, `approvers` is from 1 to 16. Returns the mode's `approvers` (1 when
/// absent or invalid) and its review, when `reviewBy` names a reviewer of `reviewers` (the ids).
pub(super) fn check_mode_review(
    review: RawModeReview,
    mode_id: &str,
    reviewers: &[String],
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> (u8, Option<ModeReview>) {
    let mut quorum = 1;
    if let Some(by) = &review.review_by
        && !reviewers.iter().any(|r| r == by.get_ref())
    {
        let hint = hint_of(did_you_mean(
            by.get_ref(),
            reviewers.iter().map(String::as_str),
        ));
        let known = if reviewers.is_empty() {
            " (the config defines no [[reviewers]])".to_owned()
        } else {
            hint
        };
        errors.push(ConfigError::at(
            ConfigErrorKind::UnknownReviewer,
            source,
            by.span(),
            format!(
                "mode `{mode_id}` sets reviewBy = \"{}\", but no [[reviewers]] entry has that id{known}",
                by.get_ref()
            ),
        ));
    }
    if let Some(may) = &review.reviewer_may {
        if !matches!(may.get_ref().as_str(), "decide" | "advise") {
            errors.push(ConfigError::at(
                ConfigErrorKind::InvalidReviewer,
                source,
                may.span(),
                format!(
                    "mode `{mode_id}` has reviewerMay = \"{}\": use \"advise\" or \"decide\"",
                    may.get_ref()
                ),
            ));
        } else if review.review_by.is_none() {
            errors.push(ConfigError::at(
                ConfigErrorKind::InvalidReviewer,
                source,
                may.span(),
                format!("mode `{mode_id}` sets reviewerMay without reviewBy: name the reviewer"),
            ));
        }
    }
    if let (Some(flag), None) = (&review.review_tool_calls, &review.review_by) {
        errors.push(ConfigError::at(
            ConfigErrorKind::InvalidReviewer,
            source,
            flag.span(),
            format!("mode `{mode_id}` sets reviewToolCalls without reviewBy: name the reviewer"),
        ));
    }
    if let Some(approvers) = &review.approvers {
        let n = *approvers.get_ref();
        if !(1..=16).contains(&n) {
            errors.push(ConfigError::at(
                ConfigErrorKind::InvalidApprovers,
                source,
                approvers.span(),
                format!("mode `{mode_id}` has approvers = {n}: use a number from 1 to 16"),
            ));
        } else {
            quorum = u8::try_from(n).unwrap_or(1);
        }
    }
    let Some(by) = review.review_by else {
        return (quorum, None);
    };
    let may = match review.reviewer_may.as_ref().map(|m| m.get_ref().as_str()) {
        Some("decide") => ReviewerMay::Decide,
        _ => ReviewerMay::Advise,
    };
    let mode_review = reviewers
        .iter()
        .any(|r| r == by.get_ref())
        .then(|| ModeReview {
            reviewer: by.into_inner(),
            may,
            tool_calls: review.review_tool_calls.is_some_and(|f| *f.get_ref()),
        });
    (quorum, mode_review)
}

/// ` (did you mean `NAME`?)` for a close name, else nothing.
fn hint_of(close: Option<&str>) -> String {
    close.map_or_else(String::new, |c| format!(" (did you mean `{c}`?)"))
}
