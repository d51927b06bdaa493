//! The JSON Schema of the config format, derived with `schemars` from the same raw structs the
//! parser deserializes into, so the two cannot drift apart.
//!
//! The schema checks what a schema can: keys (unknown keys are refused, as the parser refuses
//! them), value types, the mode id pattern, and that `modes` is a non-empty list. Graph rules
//! that span several values (unique ids, `transitionsTo` naming an existing other mode, a single
//! default, `submit_plan` listed next to `transitionsTo`) are left to [`super::check`]: run
//! `agent-controller check` for those.

use serde_json::Value;

use super::RawConfig;

/// The JSON Schema (draft-07) of a mode config file, with descriptions taken from the field
/// docs. TOML editors (Even Better TOML / taplo) use it for completion and validation.
///
/// # Examples
/// ```
/// let schema = agent_controller::config::schema();
/// assert_eq!(schema["additionalProperties"], false);
/// assert_eq!(schema["required"], serde_json::json!(["modes"]));
/// assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
/// let targets = &schema["definitions"]["Mode"]["properties"]["transitionsTo"]["anyOf"];
/// assert_eq!(targets[0]["type"], "string");
/// assert_eq!(targets[1]["type"], "array");
/// ```
pub fn schema() -> Value {
    // Draft-07: what TOML editors' validators (taplo, behind Even Better TOML) and VS Code's
    // JSON tooling support most widely; nothing here needs a later draft.
    let generator = schemars::generate::SchemaSettings::draft07().into_generator();
    let mut schema = generator
        .into_root_schema_for::<RawConfig<'static>>()
        .to_value();
    drop_null_types(&mut schema);
    sort_keys(&mut schema);
    schema
}

/// Orders every object's keys alphabetically, so a schema reads (and its shipped file is) the
/// same whether or not serde_json keeps insertion order (its `preserve_order` feature, which
/// a dependency such as the `acp` feature's SDK turns on for the whole build).
pub(crate) fn sort_keys(value: &mut Value) {
    match value {
        Value::Object(object) => {
            let mut members: Vec<(String, Value)> = std::mem::take(object).into_iter().collect();
            members.sort_by(|(a, _), (b, _)| a.cmp(b));
            for (key, mut member) in members {
                sort_keys(&mut member);
                object.insert(key, member);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

/// The schema of `transitionsTo`: one mode id, or a non-empty list of distinct mode ids.
pub(super) fn targets_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [
            { "type": "string", "pattern": MODE_ID_PATTERN },
            {
                "type": "array",
                "items": { "type": "string", "pattern": MODE_ID_PATTERN },
                "minItems": 1,
                "uniqueItems": true
            }
        ]
    })
}

/// The schema of `requireApproval`: `true`/`false`, or a list of distinct tool names.
pub(super) fn approval_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [
            { "type": "boolean" },
            {
                "type": "array",
                "items": { "type": "string", "minLength": 1 },
                "uniqueItems": true
            }
        ]
    })
}

/// A duration as the config writes it (`approvalTimeout`, a server's `timeout`): whole numbers
/// with the units d, h, m, s, largest first (`"24h"`, `"1h30m"`).
pub(super) struct Duration;

impl schemars::JsonSchema for Duration {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": r"^([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?$",
            "minLength": 2
        })
    }
}

/// What a mode id looks like (ASCII letters, digits, `-` and `_`), as the other id fields say.
const MODE_ID_PATTERN: &str = r"^[A-Za-z0-9_-]+$";

/// TOML has no null: an optional key is one that may be left out, not one that may be null, so
/// `"type": ["string", "null"]` (what `Option<String>` derives) becomes `"type": "string"`.
fn drop_null_types(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Array(types)) = object.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    object.insert("type".to_owned(), only);
                }
            }
            object.values_mut().for_each(drop_null_types);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_types),
        _ => {}
    }
}

/// [`schema`] as pretty-printed JSON text with a final newline, as `agent-controller schema`
/// prints it and as `config/modes.schema.json` holds it.
pub fn schema_json() -> String {
    // Serializing a `serde_json::Value` cannot fail: its map keys are strings.
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    text.push('\n');
    text
}
