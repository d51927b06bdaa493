//! The error of a session store ([`StoreError`]), re-exported as
//! [`crate::store::StoreError`]. It sits beneath the stores and the rules (`src/machine/`), whose
//! [`crate::SessionError::Store`] carries it: the core names the error a save can end in
//! without importing the stores.

/// Errors from a [`SessionStore`](crate::store::SessionStore).
///
/// Two store errors are equal when they are the same variant with the same message; sources are
/// not compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another writer saved the session since it was read: reload and try again.
    #[error(
        "session `{session_id}` was changed by another writer (expected version {expected:?}, found {found:?})"
    )]
    Conflict {
        /// The session id.
        session_id: String,
        /// The version the save expected (`None`: the session must not exist yet).
        expected: Option<u64>,
        /// The version found (`None`: the session does not exist).
        found: Option<u64>,
    },
    /// A stored record cannot be read (corrupt, or of another schema version).
    #[error("session `{session_id}` cannot be read: {message}")]
    Corrupt {
        /// The session id.
        session_id: String,
        /// What is wrong.
        message: String,
    },
    /// The record was written by a newer release (its `schemaVersion` is above
    /// [`SCHEMA_VERSION`](crate::store::SCHEMA_VERSION)): this build cannot read it, and leaves it as it is. Upgrade this host.
    #[error(
        "session `{session_id}` was saved with record schema {found}, newer than the {supported} this build reads: upgrade agent-controller here; the record is left untouched"
    )]
    NewerSchema {
        /// The session id.
        session_id: String,
        /// The record's schema version.
        found: u64,
        /// The newest version this build reads ([`SCHEMA_VERSION`](crate::store::SCHEMA_VERSION)).
        supported: u32,
    },
    /// The store itself failed (I/O, database): what it was doing, and the underlying error as
    /// [`std::error::Error::source`] where there is one. Build it with [`StoreError::backend`].
    #[error("session store failed: {message}")]
    Backend {
        /// What failed, for people (the source's text included).
        message: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// No store exists at the spec's place (a directory, an SQLite file), and
    /// [`open_existing_store`](crate::store::open_existing_store) creates none: the spec as shown ([`display_spec`](crate::store::display_spec)).
    #[error("no store at {0}: it does not exist, and none was created")]
    Missing(String),
    /// The connection to the store was lost while a save was being committed, so whether it was
    /// applied is unknown: reload the session to see (its version is `version` if it was).
    #[error(
        "session `{session_id}`: the connection was lost during COMMIT, so whether version {version} was saved is unknown: reload the session to see ({message})"
    )]
    OutcomeUnknown {
        /// The session id.
        session_id: String,
        /// The version the save would have written.
        version: u64,
        /// What the driver reported.
        message: String,
    },
    /// The store does not do what was asked (a third-party store without workspace allowances,
    /// [`SessionStore::save_workspace_allowance`](crate::store::SessionStore::save_workspace_allowance)): what it cannot do.
    #[error("the session store cannot {0}")]
    Unsupported(String),
    /// A session id that cannot be stored (empty, or with characters other than ASCII letters,
    /// digits, `-` and `_`).
    #[error("invalid session id `{0}`: use ASCII letters, digits, `-` and `_`")]
    InvalidId(String),
    /// A store spec [`open_store`](crate::store::open_store) refuses: empty, or one that would keep sessions in a
    /// throw-away database (see [`check_spec`](crate::store::check_spec)). Nothing was opened or created.
    #[error("store `{spec}` refused: {reason}")]
    InvalidSpec {
        /// The spec as given (without a password: see [`display_spec`](crate::store::display_spec)).
        spec: String,
        /// Why, and what to give instead.
        reason: String,
    },
}

impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

impl Eq for StoreError {}

impl StoreError {
    /// A [`StoreError::Backend`]: `message` says what failed, `source` (an I/O or database
    /// error) is kept as the error's source, and its text is appended to the message.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::StoreError;
    /// let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
    /// let error = StoreError::backend("cannot write s1.json", io);
    /// assert!(error.to_string().contains("cannot write s1.json: denied"));
    /// assert!(std::error::Error::source(&error).is_some());
    /// ```
    pub fn backend(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Backend {
            message: format!("{}: {source}", message.into()),
            source: Some(Box::new(source)),
        }
    }

    /// A [`StoreError::Backend`] with no underlying error.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::store::StoreError;
    /// let error = StoreError::backend_message("the database is read-only");
    /// assert!(matches!(error, StoreError::Backend { .. }));
    /// assert!(std::error::Error::source(&error).is_none());
    /// ```
    pub fn backend_message(message: impl Into<String>) -> Self {
        Self::Backend {
            message: message.into(),
            source: None,
        }
    }
}
