//! The terminal front end the CLI uses, as a library module so other hosts can reuse it (cargo
//! feature `terminal`, on by default): the plan rendered as markdown, the mode shown in its
//! `metadata.color`, a spinner while the model works, and the approve / reject / feedback prompt
//! ([`read_answer`] is its grammar) where Ctrl-C or end of input are no decision.
//!
//! Markdown goes through [`termimad`] (headings, ordered and bulleted lists, code blocks, inline
//! styles, tables); the spinner is [`indicatif`]'s. Everything is written to a writer the caller
//! gives (stderr in the CLI), so stdout stays free for events and results.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use async_trait::async_trait;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use termimad::MadSkin;
use termimad::crossterm::style::{Color, Stylize};
use tokio::sync::mpsc;

use crate::display::{neutralize, neutralize_line};
use crate::mode::Mode;
use crate::model::{LanguageModel, ModelError, ModelRequest, ModelResponse};
use crate::run::Decision;

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

    fn skin(&self) -> MadSkin {
        if !self.color {
            return MadSkin::no_style();
        }
        let mut skin = MadSkin::default();
        skin.set_headers_fg(Color::Cyan);
        skin.bold.set_fg(Color::Yellow);
        skin
    }

    /// A plan as the user should read it: the title as a heading, then the body, rendered as
    /// markdown (headings, lists, code blocks, emphasis) and wrapped to the width.
    ///
    /// Nothing of the text is hidden: control characters, escape sequences, bidirectional
    /// overrides and zero-width characters are shown as escapes ([`neutralize`]), and HTML
    /// comments and link targets are printed as written, not swallowed. Every letter and digit
    /// of the plan must appear in the rendering, in order (a code fence's one-word language tag
    /// is markup); where the markdown would swallow any (words after a fence, a fence of a
    /// million backticks), or the plan is larger than 64 KiB or has a line with more than 64 `|`
    /// (termimad lays tables out in time that grows with the square of the columns), the plan is
    /// shown as its plain text under a note saying so.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::terminal::Style;
    /// let shown = Style::plain(60).render_plan("Add dark mode", "## Steps\n1. Add a **toggle**.\n2. Test it.\n\n```sh\ncargo test\n```\n");
    /// assert!(shown.contains("Add dark mode"));
    /// assert!(shown.contains("1. Add a toggle."), "{shown}");
    /// assert!(shown.contains("cargo test"));
    /// assert!(!shown.contains("**"), "emphasis markers are rendered, not shown: {shown}");
    /// let shown = Style::plain(60).render_plan("T", "1. Run it as root\n\u{1b}[2K\r2. Test it\n");
    /// assert!(shown.contains("1. Run it as root\n\\u{1b}[2K\\u{d}2. Test it"), "{shown}");
    /// ```
    pub fn render_plan(&self, title: &str, plan: &str) -> String {
        let title = if title.trim().is_empty() {
            "(untitled plan)"
        } else {
            title.trim()
        };
        let source = format!("# {}\n\n{}", neutralize_line(title), neutralize(plan));
        if source.len() <= MARKDOWN_MAX_BYTES
            && source
                .lines()
                .all(|l| l.matches('|').count() <= MARKDOWN_MAX_CELLS)
        {
            let shown = self.skin().text(&source, Some(self.width)).to_string();
            if shows_all_text(&source, &shown) {
                return shown;
            }
        }
        format!("{PLAIN_NOTE}\n\n{source}")
    }

    /// A unified diff (a plan revision's [`crate::SuspendPayload::diff`]) as the user should
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
        for line in diff.lines() {
            let shown = neutralize_line(line);
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

/// Plans larger than this are shown as plain text, not rendered as markdown.
const MARKDOWN_MAX_BYTES: usize = 64 * 1024;
/// Plans with a line holding more `|` than this (a very wide table) are shown as plain text.
const MARKDOWN_MAX_CELLS: usize = 64;
/// The line above a plan shown as plain text.
const PLAIN_NOTE: &str = "(shown as plain text: rendered as markdown, part of it would not show)";

/// Whether `shown` (the rendering, with the skin's colours) holds every letter and digit of
/// `source`, the markdown given to the renderer, in order: rendering may drop markup and add
/// frames, but never text. The one-word language tag of an opening code fence is markup.
fn shows_all_text(source: &str, shown: &str) -> bool {
    let shown = strip_sgr(shown);
    let mut rendered = shown.chars().filter(|c| c.is_alphanumeric());
    let mut in_fence = false;
    source.lines().all(|line| {
        let text = match fence_info(line) {
            Some(info) => {
                let language_tag = !in_fence && !info.contains(char::is_whitespace);
                in_fence = !in_fence;
                if language_tag { "" } else { line }
            }
            None => line,
        };
        text.chars()
            .filter(|c| c.is_alphanumeric())
            .all(|c| rendered.any(|r| r == c))
    })
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

/// `text` without the SGR escape sequences (`ESC [ digits ; m`) the skin adds for colours; the
/// plan's own escapes were neutralised before rendering.
fn strip_sgr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\u{1b}') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        rest = match tail.find('m') {
            Some(end) => &tail[end + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
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
}

impl PromptAnswer {
    /// What to tell the person about an answer that was not a typed decision.
    pub fn notice(&self, mode_id: &str) -> Option<String> {
        let what = match self {
            PromptAnswer::Decided(_) => return None,
            PromptAnswer::EndOfInput => "end of input",
            PromptAnswer::Interrupted => "interrupted",
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

/// Reads one line typed at the approval prompt. The grammar (README, `run --help`):
/// `y`/`yes` approve and `n`/`no` reject (any case, surrounding blanks ignored); a single word
/// that looks like a decision ([`Answer::Unclear`]: `approve`, `approved`, `ok`, `okay`,
/// `accept`, `reject`, `deny`, `lgtm`, `sure`, `y.`, ...) asks again with a hint; a blank line
/// asks again; any other text rejects with that text as feedback.
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Answer, read_answer};
/// assert_eq!(read_answer(" Yes\n"), Answer::Approve);
/// assert_eq!(read_answer("n"), Answer::Reject);
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
/// (exactly, case-sensitive) approves to it ([`Answer::ApproveTo`]); any other number asks
/// again with a hint. With fewer than two targets it is [`read_answer`].
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Answer, read_answer_among};
/// let targets = ["build", "build-auto"];
/// assert_eq!(read_answer_among("y", &targets), Answer::Approve);
/// assert_eq!(read_answer_among(" 2\n", &targets), Answer::ApproveTo(1));
/// assert_eq!(read_answer_among("build-auto", &targets), Answer::ApproveTo(1));
/// assert!(matches!(read_answer_among("3", &targets), Answer::Unclear(_)));
/// assert_eq!(read_answer_among("Build-auto", &targets), Answer::Feedback("Build-auto".to_owned()));
/// // One target: numbers and ids are not choices.
/// assert!(matches!(read_answer_among("1", &["build"]), Answer::Unclear(_)));
/// ```
pub fn read_answer_among(line: &str, targets: &[&str]) -> Answer {
    let text = line.trim();
    // The keys come first: a mode named `n` cannot turn a rejection into an approval.
    match text.to_lowercase().as_str() {
        "" => return Answer::Blank,
        "y" | "yes" => return Answer::Approve,
        "n" | "no" => return Answer::Reject,
        _ => {}
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
    let word = text
        .trim_matches(|c: char| matches!(c, '.' | '!' | '?' | ',' | ';' | ':' | '"' | '\''))
        .to_lowercase();
    let single = !text.chars().any(char::is_whitespace);
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

/// Lines from stdin, read on a background thread so the prompt can also wait for Ctrl-C.
///
/// A blocking read cannot be cancelled, so the thread lives until stdin ends or the process
/// exits; it is not joined.
#[derive(Debug)]
pub struct StdinLines {
    lines: mpsc::UnboundedReceiver<String>,
}

impl StdinLines {
    /// Starts the reader thread.
    pub fn spawn() -> Self {
        Self::from_reader(std::io::stdin())
    }

    /// Reads lines from any reader (tests, other hosts) on a background thread.
    pub fn from_reader<R: std::io::Read + Send + 'static>(reader: R) -> Self {
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(reader);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Self { lines }
    }

    /// The next line, or `None` at end of input.
    pub async fn next_line(&mut self) -> Option<String> {
        self.lines.recv().await
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
    let [first, _, ..] = targets else {
        return prompt_text_one(style, targets.first().copied());
    };
    let mut choices = String::new();
    for (n, target) in targets.iter().enumerate() {
        let plain = if n == 0 { "  (y)" } else { "" };
        choices.push_str(&format!(
            "  {}  {}{plain}\n",
            n + 1,
            style.mode_label(target)
        ));
    }
    let range = format!("1-{}", targets.len());
    let keys = if style.color {
        format!(
            "[{}]es approve to {}  [{}] approve to that mode  [{}]o reject  or type feedback to reject with it",
            "y".bold(),
            first.id(),
            range.as_str().bold(),
            "n".bold()
        )
    } else {
        format!(
            "[y]es approve to {}  [{range}] approve to that mode  [n]o reject  or type feedback to reject with it",
            first.id()
        )
    };
    format!("Approve this plan and switch to one of:\n{choices}{keys}\n> ")
}

fn prompt_text_one(style: &Style, target: Option<&Mode>) -> String {
    let Some(target) = target else {
        return "Approve this plan?\n[y]es approve  [n]o reject  or type feedback to reject with it\n> ".to_owned();
    };
    let keys = if style.color {
        format!(
            "[{}]es approve  [{}]o reject  or type feedback to reject with it",
            "y".bold(),
            "n".bold()
        )
    } else {
        "[y]es approve  [n]o reject  or type feedback to reject with it".to_owned()
    };
    format!(
        "Approve this plan and switch to {}?\n{keys}\n> ",
        style.mode_label(target)
    )
}

/// Asks until the person decides: writes [`prompt_text`] to `out`, reads `input` by the grammar
/// of [`read_answer`], and returns on `y`/`yes`, `n`/`no`, other text (feedback), end of input,
/// or `interrupt` completing (the CLI passes `tokio::signal::ctrl_c()`). A blank line asks again;
/// a single word that looks like a decision (`ok`, `approve`) asks again with a hint.
///
/// Every decision is pinned to `plan_sha256`, the hash of the plan shown with the prompt
/// ([`Decision::with_sha256`]): if the pending plan changed meanwhile, resuming with it is
/// refused and changes nothing.
///
/// # Examples
/// ```
/// use agent_controller::terminal::{PromptAnswer, StdinLines, Style, ask};
/// use agent_controller::Decision;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), agent_controller::ConfigError> {
/// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\n", "m.toml")?;
/// let build = graph.mode(graph.default_mode_id());
/// let mut out = Vec::new();
/// let mut input = StdinLines::from_reader(&b"\nok\nadd tests\n"[..]);
/// let answer = ask(&Style::plain(80), build, "53fa", &mut input, &mut out, std::future::pending::<()>()).await;
/// assert_eq!(answer, PromptAnswer::Decided(Decision::reject_with("add tests").with_sha256("53fa")));
/// assert!(String::from_utf8_lossy(&out).contains("`ok` is not an answer here"));
/// let mut input = StdinLines::from_reader(&b""[..]);
/// let answer = ask(&Style::plain(80), build, "53fa", &mut input, &mut out, std::future::pending::<()>()).await;
/// assert_eq!(answer, PromptAnswer::EndOfInput);
/// # Ok(()) }
/// ```
pub async fn ask<F>(
    style: &Style,
    target: &Mode,
    plan_sha256: &str,
    input: &mut StdinLines,
    out: &mut impl Write,
    interrupt: F,
) -> PromptAnswer
where
    F: std::future::Future,
{
    ask_among(style, &[target], plan_sha256, input, out, interrupt).await
}

/// [`ask`] for a plan whose approval may hand over to any of `targets` (the plain approval's
/// first, as [`crate::SuspendPayload::target_mode_ids`] lists them): the prompt lists them
/// ([`prompt_text_among`]) and reads answers by [`read_answer_among`]; choosing a target that is
/// not the first gives an approval with [`Decision::to`].
///
/// # Examples
/// ```
/// use agent_controller::terminal::{PromptAnswer, StdinLines, Style, ask_among};
/// use agent_controller::Decision;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), agent_controller::ConfigError> {
/// let graph = agent_controller::config::parse(
///     "[[modes]]\nid = \"plan\"\ntransitionsTo = [\"build\", \"build-auto\"]\n[[modes]]\nid = \"build\"\n[[modes]]\nid = \"build-auto\"\n",
///     "modes.toml",
/// )?;
/// let targets = [graph.mode(graph.get("build").unwrap()), graph.mode(graph.get("build-auto").unwrap())];
/// let mut out = Vec::new();
/// let mut input = StdinLines::from_reader(&b"7\n2\n"[..]);
/// let answer = ask_among(&Style::plain(80), &targets, "53fa", &mut input, &mut out, std::future::pending::<()>()).await;
/// assert_eq!(answer, PromptAnswer::Decided(Decision::approve().to("build-auto").with_sha256("53fa")));
/// assert!(String::from_utf8_lossy(&out).contains("`7` is not a listed choice"));
/// # Ok(()) }
/// ```
pub async fn ask_among<F>(
    style: &Style,
    targets: &[&Mode],
    plan_sha256: &str,
    input: &mut StdinLines,
    out: &mut impl Write,
    interrupt: F,
) -> PromptAnswer
where
    F: std::future::Future,
{
    ask_core(style, targets, plan_sha256, None, input, out, interrupt).await
}

/// [`ask_among`] under a plan revision shown as its diff ([`Style::render_diff`]): the prompt
/// adds the key `p` (any case), which prints `whole_plan` (the revision rendered whole, as
/// [`Style::render_plan`] gives it) and asks again; every other answer reads as in
/// [`ask_among`].
///
/// # Examples
/// ```
/// use agent_controller::terminal::{PromptAnswer, StdinLines, Style, ask_revision};
/// use agent_controller::Decision;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), agent_controller::ConfigError> {
/// let graph = agent_controller::config::parse("[[modes]]\nid = \"build\"\n", "m.toml")?;
/// let build = graph.mode(graph.default_mode_id());
/// let mut out = Vec::new();
/// let mut input = StdinLines::from_reader(&b"p\ny\n"[..]);
/// let answer = ask_revision(&Style::plain(80), &[build], "53fa", "THE WHOLE PLAN", &mut input, &mut out, std::future::pending::<()>()).await;
/// assert_eq!(answer, PromptAnswer::Decided(Decision::approve().with_sha256("53fa")));
/// let shown = String::from_utf8_lossy(&out);
/// assert!(shown.contains("[p] show the whole plan"), "{shown}");
/// assert!(shown.contains("THE WHOLE PLAN"), "{shown}");
/// # Ok(()) }
/// ```
pub async fn ask_revision<F>(
    style: &Style,
    targets: &[&Mode],
    plan_sha256: &str,
    whole_plan: &str,
    input: &mut StdinLines,
    out: &mut impl Write,
    interrupt: F,
) -> PromptAnswer
where
    F: std::future::Future,
{
    ask_core(
        style,
        targets,
        plan_sha256,
        Some(whole_plan),
        input,
        out,
        interrupt,
    )
    .await
}

async fn ask_core<F>(
    style: &Style,
    targets: &[&Mode],
    plan_sha256: &str,
    whole_plan: Option<&str>,
    input: &mut StdinLines,
    out: &mut impl Write,
    interrupt: F,
) -> PromptAnswer
where
    F: std::future::Future,
{
    let ids: Vec<&str> = targets.iter().map(|t| t.id()).collect();
    let mut interrupt = std::pin::pin!(interrupt);
    loop {
        // A closed stderr must not stop the decision: it is still read from stdin.
        let mut text = prompt_text_among(style, targets);
        if whole_plan.is_some() {
            text = text.replacen("\n> ", "  [p] show the whole plan\n> ", 1);
        }
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
        if let Some(plan) = whole_plan
            && line.trim().eq_ignore_ascii_case("p")
        {
            let _ = writeln!(out, "{plan}");
            continue;
        }
        let decision = match read_answer_among(&line, &ids) {
            Answer::Approve => Decision::approve(),
            Answer::ApproveTo(at) => Decision::approve().to(ids[at]),
            Answer::Reject => Decision::reject(),
            Answer::Feedback(text) => Decision::reject_with(text),
            Answer::Unclear(hint) => {
                let _ = writeln!(out, "{hint}");
                continue;
            }
            Answer::Blank => continue,
        };
        return PromptAnswer::Decided(decision.with_sha256(plan_sha256));
    }
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
