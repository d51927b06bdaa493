//! The prompt for a tool call that waits for the user (a mode's `requireApproval`, issue 12):
//! the call shown safely (its tool, its arguments pretty-printed, neutralized and bounded, the
//! decision id and `argsSha256`) and the plan prompt's grammar extended with `a` (approve and
//! always allow the tool in this session), `f` (reject with feedback typed on the next line) and
//! `q` (leave the call pending).

use std::io::Write;

use crate::display::{arguments, neutralize_line};
use crate::event::ToolCallPayload;
use crate::run::Decision;

use super::{Answer, PromptAnswer, StdinLines, Style, read_answer};

/// How many lines of a tool call's pretty-printed argument values the prompt shows, shared among
/// the values ([`crate::display::arguments`]: every argument is shown, a long value is cut in
/// its middle and the cut counted; approving approves the whole arguments: `pending --json` has
/// them).
pub const TOOL_ARGS_MAX_LINES: usize = 60;

/// How many characters of a tool call's pretty-printed argument values the prompt shows, shared
/// among the values like [`TOOL_ARGS_MAX_LINES`].
pub const TOOL_ARGS_MAX_CHARS: usize = 4_000;

/// One typed line at a tool call's prompt, read by [`read_tool_answer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAnswer {
    /// `y` or `yes` (any case): run the call.
    Approve,
    /// `a` (any case): run the call and allow its tool for the rest of the session
    /// ([`Decision::always_allow`]), until a manual mode switch.
    AlwaysAllow,
    /// `n` or `no` (any case): do not run the call (the model is told "Not approved").
    Reject,
    /// `f` (any case): reject with feedback typed on the next line.
    AskFeedback,
    /// Any other text: reject, with the text (trimmed) as feedback, as at the plan prompt.
    Feedback(String),
    /// `q` (any case): decide nothing now; the call stays pending.
    Leave,
    /// A single word that looks like a decision but is not a key (`ok`, `always`, `approve`):
    /// ask again; the text says why.
    Unclear(String),
    /// A blank line: ask again.
    Blank,
}

/// Reads one line typed at a tool call's prompt: the plan prompt's grammar ([`read_answer`]:
/// `y`/`yes`, `n`/`no`, a word that looks like a decision asks again, other text is feedback),
/// extended with the keys `a` (approve and always allow this tool), `f` (feedback on the next
/// line) and `q` (leave it pending), any case, surrounding blanks ignored.
///
/// # Examples
/// ```
/// use agent_controller::terminal::{ToolAnswer, read_tool_answer};
/// assert_eq!(read_tool_answer(" Y\n"), ToolAnswer::Approve);
/// assert_eq!(read_tool_answer("a"), ToolAnswer::AlwaysAllow);
/// assert_eq!(read_tool_answer("no"), ToolAnswer::Reject);
/// assert_eq!(read_tool_answer("F"), ToolAnswer::AskFeedback);
/// assert_eq!(read_tool_answer("q"), ToolAnswer::Leave);
/// assert!(matches!(read_tool_answer("always"), ToolAnswer::Unclear(_)));
/// assert!(matches!(read_tool_answer("ok"), ToolAnswer::Unclear(_)));
/// assert_eq!(read_tool_answer("write b.txt instead"), ToolAnswer::Feedback("write b.txt instead".to_owned()));
/// assert_eq!(read_tool_answer(""), ToolAnswer::Blank);
/// ```
pub fn read_tool_answer(line: &str) -> ToolAnswer {
    let text = line.trim();
    match text.to_lowercase().as_str() {
        "a" => return ToolAnswer::AlwaysAllow,
        "f" => return ToolAnswer::AskFeedback,
        "q" => return ToolAnswer::Leave,
        "always" | "all" | "allow" | "quit" | "exit" | "skip" | "later" => {
            return ToolAnswer::Unclear(format!(
                "`{}` is not an answer here: {KEYS_HINT}",
                neutralize_line(text)
            ));
        }
        _ => {}
    }
    match read_answer(text) {
        Answer::Approve | Answer::ApproveTo(_) => ToolAnswer::Approve,
        Answer::Reject => ToolAnswer::Reject,
        Answer::Feedback(text) => ToolAnswer::Feedback(text),
        Answer::Unclear(_) => ToolAnswer::Unclear(format!(
            "`{}` is not an answer here: {KEYS_HINT}",
            neutralize_line(text)
        )),
        Answer::Blank => ToolAnswer::Blank,
    }
}

/// The hint for an answer that is not one.
const KEYS_HINT: &str = "type y to run the call, a to run it and always allow this tool in this session, n to reject it, f (or a sentence) to reject it with feedback, or q to leave it pending";

/// A tool call as the prompt shows it: which call of how many, the tool, the decision id and the
/// `argsSha256` the answer is pinned to, then every argument on its own line, shortest value
/// first, its value pretty-printed through [`crate::display::neutralize`], the values sharing
/// [`TOOL_ARGS_MAX_LINES`] lines and [`TOOL_ARGS_MAX_CHARS`] characters (a longer value shows its
/// start and its end, the cut counted): [`crate::display::arguments`].
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Style, render_tool_call};
/// use agent_controller::ToolCallPayload;
/// let call = ToolCallPayload {
///     decision_id: "decision_1".into(),
///     tool_name: "write_file".into(),
///     args: serde_json::json!({ "path": "a.txt", "content": "hi\u{1b}[2K" }),
///     args_sha256: "ab".repeat(32),
///     approval_timeout: None,
///     deadline_at_ms: None,
///     workspace: None,
/// };
/// let shown = render_tool_call(&Style::plain(80), &call, 1, 2);
/// assert!(shown.starts_with("tool call 1 of 2 waits for approval: write_file (decision decision_1, argsSha256 abab"), "{shown}");
/// assert!(shown.contains("\n  \"path\": \"a.txt\"\n  \"content\": "), "{shown}");
/// assert!(shown.contains("hi\\u001b[2K"), "{shown}");
/// ```
pub fn render_tool_call(style: &Style, call: &ToolCallPayload, nth: usize, of: usize) -> String {
    let which = if of > 1 {
        format!("tool call {nth} of {of}")
    } else {
        "tool call".to_owned()
    };
    let name = neutralize_line(&call.tool_name);
    let name = if style.color {
        use termimad::crossterm::style::Stylize;
        name.bold().to_string()
    } else {
        name.into_owned()
    };
    format!(
        "{which} waits for approval: {name} (decision {}, argsSha256 {})\n{}",
        neutralize_line(&call.decision_id),
        neutralize_line(&call.args_sha256),
        arguments(&call.args, TOOL_ARGS_MAX_LINES, TOOL_ARGS_MAX_CHARS)
    )
}

/// The question under a tool call and its keys.
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Style, tool_question_text};
/// let text = tool_question_text(&Style::plain(80), "write_file");
/// assert!(text.starts_with("Run this write_file call?\n[y]es run it  [a]lways allow write_file in this session"), "{text}");
/// assert!(text.ends_with("> "));
/// ```
pub fn tool_question_text(style: &Style, tool_name: &str) -> String {
    let key = |k: &str| {
        if style.color {
            use termimad::crossterm::style::Stylize;
            k.bold().to_string()
        } else {
            k.to_owned()
        }
    };
    let name = neutralize_line(tool_name);
    format!(
        "Run this {name} call?\n[{}]es run it  [{}]lways allow {name} in this session  [{}]o reject  [{}]eedback reject with a note  [{}] leave it pending  or type feedback to reject with it\n> ",
        key("y"),
        key("a"),
        key("n"),
        key("f"),
        key("q"),
    )
}

/// Asks about one tool call until the person decides: writes [`tool_question_text`] to `out`,
/// reads `input` by [`read_tool_answer`] and returns the decision pinned to the call's
/// `argsSha256` ([`Decision::with_sha256`]): `y` approves, `a` approves and always allows the
/// tool, `n` rejects, `f` asks for the feedback on the next line (a blank line goes back to the
/// question), other text rejects with it. `q` is [`PromptAnswer::Left`]; end of input and
/// `interrupt` completing (the CLI passes `tokio::signal::ctrl_c()`) are
/// [`PromptAnswer::EndOfInput`] and [`PromptAnswer::Interrupted`]: no decision.
///
/// The call itself is shown by the caller first ([`render_tool_call`]).
///
/// # Examples
/// ```
/// use agent_controller::terminal::{PromptAnswer, StdinLines, Style, ask_tool_call};
/// use agent_controller::Decision;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut out = Vec::new();
/// let mut input = StdinLines::from_reader(&b"ok\nf\n\nf\nuse b.txt\n"[..]);
/// let answer = ask_tool_call(&Style::plain(80), "write_file", "53fa", &mut input, &mut out, std::future::pending::<()>()).await;
/// assert_eq!(answer, PromptAnswer::Decided(Decision::reject_with("use b.txt").with_sha256("53fa")));
/// let mut input = StdinLines::from_reader(&b"a\n"[..]);
/// let answer = ask_tool_call(&Style::plain(80), "write_file", "53fa", &mut input, &mut out, std::future::pending::<()>()).await;
/// assert_eq!(answer, PromptAnswer::Decided(Decision::approve().always_allow().with_sha256("53fa")));
/// let mut input = StdinLines::from_reader(&b"q\n"[..]);
/// let answer = ask_tool_call(&Style::plain(80), "write_file", "53fa", &mut input, &mut out, std::future::pending::<()>()).await;
/// assert_eq!(answer, PromptAnswer::Left);
/// # }
/// ```
pub async fn ask_tool_call<F>(
    style: &Style,
    tool_name: &str,
    args_sha256: &str,
    input: &mut StdinLines,
    out: &mut impl Write,
    interrupt: F,
) -> PromptAnswer
where
    F: std::future::Future,
{
    let mut interrupt = std::pin::pin!(interrupt);
    let mut wants_feedback = false;
    loop {
        // A closed stderr must not stop the decision: it is still read from stdin.
        let text = if wants_feedback {
            "Feedback for the model (the call is rejected with it; an empty line goes back):\n> "
                .to_owned()
        } else {
            tool_question_text(style, tool_name)
        };
        let _ = write!(out, "{text}");
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
        if wants_feedback {
            wants_feedback = false;
            let feedback = line.trim();
            if feedback.is_empty() {
                continue;
            }
            return PromptAnswer::Decided(Decision::reject_with(feedback).with_sha256(args_sha256));
        }
        let decision = match read_tool_answer(&line) {
            ToolAnswer::Blank => continue,
            ToolAnswer::Approve => Decision::approve(),
            ToolAnswer::AlwaysAllow => Decision::approve().always_allow(),
            ToolAnswer::Reject => Decision::reject(),
            ToolAnswer::Feedback(text) => Decision::reject_with(text),
            ToolAnswer::AskFeedback => {
                wants_feedback = true;
                continue;
            }
            ToolAnswer::Leave => return PromptAnswer::Left,
            ToolAnswer::Unclear(hint) => {
                let _ = writeln!(out, "{hint}");
                continue;
            }
        };
        return PromptAnswer::Decided(decision.with_sha256(args_sha256));
    }
}
