//! A call its tool suspended, asked at the terminal (issue 37): a question of `ask_user` (kind
//! `question`) shown with its options numbered, or another tool's payload (kind `suspension`)
//! shown bounded, and the typed line read into an answer ([`read_suspension_answer`]) that fits
//! the answer schema. The question, the options and the payload come from the model: every
//! character is shown ([`neutralize`]), and the answer is checked against the schema before it
//! is handed on.

use std::io::Write;

use serde_json::Value;

use super::{PromptAnswer, StdinLines, TOOL_ARGS_MAX_CHARS, TOOL_ARGS_MAX_LINES};
use crate::display::{arguments, neutralize, neutralize_line, neutralize_line_within};
use crate::event::{SuspensionKind, ToolSuspendPayload};
use crate::run::Decision;
use crate::tool::ask_user::{MAX_DESCRIPTION_CHARS, MAX_LABEL_CHARS, MAX_QUESTION_CHARS};

/// The mark before each line of a question the model wrote (and each of its options), so
/// that the model's words are never taken for the tool's own (trial finding L2).
pub const GUTTER: &str = "│ ";

/// Where a cut payload is shown whole.
const PAYLOAD_WHOLE: &str = "`pending --json` shows it whole";

/// The options of a question payload (`options`, each with a `label`); empty for a question
/// without options, or for another tool's payload.
fn options(payload: &ToolSuspendPayload) -> Vec<(&str, Option<&str>)> {
    if payload.kind != SuspensionKind::Question {
        return Vec::new();
    }
    payload.payload["options"]
        .as_array()
        .map(|options| {
            options
                .iter()
                .map(|o| {
                    (
                        o["label"].as_str().unwrap_or_default(),
                        o["description"].as_str(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the question takes several options (`selectionMode` `multi_select`).
fn multi(payload: &ToolSuspendPayload) -> bool {
    payload.payload["selectionMode"] == "multi_select"
}

/// Whether a number picks an option by its position: only when no label is itself a number
/// (then a number is the label it is, never a position).
fn numbered(options: &[(&str, Option<&str>)]) -> bool {
    !options
        .iter()
        .any(|(label, _)| !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit()))
}

/// What the terminal shows of a suspended call: for a question, the question and its options
/// numbered (`1. label (description)`), every character visible, each line behind the gutter
/// [`GUTTER`] (`│ `) that marks the model's words; for another tool, its name
/// and its payload laid out as a tool call's arguments are, bounded. The last line says how to
/// answer.
///
/// # Examples
/// ```
/// use agent_controller::event::{SuspensionKind, ToolSuspendPayload, WaitTerms};
/// use agent_controller::terminal::render_suspension;
/// use serde_json::json;
/// let payload = ToolSuspendPayload {
///     kind: SuspensionKind::Question,
///     decision_id: "decision_1".into(),
///     tool_name: "ask_user".into(),
///     args: json!({}),
///     payload: json!({ "question": "Which\u{202e}?", "options": [{ "label": "a" }, { "label": "b", "description": "second" }], "selectionMode": "single_select" }),
///     answer_schema: json!({ "type": "string", "enum": ["a", "b"] }),
///     payload_sha256: "53fa".into(),
///     terms: WaitTerms::default(),
///     subagent: None,
/// };
/// let shown = render_suspension(&payload);
/// assert!(shown.contains("│ Which\\u{202e}?\n│   1. a\n│   2. b (second)\n"), "{shown}");
/// ```
pub fn render_suspension(payload: &ToolSuspendPayload) -> String {
    let decision = neutralize_line(&payload.decision_id);
    if payload.kind == SuspensionKind::Question {
        let question = payload.payload["question"].as_str().unwrap_or_default();
        // Every line the model wrote is behind the gutter `│ `: a question cannot pass for the
        // tool's own prompt (an imitation of the plan-approval prompt, say).
        let mut shown = format!("question from the model (ask_user, decision {decision}):\n");
        shown.push_str(&super::tool_call::made_by(payload.subagent.as_deref()));
        for line in cut(question, MAX_QUESTION_CHARS).split('\n') {
            shown.push_str(GUTTER);
            shown.push_str(line);
            shown.push('\n');
        }
        for (k, (label, description)) in options(payload).iter().enumerate() {
            shown.push_str(&format!(
                "{GUTTER}  {}. {}",
                k + 1,
                neutralize_line_within(label, MAX_LABEL_CHARS)
            ));
            if let Some(d) = description {
                shown.push_str(&format!(
                    " ({})",
                    neutralize_line_within(d, MAX_DESCRIPTION_CHARS)
                ));
            }
            shown.push('\n');
        }
        return shown;
    }
    format!(
        "the tool {} waits for an answer (decision {decision}):\n{}{}\nthe answer must fit: {}\n",
        neutralize_line(&payload.tool_name),
        super::tool_call::made_by(payload.subagent.as_deref()),
        arguments(
            &payload.payload,
            TOOL_ARGS_MAX_LINES,
            TOOL_ARGS_MAX_CHARS,
            PAYLOAD_WHOLE
        ),
        crate::display::arguments_line(&payload.answer_schema, TOOL_ARGS_MAX_CHARS, PAYLOAD_WHOLE)
    )
}

/// `text` escaped ([`neutralize`]), cut at `max` characters of `text` itself, never of its
/// escaped form: a question within the tool's cap is shown whole, however long its escapes
/// make it; the cut bounds only what a hand-made payload shows.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return neutralize(text).into_owned();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{} … (cut; {PAYLOAD_WHOLE})", neutralize(&kept))
}

/// The line under a suspended call: how to answer it.
pub fn suspension_prompt_text(payload: &ToolSuspendPayload) -> String {
    let options = options(payload);
    let count = options.len();
    match (payload.kind, count, multi(payload)) {
        (SuspensionKind::Question, 0, _) => "Type your answer: ".to_owned(),
        (SuspensionKind::Question, _, true) if !numbered(&options) => {
            "Type the labels of your choices (the labels are numbers), separated by commas: "
                .to_owned()
        }
        (SuspensionKind::Question, _, false) if !numbered(&options) => {
            "Type the label of your choice (the labels are numbers): ".to_owned()
        }
        (SuspensionKind::Question, n, true) => {
            format!("Type the numbers of your choices, separated by commas (1 to {n}, e.g. 1,3): ")
        }
        (SuspensionKind::Question, n, false) => {
            format!("Type the number of your choice (1 to {n}): ")
        }
        _ => "Type the answer as JSON on one line: ".to_owned(),
    }
}

/// Reads one typed line into the answer for a suspended call, or says why it is not one.
///
/// - A question with options: an option's exact label, or a number, picks that option (its
///   label is the answer); for `multi_select`, labels or numbers separated by commas pick
///   several (an array of labels). The label wins: when some label is itself a number, a
///   number is that label, never a position. A number out of range, another word, a repeated
///   pick, or several for a single pick are refused.
/// - A question without options: the line (without its line ending) is the answer; a blank
///   line is refused.
/// - Another tool's suspension: the line is JSON.
///
/// Every answer is then checked against the answer schema, as the library checks it.
///
/// # Errors
/// Why the line is not an answer, to show before asking again.
///
/// # Examples
/// ```
/// use agent_controller::event::{SuspensionKind, ToolSuspendPayload, WaitTerms};
/// use agent_controller::terminal::read_suspension_answer;
/// use serde_json::json;
/// let payload = ToolSuspendPayload {
///     kind: SuspensionKind::Question,
///     decision_id: "decision_1".into(),
///     tool_name: "ask_user".into(),
///     args: json!({}),
///     payload: json!({ "question": "Which?", "options": [{ "label": "a" }, { "label": "b" }, { "label": "c" }], "selectionMode": "multi_select" }),
///     answer_schema: json!({ "type": "array", "items": { "type": "string", "enum": ["a", "b", "c"] } }),
///     payload_sha256: "53fa".into(),
///     terms: WaitTerms::default(),
///     subagent: None,
/// };
/// assert_eq!(read_suspension_answer(" 1, 3\n", &payload), Ok(json!(["a", "c"])));
/// assert!(read_suspension_answer("4", &payload).unwrap_err().contains("`4` is not an option"));
/// assert!(read_suspension_answer("1,1", &payload).is_err());
/// ```
pub fn read_suspension_answer(line: &str, payload: &ToolSuspendPayload) -> Result<Value, String> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let answer = if payload.kind == SuspensionKind::Question {
        let options = options(payload);
        if options.is_empty() {
            if crate::display::is_blank(line) {
                return Err(
                    "type an answer (end of input leaves the question unanswered)".to_owned(),
                );
            }
            Value::String(line.to_owned())
        } else {
            let picked = picks(line, &options, multi(payload))?;
            let labels: Vec<Value> = picked
                .iter()
                .map(|&k| Value::String(options[k].0.to_owned()))
                .collect();
            if multi(payload) {
                Value::Array(labels)
            } else {
                labels.into_iter().next().unwrap_or_default()
            }
        }
    } else {
        serde_json::from_str(line.trim()).map_err(|e| format!("not JSON: {e}"))?
    };
    match payload.answer_mismatch(&answer) {
        Some(why) => Err(why),
        None => Ok(answer),
    }
}

/// The answer `decide --answer TEXT` (repeated for a multi-select question) gives to the
/// suspended call of `payload`: for a question with options, each text is an option's label
/// or, as the terminal takes it, its number (1 for the first), unless some label is itself a
/// number (a number is then read as the label it is, never as a position); else the text as
/// it is. Checked against the answer schema, as the library checks it.
///
/// # Errors
/// Why the texts are no answer; for a question with options, with its labels and numbers
/// (and how to give a label no one can type: `--answer-json`).
///
/// # Examples
/// ```
/// use agent_controller::event::{SuspensionKind, ToolSuspendPayload, WaitTerms};
/// use agent_controller::terminal::answer_from_flags;
/// use serde_json::json;
/// let payload = ToolSuspendPayload {
///     kind: SuspensionKind::Question,
///     decision_id: "decision_1".into(),
///     tool_name: "ask_user".into(),
///     args: json!({}),
///     payload: json!({ "question": "Theme?", "options": [{ "label": "dark" }, { "label": "light" }] }),
///     answer_schema: json!({ "type": "string", "enum": ["dark", "light"] }),
///     payload_sha256: "53fa".into(),
///     terms: WaitTerms::default(),
///     subagent: None,
/// };
/// assert_eq!(answer_from_flags(&["2".to_owned()], &payload), Ok(json!("light")));
/// assert_eq!(answer_from_flags(&["dark".to_owned()], &payload), Ok(json!("dark")));
/// assert!(answer_from_flags(&["purple".to_owned()], &payload).unwrap_err().contains("`dark`, `light`"));
/// ```
pub fn answer_from_flags(texts: &[String], payload: &ToolSuspendPayload) -> Result<Value, String> {
    let options = options(payload);
    let several = payload.answer_schema["type"] == "array";
    let numbered = numbered(&options);
    let label = |text: &String| -> Value {
        let by_number = text
            .parse::<usize>()
            .ok()
            .filter(|k| numbered && (1..=options.len()).contains(k));
        match by_number {
            Some(k) if !options.iter().any(|(l, _)| l == text) => {
                Value::String(options[k - 1].0.to_owned())
            }
            _ => Value::String(text.clone()),
        }
    };
    let answer = match (several, texts) {
        (true, texts) => Value::Array(texts.iter().map(label).collect()),
        (false, [text]) => label(text),
        (false, _) => {
            return Err(format!(
                "the question takes one answer, and {} were given",
                texts.len()
            ));
        }
    };
    let Some(why) = payload.answer_mismatch(&answer) else {
        return Ok(answer);
    };
    if options.is_empty() {
        return Err(why);
    }
    let labels: Vec<String> = options
        .iter()
        .map(|(l, _)| format!("`{}`", neutralize_line_within(l, 60)))
        .collect();
    let numbers = if numbered {
        format!(" or its number (1 to {})", options.len())
    } else {
        String::new()
    };
    let mut text = format!(
        "{why}: give an option's label ({}){numbers}",
        labels.join(", ")
    );
    if options.iter().any(|(l, _)| neutralize_line(l) != *l) {
        text.push_str(
            "; a label shown with a \\u{...} escape has a character no one can type: give it with --answer-json, the escape written as JSON's \\uXXXX (`--answer-json '\"A\\u200b\"'`)",
        );
    }
    Err(text)
}

/// The 0-based options `line` picks among `options`: the exact label of one (the whole line),
/// or (when `several`) labels or numbers separated by commas, each once; a number picks by
/// position only when no label is a number ([`numbered`]).
fn picks(
    line: &str,
    options: &[(&str, Option<&str>)],
    several: bool,
) -> Result<Vec<usize>, String> {
    let count = options.len();
    let by_label = |text: &str| options.iter().position(|(label, _)| *label == text);
    if let Some(k) = by_label(line).or_else(|| by_label(line.trim())) {
        return Ok(vec![k]);
    }
    let numbered = numbered(options);
    let how = match numbered {
        true => format!("numbers from 1 to {count}"),
        false => "labels: the labels are numbers".to_owned(),
    };
    let parts: Vec<&str> = line.split(',').map(str::trim).collect();
    let spaced = parts.iter().any(|p| p.split_whitespace().count() > 1);
    if (parts.len() > 1 || spaced) && !several {
        return Err(match numbered {
            true => format!("pick one option: type one number from 1 to {count}"),
            false => "pick one option: type one label (the labels are numbers)".to_owned(),
        });
    }
    let what = match numbered {
        true => "number",
        false => "label",
    };
    if spaced {
        return Err(format!("separate the {what}s with commas: `1,3` ({how})"));
    }
    if parts.len() > 1 && parts.iter().any(|p| p.is_empty()) {
        return Err(format!(
            "type a {what} between each two commas: `1,3` ({how})"
        ));
    }
    let mut picked = Vec::new();
    for part in parts {
        let by_number = || {
            part.parse::<usize>()
                .ok()
                .filter(|k| numbered && (1..=count).contains(k))
                .map(|k| k - 1)
        };
        let k = by_label(part).or_else(by_number).ok_or_else(|| {
            let typed = neutralize_line_within(part, 40);
            match numbered {
                true => format!("`{typed}` is not an option: type a number from 1 to {count}"),
                false => {
                    let labels: Vec<String> = options
                        .iter()
                        .map(|(l, _)| format!("`{}`", neutralize_line_within(l, 40)))
                        .collect();
                    format!(
                        "`{typed}` is not an option: type a label ({}); the labels are numbers, so a number is a label, never a position",
                        labels.join(", ")
                    )
                }
            }
        })?;
        if picked.contains(&k) {
            return Err(format!("option {} is picked twice", k + 1));
        }
        picked.push(k);
    }
    Ok(picked)
}

/// Shows a suspended call and asks until the person answers: the answer, checked against the
/// schema, as [`PromptAnswer::Decided`] with [`Decision::answer`] pinned to the payload's
/// SHA-256. A line that is not an answer says why and asks again. End of input and
/// `interrupt` completing are [`PromptAnswer::EndOfInput`] and [`PromptAnswer::Interrupted`]:
/// no answer.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use agent_controller::Decision;
/// use agent_controller::event::{SuspensionKind, ToolSuspendPayload, WaitTerms};
/// use agent_controller::terminal::{PromptAnswer, StdinLines, ask_suspension};
/// use serde_json::json;
/// let payload = ToolSuspendPayload {
///     kind: SuspensionKind::Question,
///     decision_id: "decision_1".into(),
///     tool_name: "ask_user".into(),
///     args: json!({}),
///     payload: json!({ "question": "Name?" }),
///     answer_schema: json!({ "type": "string" }),
///     payload_sha256: "53fa".into(),
///     terms: WaitTerms::default(),
///     subagent: None,
/// };
/// let mut input = StdinLines::from_reader(std::io::Cursor::new("\nSettings\n"));
/// let mut out = Vec::new();
/// let answer = ask_suspension(&payload, &mut input, &mut out, std::future::pending::<()>()).await;
/// assert_eq!(answer, PromptAnswer::Decided(Decision::answer(json!("Settings")).with_sha256("53fa")));
/// assert!(String::from_utf8_lossy(&out).contains("type an answer"));
/// # }
/// ```
pub async fn ask_suspension<F>(
    payload: &ToolSuspendPayload,
    input: &mut StdinLines,
    out: &mut impl Write,
    interrupt: F,
) -> PromptAnswer
where
    F: std::future::Future,
{
    let mut interrupt = std::pin::pin!(interrupt);
    // A closed stderr must not stop the answer: it is still read from stdin.
    let _ = write!(out, "{}", render_suspension(payload));
    loop {
        let _ = write!(out, "{}", suspension_prompt_text(payload));
        let _ = out.flush();
        let line = tokio::select! {
            line = input.next_line() => line,
            _ = &mut interrupt => {
                let _ = writeln!(out);
                return PromptAnswer::Interrupted;
            }
        };
        let Some(line) = line else {
            let _ = writeln!(out);
            return PromptAnswer::EndOfInput;
        };
        // Bytes that are not text, or an escape sequence, are no answer: ask again.
        let line = match line {
            Ok(line) => line,
            Err(not_utf8) => {
                let _ = writeln!(out, "{not_utf8}");
                continue;
            }
        };
        if let Some(hint) = super::typed_controls(&line) {
            let _ = writeln!(out, "{hint}");
            continue;
        }
        match read_suspension_answer(&line, payload) {
            Ok(answer) => {
                return PromptAnswer::Decided(
                    Decision::answer(answer).with_sha256(payload.payload_sha256.clone()),
                );
            }
            Err(why) => {
                let _ = writeln!(out, "not an answer: {}", neutralize(&why));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::WaitTerms;
    use serde_json::json;

    fn confirm(payload: Value) -> ToolSuspendPayload {
        ToolSuspendPayload {
            kind: SuspensionKind::Suspension,
            decision_id: "decision_1".into(),
            tool_name: "confirm_deploy".into(),
            args: json!({}),
            payload,
            answer_schema: json!({
                "type": "object",
                "properties": { "confirm": { "type": "boolean" } },
                "required": ["confirm"],
                "additionalProperties": false,
            }),
            payload_sha256: "53fa".into(),
            terms: WaitTerms::default(),
            subagent: None,
        }
    }

    #[test]
    fn a_question_at_its_cap_is_shown_whole_however_many_characters_its_escapes_take() {
        // Every character of the longest question `ask_user` accepts is a control character:
        // escaped, it is several times longer, and still nothing of it may be cut.
        let question = "\u{1b}".repeat(MAX_QUESTION_CHARS);
        let mut payload = confirm(json!({ "question": question }));
        payload.kind = SuspensionKind::Question;
        let shown = render_suspension(&payload);
        assert!(!shown.contains("cut;"), "{shown}");
        assert_eq!(
            shown.matches("\\u{1b}").count(),
            MAX_QUESTION_CHARS,
            "every character shown, escaped"
        );
        let longer = confirm(json!({ "question": "q".repeat(MAX_QUESTION_CHARS + 1) }));
        let longer = ToolSuspendPayload {
            kind: SuspensionKind::Question,
            ..longer
        };
        assert!(
            render_suspension(&longer).contains("cut;"),
            "a hand-made payload over the cap is cut"
        );
    }

    #[test]
    fn another_tools_suspension_takes_a_json_line_that_fits_its_schema() {
        let payload = confirm(json!({ "target": "staging" }));
        assert_eq!(
            read_suspension_answer("{\"confirm\": true}\n", &payload),
            Ok(json!({ "confirm": true }))
        );
        let not_json = read_suspension_answer("yes\n", &payload).expect_err("not an answer");
        assert!(not_json.starts_with("not JSON"), "{not_json}");
        let unfit =
            read_suspension_answer("{\"confirm\": \"yes\"}", &payload).expect_err("not an answer");
        assert!(unfit.contains("`confirm` must be a boolean"), "{unfit}");
        let missing = read_suspension_answer("{}", &payload).expect_err("not an answer");
        assert!(missing.contains("the answer lacks"), "{missing}");
        assert_eq!(
            suspension_prompt_text(&payload),
            "Type the answer as JSON on one line: "
        );
    }

    fn question(labels: &[&str], multi: bool) -> ToolSuspendPayload {
        let options: Vec<Value> = labels.iter().map(|l| json!({ "label": l })).collect();
        let item = json!({ "type": "string", "enum": labels });
        let (mode, schema) = if multi {
            ("multi_select", json!({ "type": "array", "items": item }))
        } else {
            ("single_select", item)
        };
        ToolSuspendPayload {
            kind: SuspensionKind::Question,
            payload: json!({ "question": "Which?", "options": options, "selectionMode": mode }),
            answer_schema: schema,
            ..confirm(json!({}))
        }
    }

    /// Trial F5: options whose labels are numbers (`10`, `1`, `2`): a number is the label it
    /// is, at the prompt as with `decide --answer`, never a position (`1` was `10` at the
    /// prompt); an exact label wins over a position.
    #[test]
    fn a_label_that_is_a_number_wins_over_a_position() {
        let single = question(&["10", "1", "2"], false);
        assert_eq!(read_suspension_answer("1\n", &single), Ok(json!("1")));
        assert_eq!(read_suspension_answer("10", &single), Ok(json!("10")));
        let err = read_suspension_answer("3", &single).expect_err("no label 3");
        assert!(
            err.contains("a number is a label, never a position"),
            "{err}"
        );
        let texts = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(answer_from_flags(&texts(&["1"]), &single), Ok(json!("1")));
        assert_eq!(answer_from_flags(&texts(&["10"]), &single), Ok(json!("10")));
        let multi = question(&["3", "1", "2"], true);
        assert_eq!(
            read_suspension_answer("1, 3", &multi),
            Ok(json!(["1", "3"]))
        );
        assert!(suspension_prompt_text(&multi).contains("the labels are numbers"));
        // Labels that are words: a label or a number picks.
        let words = question(&["dark", "light"], false);
        assert_eq!(read_suspension_answer("light", &words), Ok(json!("light")));
        assert_eq!(read_suspension_answer("1", &words), Ok(json!("dark")));
    }

    /// Trial 5 (L6): a pick that is not one says how to type one: commas between numbers, a
    /// number between each two commas.
    #[test]
    fn a_multi_select_pick_says_how_to_separate_numbers() {
        let payload = question(&["a", "b", "c"], true);
        let spaced = read_suspension_answer("1 3", &payload).expect_err("spaces");
        assert!(
            spaced.contains("separate the numbers with commas: `1,3`"),
            "{spaced}"
        );
        for empty in [",1", "1,,3", "1,"] {
            let err = read_suspension_answer(empty, &payload).expect_err("empty pick");
            assert!(!err.contains("``"), "{empty}: {err}");
            assert!(
                err.contains("a number between each two commas"),
                "{empty}: {err}"
            );
        }
        let single = question(&["a", "b", "c"], false);
        let err = read_suspension_answer("1 3", &single).expect_err("one");
        assert!(err.contains("pick one option"), "{err}");
    }

    /// Trial 5 (L5): `decide --answer` takes a label or the option's number, as the terminal
    /// does, and a refusal lists the labels.
    #[test]
    fn answer_flags_take_labels_or_option_numbers_and_a_refusal_lists_the_labels() {
        let payload = question(&["dark", "light"], false);
        let texts = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            answer_from_flags(&texts(&["light"]), &payload),
            Ok(json!("light"))
        );
        assert_eq!(
            answer_from_flags(&texts(&["2"]), &payload),
            Ok(json!("light"))
        );
        let err = answer_from_flags(&texts(&["purple"]), &payload).expect_err("no option");
        assert!(err.contains("`dark`, `light`"), "{err}");
        assert!(err.contains("1 to 2"), "{err}");
        let multi = question(&["a", "b", "c"], true);
        assert_eq!(
            answer_from_flags(&texts(&["3", "a"]), &multi),
            Ok(json!(["c", "a"]))
        );
        assert!(
            answer_from_flags(&texts(&["1", "a"]), &multi).is_err(),
            "a twice"
        );
        // Labels that are numbers: a number is read as the label, never as a position.
        let numbers = question(&["2", "3"], false);
        assert_eq!(answer_from_flags(&texts(&["2"]), &numbers), Ok(json!("2")));
        assert!(answer_from_flags(&texts(&["1"]), &numbers).is_err());
        // A label with a character no one can type: the refusal says to use --answer-json.
        let hidden = question(&["A\u{200b}", "B"], false);
        let err = answer_from_flags(&texts(&["A"]), &hidden).expect_err("no option");
        assert!(err.contains("--answer-json"), "{err}");
        // A free-text question takes the text as it is.
        let free = ToolSuspendPayload {
            payload: json!({ "question": "Name?" }),
            answer_schema: json!({ "type": "string" }),
            ..question(&[], false)
        };
        assert_eq!(answer_from_flags(&texts(&["7"]), &free), Ok(json!("7")));
    }

    #[test]
    fn another_tools_payload_is_shown_bounded_every_character_visible() {
        let payload = confirm(json!({ "target": format!("{}\u{202e}end", "x".repeat(50_000)) }));
        let shown = render_suspension(&payload);
        assert!(
            shown.starts_with(
                "the tool confirm_deploy waits for an answer (decision decision_1):\n"
            ),
            "{shown:.200}"
        );
        assert!(
            shown.chars().count() < 10_000,
            "bounded: {}",
            shown.chars().count()
        );
        assert!(shown.contains("\\u{202e}end"), "the end is shown");
        assert!(!shown.contains('\u{202e}'));
        assert!(shown.contains("`pending --json` shows it whole"), "{shown}");
        assert!(shown.contains("the answer must fit: "), "{shown}");
    }
}
