//! The rules a model's tool-call arguments must meet before anything is done with them (the
//! model is an attacker: its arguments are hostile input).
//!
//! - At most [`MAX_DEPTH`] levels of arrays and objects: the session record holds the arguments,
//!   and a record nested deeper than its loader reads (serde_json stops at 128 levels over the
//!   whole record) would make the session unreadable for good.
//! - I-JSON (RFC 7493), which RFC 8785 (the `argsSha256` hash, [`crate::jcs`]) assumes: no
//!   duplicate member names (serde_json would keep the last silently), and no integer beyond
//!   ±(2^53−1), which JavaScript and JCS cannot hold exactly.
//!
//! Arguments that break a rule are refused: the call is not executed and never suspended, and
//! the model gets an error result saying why ([`refusal`]). Arguments that meet them are kept as
//! their RFC 8785 round trip ([`normalize`]: `-0` becomes `0`, `1.0` becomes `1`), so what a tool
//! runs with is exactly what `argsSha256` hashes and what `pending --json` shows.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The deepest nesting of arrays and objects taken in tool-call arguments (`{}` is 1 level,
/// `{"a":[1]}` is 2).
pub const MAX_DEPTH: usize = 64;

/// The largest integer magnitude taken in tool-call arguments: 2^53−1, the largest integer a
/// double (JavaScript's number, and JCS's) holds exactly together with its neighbours.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Why arguments are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgsError {
    /// Arrays and objects nest deeper than [`MAX_DEPTH`].
    #[error("the arguments nest deeper than {MAX_DEPTH} levels of arrays and objects")]
    TooDeep,
    /// An object names a member twice.
    #[error("the arguments name the member `{0}` twice in one object")]
    DuplicateKey(String),
    /// An integer beyond ±(2^53−1).
    #[error(
        "the arguments hold the integer {0}, beyond ±(2^53-1), which JSON readers (and the argsSha256 hash) cannot hold exactly"
    )]
    UnsafeInteger(String),
    /// The text is not JSON.
    #[error("the arguments are not valid JSON: {0}")]
    Syntax(String),
}

/// Parses `text` as tool-call arguments and checks them ([`check`]), refusing duplicate member
/// names, which a plain `serde_json` parse would drop silently.
///
/// # Errors
/// An [`ArgsError`] naming the first rule broken.
///
/// # Examples
/// ```
/// use agent_controller::tool::args::{self, ArgsError};
/// assert!(args::parse(r#"{"path":"a.txt"}"#).is_ok());
/// assert_eq!(args::parse(r#"{"a":1,"a":2}"#), Err(ArgsError::DuplicateKey("a".into())));
/// ```
pub fn parse(text: &str) -> Result<Value, ArgsError> {
    if text_depth(text) > MAX_DEPTH {
        return Err(ArgsError::TooDeep);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = UniqueKeys
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            let message = e.to_string();
            match message.strip_prefix(DUPLICATE) {
                Some(rest) => ArgsError::DuplicateKey(
                    rest.split(" at line ").next().unwrap_or(rest).to_owned(),
                ),
                None => ArgsError::Syntax(message),
            }
        })?;
    check(&value)?;
    Ok(value)
}

/// Checks parsed arguments against the rules of this module (depth, safe integers); duplicate
/// names cannot be seen in a parsed value ([`parse`] refuses them).
///
/// # Errors
/// [`ArgsError::TooDeep`] or [`ArgsError::UnsafeInteger`].
pub fn check(value: &Value) -> Result<(), ArgsError> {
    check_at(value, 0)
}

/// `value` as its RFC 8785 round trip (canonical text read back), once it passed [`check`]: the
/// value a tool gets and `argsSha256` hashes, so two calls with the same hash get the same
/// arguments.
///
/// # Errors
/// As [`check`].
///
/// # Examples
/// ```
/// use agent_controller::tool::args;
/// let v = args::normalize(serde_json::json!({"n": -0.0, "m": 1.0})).unwrap();
/// assert_eq!(v, serde_json::json!({"n": 0, "m": 1}));
/// ```
pub fn normalize(value: Value) -> Result<Value, ArgsError> {
    check(&value)?;
    if crate::jcs::is_canonical(&value) {
        // Its round trip is itself: no need to write and read it.
        return Ok(value);
    }
    // Canonical text of a checked value always reads back (depth ≤ MAX_DEPTH, finite numbers).
    Ok(serde_json::from_str(&crate::jcs::to_string(&value)).unwrap_or(value))
}

/// Why the arguments `args` of a call are refused, for its error result, or `None` when they
/// are an object that meets the rules. A provider keeps arguments it could not take as the raw
/// text (a string), so a string is read again to say what is wrong with it.
pub fn refusal(args: &Value) -> Option<String> {
    match args {
        Value::Object(_) => check(args).err().map(|e| e.to_string()),
        Value::String(raw) => Some(match parse(raw) {
            Err(ArgsError::Syntax(e)) => {
                format!(
                    "the arguments are not a JSON object (got text that is not valid JSON: {e})"
                )
            }
            Err(e) => e.to_string(),
            Ok(_) => "the arguments are not a JSON object (got a string)".to_owned(),
        }),
        other => Some(format!(
            "the arguments are not a JSON object (got {})",
            match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                _ => "an array",
            }
        )),
    }
}

fn check_at(value: &Value, depth: usize) -> Result<(), ArgsError> {
    match value {
        Value::Number(n) => check_number(n),
        Value::Array(items) => {
            if depth + 1 > MAX_DEPTH {
                return Err(ArgsError::TooDeep);
            }
            items.iter().try_for_each(|v| check_at(v, depth + 1))
        }
        Value::Object(members) => {
            if depth + 1 > MAX_DEPTH {
                return Err(ArgsError::TooDeep);
            }
            members.values().try_for_each(|v| check_at(v, depth + 1))
        }
        _ => Ok(()),
    }
}

fn check_number(n: &Number) -> Result<(), ArgsError> {
    let unsafe_int = match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => u > MAX_SAFE_INTEGER,
        (None, Some(i)) => i.unsigned_abs() > MAX_SAFE_INTEGER,
        _ => false,
    };
    if unsafe_int {
        return Err(ArgsError::UnsafeInteger(n.to_string()));
    }
    Ok(())
}

/// The deepest nesting of `[` and `{` in a JSON text, outside strings; read before parsing, so
/// that text deeper than the parser's own limit gets the same clear refusal.
fn text_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

const DUPLICATE: &str = "duplicate member ";

/// Builds a [`Value`] as serde_json does, but fails on a member name seen twice in one object.
struct UniqueKeys;

impl<'de> DeserializeSeed<'de> for UniqueKeys {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(UniqueKeys)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.contains_key(&key) {
                return Err(de::Error::custom(format_args!("{DUPLICATE}{key}")));
            }
            let value = map.next_value_seed(UniqueKeys)?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_is_counted_in_values_and_in_text() {
        let deep = |n: usize| format!("{{\"a\":{}{}}}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep(MAX_DEPTH - 1)).is_ok());
        assert_eq!(parse(&deep(MAX_DEPTH)), Err(ArgsError::TooDeep));
        // Beyond serde_json's own limit of 128: still the clear refusal.
        assert_eq!(parse(&deep(200)), Err(ArgsError::TooDeep));
        // Brackets inside strings do not count.
        assert!(parse(&format!("{{\"a\":\"{}\"}}", "[".repeat(200))).is_ok());
        let value: Value = serde_json::from_str(&deep(MAX_DEPTH)).expect("parses");
        assert_eq!(check(&value), Err(ArgsError::TooDeep));
    }

    #[test]
    fn duplicate_names_and_unsafe_integers_are_refused() {
        assert_eq!(
            parse(r#"{"p":{"x":1,"x":2}}"#),
            Err(ArgsError::DuplicateKey("x".into()))
        );
        assert_eq!(
            parse(r#"{"big":9007199254740993}"#),
            Err(ArgsError::UnsafeInteger("9007199254740993".into()))
        );
        assert!(parse(r#"{"big":-9007199254740991}"#).is_ok());
        assert!(matches!(parse("{\"a\":"), Err(ArgsError::Syntax(_))));
        assert!(matches!(parse("{} x"), Err(ArgsError::Syntax(_))));
    }

    #[test]
    fn normalize_is_the_jcs_round_trip() {
        let a = normalize(json!({"n": -0.0, "x": 1.0})).expect("ok");
        let b = normalize(json!({"x": 1, "n": 0})).expect("ok");
        assert_eq!(a, b);
        assert_eq!(crate::jcs::to_string(&a), crate::jcs::to_string(&b));
    }
}
