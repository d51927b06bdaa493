//! What a plan declares it will write: its `## Files` section ([`PlanScope`]), read from the
//! plan's text when it is submitted, shown to the approver as what an approval grants, and
//! bound in the mode the plan hands over to (the planning mode's `planScope`).
//!
//! The format, as `submit_plan`'s description tells the model ([`FORMAT`]):
//! - a level-2 heading whose text starts with `Files` (`## Files`, `## Files to change`) opens
//!   the section; the next heading of level 1 or 2 ends it (there may be several such sections:
//!   their entries add up);
//! - each list item of the section (`-`, `*`, `+`, or `1.`) is one entry: its first code span
//!   is a workspace path or glob and the prose after it is ignored
//!   (`` - `src/auth/mod.rs` — re-exports only ``); an item without a code span is a path as
//!   written (`- src/theme.rs`);
//! - paths are relative to the workspace, `/`-separated; `*` and `?` stay within one folder,
//!   `**` crosses folders; a path that ends in `/` is the folder and everything in it
//!   (`src/ui/` is `src/ui/**`);
//! - text in fenced code blocks is no part of the section.
//!
//! An entry is refused, and so the whole plan at submit ([`ScopeError`]), when it is not a path
//! (empty, a URL, control characters, a backslash, a glob that does not compile), leaves the
//! workspace (absolute, `~`, or a `..` part), holds a character drawn as nothing or that turns
//! the text (a zero-width space, a bidirectional override: what the approver reads must be what
//! is granted), or matches everything (`**`, `*`, `/`, `.`, or spelled otherwise: `**/{*,x}`,
//! `**/[!q]*`, `**/*.*`, any glob that fits a path of a character it never writes); a
//! section of more than [`MAX_SCOPE_ENTRIES`] entries is refused too. Paths compare exactly,
//! byte for byte and case for case: a look-alike of a declared path (another Unicode character
//! that looks the same) is another path, outside the scope.
//!
//! Pure: the file system (a declared folder that is a symlink leading out) is checked where the
//! plan file is read ([`crate::tool::submit_plan::read_plan`]).

use serde::{Deserialize, Serialize};

use super::markdown::{indentation, lines_outside_code};
use crate::glob::Glob;

/// The most entries a `## Files` section may list: a plan that touches more files declares
/// folders or globs (`src/ui/**`).
pub const MAX_SCOPE_ENTRIES: usize = 100;

/// What a plan's declared scope does in the mode an approval hands over to: a planning mode's
/// `planScope`, fixed in the plan's payload when it is submitted.
///
/// # Examples
/// ```
/// use agent_controller::tool::submit_plan::PlanScopePolicy;
/// assert_eq!("enforce".parse::<PlanScopePolicy>().ok(), Some(PlanScopePolicy::Enforce));
/// assert_eq!(PlanScopePolicy::default(), PlanScopePolicy::Ask);
/// assert!("sometimes".parse::<PlanScopePolicy>().is_err());
/// ```
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[strum(parse_err_ty = crate::names::UnknownName, parse_err_fn = crate::names::UnknownName::of::<Self>)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(inline, schema_with = "crate::names::schema::<PlanScopePolicy>")
)]
pub enum PlanScopePolicy {
    /// Writes inside the scope run without asking (an allowance of scope `plan`); a write
    /// outside it waits for approval as drift (the default).
    #[default]
    Ask,
    /// Writes inside the scope run without asking; a write outside it is refused, unasked, and
    /// the model is told why.
    Enforce,
    /// The scope is shown, and grants and binds nothing.
    Off,
}

impl PlanScopePolicy {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether this is `ask`, the default (left out of a payload's JSON).
    pub fn is_ask(&self) -> bool {
        *self == PlanScopePolicy::Ask
    }
}

/// How a plan declares its files, for the model (`submit_plan`'s description).
pub(crate) const FORMAT: &str = "To declare the files the plan will change, add a `## Files` \
section (a level-2 heading starting with \"Files\") with one list item per workspace path or \
glob, the path in backticks first and any note after it: - `src/theme.rs` the colours, or \
- `src/ui/**`. Paths are relative to the workspace; `..`, absolute paths and globs that match \
everything (`**`) are refused. Number the plan's steps (1. ..., 2. ...).";

/// The paths and globs a plan's `## Files` section declares, normalized (`./` and `.` parts
/// dropped, a final `/` made `/**`), in the order written, each once.
///
/// As JSON, a list of strings: `["src/theme.rs", "src/ui/**"]`.
///
/// # Examples
/// ```
/// use agent_controller::tool::submit_plan::PlanScope;
/// let plan = "1. Theme.\n\n## Files to change\n- `src/theme.rs` — the colours\n- src/ui/\n";
/// let scope = PlanScope::of(plan)?.expect("the plan declares its files");
/// assert_eq!(scope.entries(), ["src/theme.rs", "src/ui/**"]);
/// assert!(scope.contains("src/ui/button.rs"));
/// assert!(!scope.contains("src/main.rs"));
/// assert_eq!(PlanScope::of("1. Theme.\n")?, None);
/// assert!(PlanScope::of("## Files\n- `../secrets`\n").is_err());
/// # Ok::<(), agent_controller::tool::submit_plan::ScopeError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct PlanScope(Vec<String>);

/// Why a plan's `## Files` section is refused: the entry (as written) and the reason. The
/// model gets it as `submit_plan`'s error result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// An entry that is refused, and why.
    #[error(
        "the plan's `## Files` entry `{entry}` {why}; fix the section (workspace paths or globs, one per list item) and submit again"
    )]
    Entry {
        /// The entry as written (its first 200 characters).
        entry: String,
        /// Why it is refused.
        why: String,
    },
    /// The section lists more than [`MAX_SCOPE_ENTRIES`] entries.
    #[error(
        "the plan's `## Files` section lists {0} entries, more than {MAX_SCOPE_ENTRIES}: declare folders or globs instead (`src/ui/**`) and submit again"
    )]
    TooMany(usize),
}

impl PlanScope {
    /// The scope `plan` (a plan's text) declares: `None` when it has no `## Files` section
    /// (an approval then grants and binds nothing), else its entries (maybe none: a plan that
    /// declares it writes no file).
    ///
    /// # Errors
    /// [`ScopeError`] for an entry that is not a workspace path or glob, leaves the
    /// workspace or matches everything, and for more than [`MAX_SCOPE_ENTRIES`] entries.
    pub fn of(plan: &str) -> Result<Option<Self>, ScopeError> {
        let Some(items) = files_items(plan) else {
            return Ok(None);
        };
        let mut entries: Vec<String> = Vec::new();
        for (count, item) in items.enumerate() {
            if count == MAX_SCOPE_ENTRIES {
                let total = files_items(plan).map_or(0, Iterator::count);
                return Err(ScopeError::TooMany(total));
            }
            let entry = entry(item)?;
            if !entries.contains(&entry) {
                entries.push(entry);
            }
        }
        Ok(Some(Self(entries)))
    }

    /// The scope of the one entry `entry` (a path or glob as [`PlanScope::entries`] lists it).
    pub(crate) fn single(entry: &str) -> Self {
        Self(vec![entry.to_owned()])
    }

    /// The entries, in the order written.
    pub fn entries(&self) -> &[String] {
        &self.0
    }

    /// Whether `path` (relative to the workspace, `/`-separated, as the workspace jail resolved
    /// it: [`crate::rules::ResolvedPath::Inside`]) is one the scope declares: an entry names it
    /// exactly, or is a glob it fits (case as written).
    pub fn contains(&self, path: &str) -> bool {
        self.0
            .iter()
            .any(|entry| Glob::path(entry).is_ok_and(|glob| glob.is_match(path)))
    }

    /// What approving grants under `policy`, for the approver, on one line:
    /// ``approving lets `build` write: src/theme.rs, src/ui/**`` and what a write elsewhere
    /// does; under `off`, that the plan declares them and approving grants nothing.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::tool::submit_plan::{PlanScope, PlanScopePolicy};
    /// let scope = PlanScope::of("## Files\n- `src/theme.rs`\n- `src/ui/**`\n")?.unwrap();
    /// assert_eq!(
    ///     scope.grants("build", PlanScopePolicy::Ask),
    ///     "approving lets `build` write: src/theme.rs, src/ui/** (a write to another file waits for approval)"
    /// );
    /// assert!(scope.grants("build", PlanScopePolicy::Enforce).ends_with("(a write to another file is refused)"));
    /// assert!(scope.grants("build", PlanScopePolicy::Off).contains("grants nothing"));
    /// # Ok::<(), agent_controller::tool::submit_plan::ScopeError>(())
    /// ```
    pub fn grants(&self, target_mode_id: &str, policy: PlanScopePolicy) -> String {
        let files = if self.0.is_empty() {
            "no file".to_owned()
        } else {
            self.0.join(", ")
        };
        match policy {
            PlanScopePolicy::Ask => format!(
                "approving lets `{target_mode_id}` write: {files} (a write to another file waits for approval)"
            ),
            PlanScopePolicy::Enforce => format!(
                "approving lets `{target_mode_id}` write: {files} (a write to another file is refused)"
            ),
            PlanScopePolicy::Off => format!(
                "the plan declares it writes: {files} (planScope `off`: approving grants nothing)"
            ),
        }
    }

    /// The part of each entry before its first glob part: the folder or file it names for
    /// sure (`src/ui` of `src/ui/**`), or `None` for an entry that starts with a glob.
    pub(crate) fn literal_prefixes(&self) -> impl Iterator<Item = (&str, String)> {
        self.0.iter().filter_map(|entry| {
            let literal: Vec<&str> = entry
                .split('/')
                .take_while(|part| !part.contains(GLOB_CHARS))
                .collect();
            (!literal.is_empty()).then(|| (entry.as_str(), literal.join("/")))
        })
    }
}

/// The characters that make a path part a glob.
const GLOB_CHARS: [char; 4] = ['*', '?', '[', '{'];

/// The text of each list item of the plan's `## Files` sections, in order; `None` when the
/// plan has no such section.
fn files_items(plan: &str) -> Option<impl Iterator<Item = &str>> {
    let mut found = false;
    let mut inside = false;
    let mut items = Vec::new();
    for line in lines_outside_code(plan) {
        if let Some((level, text)) = heading(line) {
            if level <= 2 {
                inside = level == 2 && starts_with_files(text);
                found |= inside;
            }
            continue;
        }
        if inside && let Some(item) = list_item(line) {
            items.push(item);
        }
    }
    found.then(|| items.into_iter())
}

/// Whether a heading's text starts with the word "Files" (any case): `Files`, `Files to
/// change`, `Files:`, not `Filesystem`.
fn starts_with_files(text: &str) -> bool {
    text.get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("files"))
        && !text[5..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
}

/// The level and text of an ATX heading `line` (`## Files` is `(2, "Files")`), closing `#`s
/// left out.
fn heading(line: &str) -> Option<(usize, &str)> {
    let (columns, rest) = indentation(line);
    let level = rest.chars().take_while(|&c| c == '#').count();
    if columns > 3 || level == 0 || level > 6 {
        return None;
    }
    let text = &rest[level..];
    if !(text.is_empty() || text.starts_with([' ', '\t'])) {
        return None;
    }
    let text = text.trim();
    let text = text.trim_end_matches('#');
    Some((level, text.trim()))
}

/// The text of list item `line` (`- x`, `* x`, `+ x`, `1. x`, `1) x`), trimmed; `None` when
/// the line is no list item.
fn list_item(line: &str) -> Option<&str> {
    let (_, rest) = indentation(line);
    let after = if let Some(after) = rest.strip_prefix(['-', '*', '+']) {
        after
    } else {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let after = &rest[digits..];
        after.strip_prefix(['.', ')'])?
    };
    (after.is_empty() || after.starts_with([' ', '\t'])).then(|| after.trim())
}

/// The first code span of `text` (CommonMark 6.1: a run of backticks up to the next run of the
/// same length; one space each side stripped when both are there and the content is not all
/// spaces), if it has one.
fn code_span(text: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(at) = text[from..].find('`') {
        let open = from + at;
        let len = text[open..].chars().take_while(|&c| c == '`').count();
        let body = open + len;
        let mut search = body;
        while let Some(at) = text[search..].find('`') {
            let close = search + at;
            let run = text[close..].chars().take_while(|&c| c == '`').count();
            if run == len {
                let content = &text[body..close];
                let stripped = content
                    .strip_prefix(' ')
                    .and_then(|c| c.strip_suffix(' '))
                    .filter(|_| !content.trim_matches(' ').is_empty());
                return Some(stripped.unwrap_or(content));
            }
            search = close + run;
        }
        from = body;
    }
    None
}

/// The entry list item `item` declares, normalized and checked.
fn entry(item: &str) -> Result<String, ScopeError> {
    let written = code_span(item).unwrap_or(item).trim();
    let refuse = |why: &str| {
        Err(ScopeError::Entry {
            entry: written.chars().take(200).collect(),
            why: why.to_owned(),
        })
    };
    if written.is_empty() {
        return refuse("is empty: it is not a path");
    }
    if written.chars().any(char::is_control) {
        return refuse("holds a control character: it is not a path");
    }
    if let Some(c) = written.chars().find(|&c| crate::display::hides(c)) {
        return refuse(&format!(
            "holds `{}`, a character drawn as nothing or that changes how the text reads: the approver would read another path than the one granted",
            c.escape_unicode()
        ));
    }
    if written.contains("://") {
        return refuse("is a URL, not a workspace path");
    }
    if written.contains('\\') {
        return refuse("holds a backslash: separate folders with `/`");
    }
    if written == "/" {
        return refuse(
            "matches the whole workspace: declare the files or folders the plan changes",
        );
    }
    if written.starts_with('/') || written.starts_with('~') {
        return refuse("is absolute: write it relative to the workspace");
    }
    let folder = written.ends_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in written.split('/') {
        match part {
            "" | "." => {}
            ".." => return refuse("leaves the workspace (`..`): write paths inside it"),
            part => parts.push(part),
        }
    }
    if folder {
        parts.push("**");
    }
    if parts
        .iter()
        .all(|p| p.chars().all(|c| matches!(c, '*' | '?')))
    {
        return refuse(
            "matches the whole workspace: declare the files or folders the plan changes",
        );
    }
    let entry = parts.join("/");
    let glob = match Glob::path(&entry) {
        Ok(glob) => glob,
        Err(e) => return refuse(&format!("is not a path or glob ({e})")),
    };
    if matches_any_path(&glob, &entry) {
        return refuse(
            "matches the whole workspace: declare the files or folders the plan changes",
        );
    }
    Ok(entry)
}

/// Whether `glob` (compiled from `entry`) matches every path however it is spelled (`**/{*,x}`,
/// `**/[!q]*`, `**/*.*`): it matches a path made only of a character `entry` never writes, so
/// it names no file or folder of its own. A glob that names something (`src/**`, `**/*.rs`,
/// `docs/{a,b}.md`) fits no such path.
fn matches_any_path(glob: &Glob, entry: &str) -> bool {
    let Some(c) = ('a'..='z')
        .chain('0'..='9')
        .chain(['ж', 'ŵ', 'ǂ'])
        .find(|&c| !entry.contains(c))
    else {
        // An entry that writes every one of these characters names something.
        return false;
    };
    [
        format!("{c}"),
        format!("{c}/{c}"),
        format!("{c}/{c}/{c}"),
        format!("{c}.{c}"),
        format!("{c}/{c}.{c}"),
    ]
    .iter()
    .any(|probe| glob.is_match(probe))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(plan: &str) -> Vec<String> {
        PlanScope::of(plan).expect("accepted").expect("declared").0
    }

    fn refused(plan: &str) -> String {
        PlanScope::of(plan).expect_err("refused").to_string()
    }

    #[test]
    fn the_first_code_span_is_the_path_and_the_prose_after_it_is_ignored() {
        let plan = "# T\n\n1. Do it.\n\n## Files to change\n\n- `src/auth/mod.rs` — re-exports only, not `src/x.rs`\n* src/theme.rs\n+ ``src/a`b.rs``\n2) `src/ui/` the folder\n\n## Risks\n- `not/a/file.rs`\n";
        assert_eq!(
            scope(plan),
            ["src/auth/mod.rs", "src/theme.rs", "src/a`b.rs", "src/ui/**"]
        );
    }

    #[test]
    fn a_plan_without_a_files_section_declares_nothing() {
        assert_eq!(
            PlanScope::of("# T\n\n1. a\n## Filesystem\n- `a`\n").ok(),
            Some(None)
        );
        assert_eq!(PlanScope::of("### Files\n- `a`\n").ok(), Some(None));
        assert_eq!(
            PlanScope::of("```\n## Files\n- `a`\n```\n").ok(),
            Some(None)
        );
        assert_eq!(scope("## Files\n\nNone.\n"), Vec::<String>::new());
        assert_eq!(scope("## files\n- ./a/./b.rs\n- a/b.rs\n"), ["a/b.rs"]);
    }

    #[test]
    fn entries_that_leave_the_workspace_or_are_no_paths_are_refused() {
        for (entry, says) in [
            ("`../etc/passwd`", "leaves the workspace"),
            ("`src/../../x`", "leaves the workspace"),
            ("`/etc/passwd`", "absolute"),
            ("`~/.ssh/id_rsa`", "absolute"),
            ("`**`", "whole workspace"),
            ("`/`", "whole workspace"),
            ("`.`", "whole workspace"),
            ("`**/*`", "whole workspace"),
            ("`./`", "whole workspace"),
            ("`https://example.com/x`", "URL"),
            ("`src\\x.rs`", "backslash"),
            ("`src/[`", "not a path or glob"),
            ("` `", "empty"),
        ] {
            let why = refused(&format!("## Files\n- {entry}\n"));
            assert!(why.contains(says), "{entry}: {why}");
        }
    }

    #[test]
    fn globs_that_match_every_path_however_spelled_are_refused() {
        for entry in [
            "`**/{*,x}`",
            "`{*,x}`",
            "`**/[!q]*`",
            "`**/*.*`",
            "`*.*`",
            "`*/**/*`",
            "`{src,*}/**`",
        ] {
            let why = refused(&format!("## Files\n- {entry}\n"));
            assert!(why.contains("whole workspace"), "{entry}: {why}");
        }
        // Globs that name something stay: a folder, an extension, a name.
        assert_eq!(
            scope("## Files\n- `src/**`\n- `**/*.rs`\n- `*.md`\n- `docs/{a,b}.md`\n- `[A-Z]*`\n"),
            ["src/**", "**/*.rs", "*.md", "docs/{a,b}.md", "[A-Z]*"]
        );
    }

    #[test]
    fn entries_with_characters_drawn_as_nothing_or_turning_text_are_refused() {
        // What the approver reads must be what is granted: a zero-width space, a right-to-left
        // override, a BOM, a variation selector make the shown path another one.
        for entry in [
            "src/theme.rs\u{200b}",
            "src/\u{202e}sr.emeht",
            "\u{feff}src/theme.rs",
            "src/the\u{fe0f}me.rs",
            "src/\u{2066}a.rs",
        ] {
            let why = refused(&format!("## Files\n- `{entry}`\n"));
            assert!(why.contains("drawn as nothing"), "{entry:?}: {why}");
            assert!(why.contains("\\u{"), "the character is named: {why}");
        }
        // Visible letters of any script are paths.
        assert_eq!(
            scope("## Files\n- `docs/résumé-ж.md`\n"),
            ["docs/résumé-ж.md"]
        );
    }

    #[test]
    fn more_entries_than_the_bound_are_refused_with_their_count() {
        let mut plan = "## Files\n".to_owned();
        for i in 0..10_000 {
            plan.push_str(&format!("- `src/f{i}.rs`\n"));
        }
        let why = refused(&plan);
        assert!(why.contains("10000 entries"), "{why}");
        let mut plan = "## Files\n".to_owned();
        for i in 0..MAX_SCOPE_ENTRIES {
            plan.push_str(&format!("- `src/f{i}.rs`\n"));
        }
        assert_eq!(scope(&plan).len(), MAX_SCOPE_ENTRIES);
    }

    #[test]
    fn paths_compare_exactly() {
        let declared = PlanScope::of("## Files\n- `src/theme.rs`\n- `docs/*.md`\n")
            .expect("accepted")
            .expect("declared");
        assert!(declared.contains("src/theme.rs"));
        assert!(declared.contains("docs/a.md"));
        // A Cyrillic `е` in place of the Latin `e`, another case, another folder.
        assert!(!declared.contains("src/th\u{435}me.rs"));
        assert!(!declared.contains("src/Theme.rs"));
        assert!(!declared.contains("docs/sub/a.md"));
        assert!(!declared.contains("src/theme.rs.bak"));
    }

    #[test]
    fn literal_prefixes_name_what_each_entry_names_for_sure() {
        let declared = PlanScope::of("## Files\n- `src/ui/**`\n- `*.md`\n- `a/b.rs`\n")
            .expect("accepted")
            .expect("declared");
        let prefixes: Vec<_> = declared.literal_prefixes().map(|(_, p)| p).collect();
        assert_eq!(prefixes, ["src/ui", "a/b.rs"]);
    }
}
