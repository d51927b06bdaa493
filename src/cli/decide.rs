//! `decide`: decides a pending plan or a waiting tool call from a session store and carries the run on.

use agent_controller::display::neutralize_line;
use agent_controller::{PendingToolCall, SessionOptions};

use crate::cli::args::{DecideArgs, DecisionArgs};
use crate::cli::decider::{Decider, interrupted, lost_race, waiting_tool_calls};
use crate::cli::events::event_printer;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::prompt::Prompt;
use crate::cli::setup::{runtime, stored_session};

pub(crate) fn decide(mut args: DecideArgs) -> Outcome {
    args.common.decision.always = args.always;
    let (controller, graph) = stored_session(&mut args.common, &args.store, &mut args.session)?;
    let json = args.common.json;
    let flags = &args.common.decision;
    runtime()?.block_on(async {
        let options = SessionOptions::new().on_event(event_printer(json, graph.clone(), true));
        let mut session = controller.restore_session(&args.session, options).await?;
        let idle = DecisionArgs {
            approve: false,
            reject: false,
            feedback: None,
            sha256: None,
            by: None,
            to: None,
            plan_file: None,
            always: false,
            edited: None,
        };
        let waiting = waiting_tool_calls(&session);
        if !waiting.is_empty() {
            let chosen = choose_tool_calls(&args, &waiting)?;
            for call in &chosen {
                flags.check_for_tool_call(call)?;
                flags.fixed_for_tool_call(call)?;
            }
            let mut prompt = flags.fixed().is_none().then(|| Prompt::new(graph));
            let mut decider = Decider {
                flags,
                prompt: prompt.as_mut(),
                flags_decide_tool_calls: true,
                json,
                store: Some(&args.store),
                detach: false,
                last: None,
            };
            let outcome = match decider.decide_tool_calls(&mut session, &chosen).await? {
                Ok(outcome) => outcome,
                Err(exit) => return Ok(exit),
            };
            // What the run asks next (other calls still waiting, a new plan) waits for the next
            // `decide`.
            decider.flags = &idle;
            decider.prompt = None;
            return decider.until_done(&mut session, outcome).await;
        }
        let Some(pending) = session.pending().cloned() else {
            if let Some(expired) = session.expired(args.decision.as_deref()) {
                return Err(expired.into());
            }
            return Err(Failure::refused(format!(
                "session {} has nothing pending (already decided?)",
                neutralize_line(&args.session)
            )));
        };
        if let Some(id) = args.decision.as_deref().filter(|id| *id != pending.decision_id()) {
            return Err(Failure::refused(format!(
                "session {} has no pending decision `{}`: the pending one is `{}`; nothing was decided",
                neutralize_line(&args.session),
                neutralize_line(id),
                neutralize_line(pending.decision_id())
            )));
        }
        if flags.always {
            return Err(Failure::invalid(format!(
                "--always goes with a tool call, and decision {} is a plan: nothing was decided",
                neutralize_line(pending.decision_id())
            )));
        }
        flags.check_pinned(pending.payload())?;
        let decision = match flags.fixed() {
            Some(decision) => decision,
            None => match Prompt::new(graph).ask(&session, pending.payload()).await {
                Some(decision) => flags.signed(decision),
                None => {
                    note!("the plan stays pending in the store");
                    return Ok(Exit::Pending);
                }
            },
        };
        let action = decision.action;
        let outcome = tokio::select! {
            outcome = session.decide(pending.decision_id(), decision) => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(outcome) = outcome else {
            return Ok(interrupted(&mut session).await);
        };
        let outcome = outcome.map_err(|e| lost_race(e, &args.store))?;
        // A plan resubmitted after feedback is a new decision: leave it pending for the next `decide`.
        let mut decider = Decider {
            flags: &idle,
            prompt: None,
            flags_decide_tool_calls: false,
            json,
            store: Some(&args.store),
            detach: false,
            last: Some(action),
        };
        decider.until_done(&mut session, outcome).await
    })
}

/// The tool calls `decide` decides: the one `--decision` names; else with a verdict flag the only
/// one waiting (more than one is a usage error, exit 2, listing their ids: name one with
/// `--decision`); else (the prompt) each in turn. An id that is not waiting is refused (exit 5).
pub(crate) fn choose_tool_calls(
    args: &DecideArgs,
    waiting: &[PendingToolCall],
) -> Result<Vec<PendingToolCall>, Failure> {
    let listed = || {
        waiting
            .iter()
            .map(|c| {
                format!(
                    "{} ({}, argsSha256 {})",
                    neutralize_line(c.decision_id()),
                    neutralize_line(c.tool_name()),
                    neutralize_line(c.args_sha256())
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match args.decision.as_deref() {
        Some(id) => match waiting.iter().find(|c| c.decision_id() == id) {
            Some(call) => Ok(vec![call.clone()]),
            None => Err(Failure::refused(format!(
                "session {} has no pending decision `{}`: the tool calls waiting are {}; nothing was decided",
                neutralize_line(&args.session),
                neutralize_line(id),
                listed()
            ))),
        },
        None if waiting.len() > 1 && args.common.decision.fixed().is_some() => {
            Err(Failure::invalid(format!(
                "session {} has {} tool calls waiting for approval: name the one to decide with --decision ID: {}; nothing was decided",
                neutralize_line(&args.session),
                waiting.len(),
                listed()
            )))
        }
        None => Ok(waiting.to_vec()),
    }
}
