//! The pending decisions as hosts list them ([`PendingEntry`]: each with the allowances in
//! force for its session), read with one batch of loads per listing
//! ([`SessionStore::load_many`]) and the workspace allowances once per workspace.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::allowance::Allowance;
use crate::store::{PendingCursor, PendingEntry, PendingSummary, SessionStore, UnreadableRecord};

/// Pending decisions with the allowances in force for their sessions ([`pending_entries`],
/// [`crate::AgentController::pending_entries_page`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingEntries {
    /// The pending decisions, in the order given, each with the allowances in force for its
    /// session (none when they cannot be read: see [`PendingEntries::unread_allowances`]).
    pub pending: Vec<PendingEntry>,
    /// The sessions whose allowances cannot be read (their record, or their workspace's
    /// allowances), each once, in the order they first appear; their decisions are listed
    /// with no allowance. A host warns of each.
    pub unread_allowances: Vec<UnreadAllowances>,
    /// The stored records that cannot be read which the listing met
    /// ([`crate::store::PendingPage::unreadable`]): a host says each (`pending --json` and
    /// `GET /v1/pending` do), never drops them in silence. Empty for [`pending_entries`],
    /// which is given summaries already read.
    pub unreadable: Vec<UnreadableRecord>,
    /// The cursor of the next page while more follow
    /// ([`crate::store::PendingPage::next_cursor`]); `None` on the last page and for a whole
    /// listing.
    pub next_cursor: Option<PendingCursor>,
}

/// A session whose allowances in force cannot be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadAllowances {
    /// The session's id.
    pub session_id: String,
    /// Why: the store's error, as text.
    pub reason: String,
}

/// The pending decisions `pending` (a listing or a page of one) as [`PendingEntry`]s, each with
/// the allowances in force for its session ([`super::allowances_in_force`]). What `pending
/// --json` and `serve`'s `GET /v1/pending` list. The sessions are read in one batch
/// ([`SessionStore::load_many`]) and the workspace allowances once per workspace of the page,
/// not once per decision. A session that no longer exists has none in force; one whose record
/// or workspace allowances cannot be read has none listed and is reported in
/// [`PendingEntries::unread_allowances`]. `next_cursor` is `None`.
///
/// # Examples
/// ```
/// # use std::sync::Arc;
/// # use agent_controller::{AgentController, SessionOptions, SessionStore, ToolRegistry};
/// # use agent_controller::model::scripted::ScriptedModel;
/// use agent_controller::session::pending_entries;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let workspace = tempfile::tempdir()?;
/// # let graph = agent_controller::config::parse(
/// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
/// #     "modes.toml",
/// # )?;
/// let store = Arc::new(agent_controller::MemoryStore::new());
/// let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
///     .tools(ToolRegistry::with_workspace_tools())
///     .workspace(workspace.path())
///     .store(store.clone())
///     .build()?;
/// let mut session = controller.start_session(SessionOptions::new().mode("plan")).await?;
/// session.send_message("Add dark mode").await?;
/// let listing = store.list_pending_decisions().await?;
/// let entries = pending_entries(&*store, listing.pending).await;
/// assert_eq!(entries.pending.len(), 1);
/// assert_eq!(entries.pending[0].summary.session_id, session.id());
/// assert!(entries.pending[0].allowances_in_force.is_empty());
/// assert!(entries.unread_allowances.is_empty());
/// # Ok(())
/// # }
/// ```
pub async fn pending_entries(
    store: &dyn SessionStore,
    pending: Vec<PendingSummary>,
) -> PendingEntries {
    // The distinct sessions, in the order they first appear.
    let mut seen = std::collections::HashSet::new();
    let ids: Vec<&str> = pending
        .iter()
        .map(|p| p.session_id.as_str())
        .filter(|id| seen.insert(*id))
        .collect();
    let mut unread: Vec<UnreadAllowances> = Vec::new();
    let mut in_force: HashMap<String, Vec<Allowance>> = HashMap::new();
    match store.load_many(&ids).await {
        Err(e) => {
            let reason = e.to_string();
            unread.extend(ids.iter().map(|id| UnreadAllowances {
                session_id: (*id).to_owned(),
                reason: reason.clone(),
            }));
        }
        Ok(loaded) => {
            // Each workspace's allowances, listed once.
            let mut listed: HashMap<PathBuf, Result<Vec<Allowance>, String>> = HashMap::new();
            for (id, each) in ids.iter().zip(loaded) {
                let record = match each {
                    Ok(Some(record)) => record,
                    Ok(None) => continue,
                    Err(e) => {
                        unread.push(UnreadAllowances {
                            session_id: (*id).to_owned(),
                            reason: e.to_string(),
                        });
                        continue;
                    }
                };
                let workspace = match &record.workspace {
                    None => Vec::new(),
                    Some(workspace) => {
                        if !listed.contains_key(&workspace.path) {
                            let read = store
                                .list_workspace_allowances(Some(&workspace.path))
                                .await
                                .map_err(|e| e.to_string());
                            listed.insert(workspace.path.clone(), read);
                        }
                        match &listed[&workspace.path] {
                            Ok(allowances) => allowances.clone(),
                            Err(reason) => {
                                unread.push(UnreadAllowances {
                                    session_id: (*id).to_owned(),
                                    reason: reason.clone(),
                                });
                                continue;
                            }
                        }
                    }
                };
                in_force.insert(
                    (*id).to_owned(),
                    super::allowances_in_force_with(&record, workspace),
                );
            }
        }
    }
    let pending = pending
        .into_iter()
        .map(|summary| PendingEntry {
            allowances_in_force: in_force
                .get(&summary.session_id)
                .cloned()
                .unwrap_or_default(),
            summary,
        })
        .collect();
    PendingEntries {
        pending,
        unread_allowances: unread,
        unreadable: Vec::new(),
        next_cursor: None,
    }
}
