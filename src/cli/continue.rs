//! `continue`: carries on an interrupted run from a session store.

use agent_controller::display::neutralize_line;
use agent_controller::store::display_spec;
use agent_controller::{SessionError, SessionOptions};

use crate::cli::args::ContinueArgs;
use crate::cli::decider::{Decider, interrupted};
use crate::cli::events::event_printer;
use crate::cli::exit::{Failure, Outcome};
use crate::cli::prompt::Prompt;
use crate::cli::setup::{runtime, stored_session};

/// `continue`: restores the session, takes its interrupted run over and carries it on; plans it
/// submits are decided as `run` decides them (the flags, else the prompt; with neither they stay
/// pending).
pub(crate) fn continue_run(mut args: ContinueArgs) -> Outcome {
    let (controller, graph) = stored_session(
        &mut args.common,
        &args.store,
        &mut args.session,
        args.allow_config_change,
    )?;
    let json = args.common.json;
    runtime()?.block_on(async {
        let options = SessionOptions::new().on_event(event_printer(json, graph.clone(), true));
        let mut session = controller.restore_session(&args.session, options).await?;
        let outcome = tokio::select! {
            outcome = session.continue_run() => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(outcome) = outcome else {
            return Ok(interrupted(&mut session).await);
        };
        let outcome = outcome.map_err(|e| lost_continue(e, &args.store))?;
        // The verdict flags decide plans only: a tool call is asked about at the prompt.
        let mut prompt = Prompt::new(graph);
        let mut decider = Decider {
            flags: &args.common.decision,
            prompt: Some(&mut prompt),
            flags_decide_tool_calls: false,
            json,
            store: Some(&args.store),
            detach: false,
            last: None,
            model: args.common.model.as_ref(),
        };
        decider.until_done(&mut session, outcome).await
    })
}

/// A `continue` that lost to another writer (another continuer took the run first) says so;
/// nothing changed.
pub(crate) fn lost_continue(error: SessionError, store: &str) -> Failure {
    if !error.is_conflict() {
        return error.into();
    }
    Failure::refused(format!(
        "{error}: another process carried the run on (or changed the session) after it was loaded here, so nothing was done; see the store with: agent-controller pending --store {}",
        neutralize_line(&display_spec(store))
    ))
}
