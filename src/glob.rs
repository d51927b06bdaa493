//! Globs over workspace paths and over text ([`Glob`]), and the error of a pattern that does
//! not compile ([`PatternError`]): used by the rules on tool-call arguments
//! ([`crate::rules`]) and by a plan's declared files (a plan's `## Files`). Its own file
//! so that both can use it without naming each other.

use std::sync::Arc;

/// Why a pattern could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatternError(String);

impl PatternError {
    /// A pattern error saying `why`.
    pub(crate) fn new(why: &str) -> Self {
        Self(why.to_owned())
    }
}

/// A glob, over workspace paths or over text: the one flag that tells them apart is whether
/// `*` and `?` stop at a `/` (`literal_separator`).
///
/// - [`Glob::path`]: over workspace paths. `*` and `?` stay within one folder, `**` crosses
///   folders (`**/.env*` matches `.env` too).
/// - [`Glob::text`]: over text. `*` matches any text, `/` included; `?` one character.
///
/// Either can be matched case-sensitively ([`Glob::is_match`]) or ignoring case
/// ([`Glob::is_match_ignoring_case`]): a `deny` or `ask` path rule matches ignoring case, so
/// that `.GIT/hooks` cannot slip past `.git/**` on a file system that ignores case (macOS,
/// Windows), and an `allow` path rule matches case-sensitively, so that it never allows more
/// than it names.
#[derive(Debug, Clone)]
pub struct Glob {
    text: Arc<str>,
    literal_separator: bool,
    matcher: globset::GlobMatcher,
    any_case: globset::GlobMatcher,
}

impl Glob {
    /// Compiles `text` as a glob over workspace paths (`*` and `?` within one folder, `**`
    /// across folders).
    ///
    /// # Errors
    /// [`PatternError`] when `text` is not a glob (an unclosed `[`, `{` or `**` inside a name).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::Glob;
    /// let env = Glob::path("**/.env*")?;
    /// assert!(env.is_match(".env") && env.is_match("config/.env.local"));
    /// assert!(!Glob::path("src/*")?.is_match("src/a/b.rs"));
    /// assert!(!env.is_match(".ENV") && env.is_match_ignoring_case(".ENV"));
    /// # Ok::<(), agent_controller::rules::PatternError>(())
    /// ```
    pub fn path(text: &str) -> Result<Self, PatternError> {
        Self::new(text, true)
    }

    /// Compiles `text` as a glob over text (`*` matches any text, `/` included).
    ///
    /// # Errors
    /// [`PatternError`] when `text` is not a glob.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::rules::Glob;
    /// let git = Glob::text("git *")?;
    /// assert!(git.is_match("git log --oneline src/main.rs"));
    /// assert!(!git.is_match("gitk"));
    /// # Ok::<(), agent_controller::rules::PatternError>(())
    /// ```
    pub fn text(text: &str) -> Result<Self, PatternError> {
        Self::new(text, false)
    }

    fn new(text: &str, literal_separator: bool) -> Result<Self, PatternError> {
        let compile = |case_insensitive| {
            globset::GlobBuilder::new(text)
                .literal_separator(literal_separator)
                .backslash_escape(true)
                .case_insensitive(case_insensitive)
                .build()
                .map(|glob| glob.compile_matcher())
                .map_err(|e| PatternError::new(&glob_error(&e)))
        };
        Ok(Self {
            text: Arc::from(text),
            literal_separator,
            matcher: compile(false)?,
            any_case: compile(true)?,
        })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `*` and `?` stop at a `/`: `true` for a [`Glob::path`], `false` for a
    /// [`Glob::text`].
    pub fn literal_separator(&self) -> bool {
        self.literal_separator
    }

    /// Whether `value` (for a path glob, a relative path with folders separated by `/`) fits,
    /// whole, with its case as written.
    pub fn is_match(&self, value: &str) -> bool {
        self.matcher.is_match(value)
    }

    /// Whether `value` fits, whole, whatever the case of its letters.
    pub fn is_match_ignoring_case(&self, value: &str) -> bool {
        self.any_case.is_match(value)
    }
}

/// Two globs are equal when they are written the same and of the same kind.
impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.literal_separator == other.literal_separator
    }
}

/// globset's message without the pattern it repeats.
fn glob_error(e: &globset::Error) -> String {
    e.kind().to_string()
}
