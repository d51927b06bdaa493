//! The `agent-controller` command: `check` a mode config, draw its `graph`, print its `schema`,
//! `run` a session on it, list `pending` plans and `decide` them from a session store.
//!
//! A thin layer over the library: everything here can be done with the public API.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use agent_controller::diagram::{self, DiagramFormat};
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::store::open_store;
use agent_controller::terminal::{self, PromptAnswer, SpinnerModel, StdinLines, Style};
use agent_controller::tool::SUBMIT_PLAN;
use agent_controller::{
    AgentController, Decision, Event, LanguageModel, ModeGraph, RunOutcome, Session,
    SessionOptions, SuspendPayload, ToolRegistry, config,
};
use clap::{Args, Parser, Subcommand};

const DEFAULT_CONFIG: &str = "config/modes.toml";

/// `--model`: the built-in scripted model unless a real one is named.
const MODEL_HELP: &str = "The model: `scripted` (built in, the default) or `openai/MODEL` for an \
OpenAI-compatible endpoint (`OPENAI_API_KEY`, `OPENAI_BASE_URL`; a mode's `defaultModelId` wins; \
`openai` alone uses `OPENAI_MODEL`). Needs the `openai` feature.";

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
    /// Validate a mode config and print its modes, default mode and hand-over edges; on errors,
    /// print every one of them with its source line.
    Check {
        /// The config file.
        #[arg(default_value = DEFAULT_CONFIG)]
        config: PathBuf,
    },
    /// Draw the modes and the hand-over edges (default and planning modes marked).
    Graph {
        /// The config file.
        #[arg(default_value = DEFAULT_CONFIG)]
        config: PathBuf,
        /// The output format.
        #[arg(long, default_value = "mermaid", value_parser = parse_format)]
        format: DiagramFormat,
    },
    /// Print the JSON Schema of the config format (for editor completion and validation).
    Schema,
    /// Run one session (with the built-in scripted model, or a real one with --model).
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
    #[command(flatten)]
    common: SessionArgs,
}

/// Options `run` and `decide` share: where the config and workspace are, how plans are decided,
/// how events are printed, and which model runs.
#[derive(Debug, Args)]
struct SessionArgs {
    /// The config file.
    #[arg(long, default_value = DEFAULT_CONFIG)]
    config: PathBuf,
    /// The workspace the tools work in.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Approve the plan (every plan of a `run`).
    #[arg(long, conflicts_with = "reject")]
    approve: bool,
    /// Reject the plan (every plan of a `run`), with optional feedback.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    reject: Option<String>,
    /// Print one JSON event per line on stdout.
    #[arg(long)]
    json: bool,
    #[arg(long, default_value = "scripted", help = MODEL_HELP)]
    model: String,
}

fn parse_format(text: &str) -> Result<DiagramFormat, String> {
    text.parse()
        .map_err(|_| format!("unknown format `{text}`: use mermaid or dot"))
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    common: SessionArgs,
    /// The mode to start in (default: the config's default mode).
    #[arg(long)]
    mode: Option<String>,
    /// A plan file to submit as is (copied into the plans directory when outside it).
    #[arg(long)]
    plan: Option<PathBuf>,
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
        Command::Graph { config, format } => graph(&config, format),
        Command::Schema => {
            print!("{}", config::schema_json());
            Ok(ExitCode::SUCCESS)
        }
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
    let origin = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{origin}: cannot read config: {e}"))?;
    let tools = ToolRegistry::with_workspace_tools();
    let errors = config::check_with_tools(&text, &origin, |name| tools.knows(name));
    if !errors.is_empty() {
        for error in &errors {
            eprintln!("error: {error}\n");
        }
        let count = errors.len();
        let s = if count == 1 { "" } else { "s" };
        eprintln!("{origin}: {count} error{s}");
        return Ok(ExitCode::FAILURE);
    }
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

fn graph(path: &Path, format: DiagramFormat) -> Result<ExitCode, String> {
    let (graph, _) = load(path)?;
    print!("{}", diagram::render(&graph, format));
    Ok(ExitCode::SUCCESS)
}

/// The model `--model` names, behind a spinner (quiet with `--json` or when stdout is piped).
fn model_for(
    spec: &str,
    json: bool,
    plan: Option<&Path>,
    scripted: ScriptedModel,
) -> Result<Arc<dyn LanguageModel>, String> {
    let spin = !json && std::io::stdout().is_terminal();
    let (provider, name) = match spec.split_once('/') {
        Some((provider, name)) => (provider, Some(name)),
        None => (spec, None),
    };
    match provider {
        "scripted" => Ok(Arc::new(SpinnerModel::new(scripted, spin))),
        "openai" => openai_model(name, plan).map(|m| Arc::new(SpinnerModel::new(m, spin)) as _),
        other => Err(format!(
            "unknown model provider `{other}`: use `scripted` or `openai/MODEL`"
        )),
    }
}

#[cfg(feature = "openai")]
fn openai_model(
    name: Option<&str>,
    plan: Option<&Path>,
) -> Result<agent_controller::model::openai::OpenAiModel, String> {
    use agent_controller::model::openai::{OpenAiModel, OpenAiSettings};
    if plan.is_some() {
        return Err(
            "--plan is for the scripted model: a real model writes its own plan".to_owned(),
        );
    }
    let mut settings = OpenAiSettings::from_env();
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        settings = settings.default_model(name);
    }
    OpenAiModel::new(settings).map_err(|e| e.message)
}

#[cfg(not(feature = "openai"))]
fn openai_model(_: Option<&str>, _: Option<&Path>) -> Result<ScriptedModel, String> {
    Err("this build has no `openai` provider: rebuild with `--features openai`".to_owned())
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
    let (graph, tools) = load(&args.common.config)?;
    let start = match &args.mode {
        Some(id) => graph
            .get(id)
            .ok_or_else(|| format!("unknown mode `{id}`"))?,
        None => graph.default_mode_id(),
    };
    let scripted = args.common.model == "scripted";
    // A probe controller tells whether the start mode offers write_plan; building is cheap.
    let probe = AgentController::builder(graph.clone(), Arc::new(ScriptedModel::new()))
        .tools(tools.clone())
        .workspace(&args.common.workspace)
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
    let plan_path = if scripted && (offers_submit || args.plan.is_some()) {
        place_plan(&args, &probe, offers_write_plan)?
    } else {
        None
    };
    let scripted_model = match plan_path {
        Some(path) => ScriptedModel::with_plan_path(path),
        None => ScriptedModel::new(),
    };
    let model = model_for(
        &args.common.model,
        args.common.json,
        args.plan.as_deref(),
        scripted_model,
    )?;
    let mut builder = AgentController::builder(graph.clone(), model)
        .tools(tools)
        .workspace(&args.common.workspace);
    if let Some(spec) = &args.store {
        builder = builder.store(open_store(spec).map_err(|e| e.to_string())?);
    }
    let controller = builder.build().map_err(|e| e.to_string())?;
    let mut options =
        SessionOptions::new().on_event(event_printer(args.common.json, graph.clone()));
    if let Some(mode) = &args.mode {
        options = options.mode(mode.clone());
    }
    let fixed = fixed_decision(args.common.approve, args.common.reject.as_deref());
    let runtime = runtime()?;
    runtime.block_on(async {
        let mut session = controller
            .start_session(options)
            .await
            .map_err(|e| e.to_string())?;
        // Ctrl-C while the model works stops the run; the session keeps the mode it is in now.
        let outcome = tokio::select! {
            outcome = session.send_message(args.prompt.clone()) => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(outcome) = outcome else {
            return Ok(interrupted(&session));
        };
        let outcome = outcome.map_err(|e| e.to_string())?;
        let stop_at_suspension = args.detach.then_some(args.store.as_deref()).flatten();
        let mut prompt = fixed.is_none().then(|| Prompt::new(graph));
        decide_until_done(
            &mut session,
            outcome,
            fixed.as_ref(),
            prompt.as_mut(),
            args.common.json,
            stop_at_suspension,
        )
        .await
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// Says where a Ctrl-C outside the prompt left the session; exit status 130.
fn interrupted(session: &Session) -> ExitCode {
    eprintln!("\ninterrupted: the mode stays `{}`", session.mode().id());
    ExitCode::from(130)
}

/// The approval prompt on the terminal: the plan rendered on stderr, answers from stdin.
struct Prompt {
    style: Style,
    input: StdinLines,
    graph: ModeGraph,
}

impl Prompt {
    fn new(graph: ModeGraph) -> Self {
        Self {
            style: Style::for_stderr(),
            input: StdinLines::spawn(),
            graph,
        }
    }

    /// Shows the plan and asks; `None` when Ctrl-C dismissed the prompt.
    async fn ask(&mut self, session: &Session, payload: &SuspendPayload) -> Option<Decision> {
        let graph = &self.graph;
        let target = graph
            .get(&payload.target_mode_id)
            .map_or_else(|| session.mode(), |id| graph.mode(id));
        eprintln!(
            "\n{}\n{}",
            self.style
                .render_plan(&payload.submission.title, &payload.submission.plan),
            plan_origin(&payload.submission.path, &payload.submission.sha256)
        );
        let answer = terminal::ask(
            &self.style,
            target,
            &mut self.input,
            &mut std::io::stderr(),
            tokio::signal::ctrl_c(),
        )
        .await;
        if let Some(notice) = answer.notice(session.mode().id()) {
            eprintln!("{notice}");
        }
        match answer {
            PromptAnswer::Decided(decision) => Some(decision),
            PromptAnswer::EndOfInput => Some(Decision::reject()),
            PromptAnswer::Interrupted => None,
        }
    }
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

/// Answers suspended plans (with `fixed`, or with the `prompt`) until the run ends; with
/// `detach_store`, stops at the first suspension and says how to decide it later. Ctrl-C at the
/// prompt aborts the suspended run (not approved); Ctrl-C while the model works stops the run.
async fn decide_until_done(
    session: &mut Session,
    mut outcome: RunOutcome,
    fixed: Option<&Decision>,
    mut prompt: Option<&mut Prompt>,
    json: bool,
    detach_store: Option<&str>,
) -> Result<ExitCode, String> {
    let out_style = Style::for_stdout();
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
        let decision = match (fixed, prompt.as_deref_mut()) {
            (Some(decision), _) => decision.clone(),
            (None, None) => Decision::reject(),
            (None, Some(prompt)) => match prompt.ask(session, payload).await {
                Some(decision) => decision,
                None => {
                    session.abort().await.map_err(|e| e.to_string())?;
                    finish(session, json, &out_style);
                    return Ok(ExitCode::from(130));
                }
            },
        };
        let next = tokio::select! {
            next = session.resume(run_id, tool_call_id, decision) => Some(next),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(next) = next else {
            return Ok(interrupted(session));
        };
        outcome = next.map_err(|e| e.to_string())?;
    }
    finish(session, json, &out_style);
    Ok(match outcome {
        RunOutcome::Failed { message, .. } => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
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
    let (graph, tools) = load(&args.common.config)?;
    let store = open_store(&args.store).map_err(|e| e.to_string())?;
    let model = model_for(
        &args.common.model,
        args.common.json,
        None,
        ScriptedModel::new(),
    )?;
    let controller = AgentController::builder(graph.clone(), model)
        .tools(tools)
        .workspace(&args.common.workspace)
        .store(store)
        .build()
        .map_err(|e| e.to_string())?;
    let json = args.common.json;
    let fixed = fixed_decision(args.common.approve, args.common.reject.as_deref());
    runtime()?.block_on(async {
        let options = SessionOptions::new().on_event(event_printer(json, graph.clone()));
        let mut session = controller
            .restore_session(&args.session, options)
            .await
            .map_err(|e| e.to_string())?;
        let Some(pending) = session.pending().cloned() else {
            return Err(format!("session {} has no pending plan", args.session));
        };
        let decision = match &fixed {
            Some(d) => d.clone(),
            None => match Prompt::new(graph).ask(&session, pending.payload()).await {
                Some(decision) => decision,
                None => {
                    eprintln!("the plan stays pending in the store");
                    return Ok(ExitCode::from(130));
                }
            },
        };
        let outcome = tokio::select! {
            outcome = session.resume(pending.run_id(), pending.tool_call_id(), decision) => Some(outcome),
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(outcome) = outcome else {
            return Ok(interrupted(&session));
        };
        let outcome = outcome.map_err(|e| e.to_string())?;
        // A plan resubmitted after feedback is a new decision: leave it pending for the next `decide`.
        decide_until_done(&mut session, outcome, None, None, json, Some(&args.store)).await
    })
}

/// Where the shown plan came from, so the person knows what approving binds to.
fn plan_origin(path: &str, sha256: &str) -> String {
    let short = sha256.get(..12).unwrap_or(sha256);
    format!("(plan file {path}, sha256 {short}...)")
}

/// The closing line: the mode the session ends in.
fn finish(session: &agent_controller::Session, json: bool, style: &Style) {
    if !json {
        if style.is_colored() {
            println!("mode: {}", style.mode_label(session.mode()));
        } else {
            println!("mode: {}", session.mode().id());
        }
    }
}

/// The event subscriber of `run` and `decide`: JSON lines, or readable lines where modes show as
/// their coloured labels on a terminal.
fn event_printer(json: bool, graph: ModeGraph) -> impl FnMut(&Event) + Send + 'static {
    let style = Style::for_stdout();
    move |event| print_event(event, json, &graph, &style)
}

fn print_event(event: &Event, json: bool, graph: &ModeGraph, style: &Style) {
    // On a terminal, modes show as their coloured labels; piped output keeps the bare ids.
    let mode = |id: &str| match graph.get(id) {
        Some(m) if style.is_colored() => style.mode_label(graph.mode(m)),
        _ => id.to_owned(),
    };
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
        } => format!("session {session_id} started in mode {}", mode(mode_id)),
        Event::AgentStart { run_id, mode_id } => {
            format!("[{run_id}] started in mode {}", mode(mode_id))
        }
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
            format!(
                "mode changed: {} -> {} ({reason})",
                mode(previous_mode_id),
                mode(mode_id)
            )
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
