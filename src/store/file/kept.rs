//! The parsed records of a [`FileStore`](super::FileStore)'s pending files, kept while their
//! files stay as they were: a listing of a store with many pending sessions (`serve`'s `GET
//! /v1/pending`, its store watch, which lists every few hundred milliseconds) checks each file
//! with one `lstat` and parses only those that changed, and the load of the page's sessions
//! that follows (`load_many`) parses none again.
//!
//! What proves a file unchanged: a save renames a new file into place, so a record saved again
//! is another inode; but an inode freed by one save can be handed to a later one, so the key is
//! the device, inode, length, modification time and status-change time together (the last
//! also changes when a file is rewritten in place with its modification time put back). File
//! times are coarse (a clock tick, a second or two on some file systems): a file rewritten
//! within the same tick as the one read before it could show the same key. So a record is
//! kept only when its file was last modified more than [`SETTLE`] before it was read (as git
//! re-reads "racily clean" index entries): any later write to that inode then carries a later
//! modification time, and a record modified just now is parsed again at each listing until it
//! settles.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::store::SessionRecord;

/// How long before its reading a file must have been last modified for its record to be kept:
/// more than the coarsest file-time granularity in use (FAT's two seconds).
const SETTLE: Duration = Duration::from_secs(3);

/// What identifies one content of a file ([`Kept`]'s module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileKey {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileKey {
    /// The key of the file `meta` describes (from `lstat`, or `fstat` of an open handle).
    pub(super) fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether a file of this key, read at `read_at` or later, was last modified more than
    /// [`SETTLE`] before: a later write cannot show the same key.
    fn settled(&self, read_at: SystemTime) -> bool {
        let (Ok(secs), Ok(nanos)) = (u64::try_from(self.mtime.0), u32::try_from(self.mtime.1))
        else {
            return false;
        };
        let modified = UNIX_EPOCH + Duration::new(secs, nanos);
        modified + SETTLE <= read_at
    }
}

/// The records kept, by session id, each with the key of the pending file it was parsed from.
/// Shared by the clones of one [`FileStore`](super::FileStore); each store opened has its own.
#[derive(Default)]
pub(super) struct Kept {
    records: Mutex<HashMap<String, (FileKey, Arc<SessionRecord>)>>,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Kept")
            .field("records", &records.len())
            .finish()
    }
}

impl Kept {
    /// The record of session `id` kept from its pending file when that file's key is still
    /// `key`.
    pub(super) fn get(&self, id: &str, key: FileKey) -> Option<Arc<SessionRecord>> {
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        records
            .get(id)
            .filter(|(kept, _)| *kept == key)
            .map(|(_, record)| record.clone())
    }

    /// Keeps `record`, parsed from session `id`'s pending file of key `key` (from `fstat` of
    /// the handle it was read through) opened at `read_at` or later, when that file had
    /// settled; otherwise forgets what was kept for `id`.
    pub(super) fn keep(
        &self,
        id: &str,
        key: FileKey,
        read_at: SystemTime,
        record: Arc<SessionRecord>,
    ) {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if key.settled(read_at) {
            records.insert(id.to_owned(), (key, record));
        } else {
            records.remove(id);
        }
    }

    /// Forgets the records of the sessions for which `pending` is false (their pending file
    /// is gone): what is kept stays bounded by what waits.
    pub(super) fn retain(&self, pending: impl Fn(&str) -> bool) {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        records.retain(|id, _| pending(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_modified(at: SystemTime) -> FileKey {
        let since = at.duration_since(UNIX_EPOCH).expect("after the epoch");
        FileKey {
            dev: 1,
            ino: 2,
            len: 3,
            mtime: (since.as_secs() as i64, i64::from(since.subsec_nanos())),
            ctime: (0, 0),
        }
    }

    #[test]
    fn a_file_modified_just_before_its_reading_is_not_kept() {
        let now = SystemTime::now();
        assert!(!key_modified(now).settled(now));
        assert!(!key_modified(now - Duration::from_secs(1)).settled(now));
        assert!(!key_modified(now + Duration::from_secs(60)).settled(now));
        assert!(key_modified(now - SETTLE).settled(now));
        assert!(key_modified(now - Duration::from_secs(3600)).settled(now));
        let before_epoch = FileKey {
            mtime: (-5, 0),
            ..key_modified(now)
        };
        assert!(!before_epoch.settled(now));
    }

    #[test]
    fn a_record_is_kept_only_while_its_key_holds() {
        let kept = Kept::default();
        let now = SystemTime::now();
        let old = key_modified(now - Duration::from_secs(3600));
        let record: SessionRecord = serde_json::from_value(serde_json::json!({
            "schemaVersion": crate::store::SCHEMA_VERSION, "sessionId": "s1", "version": 1,
            "configFingerprint": "f", "modeId": "plan", "messages": [], "runCounter": 0,
            "run": null, "pending": null, "lastDecided": null, "decisionCounter": 0,
            "updatedAt": 1
        }))
        .expect("a record");
        kept.keep("s1", old, now, Arc::new(record));
        assert!(kept.get("s1", old).is_some());
        assert!(kept.get("s1", FileKey { ino: 9, ..old }).is_none());
        assert!(
            kept.get(
                "s1",
                FileKey {
                    ctime: (1, 0),
                    ..old
                }
            )
            .is_none()
        );
        assert!(kept.get("s2", old).is_none());
        // Read again while fresh: what was kept for it is forgotten.
        let fresh = key_modified(now);
        let record = kept.get("s1", old).expect("kept");
        kept.keep("s1", fresh, now, record.clone());
        assert!(kept.get("s1", old).is_none() && kept.get("s1", fresh).is_none());
        kept.keep("s1", old, now, record);
        kept.retain(|id| id != "s1");
        assert!(kept.get("s1", old).is_none());
    }
}
