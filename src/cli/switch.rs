//! `switch`: switches a stored session to another mode by hand ([`Session::switch_mode`]).
//!
//! [`Session::switch_mode`]: agent_controller::Session::switch_mode

use agent_controller::display::neutralize_line;
use agent_controller::{PendingDecision, SessionError, SessionOptions};

use crate::cli::args::SwitchArgs;
use crate::cli::events::event_printer;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{runtime, stored_session, stored_session_args};

/// `switch`: restores the session and switches it to `args.mode`; what was pending counts as
/// not approved. Says what changed on stderr (the events on stdout with `--json`).
pub(crate) fn switch(args: SwitchArgs) -> Outcome {
    let mut common = stored_session_args(args.config.clone(), args.workspace.clone(), args.json)?;
    // A switch runs no model: none is opened (the session's own may need a key this shell lacks).
    common.model = Some(agent_controller::model::ModelSpec::Scripted);
    let mut session_id = args.session.clone();
    let (controller, graph) = stored_session(
        &mut common,
        &args.store,
        &mut session_id,
        args.allow_config_change,
    )?;
    let json = args.json;
    runtime()?.block_on(async {
        let options = SessionOptions::new().on_event(event_printer(json, graph.clone(), true));
        let mut session = controller.restore_session(&session_id, options).await?;
        let Some(target) = graph.get(&args.mode) else {
            return Err(SessionError::unknown_mode(&args.mode, &graph).into());
        };
        let from = session.mode().id().to_owned();
        let pending: Vec<String> = session.pending().iter().map(describe).collect();
        let changed = session
            .switch_mode(&args.mode)
            .await
            .map_err(|e| lost(e, &session_id, "switched"))?;
        let to = graph.mode(target).id();
        let who = neutralize_line(&session_id);
        if !changed {
            note!("session {who} is already in mode {to}: nothing changed");
            return Ok(Exit::Done);
        }
        note!("session {who}: mode {from} -> {to} (switched by hand)");
        for what in pending {
            note!("  {what} counts as not approved; the model is told when the session runs next");
        }
        Ok(Exit::Done)
    })
}

/// A pending decision as `switch` names it.
pub(crate) fn describe(pending: &PendingDecision) -> String {
    match pending {
        PendingDecision::Plan(plan) => format!(
            "the plan {} ({})",
            neutralize_line(plan.decision_id()),
            neutralize_line(&plan.payload().submission.title)
        ),
        PendingDecision::ToolCall(call) => format!(
            "the tool call {} ({})",
            neutralize_line(call.decision_id()),
            neutralize_line(call.tool_name())
        ),
        _ => "a pending decision".to_owned(),
    }
}

/// A change to `session` that lost to another writer, or that a run in another process holds
/// off (its lease: [`SessionError::LeaseHeld`]), says so: nothing was `undone` (`switched`,
/// `revoked`). Exit 5 either way.
///
/// [`SessionError::LeaseHeld`]: agent_controller::SessionError::LeaseHeld
pub(crate) fn lost(error: SessionError, session: &str, undone: &str) -> Failure {
    if let SessionError::LeaseHeld {
        owner,
        remaining_ms,
        ..
    } = &error
    {
        return Failure::refused(format!(
            "session {} is running in another process ({}, its lease ends in {remaining_ms} ms), so nothing was {undone}: try again once its run has ended (`pending` lists the sessions that wait)",
            neutralize_line(session),
            neutralize_line(owner)
        ));
    }
    if !error.is_conflict() {
        return error.into();
    }
    Failure::refused(format!(
        "{error}: the session {} changed after it was loaded here, so nothing was {undone}",
        neutralize_line(session)
    ))
}
