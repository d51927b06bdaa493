//! Canonical JSON per RFC 8785 (the JSON Canonicalization Scheme, JCS), and the SHA-256 of it:
//! how a tool call's arguments are pinned (`argsSha256`), so that a host in any language can
//! compute the same hash with its own JCS library.
//!
//! JCS writes a JSON value with no whitespace, object members sorted by the UTF-16 code units of
//! their names, strings escaped minimally (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other
//! control characters as `\u00xx`), and numbers as ECMAScript's `Number.prototype.toString`
//! writes the IEEE 754 double they denote (`1e+30`, `0.002`, `4.5`; integers beyond 2^53 lose
//! precision, as they do in JavaScript).

use serde_json::Value;

/// `value` as RFC 8785 canonical JSON text.
///
/// # Examples
/// ```
/// use agent_controller::jcs;
/// let value = serde_json::json!({ "b": [1.50, 2e-3, 1e30], "a": "€\n" });
/// assert_eq!(jcs::to_string(&value), r#"{"a":"€\n","b":[1.5,0.002,1e+30]}"#);
/// ```
pub fn to_string(value: &Value) -> String {
    // Room for the arguments of most calls and the payload of most questions, grown beyond.
    let mut out = String::with_capacity(256);
    write_value(&mut out, value);
    out
}

/// The SHA-256 (lowercase hex) of `value`'s RFC 8785 canonical JSON ([`to_string`]): the
/// `argsSha256` of a tool call waiting for approval.
///
/// # Examples
/// ```
/// use agent_controller::jcs;
/// // Member order and number spelling do not change the hash.
/// let a = jcs::sha256(&serde_json::json!({ "path": "a.txt", "n": 1.0 }));
/// let b = jcs::sha256(&serde_json::from_str(r#"{"n":1,"path":"a.txt"}"#).unwrap());
/// assert_eq!(a, b);
/// assert_eq!(a.len(), 64);
/// ```
pub fn sha256(value: &Value) -> String {
    use sha2::{Digest, Sha256};
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(to_string(value).as_bytes());
    // Lowercase hex, written here: `exchange::args` uses this module, so it uses nothing of
    // `exchange`. Into one string, two digits a byte (a `format!` a byte was 32 allocations a
    // hash, and `write!` a third of the hash's cost).
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    hex
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            // By UTF-16 code units, as RFC 8785 section 3.2.3 says (not by UTF-8 bytes: they
            // differ for characters beyond U+FFFF against U+E000..U+FFFF). ASCII names in byte
            // order, as serde_json's map keeps them, are in that order already: no sorted copy.
            if in_order(members) {
                write_members(out, members.iter());
            } else {
                let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
                sorted.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
                write_members(out, sorted.into_iter());
            }
            out.push('}');
        }
    }
}

/// Whether the members of an object are in canonical order as they are: names in ASCII (whose
/// bytes and UTF-16 code units order alike) in ascending order, as serde_json's sorted map
/// keeps them (its `preserve_order` map keeps them as they came).
fn in_order(members: &serde_json::Map<String, Value>) -> bool {
    members.keys().all(|name| name.is_ascii()) && members.keys().is_sorted()
}

/// Whether `value` reads back as itself from its canonical text ([`to_string`]): every number
/// an integer (a fraction or `-0` is written anew, `1.0` as `1`), and every object's members
/// in canonical order already. Strings, booleans and `null` always do.
pub(crate) fn is_canonical(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_i64() || n.is_u64(),
        Value::Array(items) => items.iter().all(is_canonical),
        Value::Object(members) => in_order(members) && members.values().all(is_canonical),
        Value::Null | Value::Bool(_) | Value::String(_) => true,
    }
}

fn write_members<'a>(out: &mut String, members: impl Iterator<Item = (&'a String, &'a Value)>) {
    for (i, (name, member)) in members.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, name);
        out.push(':');
        write_value(out, member);
    }
}

/// A string as RFC 8785 section 3.2.2.2 writes it: `"` and `\` escaped, the control characters
/// with a short form (`\b \t \n \f \r`) in it, the others as `\u00xx` (lowercase hex), the rest
/// as is.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // Nothing to escape, as in most names and texts.
        out.push_str(s);
        out.push('"');
        return;
    }
    // The text between escapes is copied a run at a time. Every escaped character is ASCII,
    // and no byte of a multi-byte UTF-8 character is, so a byte at a time finds them all.
    let mut copied = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[copied..i]);
        if escape.is_empty() {
            out.push_str(&format!("\\u{byte:04x}"));
        } else {
            out.push_str(escape);
        }
        copied = i + 1;
    }
    out.push_str(&s[copied..]);
    out.push('"');
}

/// A number as ECMAScript writes the double it denotes (RFC 8785 section 3.2.2.3).
fn write_number(out: &mut String, n: &serde_json::Number) {
    const EXACT: u64 = 1 << 53;
    if let Some(i) = n.as_u64().filter(|i| *i <= EXACT) {
        out.push_str(&i.to_string());
    } else if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT) {
        out.push_str(&i.to_string());
    } else {
        // Larger integers and every fraction: the nearest double (JSON numbers are doubles to
        // JavaScript; serde_json gives one for anything it did not keep as an integer).
        out.push_str(&ecmascript_number(n.as_f64().unwrap_or(0.0)));
    }
}

/// `Number.prototype.toString` of a finite double (ECMA-262, Number::toString, radix 10): the
/// shortest digits that read back as `x` (Rust's `{:e}` gives them), placed as ECMAScript does.
pub(crate) fn ecmascript_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        // -0 is written `0`; JSON has no NaN or infinity.
        return "0".to_owned();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    let scientific = format!("{:e}", x.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let digits = even_on_a_tie(x.abs(), digits, exponent);
    // x = 0.d1d2...dk × 10^n, in ECMA-262's terms.
    let k = digits.len() as i64;
    let n = exponent + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        format!("{int}.{frac}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e_sign = if e < 0 { '-' } else { '+' };
        let (first, rest) = digits.split_at(1);
        if rest.is_empty() {
            format!("{first}e{e_sign}{}", e.abs())
        } else {
            format!("{first}.{rest}e{e_sign}{}", e.abs())
        }
    };
    format!("{sign}{body}")
}

/// The shortest digits of `x` (at `exponent`) as ECMAScript picks them when two candidates of
/// that length are equally near `x`: the even one (ECMA-262 Number::toString, step 5's note).
/// Rust's shortest formatting may take the other on such a tie.
fn even_on_a_tie(x: f64, digits: String, exponent: i64) -> String {
    // The exact decimal value of `x` (a double has at most 767 significant digits).
    let exact = format!("{x:.800e}");
    let Some((mantissa, exact_exponent)) = exact.split_once('e') else {
        return digits;
    };
    if exact_exponent.parse::<i64>().ok() != Some(exponent) {
        return digits;
    }
    let all: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len();
    let (Some(floor), Some(rest)) = (all.get(..k), all.get(k..)) else {
        return digits;
    };
    let tie = rest.starts_with('5') && rest.bytes().skip(1).all(|b| b == b'0');
    let last = floor.bytes().last().map_or(0, |b| b - b'0');
    if !tie {
        return digits;
    }
    let candidate = if last % 2 == 0 {
        floor.to_owned()
    } else if last < 9 {
        format!("{}{}", &floor[..k - 1], last + 1)
    } else {
        return digits;
    };
    let reads_back = format!("0.{candidate}e{}", exponent + 1)
        .parse::<f64>()
        .is_ok_and(|back| back == x);
    if reads_back { candidate } else { digits }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value found canonical reads back from its canonical text as itself; one that is not
    /// reads back as another value, or as itself only by chance of the map's order.
    #[test]
    fn a_value_found_canonical_is_its_own_round_trip() {
        let cases = [
            (
                r#"{"a": [1, "x\u0001\"\\", -3], "b": null, "c": true}"#,
                true,
            ),
            (
                r#"{"options": [{"label": "é"}], "question": "Which? \ud83d\ude00"}"#,
                true,
            ),
            (r#"{"n": 1.0}"#, false),
            (r#"{"n": -0.0}"#, false),
            (r#"{"\ue000": 1, "\ud83d\ude00": 2}"#, false),
        ];
        for (text, canonical) in cases {
            let value: Value = serde_json::from_str(text).expect("json");
            assert_eq!(is_canonical(&value), canonical, "{text}");
            let back: Value = serde_json::from_str(&to_string(&value)).expect("reads back");
            if canonical {
                assert_eq!(back, value, "{text}");
                assert_eq!(to_string(&back), to_string(&value), "{text}");
            }
        }
    }

    /// RFC 8785 appendix B: IEEE 754 doubles (as bits) and their ECMAScript text.
    #[test]
    fn numbers_are_written_as_ecmascript_writes_them() {
        let cases: [(u64, &str); 24] = [
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, want) in cases {
            assert_eq!(ecmascript_number(f64::from_bits(bits)), want, "{bits:#x}");
        }
    }

    /// RFC 8785 section 3.2.2: the example's input and its canonical form.
    #[test]
    fn the_rfc_example_is_canonicalized_exactly() {
        let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
        let value: Value = serde_json::from_str(input).expect("json");
        assert_eq!(
            to_string(&value),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    /// RFC 8785 section 3.2.3: members sorted by UTF-16 code units.
    #[test]
    fn members_are_sorted_by_utf16_code_units() {
        let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
        let value: Value = serde_json::from_str(input).expect("json");
        assert_eq!(
            to_string(&value),
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
    }

    #[test]
    fn large_integers_are_written_as_the_double_they_denote() {
        let value: Value =
            serde_json::from_str("[9007199254740993, -9007199254740993, 1e2]").expect("json");
        assert_eq!(
            to_string(&value),
            "[9007199254740992,-9007199254740992,100]"
        );
    }
}
