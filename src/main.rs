//! The `agent-controller` command: `check` a mode config, `verify` it with the property tests,
//! draw its `graph`, print its `schema`, `run` a session on it, list `pending` plans and
//! `decide` them from a session store.
//!
//! A thin layer over the library: everything here can be done with the public API. This file
//! only parses the command line and dispatches; each command lives in its own file under
//! `src/cli/`.

use std::process::ExitCode;

use agent_controller::display::neutralize;
use clap::Parser;

#[macro_use]
mod cli;

use cli::args::{Cli, Command};
use cli::output::{report_stdout_failure, stdout_failure};

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli::logging::init_logging(cli.log_level);
    cli::setup::set_layer_flags(cli::setup::LayerFlags {
        no_user_config: cli.no_user_config,
        only: cli.only.clone(),
    });
    let result = match cli.command {
        Command::Check {
            config,
            connect,
            origin,
        } => cli::check::check(&config, connect, origin),
        Command::Explain(args) => cli::explain::explain(args),
        Command::Import { format, file } => cli::import::import(format, &file),
        Command::Graph { config, format } => cli::graph::graph(&config, format),
        Command::Schema { of } => cli::schema::schema(of),
        Command::Run(args) => cli::run::run(args),
        Command::Pending {
            store,
            json,
            watch: true,
        } => cli::pending::watch_pending(&store, json),
        Command::Pending { store, json, .. } => cli::pending::pending(&store, json),
        Command::Sessions {
            store,
            workspace,
            json,
        } => cli::sessions::sessions(&store, workspace.as_deref(), json),
        Command::Log {
            session,
            store,
            json,
        } => cli::log::log(&store, &session, json),
        Command::Report {
            session,
            store,
            json,
        } => cli::report::report(&store, &session, json),
        Command::Decide(args) => cli::decide::decide(args),
        Command::Continue(args) => cli::r#continue::continue_run(args),
        Command::Switch(args) => cli::switch::switch(args),
        Command::Verify(args) => cli::verify::verify(args),
        Command::Acp(args) => cli::acp::acp(args),
        Command::Serve(args) => cli::serve::serve(args),
        Command::Allowances(command) => cli::allowances::allowances(command),
    };
    let exit = match result {
        Ok(exit) => exit,
        Err(failure) => {
            note!("error: {}", neutralize(&failure.message));
            failure.exit
        }
    };
    let exit = match stdout_failure() {
        Some(error) => report_stdout_failure(error, exit),
        None => exit,
    };
    ExitCode::from(exit.code())
}
