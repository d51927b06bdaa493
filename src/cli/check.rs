//! `check`: validates a mode config and prints its modes, default mode and hand-over edges.

use std::path::Path;

use agent_controller::config::ConfigError;
use agent_controller::display::{neutralize, neutralize_line};
use agent_controller::tool::tasks::TASK_TOOLS;
use std::sync::Arc;

use agent_controller::model::scripted::ScriptedModel;
use agent_controller::{
    AgentController, ModeGraph, ToolRegistry, config, mode::RequireApproval, tool::ToolAccess,
};

use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::output::emit;
use crate::cli::setup::{load, tools};

/// `check`: every error and warning of the config at `path` on stderr, each with its source
/// line (exit 2 on errors), else its modes, default mode and hand-over edges on stdout.
///
/// `origin` (`--origin`): the merged config instead, each line after the file:line it came
/// from ([`config::Layers::with_origins`]).
pub(crate) fn check(path: &Path, connect: bool, origin: bool) -> Outcome {
    let Diagnosis {
        errors,
        warnings,
        layers,
    } = diagnose(path, &tools())?;
    if !errors.is_empty() {
        return Ok(Exit::Invalid);
    }
    let (graph, tools) = load(path)?;
    if !rule_tests_pass(&graph, tools, path, Some(&layers))? {
        return Ok(Exit::Invalid);
    }
    if origin {
        emit(format_args!("{}", neutralize(&layers.with_origins())));
        return Ok(Exit::Done);
    }
    let origin = layers.origin().to_owned();
    let origin = neutralize_line(&origin);
    let default = graph.default_mode_id();
    let warned = if warnings.is_empty() {
        String::new()
    } else {
        format!(", {}", counted(warnings.len(), "warning"))
    };
    say!("{origin}: ok, {}{warned}", counted(graph.len(), "mode"));
    // The task tools are registered once a mode lists one (the guide's page `tasks`); then a
    // mode with no list offers them too, as it offers ask_user.
    let tasks_registered = graph.ids().any(|id| {
        graph
            .mode(id)
            .available_tools()
            .is_some_and(|list| list.iter().any(|t| TASK_TOOLS.contains(&&**t)))
    });
    for id in graph.ids() {
        let mode = graph.mode(id);
        let mut marks = Vec::new();
        if id == default {
            marks.push("default");
        }
        if mode.is_planning() {
            marks.push("planning");
        }
        let tools = match mode.available_tools() {
            Some(list) => list.iter().map(|t| &**t).collect::<Vec<_>>().join(", "),
            None if mode.is_planning() => format!(
                "all read-only and plan tools ({} among them)",
                if tasks_registered {
                    "ask_user and the task tools"
                } else {
                    "ask_user"
                }
            ),
            None => "all".to_owned(),
        };
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!(" [{}]", marks.join(", "))
        };
        let approval = match mode.require_approval() {
            RequireApproval::None => String::new(),
            RequireApproval::All => "  requireApproval: every tool".to_owned(),
            RequireApproval::Tools(list) => format!(
                "  requireApproval: {}",
                list.iter().map(|t| &**t).collect::<Vec<_>>().join(", ")
            ),
        };
        let timeout = mode
            .approval_timeout()
            .map(|t| format!("  approvalTimeout: {t}"))
            .unwrap_or_default();
        say!(
            "  {} ({}){marks}  tools: {}{}{timeout}",
            mode.id(),
            neutralize_line(mode.name()),
            neutralize_line(&tools),
            neutralize_line(&approval)
        );
        for (i, rule) in mode.rules().as_slice().iter().enumerate() {
            say!("    rule {}: {}", i + 1, neutralize_line(&rule.to_string()));
        }
    }
    say!("default mode: {}", graph.default_mode().id());
    say!("hand-over edges (on approval):");
    for (from, to) in graph.transition_edges() {
        let chosen = if to == graph.transition_target(from) {
            ""
        } else {
            " (when chosen at approval)"
        };
        say!(
            "  {} -> {}{chosen}",
            graph.mode(from).id(),
            graph.mode(to).id()
        );
    }
    if connect {
        return connected(&graph);
    }
    Ok(Exit::Done)
}

/// `check --connect`: starts the config's MCP servers in the current directory and prints each
/// server's tools and what each mode offers; exit 2 when a mode lists a tool its server lacks
/// or a server does not start.
fn connected(graph: &ModeGraph) -> Outcome {
    let workspace = Path::new(".");
    let mcp = crate::cli::mcp::started(graph, workspace)?;
    let mut problems = 0;
    say!("MCP servers:");
    if mcp.reports().is_empty() {
        say!("  none needed");
    }
    for report in mcp.reports() {
        match &report.tools {
            Ok(tools) => say!("  {}: {}", report.id, counted(tools.len(), "tool")),
            Err(e) => {
                problems += 1;
                say!("  {}: {}", report.id, neutralize_line(&e.to_string()));
            }
        }
        for refused in &report.refused {
            say!("    refused: {}", neutralize_line(refused));
        }
    }
    for (mode, name) in crate::cli::mcp::missing(graph, mcp) {
        problems += 1;
        note!("error: mode `{mode}` lists `{name}`, which its MCP server does not offer");
    }
    let mut tools = ToolRegistry::with_workspace_tools();
    mcp.register(&mut tools).map_err(Failure::invalid)?;
    let controller = AgentController::builder(graph.clone(), Arc::new(ScriptedModel::new()))
        .tools(tools)
        .build()
        .map_err(Failure::invalid)?;
    say!("offered per mode:");
    for id in graph.ids() {
        let names: Vec<String> = controller
            .tool_specs(id)
            .iter()
            .map(|spec| {
                let access = match spec.access {
                    ToolAccess::ReadOnly => " (read-only)",
                    ToolAccess::Plans => " (plans)",
                    _ => "",
                };
                format!("{}{access}", spec.name)
            })
            .collect();
        say!(
            "  {}: {}",
            graph.mode(id).id(),
            neutralize_line(&if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            })
        );
    }
    if problems > 0 {
        return Ok(Exit::Invalid);
    }
    Ok(Exit::Done)
}

/// Runs the config's rule tests (`[[tests]]`) in the current directory, as `run` would rule
/// their calls there ([`AgentController::rule_test_errors`]): each failing one on stderr as an
/// error with its source line, then `CONFIG: N failed rule tests`; whether all passed.
pub(crate) fn rule_tests_pass(
    graph: &ModeGraph,
    tools: ToolRegistry,
    path: &Path,
    layers: Option<&config::Layers>,
) -> Result<bool, Failure> {
    if graph.rule_tests().is_empty() {
        return Ok(true);
    }
    let controller = AgentController::builder(graph.clone(), Arc::new(ScriptedModel::new()))
        .tools(tools)
        .workspace(Path::new("."))
        .protected_path(path)
        .build()
        .map_err(Failure::invalid)?;
    let failed = controller.rule_test_errors();
    let failed = match layers {
        Some(layers) => layers.remap_all(failed),
        None => failed,
    };
    for error in &failed {
        note!("error: {}\n", neutralize(&error.to_string()));
    }
    if failed.is_empty() {
        return Ok(true);
    }
    note!(
        "{}: {}",
        neutralize_line(&path.display().to_string()),
        counted(failed.len(), "failed rule test")
    );
    Ok(false)
}

/// A config's errors and warnings ([`diagnose`]).
pub(crate) struct Diagnosis {
    pub(crate) errors: Vec<ConfigError>,
    pub(crate) warnings: Vec<ConfigError>,
    /// The config's layers, merged.
    pub(crate) layers: config::Layers,
}

/// The errors and warnings of the config at `path` against `tools`, as `check` and `verify`
/// report them ([`config::check_with_tool_names`], [`config::warnings_with_tools`]): each on
/// stderr with its source line, by position, then `CONFIG: N errors` when there are any.
///
/// # Errors
/// A file that cannot be read (exit 2).
pub(crate) fn diagnose(path: &Path, tools: &ToolRegistry) -> Result<Diagnosis, Failure> {
    // The default `config/modes.toml` is the current directory's: read only where it lies
    // inside it (a symlink out of it is refused unread), as `run` reads a workspace's. The
    // config is merged with its layers ([`crate::cli::setup::layers`]); each error is placed
    // in the file that has it.
    let layers = crate::cli::setup::layers(path)
        .map_err(|e| Failure::invalid(neutralize(&e.to_string())))?;
    let (text, origin) = (layers.text(), layers.origin().to_owned());
    let names: Vec<&str> = tools.names().collect();
    let mut errors = config::check_with_tool_names(text, &origin, &names);
    errors.extend(config::rule_errors(text, &origin, tools));
    errors.extend(config::workspace_errors(text, &origin, Path::new(".")));
    let mut errors = layers.remap_all(errors);
    errors.sort_by(|a, b| (a.origin(), a.location()).cmp(&(b.origin(), b.location())));
    let mut warnings = config::warnings_with_tools(text, &origin, tools);
    // The current directory is the workspace `run` defaults to.
    warnings.extend(config::workspace_warnings(text, &origin, Path::new(".")));
    let mut warnings = layers.remap_all(warnings);
    warnings.extend(layers.warnings().iter().cloned());
    let mut reports: Vec<(&str, &ConfigError)> = errors
        .iter()
        .map(|e| ("error", e))
        .chain(warnings.iter().map(|w| ("warning", w)))
        .collect();
    reports.sort_by(|(_, a), (_, b)| (a.origin(), a.location()).cmp(&(b.origin(), b.location())));
    for (level, report) in &reports {
        note!("{level}: {}\n", neutralize(&report.to_string()));
    }
    if !errors.is_empty() {
        note!(
            "{}: {}",
            neutralize_line(&origin),
            counted(errors.len(), "error")
        );
    }
    Ok(Diagnosis {
        errors,
        warnings,
        layers,
    })
}

/// `1 mode`, `2 modes`.
pub(crate) fn counted(count: usize, noun: &str) -> String {
    let s = if count == 1 { "" } else { "s" };
    format!("{count} {noun}{s}")
}
