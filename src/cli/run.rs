//! `run`: runs one session, deciding its plans with the flags or the prompt.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_controller::display::neutralize_line;
use agent_controller::jail::Jail;
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::store::open_store;
use agent_controller::tool::SUBMIT_PLAN;
use agent_controller::tool::submit_plan::{self, PlanError};
use agent_controller::{AgentController, SessionError, SessionOptions};

use crate::cli::args::RunArgs;
use crate::cli::decider::{Decider, interrupted};
use crate::cli::events::event_printer;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::prompt::Prompt;
use crate::cli::setup::{
    check_workspace, controller, load_warning, model_for, model_metadata, runtime,
};

/// `run`: starts a session in the workspace (placing the scripted model's plan first), sends
/// the prompt and decides what the run suspends on ([`Decider`]) until it ends; Ctrl-C while
/// the model works ends the run (exit 130).
pub(crate) fn run(mut args: RunArgs) -> Outcome {
    let workspace = args
        .common
        .workspace
        .clone()
        .unwrap_or_else(|| PathBuf::from("."));
    check_workspace(&workspace)?;
    args.common.decision.prepare()?;
    let (config, graph, tools) = load_warning(&args.common, &workspace)?;
    let start = match &args.mode {
        Some(id) => graph
            .get(id)
            .ok_or_else(|| Failure::from(SessionError::unknown_mode(id, &graph)))?,
        None => graph.default_mode_id(),
    };
    let spec = args.common.model.clone().unwrap_or_default();
    let scripted = spec.is_scripted();
    // A probe controller tells whether the start mode offers write_plan; building is cheap.
    let probe = controller(
        &args.common,
        &workspace,
        &config,
        (graph.clone(), tools.clone()),
        Arc::new(ScriptedModel::new()),
        None,
    )?;
    let offers_write_plan = probe
        .tool_specs(start)
        .iter()
        .any(|s| &*s.name == "write_plan");
    let offers_submit = probe
        .tool_specs(start)
        .iter()
        .any(|s| &*s.name == SUBMIT_PLAN);
    let plan_path = if scripted && (offers_submit || args.plan.is_some()) {
        place_plan(&args, &probe, offers_write_plan, offers_submit)?
    } else {
        None
    };
    let scripted_model = match plan_path {
        Some(path) => ScriptedModel::with_plan_path(path),
        None => ScriptedModel::new(),
    };
    let model = model_for(
        &spec,
        args.common.json,
        args.plan.as_deref(),
        scripted_model,
    )?;
    let store = match &args.store {
        Some(spec) => Some(open_store(spec).map_err(Failure::runtime)?),
        None => None,
    };
    let controller = controller(
        &args.common,
        &workspace,
        &config,
        (graph.clone(), tools),
        model,
        store,
    )?;
    let mut options =
        SessionOptions::new().on_event(event_printer(args.common.json, graph.clone(), false));
    if let Some(mode) = &args.mode {
        options = options.mode(mode.clone());
    }
    // The model named is the session's: `decide` and `continue` run with it again.
    if let Some(named) = &args.common.model {
        options = options.metadata(model_metadata(named));
    }
    let runtime = runtime()?;
    runtime.block_on(async {
        let mut session = controller.start_session(options).await?;
        // Ctrl-C while the model works stops the run; the session keeps the mode it is in now.
        let outcome = tokio::select! {
            outcome = session.send_message(args.prompt.clone()) => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(outcome) = outcome else {
            return Ok(interrupted(&mut session).await);
        };
        let outcome = outcome?;
        // The verdict flags decide plans only: a tool call is asked about at the prompt.
        let mut prompt = Prompt::new(graph);
        let mut decider = Decider {
            flags: &args.common.decision,
            prompt: Some(&mut prompt),
            flags_decide_tool_calls: false,
            json: args.common.json,
            store: args.store.as_deref(),
            detach: args.detach,
            last: None,
            model: args.common.model.as_ref(),
        };
        let exit = decider.until_done(&mut session, outcome).await?;
        // A `--plan` that was never approved (refused, or rejected) is not a completed job.
        Ok(match (exit, &args.plan, decider.last) {
            (Exit::Done, Some(_), None) => Exit::NotApproved,
            _ => exit,
        })
    })
}

/// Places the plan the scripted model will submit, when it cannot write one itself: the file
/// `--plan` names, checked as `submit_plan` checks a plan (`.md`, a regular file of at most 1 MiB,
/// UTF-8, not blank) before anything is copied, or a plan written from the prompt. Never
/// replaces a file in the plans directory (a pending plan of another session, or anything else):
/// a taken name gets a fresh one (`name-2.md`).
pub(crate) fn place_plan(
    args: &RunArgs,
    controller: &AgentController,
    start_offers_write_plan: bool,
    start_offers_submit: bool,
) -> Result<Option<String>, Failure> {
    if let Some(plan) = &args.plan {
        let shown = plan.display().to_string();
        let refused = |e: &dyn Display| Failure::invalid(neutralize_line(&format!("--plan: {e}")));
        if !start_offers_submit {
            let why = format!(
                "{shown}: the start mode is not a planning mode (it does not offer {SUBMIT_PLAN}); start in one with --mode"
            );
            return Err(refused(&why));
        }
        if !submit_plan::is_markdown(&shown) {
            return Err(refused(&PlanError::NotMarkdown(shown)));
        }
        let text = submit_plan::read_plan_file(plan).map_err(|e| refused(&e))?;
        if let Some(inside) = inside_plans_dir(plan, controller) {
            return Ok(Some(inside));
        }
        let name = plan
            .file_name()
            .ok_or_else(|| Failure::invalid("--plan names no file"))?;
        let copied = write_into_plans_dir(controller, Path::new(name), text.as_bytes())?;
        note!(
            "(copied {} to {})",
            neutralize_line(&shown),
            neutralize_line(&copied)
        );
        return Ok(Some(copied));
    }
    if start_offers_write_plan {
        return Ok(None);
    }
    let name = ScriptedModel::plan_file_name(&args.prompt);
    let text = ScriptedModel::plan_for(&args.prompt, &[]);
    write_into_plans_dir(controller, Path::new(&name), text.as_bytes()).map(Some)
}

/// `plan`'s path relative to the workspace when it already lies inside the plans directory.
pub(crate) fn inside_plans_dir(plan: &Path, controller: &AgentController) -> Option<String> {
    let source = plan.canonicalize().ok()?;
    let dir = controller.plans_dir().canonicalize().ok()?;
    let rest = source.strip_prefix(&dir).ok()?;
    let plans_rel = controller.modes().plans_dir();
    Some(plans_rel.join(rest).display().to_string())
}

/// Writes `bytes` under a fresh name in the plans directory (through its directory handle);
/// returns the path relative to the workspace.
pub(crate) fn write_into_plans_dir(
    controller: &AgentController,
    name: &Path,
    bytes: &[u8],
) -> Result<String, Failure> {
    let plans_rel = controller.modes().plans_dir();
    let label = format!("the plans directory {}", plans_rel.display());
    let written = Jail::open(controller.workspace())
        .and_then(|ws| ws.subdir(plans_rel, true, &label))
        .and_then(|plans| plans.write_new(name, bytes))
        .map_err(|e| {
            Failure::runtime(neutralize_line(&format!(
                "cannot write the plan into {}: {e}",
                plans_rel.display()
            )))
        })?;
    Ok(plans_rel.join(written).display().to_string())
}
