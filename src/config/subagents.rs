//! The `[[subagents]]` tables as written, and their checks: ids like mode ids and unique,
//! tools listed once (checked against the controller's tools like the modes'), a valid
//! `requireApproval` and valid rules; and a mode's `subagents` list naming types that exist.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::{
    ConfigError, ConfigErrorKind, Owner, RawApproval, Source, approval_policy, did_you_mean,
    duplicate_tool, is_valid_id, listed, rules,
};
use crate::mode::subagent::SubagentType;
use crate::mode::{RequireApproval, SubagentToolRef};

/// One subagent type as written: what the parent's model reads to choose it, the child's
/// instructions, tools and model.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "Subagent"))]
pub(super) struct RawSubagent<'a> {
    /// The type id (`agentType` in a `subagent` call): ASCII letters, digits, `-` and `_`;
    /// unique among the types.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "String", pattern(r"^[A-Za-z0-9_-]+$"))
    )]
    pub(super) id: Spanned<Cow<'a, str>>,
    /// The display name (default: the id).
    name: Option<String>,
    /// What the parent's model reads to choose this type.
    description: Option<String>,
    /// The child's instructions (its system prompt).
    instructions: Option<String>,
    /// The tools the child may call, each once, within what the parent's current mode offers
    /// (absent: every tool the parent's mode offers). A child never gets `submit_plan` or the
    /// task tools, and gets `subagent` only within the depth limit.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<Vec<String>>", extend("uniqueItems" = true))
    )]
    available_tools: Option<Spanned<Vec<Spanned<Cow<'a, str>>>>>,
    /// Tool calls of the child that wait for the user's approval, on top of the parent mode's
    /// own `requireApproval`: a list of tools the type lists, or `true` for every tool.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "super::schema::approval_schema")
    )]
    require_approval: Option<Spanned<RawApproval<'a>>>,
    /// Rules on the child's tool-call arguments, on top of the parent mode's: `deny` and `ask`
    /// only (an `allow` would widen what the parent's mode allows, and is refused).
    #[cfg_attr(feature = "schema", schemars(with = "Option<Vec<rules::RawRule>>"))]
    rules: Option<Spanned<Vec<Spanned<rules::RawRule>>>>,
    /// The model the child runs with, as `provider/model`; absent: the parent's.
    default_model_id: Option<String>,
}

/// The validated types of `raw`, with every tool name they list; errors go to `errors`, and a
/// type whose id is invalid or taken is left out.
pub(super) fn validate_subagents(
    raw: Vec<RawSubagent<'_>>,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> (Vec<SubagentType>, Vec<SubagentToolRef>) {
    let err =
        |kind, span: Range<usize>, message: String| ConfigError::at(kind, source, span, message);
    let mut types: Vec<SubagentType> = Vec::with_capacity(raw.len());
    let mut refs: Vec<SubagentToolRef> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    // How many errors got a "did you mean" hint (see `approval_policy`).
    let mut hinted = 0;
    for entry in raw {
        let id: &str = entry.id.get_ref();
        if !is_valid_id(id) {
            errors.push(err(
                ConfigErrorKind::InvalidId,
                entry.id.span(),
                format!(
                    "subagent type id `{id}` is invalid: use only ASCII letters, digits, `-` and `_`"
                ),
            ));
            continue;
        }
        if !seen.insert(id.to_owned()) {
            errors.push(err(
                ConfigErrorKind::DuplicateId,
                entry.id.span(),
                format!(
                    "duplicate subagent type id `{id}`: another [[subagents]] entry already uses it"
                ),
            ));
            continue;
        }
        let index = types.len();
        let available_tools = entry.available_tools.map(|list| {
            let mut listed_once: HashSet<&str> = HashSet::new();
            let mut names: Vec<Arc<str>> = Vec::new();
            for name in list.get_ref() {
                let text: &str = name.get_ref();
                if !listed_once.insert(text) {
                    errors.push(duplicate_tool(
                        source,
                        name.span(),
                        Owner::SubagentType(id),
                        text,
                        "availableTools",
                    ));
                    continue;
                }
                refs.push(SubagentToolRef {
                    subagent: index,
                    name: Arc::from(text),
                    span: name.span(),
                    in_approval: false,
                });
                names.push(Arc::from(text));
            }
            names
        });
        let require_approval = entry.require_approval.map_or(RequireApproval::None, |raw| {
            approval_policy(
                raw,
                Owner::SubagentType(id),
                available_tools.as_deref(),
                source,
                |name, span| {
                    refs.push(SubagentToolRef {
                        subagent: index,
                        name,
                        span,
                        in_approval: true,
                    });
                },
                errors,
                &mut hinted,
            )
        });
        let rules = rules::rules_of(
            entry.rules,
            Owner::SubagentType(id),
            available_tools.as_deref(),
            source,
            errors,
        );
        types.push(SubagentType {
            id: Arc::from(id),
            name: entry.name.unwrap_or_else(|| id.to_owned()),
            description: entry.description.unwrap_or_default(),
            instructions: entry.instructions.unwrap_or_default(),
            available_tools,
            require_approval,
            rules,
            default_model_id: entry.default_model_id,
        });
    }
    (types, refs)
}

/// Mode `mode`'s `subagents` list, checked against the types `types`: each entry names a type
/// once (errors go to `errors`, at the entry).
pub(super) fn mode_subagents(
    list: Option<Spanned<Vec<Spanned<Cow<'_, str>>>>>,
    mode: &str,
    types: &[SubagentType],
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> Option<Vec<Arc<str>>> {
    let list = list?.into_inner();
    let mut ids: Vec<Arc<str>> = Vec::with_capacity(list.len());
    for entry in list {
        let id: &str = entry.get_ref();
        if ids.iter().any(|known| &**known == id) {
            errors.push(ConfigError::at(
                ConfigErrorKind::UnknownSubagent,
                source,
                entry.span(),
                format!(
                    "mode `{mode}` lists subagent type `{id}` twice in subagents: name each once"
                ),
            ));
            continue;
        }
        match types.iter().find(|t| &*t.id == id) {
            Some(found) => ids.push(found.id.clone()),
            None => {
                let hint = match did_you_mean(id, types.iter().map(|t| &*t.id)) {
                    Some(near) => format!(": did you mean `{near}`?"),
                    None if types.is_empty() => {
                        ": the config has no [[subagents]] entries".to_owned()
                    }
                    None => format!(" (known: {})", listed(types.iter().map(|t| &*t.id))),
                };
                errors.push(ConfigError::at(
                    ConfigErrorKind::UnknownSubagent,
                    source,
                    entry.span(),
                    format!("mode `{mode}` lists `{id}` in subagents, which names no subagent type{hint}"),
                ));
            }
        }
    }
    Some(ids)
}
