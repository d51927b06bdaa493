//! What the user reads is what the model wrote (issue 19, item 2): on every output (the plan on
//! a terminal and piped, `pending`, `pending --json`, the `decide` prompt, event lines) no
//! character of the model's text vanishes: markup stays visible with what it marks, every
//! invisible, zero-width, default-ignorable or unassigned character is a visible escape, and
//! the text shown, styling removed and escapes decoded, is the source character for character.
// Drives the binary.
#![cfg(feature = "cli")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use agent_controller::display::{decode_escapes, neutralize};
use agent_controller::terminal::Style;
use agent_controller::tool::submit_plan::capture_plan;
use proptest::prelude::*;
use serde_json::Value;

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/modes.toml");

fn bin() -> Command {
    let mut cmd = crate::common::agent_controller();
    cmd.env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn output(mut cmd: Command, stdin: &str) -> Output {
    let mut child = cmd.spawn().expect("spawn");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(stdin.as_bytes()).expect("write stdin");
    drop(pipe);
    child.wait_with_output().expect("wait")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

/// `shown` without the SGR sequences (`ESC [ params m`) a style adds, checking each is one of
/// the styles that only add emphasis: reset, bold, a foreground colour. Strikethrough (9), dim
/// (2), conceal (8), reverse (7) or blink would draw the text differently on each terminal.
fn strip_styling(shown: &str) -> String {
    let mut out = String::with_capacity(shown.len());
    let mut rest = shown;
    while let Some(at) = rest.find('\u{1b}') {
        out.push_str(&rest[..at]);
        let tail = rest[at + 1..]
            .strip_prefix('[')
            .unwrap_or_else(|| panic!("not an SGR sequence: {:?}", &rest[at..]));
        let end = tail.find('m').expect("an SGR sequence ends in m");
        let params: Vec<u32> = tail[..end]
            .split(';')
            .map(|p| p.parse().expect("a number"))
            .collect();
        let allowed = match params.as_slice() {
            [0 | 1 | 22 | 39] => true,
            [c] => (30..=37).contains(c) || (90..=97).contains(c),
            [38, 5, _] | [38, 2, _, _, _] => true,
            _ => false,
        };
        assert!(allowed, "a style that can hide text: {:?}", &tail[..end]);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Every character of `shown` is one a person sees as written: none is replaced when shown
/// alone.
fn all_visible(shown: &str) -> bool {
    shown.chars().all(|c| {
        let one = c.to_string();
        c == '\n' || c == '\t' || neutralize(&one) == one
    })
}

/// The plan as the renderer's source: its `# title` line, a blank line, its body.
fn source(title: &str, plan: &str) -> String {
    if title.is_empty() {
        format!("(untitled plan)\n\n{plan}")
    } else {
        format!("# {title}\n\n{plan}")
    }
}

#[test]
fn markup_and_what_it_marks_stay_visible_piped_and_on_a_terminal() {
    let plan = "## Steps\n1. Do ~~not~~ drop the production database.\n2. Compute a*b*c and 2 * 3 * 4.\n3. Keep **all** of `it` and __this__.\n\n```sh\ncargo test\n```\n";
    for style in [Style::plain(80), Style::colored(80)] {
        let shown = style.render_plan("Title", plan);
        assert!(!shown.contains("\u{1b}[9m"), "no strikethrough: {shown:?}");
        let shown = strip_styling(&shown);
        assert_eq!(shown, format!("# Title\n\n{plan}"));
        for visible in [
            "# Title\n",
            "1. Do ~~not~~ drop the production database.",
            "a*b*c",
            "2 * 3 * 4",
            "**all**",
            "`it`",
            "__this__",
            "```sh\ncargo test\n```",
        ] {
            assert!(shown.contains(visible), "`{visible}`: {shown}");
        }
    }
    assert_eq!(
        Style::plain(80).render_plan("", "1. Step"),
        "(untitled plan)\n\n1. Step"
    );
}

#[test]
fn invisible_characters_in_a_plan_are_escapes_on_the_screen() {
    let selectors = "\u{fe00}".repeat(44);
    let plan = format!(
        "1. Add tests{selectors}\n2. const {{ timeout,\u{3164}}} = req.query\n3. \u{115f}\u{e0100}\u{2065}\u{378}\n"
    );
    for style in [Style::plain(80), Style::colored(80)] {
        let shown = strip_styling(&style.render_plan("T\u{fe0f}", &plan));
        assert!(all_visible(&shown), "{shown:?}");
        assert!(
            shown.contains(&format!("1. Add tests{}", "\\u{fe00}".repeat(44))),
            "{shown}"
        );
        assert!(
            shown.contains("const { timeout,\\u{3164}} = req.query"),
            "{shown}"
        );
        assert!(
            shown.contains("3. \\u{115f}\\u{e0100}\\u{2065}\\u{378}"),
            "{shown}"
        );
        assert!(shown.starts_with("# T\\u{fe0f}\n"), "{shown}");
        assert_eq!(decode_escapes(&shown), source("T\u{fe0f}", &plan));
    }
}

/// Pieces of plan text: markdown markup, invisible and escape-like text, and any character.
fn piece() -> impl Strategy<Value = String> {
    let markup = prop::sample::select(vec![
        "**",
        "*",
        "__",
        "_",
        "~~",
        "~",
        "`",
        "```",
        "```sh",
        "~~~",
        "# ",
        "## ",
        "###### ",
        "#",
        "- ",
        "* ",
        "+ ",
        "1. ",
        "> ",
        "|",
        "| a | b |\n|---|---|\n",
        "---\n",
        "<!-- x -->",
        "<b>",
        "[a](https://x.example)",
        "![i](y.png)",
        "\\",
        "\\u{41}",
        "\\u{",
        "&amp;",
        "    ",
        "\t",
        "\n",
        "\n\n",
        " ",
        "2 * 3",
        "a*b*c",
        "word",
    ])
    .prop_map(str::to_owned);
    let invisible = prop::sample::select(vec![
        '\u{3164}',
        '\u{115f}',
        '\u{1160}',
        '\u{ffa0}',
        '\u{fe0f}',
        '\u{fe00}',
        '\u{e0100}',
        '\u{200b}',
        '\u{200d}',
        '\u{2060}',
        '\u{feff}',
        '\u{ad}',
        '\u{34f}',
        '\u{180e}',
        '\u{202e}',
        '\u{2066}',
        '\u{61c}',
        '\u{1b}',
        '\r',
        '\u{7}',
        '\u{9b}',
        '\u{2028}',
        '\u{e0041}',
        '\u{2065}',
        '\u{378}',
        '\u{fdd0}',
        '\u{10ffff}',
        '\u{1d173}',
        '\u{a0}',
    ])
    .prop_map(String::from);
    prop_oneof![
        3 => markup,
        2 => invisible,
        1 => any::<char>().prop_map(String::from),
    ]
}

fn text_of(pieces: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), pieces).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The plan shown, piped and on a terminal, styling removed and escapes decoded, is its
    /// source character for character, and every character left is visible.
    #[test]
    fn the_rendered_plan_maps_back_to_its_source(
        title in text_of(0..6),
        plan in text_of(0..40),
    ) {
        for style in [Style::plain(80), Style::colored(80)] {
            let shown = strip_styling(&style.render_plan(&title, &plan));
            prop_assert!(all_visible(&shown), "{:?}", shown);
            prop_assert_eq!(decode_escapes(&shown), source(&title, &plan));
        }
    }
}

/// The diff of a revision, piped and on a terminal: `str::lines` took a carriage return before
/// each line feed away (a captured plan keeps one from `\r\r\n`).
#[test]
fn a_diff_shows_every_carriage_return() {
    let diff = "--- revision 1\n+++ revision 2\n@@ -1 +1 @@\n-a\r\n+b\r\n";
    for style in [Style::plain(80), Style::colored(80)] {
        let shown = strip_styling(&style.render_diff(diff));
        assert!(shown.contains("-a\\u{d}\n+b\\u{d}"), "{shown:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A diff shown, styling removed and escapes decoded, is the diff (its last line feed
    /// aside), and every character left is visible.
    #[test]
    fn the_rendered_diff_maps_back_to_its_source(
        lines in prop::collection::vec(
            (prop::sample::select(vec!["+", "-", " ", "@@ ", "+++ ", "--- ", ""]), text_of(0..8))
                .prop_map(|(mark, text)| format!("{mark}{text}")),
            1..8,
        ),
    ) {
        let diff = format!("{}\n", lines.join("\n"));
        for style in [Style::plain(80), Style::colored(80)] {
            let shown = strip_styling(&style.render_diff(&diff));
            prop_assert!(all_visible(&shown), "{:?}", shown);
            prop_assert_eq!(decode_escapes(&shown), &diff[..diff.len() - 1]);
        }
    }
}

fn plan_run(ws: &Path, plan: &Path, store: &str) -> Command {
    let mut cmd = bin();
    cmd.args(["run", "--config", SHIPPED, "--workspace"])
        .arg(ws)
        .args([
            "--mode", "plan", "--store", store, "--detach", "--json", "--plan",
        ])
        .arg(plan)
        .arg("Add dark mode");
    cmd
}

/// A plan file submitted and left pending in a file store: the store spec and the session id.
fn detach(ws: &Path, plan_text: &str) -> (String, String) {
    let plan = ws.join("plan.md");
    std::fs::write(&plan, plan_text).expect("write plan");
    let store = ws.join("sessions").display().to_string();
    let out = output(plan_run(ws, &plan, &store), "");
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let first: Value =
        serde_json::from_str(text(&out.stdout).lines().next().expect("an event")).expect("JSON");
    let session = first["sessionId"].as_str().expect("session id").to_owned();
    (store, session)
}

fn pending(store: &str, json: bool) -> String {
    let mut cmd = bin();
    cmd.args(["pending", "--store", store]);
    if json {
        cmd.arg("--json");
    }
    let out = output(cmd, "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The `decide` prompt, answered with end of input (no decision): its stderr.
fn decide_prompt(ws: &Path, store: &str, session: &str) -> String {
    let mut cmd = bin();
    cmd.args([
        "decide",
        "--store",
        store,
        session,
        "--config",
        SHIPPED,
        "--workspace",
    ])
    .arg(ws);
    let out = output(cmd, "");
    text(&out.stderr)
}

/// The title and body `submit_plan` captures from a plan file.
fn captured(plan_text: &str) -> (String, String) {
    let plan = capture_plan("plan.md", plan_text.as_bytes()).expect("a plan");
    (plan.title, plan.plan)
}

#[test]
fn pending_and_the_decide_prompt_show_invisible_characters_as_escapes() {
    let ws = tempfile::tempdir().expect("tempdir");
    let selectors = "\u{fe00}".repeat(44);
    let plan_text = format!(
        "# Fix the timeout\u{3164}{selectors}\n\n1. Do ~~not~~ drop the database{selectors}\n2. const {{ timeout,\u{3164}}} = req.query\n"
    );
    let (store, session) = detach(ws.path(), &plan_text);
    let listed = pending(&store, false);
    let escaped = format!("Fix the timeout\\u{{3164}}{}", "\\u{fe00}".repeat(44));
    assert!(listed.contains(&escaped), "{listed}");
    assert!(all_visible(&listed), "{listed:?}");
    let json = pending(&store, true);
    assert!(
        json.is_ascii(),
        "every invisible character is a JSON escape: {json}"
    );
    assert!(
        json.contains(&format!("Fix the timeout\\u3164{}", "\\ufe00".repeat(44))),
        "{json}"
    );
    let listed: Value = serde_json::from_str(json.trim()).expect("JSON");
    assert_eq!(
        listed["title"],
        format!("Fix the timeout\u{3164}{selectors}")
    );
    let prompt = decide_prompt(ws.path(), &store, &session);
    assert!(all_visible(&prompt), "{prompt:?}");
    for shown in [
        format!("# {escaped}\n"),
        format!(
            "1. Do ~~not~~ drop the database{}\n",
            "\\u{fe00}".repeat(44)
        ),
        "2. const { timeout,\\u{3164}} = req.query".to_owned(),
    ] {
        assert!(prompt.contains(&shown), "`{shown}`: {prompt}");
    }
}

proptest! {
    // Each case runs the binary four times.
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// `pending`, `pending --json` and the `decide` prompt show the captured plan: decoded, the
    /// title and the body read back character for character.
    #[test]
    fn pending_and_the_prompt_map_back_to_the_captured_plan(
        title in text_of(1..6).prop_filter("one line", |t| !t.contains(['\n', '\r'])),
        body in text_of(0..30),
    ) {
        let ws = tempfile::tempdir().expect("tempdir");
        let plan_text = format!("# Plan {title}\n\n1. Step {body}\n");
        let (title, body) = captured(&plan_text);
        let (store, session) = detach(ws.path(), &plan_text);
        let json = pending(&store, true);
        prop_assert!(all_visible(&json), "{:?}", json);
        let listed: Value = serde_json::from_str(json.trim()).expect("JSON");
        prop_assert_eq!(listed["title"].as_str(), Some(title.as_str()));
        let line = pending(&store, false);
        prop_assert!(all_visible(&line), "{:?}", line);
        let fields: Vec<&str> = line.trim_end_matches('\n').split('\t').collect();
        prop_assert!(
            fields.iter().any(|f| decode_escapes(f) == title),
            "the title field of {:?}", line
        );
        let prompt = decide_prompt(ws.path(), &store, &session);
        prop_assert!(all_visible(&prompt), "{:?}", prompt);
        let source = format!("# {title}\n\n{body}");
        prop_assert!(
            decode_escapes(&prompt).contains(&source),
            "{:?} not in {:?}", source, prompt
        );
    }
}

/// Issue 19 (low): the event line showed only the first line of a tool result, so the user's
/// rejection feedback was cut at its first line; a long one is bounded, the cut counted. A
/// `submit_plan` result is shown as lines (trial finding D1), each bounded, at most 40 of them.
#[test]
fn event_lines_show_every_line_of_a_result_bounded() {
    let ws = tempfile::tempdir().expect("tempdir");
    let (store, session) = detach(ws.path(), "# Add dark mode\n\n1. Theme\n");
    let feedback = format!(
        "first line\nsecond line {} END{}",
        "x".repeat(5_000),
        "\nmore".repeat(100)
    );
    let mut cmd = bin();
    cmd.args([
        "decide",
        "--store",
        &store,
        &session,
        "--config",
        SHIPPED,
        "--workspace",
    ])
    .arg(ws.path())
    .args(["--reject", "--feedback", &feedback]);
    let out = output(cmd, "");
    let stdout = text(&out.stdout);
    let at = stdout
        .find("tool submit_plan ok: Plan rejected.")
        .unwrap_or_else(|| panic!("{stdout}"));
    let result: Vec<&str> = stdout[at..].lines().take(42).collect();
    assert!(
        result[0].ends_with("Feedback from the user: first line"),
        "{result:?}"
    );
    assert!(result[1].starts_with("  second line xxx"), "{result:?}");
    assert!(result[1].contains("characters not shown) …"), "{result:?}");
    assert!(
        result.iter().all(|l| l.len() < 2_000),
        "each line bounded: {result:?}"
    );
    assert!(
        result[41].starts_with("  (") && result[41].contains("more lines not shown"),
        "at most 40 lines: {result:?}"
    );
}

/// Sets every string field named `key` of the stored record at `record` to `value`.
fn forge(record: &Path, key: &str, value: &str) {
    fn set(json: &mut Value, key: &str, value: &str) {
        match json {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if k == key && v.is_string() {
                        *v = Value::String(value.to_owned());
                    } else {
                        set(v, key, value);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| set(v, key, value)),
            _ => {}
        }
    }
    let mut json: Value =
        serde_json::from_str(&std::fs::read_to_string(record).expect("record")).expect("JSON");
    set(&mut json, key, value);
    std::fs::write(record, json.to_string()).expect("forge");
}

/// `pending` printed a stored plan's `sha256` raw, cut at 12 bytes (and whole when byte 12 is
/// inside a character): a forged record wrote escape sequences, or 5 MB, to the terminal.
#[test]
fn pending_shows_a_forged_sha256_neutralized_and_bounded() {
    let ws = tempfile::tempdir().expect("tempdir");
    let (store, session) = detach(ws.path(), "# Add dark mode\n\n1. Theme\n");
    let record = Path::new(&store).join(format!("{session}.pending.json"));
    for forged in [
        format!("\u{1b}]0;owned\u{7}{}", "a".repeat(64)),
        format!("0123456789a\u{e9}{}", "\u{1b}[2J".repeat(1_000_000)),
    ] {
        forge(&record, "sha256", &forged);
        // Not the sha256 of its text (trust round 4, M3): the record is refused, and the
        // warning that says so shows the forged hash neutralized and bounded.
        let mut cmd = bin();
        cmd.args(["pending", "--store", &store]);
        let out = output(cmd, "");
        assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));
        let warned = text(&out.stderr);
        assert!(
            warned.contains("does not match its sha256"),
            "{warned:.300}"
        );
        assert!(warned.len() < 3_000, "bounded: {} bytes", warned.len());
        assert!(all_visible(&warned), "{warned:.300?}");
    }
}

/// Issue 19 (low): `pending` printed a forged 50 MB title in full. Every shown field is
/// bounded, the cut counted; `pending --json` keeps the record's data whole.
#[test]
fn pending_bounds_a_forged_title_and_says_how_much_is_cut() {
    let ws = tempfile::tempdir().expect("tempdir");
    let (store, session) = detach(ws.path(), "# Add dark mode\n\n1. Theme\n");
    let record = Path::new(&store).join(format!("{session}.pending.json"));
    let forged = format!("Forged {} title end", "y".repeat(5_000_000));
    forge(&record, "title", &forged);
    // Forged with the sha256 of the text it shows, as a forger who knows the rule would.
    let mut json: Value =
        serde_json::from_str(&std::fs::read_to_string(&record).expect("record")).expect("JSON");
    let shown = format!("# {forged}\n\n1. Theme\n");
    json["pending"]["suspendPayload"]["sha256"] = Value::String(
        agent_controller::tool::submit_plan::sha256_hex(shown.as_bytes()),
    );
    std::fs::write(&record, json.to_string()).expect("forge");
    let listed = pending(&store, false);
    assert!(listed.len() < 3_000, "bounded: {} bytes", listed.len());
    assert!(listed.contains("\tForged yyy"), "{listed:.300}");
    // Cut for the screen, the title says where it is whole (issue 36, item 4).
    assert!(
        listed.contains("yyy title end (`pending --json` shows the whole title)\t"),
        "{listed:.300}"
    );
    let cut = forged.len() - agent_controller::display::LINE_MAX_CHARS;
    assert!(
        listed.contains(&format!("… ({cut} characters not shown) …")),
        "{listed:.300}"
    );
    let whole: Value = serde_json::from_str(pending(&store, true).trim()).expect("JSON");
    assert_eq!(whole["title"].as_str().map(str::len), Some(forged.len()));
}
