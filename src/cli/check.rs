//! `check`: validates a mode config and prints its modes, default mode and hand-over edges.

use std::path::Path;

use agent_controller::config::ConfigError;
use agent_controller::display::{neutralize, neutralize_line};
use agent_controller::{RequireApproval, ToolRegistry, config};

use crate::cli::args::DEFAULT_CONFIG;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{load, tools};

/// `check`: every error and warning of the config at `path` on stderr, each with its source
/// line (exit 2 on errors), else its modes, default mode and hand-over edges on stdout.
pub(crate) fn check(path: &Path) -> Outcome {
    let Diagnosis { errors, warnings } = diagnose(path, &tools())?;
    if !errors.is_empty() {
        return Ok(Exit::Invalid);
    }
    let origin = path.display().to_string();
    let origin = neutralize_line(&origin);
    let (graph, _) = load(path)?;
    let default = graph.default_mode_id();
    let warned = if warnings.is_empty() {
        String::new()
    } else {
        format!(", {}", counted(warnings.len(), "warning"))
    };
    say!("{origin}: ok, {}{warned}", counted(graph.len(), "mode"));
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
            None if mode.is_planning() => "all read-only and plan tools".to_owned(),
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
    Ok(Exit::Done)
}

/// A config's errors and warnings ([`diagnose`]).
pub(crate) struct Diagnosis {
    pub(crate) errors: Vec<ConfigError>,
    pub(crate) warnings: Vec<ConfigError>,
}

/// The errors and warnings of the config at `path` against `tools`, as `check` and `verify`
/// report them ([`config::check_with_tool_names`], [`config::warnings_with_tools`]): each on
/// stderr with its source line, by position, then `CONFIG: N errors` when there are any.
///
/// # Errors
/// A file that cannot be read (exit 2).
pub(crate) fn diagnose(path: &Path, tools: &ToolRegistry) -> Result<Diagnosis, Failure> {
    let origin = path.display().to_string();
    // The default `config/modes.toml` is the current directory's: read only where it lies
    // inside it (a symlink out of it is refused unread), as `run` reads a workspace's.
    let text = if path == Path::new(DEFAULT_CONFIG) {
        config::read_in(".", path)
    } else {
        config::read(path)
    }
    .map_err(|e| Failure::invalid(neutralize(&e.to_string())))?;
    let names: Vec<&str> = tools.names().collect();
    let mut errors = config::check_with_tool_names(&text, &origin, &names);
    errors.extend(config::rule_errors(&text, &origin, tools));
    errors.sort_by_key(ConfigError::location);
    let mut warnings = config::warnings_with_tools(&text, &origin, tools);
    // The current directory is the workspace `run` defaults to.
    warnings.extend(config::workspace_warnings(&text, &origin, Path::new(".")));
    let mut reports: Vec<(&str, &ConfigError)> = errors
        .iter()
        .map(|e| ("error", e))
        .chain(warnings.iter().map(|w| ("warning", w)))
        .collect();
    reports.sort_by_key(|(_, e)| e.location());
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
    Ok(Diagnosis { errors, warnings })
}

/// `1 mode`, `2 modes`.
pub(crate) fn counted(count: usize, noun: &str) -> String {
    let s = if count == 1 { "" } else { "s" };
    format!("{count} {noun}{s}")
}
