//! [`MemoryStore`]: sessions in a map, for one process (tests, servers without restarts).

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{
    PendingListing, SessionListing, SessionRecord, SessionStore, StoreError, check_next_version,
    check_session_id,
};

/// Sessions in memory, behind a mutex that is never held across an `await`.
#[derive(Debug, Default)]
pub struct MemoryStore {
    records: Mutex<HashMap<String, SessionRecord>>,
    /// The workspace allowances, oldest first.
    allowances: Mutex<Vec<crate::allowance::Allowance>>,
}

impl MemoryStore {
    /// An empty store.
    ///
    /// # Examples
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_controller::{AgentController, Decision, RunOutcome, SessionOptions, ToolRegistry};
    /// # use agent_controller::model::scripted::ScriptedModel;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let workspace = tempfile::tempdir()?;
    /// # let graph = agent_controller::config::parse(
    /// #     "[[modes]]\nid = \"plan\"\ntransitionsTo = \"build\"\navailableTools = [\"read_file\", \"write_plan\", \"submit_plan\"]\n\n[[modes]]\nid = \"build\"\ndefault = true\n",
    /// #     "modes.toml",
    /// # )?;
    /// # let controller = AgentController::builder(graph, Arc::new(ScriptedModel::new()))
    /// #     .tools(ToolRegistry::with_workspace_tools())
    /// #     .workspace(workspace.path())
    /// #     .build()?;
    /// use agent_controller::{MemoryStore, SessionStore};
    /// let store = Arc::new(MemoryStore::new());
    /// let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .store(store.clone())
    ///     .build()?;
    /// let mut session = controller.start_session(SessionOptions::new().id("s1")).await?;
    /// session.send_message("hello").await?;
    /// let record = store.load("s1").await?.expect("saved");
    /// assert_eq!(record.version, session.version());
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// How many sessions are stored.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::MemoryStore;
    /// assert_eq!(MemoryStore::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session is stored.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::MemoryStore;
    /// assert!(MemoryStore::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn allowances(&self) -> std::sync::MutexGuard<'_, Vec<crate::allowance::Allowance>> {
        self.allowances
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionRecord>> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self.lock().get(session_id).cloned())
    }

    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        check_session_id(&record.session_id)?;
        check_next_version(record, expected)?;
        let mut records = self.lock();
        let found = records.get(&record.session_id).map(|r| r.version);
        if found != expected {
            return Err(StoreError::Conflict {
                session_id: record.session_id.clone(),
                expected,
                found,
            });
        }
        records.insert(record.session_id.clone(), record.clone());
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<bool, StoreError> {
        Ok(self.lock().remove(session_id).is_some())
    }

    /// Records in memory are always readable: `unreadable` is empty.
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        let records = self.lock();
        let mut listing = PendingListing {
            pending: records
                .values()
                .flat_map(SessionRecord::pending_summaries)
                .collect(),
            interrupted: records
                .values()
                .filter_map(|r| r.interrupted_run(now_ms))
                .collect(),
            ..PendingListing::default()
        };
        drop(records);
        listing.sort();
        Ok(listing)
    }

    /// Records in memory are always readable: `unreadable` is empty.
    async fn list_sessions(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<SessionListing, StoreError> {
        let mut listing = SessionListing::default();
        for record in self.lock().values() {
            listing.add(
                workspace,
                &record.session_id,
                String::new,
                Ok(record.clone()),
            );
        }
        listing.sort();
        Ok(listing)
    }

    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        let mut records = self.lock();
        let old = records.len();
        records
            .retain(|_, r| r.has_pending() || r.lease_until().is_some() || r.updated_at >= before);
        Ok(old - records.len())
    }

    async fn save_workspace_allowance(
        &self,
        allowance: &crate::allowance::Allowance,
    ) -> Result<(), StoreError> {
        super::check_workspace_allowance(allowance)?;
        let mut kept = self.allowances();
        match kept.iter_mut().find(|a| a.id == allowance.id) {
            Some(same) => *same = allowance.clone(),
            None => kept.push(allowance.clone()),
        }
        Ok(())
    }

    async fn list_workspace_allowances(
        &self,
        workspace: Option<&std::path::Path>,
    ) -> Result<Vec<crate::allowance::Allowance>, StoreError> {
        Ok(self
            .allowances()
            .iter()
            .filter(|a| workspace.is_none_or(|w| a.workspace.as_deref() == Some(w)))
            .cloned()
            .collect())
    }

    async fn revoke_workspace_allowance(&self, id: &str) -> Result<bool, StoreError> {
        let mut kept = self.allowances();
        let before = kept.len();
        kept.retain(|a| a.id != id);
        Ok(kept.len() != before)
    }
}
