//! `explain`: what a mode would do with one tool call, and each step of why, without running
//! anything ([`AgentController::explain`], [`agent_controller::Session::explain`]).

use std::path::Path;
use std::sync::Arc;

use agent_controller::display::{json_line, neutralize, neutralize_line};
use agent_controller::explain::{ExplainError, Explanation, Outcome as Verdict};
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{AgentController, SessionOptions};

use crate::cli::args::{DEFAULT_CONFIG, ExplainArgs};
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{load, runtime, stored_session, stored_session_args};

/// Runs `explain`: the explanation on stdout (text, or one JSON object with --json); exit 0
/// allowed, 4 it would wait, 3 refused or not offered, 2 bad input.
pub(crate) fn explain(args: ExplainArgs) -> Outcome {
    let call_args: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| Failure::invalid(format!("ARGS_JSON is not JSON: {e}")))?;
    let explained = match (&args.session, &args.store) {
        (Some(session), Some(store)) => in_session(&args, store, session.clone(), call_args)?,
        _ => in_mode(&args, call_args)?,
    };
    if args.json {
        say!("{}", json_line(&explained).map_err(Failure::runtime)?);
    } else {
        say!("{}", explained.to_string().trim_end());
    }
    Ok(exit_of(explained.outcome))
}

/// The exit status of an outcome, as the CLI's other commands read theirs.
pub(crate) fn exit_of(outcome: Verdict) -> Exit {
    match outcome {
        Verdict::Allow => Exit::Done,
        Verdict::Ask => Exit::Pending,
        Verdict::Deny | Verdict::Unavailable => Exit::NotApproved,
    }
}

/// The call in `--mode` of a new session under `--config`, in the current directory.
fn in_mode(args: &ExplainArgs, call_args: serde_json::Value) -> Result<Explanation, Failure> {
    let path = args.config.clone().unwrap_or_else(|| DEFAULT_CONFIG.into());
    let (graph, tools) = load(&path)?;
    let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .tools(tools)
        .workspace(Path::new("."))
        .protected_path(&path)
        .build()
        .map_err(Failure::invalid)?;
    let mode = args.mode.as_deref().unwrap_or_default();
    controller
        .explain(mode, &args.tool, call_args)
        .map_err(failure)
}

/// The call in stored session `session`'s current mode, with its allowances and plan.
fn in_session(
    args: &ExplainArgs,
    store: &str,
    mut session: String,
    call_args: serde_json::Value,
) -> Result<Explanation, Failure> {
    let mut common = stored_session_args(args.config.clone(), None, args.json)?;
    // Nothing runs: no model is opened, and a changed config is ruled as it is now.
    common.model = Some(agent_controller::model::ModelSpec::Scripted);
    let (controller, _) = stored_session(&mut common, store, &mut session, true)?;
    runtime()?.block_on(async {
        let restored = controller
            .restore_session(&session, SessionOptions::new())
            .await?;
        if let Some(mode) = &args.mode
            && mode != restored.mode().id()
        {
            return Err(Failure::invalid(neutralize_line(&format!(
                "session {session} is in mode `{}`, not `{mode}`: leave --mode out, or name its mode",
                restored.mode().id()
            ))));
        }
        restored.explain(&args.tool, call_args).map_err(failure)
    })
}

/// Bad input (exit 2): an unknown mode or tool, arguments that do not fit.
fn failure(error: ExplainError) -> Failure {
    Failure::invalid(neutralize(&error.to_string()))
}
