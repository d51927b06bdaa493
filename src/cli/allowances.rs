//! `allowances list|revoke`: the workspace allowances a session store keeps
//! ([`SessionStore::list_workspace_allowances`], [`SessionStore::revoke_workspace_allowance`]).
//!
//! [`SessionStore::list_workspace_allowances`]: agent_controller::SessionStore::list_workspace_allowances
//! [`SessionStore::revoke_workspace_allowance`]: agent_controller::SessionStore::revoke_workspace_allowance

use agent_controller::allowance::Allowance;
use agent_controller::display::{json_line, neutralize_line};

use crate::cli::args::AllowancesCommand;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{open_existing, runtime};

/// Runs `allowances list` or `allowances revoke`.
pub(crate) fn allowances(command: AllowancesCommand) -> Outcome {
    match command {
        AllowancesCommand::List {
            store,
            workspace,
            json,
        } => list(&store, workspace.as_deref(), json),
        AllowancesCommand::Revoke { store, id } => revoke(&store, &id),
    }
}

fn list(spec: &str, workspace: Option<&std::path::Path>, json: bool) -> Outcome {
    let store = open_existing(spec)?;
    let workspace = match workspace {
        Some(dir) => Some(std::fs::canonicalize(dir).map_err(|e| {
            Failure::invalid(neutralize_line(&format!(
                "--workspace must be an existing directory: {}: {e}",
                dir.display()
            )))
        })?),
        None => None,
    };
    let listed = runtime()?
        .block_on(store.list_workspace_allowances(workspace.as_deref()))
        .map_err(Failure::runtime)?;
    if listed.is_empty() && !json {
        note!("no workspace allowances");
    }
    for allowance in &listed {
        if json {
            let text = json_line(allowance).map_err(Failure::runtime)?;
            say!("{text}");
        } else {
            say!("{}", line(allowance));
        }
    }
    Ok(Exit::Done)
}

/// One allowance on one line, neutralized.
fn line(a: &Allowance) -> String {
    let pattern = a
        .pattern
        .as_ref()
        .map(|p| format!(" {p}"))
        .unwrap_or_default();
    let workspace = a
        .workspace
        .as_deref()
        .map(|w| w.display().to_string())
        .unwrap_or_default();
    let by = a
        .decided_by
        .as_deref()
        .map(|b| format!(" by {b}"))
        .unwrap_or_default();
    let at = a
        .decided_at
        .as_deref()
        .map(|t| format!(" at {t}"))
        .unwrap_or_default();
    neutralize_line(&format!(
        "{}  mode {}  {}{pattern}  workspace {workspace}  (session {}, {}{by}{at})",
        a.id, a.mode_id, a.tool_name, a.session_id, a.decision_id
    ))
    .into_owned()
}

fn revoke(spec: &str, id: &str) -> Outcome {
    let store = open_existing(spec)?;
    let revoked = runtime()?
        .block_on(store.revoke_workspace_allowance(id))
        .map_err(Failure::runtime)?;
    if !revoked {
        return Err(Failure::refused(format!(
            "the store keeps no workspace allowance {}: nothing was revoked (`allowances list` shows them)",
            neutralize_line(id)
        )));
    }
    note!(
        "revoked workspace allowance {}: sessions opened from now on ask again",
        neutralize_line(id)
    );
    Ok(Exit::Done)
}
