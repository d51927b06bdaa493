//! `graph`: draws the modes and the hand-over edges.

use std::path::Path;

use agent_controller::diagram::{self, DiagramFormat};

use crate::cli::exit::{Exit, Outcome};
use crate::cli::output::emit;
use crate::cli::setup::load;

/// `graph`: the config at `path` drawn in `format` (Mermaid or DOT) on stdout.
pub(crate) fn graph(path: &Path, format: DiagramFormat) -> Outcome {
    let (graph, _) = load(path)?;
    emit(format_args!("{}", diagram::render(&graph, format)));
    Ok(Exit::Done)
}
