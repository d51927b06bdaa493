//! The terminal front end the CLI uses, as a library module so other hosts can reuse it (cargo
//! feature `terminal`, on by default): the plan shown as written, the mode shown in its
//! `metadata.color`, a spinner while the model works, and the approve / reject / feedback prompt
//! ([`read_answer`] is its grammar) where Ctrl-C or end of input are no decision.
//!
//! A plan is shown as the markdown its author wrote, every character of it ([`Style::render_plan`]):
//! markup stays visible, and so does what it marks, because a rendering hides text (issue 19:
//! `Do ~~not~~ drop the production database` read `Do not drop ...` once the strikethrough was
//! rendered, and on a terminal that does not draw SGR 9 it read the same). With colours, the
//! headings and the `**bold**` spans are coloured, markers included; colour only adds emphasis.
//! The spinner is [`indicatif`]'s; colours and the terminal size come from crossterm (through
//! [`termimad`]). Everything is written to a writer the caller gives (stderr in the CLI), so
//! stdout stays free for events and results.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use async_trait::async_trait;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use termimad::crossterm::style::{Color, Stylize};
use tokio::sync::mpsc;

use crate::display::{neutralize, neutralize_line, neutralize_line_within};
use crate::mode::Mode;
use crate::model::{LanguageModel, ModelError, ModelRequest, ModelResponse};
use crate::run::Decision;
use crate::tool::submit_plan::{parse_plan, plan_diff};

pub mod editor;
pub mod revision;
pub mod suspension;
mod tasks;
pub mod tool_call;

pub use self::revision::{RevisionView, RevisionsShown};

pub use self::suspension::{
    GUTTER, answer_from_flags, ask_suspension, read_suspension_answer, render_suspension,
    suspension_prompt_text,
};

pub use self::tool_call::{
    TOOL_ARGS_MAX_CHARS, TOOL_ARGS_MAX_LINES, ToolAnswer, read_tool_answer, render_tool_call,
    tool_question_text,
};

use editor::{Editor, EditorError};

/// How to draw for one output stream: with colours or plain, and how wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    color: bool,
    width: usize,
}

impl Style {
    /// Plain text (no escape codes) wrapped at `width` columns.
    pub fn plain(width: usize) -> Self {
        Self {
            color: false,
            width: width.max(20),
        }
    }

    /// Colours on, wrapped at `width` columns.
    pub fn colored(width: usize) -> Self {
        Self {
            color: true,
            ..Self::plain(width)
        }
    }

    /// The style for stderr: colours when stderr is a terminal and `NO_COLOR` is unset (see
    /// <https://no-color.org>), the terminal's width up to 100 columns.
    pub fn for_stderr() -> Self {
        Self::for_stream(std::io::stderr().is_terminal())
    }

    /// The style for stdout, by the same rules as [`Style::for_stderr`].
    pub fn for_stdout() -> Self {
        Self::for_stream(std::io::stdout().is_terminal())
    }

    fn for_stream(is_terminal: bool) -> Self {
        let color = is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let (columns, _) = termimad::terminal_size();
        let width = usize::from(columns).clamp(20, 100);
        if color {
            Self::colored(width)
        } else {
            Self::plain(width)
        }
    }

    /// Whether escape codes are written.
    pub fn is_colored(&self) -> bool {
        self.color
    }

    /// The wrap width in columns.
    pub fn width(&self) -> usize {
        self.width
    }

    /// A plan as the user should read it: the title as a `# ` heading line, a blank line, then
    /// the body, exactly as written (the text [`crate::tool::submit_plan::revision_text`] gives,
    /// the text an approval hands over): no markup is rendered away, no line is re-wrapped (the
    /// terminal wraps long lines), no character is dropped. A plan without a title shows
    /// `(untitled plan)` above its body.
    ///
    /// Nothing of the text is hidden: control characters, escape sequences, bidirectional
    /// overrides, zero-width, default-ignorable and unassigned characters are shown as escapes
    /// ([`neutralize`]; [`crate::display::decode_escapes`] reads the text back). With colours on,
    /// heading lines are cyan and `**bold**` spans yellow, their markers included, and code
    /// blocks are left as they are; nothing else is styled (no strikethrough, dim or concealed
    /// text, which terminals draw differently or not at all).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::Style;
    /// let shown = Style::plain(60).render_plan("Add dark mode", "## Steps\n1. Do ~~not~~ drop the **database**.\n2. a*b*c\n");
    /// assert_eq!(shown, "# Add dark mode\n\n## Steps\n1. Do ~~not~~ drop the **database**.\n2. a*b*c\n");
    /// let shown = Style::plain(60).render_plan("T", "1. Run it as root\n\u{1b}[2K\r2. Test it\u{3164}\n");
    /// assert!(shown.contains("1. Run it as root\n\\u{1b}[2K\\u{d}2. Test it\\u{3164}"), "{shown}");
    /// let colored = Style::colored(60).render_plan("T", "A **b** c");
    /// assert!(colored.contains("**b**"), "{colored:?}");
    /// ```
    pub fn render_plan(&self, title: &str, plan: &str) -> String {
        let heading = if title.is_empty() {
            UNTITLED.to_owned()
        } else {
            format!("# {}", neutralize_line_within(title, usize::MAX))
        };
        let body = neutralize(plan);
        if !self.color {
            return format!("{heading}\n\n{body}");
        }
        let mut out = format!("{}\n\n", heading.as_str().cyan().bold());
        let mut in_fence = false;
        for line in body.split_inclusive('\n') {
            let (text, end) = match line.strip_suffix('\n') {
                Some(text) => (text, "\n"),
                None => (line, ""),
            };
            if fence_info(text).is_some() {
                in_fence = !in_fence;
                out.push_str(text);
            } else if in_fence {
                out.push_str(text);
            } else if is_heading(text) {
                out.push_str(&text.cyan().bold().to_string());
            } else {
                out.push_str(&bold_spans(text));
            }
            out.push_str(end);
        }
        out
    }

    /// A unified diff (a plan revision's [`crate::event::SuspendPayload::diff`]) as the user should
    /// read it: each line through [`neutralize_line`]; with colours, added lines green, removed
    /// lines red, hunk headers cyan. An empty diff says the text is unchanged.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::Style;
    /// let diff = "--- revision 1\n+++ revision 2\n@@ -1 +1 @@\n-a\n+b\u{1b}[2K\n";
    /// let shown = Style::plain(80).render_diff(diff);
    /// assert!(shown.contains("-a\n+b\\u{1b}[2K"), "{shown}");
    /// assert!(Style::colored(80).render_diff(diff).contains("\u{1b}["));
    /// assert_eq!(Style::plain(80).render_diff(""), "(the text is unchanged)");
    /// ```
    pub fn render_diff(&self, diff: &str) -> String {
        if diff.is_empty() {
            return "(the text is unchanged)".to_owned();
        }
        let mut out = String::new();
        // Split at line feeds only: `str::lines` would take a carriage return before one away.
        let body = diff.strip_suffix('\n').unwrap_or(diff);
        for line in body.split('\n') {
            // Whole: a diff line is part of what an approval approves.
            let shown = neutralize_line_within(line, usize::MAX);
            let colored = match line.as_bytes().first() {
                _ if !self.color => shown.into_owned(),
                Some(b'+') if !line.starts_with("+++") => shown.green().to_string(),
                Some(b'-') if !line.starts_with("---") => shown.red().to_string(),
                Some(b'@') => shown.cyan().to_string(),
                _ => shown.into_owned(),
            };
            out.push_str(&colored);
            out.push('\n');
        }
        out.pop();
        out
    }

    /// A mode as a short label: `● Name (id)`, in the mode's `metadata.color` when colours are on
    /// and the colour is `#rgb`, `#rrggbb` or a name such as `blue` or `dark_green`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::Style;
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\nname = \"Plan\"\n[modes.metadata]\ncolor = \"#3b82f6\"\n",
    ///     "modes.toml",
    /// )?;
    /// let plan = graph.mode(graph.default_mode_id());
    /// assert_eq!(Style::plain(80).mode_label(plan), "● Plan (plan)");
    /// assert_eq!(Style::colored(80).mode_label(plan), "\u{1b}[38;2;59;130;246m\u{1b}[1m● Plan (plan)\u{1b}[0m");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    ///
    /// The name is shown through [`neutralize_line`].
    pub fn mode_label(&self, mode: &Mode) -> String {
        let label = format!("● {} ({})", neutralize_line(mode.name()), mode.id());
        if !self.color {
            return label;
        }
        match mode_color(mode) {
            Some(color) => label.with(color).bold().to_string(),
            None => label.bold().to_string(),
        }
    }
}

/// The line above the body of a plan without a title.
const UNTITLED: &str = "(untitled plan)";

/// Whether `line` is an ATX heading: at most three spaces, one to six `#`, then a blank or the
/// end of the line.
fn is_heading(line: &str) -> bool {
    let rest = line.trim_start_matches(' ');
    if line.len() - rest.len() > 3 {
        return false;
    }
    let marks = rest.len() - rest.trim_start_matches('#').len();
    (1..=6).contains(&marks)
        && rest[marks..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == '\t')
}

/// `line` with each `**...**` span in yellow and bold, the markers kept in it.
fn bold_spans(line: &str) -> String {
    let parts: Vec<&str> = line.split("**").collect();
    let mut out = String::with_capacity(line.len() + 16);
    let mut at = 0;
    while at < parts.len() {
        // parts[at] is outside a span; parts[at + 1] inside one when its closing `**` exists.
        out.push_str(parts[at]);
        match (parts.get(at + 1), parts.len() > at + 2) {
            (Some(inner), true) => {
                out.push_str(&format!("**{inner}**").yellow().bold().to_string());
            }
            (Some(rest), false) => {
                out.push_str("**");
                out.push_str(rest);
            }
            (None, _) => {}
        }
        at += 2;
    }
    out
}

/// The info string of a code fence line (three or more backticks or tildes after at most three
/// spaces), trimmed; `None` for any other line.
fn fence_info(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("   ")
        .or_else(|| line.strip_prefix("  "))
        .or_else(|| line.strip_prefix(' '))
        .unwrap_or(line);
    let mark = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let fence = rest.len() - rest.trim_start_matches(mark).len();
    (fence >= 3).then(|| rest[fence..].trim())
}

/// The colour a mode's `metadata.color` names: `#rgb`, `#rrggbb`, or a colour name (`blue`,
/// `dark_green`, ...); `None` when unset or not understood (a colour is decoration, never an
/// error).
pub fn mode_color(mode: &Mode) -> Option<Color> {
    let text = mode.metadata().get("color")?.as_str()?.trim();
    let Some(hex) = text.strip_prefix('#') else {
        return Color::try_from(text).ok();
    };
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let channel = |s: &str| u8::from_str_radix(s, 16).ok();
    let (r, g, b) = match hex.len() {
        3 => {
            let double = |i: usize| channel(&hex[i..=i].repeat(2));
            (double(0)?, double(1)?, double(2)?)
        }
        6 => (
            channel(&hex[0..2])?,
            channel(&hex[2..4])?,
            channel(&hex[4..6])?,
        ),
        _ => return None,
    };
    Some(Color::Rgb { r, g, b })
}

/// What the person at the prompt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptAnswer {
    /// A decision from a typed answer (`y`, `n`, or feedback text), pinned to the SHA-256 of the
    /// plan the prompt showed.
    Decided(Decision),
    /// End of input (Ctrl-D, a closed pipe): no decision. A stored plan stays pending; without a
    /// store the host ends the run unapproved; the mode stays.
    EndOfInput,
    /// Ctrl-C at the prompt: no decision, as [`PromptAnswer::EndOfInput`].
    Interrupted,
    /// `q` at a tool call's prompt ([`Question::tool_call`]): no decision now, the call stays
    /// pending.
    Left,
    /// `s MODE` or `switch MODE` at a plan's question ([`Question::switchable`]): no decision;
    /// the host switches to mode `MODE` by hand ([`crate::Session::switch_mode`]), so the
    /// pending plan counts as not approved and the model is told. `MODE` is one of the modes
    /// the question listed, typed exactly.
    Switch(String),
}

impl PromptAnswer {
    /// What to tell the person about an answer that was not a typed decision.
    pub fn notice(&self, mode_id: &str) -> Option<String> {
        let what = match self {
            PromptAnswer::Decided(_) | PromptAnswer::Switch(_) => return None,
            PromptAnswer::EndOfInput => "end of input",
            PromptAnswer::Interrupted => "interrupted",
            PromptAnswer::Left => "left for later",
        };
        Some(format!(
            "{what}: the plan is not approved; the mode stays `{}`",
            neutralize_line(mode_id)
        ))
    }
}

/// One typed line at the approval prompt, read by the prompt's grammar ([`read_answer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `y` or `yes` (any case): approve (to the first target).
    Approve,
    /// When the prompt lists several targets ([`read_answer_among`]): the number of a listed
    /// target (`1`, `2`, ...) or its mode id typed alone: approve to that target (its index in
    /// the list, from 0).
    ApproveTo(usize),
    /// `y` (or `yes`) followed by a list of step numbers (`y 1-3,5`): approve only those steps
    /// of the plan ([`Decision::steps`], the list read by [`Decision::parse_steps`]).
    ApproveSteps(Vec<u64>),
    /// `n` or `no` (any case): reject without feedback.
    Reject,
    /// Any other text: reject, with the text (trimmed) as feedback for the model.
    Feedback(String),
    /// A single word that looks like a decision but is not `y`/`yes`/`n`/`no` (`approve`, `ok`,
    /// `lgtm`, `deny`, `yes!`, ...): ask again; the text says why.
    Unclear(String),
    /// A blank line: ask again.
    Blank,
}

/// Single words people type to decide that are not the prompt's keys; typed alone they are
/// neither taken as an approval nor sent to the model as feedback.
const DECISION_WORDS: &[&str] = &[
    "a",
    "abort",
    "accept",
    "accepted",
    "affirmative",
    "agree",
    "agreed",
    "all",
    "allow",
    "alright",
    "approve",
    "approved",
    "approval",
    "aye",
    "cancel",
    "confirm",
    "confirmed",
    "continue",
    "decline",
    "declined",
    "deny",
    "denied",
    "do",
    "done",
    "exit",
    "fine",
    "go",
    "good",
    "k",
    "lgtm",
    "nah",
    "nay",
    "negative",
    "nein",
    "nope",
    "ok",
    "okay",
    "oui",
    "perfect",
    "proceed",
    "q",
    "quit",
    "refuse",
    "reject",
    "rejected",
    "ship",
    "skip",
    "stop",
    "sure",
    "true",
    "ya",
    "yea",
    "yeah",
    "yep",
    "yup",
    "si",
    "ja",
    "1",
    "0",
    "+1",
    "-1",
    "👍",
    "👎",
];

/// Reads one line typed at the approval prompt. The grammar ([the guide](crate::guide::cli), `run --help`):
/// `y`/`yes` approve and `n`/`no` reject (any case, surrounding blanks ignored); a single word
/// that looks like a decision ([`Answer::Unclear`]: `approve`, `approved`, `ok`, `okay`,
/// `accept`, `reject`, `deny`, `lgtm`, `sure`, `y.`, ...) asks again with a hint; a blank line
/// asks again; a line of numbers alone (`2`, `1,3`: the habit of a numbered question) asks
/// again with a hint; `y` (or `yes`) followed by a list of step numbers (`y 1-3,5`) approves
/// only those steps ([`Answer::ApproveSteps`]; a list that does not read asks again, saying
/// why); any other text rejects with that text as feedback.
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Answer, read_answer};
/// assert_eq!(read_answer(" Yes\n"), Answer::Approve);
/// assert_eq!(read_answer("n"), Answer::Reject);
/// assert_eq!(read_answer("y 1-3,5"), Answer::ApproveSteps(vec![1, 2, 3, 5]));
/// assert!(matches!(read_answer("y 3-1"), Answer::Unclear(_)));
/// assert_eq!(read_answer("yes, add tests"), Answer::Feedback("yes, add tests".to_owned()));
/// assert!(matches!(read_answer("approve"), Answer::Unclear(_)));
/// assert!(matches!(read_answer("OK!"), Answer::Unclear(_)));
/// assert_eq!(read_answer("add tests\n"), Answer::Feedback("add tests".to_owned()));
/// assert_eq!(read_answer("tests"), Answer::Feedback("tests".to_owned()));
/// assert_eq!(read_answer("  \n"), Answer::Blank);
/// ```
pub fn read_answer(line: &str) -> Answer {
    read_answer_among(line, &[])
}

/// Reads one line typed at an approval prompt that lists `targets` (mode ids, the plain
/// approval's first): the grammar of [`read_answer`], extended when there are two or more
/// targets: the number of a listed target (`1` for the first) or its mode id typed alone
/// (exactly, case-sensitive) approves to it ([`Answer::ApproveTo`]); any other number, and one
/// word that misses a listed id only in case or by at most two characters, asks again with a
/// hint. With fewer than two targets it is [`read_answer`]. A line of numbers alone (`2`,
/// `1,3`) that chooses no listed target asks again with a hint, with any number of targets: it
/// is never feedback. A line with control characters (an
/// arrow key's escape sequence, [`typed_controls`]) asks again with a hint, in either case: it is
/// never feedback.
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Answer, read_answer_among};
/// let targets = ["build", "build-auto"];
/// assert_eq!(read_answer_among("y", &targets), Answer::Approve);
/// assert_eq!(read_answer_among(" 2\n", &targets), Answer::ApproveTo(1));
/// assert_eq!(read_answer_among("build-auto", &targets), Answer::ApproveTo(1));
/// assert!(matches!(read_answer_among("3", &targets), Answer::Unclear(_)));
/// // A listed mode id missed in case or by a typo asks again, with a hint.
/// assert_eq!(
///     read_answer_among("Build-auto", &targets),
///     Answer::Unclear("`Build-auto` is not a listed choice: did you mean `build-auto`? (mode ids are case-sensitive); type 1 to 2 or a listed mode id to approve to that mode, n to reject, or a sentence of feedback".to_owned())
/// );
/// assert!(matches!(read_answer_among("biuld", &targets), Answer::Unclear(_)));
/// assert_eq!(read_answer_among("tests", &targets), Answer::Feedback("tests".to_owned()));
/// // One target: numbers and ids are not choices.
/// assert!(matches!(read_answer_among("1", &["build"]), Answer::Unclear(_)));
/// // An arrow key then Enter is no feedback.
/// assert!(matches!(read_answer_among("\u{1b}[A\n", &["build"]), Answer::Unclear(_)));
/// ```
pub fn read_answer_among(line: &str, targets: &[&str]) -> Answer {
    if let Some(hint) = typed_controls(line) {
        return Answer::Unclear(hint);
    }
    let text = line.trim();
    // The keys come first: a mode named `n` cannot turn a rejection into an approval.
    match text.to_lowercase().as_str() {
        "" => return Answer::Blank,
        "y" | "yes" => return Answer::Approve,
        "n" | "no" => return Answer::Reject,
        _ => {}
    }
    if let Some(steps) = read_steps(text) {
        return match steps {
            Ok(steps) => Answer::ApproveSteps(steps),
            Err(why) => Answer::Unclear(format!(
                "{why}; type y followed by the steps to approve (y 1-3,5), y to approve the whole plan, n to reject, or a sentence of feedback"
            )),
        };
    }
    if targets.len() > 1 {
        if let Some(at) = targets.iter().position(|t| *t == text) {
            return Answer::ApproveTo(at);
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            return match text.parse::<usize>() {
                Ok(n) if (1..=targets.len()).contains(&n) => Answer::ApproveTo(n - 1),
                _ => Answer::Unclear(format!(
                    "`{}` is not a listed choice: type 1 to {} to approve to that mode, y to approve to the first, n to reject, or a sentence of feedback",
                    neutralize_line(text),
                    targets.len()
                )),
            };
        }
    }
    // Numbers alone (`2`, `1,3`), typed out of habit after a numbered question, choose nothing
    // here: asking again loses nothing, where feedback would reject the plan (trial 5 L3).
    if is_numbers_alone(text) {
        let choices = if targets.len() > 1 {
            format!("1 to {} to approve to that mode, ", targets.len())
        } else {
            String::new()
        };
        return Answer::Unclear(format!(
            "`{}` is not an answer here: this asks about a plan, not a numbered question; type {choices}y (or yes) to approve, n (or no) to reject, or a sentence of feedback to reject with it",
            neutralize_line(text)
        ));
    }
    let word = text
        .trim_matches(|c: char| matches!(c, '.' | '!' | '?' | ',' | ';' | ':' | '"' | '\''))
        .to_lowercase();
    let single = !text.chars().any(char::is_whitespace);
    // One word that misses a listed target only in case or by a typo was meant as that
    // target: asking again loses nothing, where sending it as feedback would reject the plan.
    if single
        && targets.len() > 1
        && let Some(hint) = crate::hint::hint(text, targets.iter().copied(), "mode ids")
    {
        return Answer::Unclear(format!(
            "`{}` is not a listed choice: {hint}; type 1 to {} or a listed mode id to approve to that mode, n to reject, or a sentence of feedback",
            neutralize_line(text),
            targets.len()
        ));
    }
    if single
        && (matches!(word.as_str(), "y" | "yes" | "n" | "no")
            || DECISION_WORDS.contains(&word.as_str()))
    {
        return Answer::Unclear(format!(
            "`{}` is not an answer here: type y (or yes) to approve, n (or no) to reject, or a sentence of feedback to reject with it",
            neutralize_line(text)
        ));
    }
    Answer::Feedback(text.to_owned())
}

/// `y LIST` / `yes LIST`, `LIST` step numbers and ranges (digits, `-`, `,` and blanks alone):
/// the steps as [`Decision::parse_steps`] reads them; `None` for any other line (`yes, add
/// tests` is feedback, as before).
fn read_steps(text: &str) -> Option<Result<Vec<u64>, String>> {
    let (key, rest) = text.split_once(char::is_whitespace)?;
    let rest = rest.trim();
    let listed = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_digit() || c == '-' || c == ',' || c.is_whitespace());
    (matches!(key.to_lowercase().as_str(), "y" | "yes") && listed).then(|| {
        Decision::parse_steps(rest).map_err(|e| match e {
            crate::SessionError::PlanSteps(why) => why,
            other => other.to_string(),
        })
    })
}

/// Whether `text` is numbers alone: digits, with commas, blanks or dots between them (`2`,
/// `1,3`, `2 3`, `2.`), and at least one digit.
fn is_numbers_alone(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_digit())
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '.' || c.is_whitespace())
}

/// Why a typed line is not an answer when it holds a control character other than a tab (an
/// escape sequence such as an arrow key, `\x1b[A`, or Ctrl-V'd bytes): `None` for a line of text.
/// The line ending (`\n`, `\r\n`) is not part of the line. A prompt asks again rather than
/// take such a line as an answer or send it to the model as feedback (trial finding M5).
///
/// # Examples
/// ```
/// use agent_controller::terminal::typed_controls;
/// assert!(typed_controls("\u{1b}[A\n").unwrap().contains("arrow key"));
/// assert_eq!(typed_controls("add tests\tfirst\r\n"), None);
/// ```
pub fn typed_controls(line: &str) -> Option<String> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    line.chars().any(|c| c.is_control() && c != '\t').then(|| {
        format!(
            "`{}` holds control characters (an arrow key or another escape sequence?), which are not an answer: nothing was taken; type the answer again",
            neutralize_line_within(line, 80)
        )
    })
}

/// A line typed at a prompt that is not UTF-8 text: nothing of it is read, and the prompt asks
/// again (it is not the end of input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the line typed ({bytes} bytes) is not UTF-8 text (is the terminal set to another encoding?): nothing was taken; type it again"
)]
pub struct NotUtf8 {
    /// How many bytes the line had, its line ending included.
    pub bytes: usize,
}

/// Lines from stdin, read on a background thread so the prompt can also wait for Ctrl-C.
///
/// The thread reads a line only when one is asked for ([`StdinLines::next_line`]), so between
/// answers nothing is reading: an editor started from the prompt has the terminal to itself. A
/// blocking read cannot be cancelled, so the thread lives until stdin ends or the process
/// exits; it is not joined.
#[derive(Debug)]
pub struct StdinLines {
    wanted: std::sync::mpsc::Sender<()>,
    lines: mpsc::UnboundedReceiver<Result<String, NotUtf8>>,
    /// A line was asked for and has not been received yet (the asking future was dropped).
    asked: bool,
}

impl StdinLines {
    /// Starts the reader thread.
    pub fn spawn() -> Self {
        Self::from_reader(std::io::stdin())
    }

    /// Reads lines from any reader (tests, other hosts) on a background thread.
    pub fn from_reader<R: std::io::Read + Send + 'static>(reader: R) -> Self {
        let (tx, lines) = mpsc::unbounded_channel();
        let (wanted, asks) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(reader);
            // One line per ask; none while nobody asks.
            while asks.recv().is_ok() {
                let mut bytes = Vec::new();
                match reader.read_until(b'\n', &mut bytes) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => {
                        let line = String::from_utf8(bytes).map_err(|_| NotUtf8 { bytes: read });
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Self {
            wanted,
            lines,
            asked: false,
        }
    }

    /// The next line, or `None` at end of input; a line that is not UTF-8 is
    /// `Some(Err(NotUtf8))`, and the line after it can be asked for. Dropping the future before
    /// it completes loses nothing: the line asked for is the next one returned.
    pub async fn next_line(&mut self) -> Option<Result<String, NotUtf8>> {
        if !self.asked {
            // Fails only once the reader ended; `recv` then says so.
            let _ = self.wanted.send(());
            self.asked = true;
        }
        let line = self.lines.recv().await;
        self.asked = false;
        line
    }
}

/// The question under a plan: where approval leads and how to answer.
pub fn prompt_text(style: &Style, target: &Mode) -> String {
    prompt_text_among(style, &[target])
}

/// The question under a plan whose approval may hand over to any of `targets` (the plain
/// approval's first): with one target, [`prompt_text`]; with more, each numbered on its own line
/// and the keys to choose ([`read_answer_among`]).
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Style, prompt_text_among};
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"build-auto\"]\n[[modes]]\nid = \"build\"\n[[modes]]\nid = \"build-auto\"\n",
///     "modes.toml",
/// )?;
/// let build = graph.mode(graph.get("build").unwrap());
/// let auto = graph.mode(graph.get("build-auto").unwrap());
/// let text = prompt_text_among(&Style::plain(80), &[build, auto]);
/// assert!(text.contains("  1  ● build (build)  (y)\n  2  ● build-auto (build-auto)\n"), "{text}");
/// assert!(text.contains("[1-2] approve to that mode"), "{text}");
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
pub fn prompt_text_among(style: &Style, targets: &[&Mode]) -> String {
    question_text(style, targets, false, "")
}

/// The question and its keys: about the submitted plan, or (`edited`) about the user's edit of
/// it; `extra` (keys such as `  [p] show the whole plan`) goes after the keys.
fn question_text(style: &Style, targets: &[&Mode], edited: bool, extra: &str) -> String {
    let key = |k: &str| {
        if style.color {
            k.bold().to_string()
        } else {
            k.to_owned()
        }
    };
    let subject = if edited {
        "the edited plan"
    } else {
        "this plan"
    };
    let mut choices = String::new();
    let question = match targets {
        [] => format!("Approve {subject}?"),
        [one] => format!("Approve {subject} and switch to {}?", style.mode_label(one)),
        many => {
            for (n, target) in many.iter().enumerate() {
                let plain = if n == 0 { "  (y)" } else { "" };
                choices.push_str(&format!(
                    "  {}  {}{plain}\n",
                    n + 1,
                    style.mode_label(target)
                ));
            }
            format!("Approve {subject} and switch to one of:")
        }
    };
    let (y, n, e, d) = (key("y"), key("n"), key("e"), key("d"));
    let range = key(&format!("1-{}", targets.len()));
    let keys = match (targets, edited) {
        ([first, _, ..], false) => format!(
            "[{y}]es approve to {}  [{range}] approve to that mode  [{n}]o reject  or type feedback to reject with it",
            first.id()
        ),
        (_, false) => {
            format!("[{y}]es approve  [{n}]o reject  or type feedback to reject with it")
        }
        ([first, _, ..], true) => format!(
            "[{y}]es approve it to {}  [{range}] approve it to that mode  [{e}] edit again  [{d}] discard the edit",
            first.id()
        ),
        (_, true) => {
            format!("[{y}]es approve the edited plan  [{e}] edit again  [{d}] discard the edit")
        }
    };
    format!("{question}\n{choices}{keys}{extra}\n> ")
}

/// The approval prompt, for whatever waits: a plan ([`Question::new`]) or a tool call
/// ([`Question::tool_call`]). A plan's question reads answers by [`read_answer_among`], and adds
/// `p` to show the whole plan ([`Question::whole_plan`]) and `e` to edit the plan in the user's
/// editor before approving it ([`Question::editable`]).
///
/// # Examples
/// ```
/// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
/// use agent_controller::terminal::editor::Editor;
/// use agent_controller::Decision;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), agent_controller::ConfigError> {
/// # #[cfg(unix)] {
/// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\n", "m.toml")?;
/// let build = graph.mode(graph.default_mode_id());
/// let editor = Editor::new("sh -c 'printf \"# Plan\\n\\n1. Edited.\\n\" > \"$0\"'");
/// let mut out = Vec::new();
/// let mut input = StdinLines::from_reader(&b"e\ny\n"[..]);
/// let answer = Question::new(&Style::plain(80), &[build], "53fa")
///     .editable("# Plan\n\n1. Step.\n", &editor)
///     .ask(&mut input, &mut out, std::future::pending::<()>())
///     .await;
/// let approved = Decision::approve().with_plan("# Plan\n\n1. Edited.\n").with_sha256("53fa");
/// assert_eq!(answer, PromptAnswer::Decided(approved));
/// let shown = String::from_utf8_lossy(&out);
/// assert!(shown.contains("-1. Step.\n+1. Edited.\n"), "{shown}");
/// assert!(shown.contains("Approve the edited plan and switch to ● build (build)?"), "{shown}");
/// # }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    style: &'a Style,
    subject: Subject<'a>,
}

/// What a [`Question`] asks about: one pending decision of either kind.
#[derive(Debug, Clone, Copy)]
enum Subject<'a> {
    Plan(PlanQuestion<'a>),
    ToolCall {
        tool_name: &'a str,
        args_sha256: &'a str,
        /// The `ask` rule that made the call wait, if one did: no `a` then.
        rule: Option<&'a crate::rules::RuleRecord>,
        /// The call's arguments, which `v` prints whole ([`Question::viewable`]).
        args: Option<&'a serde_json::Value>,
    },
}

/// The parts of a plan's question.
#[derive(Debug, Clone, Copy)]
struct PlanQuestion<'a> {
    targets: &'a [&'a Mode],
    plan_sha256: &'a str,
    whole_plan: Option<&'a str>,
    editing: Option<(&'a str, &'a Editor)>,
    allowances: &'a [String],
    /// The modes `s MODE` may switch to by hand (the session's other modes).
    switchable: &'a [&'a Mode],
    /// The plan's text as shown, whose lines `c LINE TEXT` comments on.
    commentable: Option<&'a str>,
    /// Whether `m MODEL` chooses the next mode's model.
    choosing_model: bool,
    /// The model an approval names until `m` changes it ([`Question::starting_model`]).
    starting_model: Option<&'a str>,
    /// The host's check of a model typed with `m MODEL` ([`Question::checking_model`]).
    model_check: Option<ModelCheck<'a>>,
}

/// A host's check of a model id typed at the prompt: `Err(reason)` when it cannot be used.
#[derive(Clone, Copy)]
struct ModelCheck<'a>(&'a dyn Fn(&str) -> Result<(), String>);

impl std::fmt::Debug for ModelCheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelCheck")
    }
}

/// What a plan's question holds between two typed lines: the comments kept with `c`, and the
/// model chosen with `m`.
#[derive(Debug, Default)]
struct Held {
    comments: Vec<(u64, String)>,
    model: Option<String>,
}

/// Where a question stands between two typed lines.
enum Asking {
    /// At the question itself.
    Question,
    /// A plan's question after the user edited the plan: this is the edit.
    Edited(String),
    /// A tool call's question after `f`: the next line is the feedback.
    Feedback,
}

impl Asking {
    fn edit(&self) -> Option<&str> {
        match self {
            Asking::Edited(text) => Some(text),
            _ => None,
        }
    }
}

impl<'a> Question<'a> {
    /// The question under a plan with SHA-256 `plan_sha256`, whose approval may hand over to
    /// any of `targets` (the plain approval's first, as [`crate::event::SuspendPayload::target_mode_ids`]
    /// lists them): the prompt lists them ([`prompt_text_among`]) and reads answers by
    /// [`read_answer_among`] (`y`/`yes`, `n`/`no`, a target's number or mode id, other text as
    /// feedback); choosing a target that is not the first gives an approval with
    /// [`Decision::to`]. A blank line asks again; a single word that looks like a decision
    /// (`ok`, `approve`) asks again with a hint.
    ///
    /// Every decision is pinned to `plan_sha256`, the hash of the plan shown with the prompt
    /// ([`Decision::with_sha256`]): if the pending plan changed meanwhile, resuming with it is
    /// refused and changes nothing.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_controller::ConfigError> {
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"build-auto\"]\n[[modes]]\nid = \"build\"\n[[modes]]\nid = \"build-auto\"\n",
    ///     "modes.toml",
    /// )?;
    /// let build = graph.mode(graph.get("build").unwrap());
    /// let style = Style::plain(80);
    /// let never = || std::future::pending::<()>();
    /// let mut out = Vec::new();
    /// let one = [build];
    /// let mut input = StdinLines::from_reader(&b"\nok\nadd tests\n"[..]);
    /// let answer = Question::new(&style, &one, "53fa").ask(&mut input, &mut out, never()).await;
    /// assert_eq!(answer, PromptAnswer::Decided(Decision::reject_with("add tests").with_sha256("53fa")));
    /// assert!(String::from_utf8_lossy(&out).contains("`ok` is not an answer here"));
    /// let mut input = StdinLines::from_reader(&b""[..]);
    /// let answer = Question::new(&style, &one, "53fa").ask(&mut input, &mut out, never()).await;
    /// assert_eq!(answer, PromptAnswer::EndOfInput);
    ///
    /// let two = [build, graph.mode(graph.get("build-auto").unwrap())];
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"7\n2\n"[..]);
    /// let answer = Question::new(&style, &two, "53fa").ask(&mut input, &mut out, never()).await;
    /// assert_eq!(answer, PromptAnswer::Decided(Decision::approve().to("build-auto").with_sha256("53fa")));
    /// assert!(String::from_utf8_lossy(&out).contains("`7` is not a listed choice"));
    /// # Ok(()) }
    /// ```
    pub fn new(style: &'a Style, targets: &'a [&'a Mode], plan_sha256: &'a str) -> Self {
        Self {
            style,
            subject: Subject::Plan(PlanQuestion {
                targets,
                plan_sha256,
                whole_plan: None,
                editing: None,
                allowances: &[],
                switchable: &[],
                commentable: None,
                choosing_model: false,
                starting_model: None,
                model_check: None,
            }),
        }
    }

    /// The question under a tool call of `tool_name` that waits for approval, pinned to its
    /// `argsSha256`: the call itself is shown by the caller first ([`render_tool_call`]). The
    /// keys ([`read_tool_answer`]): `y` approves, `a` approves and always allows the tool, `n`
    /// rejects, `f` asks for the feedback on the next line (a blank line goes back to the
    /// question), other text rejects with it, `q` is [`PromptAnswer::Left`].
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let style = Style::plain(80);
    /// let question = Question::tool_call(&style, "write_file", "53fa");
    /// let never = || std::future::pending::<()>();
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"ok\nf\n\nf\nuse b.txt\n"[..]);
    /// let answer = question.ask(&mut input, &mut out, never()).await;
    /// assert_eq!(answer, PromptAnswer::Decided(Decision::reject_with("use b.txt").with_sha256("53fa")));
    /// let mut input = StdinLines::from_reader(&b"a\n"[..]);
    /// let answer = question.ask(&mut input, &mut out, never()).await;
    /// assert_eq!(answer, PromptAnswer::Decided(Decision::approve().always_allow().with_sha256("53fa")));
    /// let mut input = StdinLines::from_reader(&b"q\n"[..]);
    /// assert_eq!(question.ask(&mut input, &mut out, never()).await, PromptAnswer::Left);
    /// # }
    /// ```
    pub fn tool_call(style: &'a Style, tool_name: &'a str, args_sha256: &'a str) -> Self {
        Self {
            style,
            subject: Subject::ToolCall {
                tool_name,
                args_sha256,
                rule: None,
                args: None,
            },
        }
    }

    /// Adds the key `v` (any case) to a tool call's question: prints every argument of `args`
    /// (the call's arguments, whose `argsSha256` the question is pinned to) whole
    /// ([`crate::display::arguments_whole`]: escaped as everywhere, nothing cut), then asks
    /// again. [`render_tool_call`] bounds what it shows; this is how the approver sees every
    /// character they approve (issue 36, item 4). Nothing changes under a plan.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let args = serde_json::json!({ "path": "a.txt", "content": format!("{}END", "x".repeat(9_000)) });
    /// let style = Style::plain(80);
    /// let question = Question::tool_call(&style, "write_file", "53fa").viewable(&args);
    /// assert!(question.text().contains("[v]iew every argument whole"));
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"v\ny\n"[..]);
    /// let answer = question.ask(&mut input, &mut out, std::future::pending::<()>()).await;
    /// assert_eq!(answer, PromptAnswer::Decided(Decision::approve().with_sha256("53fa")));
    /// let shown = String::from_utf8_lossy(&out);
    /// assert!(shown.contains(&format!("  \"content\": \"{}END\"", "x".repeat(9_000))));
    /// # }
    /// ```
    pub fn viewable(mut self, args: &'a serde_json::Value) -> Self {
        if let Subject::ToolCall { args: shown, .. } = &mut self.subject {
            *shown = Some(args);
        }
        self
    }

    /// Marks a tool call's question as one about a call that `rule`, a mode's `ask` rule, made
    /// wait (the payload's [`crate::event::ToolCallPayload::rule`]; `None` changes nothing). An
    /// "always allow" does not cover such calls ([`Decision::always_allow`] is refused on
    /// them), so `a` is not offered, and `a` typed anyway says why and asks again. Nothing
    /// changes under a plan.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::rules::{RuleAction, RuleRecord};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let rule = RuleRecord {
    ///     mode_id: "build".into(),
    ///     number: 3,
    ///     action: RuleAction::Ask,
    ///     rule: "ask read_file path `secret/**`".into(),
    ///     reason: "rule 3 of mode `build` asks".into(),
    ///     approvers: None,
    ///     agent_type: None,
    /// };
    /// let style = Style::plain(80);
    /// let question = Question::tool_call(&style, "read_file", "53fa").asked_by_rule(Some(&rule));
    /// assert!(!question.text().contains("[a]lways allow"));
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"a\ny\n"[..]);
    /// let answer = question.ask(&mut input, &mut out, std::future::pending::<()>()).await;
    /// assert_eq!(answer, PromptAnswer::Decided(Decision::approve().with_sha256("53fa")));
    /// assert!(String::from_utf8_lossy(&out).contains("`a` is not offered here: rule 3 of mode `build`"));
    /// # }
    /// ```
    pub fn asked_by_rule(mut self, rule: Option<&'a crate::rules::RuleRecord>) -> Self {
        if let Subject::ToolCall { rule: asked, .. } = &mut self.subject {
            *asked = rule;
        }
        self
    }

    /// This question with `set` applied to its plan's parts, for the builder methods that only a
    /// plan's question has (a tool call's question is returned as it is).
    fn with_plan(mut self, set: impl FnOnce(&mut PlanQuestion<'a>)) -> Self {
        match &mut self.subject {
            Subject::Plan(plan) => set(plan),
            Subject::ToolCall { .. } => {}
        }
        self
    }

    /// Says, above the keys, that approving ends the "always allow" of `tools` (the session's
    /// [`crate::Session::always_allowed`]): an approval switches mode, and every mode change
    /// ends them, so their calls ask again. Nothing is said when `tools` is empty or there is
    /// no target to switch to, nor under a tool call.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{Question, Style};
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n[[modes]]\nid = \"build\"\n",
    ///     "modes.toml",
    /// )?;
    /// let build = graph.mode(graph.get("build").unwrap());
    /// let allowed = ["write_file".to_owned()];
    /// let text = Question::new(&Style::plain(80), &[build], "ab").ending_allowances(&allowed).text();
    /// assert!(text.contains("Approving switches mode and ends the always-allow of write_file: its calls ask again.\n"), "{text}");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn ending_allowances(self, tools: &'a [String]) -> Self {
        self.with_plan(|plan| plan.allowances = tools)
    }

    /// Adds `s MODE` (or `switch MODE`) to a plan's question: leave the plan without approving
    /// it and switch to `MODE`, one of `modes` (the modes a manual switch may go to: the
    /// session's other modes), typed exactly as its id. The answer is
    /// [`PromptAnswer::Switch`]; the host makes the switch ([`crate::Session::switch_mode`]),
    /// which counts the plan as not approved and tells the model. `s` or `switch` alone, or
    /// with a word that is not one of `modes`, asks again with the list; `switch` followed by
    /// a sentence is feedback, as before. The help line lists the key; nothing is added when
    /// `modes` is empty, nor under a tool call.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_controller::ConfigError> {
    /// let graph = agent_controller::config::parse(
    ///     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\n[[modes]]\nid = \"build\"\n[[modes]]\nid = \"review\"\n",
    ///     "modes.toml",
    /// )?;
    /// let build = graph.mode(graph.get("build").unwrap());
    /// let review = graph.mode(graph.get("review").unwrap());
    /// let (targets, others, style) = ([build], [build, review], Style::plain(80));
    /// let question = Question::new(&style, &targets, "53fa").switchable(&others);
    /// assert!(question.text().contains("[s MODE] switch to build or review, not approving"));
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"s\nswitch Review\ns review\n"[..]);
    /// let answer = question.ask(&mut input, &mut out, std::future::pending::<()>()).await;
    /// assert_eq!(answer, PromptAnswer::Switch("review".to_owned()));
    /// let shown = String::from_utf8_lossy(&out);
    /// assert!(shown.contains("`Review` is not a mode to switch to (did you mean `review`? (mode ids are case-sensitive)): type s and one of build, review"), "{shown}");
    /// # Ok(()) }
    /// ```
    pub fn switchable(self, modes: &'a [&'a Mode]) -> Self {
        self.with_plan(|plan| plan.switchable = modes)
    }

    /// Adds `c LINE TEXT` to a plan's question: a comment on line `LINE` of `plan_text` (the
    /// plan's text as shown, [`crate::tool::submit_plan::revision_text`], whose lines are
    /// numbered from 1 as [`crate::comment::plan_lines`] numbers them), kept until the person
    /// rejects: `n` (or feedback text) then gives a rejection with every comment
    /// ([`Decision::comment`]). `c` alone shows the plan with its lines numbered; a line outside
    /// the plan or a blank text asks again, with a hint; an approval while comments are held
    /// asks again (comments go with a rejection) and `d` drops them.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_controller::ConfigError> {
    /// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\n", "m.toml")?;
    /// let (targets, style) = ([graph.mode(graph.default_mode_id())], Style::plain(80));
    /// let text = "# Deploy\n\n1. Build.\n2. Deploy to production.\n";
    /// let question = Question::new(&style, &targets, "53fa").commentable(text);
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"c\nc 9 no\nc 4 staging first\ny\nn\n"[..]);
    /// let answer = question.ask(&mut input, &mut out, std::future::pending::<()>()).await;
    /// let rejected = Decision::reject().comment(4, "staging first").with_sha256("53fa");
    /// assert_eq!(answer, PromptAnswer::Decided(rejected));
    /// let shown = String::from_utf8_lossy(&out);
    /// assert!(shown.contains("   4  2. Deploy to production.\n"), "{shown}");
    /// assert!(shown.contains("line 9 is not a line of the plan (lines 1 to 4)"), "{shown}");
    /// assert!(shown.contains("comments go with a rejection"), "{shown}");
    /// # Ok(()) }
    /// ```
    pub fn commentable(self, plan_text: &'a str) -> Self {
        self.with_plan(|plan| plan.commentable = Some(plan_text))
    }

    /// Adds `m MODEL` to a plan's question: the approval typed next (`y`, a target's number or
    /// mode id, also of an edit made after `m`) names `MODEL` for the next mode ([`Decision::model`]; whether
    /// the host can build it is the session's check, which refuses it and changes nothing); `m`
    /// alone goes back to the session's model. Nothing is added under a tool call.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_controller::ConfigError> {
    /// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\n", "m.toml")?;
    /// let (targets, style) = ([graph.mode(graph.default_mode_id())], Style::plain(80));
    /// let question = Question::new(&style, &targets, "53fa").choosing_model();
    /// assert!(question.text().contains("[m MODEL] approve with another model"));
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"m openai/gpt-4o-mini\ny\n"[..]);
    /// let answer = question.ask(&mut input, &mut out, std::future::pending::<()>()).await;
    /// let approved = Decision::approve().model("openai/gpt-4o-mini").with_sha256("53fa");
    /// assert_eq!(answer, PromptAnswer::Decided(approved));
    /// # Ok(()) }
    /// ```
    pub fn choosing_model(self) -> Self {
        self.with_plan(|plan| plan.choosing_model = true)
    }

    /// With [`Question::choosing_model`]: the model an approval names until `m` changes it (a
    /// host's `--model-for-next`), so that `m` alone really goes back to the session's model.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_controller::ConfigError> {
    /// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\n", "m.toml")?;
    /// let (targets, style) = ([graph.mode(graph.default_mode_id())], Style::plain(80));
    /// let ask = |keys: &'static [u8]| {
    ///     let question = Question::new(&style, &targets, "53fa")
    ///         .choosing_model()
    ///         .starting_model(Some("cheap"));
    ///     async move {
    ///         let mut input = StdinLines::from_reader(keys);
    ///         question.ask(&mut input, &mut Vec::new(), std::future::pending::<()>()).await
    ///     }
    /// };
    /// let cheap = Decision::approve().model("cheap").with_sha256("53fa");
    /// assert_eq!(ask(b"y\n").await, PromptAnswer::Decided(cheap));
    /// // `m` alone: the session's model, whatever the host started with.
    /// let session_model = Decision::approve().with_sha256("53fa");
    /// assert_eq!(ask(b"m\ny\n").await, PromptAnswer::Decided(session_model));
    /// # Ok(()) }
    /// ```
    pub fn starting_model(self, model: Option<&'a str>) -> Self {
        self.with_plan(|plan| plan.starting_model = model)
    }

    /// With [`Question::choosing_model`]: checks each model typed with `m MODEL` when it is
    /// typed (a host passes its model chooser's check, such as
    /// [`crate::Session::check_model`]): a model `check` refuses is not kept, the prompt says
    /// why and asks again, so the approval typed next never fails on it (trial finding M4).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_controller::ConfigError> {
    /// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\n", "m.toml")?;
    /// let (targets, style) = ([graph.mode(graph.default_mode_id())], Style::plain(80));
    /// let check = |id: &str| if id.starts_with("openai/") { Ok(()) } else { Err("unknown model provider".to_owned()) };
    /// let question = Question::new(&style, &targets, "53fa").choosing_model().checking_model(&check);
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"m bogus\nm openai/gpt-4o-mini\ny\n"[..]);
    /// let answer = question.ask(&mut input, &mut out, std::future::pending::<()>()).await;
    /// let approved = Decision::approve().model("openai/gpt-4o-mini").with_sha256("53fa");
    /// assert_eq!(answer, PromptAnswer::Decided(approved));
    /// assert!(String::from_utf8_lossy(&out).contains("model bogus cannot be used: unknown model provider"));
    /// # Ok(()) }
    /// ```
    pub fn checking_model(self, check: &'a dyn Fn(&str) -> Result<(), String>) -> Self {
        self.with_plan(|plan| plan.model_check = Some(ModelCheck(check)))
    }

    /// Adds the key `p` (any case) to a plan's question: prints `rendered` (the plan rendered
    /// whole, as [`Style::render_plan`] gives it; for a revision shown as its diff,
    /// [`Style::render_diff`]) and asks again; every other answer reads as before.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::{PromptAnswer, Question, StdinLines, Style};
    /// use agent_controller::Decision;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), agent_controller::ConfigError> {
    /// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\n", "m.toml")?;
    /// let build = graph.mode(graph.default_mode_id());
    /// let mut out = Vec::new();
    /// let mut input = StdinLines::from_reader(&b"p\ny\n"[..]);
    /// let answer = Question::new(&Style::plain(80), &[build], "53fa")
    ///     .whole_plan("THE WHOLE PLAN")
    ///     .ask(&mut input, &mut out, std::future::pending::<()>())
    ///     .await;
    /// assert_eq!(answer, PromptAnswer::Decided(Decision::approve().with_sha256("53fa")));
    /// let shown = String::from_utf8_lossy(&out);
    /// assert!(shown.contains("[p] show the whole plan"), "{shown}");
    /// assert!(shown.contains("THE WHOLE PLAN"), "{shown}");
    /// # Ok(()) }
    /// ```
    pub fn whole_plan(self, rendered: &'a str) -> Self {
        self.with_plan(|plan| plan.whole_plan = Some(rendered))
    }

    /// Adds the key `e` (any case) to a plan's question: opens `plan_text` (the submitted plan
    /// as text, a `# title` line and the body: [`crate::tool::submit_plan::revision_text`]) in
    /// `editor`, then shows what the edit changed (a diff against the submitted plan) and asks
    /// about the edit: `y` (or a listed target's number or mode id) approves the edited text
    /// ([`Decision::with_plan`], still pinned to the SHA-256 of the plan shown), `e` edits it
    /// again, `d` discards the edit and asks about the submitted plan again. A rejection needs
    /// the edit discarded first, so typing `n` after editing loses nothing.
    ///
    /// An editor that cannot be started or fails, a file left empty or blank, or one no plan
    /// may be (over 1 MiB, not UTF-8), changes nothing: the prompt says why and asks again (an
    /// earlier edit is kept). An edit that leaves the text as it was is no edit. When the prompt
    /// is dismissed (end of input, `interrupt`) with an edit in hand, the edit is kept in a file
    /// whose path the prompt prints.
    pub fn editable(self, plan_text: &'a str, editor: &'a Editor) -> Self {
        self.with_plan(|plan| plan.editing = Some((plan_text, editor)))
    }

    /// The prompt's text: the question and its keys.
    pub fn text(&self) -> String {
        self.text_at(&Asking::Question)
    }

    fn text_at(&self, at: &Asking) -> String {
        match (&self.subject, at) {
            (Subject::ToolCall { .. }, Asking::Feedback) => {
                "Feedback for the model (the call is rejected with it; an empty line goes back):\n> "
                    .to_owned()
            }
            (
                Subject::ToolCall {
                    tool_name,
                    rule,
                    args,
                    ..
                },
                _,
            ) => tool_call::question_text(self.style, tool_name, rule.is_none(), args.is_some()),
            (Subject::Plan(plan), at) => plan.text(self.style, at.edit().is_some()),
        }
    }

    /// Asks until the person decides: writes the question to `out`, reads `input` by the
    /// subject's grammar ([`read_answer_among`] for a plan, with the keys this question adds;
    /// [`read_tool_answer`] for a tool call) and returns the decision pinned to the SHA-256 of
    /// what was shown ([`Decision::with_sha256`]). End of input and `interrupt` completing (the
    /// CLI passes `tokio::signal::ctrl_c()`) are [`PromptAnswer::EndOfInput`] and
    /// [`PromptAnswer::Interrupted`]: no decision.
    pub async fn ask<F>(
        &self,
        input: &mut StdinLines,
        out: &mut impl Write,
        interrupt: F,
    ) -> PromptAnswer
    where
        F: std::future::Future,
    {
        let mut interrupt = std::pin::pin!(interrupt);
        let mut at = Asking::Question;
        let mut held = Held::default();
        if let Subject::Plan(plan) = &self.subject
            && plan.choosing_model
        {
            held.model = plan.starting_model.map(str::to_owned);
        }
        loop {
            // A closed stderr must not stop the decision: it is still read from stdin.
            let _ = write!(out, "{}", self.text_at(&at));
            let _ = out.flush();
            let line = tokio::select! {
                line = input.next_line() => line,
                _ = &mut interrupt => {
                    let _ = writeln!(out);
                    keep_edit(at.edit(), out);
                    return PromptAnswer::Interrupted;
                }
            };
            let Some(line) = line else {
                let _ = writeln!(out);
                keep_edit(at.edit(), out);
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
            if let Some(hint) = typed_controls(&line) {
                let _ = writeln!(out, "{hint}");
                continue;
            }
            let answer = match &self.subject {
                Subject::Plan(plan) => plan.read(self.style, &line, &mut at, &mut held, out).await,
                Subject::ToolCall {
                    args_sha256,
                    rule,
                    args,
                    ..
                } => read_tool_line(&line, args_sha256, *rule, *args, &mut at, out),
            };
            if let Some(answer) = answer {
                return answer;
            }
        }
    }
}

/// Reads one line typed at a tool call's question (one `rule` made wait, if any; `args` printed
/// whole at `v`, when given); `None` asks again.
fn read_tool_line(
    line: &str,
    args_sha256: &str,
    rule: Option<&crate::rules::RuleRecord>,
    args: Option<&serde_json::Value>,
    at: &mut Asking,
    out: &mut impl Write,
) -> Option<PromptAnswer> {
    if matches!(at, Asking::Feedback) {
        *at = Asking::Question;
        let feedback = line.trim();
        return (!feedback.is_empty()).then(|| {
            PromptAnswer::Decided(Decision::reject_with(feedback).with_sha256(args_sha256))
        });
    }
    let decision = match read_tool_answer(line) {
        ToolAnswer::Blank => return None,
        ToolAnswer::Approve => Decision::approve(),
        answer @ (ToolAnswer::AlwaysAllow | ToolAnswer::AlwaysAllowFor(_)) => match rule {
            // The library refuses an allowance here: say why and ask again.
            Some(rule) => {
                let _ = writeln!(
                    out,
                    "`a` is not offered here: {} ({}) asks about each call it matches, and always allowing the tool does not cover them. Answer y, n, f or q.",
                    neutralize_line(&rule.owner()),
                    neutralize_line(&rule.rule)
                );
                return None;
            }
            None => match answer {
                ToolAnswer::AlwaysAllowFor(scope) => Decision::approve().scope(scope),
                _ => Decision::approve().always_allow(),
            },
        },
        ToolAnswer::Reject => Decision::reject(),
        ToolAnswer::Feedback(text) => Decision::reject_with(text),
        ToolAnswer::AskFeedback => {
            *at = Asking::Feedback;
            return None;
        }
        ToolAnswer::Leave => return Some(PromptAnswer::Left),
        ToolAnswer::View => {
            let _ = match args {
                Some(args) => writeln!(
                    out,
                    "every argument, whole:\n{}",
                    crate::display::arguments_whole(args)
                ),
                None => writeln!(out, "the arguments are shown above"),
            };
            return None;
        }
        ToolAnswer::Unclear(hint) => {
            let _ = writeln!(out, "{hint}");
            return None;
        }
    };
    Some(PromptAnswer::Decided(decision.with_sha256(args_sha256)))
}

impl PlanQuestion<'_> {
    /// The line about the allowances an approval ends, if any.
    fn allowances_line(&self) -> String {
        if self.allowances.is_empty() || self.targets.is_empty() {
            return String::new();
        }
        let tools: Vec<String> = self
            .allowances
            .iter()
            .map(|t| crate::display::neutralize_line(t).into_owned())
            .collect();
        let (them, calls) = if tools.len() == 1 {
            ("", "its calls")
        } else {
            ("s", "their calls")
        };
        format!(
            "Approving switches mode and ends the always-allow{them} of {}: {calls} ask again.\n",
            tools.join(", ")
        )
    }

    /// The question and its keys; `edited`: the question about an edit.
    fn text(&self, style: &Style, edited: bool) -> String {
        let mut extra = String::new();
        if !edited && self.whole_plan.is_some() {
            extra.push_str("  [p] show the whole plan");
        }
        if !edited && self.editing.is_some() {
            extra.push_str("  [e] edit the plan");
        }
        if !edited && self.choosing_model {
            extra.push_str("  [m MODEL] approve with another model");
        }
        if !edited && self.commentable.is_some() {
            extra.push_str("  [c LINE TEXT] comment on a line (c numbers them)");
        }
        if !edited
            && self
                .commentable
                .is_some_and(|text| crate::machine::tasks::plan_steps(text).numbers.len() > 1)
        {
            extra.push_str("  [y 1-3,5] approve only those steps");
        }
        if !edited && !self.switchable.is_empty() {
            let ids: Vec<&str> = self.switchable.iter().map(|m| m.id()).collect();
            extra.push_str(&format!(
                "  [s MODE] switch to {}, not approving",
                or_list(&ids)
            ));
        }
        format!(
            "{}{}",
            self.allowances_line(),
            question_text(style, self.targets, edited, &extra)
        )
    }

    /// Reads one line typed at the plan's question; `None` asks again.
    async fn read(
        &self,
        style: &Style,
        line: &str,
        at: &mut Asking,
        held: &mut Held,
        out: &mut impl Write,
    ) -> Option<PromptAnswer> {
        let comments = &mut held.comments;
        // Chosen before an edit, the model goes with the approval of the edit too.
        if self.choosing_model
            && at.edit().is_none()
            && let Some(said) = read_model(line, &mut held.model, self.model_check)
        {
            let _ = writeln!(out, "{said}");
            return None;
        }
        let ids: Vec<&str> = self.targets.iter().map(|t| t.id()).collect();
        let key = line.trim().to_lowercase();
        let edit = at.edit().map(str::to_owned);
        if let Some(text) = self.commentable
            && let Some(said) = read_comment(line, text, comments)
        {
            let _ = writeln!(out, "{said}");
            return None;
        }
        match (key.as_str(), &edit) {
            ("p", None) if self.whole_plan.is_some() => {
                let _ = writeln!(out, "{}", self.whole_plan.unwrap_or_default());
                return None;
            }
            ("e", _) if self.editing.is_some() => {
                *at = match self.edit(style, edit, out).await {
                    Some(text) => Asking::Edited(text),
                    None => Asking::Question,
                };
                return None;
            }
            ("d", Some(_)) => {
                *at = Asking::Question;
                let _ = writeln!(out, "the edit is discarded");
                return None;
            }
            ("d", None) if !comments.is_empty() => {
                comments.clear();
                let _ = writeln!(out, "your comments are dropped");
                return None;
            }
            _ => {}
        }
        if edit.is_none() {
            match read_switch(line, self.switchable) {
                Some(Ok(mode)) => return Some(PromptAnswer::Switch(mode)),
                Some(Err(hint)) => {
                    let _ = writeln!(out, "{hint}");
                    return None;
                }
                None => {}
            }
        }
        let answer = read_answer_among(line, &ids);
        if !comments.is_empty()
            && matches!(
                answer,
                Answer::Approve | Answer::ApproveTo(_) | Answer::ApproveSteps(_)
            )
        {
            let _ = writeln!(
                out,
                "you hold {} comment(s): comments go with a rejection, so type n (or feedback) to reject with them, or d to drop them and answer again",
                comments.len()
            );
            return None;
        }
        let decision = match (answer, &edit) {
            (Answer::Blank, _) => return None,
            (Answer::Approve, Some(text)) => Decision::approve().with_plan(text),
            (Answer::ApproveTo(at), Some(text)) => Decision::approve().to(ids[at]).with_plan(text),
            (_, Some(_)) => {
                let _ = writeln!(out, "{}", edited_hint(line.trim(), ids.len()));
                return None;
            }
            (Answer::Approve, None) => Decision::approve(),
            (Answer::ApproveTo(at), None) => Decision::approve().to(ids[at]),
            (Answer::ApproveSteps(steps), None) => {
                // Checked against the plan shown, as the session will: a step it lacks asks
                // again instead of failing the decision.
                if let Some(text) = self.commentable
                    && let Err(why) = crate::machine::steps::choose(text, &steps)
                {
                    let _ = writeln!(out, "the steps cannot be approved: {why}");
                    return None;
                }
                Decision::approve().steps(steps)
            }
            (Answer::Reject, None) => Decision::reject(),
            (Answer::Feedback(text), None) => Decision::reject_with(text),
            (Answer::Unclear(hint), None) => {
                let _ = writeln!(out, "{hint}");
                return None;
            }
        };
        let decision = comments
            .drain(..)
            .fold(decision, |d, (line, text)| d.comment(line, text));
        let decision = match (decision.action, held.model.take()) {
            (crate::run::DecisionAction::Approved, Some(model)) => decision.model(model),
            _ => decision,
        };
        Some(PromptAnswer::Decided(
            decision.with_sha256(self.plan_sha256),
        ))
    }

    /// Runs the editor on the current edit (else the submitted plan) and shows what changed;
    /// returns the edit to ask about next: the new one, or on failure the one before.
    async fn edit(
        &self,
        style: &Style,
        before: Option<String>,
        out: &mut impl Write,
    ) -> Option<String> {
        let (submitted, editor) = self.editing?;
        let start = before.clone().unwrap_or_else(|| submitted.to_owned());
        let editor = editor.clone();
        let _ = writeln!(
            out,
            "(editing the plan with `{}`)",
            neutralize_line(editor.command())
        );
        let _ = out.flush();
        let edited = tokio::task::spawn_blocking(move || editor.edit(&start))
            .await
            .unwrap_or_else(|e| Err(EditorError::Lost(e.to_string())));
        match edited {
            Err(error) => {
                let kept = if before.is_some() {
                    "your earlier edit is kept"
                } else {
                    "nothing changed"
                };
                let _ = writeln!(out, "{}: {kept}", neutralize_line(&error.to_string()));
                before
            }
            Ok(text) if text == submitted => {
                let _ = writeln!(
                    out,
                    "the edited plan is the submitted plan: there is no edit to approve"
                );
                None
            }
            Ok(text) => {
                let _ = writeln!(out, "{}", self.edit_shown(style, submitted, &text));
                Some(text)
            }
        }
    }

    /// What an edit changed: its diff against the submitted plan, or (without the `diff`
    /// feature) the edited plan rendered whole.
    fn edit_shown(&self, style: &Style, submitted: &str, edited: &str) -> String {
        let short = self.plan_sha256.get(..12).unwrap_or(self.plan_sha256);
        match plan_diff(submitted, edited, "submitted plan", "edited plan") {
            Some(diff) => format!(
                "your edit, changes against the submitted plan (sha256 {}...):\n{}",
                neutralize_line(short),
                style.render_diff(&diff)
            ),
            None => {
                let (title, body) = parse_plan(edited);
                format!("your edit:\n{}", style.render_plan(title, body))
            }
        }
    }
}

/// Reads `s MODE` / `switch MODE` (the key any case, the mode id exactly) against the modes a
/// switch may go to: `Some(Ok(id))` to switch, `Some(Err(hint))` to ask again (the key alone,
/// or one word that is not a listed mode), `None` for any other line (`switch` followed by a
/// sentence is feedback). Nothing is a switch when `modes` is empty.
fn read_switch(line: &str, modes: &[&Mode]) -> Option<Result<String, String>> {
    if modes.is_empty() {
        return None;
    }
    let mut words = line.split_whitespace();
    let key = words.next()?.to_lowercase();
    if key != "s" && key != "switch" {
        return None;
    }
    let ids: Vec<&str> = modes.iter().map(|m| m.id()).collect();
    let (mode, rest) = (words.next(), words.next());
    match (mode, rest) {
        (Some(mode), None) if ids.contains(&mode) => Some(Ok(mode.to_owned())),
        (Some(mode), None) => Some(Err(format!(
            "`{}` is not a mode to switch to{}: type s and one of {} (the plan is then not approved), or answer the plan",
            neutralize_line(mode),
            crate::hint::hint(mode, ids.iter().copied(), "mode ids")
                .map(|hint| format!(" ({hint})"))
                .unwrap_or_default(),
            ids.join(", ")
        ))),
        (None, _) => Some(Err(format!(
            "switch to which mode? type s and one of {} (the plan is then not approved)",
            ids.join(", ")
        ))),
        (Some(_), Some(_)) => None,
    }
}

/// Reads `c` / `c LINE TEXT` against the plan's shown text `plan_text`: `None` for any other
/// line; else what to print, having kept a comment in `comments` when it names a line of the
/// plan (from 1) and has a text. `c` alone numbers the plan's lines.
fn read_comment(line: &str, plan_text: &str, comments: &mut Vec<(u64, String)>) -> Option<String> {
    let trimmed = line.trim();
    let (key, rest) = trimmed
        .split_once(char::is_whitespace)
        .unwrap_or((trimmed, ""));
    if !key.eq_ignore_ascii_case("c") {
        return None;
    }
    let lines: Vec<&str> = plan_text.lines().collect();
    if rest.trim().is_empty() {
        let numbered: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(at, l)| format!("{:>4}  {}", at + 1, neutralize_line(l)))
            .collect();
        return Some(format!(
            "{}\n(type c LINE TEXT to comment on a line; n or feedback then rejects with your comments)",
            numbered.join("\n")
        ));
    }
    let rest = rest.trim_start();
    let (number, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let Ok(n) = number.parse::<u64>() else {
        return Some(format!(
            "`{}` is not a line number: type c LINE TEXT (c alone numbers the lines)",
            neutralize_line(number)
        ));
    };
    let Some(quoted) = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|at| lines.get(at))
    else {
        return Some(format!(
            "line {n} is not a line of the plan (lines 1 to {}): nothing is kept",
            lines.len()
        ));
    };
    let text = text.trim();
    if text.is_empty() {
        return Some(format!(
            "the comment on line {n} has no text: type c {n} TEXT"
        ));
    }
    comments.push((n, text.to_owned()));
    Some(format!(
        "comment {} on line {n} ({}): {}\n(n or feedback rejects with your comments; d drops them)",
        comments.len(),
        neutralize_line_within(quoted, 80),
        neutralize_line(text)
    ))
}

/// Reads `m` / `m MODEL`: `None` for any other line; else what to print, having set (or, for
/// `m` alone, cleared) the model the next approval names.
fn read_model(
    line: &str,
    model: &mut Option<String>,
    check: Option<ModelCheck<'_>>,
) -> Option<String> {
    let mut words = line.split_whitespace();
    if !words.next()?.eq_ignore_ascii_case("m") {
        return None;
    }
    match (words.next(), words.next()) {
        (None, _) => {
            *model = None;
            Some("the next mode runs with the session's model".to_owned())
        }
        (Some(id), None) => {
            if let Some(Err(reason)) = check.map(|check| (check.0)(id)) {
                let keeps = match model {
                    Some(kept) => format!("model {}", neutralize_line(kept)),
                    None => "the session's model".to_owned(),
                };
                return Some(format!(
                    "model {} cannot be used: {}; the next mode keeps {keeps}: type m MODEL with another, or answer the plan",
                    neutralize_line(id),
                    neutralize_line(&reason)
                ));
            }
            *model = Some(id.to_owned());
            Some(format!(
                "the next mode runs with model {} once you approve",
                neutralize_line(id)
            ))
        }
        (Some(_), Some(_)) => Some("a model id is one word: type m MODEL".to_owned()),
    }
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The hint for an answer that is not one about an edited plan (`n`, feedback, a word).
fn edited_hint(text: &str, targets: usize) -> String {
    let choose = if targets > 1 {
        format!(", 1 to {targets} to approve it to that mode")
    } else {
        String::new()
    };
    format!(
        "`{}` is not an answer about the edited plan: type y to approve it{choose}, e to edit it again, or d to discard the edit (then n rejects the plan, or type feedback)",
        neutralize_line(text)
    )
}

/// Keeps an edit the prompt was dismissed with in a file of its own, and says where.
fn keep_edit(edit: Option<&str>, out: &mut impl Write) {
    let Some(text) = edit else {
        return;
    };
    let kept = tempfile::Builder::new()
        .prefix("agent-controller-edited-")
        .suffix(".md")
        .tempfile()
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.keep().map_err(|e| e.error)
        });
    let _ = match kept {
        Ok((_, path)) => writeln!(
            out,
            "your edited plan is kept in {}",
            neutralize_line(&path.display().to_string())
        ),
        Err(e) => writeln!(out, "your edited plan could not be kept: {e}"),
    };
}

/// A [`LanguageModel`] that shows a spinner on stderr while the wrapped model works.
///
/// Quiet when `enabled` is false (the CLI disables it with `--json` and when stdout is not a
/// terminal) and when stderr is not a terminal.
pub struct SpinnerModel<M> {
    inner: M,
    enabled: bool,
}

impl<M> std::fmt::Debug for SpinnerModel<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpinnerModel")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl<M: LanguageModel> SpinnerModel<M> {
    /// Wraps `inner`; the spinner shows only when `enabled`.
    pub fn new(inner: M, enabled: bool) -> Self {
        Self { inner, enabled }
    }

    /// Whether the spinner may show.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    fn spinner(&self, mode_id: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        // Cleared also when the call is dropped half-way (Ctrl-C), not only when it returns.
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
            .with_finish(ProgressFinish::AndClear);
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(format!("model working in mode `{mode_id}`..."));
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    }
}

#[async_trait]
impl<M: LanguageModel> LanguageModel for SpinnerModel<M> {
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let bar = self.spinner(request.mode_id);
        let reply = self.inner.generate(request).await;
        bar.finish_and_clear();
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Trial 5 L3: a line of numbers alone (`2`, `1,3`, `2 3`), natural right after a numbered
    /// question, is asked again with the reason at every plan prompt: with one target it is no
    /// choice, and it is never feedback that rejects the plan.
    #[test]
    fn a_line_of_numbers_alone_is_asked_again_never_feedback() {
        for targets in [&[][..], &["build"][..], &["build", "build-auto"][..]] {
            for line in [
                "2",
                " 7\n",
                "1,3",
                "2, 3",
                "1 3",
                "02",
                "9999999999999999999999",
            ] {
                match read_answer_among(line, targets) {
                    Answer::Unclear(why) => assert!(
                        why.contains("not a numbered question")
                            || (targets.len() > 1 && why.contains("not a listed choice")),
                        "{line:?} {targets:?}: {why}"
                    ),
                    Answer::ApproveTo(_) if targets.len() > 1 => {}
                    other => panic!("{line:?} {targets:?}: {other:?}"),
                }
            }
            // Numbers within a sentence are feedback.
            assert_eq!(
                read_answer_among("do step 2 first", targets),
                Answer::Feedback("do step 2 first".to_owned())
            );
        }
        assert_eq!(
            read_answer_among("2", &["build", "x"]),
            Answer::ApproveTo(1)
        );
    }
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A reader that counts its reads and answers each with the next chunk sent to it.
    struct Counted {
        reads: Arc<AtomicUsize>,
        chunks: std::sync::mpsc::Receiver<&'static [u8]>,
    }

    impl std::io::Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let chunk = self.chunks.recv().unwrap_or_default();
            buf[..chunk.len()].copy_from_slice(chunk);
            Ok(chunk.len())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn stdin_is_read_only_while_a_line_is_asked_for() {
        // An editor started after an answer must get the terminal's input, not this reader.
        let reads = Arc::new(AtomicUsize::new(0));
        let (send, chunks) = std::sync::mpsc::channel();
        let mut lines = StdinLines::from_reader(Counted {
            reads: reads.clone(),
            chunks,
        });
        send.send(&b"e\n"[..]).expect("send");
        assert_eq!(lines.next_line().await, Some(Ok("e\n".to_owned())));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(reads.load(Ordering::SeqCst), 1, "no read after the answer");
        send.send(&b"y\n"[..]).expect("send");
        assert_eq!(lines.next_line().await, Some(Ok("y\n".to_owned())));
        drop(send);
        assert_eq!(lines.next_line().await, None);
    }

    fn mode_with_color(color: &str) -> crate::ModeGraph {
        crate::config::parse(
            &format!("[[modes]]\nid = \"m\"\n[modes.metadata]\ncolor = \"{color}\"\n"),
            "m.toml",
        )
        .expect("valid")
    }

    #[test]
    fn colors_parse_from_hex_and_names_and_bad_ones_are_ignored() {
        let color = |c: &str| {
            let graph = mode_with_color(c);
            mode_color(graph.mode(graph.default_mode_id()))
        };
        assert_eq!(
            color("#3b82f6"),
            Some(Color::Rgb {
                r: 59,
                g: 130,
                b: 246
            })
        );
        assert_eq!(
            color("#fff"),
            Some(Color::Rgb {
                r: 255,
                g: 255,
                b: 255
            })
        );
        assert_eq!(color("dark_green"), Some(Color::DarkGreen));
        assert_eq!(color("#12345"), None);
        assert_eq!(color("#ééé"), None);
        assert_eq!(color("chartreuse-ish"), None);
    }
}
