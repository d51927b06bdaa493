//! A directory that file operations cannot leave: the workspace (or the plans directory) the
//! tools work in.
//!
//! Every operation goes through a directory handle ([`cap_std::fs::Dir`]), never through a path
//! string that is checked first and opened later: the kernel resolves each path beneath the handle
//! (`openat2` with `RESOLVE_BENEATH` where Linux has it, otherwise `cap-std` walks the path one
//! component at a time with `O_NOFOLLOW`). A symlink that stays inside is followed; one that
//! leaves (absolute, `..` past the root, dangling to the outside, or swapped in while a call
//! runs) is refused. Only regular files are read or written, checked on the opened handle: a
//! FIFO, device or socket is opened non-blocking and refused at once.
//!
//! Hard links are another matter: a hard link is the file itself under a second name, and
//! nothing on it tells which name came first or where the others are. What the jail promises
//! for hard links that already exist (made by the user, a clone, a package manager such as
//! pnpm; no tool makes one):
//! - a hard link in the directory to a file elsewhere is read like any file in it
//!   ([`Jail::read`], and so `read_file`, `submit_plan` and the CLI's `--plan` copy): the jail
//!   bounds where a path leads, not where else the file it reaches has names;
//! - such a file is never written through: [`Jail::write`] refuses every file with more than
//!   one link ([`JailError::HardLinked`]), so the file outside never changes;
//! - protected areas are recognised by where a handle lies, and a hard link's handle lies at
//!   the link: a hard link elsewhere in the directory to a file in a protected area is read
//!   too (keep the session store outside the workspace, or make no such link).
//!
//! A jail can also hold protected areas ([`Jail::protecting`]): files and directories inside it
//! that no operation reads, lists or writes, such as the session store and the mode config when
//! they sit in the workspace. Each opened handle is checked by where it really lies (its
//! canonical path), so no spelling of a path (`..`, a symlink, an absolute path) gets in.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, MetadataExt, OpenOptions, OpenOptionsExt};

/// `O_NONBLOCK`: opening a FIFO or device never waits (for a writer, a carrier, ...); on a
/// regular file it changes nothing.
const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;

/// Why a jailed file operation was refused; the message names the path as it was given.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JailError {
    /// The path, or a symlink on it, leads outside the directory.
    #[error("path `{0}` leads outside {1}: access refused")]
    Outside(String, String),
    /// Nothing exists at the path.
    #[error("`{0}` does not exist")]
    NotFound(String),
    /// The path names something other than a regular file (a directory, FIFO, device, socket).
    #[error("`{0}` is not a regular file")]
    NotAFile(String),
    /// The file is larger than the operation's limit.
    #[error("`{path}` is larger than {limit} bytes ({len} bytes)")]
    TooLarge {
        /// The path as given.
        path: String,
        /// The size found, in bytes (at least `limit + 1`).
        len: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The file is a plan that is pending a decision; it cannot change until it is decided.
    #[error(
        "`{0}` is a plan file pending a decision: it cannot be changed until the plan is decided; write to another file"
    )]
    PendingPlan(String),
    /// The path lies in a protected area (the session store, the mode config, or a path the host
    /// protects): it is neither read, listed nor written.
    #[error(
        "`{0}` lies in a protected area (the session store, the mode config or a path the host protects): access refused"
    )]
    Protected(String),
    /// A directory that must lie where its name says ([`Jail::subdir`]: the plans directory)
    /// is reached through a symbolic link, which leads elsewhere inside.
    #[error(
        "`{path}` is reached through the symbolic link `{link}`, which leads to `{target}` in {root}: refused, as this directory must be a real folder where its name says"
    )]
    Linked {
        /// The directory's path as given.
        path: String,
        /// The part of it that is a symbolic link.
        link: String,
        /// Where the link leads, relative to the jail (`.` for its root).
        target: String,
        /// The jail, as its label names it.
        root: String,
    },
    /// The file has other hard links, which may lie outside; it is not written through.
    #[error("`{0}` has other hard links: refusing to write through it")]
    HardLinked(String),
    /// Another I/O error.
    #[error("`{0}`: {1}")]
    Io(String, #[source] std::io::Error),
}

/// The identity of a file (device and inode), to recognise one file under any of its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

/// A directory handle that every path is resolved beneath; see the [module docs](self).
#[derive(Debug)]
pub struct Jail {
    dir: Dir,
    label: String,
    /// Canonical paths of the protected areas: each path and everything beneath it.
    areas: Vec<PathBuf>,
}

impl Jail {
    /// Opens the directory at `path` (relative to the current directory, or absolute) as a jail.
    ///
    /// # Errors
    /// [`JailError::NotFound`] or [`JailError::Io`] when it cannot be opened as a directory.
    pub fn open(path: &Path) -> Result<Self, JailError> {
        let label = path.display().to_string();
        let dir = Dir::open_ambient_dir(path, ambient_authority())
            .map_err(|e| io_error(&label, &label, e))?;
        Ok(Self {
            dir,
            label,
            areas: Vec::new(),
        })
    }

    /// The same jail, refusing every operation on `paths` and on everything beneath them (a file,
    /// or a directory and its contents). The paths need not exist yet; relative ones are taken
    /// from the current directory.
    pub fn protecting(mut self, paths: &[PathBuf]) -> Self {
        self.areas.extend(paths.iter().map(|p| canonical(p)));
        self
    }

    /// Refuses `real` (where a path really lies) when it is or lies beneath a protected area.
    fn check_real(&self, real: &Path, shown: &str) -> Result<(), JailError> {
        if self.areas.iter().any(|p| real.starts_with(p)) {
            return Err(JailError::Protected(shown.to_owned()));
        }
        Ok(())
    }

    /// Refuses an opened handle that lies in a protected area, or whose place cannot be told.
    fn check_handle(&self, handle: &impl AsFd, shown: &str) -> Result<(), JailError> {
        if self.areas.is_empty() {
            return Ok(());
        }
        let real = real_path(handle).ok_or_else(|| JailError::Protected(shown.to_owned()))?;
        self.check_real(&real, shown)
    }

    /// Refuses `path` when it would lead into a protected area, before anything is created:
    /// the deepest part of it that exists is resolved, and the rest applied to that.
    fn check_path(&self, path: &Path, shown: &str) -> Result<(), JailError> {
        if self.areas.is_empty() {
            return Ok(());
        }
        let mut options = OpenOptions::new();
        options.read(true).custom_flags(NONBLOCK);
        for existing in path.ancestors() {
            let opened = if existing.as_os_str().is_empty() {
                Some(real_path(&self.dir))
            } else {
                self.dir
                    .open_with(existing, &options)
                    .ok()
                    .map(|f| real_path(&f))
            };
            let Some(real) = opened else { continue };
            let real = real.ok_or_else(|| JailError::Protected(shown.to_owned()))?;
            let rest = path.strip_prefix(existing).unwrap_or(path);
            let mut target = without_cur_dir(&real);
            for part in rest.components() {
                match part {
                    Component::ParentDir => {
                        target.pop();
                    }
                    Component::Normal(name) => target.push(name),
                    _ => {}
                }
            }
            return self.check_real(&target, shown);
        }
        Err(JailError::Protected(shown.to_owned()))
    }

    /// The directory `path` inside this one, created first when `create` is set, as a jail of its
    /// own (named `label` in messages). The directory must lie where its name says: each part of
    /// `path` is a real directory, never a symbolic link, not even one that stays inside (a
    /// plans directory `.agent/plans -> ..` would put plans at the workspace root, over its
    /// files). Each part is opened beneath the handle of the one before, created there when
    /// missing, and checked on its handle to be the directory entry of that name, so a link
    /// swapped in meanwhile is refused too.
    ///
    /// # Errors
    /// [`JailError::Outside`] when `path` leads outside, [`JailError::Linked`] when a part of it
    /// is a symbolic link, [`JailError::Protected`] when it leads into a protected area,
    /// [`JailError::NotFound`] or [`JailError::Io`] when it cannot be created or opened.
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use agent_controller::jail::{Jail, JailError};
    /// # let ws = tempfile::tempdir()?;
    /// let jail = Jail::open(ws.path())?;
    /// assert!(jail.subdir(Path::new(".agent/plans"), true, "plans").is_ok());
    /// std::os::unix::fs::symlink(".agent", ws.path().join("alias"))?;
    /// let linked = jail.subdir(Path::new("alias/plans"), false, "plans");
    /// assert!(matches!(linked, Err(JailError::Linked { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn subdir(&self, path: &Path, create: bool, label: &str) -> Result<Self, JailError> {
        let shown = path.display().to_string();
        self.check_path(path, &shown)?;
        let err = |e| io_error(&shown, &self.label, e);
        let mut dir = self.dir.try_clone().map_err(err)?;
        let mut walked = PathBuf::new();
        for part in path.components() {
            let name = match part {
                Component::CurDir => continue,
                Component::Normal(name) => name,
                _ => return Err(JailError::Outside(shown.clone(), self.label.clone())),
            };
            walked.push(name);
            if create {
                match dir.create_dir(name) {
                    Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(err(e)),
                    _ => {}
                }
            }
            let entry = dir.symlink_metadata(name).map_err(err)?;
            if entry.file_type().is_symlink() {
                return Err(self.linked(&shown, &walked));
            }
            // The handle opened is the entry looked at only when the two are one directory:
            // a link swapped in meanwhile is refused too.
            let next = dir.open_dir(name).map_err(err)?;
            let opened = next.dir_metadata().map_err(err)?;
            if (entry.dev(), entry.ino()) != (opened.dev(), opened.ino()) {
                return Err(self.linked(&shown, &walked));
            }
            dir = next;
        }
        self.check_handle(&dir, &shown)?;
        Ok(Self {
            dir,
            label: label.to_owned(),
            areas: self.areas.clone(),
        })
    }

    /// [`JailError::Linked`] for `path`, reached through the link `link`, saying where the
    /// link leads; the error of following it when it leads nowhere inside (outside, dangling).
    fn linked(&self, path: &str, link: &Path) -> JailError {
        let target = match self.resolve(link) {
            Ok(real) if real.as_os_str().is_empty() => ".".to_owned(),
            Ok(real) => real.display().to_string(),
            Err(e) => return e,
        };
        JailError::Linked {
            path: path.to_owned(),
            link: link.display().to_string(),
            target,
            root: self.label.clone(),
        }
    }

    /// Where `path` really lies in the directory, as a relative path without `.` or `..`
    /// (empty for the directory itself): the deepest part of it that exists is resolved by the
    /// kernel beneath the handle (symlinks inside followed), and the rest applied to that, as
    /// a file about to be created there would lie. What a rule on paths matches
    /// ([`crate::rules`]): `./src/../.env` and `src/link/.env` (with `src/link` a symlink to
    /// `..`) both lie at `.env`.
    ///
    /// # Errors
    /// [`JailError::Outside`] when the path, or a symlink on it, leads outside;
    /// [`JailError::NotFound`] for a dangling symlink; [`JailError::Io`] when a part of it
    /// cannot be resolved (a file used as a folder, no permission, `..` after a name that does
    /// not exist yet).
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use agent_controller::jail::Jail;
    /// # let ws = tempfile::tempdir()?;
    /// std::fs::create_dir(ws.path().join("src"))?;
    /// let jail = Jail::open(ws.path())?;
    /// assert_eq!(jail.resolve(Path::new("./src/../.env"))?, Path::new(".env"));
    /// assert!(jail.resolve(Path::new("src/../../x")).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(&self, path: &Path) -> Result<PathBuf, JailError> {
        let shown = path.display().to_string();
        let outside = || JailError::Outside(shown.clone(), self.label.clone());
        if path.has_root() {
            return Err(outside());
        }
        for existing in path.ancestors() {
            let real = if existing.as_os_str().is_empty() {
                PathBuf::new()
            } else {
                match self.dir.canonicalize(existing) {
                    Ok(real) => real,
                    // A dangling symlink is not a name still free: where it leads is unknown.
                    Err(e)
                        if e.kind() == std::io::ErrorKind::NotFound
                            && !self
                                .dir
                                .symlink_metadata(existing)
                                .is_ok_and(|m| m.file_type().is_symlink()) =>
                    {
                        continue;
                    }
                    Err(e) => return Err(io_error(&shown, &self.label, e)),
                }
            };
            let rest = path.strip_prefix(existing).unwrap_or(path);
            let mut target = without_cur_dir(&real);
            for part in rest.components() {
                match part {
                    // Past a name that does not exist yet, `..` cannot be told: once the
                    // folders are made, it may climb through a symlink (`new/../link/x`).
                    // The rest starts at a name that does not exist (the kernel resolved every
                    // `..` before it). Past it `..` cannot be told: once the folders are made,
                    // it may climb through a symlink (`new/../link/x`).
                    Component::ParentDir => {
                        return Err(JailError::Io(
                            shown.clone(),
                            std::io::Error::other("`..` after a name that does not exist yet"),
                        ));
                    }
                    Component::Normal(name) => target.push(name),
                    _ => {}
                }
            }
            return Ok(target);
        }
        Err(outside())
    }

    /// Reads the regular file at `path`, at most `limit` bytes.
    ///
    /// # Errors
    /// [`JailError::Outside`], [`JailError::NotFound`], [`JailError::NotAFile`] (also for a
    /// FIFO or device, at once), [`JailError::TooLarge`], [`JailError::Protected`],
    /// [`JailError::Io`].
    pub fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, JailError> {
        let shown = path.display().to_string();
        // Checked by path first too, so a missing file in a protected area is refused as well,
        // not reported missing.
        self.check_path(path, &shown)?;
        let mut options = OpenOptions::new();
        options.read(true).custom_flags(NONBLOCK);
        let file = self
            .dir
            .open_with(path, &options)
            .map_err(|e| io_error(&shown, &self.label, e))?;
        self.check_handle(&file, &shown)?;
        read_regular(file, &shown, limit)
    }

    /// The identity of the file at `path`, or `None` when it cannot be opened inside.
    pub fn file_id(&self, path: &Path) -> Option<FileId> {
        let mut options = OpenOptions::new();
        options.read(true).custom_flags(NONBLOCK);
        let file = self.dir.open_with(path, &options).ok()?;
        let meta = file.metadata().ok()?;
        Some(FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// The entries of the directory at `path`, sorted, directories with a trailing `/`.
    ///
    /// # Errors
    /// [`JailError::Outside`], [`JailError::NotFound`], [`JailError::Protected`],
    /// [`JailError::Io`] (also when `path` is not a directory).
    pub fn list(&self, path: &Path) -> Result<Vec<String>, JailError> {
        let shown = path.display().to_string();
        let err = |e| io_error(&shown, &self.label, e);
        self.check_path(path, &shown)?;
        let dir = if path.as_os_str().is_empty() || path == Path::new(".") {
            self.dir.try_clone().map_err(err)?
        } else {
            self.dir.open_dir(path).map_err(err)?
        };
        self.check_handle(&dir, &shown)?;
        let mut names = Vec::new();
        for entry in dir.entries().map_err(err)? {
            let entry = entry.map_err(err)?;
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        Ok(names)
    }

    /// Writes `bytes` to the regular file at `path`, creating it and its folders, replacing its
    /// content. A file whose identity is in `protected` (plans pending a decision) is not
    /// touched, nor is one with other hard links, nor anything in a protected area (checked
    /// before any folder is created).
    ///
    /// # Errors
    /// [`JailError::Outside`], [`JailError::NotAFile`], [`JailError::PendingPlan`],
    /// [`JailError::Protected`], [`JailError::HardLinked`], [`JailError::Io`].
    pub fn write(&self, path: &Path, bytes: &[u8], protected: &[FileId]) -> Result<(), JailError> {
        let shown = path.display().to_string();
        let err = |e| io_error(&shown, &self.label, e);
        let (parent, name) = self.open_parent(path, &shown)?;
        let mut existing = OpenOptions::new();
        // No truncation before the handle is checked: a FIFO or a pending plan stays as it is.
        existing.write(true).custom_flags(NONBLOCK);
        let mut file = match parent.open_with(name, &existing) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // O_CREAT | O_EXCL: a new regular file right in the checked parent, never
                // through a symlink (dangling or not).
                let mut fresh = OpenOptions::new();
                fresh.write(true).create_new(true).custom_flags(NONBLOCK);
                parent.open_with(name, &fresh).map_err(err)?
            }
            Err(e) => return Err(err(e)),
        };
        self.check_handle(&file, &shown)?;
        let meta = file.metadata().map_err(err)?;
        if !meta.is_file() {
            return Err(JailError::NotAFile(shown));
        }
        let id = FileId {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        if protected.contains(&id) {
            return Err(JailError::PendingPlan(shown));
        }
        if meta.nlink() > 1 {
            return Err(JailError::HardLinked(shown));
        }
        file.set_len(0).map_err(err)?;
        file.write_all(bytes).map_err(err)?;
        Ok(())
    }

    /// The directory `path` goes in, created (after checking that `path` leads into no protected
    /// area) and checked again on its handle, and the file name in it.
    fn open_parent<'p>(&self, path: &'p Path, shown: &str) -> Result<(Dir, &'p Path), JailError> {
        self.check_path(path, shown)?;
        let name = match path.components().next_back() {
            Some(Component::Normal(name)) => Path::new(name),
            _ => return Err(JailError::NotAFile(shown.to_owned())),
        };
        self.create_parent(path, shown)?;
        let err = |e| io_error(shown, &self.label, e);
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => {
                self.dir.open_dir(parent).map_err(err)?
            }
            _ => self.dir.try_clone().map_err(err)?,
        };
        self.check_handle(&parent, shown)?;
        if let Some(real) = real_path(&parent).filter(|_| !self.areas.is_empty()) {
            self.check_real(&real.join(name), shown)?;
        }
        Ok((parent, name))
    }

    /// Writes `bytes` to a new file named `path`, or, when that name is taken by anything (a
    /// file, a folder, a symlink, dangling or not), to `stem-2.ext`, `stem-3.ext`, ...; never
    /// replaces an existing file. A file that already holds exactly `bytes` is reused. Returns
    /// the path written (or reused).
    ///
    /// # Errors
    /// [`JailError::Outside`], [`JailError::Protected`], [`JailError::Io`] (also when no free
    /// name is found).
    pub fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<PathBuf, JailError> {
        let shown = path.display().to_string();
        let (parent, name) = self.open_parent(path, &shown)?;
        for n in 1..=1000 {
            let candidate = numbered(path, n);
            let candidate_name = numbered(name, n);
            let mut options = OpenOptions::new();
            // O_CREAT | O_EXCL: never follows a symlink, dangling or not.
            options.write(true).create_new(true).custom_flags(NONBLOCK);
            match parent.open_with(&candidate_name, &options) {
                Ok(mut file) => {
                    let shown = candidate.display().to_string();
                    file.write_all(bytes)
                        .map_err(|e| io_error(&shown, &self.label, e))?;
                    return Ok(candidate);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let limit = bytes.len() as u64;
                    if self.read(&candidate, limit).is_ok_and(|old| old == bytes) {
                        return Ok(candidate);
                    }
                }
                Err(e) => return Err(io_error(&shown, &self.label, e)),
            }
        }
        Err(JailError::Io(
            shown,
            std::io::Error::other("no free file name (tried 1000)"),
        ))
    }

    fn create_parent(&self, path: &Path, shown: &str) -> Result<(), JailError> {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => self.create_dir_all(parent, shown),
            _ => Ok(()),
        }
    }

    /// Creates the directory `path` and its parents inside. Where a part of it already exists
    /// but cannot be entered (a symlink that leads outside, a file), the error says why, from
    /// opening it, not that it exists.
    fn create_dir_all(&self, path: &Path, shown: &str) -> Result<(), JailError> {
        let err = |e| io_error(shown, &self.label, e);
        match self.dir.create_dir_all(path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                match self.dir.open_dir(path) {
                    Err(why) => Err(err(why)),
                    Ok(_) => Err(err(e)),
                }
            }
            result => result.map_err(err),
        }
    }
}

/// Where `path` really lies: canonical when it exists; otherwise its deepest existing ancestor
/// made canonical with the rest appended; relative paths start at the current directory.
fn canonical(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    for existing in absolute.ancestors() {
        if let Ok(real) = existing.canonicalize() {
            let rest = absolute.strip_prefix(existing).unwrap_or(Path::new(""));
            return match normalize(rest) {
                Some(rest) => real.join(rest),
                None => absolute,
            };
        }
    }
    absolute
}

/// Where an opened file or directory really lies (its canonical path), from the kernel;
/// `None` where that cannot be told.
fn real_path(handle: &impl AsFd) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let fd = handle.as_fd().as_raw_fd();
        std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = handle;
        None
    }
}

/// `real`, a path the kernel resolved, without its `.` parts: `.` (what the directory itself
/// canonicalizes to) is no part of the place.
fn without_cur_dir(real: &Path) -> PathBuf {
    real.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// `path` with `-n` added to its stem for `n > 1` (`plan.md`, `plan-2.md`, ...).
fn numbered(path: &Path, n: u32) -> PathBuf {
    if n == 1 {
        return path.to_owned();
    }
    let stem = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    path.with_file_name(name)
}

/// The path a model gave, relative to `root`: relative paths as they are, absolute ones only when
/// they lie under `root` (as given or after resolving `root`'s symlinks).
///
/// # Errors
/// [`JailError::Outside`] for an absolute path elsewhere.
pub fn relative_to(root: &Path, path: &str) -> Result<PathBuf, JailError> {
    let given = Path::new(path);
    if !given.has_root() {
        return Ok(given.to_owned());
    }
    let outside = || JailError::Outside(path.to_owned(), root.display().to_string());
    let stripped = |root: &Path| {
        given
            .strip_prefix(root)
            .ok()
            .filter(|_| root.has_root())
            .map(Path::to_owned)
    };
    if let Some(rel) = stripped(root) {
        return Ok(rel);
    }
    let canonical = root.canonicalize().map_err(|_| outside())?;
    stripped(&canonical).ok_or_else(outside)
}

/// Where `path` lies inside `root`, as a normalized relative path of at least one component;
/// `None` when it is not under `root` (lexically) or is `root` itself.
pub(crate) fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(root).ok()?;
    normalize(rel).filter(|rel| !rel.as_os_str().is_empty())
}

/// `path` without `.` components and with `..` applied to the components before it; `None` when
/// a `..` climbs above the start or the path is absolute.
pub(crate) fn normalize(path: &Path) -> Option<PathBuf> {
    let mut normal = PathBuf::new();
    for part in path.components() {
        match part {
            Component::Normal(name) => normal.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(normal)
}

/// Reads the regular file at `path` (any path the user names, not jailed), at most `limit`
/// bytes: opened non-blocking and checked on the handle, so a FIFO or device is refused at once.
///
/// # Errors
/// [`JailError::NotFound`], [`JailError::NotAFile`], [`JailError::TooLarge`], [`JailError::Io`].
pub fn read_file(path: &Path, limit: u64) -> Result<Vec<u8>, JailError> {
    let shown = path.display().to_string();
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(NONBLOCK);
    let file = File::open_ambient_with(path, &options, ambient_authority())
        .map_err(|e| io_error(&shown, "", e))?;
    read_regular(file, &shown, limit)
}

fn read_regular(file: File, shown: &str, limit: u64) -> Result<Vec<u8>, JailError> {
    let io = |e| JailError::Io(shown.to_owned(), e);
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(JailError::NotAFile(shown.to_owned()));
    }
    let too_large = |len| JailError::TooLarge {
        path: shown.to_owned(),
        len,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // One byte past the limit, so a file that grew since the metadata call is still caught.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

fn io_error(shown: &str, root: &str, e: std::io::Error) -> JailError {
    use std::io::ErrorKind;
    let escape = e.kind() == ErrorKind::PermissionDenied
        && e.to_string().contains("outside of the filesystem");
    match e.kind() {
        _ if escape => JailError::Outside(shown.to_owned(), root.to_owned()),
        ErrorKind::NotFound => JailError::NotFound(shown.to_owned()),
        _ => JailError::Io(shown.to_owned(), e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names_keep_the_extension() {
        assert_eq!(numbered(Path::new("a/plan.md"), 1), Path::new("a/plan.md"));
        assert_eq!(
            numbered(Path::new("a/plan.md"), 3),
            Path::new("a/plan-3.md")
        );
        assert_eq!(numbered(Path::new("notes"), 2), Path::new("notes-2"));
    }

    #[test]
    fn normalize_refuses_climbing_and_roots() {
        assert_eq!(
            normalize(Path::new("./a/../b/./c")),
            Some(PathBuf::from("b/c"))
        );
        assert_eq!(normalize(Path::new("a/../../b")), None);
        assert_eq!(normalize(Path::new("/etc")), None);
    }

    #[test]
    fn absolute_paths_count_only_under_the_root() {
        assert_eq!(
            relative_to(Path::new("/ws"), "/ws/a/b").expect("under the root"),
            Path::new("a/b")
        );
        assert!(relative_to(Path::new("/ws"), "/etc/passwd").is_err());
        assert_eq!(
            relative_to(Path::new("."), "x/y").expect("relative"),
            Path::new("x/y")
        );
    }
}
