//! The one controller setup every command shares: the config, the workspace, the model, the store.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_controller::controller::session_workspace;
use agent_controller::display::{neutralize, neutralize_line};
use agent_controller::jail::Jail;
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::model::{ModelChooser, ModelSpec, SpecChooser};
use agent_controller::store::{
    ConfigCheck, IdPrefixError, RecordedConfig, SessionRecord, SessionStore, StoreError,
    open_existing_store, resolve_prefix, resolve_session_id,
};
use agent_controller::terminal::SpinnerModel;
use agent_controller::{
    AgentController, LanguageModel, ModeGraph, SessionError, ToolRegistry, config,
};

use crate::cli::args::{DEFAULT_CONFIG, SessionArgs};
use crate::cli::exit::Failure;

/// The tools every command works with (`check` and `verify` check a config against them, the
/// session commands run them): the built-in workspace tools.
pub(crate) fn tools() -> ToolRegistry {
    ToolRegistry::with_workspace_tools()
}

/// `--no-user-config` and `--only FILE`, as the command line set them (once, in `main`).
static LAYER_FLAGS: std::sync::OnceLock<LayerFlags> = std::sync::OnceLock::new();

/// Which config layers the command line leaves out ([`config::ConfigSources`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct LayerFlags {
    /// `--no-user-config`: skip the user's file.
    pub(crate) no_user_config: bool,
    /// `--only FILE`: that file alone (and the managed one).
    pub(crate) only: Option<PathBuf>,
}

/// Keeps the command line's layer flags for every command's config reads.
pub(crate) fn set_layer_flags(flags: LayerFlags) {
    let _ = LAYER_FLAGS.set(flags);
}

/// The config layers of the project file `path` (read only inside `inside` when given: a
/// workspace's own default config), as `--no-user-config` and `--only` say.
pub(crate) fn sources(path: &Path, inside: Option<&Path>) -> config::ConfigSources {
    let flags = LAYER_FLAGS.get().cloned().unwrap_or_default();
    if let Some(only) = &flags.only {
        return config::ConfigSources::new(only).only();
    }
    let sources = match inside {
        Some(dir) => config::ConfigSources::new(path).inside(dir),
        None => config::ConfigSources::new(path),
    };
    if flags.no_user_config {
        sources.no_user_config()
    } else {
        sources
    }
}

/// The merged layers of the config at `path`; the default `config/modes.toml` (the current
/// directory's) is read only where it lies inside the current directory.
pub(crate) fn layers(path: &Path) -> Result<config::Layers, config::ConfigError> {
    let inside = (path == Path::new(DEFAULT_CONFIG)).then_some(Path::new("."));
    sources(path, inside).load()
}

/// Every file of the config at `path` ([`layers`]: its layers, present or not), for a
/// controller to protect from the tools.
pub(crate) fn config_files(path: &Path) -> Vec<PathBuf> {
    let inside = (path == Path::new(DEFAULT_CONFIG)).then_some(Path::new("."));
    sources(path, inside).files()
}

/// A watch on the managed file of the config at `path` ([`layers`]), for a controller whose
/// sessions should see its change at their next step ([`config::ManagedWatch`]).
pub(crate) fn watch(path: &Path) -> config::ManagedWatch {
    let inside = (path == Path::new(DEFAULT_CONFIG)).then_some(Path::new("."));
    config::ManagedWatch::new(sources(path, inside))
}

/// The merged graph of the config at `path` ([`layers`]).
pub(crate) fn graph_of(path: &Path) -> Result<ModeGraph, config::ConfigError> {
    layers(path)?.graph()
}

/// The config at `path` (merged with its layers: [`layers`]), with the CLI's tools.
pub(crate) fn load(path: &Path) -> Result<(ModeGraph, ToolRegistry), Failure> {
    let graph = graph_of(path).map_err(|e| Failure::invalid(neutralize(&e.to_string())))?;
    with_tools(graph)
}

/// The graph with the CLI's tools, refusing a config that names a tool they lack.
pub(crate) fn with_tools(graph: ModeGraph) -> Result<(ModeGraph, ToolRegistry), Failure> {
    with_tools_beside(graph, &[])
}

/// [`with_tools`], the tools named in `elsewhere` known too: the tools of the calls a stored
/// session waits on, which the host that ran it has (a tool of the user's own, whose answer
/// `decide` records for that host to carry the run on).
fn with_tools_beside(
    graph: ModeGraph,
    elsewhere: &[String],
) -> Result<(ModeGraph, ToolRegistry), Failure> {
    let tools = tools();
    let names: Vec<&str> = tools
        .names()
        .chain(elsewhere.iter().map(String::as_str))
        .collect();
    if let Some(unknown) = graph.unknown_tools_among(&names).into_iter().next() {
        return Err(Failure::invalid(unknown));
    }
    Ok((graph, tools))
}

/// [`load`] for a command that runs a session (`run`, `decide`, `continue`): the config's
/// warnings ([`config::warnings_with_tools`], [`config::workspace_warnings`]) go to stderr
/// first, as `check` prints them.
/// Without `--config`, the config is `config/modes.toml` in the workspace, read only where it
/// lies inside it ([`config::load_in`]: a symlink out of the workspace is refused, unread).
pub(crate) fn load_warning(
    common: &SessionArgs,
    workspace: &Path,
) -> Result<(PathBuf, ModeGraph, ToolRegistry), Failure> {
    load_checked(common, workspace, |_| Ok(()), &[])
}

/// [`load_warning`], with `check` run on the parsed config before anything else happens (its
/// MCP servers start, its warnings are printed); the tools named in `elsewhere` are known
/// beside the CLI's ([`with_tools_beside`]).
fn load_checked(
    common: &SessionArgs,
    workspace: &Path,
    check: impl FnOnce(&ModeGraph) -> Result<(), Failure>,
    elsewhere: &[String],
) -> Result<(PathBuf, ModeGraph, ToolRegistry), Failure> {
    let path = config_path(common, workspace);
    let layers = match &common.config {
        Some(_) => sources(&path, None),
        None => sources(Path::new(DEFAULT_CONFIG), Some(workspace)),
    }
    .load()
    .map_err(|e| {
        let hint = match (&common.config, e.kind()) {
            (None, config::ConfigErrorKind::Io) if !e.message().contains("managed config") => {
                " (the workspace's own config must lie inside it; name one elsewhere with --config)"
            }
            _ => "",
        };
        Failure::invalid(format!("{}{hint}", neutralize(&e.to_string())))
    })?;
    let graph = layers.graph().map_err(Failure::invalid)?;
    check(&graph)?;
    let (graph, mut tools) = with_tools_beside(graph, elsewhere)?;
    crate::cli::mcp::start(&graph, workspace, common.config.is_some(), &mut tools)?;
    let (text, origin) = (layers.text(), layers.origin());
    let mut warnings = config::warnings_with_tools(text, origin, &tools);
    warnings.extend(config::workspace_warnings(text, origin, workspace));
    let mut warnings = layers.remap_all(warnings);
    warnings.extend(layers.warnings().iter().cloned());
    for warning in warnings {
        note!("warning: {}", neutralize(&warning.to_string()));
    }
    Ok((path, graph, tools))
}

/// The model `--model` names, behind a spinner (quiet with `--json` or when stdout is piped):
/// `scripted` for the scripted model given, else the provider [`ModelSpec::open`] opens.
pub(crate) fn model_for(
    spec: &ModelSpec,
    json: bool,
    plan: Option<&Path>,
    scripted: ScriptedModel,
) -> Result<Arc<dyn LanguageModel>, Failure> {
    let spin = !json && std::io::stdout().is_terminal();
    if spec.is_scripted() {
        return Ok(Arc::new(SpinnerModel::new(scripted, spin)));
    }
    if plan.is_some() {
        return Err(Failure::invalid(
            "--plan is for the scripted model: a real model writes its own plan",
        ));
    }
    let model = spec.open().map_err(|e| Failure::invalid(e.message()))?;
    Ok(Arc::new(SpinnerModel::new(model, spin)))
}

/// The store `pending` and `decide` read: one that does not exist is a usage error (exit 2),
/// not an empty store created on the spot.
pub(crate) fn open_existing(spec: &str) -> Result<Arc<dyn SessionStore>, Failure> {
    open_existing_store(spec).map_err(|e| match e {
        StoreError::Missing(_) => Failure::invalid(neutralize_line(&e.to_string())),
        other => Failure::runtime(other),
    })
}

/// `--workspace` must be a directory that exists: checked before anything runs (exit 2).
pub(crate) fn check_workspace(workspace: &Path) -> Result<(), Failure> {
    Jail::open(workspace).map(drop).map_err(|e| {
        Failure::invalid(neutralize_line(&format!(
            "--workspace must be an existing directory: {e}"
        )))
    })
}

/// The config file `run`, `decide` and `continue` load: `--config`, else `config/modes.toml`
/// in the workspace they act in.
pub(crate) fn config_path(common: &SessionArgs, workspace: &Path) -> PathBuf {
    match &common.config {
        Some(config) => config.clone(),
        None if workspace == Path::new(".") => PathBuf::from(DEFAULT_CONFIG),
        None => workspace.join(DEFAULT_CONFIG),
    }
}

/// The one controller setup of `run`, `decide` and `continue`: the loaded config and its tools,
/// the workspace, the config file protected from the tools, the model, and the store with the
/// lease of the runs this process carries on.
pub(crate) fn controller(
    common: &SessionArgs,
    workspace: &Path,
    config: &Path,
    (graph, tools): (ModeGraph, ToolRegistry),
    model: Arc<dyn LanguageModel>,
    store: Option<Arc<dyn SessionStore>>,
) -> Result<AgentController, Failure> {
    controller_beside(common, workspace, config, (graph, tools), model, store, &[])
}

/// [`controller`], the tools named in `elsewhere` another host's
/// ([`agent_controller::AgentControllerBuilder::tools_elsewhere`]).
fn controller_beside(
    common: &SessionArgs,
    workspace: &Path,
    config: &Path,
    (graph, tools): (ModeGraph, ToolRegistry),
    model: Arc<dyn LanguageModel>,
    store: Option<Arc<dyn SessionStore>>,
    elsewhere: &[String],
) -> Result<AgentController, Failure> {
    // An approval may choose the next mode's model by a `--model` spec, behind the spinner.
    let spin = !common.json && std::io::stdout().is_terminal();
    let chooser = move |id: &str| -> Result<Arc<dyn LanguageModel>, String> {
        let model = SpecChooser.build(id)?;
        Ok(Arc::new(SpinnerModel::new(model, spin)))
    };
    let layers = match &common.config {
        Some(_) => sources(config, None),
        None => sources(Path::new(DEFAULT_CONFIG), Some(workspace)),
    };
    let mut builder = AgentController::builder(graph, model)
        .tools(tools)
        .workspace(workspace)
        .protected_path(config)
        .model_chooser(chooser)
        .tools_elsewhere(elsewhere.iter().cloned());
    // Every layer file, not only the one named: a build step that wrote the local layer
    // beside it (`modes.local.toml`) would widen the next run.
    for file in layers.files() {
        builder = builder.protected_path(file);
    }
    // A change to the managed config reaches the session at its next step.
    let mut builder = builder.managed_watch(config::ManagedWatch::new(layers));
    if let Some(store) = store {
        builder = builder.store(store).lease_duration(common.lease);
    }
    builder.build().map_err(Failure::invalid)
}

/// The one setup of `decide`, `continue`, `switch` and `allowances revoke --session`, which act
/// on a session a store keeps: the `--workspace` they may name must exist (exit 2) and
/// `--plan-file` is read and checked before anything else; the store must exist (exit 2, none
/// is created); the workspace is the one the session recorded ([`recorded_workspace`]); the
/// config is the file the session ran under ([`RecordedConfig::path`], where it still is; else
/// the workspace's own `config/modes.toml`), unless `--config` names one; and the controller is
/// built over it. A config that lets the session's modes do more than the one it ran under is
/// refused (exit 5, naming what changed) unless `allow_config_change` (the command's
/// `--allow-config-change`); one that only narrows them passes with a note ([`check_config`]).
/// A prefix of the session id and of `--sha256` is resolved to the whole id and hash
/// ([`resolve_ids`]). Returns the controller and its mode graph.
///
/// [`RecordedConfig::path`]: agent_controller::store::RecordedConfig::path
pub(crate) fn stored_session(
    common: &mut SessionArgs,
    store: &str,
    session: &mut String,
    allow_config_change: bool,
) -> Result<(AgentController, ModeGraph), Failure> {
    if let Some(named) = &common.workspace {
        check_workspace(named)?;
    }
    common.decision.prepare()?;
    let store = open_existing(store)?;
    resolve_ids(&*store, session, &mut common.decision.sha256)?;
    let session = session.as_str();
    let workspace = recorded_workspace(&*store, session, common.workspace.as_deref())?;
    let record = runtime()?
        .block_on(store.load(session))
        .map_err(Failure::runtime)?;
    if common.config.is_none() {
        common.config = record
            .as_ref()
            .and_then(|r| ran_under(r.config.as_ref()?, &workspace));
    }
    let check = |graph: &ModeGraph| match &record {
        Some(record) => check_config(record, graph, allow_config_change),
        None => Ok(()),
    };
    // The tools of the calls the session waits on are the host's that ran it: a config naming
    // one the CLI lacks is taken (`decide` records the answer for that host).
    let elsewhere: Vec<String> = record
        .iter()
        .flat_map(|r| &r.pending_suspensions)
        .map(|p| p.suspend_payload.tool_name.clone())
        .collect();
    let (config, graph, tools) = load_checked(common, &workspace, check, &elsewhere)?;
    if common.model.is_none() {
        common.model = record.as_ref().map(recorded_model).transpose()?.flatten();
    }
    let spec = common.model.clone().unwrap_or_default();
    let model = model_for(&spec, common.json, None, ScriptedModel::new())?;
    let controller = controller_beside(
        common,
        &workspace,
        &config,
        (graph.clone(), tools),
        model,
        Some(store),
        &elsewhere,
    )?;
    Ok((controller, graph))
}

/// The key of a session's metadata that keeps the model `run --model` named ([`model_metadata`]).
pub(crate) const MODEL_KEY: &str = "model";

/// The metadata `run` records for the model `--model` named, which `decide` and `continue`
/// run with again when they name none ([`recorded_model`]).
pub(crate) fn model_metadata(spec: &ModelSpec) -> serde_json::Map<String, serde_json::Value> {
    let mut metadata = serde_json::Map::new();
    metadata.insert(MODEL_KEY.to_owned(), spec.to_string().into());
    metadata
}

/// The model a stored session's `run --model` named ([`model_metadata`]); `None` when it named
/// none. One the record names that this build cannot parse is refused (exit 2), naming it.
fn recorded_model(record: &SessionRecord) -> Result<Option<ModelSpec>, Failure> {
    let Some(named) = record.metadata.get(MODEL_KEY) else {
        return Ok(None);
    };
    let spec = named
        .as_str()
        .and_then(|text| text.parse::<ModelSpec>().ok());
    match spec {
        Some(spec) => Ok(Some(spec)),
        None => Err(Failure::invalid(format!(
            "session {} records the model {} it ran with, which is no model spec: name one with --model",
            neutralize_line(&record.session_id),
            neutralize_line(&named.to_string())
        ))),
    }
}

/// The file a session ran under (`recorded`), to read again in its place: `None` when it is the
/// workspace's own `config/modes.toml` (read as the default is, inside the workspace) or is no
/// longer a file (the workspace's own is read then, and compared).
fn ran_under(recorded: &RecordedConfig, workspace: &Path) -> Option<PathBuf> {
    let path = PathBuf::from(&recorded.path);
    if !path.is_absolute() || !path.is_file() {
        return None;
    }
    let default = std::path::absolute(workspace.join(DEFAULT_CONFIG)).ok();
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    match default {
        Some(default) if same(&path, &default) => None,
        _ => Some(path),
    }
}

/// Compares `graph` with the config stored session `record` ran under (its fingerprint, then
/// what each mode may do: [`RecordedConfig::change_to`]). The same config passes; one that only
/// narrows what the modes may do passes with a note naming the change; one that lets them do
/// more is refused (exit 5) with what would do more, unless `allowed` (then a warning says so).
/// A record that does not say what its config let the modes do (written before it did) and a
/// config of another fingerprint count as one that does more.
fn check_config(record: &SessionRecord, graph: &ModeGraph, allowed: bool) -> Result<(), Failure> {
    let who = neutralize_line(&record.session_id);
    let was = record
        .config
        .as_ref()
        .map(|c| neutralize_line(&c.path).into_owned())
        .unwrap_or_default();
    match record.config_check(graph) {
        ConfigCheck::Unknown => {
            let what = format!(
                "session {who} ran under another config than this one, and its record does not say what that config let its modes do"
            );
            if allowed {
                note!("warning: {what}; it is acted on under this config, as allowed");
                return Ok(());
            }
            Err(Failure::refused(format!(
                "{what}: nothing was done (name the config it ran under with --config, or pass --allow-config-change to run it under this one)"
            )))
        }
        ConfigCheck::Narrows(change) => {
            let what = match change.is_empty() {
                true => "in nothing its modes may do".to_owned(),
                false => neutralize_line(&change.to_string()).into_owned(),
            };
            note!(
                "note: this config differs from the one session {who} ran under ({was}): {what}; it only narrows what the modes may do"
            );
            Ok(())
        }
        ConfigCheck::Same => Ok(()),
        // Widens, and any kind a later release adds: refused unless allowed.
        check => {
            let wider = neutralize_line(&check.wider()).into_owned();
            if allowed {
                note!(
                    "warning: session {who} is acted on, as allowed, under a config that lets its modes do more than the one it ran under ({was}): {wider}"
                );
                return Ok(());
            }
            Err(Failure::refused(format!(
                "this config lets the modes of session {who} do more than the one it ran under ({was}): {wider}; nothing was done (pass --allow-config-change to run it under this config anyway)"
            )))
        }
    }
}

/// The shared session flags with their defaults, for a command that acts on a stored session
/// without running it (`switch`, `allowances revoke --session`), and the ones it takes.
pub(crate) fn stored_session_args(
    config: Option<PathBuf>,
    workspace: Option<PathBuf>,
    json: bool,
) -> Result<SessionArgs, Failure> {
    use clap::{Args, FromArgMatches};
    let command = SessionArgs::augment_args(clap::Command::new("stored"));
    let matches = command
        .try_get_matches_from(["stored"])
        .map_err(|e| Failure::runtime(e.to_string()))?;
    let mut common =
        SessionArgs::from_arg_matches(&matches).map_err(|e| Failure::runtime(e.to_string()))?;
    common.config = config;
    common.workspace = workspace;
    common.json = json;
    Ok(common)
}

/// What `pending` shows, `decide` and `continue` take: a session id prefix becomes the session's
/// id, a `--sha256` prefix the whole hash of the plan (or the tool call's `argsSha256`) pending
/// in it ([`resolve_session_id`], [`resolve_prefix`]); an ambiguous or too short prefix is a
/// usage error (exit 2) naming the candidates. A prefix no hash has is left as given, and
/// refused when the decision is pinned.
fn resolve_ids(
    store: &dyn SessionStore,
    session: &mut String,
    sha256: &mut Option<String>,
) -> Result<(), Failure> {
    *session = resolve_session(store, session)?;
    let rt = runtime()?;
    let Some(pinned) = sha256.as_mut().filter(|p| p.len() < 64) else {
        return Ok(());
    };
    let listing = rt
        .block_on(store.list_pending_decisions())
        .map_err(Failure::runtime)?;
    let hashes = listing
        .pending
        .iter()
        .filter(|p| p.session_id == *session)
        .map(|p| p.args_sha256.as_deref().unwrap_or(&p.sha256));
    if let Some(full) = resolve_prefix("sha256", pinned, hashes).map_err(prefix_failure)? {
        *pinned = full.to_owned();
    }
    Ok(())
}

/// The id of the session `session` names: its id, or a unique prefix of it
/// ([`resolve_session_id`]); an ambiguous or too short prefix is a usage error (exit 2).
pub(crate) fn resolve_session(store: &dyn SessionStore, session: &str) -> Result<String, Failure> {
    runtime()?
        .block_on(resolve_session_id(store, session))
        .map_err(prefix_failure)
}

/// An id prefix that names no one thing: a usage error (exit 2), or the store's failure.
fn prefix_failure(error: IdPrefixError) -> Failure {
    match error {
        IdPrefixError::Store(e) => Failure::runtime(e),
        other => Failure::invalid(neutralize_line(&other.to_string())),
    }
}

/// The workspace `decide` and `continue` act in: the one session `id` recorded when it started
/// (its canonical path), as the library's [`session_workspace`] checks it. `--workspace`
/// (`named`) may name it again, and naming another directory is refused (exit 2, naming both); a
/// recorded workspace that is gone or is another directory now is refused (exit 5). A record
/// from before workspaces were recorded needs `--workspace` (exit 2 without it), and adopts it.
/// An unknown session is refused (exit 5).
pub(crate) fn recorded_workspace(
    store: &dyn SessionStore,
    id: &str,
    named: Option<&Path>,
) -> Result<PathBuf, Failure> {
    runtime()?
        .block_on(session_workspace(store, id, named))
        .map_err(|error| match error {
            SessionError::NoWorkspaceRecorded { .. } => {
                Failure::invalid(format!("--workspace DIR is needed: {error}"))
            }
            SessionError::WrongWorkspace { .. } => {
                Failure::invalid(format!("--workspace: {error}"))
            }
            other => other.into(),
        })
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::runtime)
}
