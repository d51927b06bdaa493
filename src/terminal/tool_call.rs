//! The prompt for a tool call that waits for the user (a mode's `requireApproval`, issue 12):
//! the call shown safely (its tool, its arguments pretty-printed, neutralized and bounded, the
//! decision id and `argsSha256`) and the plan prompt's grammar extended with `a` (approve and
//! always allow the tool until the mode changes), `f` (reject with feedback typed on the next line),
//! `v` (print every argument whole, then ask again) and `q` (leave the call pending).

use crate::display::{arguments, neutralize_line};

/// What a bounded view of a call's arguments says shows them whole: the key `v`.
pub const VIEW_WHOLE: &str = "v shows every argument whole";
use crate::event::ToolCallPayload;

use super::{Answer, Style, read_answer};

/// How many lines of a tool call's pretty-printed argument values the prompt shows, shared among
/// the values ([`crate::display::arguments`]: every argument is shown, a long value is cut in
/// its middle and the cut counted; `v` at the prompt prints them whole, and `pending --json`
/// has them).
pub const TOOL_ARGS_MAX_LINES: usize = 60;

/// How many characters of a tool call's pretty-printed argument values the prompt shows, shared
/// among the values like [`TOOL_ARGS_MAX_LINES`].
pub const TOOL_ARGS_MAX_CHARS: usize = 4_000;

/// One typed line at a tool call's prompt, read by [`read_tool_answer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAnswer {
    /// `y` or `yes` (any case): run the call.
    Approve,
    /// `a` (any case): run the call and allow its tool ([`crate::Decision::always_allow`]) until the
    /// mode changes (a manual switch or an approved plan). The other calls waiting in the same
    /// reply are not approved with it: each is shown and asked about.
    AlwaysAllow,
    /// `a session` or `a workspace` (`a mode` is [`ToolAnswer::AlwaysAllow`]): run the call and
    /// allow its tool for that scope ([`crate::Decision::scope`]): for the rest of the session
    /// in this mode, or for every session in this workspace under this config in this mode.
    AlwaysAllowFor(crate::allowance::AllowanceScope),
    /// `n` or `no` (any case): do not run the call (the model is told "Not approved").
    Reject,
    /// `f` (any case): reject with feedback typed on the next line.
    AskFeedback,
    /// Any other text: reject, with the text (trimmed) as feedback, as at the plan prompt.
    Feedback(String),
    /// `q` (any case): decide nothing now; the call stays pending.
    Leave,
    /// `v` (any case): print every argument whole, then ask again.
    View,
    /// A single word that looks like a decision but is not a key (`ok`, `always`, `approve`):
    /// ask again; the text says why.
    Unclear(String),
    /// A blank line: ask again.
    Blank,
}

/// Reads one line typed at a tool call's prompt: the plan prompt's grammar ([`read_answer`]:
/// `y`/`yes`, `n`/`no`, a word that looks like a decision asks again, other text is feedback),
/// extended with the keys `a` (approve and always allow this tool until the mode changes; `a
/// session` or `a workspace` for that scope), `f` (feedback on the next
/// line), `v` (print every argument whole) and `q` (leave it pending), any case, surrounding
/// blanks ignored.
///
/// # Examples
/// ```
/// use agent_controller::terminal::{ToolAnswer, read_tool_answer};
/// assert_eq!(read_tool_answer(" Y\n"), ToolAnswer::Approve);
/// assert_eq!(read_tool_answer("a"), ToolAnswer::AlwaysAllow);
/// use agent_controller::allowance::AllowanceScope;
/// assert_eq!(read_tool_answer("a workspace"), ToolAnswer::AlwaysAllowFor(AllowanceScope::Workspace));
/// assert_eq!(read_tool_answer("no"), ToolAnswer::Reject);
/// assert_eq!(read_tool_answer("F"), ToolAnswer::AskFeedback);
/// assert_eq!(read_tool_answer("q"), ToolAnswer::Leave);
/// assert_eq!(read_tool_answer("V"), ToolAnswer::View);
/// assert!(matches!(read_tool_answer("always"), ToolAnswer::Unclear(_)));
/// assert!(matches!(read_tool_answer("ok"), ToolAnswer::Unclear(_)));
/// assert_eq!(read_tool_answer("write b.txt instead"), ToolAnswer::Feedback("write b.txt instead".to_owned()));
/// assert_eq!(read_tool_answer(""), ToolAnswer::Blank);
/// ```
pub fn read_tool_answer(line: &str) -> ToolAnswer {
    let text = line.trim();
    match text.to_lowercase().as_str() {
        "a" | "a mode" => return ToolAnswer::AlwaysAllow,
        "a session" => {
            return ToolAnswer::AlwaysAllowFor(crate::allowance::AllowanceScope::Session);
        }
        "a workspace" => {
            return ToolAnswer::AlwaysAllowFor(crate::allowance::AllowanceScope::Workspace);
        }
        "f" => return ToolAnswer::AskFeedback,
        "q" => return ToolAnswer::Leave,
        "v" => return ToolAnswer::View,
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
        // Steps go with a plan: at a tool call, `y 1` is feedback as before.
        Answer::ApproveSteps(_) => ToolAnswer::Feedback(line.trim().to_owned()),
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
const KEYS_HINT: &str = "type y to run the call, a to run it and always allow this tool until the mode changes (a plan approval included), n to reject it, f (or a sentence) to reject it with feedback, v to see every argument whole, or q to leave it pending";

/// A tool call as the prompt shows it: which call of how many, the tool, the decision id and the
/// `argsSha256` the answer is pinned to, a line `where it acts: ARG GIVEN -> PATH` for each path
/// argument that leads elsewhere than it reads ([`ToolCallPayload::where_paths_lead`]: a symlink
/// in the workspace), then every argument on its own line, shortest value
/// first, its value pretty-printed through [`crate::display::neutralize`], the values sharing
/// [`TOOL_ARGS_MAX_LINES`] lines and [`TOOL_ARGS_MAX_CHARS`] characters (a longer value shows its
/// start and its end, the cut counted; what is not shown is counted on a last line, which says
/// that `v` shows every argument whole): [`crate::display::arguments`].
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Style, render_tool_call};
/// use agent_controller::event::ToolCallPayload;
/// let call = ToolCallPayload {
///     decision_id: "decision_1".into(),
///     tool_name: "write_file".into(),
///     args: serde_json::json!({ "path": "a.txt", "content": "hi\u{1b}[2K" }),
///     args_sha256: "ab".repeat(32),
///     terms: Default::default(),
///     rule: None,
///     locations: Vec::new(),
///     drift: None,
///     subagent: None,
///     review: None,
/// };
/// let shown = render_tool_call(&Style::plain(80), &call, 1, 2);
/// assert!(shown.starts_with("tool call 1 of 2 waits for approval: write_file (decision decision_1, argsSha256 abab"), "{shown}");
/// assert!(shown.contains("\n  \"path\": \"a.txt\"\n  \"content\": "), "{shown}");
/// assert!(shown.contains("hi\\u001b[2K"), "{shown}");
/// // A path that leads elsewhere than it reads (a symlink in the workspace) says where.
/// let linked = ToolCallPayload {
///     locations: vec![agent_controller::rules::ResolvedLocation {
///         arg: "path".into(), given: "a.txt".into(), path: Some("src/main.rs".into()), doubt: None,
///     }],
///     ..call
/// };
/// let shown = render_tool_call(&Style::plain(80), &linked, 1, 1);
/// assert!(shown.contains("\nwhere it acts: path a.txt -> src/main.rs\n"), "{shown}");
/// // A subagent's call says which subagent made it.
/// let child = ToolCallPayload {
///     subagent: Some(Box::new(agent_controller::subagent::SubagentOrigin {
///         agent_type: "explore".into(), child_id: "s1.run_1.sub1_0".into(),
///         tool_call_id: "call_1".into(), decision_id: "decision_1".into(),
///     })),
///     ..linked
/// };
/// let shown = render_tool_call(&Style::plain(80), &child, 1, 1);
/// assert!(shown.contains("\nmade by subagent explore (child s1.run_1.sub1_0, started by call call_1)\n"), "{shown}");
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
    // The rule that asked, when one did (an "always allow" does not cover its calls:
    // `allowance_refusal`).
    let rule = call
        .rule
        .as_ref()
        .filter(|_| !call.may_always_allow())
        .map(|r| {
            format!(
                "asked by {}: {} (always allowing the tool does not cover it)\n",
                neutralize_line(&r.owner()),
                neutralize_line(&r.rule)
            )
        })
        .unwrap_or_default();
    // Where a path argument leads, when elsewhere than it reads (a symlink in the workspace,
    // `write_plan`'s plans directory): the approver sees the file the call acts on.
    let leads: String = call
        .where_paths_lead()
        .iter()
        .map(|line| format!("where it acts: {line}\n"))
        .collect();
    // Why it waits, when it writes outside the approved plan's files.
    let drift = call
        .drift
        .as_ref()
        .map(|why| format!("drift: {}\n", neutralize_line(why)))
        .unwrap_or_default();
    // What the mode's reviewer said, beside the call (`reviewerMay = "advise"`, or escalated).
    let review = call
        .review
        .as_ref()
        .map(|r| format!("{}\n", r.shown()))
        .unwrap_or_default();
    format!(
        "{which} waits for approval: {name} (decision {}, argsSha256 {})\n{}{rule}{leads}{drift}{review}{}",
        neutralize_line(&call.decision_id),
        neutralize_line(&call.args_sha256),
        made_by(call.subagent.as_deref()),
        arguments(
            &call.args,
            TOOL_ARGS_MAX_LINES,
            TOOL_ARGS_MAX_CHARS,
            VIEW_WHOLE
        )
    )
}

/// The line that says which subagent made a call that waits in its parent's session
/// (`made by subagent explore (child ..., started by call ...)`); none for the session's own.
pub(crate) fn made_by(subagent: Option<&crate::subagent::SubagentOrigin>) -> String {
    subagent.map_or(String::new(), |s| {
        format!(
            "made by subagent {} (child {}, started by call {})\n",
            neutralize_line(&s.agent_type),
            neutralize_line(&s.child_id),
            neutralize_line(&s.tool_call_id),
        )
    })
}

/// The question under a tool call and its keys.
///
/// # Examples
/// ```
/// use agent_controller::terminal::{Style, tool_question_text};
/// let text = tool_question_text(&Style::plain(80), "write_file");
/// assert!(text.starts_with("Run this write_file call?\n[y]es run it  [a]lways allow write_file until the mode changes"), "{text}");
/// assert!(text.ends_with("> "));
/// ```
pub fn tool_question_text(style: &Style, tool_name: &str) -> String {
    question_text(style, tool_name, true, true)
}

/// The question under a tool call; `allowance`: whether `a` (always allow) is offered (not
/// under a call an `ask` rule made wait); `view`: whether `v` (every argument whole) is.
pub(crate) fn question_text(style: &Style, tool_name: &str, allowance: bool, view: bool) -> String {
    let key = |k: &str| {
        if style.color {
            use termimad::crossterm::style::Stylize;
            k.bold().to_string()
        } else {
            k.to_owned()
        }
    };
    let name = neutralize_line(tool_name);
    let always = if allowance {
        format!(
            "  [{}]lways allow {name} until the mode changes (`a session`, `a workspace` for longer)",
            key("a")
        )
    } else {
        String::new()
    };
    let view = if view {
        format!("  [{}]iew every argument whole", key("v"))
    } else {
        String::new()
    };
    format!(
        "Run this {name} call?\n[{}]es run it{always}  [{}]o reject  [{}]eedback reject with a note{view}  [{}] leave it pending  or type feedback to reject with it\n> ",
        key("y"),
        key("n"),
        key("f"),
        key("q"),
    )
}
