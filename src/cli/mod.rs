//! The commands of the `agent-controller` binary, one file each, over the library's public API:
//! [`setup`] is the one controller setup they share, [`args`] their command line, [`exit`] how
//! they end, [`output`] how they write.

#[macro_use]
pub(crate) mod output;

pub(crate) mod acp;
pub(crate) mod allowances;
pub(crate) mod args;
pub(crate) mod check;
pub(crate) mod r#continue;
pub(crate) mod decide;
pub(crate) mod decider;
pub(crate) mod events;
pub(crate) mod exit;
pub(crate) mod explain;
pub(crate) mod flags;
pub(crate) mod graph;
pub(crate) mod import;
pub(crate) mod log;
pub(crate) mod logging;
pub(crate) mod mcp;
pub(crate) mod pending;
pub(crate) mod prompt;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod schema;
pub(crate) mod serve;
pub(crate) mod sessions;
pub(crate) mod setup;
pub(crate) mod switch;
pub(crate) mod text;
pub(crate) mod verify;
