//! The JSON Schemas (draft-07) of the JSON a host in another language exchanges with the crate,
//! derived with `schemars` from the very types serde reads and writes, so they cannot drift:
//!
//! - what a host **sends**: a decision ([`decision`], of [`Decision`]: `resume_json`,
//!   `decide_json`), shipped as `config/decision.schema.json`;
//! - what a host **reads**: an entry of the pending listing ([`pending_summary`], of
//!   [`PendingSummary`]; a line of `pending --json` is [`pending_entry`], of [`PendingEntry`],
//!   with the allowances in force) and the audit record of a settled decision
//!   ([`decided_record`], of [`DecidedRecord`]: `decision` in events, `lastDecided` and
//!   `history` in session records).
//!
//! The config format's schema is [`crate::config::schema`]. `agent-controller schema decision`
//! (and `pending`, `decided`) prints these.
//!
//! Optional fields may be left out or be `null`, as serde reads them; an object whose type
//! refuses unknown fields (a decision, an audit record) has `additionalProperties: false`.
//! Rules that span values are left to the crate: for example an approval may name a
//! `targetModeId` but a rejection may not ([`crate::SessionError::MalformedDecision`]), and a
//! `sha256` pin must equal the pending plan's hash.

use serde_json::Value;

use crate::event::DecidedRecord;
use crate::session::Decision;
use crate::store::{PendingEntry, PendingSummary};

/// The JSON Schema of a decision as a host sends it ([`Decision`],
/// [`Decision::from_json`]): `action` (`approved`, `rejected` or `answered`, required),
/// `feedback`, `sha256`, `decidedBy`, `targetModeId`, `plan`, `alwaysAllow`, `answer`, ..., each
/// with its description, and no other field.
///
/// # Examples
/// ```
/// let schema = agent_controller::schema::decision();
/// assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
/// assert_eq!(schema["additionalProperties"], false);
/// assert_eq!(schema["required"], serde_json::json!(["action"]));
/// assert_eq!(
///     schema["properties"]["action"]["enum"],
///     serde_json::json!(["approved", "rejected", "answered"]),
/// );
/// assert_eq!(schema["properties"]["alwaysAllow"]["type"], "boolean");
/// ```
pub fn decision() -> Value {
    schema_for::<Decision>()
}

/// The JSON Schema of one pending decision as a store lists it ([`PendingSummary`]; a line of
/// `agent-controller pending --json`).
///
/// # Examples
/// ```
/// let schema = agent_controller::schema::pending_summary();
/// assert_eq!(
///     schema["properties"]["kind"]["enum"],
///     serde_json::json!(["plan", "tool_call", "question", "suspension"]),
/// );
/// ```
pub fn pending_summary() -> Value {
    schema_for::<PendingSummary>()
}

/// The JSON Schema of one line of `agent-controller pending --json` ([`PendingEntry`]): the
/// fields of [`pending_summary`] and `allowancesInForce`, the allowances in force for the
/// decision's session (each an allowance object, [`crate::allowance::Allowance`]). What
/// `agent-controller schema pending` prints.
///
/// # Examples
/// ```
/// let schema = agent_controller::schema::pending_entry();
/// assert_eq!(
///     schema["properties"]["kind"]["enum"],
///     serde_json::json!(["plan", "tool_call", "question", "suspension"]),
/// );
/// assert_eq!(schema["properties"]["allowancesInForce"]["type"], "array");
/// ```
pub fn pending_entry() -> Value {
    schema_for::<PendingEntry>()
}

/// The JSON Schema of the audit record of a settled decision ([`DecidedRecord`]): `decision`
/// in the events that settle one, `lastDecided` and `history` in a session record.
///
/// # Examples
/// ```
/// let schema = agent_controller::schema::decided_record();
/// assert_eq!(schema["additionalProperties"], false);
/// assert_eq!(schema["properties"]["approvedSha256"]["type"], serde_json::json!(["string", "null"]));
/// ```
pub fn decided_record() -> Value {
    schema_for::<DecidedRecord>()
}

/// A schema as pretty-printed JSON text with a final newline, as `agent-controller schema`
/// prints it and as the shipped `config/*.schema.json` files hold it.
pub fn to_json(schema: &Value) -> String {
    // Serializing a `serde_json::Value` cannot fail: its map keys are strings.
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}

/// The draft-07 root schema of `T`, like the config's, with descriptions as plain text.
fn schema_for<T: schemars::JsonSchema>() -> Value {
    let mut schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    plain_descriptions(&mut schema);
    crate::config::schema::sort_keys(&mut schema);
    schema
}

/// The doc comments the descriptions come from are wrapped at 100 columns and link Rust items
/// (`` [`Decision::to`] ``): an editor's tooltip or a host's generated code reads them better
/// as one line per paragraph, with the code spans kept and the link brackets gone.
fn plain_descriptions(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::String(text)) = object.get_mut("description") {
                *text = text
                    .split("\n\n")
                    .map(|paragraph| paragraph.split('\n').collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>()
                    .join("\n\n")
                    .replace("[`", "`")
                    .replace("`]", "`");
            }
            object.values_mut().for_each(plain_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}
