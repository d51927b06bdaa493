//! A config's rule tests as written (`[[tests]]`), and their checks: each names a mode, a tool
//! call and what the mode must do with it (`expect`); `check` and `verify` run them through
//! [`crate::AgentController::explain`] ([`crate::AgentController::rule_test_errors`]).
//!
//! ```toml
//! [[tests]]
//! mode = "build"
//! tool = "write_file"
//! args = { path = ".env", content = "KEY=1" }
//! expect = "deny"
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigError, ConfigErrorKind, Source};
use crate::explain::{Outcome, RuleTest};
use crate::hint::did_you_mean;
use crate::mode::ModeId;

/// One rule test as written.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "RuleTest"))]
pub(super) struct RawRuleTest {
    /// The mode the call is made in.
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    mode: Spanned<String>,
    /// The tool called.
    #[cfg_attr(feature = "schema", schemars(with = "String", length(min = 1)))]
    tool: Spanned<String>,
    /// The call's arguments, a table (default: none).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")
    )]
    args: Option<Spanned<serde_json::Value>>,
    /// What the mode must do with the call: `allow` (it runs), `ask` (it waits for a decision),
    /// `deny` (it is refused) or `unavailable` (the mode does not offer the tool).
    #[cfg_attr(feature = "schema", schemars(with = "Outcome"))]
    expect: Spanned<Outcome>,
}

/// The rule tests of `raw`, each checked against the modes `index` knows; errors go to
/// `errors` and the test in error is left out.
pub(super) fn rule_tests_of(
    raw: Vec<RawRuleTest>,
    index: &HashMap<Arc<str>, ModeId>,
    source: &Source<'_>,
    errors: &mut Vec<ConfigError>,
) -> Vec<RuleTest> {
    let mut tests = Vec::new();
    for (i, test) in raw.into_iter().enumerate() {
        let number = i + 1;
        let err = |span, message: String| {
            ConfigError::at(ConfigErrorKind::InvalidRuleTest, source, span, message)
        };
        let mode: &str = test.mode.get_ref();
        if !index.contains_key(mode) {
            let hint = match did_you_mean(mode, index.keys().map(|k| &**k)) {
                Some(near) => format!(": did you mean `{near}`?"),
                None => String::new(),
            };
            errors.push(err(
                test.mode.span(),
                format!("rule test {number} names unknown mode `{mode}`{hint}"),
            ));
            continue;
        }
        if test.tool.get_ref().is_empty() {
            errors.push(err(
                test.tool.span(),
                format!("rule test {number} names no tool: name the tool called"),
            ));
            continue;
        }
        let args = match test.args {
            None => serde_json::Value::Object(serde_json::Map::new()),
            Some(args) if args.get_ref().is_object() => args.into_inner(),
            Some(args) => {
                errors.push(err(
                    args.span(),
                    format!(
                        "rule test {number} has args that are not a table: write them as one (`args = {{ path = \"src/a.rs\" }}`)"
                    ),
                ));
                continue;
            }
        };
        let at = |span| {
            let p = source.position(span);
            (p.location.line, p.location.column, p.snippet())
        };
        tests.push(RuleTest {
            number,
            mode_id: mode.to_owned(),
            tool: test.tool.get_ref().clone(),
            args,
            expect: *test.expect.get_ref(),
            tool_at: at(test.tool.span()),
            expect_at: at(test.expect.span()),
        });
    }
    tests
}
