//! Reading what an import reads: each file bounded ([`super::MAX_IMPORT_BYTES`] for all of
//! them together), only regular files inside the folders a tool reads, at most
//! [`super::MAX_AGENT_FILES`] agent files.

use std::io::Read as _;
use std::path::Path;

use super::{ImportError, MAX_AGENT_FILES, MAX_IMPORT_BYTES, SourceFile};

/// What is left of the bytes an import may read.
pub(super) struct Budget(usize);

impl Budget {
    pub(super) fn new() -> Self {
        Budget(MAX_IMPORT_BYTES)
    }
}

fn origin(path: &Path) -> String {
    path.display().to_string()
}

/// The text of `path`, taken from `budget`.
///
/// # Errors
/// [`ImportError::Read`], [`ImportError::TooLarge`] (past the budget),
/// [`ImportError::Malformed`] (not UTF-8, at the first byte that is not).
pub(super) fn read(path: &Path, budget: &mut Budget) -> Result<SourceFile, ImportError> {
    let origin = origin(path);
    let io = |source| ImportError::Read {
        origin: origin.clone(),
        source,
    };
    let opened = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    opened
        .take(budget.0 as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() > budget.0 {
        return Err(ImportError::TooLarge { origin });
    }
    budget.0 -= bytes.len();
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SourceFile { origin, text }),
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
            let column =
                valid.len() - valid.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1) + 1;
            Err(ImportError::Malformed {
                origin,
                line,
                column,
                message: "not UTF-8 text".to_owned(),
            })
        }
    }
}

/// `path` when it is a regular file (a symlink is not followed: a file a repository links
/// elsewhere is reported to `not_carried` and skipped); `None` when it does not exist.
pub(super) fn regular(path: &Path, not_carried: &mut Vec<String>) -> Option<()> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.is_file() {
        Some(())
    } else {
        not_carried.push(format!(
            "{}: skipped, not a regular file (a symlink or a folder is not followed)",
            origin(path)
        ));
        None
    }
}

/// The `*.md` files directly in `dir` (none when it does not exist), sorted by name, read
/// from `budget`; anything else there is skipped and reported.
///
/// # Errors
/// As [`read`], and [`ImportError::TooManyFiles`] past [`MAX_AGENT_FILES`].
pub(super) fn markdown_in(
    dir: &Path,
    budget: &mut Budget,
    not_carried: &mut Vec<String>,
) -> Result<Vec<SourceFile>, ImportError> {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return Ok(Vec::new());
    };
    if !meta.is_dir() {
        not_carried.push(format!(
            "{}: skipped, not a folder (a symlink is not followed)",
            origin(dir)
        ));
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| ImportError::Read {
        origin: origin(dir),
        source,
    })?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ImportError::Read {
            origin: origin(dir),
            source,
        })?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "md") || path.is_dir() {
            paths.push(path);
            if paths.len() > MAX_AGENT_FILES {
                return Err(ImportError::TooManyFiles {
                    origin: origin(dir),
                });
            }
        }
    }
    paths.sort();
    let mut files = Vec::new();
    for path in paths {
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            not_carried.push(format!(
                "{}: skipped, a folder (a nested agent's id holds a `/`, which no id here does)",
                origin(&path)
            ));
            continue;
        }
        if regular(&path, not_carried).is_some() {
            files.push(read(&path, budget)?);
        }
    }
    Ok(files)
}
