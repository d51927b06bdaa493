//! `acp`: an Agent Client Protocol agent on stdin and stdout, for editors (the library's
//! [`agent_controller::acp`] with the CLI's config, tools, model and store).

use std::path::Path;
use std::sync::Arc;

use agent_controller::acp::AcpAgent;
use agent_controller::config::ManagedWatch;
use agent_controller::display::neutralize;
use agent_controller::model::SpecChooser;
use agent_controller::model::scripted::ScriptedModel;
use agent_controller::store::open_store;
use agent_controller::{AgentController, LanguageModel};

use crate::cli::args::{AcpArgs, DEFAULT_CONFIG};
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{check_workspace, sources, with_tools};

/// `acp`: serves one client until it closes stdin. Each session works in the `cwd` the client
/// gives (with `--workspace`, only in that directory), with `--config` or the workspace's own
/// `config/modes.toml`.
pub(crate) fn acp(args: AcpArgs) -> Outcome {
    let only = match &args.workspace {
        Some(dir) => {
            check_workspace(dir)?;
            Some(dir.canonicalize().map_err(Failure::runtime)?)
        }
        None => None,
    };
    let model: Arc<dyn LanguageModel> = if args.model.is_scripted() {
        Arc::new(ScriptedModel::new())
    } else {
        Arc::new(
            args.model
                .open()
                .map_err(|e| Failure::invalid(e.message()))?,
        )
    };
    let store = match &args.store {
        Some(spec) => Some(open_store(spec).map_err(Failure::runtime)?),
        None => None,
    };
    let has_store = store.is_some();
    let listed = store.clone();
    let listed_in = only.clone();
    // The `model` option offers the agent's own model by its spec (the scripted model, a test
    // double, is not offered), beside the modes' `defaultModelId`s; a choice is built by spec.
    let own_model = (!args.model.is_scripted()).then(|| args.model.to_string());
    let config = args.config.clone();
    let lease = args.lease;
    // The client's MCP servers (`mcpServers`: those the editor's user configured) are taken,
    // started once this has checked the session's workspace and config; a config's own
    // `[[mcpServers]]` are not started here.
    let agent = AcpAgent::with_mcp(move |cwd: &Path| {
        if let Some(only) = &only {
            let cwd = cwd.canonicalize()?;
            if &cwd != only {
                return Err(
                    format!("this agent works in {} only (--workspace)", only.display()).into(),
                );
            }
        }
        let (path, sources) = match &config {
            Some(path) => (path.clone(), sources(path, None)),
            None => (
                cwd.join(DEFAULT_CONFIG),
                sources(Path::new(DEFAULT_CONFIG), Some(cwd)),
            ),
        };
        let graph = sources.load()?.graph()?;
        let (graph, tools) = with_tools(graph).map_err(|f| f.message)?;
        let mut builder = AgentController::builder(graph, model.clone())
            .tools(tools)
            .workspace(cwd)
            .protected_path(&path);
        // Every layer file: the local one beside the config too.
        for file in sources.files() {
            builder = builder.protected_path(file);
        }
        let mut builder = builder
            .managed_watch(ManagedWatch::new(sources))
            .model_chooser(SpecChooser);
        if let Some(id) = &own_model {
            builder = builder.model_id(id.clone());
        }
        if let Some(store) = &store {
            builder = builder.store(store.clone()).lease_duration(lease);
        }
        Ok(builder)
    })
    .load_session(has_store)
    .list_page_size(args.list_page_size)
    .max_message_bytes(args.max_message_bytes)
    .decided_by(decided_by());
    let agent = match listed {
        Some(store) => agent.list_sessions(store, listed_in.as_deref()),
        None => agent,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Failure::runtime)?;
    runtime
        .block_on(agent.serve_stdio())
        .map_err(|e| Failure::runtime(neutralize(&e.to_string())))?;
    // The runtime's blocking stdin reader cannot be interrupted; do not wait for it.
    runtime.shutdown_background();
    Ok(Exit::Done)
}

/// Who decides through the editor: the OS user, as `--by` defaults to elsewhere (the agent adds
/// the editor's name, and each record says it came through ACP).
fn decided_by() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|user| !user.trim().is_empty())
        .unwrap_or_else(|| "acp-client".to_owned())
}
