//! Where a session works: its workspace, as the session records it when it starts.
//!
//! A session is started in its controller's workspace
//! ([`crate::controller::AgentControllerBuilder::workspace`]) and records it ([`WorkspaceRecord`]): the
//! directory's canonical path, and the identity of the directory itself
//! ([`DirectoryIdentity`]), so that a different directory put at the same path is noticed. Every
//! later act of the session (restoring it, deciding, carrying a run on, sending a message) first
//! checks that the controller's workspace is that same directory, and is refused otherwise
//! ([`crate::SessionError::WrongWorkspace`], [`crate::SessionError::WorkspaceGone`],
//! [`crate::SessionError::WorkspaceReplaced`]): an approval given for a plan made in project A
//! never runs in the home directory the decider happened to be in.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The identity of a directory, apart from its path: what tells "the same directory" from "a
/// different directory at the same path" (deleted and made again, a checkout replaced, a mount).
///
/// - On unix: the device and inode numbers (`st_dev`, `st_ino`) of the directory, which no
///   other file on the system has while it exists.
/// - Where the file system reports it: the directory's birth time (`statx` on Linux, `st_birthtime`
///   on macOS and the BSDs, the creation time on Windows), in nanoseconds since the Unix epoch.
///   An inode number is reused once its directory is deleted (ext4 hands the same number out
///   again within moments); a new directory with the same number still has another birth time.
///
/// Two identities are the same directory only when every field is equal, absent fields
/// included: a workspace is only ever compared with itself on the same host, which reports the
/// same fields for it each time. A host on another machine sees other device numbers (even for
/// a shared network file system) and is refused; such a host must work in its own workspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirectoryIdentity {
    /// The device number (`st_dev`), on unix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<u64>,
    /// The inode number (`st_ino`), on unix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inode: Option<u64>,
    /// The birth time in nanoseconds since the Unix epoch, where the file system reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_ns: Option<u64>,
}

impl DirectoryIdentity {
    /// The identity of the directory `meta` describes.
    fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (Some(meta.dev()), Some(meta.ino()))
        };
        #[cfg(not(unix))]
        let (device, inode) = (None, None);
        let created_ns = meta
            .created()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok());
        Self {
            device,
            inode,
            created_ns,
        }
    }
}

/// A session's workspace as its record keeps it
/// ([`crate::store::SessionRecord::workspace`]): the canonical path and the directory's
/// identity, taken when the session started.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspaceRecord {
    /// The workspace's canonical path: absolute, with symlinks, `.` and `..` resolved.
    pub path: PathBuf,
    /// The directory's identity ([`DirectoryIdentity`]).
    pub identity: DirectoryIdentity,
}

impl WorkspaceRecord {
    /// The workspace `dir` as it is now: its canonical path and identity.
    ///
    /// # Errors
    /// An I/O error when `dir` does not exist or cannot be read, is not a directory, or its
    /// canonical path is not UTF-8 (a session record, JSON, cannot hold it).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::workspace::WorkspaceRecord;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let recorded = WorkspaceRecord::of(dir.path())?;
    /// assert!(recorded.path.is_absolute());
    /// assert_eq!(recorded.check(dir.path()), Ok(()));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn of(dir: &Path) -> std::io::Result<Self> {
        let path = std::fs::canonicalize(dir)?;
        let meta = std::fs::metadata(&path)?;
        if !meta.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        if path.to_str().is_none() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "its path is not UTF-8, which a session record cannot hold",
            ));
        }
        Ok(Self {
            identity: DirectoryIdentity::of(&meta),
            path,
        })
    }

    /// Checks that `dir` is this workspace: the same canonical path, and the same directory
    /// there (its identity).
    ///
    /// # Errors
    /// [`WorkspaceMismatch::Gone`] when `dir` cannot be opened as a directory (deleted, say);
    /// [`WorkspaceMismatch::Elsewhere`] when it is another path; [`WorkspaceMismatch::Replaced`]
    /// when the path is this one but the directory is another.
    pub fn check(&self, dir: &Path) -> Result<(), WorkspaceMismatch> {
        let now = Self::of(dir).map_err(|e| WorkspaceMismatch::Gone {
            path: std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()),
            reason: e.to_string(),
        })?;
        if now.path != self.path {
            return Err(WorkspaceMismatch::Elsewhere {
                recorded: self.path.clone(),
                actual: now.path,
            });
        }
        if now.identity != self.identity {
            return Err(WorkspaceMismatch::Replaced { path: now.path });
        }
        Ok(())
    }
}

/// Why a directory is not a session's recorded workspace ([`WorkspaceRecord::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceMismatch {
    /// The directory cannot be opened: deleted, not a directory, unreadable.
    #[error("the workspace {} cannot be opened: {reason}", path.display())]
    Gone {
        /// The directory, as given (made absolute).
        path: PathBuf,
        /// Why it cannot be opened.
        reason: String,
    },
    /// The directory is another path than the recorded workspace.
    #[error("the session works in {}, not in {}", recorded.display(), actual.display())]
    Elsewhere {
        /// The recorded workspace.
        recorded: PathBuf,
        /// The directory given (canonical).
        actual: PathBuf,
    },
    /// The path is the recorded workspace's, but the directory there is another one (its
    /// [`DirectoryIdentity`] differs): deleted and made again, or replaced.
    #[error(
        "{} is another directory now than the workspace the session started in (deleted and made again, or replaced)",
        path.display()
    )]
    Replaced {
        /// The workspace path.
        path: PathBuf,
    },
}
