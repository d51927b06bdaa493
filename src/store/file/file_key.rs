//! What proves a [`FileStore`](super::FileStore)'s pending file unchanged since its record was
//! parsed ([`FileKey`]), so a listing keeps the record (`store/kept.rs`) and checks the file
//! with one `lstat` the next time instead of parsing it again. A save renames a new file into
//! place, so a record saved again is another inode; but an inode freed by one save can be
//! handed to a later one, so the key is the device, inode, length, modification time and
//! status-change time together (the last also changes when a file is rewritten in place with
//! its modification time put back). File times are coarse (a clock tick, a second or two on some file systems): a file rewritten
//! within the same tick as the one read before it could show the same key. So a record is
//! kept only when its file was last modified and last changed (its status-change time, which
//! no process can set back) more than [`SETTLE`] before it was read
//! ([`SETTLE_FINE`] on a file system that keeps sub-second times) (as git
//! re-reads "racily clean" index entries): any later write to that inode then carries a later
//! modification time, and a record modified just now is parsed again at each listing until it
//! settles.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long before its reading a file must have been last modified for its record to be kept,
/// when its time is a whole second: more than the coarsest file-time granularity in use
/// (FAT's two seconds).
const SETTLE: Duration = Duration::from_secs(3);

/// The same for a file time with nanoseconds: its file system keeps
/// sub-second times (ext4, XFS, btrfs, tmpfs, NTFS; exFAT's are of 10 ms), stepped by the
/// kernel's clock tick (at most 10 ms), so a quarter of a second is many ticks. Without it,
/// every record saved in the last three seconds was parsed again at each listing.
const SETTLE_FINE: Duration = Duration::from_millis(250);

/// What identifies one content of a file (this module's docs).
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

    /// Whether a file of this key, read at `read_at` or later, was last modified and last
    /// changed more than [`SETTLE`] before ([`SETTLE_FINE`] for a time with nanoseconds): a
    /// later write cannot show the same key, so its record may be kept. Both times: a process
    /// may set the modification time to any time (`cp -p`, `rsync -t`, `touch -d`), while the
    /// status-change time is the kernel's, set at each write.
    pub(super) fn settled(&self, read_at: SystemTime) -> bool {
        settled_at(self.mtime, read_at) && settled_at(self.ctime, read_at)
    }
}

/// Whether the file time `(seconds, nanoseconds)` is more than [`SETTLE`] before `read_at`
/// ([`SETTLE_FINE`] when it has nanoseconds); a time before the epoch never is.
fn settled_at((secs, nanos): (i64, i64), read_at: SystemTime) -> bool {
    let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
        return false;
    };
    let at = UNIX_EPOCH + Duration::new(secs, nanos);
    let settle = if nanos == 0 { SETTLE } else { SETTLE_FINE };
    at + settle <= read_at
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key whose modification time is `at` (its nanoseconds kept).
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

    /// A key modified at `at`'s whole second, as a file system of second times (or `touch -d`)
    /// gives it.
    fn key_of_whole_second(at: SystemTime) -> FileKey {
        let mut key = key_modified(at);
        key.mtime.1 = 0;
        key
    }

    /// A time `ago` before `now` with nanoseconds (ext4's, say).
    fn with_nanos(now: SystemTime, ago: Duration) -> FileKey {
        let mut at = now - ago;
        if at.duration_since(UNIX_EPOCH).expect("after").subsec_nanos() == 0 {
            at -= Duration::from_nanos(1);
        }
        key_modified(at)
    }

    #[test]
    fn a_file_modified_just_before_its_reading_is_not_settled() {
        let now = SystemTime::now();
        assert!(!key_of_whole_second(now).settled(now));
        assert!(!key_of_whole_second(now - Duration::from_secs(1)).settled(now));
        assert!(!key_of_whole_second(now + Duration::from_secs(60)).settled(now));
        assert!(key_of_whole_second(now - SETTLE).settled(now));
        assert!(key_of_whole_second(now - Duration::from_secs(3600)).settled(now));
        assert!(!with_nanos(now, Duration::from_millis(10)).settled(now));
        assert!(!with_nanos(now, Duration::ZERO).settled(now));
        let before_epoch = FileKey {
            mtime: (-5, 0),
            ..key_modified(now)
        };
        assert!(!before_epoch.settled(now));
    }

    /// A file system that keeps sub-second times (ext4, XFS, btrfs, tmpfs: the key's
    /// modification time has nanoseconds) steps them by a clock tick of a few milliseconds, so
    /// a file settles after [`SETTLE_FINE`], not after the two seconds of FAT's (whose times
    /// are whole seconds).
    #[test]
    fn a_file_with_sub_second_times_settles_sooner() {
        let now = SystemTime::now();
        assert!(with_nanos(now, Duration::from_millis(400)).settled(now));
        assert!(!with_nanos(now, Duration::from_millis(100)).settled(now));
        assert!(!key_of_whole_second(now - Duration::from_millis(1500)).settled(now));
        assert!(key_of_whole_second(now - Duration::from_secs(4)).settled(now));
    }

    /// A process sets a file's modification time as it likes (`cp -p`, `rsync -t`, `tar x`,
    /// `touch -d`, `utimensat`): a file written just now may say it was modified an hour ago.
    /// Its status-change time is the kernel's, set at that write: the file is not settled
    /// until that time is past the window too, so a same-length rewrite in place, its
    /// modification time put back again, within the same clock tick, is never taken for the
    /// content kept.
    #[test]
    fn a_modification_time_put_back_does_not_settle_a_file_changed_just_now() {
        let now = SystemTime::now();
        let changed = |ago: Duration| {
            let at = with_nanos(now, ago).mtime;
            FileKey {
                ctime: at,
                ..key_of_whole_second(now - Duration::from_secs(3600))
            }
        };
        assert!(!changed(Duration::ZERO).settled(now));
        assert!(!changed(Duration::from_millis(10)).settled(now));
        assert!(changed(Duration::from_millis(400)).settled(now));
        let whole_second_change = FileKey {
            ctime: key_of_whole_second(now - Duration::from_secs(1)).mtime,
            ..key_modified(now - Duration::from_secs(3600))
        };
        assert!(!whole_second_change.settled(now));
    }
}
