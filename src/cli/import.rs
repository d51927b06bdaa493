//! `import`: a modes TOML from another tool's config ([`agent_controller::import`]).

use std::io::Read as _;
use std::path::Path;

use agent_controller::display::{neutralize, neutralize_line};
use agent_controller::import::{MAX_IMPORT_BYTES, read_claude_code, read_opencode, roo_code};

use crate::cli::args::ImportFormat;
use crate::cli::exit::{Exit, Failure, Outcome};

/// Runs `import FORMAT FILE`: the TOML on stdout, each thing not carried over on stderr; exit 2
/// (nothing printed on stdout) for a file that cannot be read or imported.
pub(crate) fn import(format: ImportFormat, file: &Path) -> Outcome {
    let origin = file.display().to_string();
    let imported = match format {
        ImportFormat::Roo => roo_code(&read(file, &origin)?, &origin),
        ImportFormat::Opencode => read_opencode(file),
        ImportFormat::Claude => read_claude_code(file),
    }
    .map_err(|e| Failure::invalid(neutralize(&e.to_string())))?;
    for line in &imported.not_carried {
        note!("not carried over: {}", neutralize_line(line));
    }
    say!("{}", imported.toml.trim_end());
    Ok(Exit::Done)
}
/// The text of `file`, at most [`MAX_IMPORT_BYTES`] (one more byte read says it is larger).
fn read(file: &Path, origin: &str) -> Result<String, Failure> {
    let opened = std::fs::File::open(file)
        .map_err(|e| Failure::invalid(neutralize_line(&format!("{origin}: {e}"))))?;
    let mut bytes = Vec::new();
    opened
        .take(MAX_IMPORT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::invalid(neutralize_line(&format!("{origin}: {e}"))))?;
    if bytes.len() > MAX_IMPORT_BYTES {
        return Err(Failure::invalid(neutralize_line(&format!(
            "{origin}: the file is larger than {MAX_IMPORT_BYTES} bytes"
        ))));
    }
    String::from_utf8(bytes)
        .map_err(|e| Failure::invalid(neutralize_line(&format!("{origin}: not UTF-8: {e}"))))
}
