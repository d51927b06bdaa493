//! The few pieces of Markdown (CommonMark 0.31) the plan's readers share: code fences, so the
//! numbered steps (`crate::machine::tasks::plan_steps`) and the `## Files` section
//! ([`super::scope`]) are read outside code only, as a renderer shows them, and a line's
//! indentation.

/// The lines of `text` outside fenced code blocks, in order (the fences' own lines left out).
///
/// Fences follow CommonMark (0.31, section 4.5), so the lines are the ones a Markdown renderer
/// shows outside code: a fence is a line of at least three `` ` `` or `~` indented less than
/// four columns (a backtick fence's info string has no backtick); it closes only at a line of
/// the same character, at least as long, with nothing after it but spaces, indented less than
/// four columns; an unclosed one runs to the end.
pub(crate) fn lines_outside_code(text: &str) -> impl Iterator<Item = &str> {
    let mut fence: Option<Fence> = None;
    text.lines().filter(move |line| {
        if let Some(open) = &fence {
            if open.closed_by(line) {
                fence = None;
            }
            return false;
        }
        if let Some(open) = Fence::opened_by(line) {
            fence = Some(open);
            return false;
        }
        true
    })
}

/// A code fence's opening line (CommonMark 4.5): its character and length.
struct Fence {
    mark: char,
    len: usize,
}

impl Fence {
    /// The fence `line` opens, if it is an opening fence.
    fn opened_by(line: &str) -> Option<Fence> {
        let (columns, rest) = indentation(line);
        let mark = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
        let len = rest.chars().take_while(|&c| c == mark).count();
        // The mark is ASCII: `len` characters are `len` bytes.
        let info = &rest[len..];
        if columns > 3 || len < 3 || (mark == '`' && info.contains('`')) {
            return None;
        }
        Some(Fence { mark, len })
    }

    /// Whether `line` closes this fence.
    fn closed_by(&self, line: &str) -> bool {
        let (columns, rest) = indentation(line);
        let len = rest.chars().take_while(|&c| c == self.mark).count();
        columns <= 3 && len >= self.len && rest[len..].trim_matches([' ', '\t']).is_empty()
    }
}

/// The columns `line` is indented by (a tab to the next multiple of 4, as CommonMark counts
/// them) and the rest of it.
pub(crate) fn indentation(line: &str) -> (usize, &str) {
    let mut columns = 0;
    for (at, c) in line.char_indices() {
        match c {
            ' ' => columns += 1,
            '\t' => columns += 4 - columns % 4,
            _ => return (columns, &line[at..]),
        }
    }
    (columns, "")
}
