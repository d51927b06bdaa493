//! `schema`: prints a JSON Schema, of the config format or of the JSON a host exchanges.

use agent_controller::{config, schema};

use crate::cli::args::SchemaKind;
use crate::cli::exit::{Exit, Outcome};
use crate::cli::output::emit;

/// `schema`: the JSON Schema `of` names, on stdout.
pub(crate) fn schema(of: SchemaKind) -> Outcome {
    let text = match of {
        SchemaKind::Config => config::schema_json(),
        SchemaKind::Decision => schema::to_json(&schema::decision()),
        SchemaKind::Pending => schema::to_json(&schema::pending_entry()),
        SchemaKind::Decided => schema::to_json(&schema::decided_record()),
    };
    emit(format_args!("{text}"));
    Ok(Exit::Done)
}
