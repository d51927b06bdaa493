//! The `agent-controller` command: `check` a mode config, `run` a session on it.
//!
//! A thin layer over the library: everything here can be done with the public API.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use agent_controller::model::scripted::ScriptedModel;
use agent_controller::store::open_store;
use agent_controller::tool::SUBMIT_PLAN;
use agent_controller::{
    AgentController, Decision, Event, ModeGraph, RunOutcome, Session, SessionOptions, ToolRegistry,
    config,
};
use clap::{Args, Parser, Subcommand};

const DEFAULT_CONFIG: &str = "config/modes.toml";

#[derive(Debug, Parser)]
#[command(
    name = "agent-controller",
    version,
    about = "Plan/build mode controller for agent harnesses"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a mode config and print its modes, default mode and hand-over edges.
    Check {
        /// The config file.
        #[arg(default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Run one session with the built-in scripted model.
    Run(RunArgs),
    /// List the plans waiting for a decision in a session store.
    Pending {
        /// The store: a directory, or `sqlite:FILE`.
        #[arg(long)]
        store: String,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Decide a pending plan from a session store, in a fresh process, and carry the run on.
    Decide(DecideArgs),
}

#[derive(Debug, Args)]
struct DecideArgs {
    /// The store: a directory, or `sqlite:FILE`.
    #[arg(long)]
    store: String,
    /// The session whose pending plan to decide.
    session: String,
    /// The config file.
    #[arg(long, default_value = DEFAULT_CONFIG)]
    config: PathBuf,
    /// The workspace the tools work in.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Approve the plan.
    #[arg(long, conflicts_with = "reject")]
    approve: bool,
    /// Reject the plan, with optional feedback.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    reject: Option<String>,
    /// Print one JSON event per line on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The config file.
    #[arg(long, default_value = DEFAULT_CONFIG)]
    config: PathBuf,
    /// The workspace the tools work in.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// The mode to start in (default: the config's default mode).
    #[arg(long)]
    mode: Option<String>,
    /// A plan file to submit as is (copied into the plans directory when outside it).
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Approve every plan of the run.
    #[arg(long, conflicts_with = "reject")]
    approve: bool,
    /// Reject every plan of the run, with optional feedback.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    reject: Option<String>,
    /// Print one JSON event per line on stdout.
    #[arg(long)]
    json: bool,
    /// Persist the session in this store (a directory, or `sqlite:FILE`).
    #[arg(long)]
    store: Option<String>,
    /// With --store: stop once a plan is suspended and print the session and run ids.
    #[arg(long, requires = "store")]
    detach: bool,
    /// The user's message.
    #[arg(default_value = "Plan the next change")]
    prompt: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { config } => check(&config),
        Command::Run(args) => run(args),
        Command::Pending { store, json } => pending(&store, json),
        Command::Decide(args) => decide(args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &Path) -> Result<(ModeGraph, ToolRegistry), String> {
    let graph = config::load(path).map_err(|e| e.to_string())?;
    let tools = ToolRegistry::with_workspace_tools();
    graph
        .check_tools(|name| tools.knows(name))
        .map_err(|e| e.to_string())?;
    Ok((graph, tools))
}

fn check(path: &Path) -> Result<ExitCode, String> {
    let (graph, _) = load(path)?;
    let default = graph.default_mode_id();
    println!("{}: ok, {} modes", path.display(), graph.len());
    for id in graph.ids() {
        let mode = graph.mode(id);
        let mut marks = Vec::new();
        if id == default {
            marks.push("default".to_owned());
        }
        if mode.is_planning() {
            marks.push("planning".to_owned());
        }
        let tools = match mode.available_tools() {
            Some(list) => list.iter().map(|t| &**t).collect::<Vec<_>>().join(", "),
            None => "all".to_owned(),
        };
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!(" [{}]", marks.join(", "))
        };
        println!("  {} ({}){marks}  tools: {tools}", mode.id(), mode.name());
    }
    println!("default mode: {}", graph.default_mode().id());
    println!("hand-over edges (on approval):");
    for (from, to) in graph.handover_edges() {
        println!("  {} -> {}", graph.mode(from).id(), graph.mode(to).id());
    }
    Ok(ExitCode::SUCCESS)
}

/// Places the plan the scripted model will submit, when it cannot write one itself.
fn place_plan(
    args: &RunArgs,
    controller: &AgentController,
    start_offers_write_plan: bool,
) -> Result<Option<String>, String> {
    let plans_dir = controller.plans_dir();
    let workspace = controller.workspace();
    let relative = |p: &Path| -> String {
        let ws = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_owned());
        p.strip_prefix(&ws).unwrap_or(p).display().to_string()
    };
    if let Some(plan) = &args.plan {
        let source = plan
            .canonicalize()
            .map_err(|e| format!("--plan {}: {e}", plan.display()))?;
        std::fs::create_dir_all(plans_dir)
            .map_err(|e| format!("cannot create {}: {e}", plans_dir.display()))?;
        let dir = plans_dir.canonicalize().map_err(|e| e.to_string())?;
        if source.starts_with(&dir) {
            return Ok(Some(relative(&source)));
        }
        let name = source.file_name().ok_or("--plan names no file")?;
        let target = dir.join(name);
        std::fs::copy(&source, &target).map_err(|e| format!("cannot copy the plan: {e}"))?;
        eprintln!("(copied {} to {})", plan.display(), relative(&target));
        return Ok(Some(relative(&target)));
    }
    if start_offers_write_plan {
        return Ok(None);
    }
    std::fs::create_dir_all(plans_dir)
        .map_err(|e| format!("cannot create {}: {e}", plans_dir.display()))?;
    let dir = plans_dir.canonicalize().map_err(|e| e.to_string())?;
    let target = dir.join(ScriptedModel::plan_file_name(&args.prompt));
    std::fs::write(&target, ScriptedModel::plan_for(&args.prompt, &[]))
        .map_err(|e| e.to_string())?;
    Ok(Some(relative(&target)))
}

fn run(args: RunArgs) -> Result<ExitCode, String> {
    let (graph, tools) = load(&args.config)?;
    let start = match &args.mode {
        Some(id) => graph
            .get(id)
            .ok_or_else(|| format!("unknown mode `{id}`"))?,
        None => graph.default_mode_id(),
    };
    // A probe controller tells whether the start mode offers write_plan; building is cheap.
    let probe = AgentController::builder(graph.clone(), Arc::new(ScriptedModel::new()))
        .tools(tools.clone())
        .workspace(&args.workspace)
        .build()
        .map_err(|e| e.to_string())?;
    let offers_write_plan = probe
        .tool_specs(start)
        .iter()
        .any(|s| &*s.name == "write_plan");
    let offers_submit = probe
        .tool_specs(start)
        .iter()
        .any(|s| &*s.name == SUBMIT_PLAN);
    let plan_path = if offers_submit || args.plan.is_some() {
        place_plan(&args, &probe, offers_write_plan)?
    } else {
        None
    };
    let model = match plan_path {
        Some(path) => ScriptedModel::with_plan_path(path),
        None => ScriptedModel::new(),
    };
    let mut builder = AgentController::builder(graph, Arc::new(model))
        .tools(tools)
        .workspace(&args.workspace);
    if let Some(spec) = &args.store {
        builder = builder.store(open_store(spec).map_err(|e| e.to_string())?);
    }
    let controller = builder.build().map_err(|e| e.to_string())?;
    let json = args.json;
    let mut options = SessionOptions::new().on_event(move |event| print_event(event, json));
    if let Some(mode) = &args.mode {
        options = options.mode(mode.clone());
    }
    let mut session = controller
        .start_session(options)
        .map_err(|e| e.to_string())?;
    let fixed = fixed_decision(args.approve, args.reject.as_deref());
    let runtime = runtime()?;
    runtime.block_on(async {
        let outcome = session
            .send_message(args.prompt.clone())
            .await
            .map_err(|e| e.to_string())?;
        let stop_at_suspension = args.detach.then_some(args.store.as_deref()).flatten();
        decide_until_done(
            &mut session,
            outcome,
            fixed.as_ref(),
            json,
            stop_at_suspension,
        )
        .await
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())
}

fn fixed_decision(approve: bool, reject: Option<&str>) -> Option<Decision> {
    if approve {
        Some(Decision::approve())
    } else {
        reject.map(|f| {
            if f.trim().is_empty() {
                Decision::reject()
            } else {
                Decision::reject_with(f)
            }
        })
    }
}

/// Answers suspended plans (with `fixed`, or by asking on stdin) until the run ends; with
/// `detach_store`, stops at the first suspension and says how to decide it later.
async fn decide_until_done(
    session: &mut Session,
    mut outcome: RunOutcome,
    fixed: Option<&Decision>,
    json: bool,
    detach_store: Option<&str>,
) -> Result<ExitCode, String> {
    let mut stdin = std::io::stdin().lock();
    while let RunOutcome::Suspended {
        run_id,
        tool_call_id,
        payload,
    } = &outcome
    {
        if let Some(store) = detach_store {
            if !json {
                println!(
                    "suspended: session {} run {run_id} tool call {tool_call_id}",
                    session.id()
                );
            }
            eprintln!(
                "decide later with: agent-controller decide --store {store} {} --approve | --reject [FEEDBACK]",
                session.id()
            );
            return Ok(ExitCode::SUCCESS);
        }
        let decision = match fixed {
            Some(d) => d.clone(),
            None => ask(
                &payload.submission.title,
                &payload.submission.plan,
                &payload.target_mode_id,
                &mut stdin,
            ),
        };
        outcome = session
            .resume(run_id, tool_call_id, decision)
            .await
            .map_err(|e| e.to_string())?;
    }
    if !json {
        println!("mode: {}", session.mode().id());
    }
    Ok(match outcome {
        RunOutcome::Failed { .. } => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

fn pending(spec: &str, json: bool) -> Result<ExitCode, String> {
    let store = open_store(spec).map_err(|e| e.to_string())?;
    let pending = runtime()?
        .block_on(store.list_pending())
        .map_err(|e| e.to_string())?;
    for p in &pending {
        if json {
            println!("{}", serde_json::to_string(p).map_err(|e| e.to_string())?);
        } else {
            println!(
                "{}\t{}\t{}\t{} -> {}\t{}",
                p.session_id, p.run_id, p.tool_call_id, p.mode_id, p.target_mode_id, p.title
            );
        }
    }
    if !json && pending.is_empty() {
        eprintln!("no pending plans");
    }
    Ok(ExitCode::SUCCESS)
}

fn decide(args: DecideArgs) -> Result<ExitCode, String> {
    let (graph, tools) = load(&args.config)?;
    let store = open_store(&args.store).map_err(|e| e.to_string())?;
    let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
        .tools(tools)
        .workspace(&args.workspace)
        .store(store)
        .build()
        .map_err(|e| e.to_string())?;
    let json = args.json;
    let fixed = fixed_decision(args.approve, args.reject.as_deref());
    runtime()?.block_on(async {
        let options = SessionOptions::new().on_event(move |event| print_event(event, json));
        let mut session = controller
            .restore_session(&args.session, options)
            .await
            .map_err(|e| e.to_string())?;
        let Some(pending) = session.pending().cloned() else {
            return Err(format!("session {} has no pending plan", args.session));
        };
        let decision = match &fixed {
            Some(d) => d.clone(),
            None => {
                let plan = &pending.payload().submission;
                ask(
                    &plan.title,
                    &plan.plan,
                    &pending.payload().target_mode_id,
                    &mut std::io::stdin().lock(),
                )
            }
        };
        let outcome = session
            .resume(pending.run_id(), pending.tool_call_id(), decision)
            .await
            .map_err(|e| e.to_string())?;
        // A plan resubmitted after feedback is a new decision: leave it pending for the next `decide`.
        decide_until_done(&mut session, outcome, None, json, Some(&args.store)).await
    })
}

/// Shows the plan on stderr and reads the decision from stdin.
fn ask(title: &str, plan: &str, target: &str, input: &mut impl BufRead) -> Decision {
    let mut err = std::io::stderr().lock();
    let shown_title = if title.is_empty() {
        "(untitled plan)"
    } else {
        title
    };
    let _ = writeln!(err, "\n=== Plan: {shown_title} ===\n{plan}\n");
    loop {
        let _ = write!(
            err,
            "Approve and switch to `{target}`? [y]es / [n]o / or type feedback to reject with: "
        );
        let _ = err.flush();
        let mut line = String::new();
        let answer = match input.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.as_str()),
        };
        if answer.is_none() {
            let _ = writeln!(err, "\n(end of input: not approved, the mode stays)");
        }
        if let Some(decision) = Decision::from_answer(answer) {
            return decision;
        }
    }
}

fn print_event(event: &Event, json: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(event) {
            println!("{line}");
        }
        return;
    }
    let line = match event {
        Event::SessionStarted {
            session_id,
            mode_id,
        } => format!("session {session_id} started in mode {mode_id}"),
        Event::AgentStart { run_id, mode_id } => format!("[{run_id}] started in mode {mode_id}"),
        Event::AssistantMessage { text, .. } => format!("model: {text}"),
        Event::ToolStart {
            tool_name, args, ..
        } => format!("tool {tool_name} {args}"),
        Event::ToolSuspended {
            suspend_payload, ..
        } => format!(
            "plan submitted: \"{}\" ({}), sha256 {}; waiting for a decision",
            suspend_payload.submission.title,
            suspend_payload.submission.path,
            suspend_payload.submission.sha256
        ),
        Event::ToolEnd {
            tool_name,
            result,
            is_error,
            ..
        } => {
            let status = if *is_error { "error" } else { "ok" };
            let first = result.lines().next().unwrap_or("");
            format!("tool {tool_name} {status}: {first}")
        }
        Event::ModeChanged {
            mode_id,
            previous_mode_id,
            reason,
        } => {
            format!("mode changed: {previous_mode_id} -> {mode_id} ({reason})")
        }
        Event::ToolSuspensionCancelled {
            tool_name, reason, ..
        } => format!("{tool_name} cancelled ({reason}): not approved"),
        Event::AgentEnd { run_id, reason } => format!("[{run_id}] ended: {reason}"),
        Event::Error { message } => format!("error: {message}"),
        _ => return,
    };
    println!("{line}");
}
