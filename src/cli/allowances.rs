//! `allowances list|revoke`: the workspace allowances a session store keeps
//! ([`SessionStore::list_workspace_allowances`], [`SessionStore::revoke_workspace_allowance`]),
//! or with `--session` those of one stored session ([`stored_allowances`],
//! [`Session::revoke_allowance`]).
//!
//! [`SessionStore::list_workspace_allowances`]: agent_controller::SessionStore::list_workspace_allowances
//! [`SessionStore::revoke_workspace_allowance`]: agent_controller::SessionStore::revoke_workspace_allowance
//! [`stored_allowances`]: agent_controller::session::stored_allowances
//! [`Session::revoke_allowance`]: agent_controller::Session::revoke_allowance

use std::path::{Path, PathBuf};

use agent_controller::allowance::{Allowance, AllowanceScope};
use agent_controller::display::{json_line, neutralize_line};
use agent_controller::session::stored_allowances;
use agent_controller::{SessionOptions, SessionStore};

use crate::cli::args::AllowancesCommand;
use crate::cli::exit::{Exit, Failure, Outcome};
use crate::cli::setup::{
    open_existing, resolve_session, runtime, stored_session, stored_session_args,
};
use crate::cli::switch::lost;

/// Runs `allowances list` or `allowances revoke`.
pub(crate) fn allowances(command: AllowancesCommand) -> Outcome {
    match command {
        AllowancesCommand::List {
            store,
            session: Some(session),
            json,
            ..
        } => list_session(&store, &session, json),
        AllowancesCommand::List {
            store,
            workspace,
            json,
            ..
        } => list(&store, workspace.as_deref(), json),
        AllowancesCommand::Revoke {
            store,
            session: Some(session),
            config,
            workspace,
            id,
        } => revoke_session(&store, session, config, workspace, &id),
        AllowancesCommand::Revoke { store, id, .. } => revoke(&store, &id),
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

/// `allowances list --session`: what the stored session keeps, read from the store (no config),
/// each with its scope and whether it is in force in the session's mode.
fn list_session(spec: &str, session: &str, json: bool) -> Outcome {
    let store = open_existing(spec)?;
    let id = resolve_session(&*store, session)?;
    let (mode_id, kept) =
        session_allowances(&*store, &id)?.ok_or_else(|| Failure::refused(unknown_session(&id)))?;
    let who = neutralize_line(&id);
    if kept.is_empty() && !json {
        note!("session {who} keeps no allowances");
    }
    for allowance in &kept {
        let in_force = allowance.mode_id == mode_id;
        if json {
            let mut value = serde_json::to_value(allowance).map_err(Failure::runtime)?;
            value["inForce"] = in_force.into();
            say!("{}", json_line(&value).map_err(Failure::runtime)?);
        } else {
            let force = if in_force {
                "in force".to_owned()
            } else {
                format!(
                    "not in force: the session is in mode {}",
                    neutralize_line(&mode_id)
                )
            };
            say!("{}  {}  {force}", allowance.scope, line(allowance));
        }
    }
    Ok(Exit::Done)
}

/// The mode stored session `id` is in and the allowances it keeps ([`stored_allowances`]);
/// `None`: the store keeps no such session.
pub(crate) fn session_allowances(
    store: &dyn SessionStore,
    id: &str,
) -> Result<Option<(String, Vec<Allowance>)>, Failure> {
    runtime()?.block_on(async {
        let Some(record) = store.load(id).await.map_err(Failure::runtime)? else {
            return Ok(None);
        };
        let kept = stored_allowances(store, &record)
            .await
            .map_err(Failure::runtime)?;
        Ok::<_, Failure>(Some((record.mode_id, kept)))
    })
}

fn unknown_session(id: &str) -> String {
    format!(
        "the store keeps no session {}: nothing was listed or revoked (`pending` lists sessions)",
        neutralize_line(id)
    )
}

/// One allowance on one line, neutralized: id, mode, tool and pattern, the workspace of a
/// workspace one, the session and decision that gave it, who and when.
fn line(a: &Allowance) -> String {
    // An approved plan's: the writes to its files, by every tool that writes.
    let pattern = match &a.plan {
        Some(grant) => format!(
            " writes to {} (the approved plan's files, planScope {})",
            grant.files.entries().join(", "),
            grant.plan_scope
        ),
        None => part(" ", a.pattern.as_ref()),
    };
    let workspace = part("  workspace ", a.workspace.as_deref().map(Path::display));
    let by = part(" by ", a.decided_by.as_deref());
    let at = part(" at ", a.decided_at.as_deref());
    neutralize_line(&format!(
        "{}  mode {}  {}{pattern}{workspace}  (session {}, {}{by}{at})",
        a.id, a.mode_id, a.tool_name, a.session_id, a.decision_id
    ))
    .into_owned()
}

/// The part of a [`line`] that says `value` after `label`, or nothing when there is no value.
fn part(label: &str, value: Option<impl std::fmt::Display>) -> String {
    value.map(|v| format!("{label}{v}")).unwrap_or_default()
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

/// `allowances revoke --session`: restores the session (its recorded workspace and config, as
/// `decide` does) and revokes its allowance `id`, saved as any change to it: one that lost to
/// another writer is refused (exit 5) and nothing is revoked.
fn revoke_session(
    spec: &str,
    mut session: String,
    config: Option<PathBuf>,
    workspace: Option<PathBuf>,
    id: &str,
) -> Outcome {
    let mut common = stored_session_args(config, workspace, false)?;
    // A revoke runs nothing: no model is opened (not the one the session ran with, which may
    // need a key this shell lacks), and a config that lets the modes do more is noted, never
    // refused.
    common.model = Some(agent_controller::model::ModelSpec::Scripted);
    let (controller, _) = stored_session(&mut common, spec, &mut session, true)?;
    let who = neutralize_line(&session).into_owned();
    let what = neutralize_line(id).into_owned();
    runtime()?.block_on(async {
        let mut restored = controller
            .restore_session(&session, SessionOptions::new())
            .await?;
        let Some(kept) = restored.allowances().into_iter().find(|a| a.id == id) else {
            return Err(Failure::refused(format!(
                "session {who} keeps no allowance {what}: nothing was revoked (`allowances list --session {who}` shows them)"
            )));
        };
        if !restored
            .revoke_allowance(id)
            .await
            .map_err(|e| lost(e, &session, "revoked"))?
        {
            return Err(Failure::refused(format!(
                "session {who} no longer keeps allowance {what}: nothing was revoked"
            )));
        }
        let store = match kept.scope {
            AllowanceScope::Workspace => " (also in the store: sessions opened from now on ask again)",
            _ => "",
        };
        note!(
            "revoked allowance {what} ({}) of session {who}: its {} calls in mode {} ask again{store}",
            kept.scope,
            neutralize_line(&kept.tool_name),
            neutralize_line(&kept.mode_id)
        );
        Ok(Exit::Done)
    })
}
