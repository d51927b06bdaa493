//! Whether a tool call's arguments fit the tool's input schema ([`crate::Tool::input_schema`]),
//! checked before the call runs or waits for approval: the model is an attacker, and a tool
//! (or the user asked to approve a call) must not be handed arguments the tool never declared.
//!
//! The check reads the JSON Schema keywords that say what an argument object holds: `type`
//! (with `integer`), `properties`, `required`, `additionalProperties`, `enum`, `const`, `items`,
//! `minLength`/`maxLength`, `minimum`/`maximum`, `exclusiveMinimum`/`exclusiveMaximum`,
//! `minItems`/`maxItems`, `allOf`/`anyOf`/`oneOf`/`not`, and boolean schemas. Other keywords
//! (`$ref`, `pattern`, `format`, ...) are not checked: a tool whose schema relies on them checks
//! those rules itself, as it checks everything its schema cannot say.

use serde_json::Value;

/// The longest property name or path shown in a refusal; a hostile name is cut there.
const SHOWN: usize = 64;

/// Why `args` do not fit `schema`, for the call's error result, or `None` when they fit (or the
/// schema says nothing the check reads).
///
/// # Examples
/// ```
/// use agent_controller::tool::input::mismatch;
/// use serde_json::json;
/// let schema = json!({
///     "type": "object",
///     "properties": { "path": { "type": "string" } },
///     "required": ["path"],
///     "additionalProperties": false,
/// });
/// assert_eq!(mismatch(&json!({"path": "a.md"}), &schema), None);
/// assert_eq!(
///     mismatch(&json!({"path": "a.md", "mode": "0777"}), &schema).as_deref(),
///     Some("the arguments have the property `mode`, which the tool's input schema does not allow (it takes: `path`)"),
/// );
/// assert_eq!(
///     mismatch(&json!({"path": 7}), &schema).as_deref(),
///     Some("`path` must be a string, not a number"),
/// );
/// assert_eq!(
///     mismatch(&json!({}), &schema).as_deref(),
///     Some("the arguments lack the required property `path`"),
/// );
/// ```
pub fn mismatch(args: &Value, schema: &Value) -> Option<String> {
    check(args, schema, &At::Root).err()
}

/// Where in the arguments a value sits (`options[0].label`): written out only for a refusal,
/// so arguments that fit cost no text (a path a member, an item).
enum At<'a> {
    /// The arguments themselves.
    Root,
    /// The member `name` of the object at the parent.
    Member(&'a At<'a>, &'a str),
    /// The item `index` of the array at the parent.
    Item(&'a At<'a>, usize),
}

impl At<'_> {
    fn is_root(&self) -> bool {
        matches!(self, At::Root)
    }

    /// The path as text: members joined by `.`, items as `[i]`.
    fn text(&self) -> String {
        match self {
            At::Root => String::new(),
            At::Member(parent, name) if parent.is_root() => (*name).to_owned(),
            At::Member(parent, name) => format!("{}.{name}", parent.text()),
            At::Item(parent, index) => format!("{}[{index}]", parent.text()),
        }
    }
}

/// The keywords of a schema object the check reads, found in one pass over its members (a
/// lookup of each of some twenty keywords, most of them absent, was most of the check's cost).
#[derive(Default)]
struct Keywords<'a> {
    types: Option<&'a Value>,
    options: Option<&'a Value>,
    constant: Option<&'a Value>,
    properties: Option<&'a Value>,
    required: Option<&'a Value>,
    additional: Option<&'a Value>,
    items: Option<&'a Value>,
    min_items: Option<&'a Value>,
    max_items: Option<&'a Value>,
    unique_items: Option<&'a Value>,
    min_length: Option<&'a Value>,
    max_length: Option<&'a Value>,
    minimum: Option<&'a Value>,
    maximum: Option<&'a Value>,
    exclusive_minimum: Option<&'a Value>,
    exclusive_maximum: Option<&'a Value>,
    all_of: Option<&'a Value>,
    any_of: Option<&'a Value>,
    one_of: Option<&'a Value>,
    not: Option<&'a Value>,
}

impl<'a> Keywords<'a> {
    fn of(schema: &'a serde_json::Map<String, Value>) -> Self {
        let mut found = Keywords::default();
        for (name, value) in schema {
            let slot = match name.as_str() {
                "type" => &mut found.types,
                "enum" => &mut found.options,
                "const" => &mut found.constant,
                "properties" => &mut found.properties,
                "required" => &mut found.required,
                "additionalProperties" => &mut found.additional,
                "items" => &mut found.items,
                "minItems" => &mut found.min_items,
                "maxItems" => &mut found.max_items,
                "uniqueItems" => &mut found.unique_items,
                "minLength" => &mut found.min_length,
                "maxLength" => &mut found.max_length,
                "minimum" => &mut found.minimum,
                "maximum" => &mut found.maximum,
                "exclusiveMinimum" => &mut found.exclusive_minimum,
                "exclusiveMaximum" => &mut found.exclusive_maximum,
                "allOf" => &mut found.all_of,
                "anyOf" => &mut found.any_of,
                "oneOf" => &mut found.one_of,
                "not" => &mut found.not,
                _ => continue,
            };
            *slot = Some(value);
        }
        found
    }
}

fn check(value: &Value, schema: &Value, at: &At<'_>) -> Result<(), String> {
    let schema = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(format!("{} is not allowed", subject(at))),
        Value::Object(schema) => Keywords::of(schema),
        _ => return Ok(()),
    };
    if let Some(types) = schema.types {
        let fits = match types {
            Value::String(t) => has_type(value, t),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| has_type(value, t)),
            _ => true,
        };
        if !fits {
            let wanted = match types {
                Value::Array(ts) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .map(article)
                    .collect::<Vec<_>>()
                    .join(" or "),
                Value::String(t) => article(t),
                _ => String::new(),
            };
            return Err(format!(
                "{} must be {wanted}, not {}",
                subject(at),
                kind(value)
            ));
        }
    }
    if let Some(Value::Array(options)) = schema.options
        && !options.contains(value)
    {
        return Err(format!(
            "{} must be one of the values the tool's input schema lists",
            subject(at)
        ));
    }
    if let Some(constant) = schema.constant
        && constant != value
    {
        return Err(format!(
            "{} must be the value the tool's input schema fixes",
            subject(at)
        ));
    }
    match value {
        Value::Object(members) => {
            let properties = schema.properties.and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.required {
                for name in required.iter().filter_map(Value::as_str) {
                    if !members.contains_key(name) {
                        return Err(format!(
                            "{} lack{} the required property `{}`",
                            subject(at),
                            if at.is_root() { "" } else { "s" },
                            cut(name)
                        ));
                    }
                }
            }
            for (name, member) in members {
                let path = At::Member(at, name);
                match properties.and_then(|p| p.get(name)) {
                    Some(sub) => check(member, sub, &path)?,
                    None => match schema.additional {
                        Some(Value::Bool(false)) => {
                            let allowed = properties
                                .map(|p| {
                                    p.keys()
                                        .map(|k| format!("`{}`", cut(k)))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                })
                                .filter(|list| !list.is_empty())
                                .unwrap_or_else(|| "no properties".to_owned());
                            return Err(format!(
                                "{} {} the property `{}`, which the tool's input schema does not allow (it takes: {allowed})",
                                subject(at),
                                if at.is_root() { "have" } else { "has" },
                                cut(name)
                            ));
                        }
                        Some(sub) => check(member, sub, &path)?,
                        None => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.items {
                for (i, item) in items.iter().enumerate() {
                    check(item, sub, &At::Item(at, i))?;
                }
            }
            let len = items.len() as u64;
            if let Some(min) = count(schema.min_items).filter(|m| len < *m) {
                return Err(format!(
                    "{} has too few items: {len}, at least {min}",
                    subject(at)
                ));
            }
            if let Some(max) = count(schema.max_items).filter(|m| len > *m) {
                return Err(format!(
                    "{} has too many items: {len}, at most {max}",
                    subject(at)
                ));
            }
            if schema.unique_items == Some(&Value::Bool(true)) {
                // Compared in canonical form (JCS), so key order does not hide a repeat.
                let mut seen = std::collections::HashSet::new();
                if let Some(i) = items
                    .iter()
                    .position(|item| !seen.insert(crate::jcs::to_string(item)))
                {
                    return Err(format!(
                        "{} repeats an item (item {}): each item must differ",
                        subject(at),
                        i + 1
                    ));
                }
            }
        }
        Value::String(text) => {
            let len = text.chars().count() as u64;
            if let Some(min) = count(schema.min_length).filter(|m| len < *m) {
                return Err(format!(
                    "{} is too short: {len} characters, at least {min}",
                    subject(at)
                ));
            }
            if let Some(max) = count(schema.max_length).filter(|m| len > *m) {
                return Err(format!(
                    "{} is too long: {len} characters, at most {max}",
                    subject(at)
                ));
            }
        }
        Value::Number(n) => {
            let n = n.as_f64().unwrap_or(0.0);
            let bound = |keyword: Option<&Value>| keyword.and_then(Value::as_f64);
            let out = bound(schema.minimum).is_some_and(|m| n < m)
                || bound(schema.maximum).is_some_and(|m| n > m)
                || bound(schema.exclusive_minimum).is_some_and(|m| n <= m)
                || bound(schema.exclusive_maximum).is_some_and(|m| n >= m);
            if out {
                return Err(format!(
                    "{} is outside the range the tool's input schema allows",
                    subject(at)
                ));
            }
        }
        _ => {}
    }
    if let Some(Value::Array(all)) = schema.all_of {
        for sub in all {
            check(value, sub, at)?;
        }
    }
    if let Some(Value::Array(any)) = schema.any_of
        && !any.iter().any(|sub| check(value, sub, at).is_ok())
    {
        return Err(format!(
            "{} fits none of the shapes the tool's input schema allows",
            subject(at)
        ));
    }
    if let Some(Value::Array(one)) = schema.one_of
        && one
            .iter()
            .filter(|sub| check(value, sub, at).is_ok())
            .count()
            != 1
    {
        return Err(format!(
            "{} must fit exactly one of the shapes the tool's input schema allows",
            subject(at)
        ));
    }
    if let Some(not) = schema.not
        && check(value, not, at).is_ok()
    {
        return Err(format!(
            "{} has a shape the tool's input schema forbids",
            subject(at)
        ));
    }
    Ok(())
}

/// The value of a whole-number keyword (`minItems`, `maxLength`, ...), if the schema has it.
fn count(keyword: Option<&Value>) -> Option<u64> {
    keyword.and_then(Value::as_u64)
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
        // A type the check does not know: not for it to refuse.
        _ => true,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn article(name: &str) -> String {
    match name {
        "object" | "array" | "integer" => format!("an {name}"),
        "null" => "null".to_owned(),
        other => format!("a {}", cut(other)),
    }
}

/// What a message speaks of: the arguments themselves, or the member at `at`.
fn subject(at: &At<'_>) -> String {
    if at.is_root() {
        "the arguments".to_owned()
    } else {
        format!("`{}`", cut(&at.text()))
    }
}

/// `text` cut to [`SHOWN`] characters (a hostile name can be megabytes long).
fn cut(text: &str) -> String {
    match text.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_members_arrays_and_combinators() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": { "type": "integer", "minimum": 1 },
                "tags": { "type": "array", "items": { "enum": ["a", "b"] } },
                "o": { "type": "object", "properties": { "x": { "type": ["string", "null"] } },
                       "additionalProperties": false },
                "either": { "anyOf": [{ "type": "string" }, { "type": "boolean" }] },
            },
        });
        assert_eq!(
            mismatch(&json!({"n": 2, "tags": ["a"], "o": {"x": null}}), &schema),
            None
        );
        assert_eq!(
            mismatch(&json!({"n": 1.5}), &schema).as_deref(),
            Some("`n` must be an integer, not a number")
        );
        assert!(mismatch(&json!({"n": 0}), &schema).is_some());
        assert!(
            mismatch(&json!({"tags": ["c"]}), &schema)
                .expect("refused")
                .contains("`tags[0]`")
        );
        assert!(
            mismatch(&json!({"o": {"y": 1}}), &schema)
                .expect("refused")
                .contains("`o` has the property `y`")
        );
        assert!(
            mismatch(&json!({"o": {"x": 1}}), &schema)
                .expect("refused")
                .contains("string or null")
        );
        assert!(mismatch(&json!({"either": 3}), &schema).is_some());
        // Extra members are fine where the schema does not forbid them.
        assert_eq!(mismatch(&json!({"zzz": 1}), &schema), None);
    }

    #[test]
    fn a_long_hostile_name_is_cut() {
        let schema = json!({"type": "object", "additionalProperties": false});
        let name = "x".repeat(100_000);
        let message = mismatch(&json!({ name: 1 }), &schema).expect("refused");
        assert!(message.len() < 300, "{message}");
        assert!(message.contains("no properties"), "{message}");
    }
}
