//! A Markdown file with YAML frontmatter (OpenCode's and Claude Code's agent files): the `---`
//! block split off and read with `serde_norway`, the body the agent's prompt.

use serde::de::DeserializeOwned;

use super::{ImportError, SourceFile};

/// The frontmatter of `file`, read as `T`, and its body (trimmed).
///
/// # Errors
/// [`ImportError::Malformed`]: no `---` line opening the file or none closing the block, or
/// YAML that does not read as `T`, at its line (counted in the whole file) and column.
pub(super) fn parse<T: DeserializeOwned>(file: &SourceFile) -> Result<(T, String), ImportError> {
    let malformed = |line: usize, column: usize, message: String| ImportError::Malformed {
        origin: file.origin.clone(),
        line,
        column,
        message,
    };
    let text = file.text.strip_prefix('\u{feff}').unwrap_or(&file.text);
    let mut lines = text.split_inclusive('\n');
    let opening = lines.next().unwrap_or("");
    if opening.trim_end() != "---" {
        return Err(malformed(
            1,
            1,
            "not an agent file: it must open with a `---` line and YAML frontmatter".to_owned(),
        ));
    }
    let start = opening.len();
    let mut at = start;
    let mut end = None;
    for line in lines {
        if line.trim_end() == "---" {
            end = Some((at, at + line.len()));
            break;
        }
        at += line.len();
    }
    let Some((yaml_end, body_start)) = end else {
        return Err(malformed(
            1,
            1,
            "the frontmatter opened at line 1 is never closed by a `---` line".to_owned(),
        ));
    };
    let yaml = &text[start..yaml_end];
    let yaml = if yaml.trim().is_empty() { "{}" } else { yaml };
    let value: T = serde_norway::from_str(yaml).map_err(|e| {
        // The YAML starts on the file's second line.
        let (line, column) = e.location().map_or((2, 1), |l| (l.line() + 1, l.column()));
        malformed(line, column, format!("frontmatter: {e}"))
    })?;
    Ok((value, text[body_start..].trim().to_owned()))
}
