//! `decide`: decides a pending plan or a waiting tool call from a session store and carries the run on.

use agent_controller::display::neutralize_line;
use agent_controller::terminal::Style;
use agent_controller::{PendingDecision, SessionOptions};

use crate::cli::args::{DecideArgs, DecisionArgs};
use crate::cli::decider::Decider;
use crate::cli::events::event_printer;
use crate::cli::exit::{Failure, Outcome};
use crate::cli::prompt::{Prompt, waiting};
use crate::cli::setup::{runtime, stored_session};
use crate::cli::text::plan_origin;

pub(crate) fn decide(mut args: DecideArgs) -> Outcome {
    args.common.decision.always = args.always;
    args.common.decision.scope = args.scope;
    args.common.decision.allow = args.allow_pattern();
    let (controller, graph) = stored_session(
        &mut args.common,
        &args.store,
        &mut args.session,
        args.allow_config_change,
    )?;
    let json = args.common.json;
    let flags = &args.common.decision;
    runtime()?.block_on(async {
        let options = SessionOptions::new().on_event(event_printer(json, graph.clone(), true));
        let mut session = controller.restore_session(&args.session, options).await?;
        let idle = DecisionArgs {
            approve: false,
            reject: false,
            answer: Vec::new(),
            answer_json: None,
            feedback: None,
            sha256: None,
            by: None,
            to: None,
            plan_file: None,
            always: false,
            scope: None,
            allow: None,
            edited: None,
            comments: Vec::new(),
            model_for_next: None,
            steps: None,
        };
        let waiting = waiting(&session);
        if waiting.is_empty() {
            if let Some(expired) = session.expired(args.decision.as_deref()) {
                return Err(expired.into());
            }
            return Err(Failure::refused(format!(
                "session {} has nothing pending (already decided?)",
                neutralize_line(&args.session)
            )));
        }
        let chosen = choose(&args, &waiting)?;
        for pending in &chosen {
            flags.check(pending)?;
        }
        if flags.approve {
            for plan in chosen.iter().filter_map(PendingDecision::as_plan) {
                approving(plan.payload(), flags.edited.as_deref());
            }
        }
        let mut prompt = (!flags.decides()).then(|| Prompt::new(graph));
        let mut decider = Decider {
            flags,
            prompt: prompt.as_mut(),
            flags_decide_tool_calls: true,
            json,
            store: Some(&args.store),
            detach: false,
            last: None,
            model: args.common.model.as_ref(),
        };
        let outcome = match decider.decide_each(&mut session, &chosen).await? {
            Ok(outcome) => outcome,
            Err(exit) => return Ok(exit),
        };
        // What the run asks next (other calls still waiting, a plan resubmitted after feedback,
        // a plan submitted after an answer): at the prompt, the prompt asks about it as `run`
        // and `continue` do (trial 5 L4); decided by verdict flags, it is a new decision that
        // waits for the next `decide`.
        if flags.decides() {
            decider.flags = &idle;
            decider.prompt = None;
        }
        decider.until_done(&mut session, outcome).await
    })
}

/// What `decide` decides among `waiting`: the one `--decision` names; else with a verdict flag
/// the only one waiting (more than one is a usage error, exit 2, listing their ids: name one
/// with `--decision`); else (the prompt) each in turn. An id that is not waiting is refused
/// (exit 5).
pub(crate) fn choose(
    args: &DecideArgs,
    waiting: &[PendingDecision],
) -> Result<Vec<PendingDecision>, Failure> {
    let listed = || {
        waiting
            .iter()
            .map(|c| match c {
                PendingDecision::ToolCall(call) => format!(
                    "{} ({}, argsSha256 {})",
                    neutralize_line(call.decision_id()),
                    neutralize_line(call.tool_name()),
                    neutralize_line(call.args_sha256())
                ),
                _ => format!("`{}`", neutralize_line(c.decision_id())),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let plan = waiting.iter().any(|p| p.as_plan().is_some());
    match args.decision.as_deref() {
        Some(id) => match waiting.iter().find(|c| c.decision_id() == id) {
            Some(pending) => Ok(vec![pending.clone()]),
            None if plan => Err(Failure::refused(format!(
                "session {} has no pending decision `{}`: the pending one is {}; nothing was decided",
                neutralize_line(&args.session),
                neutralize_line(id),
                listed()
            ))),
            None => Err(Failure::refused(format!(
                "session {} has no pending decision `{}`: the tool calls waiting are {}; nothing was decided",
                neutralize_line(&args.session),
                neutralize_line(id),
                listed()
            ))),
        },
        None if waiting.len() > 1 && args.common.decision.decides() => {
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

/// Says on stderr which plan `--approve` approves, whole, as the prompt shows it (the approver
/// may have read only its title in `pending`): or the edit `--plan-file` gives (`edited`).
fn approving(payload: &agent_controller::event::SuspendPayload, edited: Option<&str>) {
    let style = Style::for_stderr();
    let submission = &payload.submission;
    let origin = plan_origin(&submission.path, &submission.sha256);
    match edited {
        Some(text) => note!(
            "approving the plan \"{}\" {origin} as edited by --plan-file:\n\n{}\n",
            neutralize_line(&submission.title),
            style.render_plan("", text)
        ),
        None => note!(
            "approving the plan {origin}:\n\n{}\n",
            style.render_plan(&submission.title, &submission.plan)
        ),
    }
}
