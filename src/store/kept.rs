//! Parsed session records kept between listings ([`Kept`]), each with a key that proves the
//! stored record unchanged: a host that lists the pending decisions of a big store again and
//! again (`serve`'s `GET /v1/pending`, its store watch) parses only the records that changed.
//! The file store keys a record by its file's identity and times (`file/file_key.rs`); the
//! key is a type parameter so that another store can key its records by what proves them
//! unchanged there (PostgreSQL by a hash of the stored text was tried, and gained nothing).
//! A record is used only when its key is read again from the store and matches, so what is
//! kept is never staler than a read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::SessionRecord;

/// The most records kept: past it, a record read is not kept (the store parses it each time),
/// so a store of very many pending sessions holds a bounded number of records in memory.
const MAX_KEPT: usize = 2_000;

/// The records kept, by session id, each with the key of the stored record it was parsed
/// from. Shared by the clones of one store; each store opened has its own.
pub(crate) struct Kept<K> {
    records: Mutex<HashMap<String, (K, Arc<SessionRecord>)>>,
}

impl<K> Default for Kept<K> {
    fn default() -> Self {
        Self {
            records: Mutex::new(HashMap::new()),
        }
    }
}

impl<K> std::fmt::Debug for Kept<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Kept")
            .field("records", &records.len())
            .finish()
    }
}

impl<K: PartialEq> Kept<K> {
    /// The record of session `id` when the one kept was parsed from a stored record of key
    /// `key` (the stored record's key now).
    pub(crate) fn get(&self, id: &str, key: &K) -> Option<Arc<SessionRecord>> {
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        records
            .get(id)
            .filter(|(kept, _)| kept == key)
            .map(|(_, record)| record.clone())
    }

    /// Keeps `record`, parsed from session `id`'s stored record of key `key`, in place of what
    /// was kept for `id` (unless [`MAX_KEPT`] others are kept).
    pub(crate) fn keep(&self, id: &str, key: K, record: Arc<SessionRecord>) {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if records.len() < MAX_KEPT || records.contains_key(id) {
            records.insert(id.to_owned(), (key, record));
        }
    }

    /// Forgets what was kept for session `id`.
    pub(crate) fn forget(&self, id: &str) {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        records.remove(id);
    }

    /// Forgets the records of the sessions for which `keep` is false (no longer pending, or
    /// gone): what is kept stays bounded by what waits.
    pub(crate) fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        records.retain(|id, _| keep(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> Arc<SessionRecord> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "schemaVersion": crate::store::SCHEMA_VERSION, "sessionId": id, "version": 1,
                "configFingerprint": "f", "modeId": "plan", "messages": [], "runCounter": 0,
                "run": null, "pending": null, "lastDecided": null, "decisionCounter": 0,
                "updatedAt": 1
            }))
            .expect("a record"),
        )
    }

    #[test]
    fn a_record_is_used_only_while_its_key_holds() {
        let kept = Kept::default();
        kept.keep("s1", 7, record("s1"));
        assert!(kept.get("s1", &7).is_some());
        assert!(kept.get("s1", &8).is_none());
        assert!(kept.get("s2", &7).is_none());
        kept.forget("s1");
        assert!(kept.get("s1", &7).is_none());
        kept.keep("s1", 7, record("s1"));
        kept.keep("s2", 7, record("s2"));
        kept.retain(|id| id != "s1");
        assert!(kept.get("s1", &7).is_none() && kept.get("s2", &7).is_some());
    }

    #[test]
    fn no_more_than_the_bound_is_kept() {
        let kept = Kept::default();
        for n in 0..MAX_KEPT + 10 {
            kept.keep(&format!("s{n}"), 1, record("s"));
        }
        assert!(kept.get(&format!("s{}", MAX_KEPT + 5), &1).is_none());
        assert!(kept.get("s0", &1).is_some());
        // One kept already is replaced even when full.
        kept.keep("s0", 2, record("s"));
        assert!(kept.get("s0", &2).is_some());
    }
}
