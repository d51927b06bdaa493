//! Allowances: what an "always allow" ([`crate::Decision::always_allow`]) leaves behind, for how
//! long ([`AllowanceScope`]), and on which calls ([`AllowancePattern`]).
//!
//! An allowance lets a tool's later calls run without asking, where the mode's
//! `requireApproval` would hold them. It never stands in for a mode's rule: a call a `deny` rule
//! refuses is refused, one an `ask` rule asks about is asked about, whatever the allowance
//! ([`crate::rules`]). The precedence, in full:
//!
//! 1. the mode's `availableTools` outranks everything;
//! 2. then the mode's rules: `deny` beats `ask`, which beats `allow`;
//! 3. a call no rule matched gets the mode's default; where that default is to wait
//!    (`requireApproval`), an allowance in force that covers the call runs it instead, and the
//!    call's audit record names the allowance (`allowedBy`, and `decidedBy: "allowance ID
//!    (SCOPE)"`).
//!
//! Scopes:
//! - [`AllowanceScope::Mode`] (the default): until the session's mode changes.
//! - [`AllowanceScope::Session`]: for the rest of the session, but only while it is in the mode
//!   the allowance was given in: switch away and back, and it applies again. It never runs
//!   another mode's calls.
//! - [`AllowanceScope::Workspace`]: kept in the session store
//!   ([`crate::SessionStore::save_workspace_allowance`]), keyed by the workspace (its canonical
//!   root, as the jail uses it), the config's fingerprint ([`crate::ModeGraph::fingerprint`]) and
//!   the mode: every session of that store in the same workspace, under the same config, in that
//!   mode, is covered, and none in another workspace or under another config. It also keeps the
//!   identity of the workspace directory ([`crate::workspace::DirectoryIdentity`], as sessions
//!   check it): a directory deleted and made again at the same path (another clone, another
//!   project) is another workspace, and the allowance does not apply there
//!   ([`Allowance::applies_in`]). A session ignores it, and its log says why (`workspace allowance
//!   not in force here`); the store still lists it for that path, so it can be revoked, and the
//!   same allowance given again in the new directory replaces it (it has the same id). One kept
//!   before identities were recorded applies nowhere for the same reason: give it again.
//!
//! - [`AllowanceScope::Plan`]: given by approving a plan that declares its files, for the mode
//!   it hands over to, until the mode changes or another plan is approved; it covers the writes
//!   to the plan's files of every tool that writes ([`PlanGrant`], the guide's
//!   [plan scope page](crate::guide::plan_scope)).
//!
//! The guide's [rules page](crate::guide::rules#allowances-with-a-scope) shows a decision and a
//! terminal transcript.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::rules::{
    DEFAULT_PATH_ARG, Glob, Matcher, Pattern, PatternError, ResolvedPaths, Rule, RuleAction, Rules,
};
use crate::tool::ToolCall;
use crate::workspace::{DirectoryIdentity, WorkspaceRecord};

/// How long an allowance lasts, and where it applies (`"scope"` in a decision).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[strum(parse_err_ty = crate::names::UnknownName, parse_err_fn = crate::names::UnknownName::of::<Self>)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(inline, schema_with = "crate::names::schema::<AllowanceScope>")
)]
pub enum AllowanceScope {
    /// Until the session's mode changes (the default).
    #[default]
    Mode,
    /// For the rest of the session, while it is in the mode it was given in.
    Session,
    /// Every session of the store in the same workspace, under the same config, in the
    /// same mode.
    Workspace,
    /// Given by approving a plan that declares its files (its `## Files` section), in the mode
    /// the plan handed over to: the writes to those files run without asking
    /// ([`Allowance::plan`]). Ended by the next change of mode or the next approved plan. Never
    /// given by a tool call's "always allow".
    Plan,
}

impl AllowanceScope {
    /// Every variant's name, in declaration order.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The variant's name: what `Display` writes and `FromStr` reads.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What narrows an allowance to some calls of its tool, written as a mode's rule is
/// ([`crate::rules`]): `{"path": "src/**"}` (the path argument `path`, or the one `arg` names,
/// as the workspace jail resolved it) or `{"arg": "command", "glob": "git *"}` (or `"regex"`:
/// the argument's canonical value). It matches as an `allow` rule does: the case as written, a
/// path in doubt or a value of several lines never.
///
/// # Examples
/// ```
/// use agent_controller::allowance::AllowancePattern;
/// let pattern: AllowancePattern = serde_json::from_value(serde_json::json!({ "path": "src/**" }))?;
/// assert_eq!(pattern, AllowancePattern::path("src/**"));
/// assert_eq!(pattern.to_string(), "path `src/**`");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowancePattern {
    /// The argument the pattern reads: with `glob` or `regex`, its canonical value; with
    /// `path`, the path it holds (default `path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<String>,
    /// A glob the path argument must fit as the workspace jail resolved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A glob the argument's canonical value must fit, whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// A regex the argument's canonical value must match, whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

impl AllowancePattern {
    /// A pattern on the path argument `path`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::AllowancePattern;
    /// assert_eq!(AllowancePattern::path("src/**").path.as_deref(), Some("src/**"));
    /// ```
    pub fn path(glob: impl Into<String>) -> Self {
        Self {
            path: Some(glob.into()),
            ..Self::default()
        }
    }

    /// A glob on the canonical value of argument `arg`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::AllowancePattern;
    /// let pattern = AllowancePattern::glob("command", "git *");
    /// assert_eq!(pattern.to_string(), "command glob `git *`");
    /// ```
    pub fn glob(arg: impl Into<String>, glob: impl Into<String>) -> Self {
        Self {
            arg: Some(arg.into()),
            glob: Some(glob.into()),
            ..Self::default()
        }
    }

    /// The pattern as a rule's matcher.
    ///
    /// # Errors
    /// A [`PatternError`] saying what is wrong: no pattern or more than one, an empty `arg`, a
    /// `glob` or `regex` without `arg`, or a pattern that does not compile.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::AllowancePattern;
    /// assert!(AllowancePattern::path("src/**").matcher().is_ok());
    /// assert!(AllowancePattern::default().matcher().is_err());
    /// assert!(AllowancePattern::path("src/[").matcher().is_err());
    /// ```
    pub fn matcher(&self) -> Result<Matcher, PatternError> {
        let fail = |why: &str| Err(PatternError::new(why));
        if self.arg.as_deref().is_some_and(str::is_empty) {
            return fail("an empty `arg`: name the argument the pattern reads");
        }
        if self.arg.as_deref() == Some(DEFAULT_PATH_ARG)
            && (self.glob.is_some() || self.regex.is_some())
        {
            return fail(
                "a `glob` or `regex` on `path` reads the text as sent, which `..` walks out of (`src/../.env` fits `src/*`): use `path`, which reads the path the workspace jail resolved",
            );
        }
        match (&self.path, &self.glob, &self.regex) {
            (Some(path), None, None) => Ok(Matcher::Path {
                arg: self.arg.as_deref().unwrap_or(DEFAULT_PATH_ARG).into(),
                glob: Glob::path(path)?,
            }),
            (None, Some(glob), None) => match &self.arg {
                Some(arg) => Ok(Matcher::Glob {
                    arg: arg.as_str().into(),
                    glob: Glob::text(glob)?,
                }),
                None => fail("a `glob` needs the `arg` it reads"),
            },
            (None, None, Some(regex)) => match &self.arg {
                Some(arg) => Ok(Matcher::Regex {
                    arg: arg.as_str().into(),
                    regex: Pattern::new(regex)?,
                }),
                None => fail("a `regex` needs the `arg` it reads"),
            },
            (None, None, None) => fail("no pattern: give `path`, or `arg` with `glob` or `regex`"),
            _ => fail("more than one of `path`, `glob` and `regex`: a pattern has one"),
        }
    }
}

/// Why `pattern` cannot narrow an allowance on tool `tool`, whose input schema is `schema`: the
/// argument it reads is not one the schema declares (`properties`). A tool whose schema takes
/// extra properties would let the model meet the pattern with a decoy argument
/// (`{"command": "rm -rf ~", "path": "src/x"}` fits `path src/**`), so such a pattern is refused.
/// `None`: the schema declares it.
pub(crate) fn undeclared_pattern_arg(
    pattern: &AllowancePattern,
    tool: &str,
    schema: Option<&serde_json::Value>,
) -> Option<String> {
    let arg = pattern.arg.as_deref().unwrap_or(DEFAULT_PATH_ARG);
    let declared: Vec<&str> = schema
        .and_then(|s| s.get("properties"))
        .and_then(serde_json::Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if declared.contains(&arg) {
        return None;
    }
    let takes = if declared.is_empty() {
        "declares no argument".to_owned()
    } else {
        format!(
            "declares {}",
            declared
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Some(format!(
        "the allowance's pattern `allow` reads argument `{arg}`, which tool `{tool}` does not declare in its input schema (it {takes}): a call could meet the pattern with an extra argument of that name, so name an argument the tool takes"
    ))
}

impl std::fmt::Display for AllowancePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let arg = self.arg.as_deref();
        match (&self.path, &self.glob, &self.regex) {
            (Some(p), _, _) if arg.is_none_or(|a| a == DEFAULT_PATH_ARG) => {
                write!(f, "path `{p}`")
            }
            (Some(p), _, _) => write!(f, "{} path `{p}`", arg.unwrap_or_default()),
            (_, Some(g), _) => write!(f, "{} glob `{g}`", arg.unwrap_or_default()),
            (_, _, Some(r)) => write!(f, "{} regex `{r}`", arg.unwrap_or_default()),
            _ => f.write_str("no pattern"),
        }
    }
}

/// One allowance in force: a tool (maybe narrowed by a pattern) that runs without asking in a
/// mode, for a scope. [`crate::Session::allowances`] lists those of a session,
/// [`crate::SessionStore::list_workspace_allowances`] the workspace ones of a store.
///
/// # Examples
/// ```
/// use agent_controller::allowance::{Allowance, AllowancePattern, AllowanceScope};
/// let allowance = Allowance::new(AllowanceScope::Session, "decision_3", "build", "write_file")
///     .narrowed(AllowancePattern::path("src/**"));
/// assert_eq!(allowance.to_string(), "decision_3 (session): write_file path `src/**` in mode `build`");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Allowance {
    /// The allowance's id: for the scopes `mode` and `session`, the id of the decision that gave
    /// it (unique in the session); for `workspace`, `ws_` and 16 hex digits of a SHA-256 of what
    /// it allows and where (unique in the store, the same for the same allowance given twice).
    pub id: String,
    /// How long it lasts, and where it applies.
    pub scope: AllowanceScope,
    /// The mode it was given in, the only mode whose calls it runs.
    pub mode_id: String,
    /// The tool whose calls it runs.
    pub tool_name: String,
    /// What narrows it to some calls of the tool; `None`: every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<AllowancePattern>,
    /// The session whose decision gave it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_id: String,
    /// The id of the decision that gave it, in that session.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub decision_id: String,
    /// Who gave it ([`crate::Decision::decided_by`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// When, as RFC 3339 in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// For a workspace allowance: the workspace's canonical root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// For a workspace allowance: the config's fingerprint ([`crate::ModeGraph::fingerprint`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_fingerprint: Option<String>,
    /// For a workspace allowance: the identity of the workspace directory it was given in
    /// ([`DirectoryIdentity`]), so that another directory at the same path is not covered
    /// ([`Allowance::applies_in`]). `None` in allowances kept before it was recorded, which
    /// apply nowhere. Not part of the id: given again in a new directory at the path, the
    /// allowance replaces the old one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_identity: Option<DirectoryIdentity>,
    /// For an allowance of a tool that runs elsewhere (an MCP server's): the identity of what
    /// runs it ([`crate::tool::Tool::origin`]: the server's command and arguments, or its URL),
    /// so a different server that reuses the name is not covered ([`Allowance::covers_origin`]).
    /// `None` for a tool of the process itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// For an allowance of scope `plan`: the approved plan's files and what they bind
    /// ([`PlanGrant`]). Its `toolName` is then `*`: it covers the writes of every tool that
    /// writes, to those files only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanGrant>,
}

/// What approving a plan that declares its files gave the mode it handed over to (an
/// [`Allowance`] of scope `plan`): the files (`files`, the plan's `## Files` entries), the
/// approved plan's sha256, and what a write elsewhere meets (`planScope`: `ask` or
/// `enforce`; under `off` nothing is given).
///
/// # Examples
/// ```
/// use agent_controller::allowance::PlanGrant;
/// use agent_controller::tool::submit_plan::{PlanScope, PlanScopePolicy};
/// let grant = PlanGrant {
///     sha256: "ab".into(),
///     files: PlanScope::of("## Files\n- `src/ui/**`\n")?.unwrap(),
///     plan_scope: PlanScopePolicy::Enforce,
/// };
/// assert_eq!(
///     serde_json::to_value(&grant)?,
///     serde_json::json!({ "sha256": "ab", "files": ["src/ui/**"], "planScope": "enforce" })
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanGrant {
    /// The sha256 of the approved plan's text (the user's edit, when they edited it).
    pub sha256: String,
    /// The files the plan declares.
    pub files: crate::plan::PlanScope,
    /// What a write outside `files` meets: `ask` (it waits for approval as drift) or
    /// `enforce` (it is refused).
    pub plan_scope: crate::plan::PlanScopePolicy,
}

/// The `toolName` of an allowance of scope `plan`: it covers every tool that writes.
pub const EVERY_WRITING_TOOL: &str = "*";

impl Allowance {
    /// An allowance of every call of `tool_name` in mode `mode_id`, with id `id`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::{Allowance, AllowanceScope};
    /// let allowance = Allowance::new(AllowanceScope::Mode, "decision_1", "build", "write_file");
    /// assert_eq!(allowance.pattern, None);
    /// ```
    pub fn new(
        scope: AllowanceScope,
        id: impl Into<String>,
        mode_id: impl Into<String>,
        tool_name: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            scope,
            mode_id: mode_id.into(),
            tool_name: tool_name.into(),
            pattern: None,
            session_id: String::new(),
            decision_id: String::new(),
            decided_by: None,
            decided_at: None,
            workspace: None,
            config_fingerprint: None,
            workspace_identity: None,
            origin: None,
            plan: None,
        }
    }

    /// The same allowance, narrowed to the calls `pattern` matches.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::{Allowance, AllowancePattern, AllowanceScope};
    /// let allowance = Allowance::new(AllowanceScope::Mode, "decision_1", "build", "run_command")
    ///     .narrowed(AllowancePattern::glob("command", "git *"));
    /// assert!(allowance.pattern.is_some());
    /// ```
    pub fn narrowed(mut self, pattern: AllowancePattern) -> Self {
        self.pattern = Some(pattern);
        self
    }

    /// The same allowance, kept for the workspace at `workspace` under the config with
    /// `fingerprint`: its scope becomes [`AllowanceScope::Workspace`] and its id the
    /// workspace id ([`Allowance::workspace_id`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::{Allowance, AllowanceScope};
    /// let a = Allowance::new(AllowanceScope::Workspace, "", "build", "write_file").in_workspace("/w/a", "f1");
    /// let b = Allowance::new(AllowanceScope::Workspace, "", "build", "write_file").in_workspace("/w/b", "f1");
    /// assert!(a.id.starts_with("ws_") && a.id != b.id);
    /// ```
    pub fn in_workspace(mut self, workspace: impl Into<PathBuf>, fingerprint: &str) -> Self {
        self.scope = AllowanceScope::Workspace;
        self.workspace = Some(workspace.into());
        self.config_fingerprint = Some(fingerprint.to_owned());
        self.id = self.workspace_id();
        self
    }

    /// The same allowance, kept for the workspace `workspace` (its canonical path and the
    /// identity of its directory) under the config with `fingerprint`: as
    /// [`Allowance::in_workspace`], with the directory's identity, so that it applies in that
    /// directory only ([`Allowance::applies_in`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::{Allowance, AllowanceScope};
    /// use agent_controller::workspace::WorkspaceRecord;
    /// let dir = tempfile::tempdir()?;
    /// let workspace = WorkspaceRecord::of(dir.path())?;
    /// let a = Allowance::new(AllowanceScope::Workspace, "", "build", "write_file")
    ///     .in_directory(&workspace, "f1");
    /// assert_eq!(a.workspace_identity.as_ref(), Some(&workspace.identity));
    /// assert!(a.applies_in(&workspace, "f1").is_ok());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn in_directory(self, workspace: &WorkspaceRecord, fingerprint: &str) -> Self {
        let mut allowance = self.in_workspace(&workspace.path, fingerprint);
        allowance.workspace_identity = Some(workspace.identity.clone());
        allowance
    }

    /// The id a workspace allowance has: `ws_` and 16 hex digits of the SHA-256 of its
    /// workspace, config fingerprint, mode, tool and pattern.
    pub fn workspace_id(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        let workspace = self
            .workspace
            .as_deref()
            .map(|w| w.to_string_lossy().into_owned())
            .unwrap_or_default();
        let pattern = self
            .pattern
            .as_ref()
            .map(|p| serde_json::to_string(p).unwrap_or_default())
            .unwrap_or_default();
        for part in [
            workspace.as_str(),
            self.config_fingerprint.as_deref().unwrap_or_default(),
            &self.mode_id,
            &self.tool_name,
            &pattern,
        ] {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part.as_bytes());
        }
        let digest = hash.finalize();
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("ws_{hex}")
    }

    /// Whether this workspace allowance is for the workspace at `workspace` under the config
    /// with `fingerprint`: both must be equal, so it never applies to another workspace or
    /// another config.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::{Allowance, AllowanceScope};
    /// let a = Allowance::new(AllowanceScope::Workspace, "", "build", "write_file").in_workspace("/w/a", "f1");
    /// assert!(a.is_for(std::path::Path::new("/w/a"), "f1"));
    /// assert!(!a.is_for(std::path::Path::new("/w/b"), "f1"));
    /// assert!(!a.is_for(std::path::Path::new("/w/a"), "f2"));
    /// ```
    pub fn is_for(&self, workspace: &std::path::Path, fingerprint: &str) -> bool {
        self.scope == AllowanceScope::Workspace
            && self.workspace.as_deref() == Some(workspace)
            && self.config_fingerprint.as_deref() == Some(fingerprint)
    }

    /// Whether this workspace allowance is in force in the workspace `workspace` (a session's:
    /// its canonical path and directory identity) under the config with `fingerprint`: keyed by
    /// both ([`Allowance::is_for`]), and given in that same directory (its
    /// [`Allowance::workspace_identity`] is the workspace's).
    ///
    /// # Errors
    /// Why not ([`NotInForce`]): another workspace or config, another directory at the same
    /// path (deleted and made again, or replaced), or no directory identity recorded.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::{Allowance, AllowanceScope, NotInForce};
    /// use agent_controller::workspace::WorkspaceRecord;
    /// let dir = tempfile::tempdir()?;
    /// let here = WorkspaceRecord::of(dir.path())?;
    /// let given = Allowance::new(AllowanceScope::Workspace, "", "build", "write_file")
    ///     .in_directory(&here, "f1");
    /// assert_eq!(given.applies_in(&here, "f1"), Ok(()));
    /// assert_eq!(given.applies_in(&here, "f2"), Err(NotInForce::OtherWorkspaceOrConfig));
    /// let mut elsewhere = here.clone();
    /// elsewhere.identity.inode = elsewhere.identity.inode.map(|i| i + 1);
    /// assert_eq!(given.applies_in(&elsewhere, "f1"), Err(NotInForce::OtherDirectory));
    /// let old = Allowance::new(AllowanceScope::Workspace, "", "build", "write_file")
    ///     .in_workspace(&here.path, "f1");
    /// assert_eq!(old.applies_in(&here, "f1"), Err(NotInForce::NoDirectory));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn applies_in(
        &self,
        workspace: &WorkspaceRecord,
        fingerprint: &str,
    ) -> Result<(), NotInForce> {
        if !self.is_for(&workspace.path, fingerprint) {
            return Err(NotInForce::OtherWorkspaceOrConfig);
        }
        match &self.workspace_identity {
            None => Err(NotInForce::NoDirectory),
            Some(identity) if *identity != workspace.identity => Err(NotInForce::OtherDirectory),
            Some(_) => Ok(()),
        }
    }

    /// Whether this allowance covers the calls of a tool whose origin is `origin`
    /// ([`crate::tool::Tool::origin`]): the one it was given for. An allowance given for a tool
    /// of the process itself (no origin) covers no tool that runs elsewhere, and one given
    /// for a server covers no other server (nor the process's own tool) under the same name.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::{Allowance, AllowanceScope};
    /// let mut given = Allowance::new(AllowanceScope::Workspace, "", "build", "fs__write_file");
    /// given.origin = Some("mcp stdio node [\"server.js\"]".into());
    /// assert!(given.covers_origin(Some("mcp stdio node [\"server.js\"]")));
    /// assert!(!given.covers_origin(Some("mcp stdio node [\"evil.js\"]")));
    /// assert!(!given.covers_origin(None));
    /// ```
    pub fn covers_origin(&self, origin: Option<&str>) -> bool {
        self.origin.as_deref() == origin
    }

    /// Whether `other` allows what this one does: the same scope, mode, tool and pattern (so
    /// a session keeps it once).
    pub(crate) fn allows_as(&self, other: &Allowance) -> bool {
        self.scope == other.scope
            && self.mode_id == other.mode_id
            && self.tool_name == other.tool_name
            && self.pattern == other.pattern
    }

    /// Whether the allowance covers `call` (whose path arguments lie at `paths`) in mode
    /// `mode_id`: its mode, its tool, and its pattern if it has one (a pattern that does not
    /// compile covers nothing).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::allowance::{Allowance, AllowancePattern, AllowanceScope};
    /// use agent_controller::{ToolCall, rules::ResolvedPaths};
    /// let allowance = Allowance::new(AllowanceScope::Mode, "decision_1", "build", "write_file")
    ///     .narrowed(AllowancePattern::path("src/**"));
    /// let call = ToolCall::new("c1", "write_file", serde_json::json!({"path": "src/a.rs"}));
    /// assert!(allowance.covers("build", &call, &ResolvedPaths::new().with("path", "src/a.rs")));
    /// assert!(!allowance.covers("build", &call, &ResolvedPaths::new().with("path", ".env")));
    /// assert!(!allowance.covers("plan", &call, &ResolvedPaths::new().with("path", "src/a.rs")));
    /// ```
    pub fn covers(&self, mode_id: &str, call: &ToolCall, paths: &ResolvedPaths) -> bool {
        // A plan's allowance covers writes to its files, by where they lead
        // (`crate::machine::scope`), not a tool's calls.
        if self.plan.is_some() || self.mode_id != mode_id || self.tool_name != call.name {
            return false;
        }
        match self.rule() {
            Some(Ok(rule)) => Rules::new(vec![rule]).deciding(call, paths).is_some(),
            Some(Err(_)) => false,
            None => true,
        }
    }

    /// The pattern as an `allow` rule on the tool; `None` without a pattern.
    pub(crate) fn rule(&self) -> Option<Result<Rule, PatternError>> {
        let pattern = self.pattern.as_ref()?;
        Some(
            pattern
                .matcher()
                .map(|m| Rule::new(self.tool_name.as_str(), m, RuleAction::Allow)),
        )
    }

    /// What the audit record of a call it ran says decided it: `allowance ID (SCOPE)`.
    pub fn decider(&self) -> String {
        format!("allowance {} ({})", self.id, self.scope)
    }
}

/// Why a workspace allowance is not in force in a workspace ([`Allowance::applies_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotInForce {
    /// It is kept for another workspace path, or under another config (or is no workspace
    /// allowance).
    #[error("it is for another workspace or another config")]
    OtherWorkspaceOrConfig,
    /// It was given in another directory at the same path: the workspace was deleted and made
    /// again, or replaced (another clone, another project).
    #[error(
        "it was given in another directory at this path (deleted and made again, or replaced): revoke it, or give it again here"
    )]
    OtherDirectory,
    /// It records no directory identity (kept before identities were recorded), so the
    /// directory it was given in cannot be told from another at the same path.
    #[error(
        "it records no directory identity (kept by an older version), so the directory it was given in is in doubt: give it again"
    )]
    NoDirectory,
}

/// What an approval with "always allow" gave, as its audit record keeps it
/// ([`crate::event::DecidedRecord::allowance`]): the allowance's id (what the records of the
/// calls it runs name in `allowedBy`), its scope and its pattern.
///
/// # Examples
/// ```
/// use agent_controller::allowance::{Allowance, AllowancePattern, AllowanceScope, GivenAllowance};
/// let allowance = Allowance::new(AllowanceScope::Session, "decision_3", "build", "write_file")
///     .narrowed(AllowancePattern::path("src/**"));
/// let given = GivenAllowance::of(&allowance);
/// assert_eq!(
///     serde_json::to_value(&given)?,
///     serde_json::json!({ "id": "decision_3", "scope": "session", "allow": { "path": "src/**" } })
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GivenAllowance {
    /// The allowance's id ([`Allowance::id`]): the decision's for scopes `mode` and `session`,
    /// `ws_…` for `workspace`.
    pub id: String,
    /// Its scope (the decision's `scope`).
    pub scope: AllowanceScope,
    /// The pattern that narrows it (the decision's `allow`); `None`: every call of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<AllowancePattern>,
}

impl GivenAllowance {
    /// What the audit record keeps of `allowance`.
    pub fn of(allowance: &Allowance) -> Self {
        Self {
            id: allowance.id.clone(),
            scope: allowance.scope,
            allow: allowance.pattern.clone(),
        }
    }
}

impl std::fmt::Display for Allowance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(grant) = &self.plan {
            return write!(
                f,
                "{} ({}): writes to {} in mode `{}` (the approved plan's files, planScope `{}`)",
                self.id,
                self.scope,
                grant.files.entries().join(", "),
                self.mode_id,
                grant.plan_scope
            );
        }
        write!(f, "{} ({}): {}", self.id, self.scope, self.tool_name)?;
        if let Some(pattern) = &self.pattern {
            write!(f, " {pattern}")?;
        }
        write!(f, " in mode `{}`", self.mode_id)
    }
}

/// The rules an allowance's pattern reads paths for, beside a mode's: the path arguments of
/// `allowances`' patterns, as `allow` rules.
pub(crate) fn pattern_rules<'a>(allowances: impl Iterator<Item = &'a Allowance>) -> Vec<Rule> {
    allowances
        .filter_map(Allowance::rule)
        .filter_map(Result::ok)
        .collect()
}

/// The session's workspace as the rules (`src/machine/`) see it: where the workspace allowances
/// the session gives apply, its directory (path and identity) under the config with
/// `fingerprint`, the pair [`Allowance::applies_in`] checks. The rules stamp a new workspace
/// allowance with it ([`WorkspaceScope::stamp`]) and name its path in a wait's terms, so they
/// import no workspace module.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkspaceScope<'a> {
    /// The session's workspace.
    pub(crate) workspace: &'a WorkspaceRecord,
    /// The config's fingerprint ([`crate::ModeGraph::fingerprint`]).
    pub(crate) fingerprint: &'a str,
}

impl WorkspaceScope<'_> {
    /// `allowance`, kept for this workspace and config ([`Allowance::in_directory`]).
    pub(crate) fn stamp(&self, allowance: Allowance) -> Allowance {
        allowance.in_directory(self.workspace, self.fingerprint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_has_exactly_one_kind() {
        let bad = [
            AllowancePattern::default(),
            AllowancePattern {
                path: Some("a".into()),
                glob: Some("b".into()),
                arg: Some("x".into()),
                regex: None,
            },
            AllowancePattern {
                glob: Some("git *".into()),
                ..AllowancePattern::default()
            },
            AllowancePattern {
                arg: Some(String::new()),
                path: Some("a".into()),
                ..AllowancePattern::default()
            },
        ];
        for pattern in bad {
            assert!(pattern.matcher().is_err(), "{pattern:?}");
        }
        assert!(AllowancePattern::glob("command", "git *").matcher().is_ok());
    }

    #[test]
    fn a_workspace_id_depends_on_every_key() {
        let base = Allowance::new(AllowanceScope::Workspace, "", "build", "write_file");
        let id = base.clone().in_workspace("/a", "f").id;
        assert_eq!(id, base.clone().in_workspace("/a", "f").id);
        assert_ne!(id, base.clone().in_workspace("/b", "f").id);
        assert_ne!(id, base.clone().in_workspace("/a", "g").id);
        let narrowed = base.narrowed(AllowancePattern::path("src/**"));
        assert_ne!(id, narrowed.in_workspace("/a", "f").id);
    }

    /// Review finding 4: a workspace allowance applies in the directory it was given in only,
    /// not in another one at the same path, and not where it records no directory.
    #[test]
    fn a_workspace_allowance_applies_in_its_own_directory_only() {
        let identity = |inode| DirectoryIdentity {
            device: Some(1),
            inode: Some(inode),
            created_ns: Some(5),
        };
        let here = WorkspaceRecord {
            path: "/w/a".into(),
            identity: identity(7),
        };
        let base = Allowance::new(AllowanceScope::Workspace, "", "build", "write_file");
        let given = base.clone().in_directory(&here, "f");
        assert_eq!(
            given.id,
            base.clone().in_workspace("/w/a", "f").id,
            "the id as before"
        );
        assert_eq!(given.applies_in(&here, "f"), Ok(()));
        let replaced = WorkspaceRecord {
            identity: identity(8),
            ..here.clone()
        };
        assert_eq!(
            given.applies_in(&replaced, "f"),
            Err(NotInForce::OtherDirectory)
        );
        let reborn = WorkspaceRecord {
            identity: DirectoryIdentity {
                created_ns: Some(6),
                ..identity(7)
            },
            ..here.clone()
        };
        assert_eq!(
            given.applies_in(&reborn, "f"),
            Err(NotInForce::OtherDirectory)
        );
        assert_eq!(
            given.applies_in(&here, "g"),
            Err(NotInForce::OtherWorkspaceOrConfig)
        );
        let elsewhere = WorkspaceRecord {
            path: "/w/b".into(),
            ..here.clone()
        };
        assert_eq!(
            given.applies_in(&elsewhere, "f"),
            Err(NotInForce::OtherWorkspaceOrConfig)
        );
        let old = base.in_workspace("/w/a", "f");
        assert_eq!(old.applies_in(&here, "f"), Err(NotInForce::NoDirectory));
    }

    #[test]
    fn a_string_pattern_never_covers_several_lines() {
        let allowance = Allowance::new(AllowanceScope::Mode, "d", "build", "run_command")
            .narrowed(AllowancePattern::glob("command", "git *"));
        let call = |c: &str| ToolCall::new("c", "run_command", serde_json::json!({ "command": c }));
        let none = ResolvedPaths::new();
        assert!(allowance.covers("build", &call("git status"), &none));
        assert!(!allowance.covers("build", &call("git status\nrm -rf ~"), &none));
        assert!(!allowance.covers("build", &call("rm -rf ~"), &none));
    }
}
