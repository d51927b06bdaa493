//! The built-in `ask_user` tool ([`AskUser`]): a clarifying question for the user, with
//! Mastra's input (`question`; optional `options`, each a `label` and a `description`;
//! `selectionMode`, `single_select` by default with options, or `multi_select`). It suspends the
//! call ([`crate::ToolOutput::suspend`]) with the question as its payload and the schema of the
//! answers it takes: free text without options; one option's label (`single_select`) or an
//! array of labels (`multi_select`) with them. Anything else is refused before the tool sees it.
//!
//! A mode offers it when its `availableTools` lists it, and a planning mode with no list offers
//! it (it changes nothing). `requireApproval` never gates it: it asks the user already.
//! Executed outside a run (no session to suspend), it returns a readable fallback: the question
//! and its choices.
//!
//! The question and the options come from the model: untrusted text, shown with every
//! character visible, as plans are. Their size is capped ([`MAX_QUESTION_CHARS`],
//! [`MAX_OPTIONS`], [`MAX_LABEL_CHARS`], [`MAX_DESCRIPTION_CHARS`]); a question over a cap, a
//! blank one, options that repeat a label, or a `selectionMode` without options is an error for
//! the model, and nothing waits.

use std::fmt::Write;

use async_trait::async_trait;
use serde_json::{Value, json};

pub use crate::exchange::ASK_USER;
use crate::exchange::ToolOutput;

use super::{Tool, ToolAccess, ToolContext};

/// The longest question `ask_user` takes, in characters.
pub const MAX_QUESTION_CHARS: usize = 4_000;
/// The most options a question offers.
pub const MAX_OPTIONS: usize = 20;
/// The longest option label, in characters.
pub const MAX_LABEL_CHARS: usize = 200;
/// The longest option description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;

/// The built-in question tool (`ask_user`). Put it in a registry like any tool; the controller
/// adds it on its own when a mode lists it, or when a planning mode has no tool list.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use agent_controller::{Tool, ToolContext};
/// use agent_controller::tool::ask_user::AskUser;
/// use serde_json::json;
/// let dir = tempfile::tempdir().unwrap();
/// let ctx = ToolContext::new(dir.path(), dir.path(), "plan");
/// let args = json!({ "question": "Which database?", "options": [{ "label": "Postgres" }, { "label": "SQLite" }] });
/// // Outside a run nothing can wait for the user: the readable fallback.
/// let output = AskUser.execute(&args, &ctx).await;
/// assert!(output.content.contains("Which database?") && output.content.contains("2. SQLite"));
/// let suspension = output.suspension().expect("inside a run it suspends");
/// assert_eq!(suspension.answer_schema["enum"], json!(["Postgres", "SQLite"]));
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct AskUser;

/// How the user picks among the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Selection {
    /// No options: the answer is free text.
    FreeText,
    /// One option's label.
    Single,
    /// An array of labels.
    Multi,
}

/// A question as the model asked it, checked.
/// The question as the arguments hold it (its texts borrowed from them, not copied).
struct Question<'a> {
    text: &'a str,
    options: Vec<(&'a str, Option<&'a str>)>,
    selection: Selection,
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Reads and checks the model's arguments; the error is for the model.
fn question(args: &Value) -> Result<Question<'_>, String> {
    let text = args
        .get("question")
        .and_then(Value::as_str)
        .ok_or("`question` must be a string: the question for the user")?;
    if crate::display::is_blank(text) {
        return Err(
            "`question` is blank (only white space or characters that show nothing): ask the user something"
                .to_owned(),
        );
    }
    if chars(text) > MAX_QUESTION_CHARS {
        return Err(format!(
            "`question` has {} characters, more than {MAX_QUESTION_CHARS}: ask a shorter question",
            chars(text)
        ));
    }
    let mode = match args.get("selectionMode") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) if m == "single_select" || m == "multi_select" => Some(m.as_str()),
        Some(other) => {
            return Err(format!(
                "`selectionMode` must be \"single_select\" or \"multi_select\", not {other}"
            ));
        }
    };
    let options = match args.get("options") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            if items.len() > MAX_OPTIONS {
                return Err(format!(
                    "{} options are more than {MAX_OPTIONS}: offer fewer",
                    items.len()
                ));
            }
            let mut options: Vec<(&str, Option<&str>)> = Vec::new();
            for (k, item) in items.iter().enumerate() {
                let label = item
                    .get("label")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("option {} has no string `label`", k + 1))?;
                if crate::display::is_blank(label) {
                    return Err(format!(
                        "option {} has a blank `label` (only white space or characters that show nothing)",
                        k + 1
                    ));
                }
                if chars(label) > MAX_LABEL_CHARS {
                    return Err(format!(
                        "the label of option {} is longer than {MAX_LABEL_CHARS} characters",
                        k + 1
                    ));
                }
                let description = match item.get("description") {
                    None | Some(Value::Null) => None,
                    // A description that shows nothing is none, not an empty `()`.
                    Some(Value::String(d)) if crate::display::is_blank(d) => None,
                    Some(Value::String(d)) if chars(d) <= MAX_DESCRIPTION_CHARS => Some(d.as_str()),
                    Some(Value::String(_)) => {
                        return Err(format!(
                            "the description of option {} is longer than {MAX_DESCRIPTION_CHARS} characters",
                            k + 1
                        ));
                    }
                    Some(_) => {
                        return Err(format!(
                            "the `description` of option {} must be a string",
                            k + 1
                        ));
                    }
                };
                if options.iter().any(|(l, _)| *l == label) {
                    return Err(format!(
                        "options repeat the label {label:?}: each option needs a label of its own"
                    ));
                }
                // Labels that look alike (`a` and Cyrillic `а`, or differing only in characters
                // that show nothing) would let the user pick one believing it the other.
                if let Some(at) = options
                    .iter()
                    .position(|(l, _)| crate::display::look_alike(l, label))
                {
                    return Err(format!(
                        "the labels of options {} and {} look alike ({} and {}): each option needs a label that reads differently",
                        at + 1,
                        k + 1,
                        crate::display::neutralize_line_within(options[at].0, 60),
                        crate::display::neutralize_line_within(label, 60)
                    ));
                }
                options.push((label, description));
            }
            options
        }
        Some(_) => return Err("`options` must be an array of {label, description?}".to_owned()),
    };
    let selection = match (options.is_empty(), mode) {
        (true, Some(mode)) => {
            return Err(format!(
                "`selectionMode` {mode:?} needs `options` to select from: give options, or leave `selectionMode` out for a free-text answer"
            ));
        }
        (true, None) => Selection::FreeText,
        (false, Some("multi_select")) => Selection::Multi,
        (false, _) => Selection::Single,
    };
    Ok(Question {
        text,
        options,
        selection,
    })
}

impl Question<'_> {
    /// What the user is shown: the question, the options, the selection mode.
    fn payload(&self) -> Value {
        let mut payload = json!({ "question": self.text });
        if !self.options.is_empty() {
            payload["options"] = self
                .options
                .iter()
                .map(|(label, description)| match description {
                    Some(d) => json!({ "label": label, "description": d }),
                    None => json!({ "label": label }),
                })
                .collect();
            payload["selectionMode"] = json!(match self.selection {
                Selection::Multi => "multi_select",
                _ => "single_select",
            });
        }
        payload
    }

    /// The answers it takes.
    fn answer_schema(&self) -> Value {
        let labels: Vec<&str> = self.options.iter().map(|(l, _)| *l).collect();
        match self.selection {
            Selection::FreeText => json!({ "type": "string" }),
            Selection::Single => json!({ "type": "string", "enum": labels }),
            Selection::Multi => json!({
                "type": "array",
                "items": { "type": "string", "enum": labels },
                "minItems": 1,
                "maxItems": labels.len(),
                "uniqueItems": true,
            }),
        }
    }

    /// The readable text a caller outside a run gets.
    fn fallback(&self) -> String {
        let mut text = format!(
            "A question for the user (nothing here can wait for the answer, so there is none): {}",
            self.text
        );
        for (k, (label, description)) in self.options.iter().enumerate() {
            let _ = write!(text, "\n{}. {label}", k + 1);
            if let Some(d) = description {
                let _ = write!(text, " - {d}");
            }
        }
        if self.selection == Selection::Multi {
            text.push_str("\n(several may be chosen)");
        }
        text
    }
}

#[async_trait]
impl Tool for AskUser {
    fn name(&self) -> &str {
        ASK_USER
    }

    fn description(&self) -> String {
        "Ask the user a clarifying question and wait for the answer. Give `options` (each a \
         `label` and an optional `description`) for the user to pick from, with `selectionMode` \
         \"single_select\" (the default) or \"multi_select\"; without options the answer is free \
         text."
            .to_owned()
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "question": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUESTION_CHARS,
                    "description": "The question for the user.",
                },
                "options": {
                    "type": "array",
                    "maxItems": MAX_OPTIONS,
                    "description": "Choices for the user; leave out for a free-text answer.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "label": { "type": "string", "minLength": 1, "maxLength": MAX_LABEL_CHARS },
                            "description": { "type": "string", "maxLength": MAX_DESCRIPTION_CHARS },
                        },
                        "required": ["label"],
                        "additionalProperties": false,
                    },
                },
                "selectionMode": {
                    "type": "string",
                    "enum": ["single_select", "multi_select"],
                    "description": "With options: pick one (the default) or several.",
                },
            },
            "required": ["question"],
            "additionalProperties": false,
        })
    }

    /// It changes nothing: a planning mode with no tool list offers it.
    fn access(&self) -> ToolAccess {
        ToolAccess::ReadOnly
    }

    async fn execute(&self, args: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        match question(args) {
            Ok(question) => ToolOutput::suspend(
                question.fallback(),
                question.payload(),
                question.answer_schema(),
            ),
            Err(why) => ToolOutput::error(format!("ask_user refused: {why}. Nothing was asked.")),
        }
    }

    async fn resume(&self, args: &Value, answer: &Value, _ctx: &ToolContext<'_>) -> ToolOutput {
        let asked = question(args).map(|q| q.selection);
        match (asked, answer) {
            (Ok(Selection::FreeText), Value::String(text)) => {
                ToolOutput::ok(format!("The user answered: {text}"))
            }
            (Ok(Selection::Single), Value::String(label)) => {
                ToolOutput::ok(format!("The user chose: {label}"))
            }
            (Ok(Selection::Multi), Value::Array(labels)) => {
                let mut chosen: Vec<&str> = Vec::new();
                for label in labels.iter().filter_map(Value::as_str) {
                    if !chosen.contains(&label) {
                        chosen.push(label);
                    }
                }
                ToolOutput::ok(format!("The user chose: {}", chosen.join(", ")))
            }
            // The answer was checked against the schema it suspended with: never reached.
            _ => ToolOutput::error(format!("The user's answer could not be read: {answer}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(args: Value) -> String {
        match question(&args) {
            Err(why) => why,
            Ok(_) => panic!("accepted {args}"),
        }
    }

    #[test]
    fn bad_questions_are_refused_with_a_reason() {
        assert!(refused(json!({ "question": "  " })).contains("blank"));
        assert!(refused(json!({})).contains("`question`"));
        let big = "x".repeat(10 * 1024 * 1024);
        assert!(refused(json!({ "question": big })).contains("shorter"));
        let many: Vec<Value> = (0..10_000)
            .map(|k| json!({ "label": format!("o{k}") }))
            .collect();
        assert!(refused(json!({ "question": "q", "options": many })).contains("fewer"));
        let twice = json!([{ "label": "a" }, { "label": "a" }]);
        assert!(refused(json!({ "question": "q", "options": twice })).contains("repeat"));
        // Trial F9: labels that look alike are refused, naming the pair.
        let cyrillic = json!([{ "label": "yes" }, { "label": "a" }, { "label": "\u{430}" }]);
        let why = refused(json!({ "question": "q", "options": cyrillic }));
        assert!(why.contains("options 2 and 3 look alike"), "{why}");
        assert!(why.contains("(a and \u{430})"), "{why}");
        let hidden = json!([{ "label": "Deploy" }, { "label": "Dep\u{200b}loy" }]);
        let why = refused(json!({ "question": "q", "options": hidden }));
        assert!(why.contains("options 1 and 2 look alike"), "{why}");
        let spaced = json!([{ "label": "rm -rf" }, { "label": "rm  -rf" }]);
        assert!(refused(json!({ "question": "q", "options": spaced })).contains("look alike"));
        let one_l = json!([{ "label": "Allow all" }, { "label": "AIlow all" }]);
        assert!(refused(json!({ "question": "q", "options": one_l })).contains("look alike"));
        // Labels that read differently pass.
        let fine = json!([{ "label": "dark" }, { "label": "light" }, { "label": "Dark mode" }]);
        assert!(question(&json!({ "question": "q", "options": fine })).is_ok());
        assert!(
            refused(json!({ "question": "q", "selectionMode": "multi_select" }))
                .contains("needs `options`")
        );
        assert!(
            refused(
                json!({ "question": "q", "options": [{ "label": "a" }], "selectionMode": "all" })
            )
            .contains("selectionMode")
        );
    }

    #[test]
    fn the_answer_schema_follows_the_selection_mode() {
        let args = json!({ "question": "why?" });
        let free = question(&args).expect("ok");
        assert_eq!(free.answer_schema(), json!({ "type": "string" }));
        assert_eq!(free.payload(), json!({ "question": "why?" }));
        let options = json!([{ "label": "a", "description": "first" }, { "label": "b" }]);
        let args = json!({ "question": "q", "options": options });
        let single = question(&args).expect("ok");
        assert_eq!(single.answer_schema()["enum"], json!(["a", "b"]));
        assert_eq!(single.payload()["selectionMode"], "single_select");
        assert_eq!(single.payload()["options"][0]["description"], "first");
        let args = json!({ "question": "q", "options": options, "selectionMode": "multi_select" });
        let multi = question(&args).expect("ok");
        assert_eq!(multi.answer_schema()["items"]["enum"], json!(["a", "b"]));
        assert!(multi.fallback().contains("1. a - first\n2. b"));
    }
}
