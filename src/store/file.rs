//! [`FileStore`]: a directory of JSON files, one per session, written atomically.
//!
//! Layout: `<id>.json` for a session with nothing pending, `<id>.pending.json` for one with a
//! pending decision (so [`SessionStore::list_pending`] reads only those), `<id>.running.json`
//! for one whose run is running under a lease (so `list_pending` finds interrupted runs among
//! those only), `allowances/<id>.json` for each workspace allowance
//! ([`SessionStore::save_workspace_allowance`], written the same way), and `.locks/`, a fixed
//! set of [`LOCK_STRIPES`] lock files for the short compare-and-swap section: a session takes the
//! stripe its id hashes to, so a deleted or expired session leaves no file behind (issue 10: a
//! `<id>.lock` per session was left for ever; and deleting a lock file someone waits on lets two
//! writers in at once). A save writes a temporary file, fsyncs it, renames it into place and
//! fsyncs the directory: two fsyncs, and a process killed at any moment leaves the old or the new
//! record, never a torn one. Should a crash leave several names, the higher version wins.
//!
//! Releases up to 0.2.0 locked `<id>.lock` instead: stop their hosts before a host of this
//! release uses the same directory (it removes those files when it opens the store).
//!
//! Every file of the store is opened without following a symlink and without waiting
//! (`O_NOFOLLOW | O_NONBLOCK`), and used only when the opened handle is a regular file: a FIFO,
//! device, socket, folder or symlink named like a record is reported unreadable at once (in
//! [`SessionStore::list_pending`], and as [`StoreError::Corrupt`] by `load`), never waited on
//! or read through, and so is a record file whose name is not a session id. A FIFO or symlink
//! among the lock stripes fails the save that needs it, and so does a symlink in place of
//! `.locks/` itself. A record file is read up to [`FileStore::max_record_bytes`] (256 MiB by
//! default), never whole: a larger one is unreadable too, and a save that would write one is
//! refused.
//!
//! The file I/O (reads, writes, fsyncs, the lock) runs on tokio's blocking pool, off the async
//! runtime's threads, when there is a runtime (inline otherwise): a slow disk never stalls the
//! other sessions a host runs on the same runtime.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use super::pending_page::PageFill;
use super::{
    PendingCursor, PendingListing, PendingPage, SessionListing, SessionRecord, SessionStore,
    StoreError, UnreadableRecord, check_next_version, check_session_id, decode,
};

const PENDING_SUFFIX: &str = ".pending.json";
mod file_key;
mod order;

use super::kept::Kept;
use file_key::FileKey;

const PLAIN_SUFFIX: &str = ".json";
/// The folder of the workspace allowances, one `<id>.json` each.
const ALLOWANCES_DIR: &str = "allowances";
const RUNNING_SUFFIX: &str = ".running.json";
/// Every name a session's record may have; a save leaves only one of them.
const RECORD_SUFFIXES: [&str; 3] = [PLAIN_SUFFIX, PENDING_SUFFIX, RUNNING_SUFFIX];

/// The name of `record`'s file: by what `list_pending` looks for in it.
fn suffix_of(record: &SessionRecord) -> &'static str {
    if record.has_pending() {
        PENDING_SUFFIX
    } else if record.lease_until().is_some() {
        RUNNING_SUFFIX
    } else {
        PLAIN_SUFFIX
    }
}
/// `O_NOFOLLOW | O_NONBLOCK`: a symlink at the name is not followed (the open fails), and a
/// FIFO or device is not waited on; on a regular file they change nothing.
const NO_FOLLOW_NO_WAIT: i32 =
    (rustix::fs::OFlags::NOFOLLOW.bits() | rustix::fs::OFlags::NONBLOCK.bits()) as i32;

/// Opens the store's file at `path` with `options`, not following a symlink and not waiting,
/// and returns it only when it is a regular file. `Err(Ok(why))`: there is something else at
/// the name (a symlink, FIFO, device, socket, folder); `Err(Err(e))`: the open failed (`e` of
/// kind `NotFound` when nothing is there).
fn open_regular(
    path: &Path,
    options: &mut OpenOptions,
) -> Result<File, Result<String, std::io::Error>> {
    let file = match options.custom_flags(NO_FOLLOW_NO_WAIT).open(path) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(Ok(
                "it is a symlink, which the store does not follow".to_owned()
            ));
        }
        Err(e) => return Err(Err(e)),
    };
    let kind = file.metadata().map_err(Err)?.file_type();
    if kind.is_file() {
        Ok(file)
    } else {
        let what = if kind.is_dir() {
            "a folder"
        } else {
            "a FIFO, device or socket"
        };
        Err(Ok(format!("it is not a regular file ({what})")))
    }
}

/// The most bytes an allowance file may hold: an allowance is a few hundred bytes, and a larger
/// file is skipped unread rather than read whole.
const MAX_ALLOWANCE_BYTES: u64 = 1 << 20;

/// Reads the store's file at `path` as [`open_regular`] opens it (no symlink followed, no
/// waiting, regular files only), refusing one of more than `limit` bytes. `Err(Ok(why))`: it
/// cannot be used, and why; `Err(Err(e))`: the open or read failed.
fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, Result<String, std::io::Error>> {
    read_regular_keyed(path, limit).map(|(bytes, _)| bytes)
}

/// [`read_regular`], with the key of the file read (from the handle it was read through).
fn read_regular_keyed(
    path: &Path,
    limit: u64,
) -> Result<(Vec<u8>, FileKey), Result<String, std::io::Error>> {
    let file = open_regular(path, OpenOptions::new().read(true))?;
    let key = FileKey::of(&file.metadata().map_err(Err)?);
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(Err)?;
    if bytes.len() as u64 > limit {
        return Err(Ok(format!("it is larger than {limit} bytes")));
    }
    Ok((bytes, key))
}

/// Checks that the folder at `dir` is a folder and not a symlink to one: the store reads and
/// writes its allowances and its lock stripes only in folders of its own. `Ok(false)`: nothing
/// is there.
fn real_dir(dir: &Path) -> Result<bool, StoreError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_dir() => Ok(true),
        Ok(_) => Err(StoreError::backend(
            format!("use {}", dir.display()),
            std::io::Error::other(format!(
                "{} is not a folder (a symlink, which the store does not follow, or a file)",
                dir.display()
            )),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(backend(&format!("read {}", dir.display()), e)),
    }
}

/// The `<id>.lock` files of releases up to 0.2.0, removed when a store is opened.
const LEGACY_LOCK_SUFFIX: &str = ".lock";
const TEMP_PREFIX: &str = ".tmp-";
/// The folder of the lock stripes, in the store directory.
const LOCK_DIR: &str = ".locks";
/// How many lock files `.locks/` holds at most: sessions whose ids share a stripe wait for each
/// other's compare-and-swap section (a read and a rename, not a model call), others do not.
pub const LOCK_STRIPES: u8 = 64;

/// The stripe of a session id: the first byte of its SHA-256, modulo [`LOCK_STRIPES`]. A
/// published hash, so every process and build sharing the directory picks the same stripe (std's
/// hashers promise no stable output).
fn stripe_of(id: &str) -> u8 {
    use sha2::Digest;
    sha2::Sha256::digest(id.as_bytes())[0] % LOCK_STRIPES
}

/// A temporary file in the store directory that is removed on drop unless it was renamed into
/// place: a failed save leaves no stray file behind.
struct TempFile {
    path: PathBuf,
    file: File,
    persisted: bool,
}

impl TempFile {
    /// Creates `.tmp-<session id>.<process id>.<n>` exclusively (never an existing file).
    fn create(dir: &Path, session_id: &str) -> Result<Self, StoreError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(
            "{TEMP_PREFIX}{session_id}.{}.{n}",
            std::process::id()
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| backend("create temporary file", e))?;
        Ok(Self {
            path,
            file,
            persisted: false,
        })
    }

    /// Renames the file to `to`, replacing what was there in one step.
    fn persist(mut self, to: &Path) -> Result<(), StoreError> {
        std::fs::rename(&self.path, to).map_err(|e| backend("rename session into place", e))?;
        self.persisted = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Sessions as JSON files in a directory, safe for several processes at once. Cheap to clone
/// (clones share the fsync and read counters, and the pending records kept between listings:
/// [`SessionStore::list_pending_page`] parses only the pending files that changed since).
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    fsyncs: Arc<AtomicU64>,
    /// How many record files were parsed ([`FileStore::records_read`]).
    parsed: Arc<AtomicU64>,
    /// The pending records parsed, kept while their files stay unchanged ([`file_key`]).
    kept: Arc<Kept<FileKey>>,
    max_record_bytes: u64,
}

/// The most bytes a session's record file may hold unless
/// [`FileStore::max_record_bytes`] says otherwise: 256 MiB.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 256 << 20;

fn backend(context: &str, err: std::io::Error) -> StoreError {
    StoreError::backend(context, err)
}

impl FileStore {
    /// Opens (creating it if needed) the store in `dir`, and removes temporary files that a
    /// killed writer left more than a minute ago.
    ///
    /// # Errors
    /// [`StoreError::Backend`] when the directory cannot be created or read.
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
    /// use agent_controller::{FileStore, SessionStore};
    /// let store = Arc::new(FileStore::open(workspace.path().join(".sessions"))?);
    /// let controller = AgentController::builder(controller.modes().clone(), Arc::new(ScriptedModel::new()))
    ///     .tools(ToolRegistry::with_workspace_tools())
    ///     .workspace(workspace.path())
    ///     .store(store.clone())
    ///     .build()?;
    /// let session = controller.start_session(SessionOptions::new().id("s1")).await?;
    /// assert!(store.load("s1").await?.is_some());
    /// assert!(store.protected_paths().iter().any(|p| p.ends_with(".sessions")));
    /// # drop(session);
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|e| backend(&format!("create {}", dir.display()), e))?;
        std::fs::create_dir_all(dir.join(LOCK_DIR))
            .map_err(|e| backend(&format!("create {}", dir.join(LOCK_DIR).display()), e))?;
        real_dir(&dir.join(LOCK_DIR))?;
        let store = Self {
            dir,
            fsyncs: Arc::new(AtomicU64::new(0)),
            parsed: Arc::new(AtomicU64::new(0)),
            kept: Arc::new(Kept::default()),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
        };
        store.remove_residue()?;
        Ok(store)
    }

    /// The directory.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::FileStore;
    /// let dir = tempfile::tempdir()?;
    /// let store = FileStore::open(dir.path().join("sessions"))?;
    /// assert_eq!(store.dir(), dir.path().join("sessions"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sets the most bytes a session's record file may hold (default
    /// [`DEFAULT_MAX_RECORD_BYTES`], 256 MiB). A larger file in the store is never read whole:
    /// loading it is [`StoreError::Corrupt`], and [`SessionStore::list_pending`] reports it
    /// unreadable. A save whose record would be larger is refused
    /// ([`StoreError::Backend`]) and changes nothing, so the store never writes what it would
    /// not read back.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::FileStore;
    /// let dir = tempfile::tempdir()?;
    /// let store = FileStore::open(dir.path())?.max_record_bytes(64 << 20);
    /// # let _ = store;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_record_bytes(mut self, bytes: u64) -> Self {
        self.max_record_bytes = bytes;
        self
    }

    /// How many fsyncs this store has issued (files and directory), for benchmarks.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::FileStore;
    /// let dir = tempfile::tempdir()?;
    /// let store = FileStore::open(dir.path())?;
    /// assert_eq!(store.fsyncs(), 0, "nothing saved yet");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// How many record files this store (and its clones) has read and parsed, for benchmarks
    /// and tests: every [`SessionStore::load`] counts, a listing only the pending files that
    /// changed since it last parsed them (or were modified within seconds of being read: file
    /// times are too coarse to tell those apart from a rewrite in the same tick).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{FileStore, SessionStore};
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let dir = tempfile::tempdir()?;
    /// let store = FileStore::open(dir.path())?;
    /// assert!(store.load("s1").await?.is_none());
    /// assert_eq!(store.records_read(), 0, "no file, nothing parsed");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn records_read(&self) -> u64 {
        self.parsed.load(Ordering::Relaxed)
    }

    /// Runs `work` (blocking file I/O) on tokio's blocking pool when a runtime is there, so
    /// the async runtime's threads never wait on the disk; inline otherwise.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&FileStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime
                .spawn_blocking(move || work(&store))
                .await
                .map_err(|e| StoreError::backend("file store task failed", e))?,
            Err(_) => work(&store),
        }
    }

    fn path(&self, id: &str, suffix: &str) -> PathBuf {
        self.dir.join(format!("{id}{suffix}"))
    }

    /// Removes what earlier processes left: temporary files of writers killed more than a
    /// minute ago, and the `<id>.lock` files of releases up to 0.2.0.
    fn remove_residue(&self) -> Result<(), StoreError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| backend("read store directory", e))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name
                .strip_suffix(LEGACY_LOCK_SUFFIX)
                .is_some_and(|id| check_session_id(id).is_ok())
            {
                let _ = std::fs::remove_file(entry.path());
                continue;
            }
            if !name.starts_with(TEMP_PREFIX) {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() > 60);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Reads the record of `id` in its file with `suffix`; a corrupt record's error names the
    /// file.
    fn read(&self, id: &str, suffix: &str) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self.read_keyed(id, suffix)?.map(|(record, _)| record))
    }

    /// [`FileStore::read`], with the key of the file the record was read from.
    fn read_keyed(
        &self,
        id: &str,
        suffix: &str,
    ) -> Result<Option<(SessionRecord, FileKey)>, StoreError> {
        let path = self.path(id, suffix);
        let corrupt = |message: String| StoreError::Corrupt {
            session_id: id.to_owned(),
            message: format!("{}: {message}", path.display()),
        };
        let (bytes, key) = match read_regular_keyed(&path, self.max_record_bytes) {
            Ok(read) => read,
            Err(Ok(why)) => return Err(corrupt(why)),
            Err(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(Err(e)) => return Err(backend(&format!("read {}", path.display()), e)),
        };
        self.parsed.fetch_add(1, Ordering::Relaxed);
        match decode(id, &bytes) {
            Ok(record) => Ok(Some((record, key))),
            Err(StoreError::Corrupt { message, .. }) => Err(corrupt(message)),
            Err(other) => Err(other),
        }
    }

    /// The record in session `id`'s pending file: the one kept from an earlier reading while
    /// the file is unchanged ([`file_key`]), else read and parsed (and kept when the file has
    /// settled).
    fn read_pending_kept(&self, id: &str) -> Result<Option<Arc<SessionRecord>>, StoreError> {
        let path = self.path(id, PENDING_SUFFIX);
        if let Ok(meta) = std::fs::symlink_metadata(&path)
            && meta.file_type().is_file()
            && let Some(record) = self.kept.get(id, &FileKey::of(&meta))
        {
            return Ok(Some(record));
        }
        let read_at = std::time::SystemTime::now();
        let read = self.read_keyed(id, PENDING_SUFFIX);
        let Ok(Some((record, key))) = read else {
            self.kept.forget(id);
            return read.map(|_| None);
        };
        let record = Arc::new(record);
        if key.settled(read_at) {
            self.kept.keep(id, key, record.clone());
        } else {
            self.kept.forget(id);
        }
        Ok(Some(record))
    }

    /// [`FileStore::read_current`] with the pending file read through
    /// [`FileStore::read_pending_kept`]; the other names are read only when `others` (a
    /// listing that saw no other file of the session in the directory passes `false`: a save
    /// since then that left the pending name makes the session no longer pending there).
    fn read_current_kept(
        &self,
        id: &str,
        others: bool,
    ) -> Result<Option<Arc<SessionRecord>>, StoreError> {
        let mut current = self.read_pending_kept(id)?;
        if others {
            for suffix in [PLAIN_SUFFIX, RUNNING_SUFFIX] {
                if let Some(record) = self.read(id, suffix)?
                    && current.as_ref().is_none_or(|c| record.version > c.version)
                {
                    current = Some(Arc::new(record));
                }
            }
        }
        Ok(current)
    }

    /// The current record: of the possible names, the one with the highest version.
    fn read_current(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let mut current: Option<SessionRecord> = None;
        for suffix in RECORD_SUFFIXES {
            if let Some(record) = self.read(id, suffix)?
                && current.as_ref().is_none_or(|c| record.version > c.version)
            {
                current = Some(record);
            }
        }
        Ok(current)
    }

    /// Takes the lock of the session's stripe for the compare-and-swap section; released on
    /// drop. The stripe files are never removed, so whoever waits on one is let in properly.
    fn lock(&self, id: &str) -> Result<File, StoreError> {
        let dir = self.dir.join(LOCK_DIR);
        // Not through a symlink put in its place: the stripes are made in the store's own folder.
        real_dir(&dir)?;
        let path = dir.join(format!("{:02}", stripe_of(id)));
        let open = || {
            open_regular(
                &path,
                OpenOptions::new().create(true).truncate(false).write(true),
            )
        };
        let file = match open() {
            // Someone removed `.locks/`: make it again.
            Err(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir).map_err(|e| backend("create .locks", e))?;
                // What was made is the store's own folder, not a symlink put there meanwhile.
                real_dir(&dir)?;
                open()
            }
            other => other,
        };
        let context = || format!("open lock file {}", path.display());
        let file = match file {
            Ok(file) => file,
            Err(Ok(why)) => {
                return Err(StoreError::backend_message(format!("{}: {why}", context())));
            }
            Err(Err(e)) => return Err(backend(&context(), e)),
        };
        file.lock().map_err(|e| backend("lock session", e))?;
        Ok(file)
    }

    fn sync_dir(&self) -> Result<(), StoreError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| backend("fsync store directory", e))?;
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn save_sync(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        let id = record.session_id.as_str();
        check_session_id(id)?;
        check_next_version(record, expected)?;
        let bytes =
            serde_json::to_vec(record).map_err(|e| StoreError::backend("encode session", e))?;
        if bytes.len() as u64 > self.max_record_bytes {
            return Err(StoreError::backend_message(format!(
                "session `{id}` not saved: its record is {} bytes, more than the {} bytes the \
                 store reads back (FileStore::max_record_bytes): the session cannot be saved \
                 until a store with a larger bound opens it",
                bytes.len(),
                self.max_record_bytes
            )));
        }
        let _lock = self.lock(id)?;
        let found = self.read_current(id)?.map(|r| r.version);
        if found != expected {
            return Err(StoreError::Conflict {
                session_id: id.to_owned(),
                expected,
                found,
            });
        }
        let temp = TempFile::create(&self.dir, id)?;
        let mut file = &temp.file;
        file.write_all(&bytes)
            .map_err(|e| backend("write session", e))?;
        file.sync_all().map_err(|e| backend("fsync session", e))?;
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        let name = suffix_of(record);
        temp.persist(&self.path(id, name))?;
        for other in RECORD_SUFFIXES.into_iter().filter(|s| *s != name) {
            match std::fs::remove_file(self.path(id, other)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(backend("remove the previous session file", e)),
            }
        }
        self.sync_dir()
    }

    fn delete_sync(&self, id: &str) -> Result<bool, StoreError> {
        check_session_id(id)?;
        let _lock = self.lock(id)?;
        self.remove_files(id)
    }

    /// Deletes the session if, read under its lock, it is readable, has nothing pending and was
    /// last saved before `before`: a save that made it pending since the caller looked is seen.
    fn expire_sync(&self, id: &str, before: u64) -> Result<bool, StoreError> {
        let _lock = self.lock(id)?;
        let stale = self.read_current(id).ok().flatten().is_some_and(|r| {
            !r.has_pending() && r.lease_until().is_none() && r.updated_at < before
        });
        if stale {
            self.remove_files(id)
        } else {
            Ok(false)
        }
    }

    /// Removes both names of the session's record (the caller holds its lock); returns whether
    /// there was one.
    fn remove_files(&self, id: &str) -> Result<bool, StoreError> {
        let mut existed = false;
        for suffix in RECORD_SUFFIXES {
            match std::fs::remove_file(self.path(id, suffix)) {
                Ok(()) => existed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(backend("delete session", e)),
            }
        }
        if existed {
            self.sync_dir()?;
        }
        Ok(existed)
    }

    /// Session ids whose file name ends in `suffix` (and not in the pending or running suffix,
    /// for plain).
    fn ids_with(&self, suffix: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.names_with(suffix)?.ids)
    }

    /// The files whose name ends in `suffix` (and not in the pending or running suffix, for
    /// plain): the session ids, and apart the names that hold no session id.
    fn names_with(&self, suffix: &str) -> Result<Names, StoreError> {
        let [plain, pending, running] = self.record_names()?;
        Ok(match suffix {
            PENDING_SUFFIX => pending,
            RUNNING_SUFFIX => running,
            _ => plain,
        })
    }

    /// The record files of every suffix, in one reading of the directory: [`Names`] of the
    /// plain, pending and running files, in that order ([`RECORD_SUFFIXES`]).
    fn record_names(&self) -> Result<[Names; 3], StoreError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| backend("read store directory", e))?;
        let mut names: [Names; 3] = Default::default();
        for entry in entries {
            let entry = entry.map_err(|e| backend("read store directory", e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(TEMP_PREFIX) {
                continue;
            }
            // The longer suffixes first: `<id>.pending.json` also ends in `.json`.
            let found = [(1, PENDING_SUFFIX), (2, RUNNING_SUFFIX), (0, PLAIN_SUFFIX)]
                .into_iter()
                .find_map(|(at, suffix)| name.strip_suffix(suffix).map(|id| (at, id)));
            match found {
                Some((at, id)) if check_session_id(id).is_ok() => {
                    names[at].ids.push(id.to_owned());
                }
                Some((at, id)) => names[at].odd.push((id.to_owned(), entry.path())),
                None => {}
            }
        }
        for each in &mut names {
            each.ids.sort();
            each.odd.sort();
        }
        Ok(names)
    }

    /// The report of a file named like a record of `suffix` whose name holds no session id
    /// (`stem` before the suffix, as text).
    fn odd_name(stem: &str, path: &Path, suffix: &str) -> UnreadableRecord {
        UnreadableRecord {
            session_id: stem.to_owned(),
            location: path.display().to_string(),
            reason: format!(
                "the file name is not `<session id>{suffix}`: `{stem}` is not a session id (ASCII letters, digits, `-` and `_`, at most 128); not read"
            ),
        }
    }
}

/// The files of one suffix in the store directory ([`FileStore::names_with`]).
#[derive(Default)]
struct Names {
    /// The session ids, sorted.
    ids: Vec<String>,
    /// The names (before the suffix, lossily as text) that are not session ids, and the paths.
    odd: Vec<(String, PathBuf)>,
}

impl Names {
    /// Whether session `id` has a file of this suffix.
    fn has(&self, id: &str) -> bool {
        self.ids
            .binary_search_by(|each| each.as_str().cmp(id))
            .is_ok()
    }
}

#[async_trait]
impl SessionStore for FileStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        check_session_id(session_id)?;
        let id = session_id.to_owned();
        self.blocking(move |store| store.read_current(&id)).await
    }

    /// Every record in one blocking task (not one task per id), each read as
    /// [`SessionStore::load`] reads it, except that a pending file unchanged since a listing
    /// (or an earlier `load_many`) parsed it is not parsed again.
    async fn load_many(&self, session_ids: &[&str]) -> Result<Vec<super::Loaded>, StoreError> {
        let ids: Vec<String> = session_ids.iter().map(|&id| id.to_owned()).collect();
        self.blocking(move |store| {
            Ok(ids
                .iter()
                .map(|id| {
                    check_session_id(id)?;
                    store.read_current_kept(id, true)
                })
                .collect())
        })
        .await
    }

    async fn save(&self, record: &SessionRecord, expected: Option<u64>) -> Result<(), StoreError> {
        // Copied into the blocking task; the two fsyncs cost far more than the copy.
        let record = record.clone();
        self.blocking(move |store| store.save_sync(&record, expected))
            .await
    }

    async fn delete(&self, session_id: &str) -> Result<bool, StoreError> {
        let id = session_id.to_owned();
        self.blocking(move |store| store.delete_sync(&id)).await
    }

    /// Reads every `<id>.pending.json` and `<id>.running.json`; a session whose files cannot
    /// be read is reported in `unreadable` at that file's path (the reason names the file that
    /// failed), and so is a file of such a name that is not a regular file (a symlink, FIFO,
    /// folder: not followed, not waited on) or whose name holds no session id (reported under
    /// the name before the suffix, which [`SessionStore::load`] refuses). A pending file
    /// unchanged since the store last parsed it is not parsed again
    /// ([`FileStore::records_read`]).
    async fn list_pending(&self, now_ms: u64) -> Result<PendingListing, StoreError> {
        self.blocking(move |store| {
            let mut listing = PendingListing::default();
            let [plain, pending, running] = store.record_names()?;
            store.kept.retain(|id| pending.has(id));
            for (stem, path) in &running.odd {
                listing
                    .unreadable
                    .push(FileStore::odd_name(stem, path, RUNNING_SUFFIX));
            }
            for (stem, path) in &pending.odd {
                listing
                    .unreadable
                    .push(FileStore::odd_name(stem, path, PENDING_SUFFIX));
            }
            for id in &running.ids {
                match store.read_current(id) {
                    Ok(record) => listing
                        .interrupted
                        .extend(record.and_then(|r| r.interrupted_run(now_ms))),
                    Err(error) => listing.unreadable.push(UnreadableRecord::new(
                        id,
                        store.path(id, RUNNING_SUFFIX).display().to_string(),
                        &error,
                    )),
                }
            }
            for id in &pending.ids {
                let others = plain.has(id) || running.has(id);
                match store.read_current_kept(id, others) {
                    Ok(record) => listing
                        .pending
                        .extend(record.map(|r| r.pending_summaries()).unwrap_or_default()),
                    // Both names left by a crash mid-save: reported once.
                    Err(_) if listing.unreadable.iter().any(|u| u.session_id == *id) => {}
                    Err(error) => listing.unreadable.push(UnreadableRecord::new(
                        id,
                        store.path(id, PENDING_SUFFIX).display().to_string(),
                        &error,
                    )),
                }
            }
            listing.sort();
            Ok(listing)
        })
        .await
    }

    /// Reads every `<id>.pending.json` to place it by its `updatedAt`, parsing only the files
    /// that changed since the store last parsed them (each is checked by `lstat`: see
    /// [`FileStore::records_read`]), sorts, and fills the page from the cursor on with the
    /// records already read. The files that cannot be read, or whose names hold no session
    /// id, are reported on the first page.
    async fn list_pending_page(
        &self,
        after: Option<&PendingCursor>,
        limit: usize,
    ) -> Result<PendingPage, StoreError> {
        let after = after.cloned();
        self.blocking(move |store| {
            let [plain, pending, running] = store.record_names()?;
            store.kept.retain(|id| pending.has(id));
            let mut unreadable = Vec::new();
            let mut keyed: Vec<(u64, &str, Arc<SessionRecord>)> =
                Vec::with_capacity(pending.ids.len());
            for id in &pending.ids {
                let others = plain.has(id) || running.has(id);
                match store.read_current_kept(id, others) {
                    Ok(Some(record)) => keyed.push((record.updated_at, id, record)),
                    // Deleted since the directory was read.
                    Ok(None) => {}
                    Err(error) => unreadable.push(UnreadableRecord::new(
                        id,
                        store.path(id, PENDING_SUFFIX).display().to_string(),
                        &error,
                    )),
                }
            }
            keyed.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
            let mut fill = PageFill::new(after.as_ref(), limit);
            if after.is_none() {
                for (stem, path) in &pending.odd {
                    fill.unreadable([FileStore::odd_name(stem, path, PENDING_SUFFIX)]);
                }
                fill.unreadable(unreadable);
            }
            let start = after.as_ref().map_or(0, |c| {
                keyed.partition_point(|(at, id, _)| (*at, *id) < (c.updated_at(), c.session_id()))
            });
            for (at, id, record) in &keyed[start..] {
                if fill.session(*at, id, record.pending_summaries()) {
                    break;
                }
            }
            Ok(fill.finish())
        })
        .await
    }

    /// Reads every record file (`<id>.json`, `<id>.pending.json`, `<id>.running.json`): a
    /// session whose files cannot be read is reported in `unreadable` at its file's path, and
    /// so is a file of such a name that is not a regular file or whose name holds no session id,
    /// as [`SessionStore::list_pending`] reports them.
    async fn list_sessions(&self, workspace: Option<&Path>) -> Result<SessionListing, StoreError> {
        let workspace = workspace.map(Path::to_path_buf);
        self.blocking(move |store| {
            let mut listing = SessionListing::default();
            let mut ids = std::collections::BTreeMap::new();
            for suffix in RECORD_SUFFIXES {
                let names = store.names_with(suffix)?;
                for (stem, path) in &names.odd {
                    listing
                        .unreadable
                        .push(FileStore::odd_name(stem, path, suffix));
                }
                for id in names.ids {
                    ids.entry(id).or_insert(suffix);
                }
            }
            for (id, suffix) in ids {
                let read = match store.read_current(&id) {
                    Ok(None) => continue, // deleted since the directory was read
                    Ok(Some(record)) => Ok(record),
                    Err(error) => Err(error),
                };
                let location = || store.path(&id, suffix).display().to_string();
                listing.add(workspace.as_deref(), &id, location, read);
            }
            listing.sort();
            Ok(listing)
        })
        .await
    }

    /// An unreadable record is left as it is (it is not known to be stale), and the others are
    /// still expired. Each session is checked again under its lock before it is deleted.
    async fn expire(&self, before: u64) -> Result<usize, StoreError> {
        self.blocking(move |store| {
            let mut deleted = 0;
            for id in store.ids_with(PLAIN_SUFFIX)? {
                if store.expire_sync(&id, before)? {
                    deleted += 1;
                }
            }
            Ok(deleted)
        })
        .await
    }

    /// The store's directory, with the records and the `.locks` folder in it.
    fn protected_paths(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }

    /// Writes `allowances/<id>.json` in one step (a temporary file renamed into place).
    async fn save_workspace_allowance(
        &self,
        allowance: &crate::allowance::Allowance,
    ) -> Result<(), StoreError> {
        super::check_workspace_allowance(allowance)?;
        check_session_id(&allowance.id)?;
        let allowance = allowance.clone();
        self.blocking(move |store| {
            let dir = store.dir.join(ALLOWANCES_DIR);
            if !real_dir(&dir)? {
                match std::fs::create_dir(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(backend("create allowances directory", e)),
                }
                real_dir(&dir)?;
            }
            let text = serde_json::to_vec_pretty(&allowance)
                .map_err(|e| StoreError::backend("serialize allowance", e))?;
            order::take_place(&store.dir.join(order::ORDER_DIR), &allowance.id);
            let mut temp = TempFile::create(&dir, &allowance.id)?;
            temp.file
                .write_all(&text)
                .and_then(|()| temp.file.sync_all())
                .map_err(|e| backend("write allowance", e))?;
            store.fsyncs.fetch_add(1, Ordering::Relaxed);
            temp.persist(&dir.join(format!("{}{PLAIN_SUFFIX}", allowance.id)))?;
            if let Ok(d) = File::open(&dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })
        .await
    }

    /// Reads `allowances/*.json`; a file that cannot be read as an allowance is skipped (an
    /// allowance in doubt allows nothing).
    async fn list_workspace_allowances(
        &self,
        workspace: Option<&Path>,
    ) -> Result<Vec<crate::allowance::Allowance>, StoreError> {
        let workspace = workspace.map(Path::to_path_buf);
        self.blocking(move |store| {
            let dir = store.dir.join(ALLOWANCES_DIR);
            match real_dir(&dir) {
                Ok(true) => {}
                Ok(false) => return Ok(Vec::new()),
                Err(e) => {
                    tracing::warn!(error = %e, "the allowances folder is not read");
                    return Ok(Vec::new());
                }
            }
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(backend("read allowances directory", e)),
            };
            let mut found = Vec::new();
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(id) = name.to_str().and_then(|n| n.strip_suffix(PLAIN_SUFFIX)) else {
                    continue;
                };
                let read = read_regular(&entry.path(), MAX_ALLOWANCE_BYTES)
                    .map_err(|e| match e {
                        Ok(why) => why,
                        Err(e) => e.to_string(),
                    })
                    .and_then(|bytes| {
                        serde_json::from_slice::<crate::allowance::Allowance>(&bytes)
                            .map_err(|e| e.to_string())
                    });
                match read {
                    Ok(a)
                        if a.id == id
                            && workspace
                                .as_deref()
                                .is_none_or(|w| a.workspace.as_deref() == Some(w)) =>
                    {
                        found.push(a);
                    }
                    Ok(_) => {}
                    Err(why) => tracing::warn!(
                        file = %entry.path().display(),
                        why,
                        "an allowance file that cannot be read is skipped"
                    ),
                }
            }
            // In the order first saved ([`order`]), as the other stores list them.
            let places = order::places(&store.dir.join(order::ORDER_DIR));
            let place = |a: &crate::allowance::Allowance| places.get(&a.id).copied().unwrap_or(0);
            found.sort_by(|a, b| {
                place(a)
                    .cmp(&place(b))
                    .then_with(|| a.decided_at.cmp(&b.decided_at))
                    .then_with(|| a.id.cmp(&b.id))
            });
            Ok(found)
        })
        .await
    }

    async fn revoke_workspace_allowance(&self, id: &str) -> Result<bool, StoreError> {
        if check_session_id(id).is_err() {
            return Ok(false);
        }
        let id = id.to_owned();
        self.blocking(move |store| {
            let dir = store.dir.join(ALLOWANCES_DIR);
            if !real_dir(&dir)? {
                return Ok(false);
            }
            let path = dir.join(format!("{id}{PLAIN_SUFFIX}"));
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    order::drop_place(&store.dir.join(order::ORDER_DIR), &id);
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(backend("remove allowance", e)),
            }
        })
        .await
    }
}
