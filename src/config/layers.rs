//! Layered config: the user's file, the project's, the project's local file and a managed file,
//! merged into one config text ([`ConfigSources`], [`Layers`]).
//!
//! Lowest first: the user's file (`$XDG_CONFIG_HOME/agent-controller/modes.toml`, else
//! `~/.config/agent-controller/modes.toml`), the project's (`config/modes.toml` or the file
//! named), the local file beside it (`modes.local.toml`) and a managed file
//! ([`MANAGED_CONFIG_ENV`], else [`DEFAULT_MANAGED_CONFIG`]), which wins.
//!
//! - `[[modes]]`, `[[subagents]]`, `[[mcpServers]]` and `[[reviewers]]` merge by `id`, key by
//!   key: a key a higher layer sets replaces the lower one's whole value (a list replaces the
//!   list, a table the table); a key only a lower layer sets stays.
//! - `[[hooks]]` and `[[tests]]` add up: every layer's run.
//! - A default set in a higher layer (`default = true` on a mode, or `defaultModeId`) wins: the
//!   lower layers' defaults are dropped.
//! - The managed file's `rules` and `requireApproval` of a mode cannot be undone below it: a
//!   lower layer's value is replaced (with a warning naming both places), and neither an
//!   allowance, a plan's scope nor a hook's `allow` lets a call through that they hold
//!   ([`crate::mode::Mode::managed_approval`]).
//!
//! The merged text keeps each value's text, at its column; errors in it are placed back at the
//! file, line and column of the layer that wrote the value ([`Layers::remap`]). One file alone
//! is read as it is.

use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::{ConfigError, ConfigErrorKind, Location, Source};
use crate::mode::ModeGraph;

/// The environment variable naming the managed config file (an administrator's policy, which
/// wins over every other layer). Set but unreadable or invalid: nothing starts.
pub const MANAGED_CONFIG_ENV: &str = "AGENT_CONTROLLER_MANAGED_CONFIG";

/// The managed config file read when [`MANAGED_CONFIG_ENV`] is not set (and only if it exists).
pub const DEFAULT_MANAGED_CONFIG: &str = "/etc/agent-controller/managed.toml";

/// The project's local file, beside the project's config, meant to stay out of version control.
pub const LOCAL_CONFIG_NAME: &str = "modes.local.toml";

/// Which layer a config file is, lowest first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, strum::Display,
)]
#[serde(rename_all = "camelCase")]
#[strum(serialize_all = "camelCase")]
#[non_exhaustive]
pub enum LayerKind {
    /// The user's own file (`$XDG_CONFIG_HOME/agent-controller/modes.toml`).
    User,
    /// The project's file (`--config`, default `config/modes.toml`).
    Project,
    /// The project's local file beside it (`modes.local.toml`).
    Local,
    /// The managed file ([`MANAGED_CONFIG_ENV`] or [`DEFAULT_MANAGED_CONFIG`]), which wins.
    Managed,
}

/// One config file read: which layer, its name in messages, its text.
#[derive(Debug, Clone)]
pub struct Layer {
    kind: LayerKind,
    origin: String,
    text: String,
}

impl Layer {
    /// Which layer this file is.
    pub fn kind(&self) -> LayerKind {
        self.kind
    }

    /// The file's name in messages (its path as given).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The file's text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Where the managed file comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ManagedSource {
    /// Named by the environment or the caller: it must be readable and valid.
    Required(PathBuf),
    /// The default path: read when it exists, then it must be readable and valid.
    IfPresent(PathBuf),
    /// No managed file.
    Off,
}

/// Which config files make up the config, and how to read them: a builder of [`Layers`].
///
/// # Examples
/// ```
/// use agent_controller::config::ConfigSources;
/// let dir = tempfile::tempdir()?;
/// let project = dir.path().join("modes.toml");
/// std::fs::write(&project, "[[modes]]\nid = \"build\"\nrequireApproval = [\"run_command\"]\n")?;
/// std::fs::write(dir.path().join("modes.local.toml"), "[[modes]]\nid = \"build\"\nname = \"Mine\"\n")?;
/// let layers = ConfigSources::new(&project).no_user_config().managed_file(None).load()?;
/// let graph = layers.graph()?;
/// let build = graph.mode(graph.get("build").unwrap());
/// assert_eq!(build.name(), "Mine", "the local file's name");
/// assert!(build.require_approval().covers("run_command"), "the project's list stays");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ConfigSources {
    project: PathBuf,
    inside: Option<PathBuf>,
    user: Option<PathBuf>,
    local: bool,
    managed: ManagedSource,
}

impl ConfigSources {
    /// The layers of the project config at `project`, as the environment names the others: the
    /// user's file under `$XDG_CONFIG_HOME` (else `$HOME/.config`), the local file beside
    /// `project`, and the managed file [`MANAGED_CONFIG_ENV`] names (else
    /// [`DEFAULT_MANAGED_CONFIG`] where it exists).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// let sources = ConfigSources::new("config/modes.toml");
    /// assert_eq!(sources.project(), std::path::Path::new("config/modes.toml"));
    /// ```
    pub fn new(project: impl Into<PathBuf>) -> Self {
        Self {
            project: project.into(),
            inside: None,
            user: user_config_path(),
            local: true,
            managed: managed_from_env(),
        }
    }

    /// Reads the project's file (and its local file) only where they lie inside `dir`, the
    /// project path then being relative to it ([`super::read_in`]): for a workspace's own
    /// config, which a model or a cloned repository can shape.
    pub fn inside(mut self, dir: impl Into<PathBuf>) -> Self {
        self.inside = Some(dir.into());
        self
    }

    /// Skips the user's file (`--no-user-config`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// let sources = ConfigSources::new("config/modes.toml").no_user_config().managed_file(None);
    /// let layers = sources.load()?;
    /// assert!(layers.graph()?.get("plan").is_some());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn no_user_config(mut self) -> Self {
        self.user = None;
        self
    }

    /// Reads the user's layer from `path` instead (`None`: no user layer).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// let layers = ConfigSources::new("config/modes.toml").user_file(None).managed_file(None).load()?;
    /// assert!(!layers.layers().is_empty());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn user_file(mut self, path: Option<PathBuf>) -> Self {
        self.user = path;
        self
    }

    /// Reads the managed file at `path`, which must then be readable and valid (`None`: no
    /// managed layer, for a library user whose host has no policy).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// let sources = ConfigSources::new("config/modes.toml").managed_file(None);
    /// assert_eq!(sources.managed_path(), None);
    /// ```
    pub fn managed_file(mut self, path: Option<PathBuf>) -> Self {
        self.managed = path.map_or(ManagedSource::Off, ManagedSource::Required);
        self
    }

    /// Reads the project file alone, without the user's or the local file (`--only FILE`);
    /// the managed file is still read: a managed policy never vanishes.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// let layers = ConfigSources::new("config/modes.toml").only().managed_file(None).load()?;
    /// assert_eq!(layers.layers().len(), 1, "the project file alone");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn only(mut self) -> Self {
        self.user = None;
        self.local = false;
        self
    }

    /// The project's file, as given.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// let sources = ConfigSources::new("config/modes.toml").only();
    /// assert!(sources.project().ends_with("modes.toml"));
    /// ```
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// The managed file these sources read, if any (named, or the default where it exists).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// let sources = ConfigSources::new("config/modes.toml").managed_file(Some("/etc/policy.toml".into()));
    /// assert_eq!(sources.managed_path(), Some(std::path::Path::new("/etc/policy.toml")));
    /// ```
    pub fn managed_path(&self) -> Option<&Path> {
        match &self.managed {
            ManagedSource::Required(path) => Some(path),
            ManagedSource::IfPresent(path) if path.symlink_metadata().is_ok() => Some(path),
            _ => None,
        }
    }

    /// Every file these sources would read, present or not, in layer order: the user's file,
    /// the project's, the local layer beside it (`modes.local.toml`), the managed file. A host
    /// protects them all from the tools ([`crate::controller::AgentControllerBuilder::protected_path`]):
    /// a build step that wrote any of them could widen what the next run allows.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// use std::path::PathBuf;
    /// let sources = ConfigSources::new("config/modes.toml").no_user_config().managed_file(None);
    /// assert_eq!(
    ///     sources.files(),
    ///     [PathBuf::from("config/modes.toml"), PathBuf::from("config/modes.local.toml")]
    /// );
    /// let inside = ConfigSources::new("config/modes.toml").inside("/w").only().managed_file(None);
    /// assert_eq!(inside.files(), [PathBuf::from("/w/config/modes.toml")]);
    /// ```
    pub fn files(&self) -> Vec<PathBuf> {
        let at = |path: &Path| match &self.inside {
            Some(dir) => dir.join(path),
            None => path.to_owned(),
        };
        let mut files: Vec<PathBuf> = self.user.iter().cloned().collect();
        files.push(at(&self.project));
        if self.local {
            let parent = self.project.parent().unwrap_or(Path::new(""));
            files.push(at(&parent.join(LOCAL_CONFIG_NAME)));
        }
        if let ManagedSource::Required(path) | ManagedSource::IfPresent(path) = &self.managed {
            files.push(path.clone());
        }
        files
    }

    /// Reads every layer and merges them.
    ///
    /// # Errors
    /// The project's file cannot be read; the user's or local file exists but cannot be read;
    /// the managed file is named (or exists) but cannot be read or is invalid (nothing may start
    /// without it); a layer is not valid TOML; two layers give one key values of different types
    /// ([`ConfigErrorKind::LayerConflict`], at the higher layer's file:line:col).
    pub fn load(&self) -> Result<Layers, ConfigError> {
        let mut layers = Vec::new();
        if let Some(user) = &self.user
            && user.symlink_metadata().is_ok()
        {
            layers.push(Layer {
                kind: LayerKind::User,
                origin: user.display().to_string(),
                text: super::read(user)?,
            });
        }
        let (project_origin, project_text) = match &self.inside {
            Some(dir) => (
                super::origin_in(dir, &self.project),
                super::read_in(dir, &self.project)?,
            ),
            None => (
                self.project.display().to_string(),
                super::read(&self.project)?,
            ),
        };
        layers.push(Layer {
            kind: LayerKind::Project,
            origin: project_origin.clone(),
            text: project_text,
        });
        if self.local {
            let local = self
                .project
                .parent()
                .unwrap_or(Path::new(""))
                .join(LOCAL_CONFIG_NAME);
            let read = match &self.inside {
                Some(dir) if dir.join(&local).symlink_metadata().is_ok() => {
                    Some((super::origin_in(dir, &local), super::read_in(dir, &local)?))
                }
                None if local.symlink_metadata().is_ok() => {
                    Some((local.display().to_string(), super::read(&local)?))
                }
                _ => None,
            };
            if let Some((origin, text)) = read {
                layers.push(Layer {
                    kind: LayerKind::Local,
                    origin,
                    text,
                });
            }
        }
        if let Some(path) = self.managed_path() {
            let path = path.to_owned();
            let text = super::read(&path).map_err(|e| managed_unusable(&path, e))?;
            // The managed file alone must be a valid TOML document.
            if let Err(e) = DeTable::parse(&text) {
                let origin = path.display().to_string();
                let e = super::syntax_error(&Source::new(&origin, &text), &e);
                return Err(managed_unusable(&path, e));
            }
            layers.push(Layer {
                kind: LayerKind::Managed,
                origin: path.display().to_string(),
                text,
            });
        }
        Layers::merge(layers, project_origin)
    }
}

/// A managed file that cannot be used: nothing starts without it.
fn managed_unusable(path: &Path, e: ConfigError) -> ConfigError {
    ConfigError {
        message: format!(
            "the managed config {} cannot be used, so nothing starts (a managed policy must not silently vanish): {}",
            path.display(),
            e.message
        ),
        ..e
    }
}

/// `$XDG_CONFIG_HOME/agent-controller/modes.toml`, else `$HOME/.config/agent-controller/modes.toml`.
fn user_config_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".config"))
        })?;
    Some(base.join("agent-controller").join("modes.toml"))
}

/// The managed file the environment names, else the default path where it exists.
fn managed_from_env() -> ManagedSource {
    match std::env::var_os(MANAGED_CONFIG_ENV).filter(|v| !v.is_empty()) {
        Some(path) => ManagedSource::Required(PathBuf::from(path)),
        None => ManagedSource::IfPresent(PathBuf::from(DEFAULT_MANAGED_CONFIG)),
    }
}

/// Where one line of the merged text came from: a layer (its index) and a 1-based line there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LineOrigin {
    layer: usize,
    line: usize,
}

/// The config files read and merged into one config text, with where each line came from.
#[derive(Debug, Clone)]
pub struct Layers {
    layers: Vec<Layer>,
    origin: String,
    text: String,
    /// One per line of `text` (empty when one file is read as it is).
    lines: Vec<LineOrigin>,
    warnings: Vec<ConfigError>,
    /// Modes whose `rules` / `requireApproval` the managed file sets.
    managed: Vec<(String, bool, bool)>,
}

/// A value of one layer in the merge.
#[derive(Clone, Copy)]
struct Entry<'t, 'a> {
    layer: usize,
    key: &'t Spanned<Cow<'a, str>>,
    value: &'t Spanned<DeValue<'a>>,
}

/// A table of the merged document: keys in first-seen order, each with the value that wins.
#[derive(Default)]
struct Merged<'t, 'a> {
    entries: Vec<(String, Entry<'t, 'a>)>,
}

/// One element of a merged array of tables (`[[modes]]`): where it starts, its keys.
struct Item<'t, 'a> {
    id: Option<String>,
    /// The layers that gave it keys (an id twice in one layer stays two items).
    seen: Vec<usize>,
    /// Its place among the project's elements, when the project's file has it.
    project_position: Option<usize>,
    start: (usize, usize),
    table: Merged<'t, 'a>,
}

/// The top-level arrays of tables merged by `id`.
const BY_ID: &[&str] = &["modes", "subagents", "mcpServers", "reviewers"];

/// The keys of a mode the managed file cannot have undone below it.
const PROTECTED: &[&str] = &["rules", "requireApproval"];

impl Layers {
    /// Merges `layers` (lowest first) into one text labelled `origin` (the project's file).
    fn merge(layers: Vec<Layer>, origin: String) -> Result<Self, ConfigError> {
        // A file with nothing in it (only comments) adds nothing: one file with content alone
        // is read as it is.
        let full: Vec<usize> = (0..layers.len())
            .filter(|&i| DeTable::parse(&layers[i].text).map_or(true, |t| !t.get_ref().is_empty()))
            .collect();
        let single = match full[..] {
            // The managed file's marks come out of a merge.
            [only] if layers[only].kind != LayerKind::Managed => Some(only),
            [] => layers.iter().position(|l| l.kind == LayerKind::Project),
            _ => None,
        };
        if let Some(only) = single {
            return Ok(Self {
                text: layers[only].text.clone(),
                origin: layers[only].origin.clone(),
                layers,
                lines: Vec::new(),
                warnings: Vec::new(),
                managed: Vec::new(),
            });
        }
        let (text, lines, warnings, managed) = merge_texts(&layers)?;
        Ok(Self {
            text,
            lines,
            layers,
            origin,
            warnings,
            managed,
        })
    }

    /// The files read, lowest first.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// The merged config text (one file read as it is: its text).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The name the merged text goes by in messages: the project's file.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The managed file's layer, if one was read.
    pub fn managed(&self) -> Option<&Layer> {
        self.layers.iter().find(|l| l.kind == LayerKind::Managed)
    }

    /// What the merge warns about: a lower layer's `rules` or `requireApproval` the managed
    /// file replaced ([`ConfigErrorKind::ManagedOverride`]), naming both places.
    pub fn warnings(&self) -> &[ConfigError] {
        &self.warnings
    }

    /// The validated graph of the merged config, the managed file's `rules` and
    /// `requireApproval` marked as such ([`crate::mode::Mode::managed_approval`]).
    ///
    /// # Errors
    /// The first problem of the merged config, at the file, line and column of the layer that
    /// wrote it ([`Self::remap`]).
    pub fn graph(&self) -> Result<ModeGraph, ConfigError> {
        let mut graph = super::parse(&self.text, &self.origin).map_err(|e| self.remap(e))?;
        for (id, rules, approval) in &self.managed {
            graph.mark_managed(id, *rules, *approval);
        }
        Ok(graph)
    }

    /// `error` (about the merged text) placed at the file, line and column of the layer that
    /// wrote the text it is about; any other error as it is.
    pub fn remap(&self, error: ConfigError) -> ConfigError {
        let Some(location) = error.location else {
            return error;
        };
        if self.lines.is_empty() || error.origin != self.origin {
            return error;
        }
        let Some(from) = self.lines.get(location.line.saturating_sub(1)) else {
            return error;
        };
        let layer = &self.layers[from.layer];
        let source = Source::new(&layer.origin, &layer.text);
        let at = offset_of(&layer.text, from.line, location.column);
        let (location, snippet) = source.locate(at..at + 1);
        ConfigError {
            origin: layer.origin.clone(),
            location: Some(location),
            snippet,
            ..error
        }
    }

    /// Every error of `errors` placed back ([`Self::remap`]).
    pub fn remap_all(&self, errors: Vec<ConfigError>) -> Vec<ConfigError> {
        errors.into_iter().map(|e| self.remap(e)).collect()
    }

    /// The merged text, each line after the `file:line` it came from (`check --origin`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::ConfigSources;
    /// let dir = tempfile::tempdir()?;
    /// let project = dir.path().join("modes.toml");
    /// std::fs::write(&project, "[[modes]]\nid = \"build\"\n")?;
    /// let layers = ConfigSources::new(&project).no_user_config().managed_file(None).load()?;
    /// assert!(layers.with_origins().contains("modes.toml:2"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_origins(&self) -> String {
        let places: Vec<String> = self
            .text
            .lines()
            .enumerate()
            .map(|(i, _)| match self.lines.get(i) {
                Some(from) => format!("{}:{}", self.layers[from.layer].origin, from.line),
                None if self.lines.is_empty() => format!("{}:{}", self.origin, i + 1),
                None => String::new(),
            })
            .collect();
        let width = places.iter().map(|p| p.chars().count()).max().unwrap_or(0);
        let mut out = String::new();
        for (line, place) in self.text.lines().zip(&places) {
            if line.trim().is_empty() {
                out.push('\n');
                continue;
            }
            out.push_str(&format!("{place:<width$}  | {line}\n"));
        }
        out
    }
}

/// The merged text of `layers` (lowest first), where each of its lines came from, the merge's
/// warnings and the modes whose `rules` / `requireApproval` the managed file sets.
type MergedText = (
    String,
    Vec<LineOrigin>,
    Vec<ConfigError>,
    Vec<(String, bool, bool)>,
);

/// Merges `layers` ([`Layers`]).
fn merge_texts(layers: &[Layer]) -> Result<MergedText, ConfigError> {
    let mut roots = Vec::new();
    for layer in layers {
        let source = Source::new(&layer.origin, &layer.text);
        let root = DeTable::parse(&layer.text).map_err(|e| super::syntax_error(&source, &e))?;
        roots.push(root);
    }
    let mut merger = Merger {
        layers,
        warnings: Vec::new(),
    };
    // The highest layer that sets a default: the lower layers' defaults are dropped.
    let default_layer = roots
        .iter()
        .enumerate()
        .filter(|(_, root)| sets_default(root.get_ref()))
        .map(|(i, _)| i)
        .next_back()
        .unwrap_or(0);
    let mut top = Merged::default();
    let mut arrays: Vec<(String, Vec<Item<'_, '_>>)> = Vec::new();
    for (layer, root) in roots.iter().enumerate() {
        for (key, value) in in_text_order(root.get_ref()) {
            let name = key.get_ref().to_string();
            if name == "defaultModeId" && layer < default_layer {
                continue;
            }
            let entry = Entry { layer, key, value };
            let items = match value.get_ref() {
                DeValue::Array(array) if is_tables(array) => array,
                _ => {
                    merger.set(&mut top, &name, entry, None)?;
                    continue;
                }
            };
            let at = match arrays.iter().position(|(n, _)| *n == name) {
                Some(at) => at,
                None => {
                    arrays.push((name.clone(), Vec::new()));
                    arrays.len() - 1
                }
            };
            for (position, element) in items.iter().enumerate() {
                let DeValue::Table(table) = element.get_ref() else {
                    continue;
                };
                let id = table
                    .get("id")
                    .and_then(|v| v.get_ref().as_str())
                    .map(str::to_owned);
                let merged_into = match (&id, BY_ID.contains(&name.as_str())) {
                    (Some(id), true) => arrays[at].1.iter().position(|item| {
                        item.id.as_deref() == Some(id) && !item.seen.contains(&layer)
                    }),
                    _ => None,
                };
                let item = match merged_into {
                    Some(i) => &mut arrays[at].1[i],
                    None => {
                        arrays[at].1.push(Item {
                            id: id.clone(),
                            seen: Vec::new(),
                            project_position: None,
                            start: (layer, element.span().start),
                            table: Merged::default(),
                        });
                        arrays[at].1.last_mut().expect("pushed")
                    }
                };
                item.seen.push(layer);
                if layers[layer].kind == LayerKind::Project {
                    item.project_position = Some(position);
                }
                for (k, v) in in_text_order(table) {
                    let key_name = k.get_ref().to_string();
                    if key_name == "default" && name == "modes" && layer < default_layer {
                        continue;
                    }
                    if key_name == "id" && item.table.entries.iter().any(|(k, _)| k == "id") {
                        // The same id: the first layer's place stays.
                        continue;
                    }
                    let entry = Entry {
                        layer,
                        key: k,
                        value: v,
                    };
                    let protect = (name == "modes" && PROTECTED.contains(&key_name.as_str()))
                        .then(|| id.clone().unwrap_or_default());
                    merger.set(&mut item.table, &key_name, entry, protect.as_deref())?;
                }
            }
        }
    }
    // The project's elements first, in its order; then those only other layers have.
    for (_, items) in &mut arrays {
        items.sort_by_key(|item| (item.project_position.is_none(), item.project_position));
    }
    let managed_layer = layers.iter().position(|l| l.kind == LayerKind::Managed);
    let managed = arrays
        .iter()
        .filter(|(name, _)| name == "modes")
        .flat_map(|(_, items)| items)
        .filter_map(|item| {
            let by_managed = |key: &str| {
                item.table
                    .entries
                    .iter()
                    .any(|(k, e)| k == key && Some(e.layer) == managed_layer)
            };
            let (rules, approval) = (by_managed("rules"), by_managed("requireApproval"));
            (rules || approval).then(|| (item.id.clone().unwrap_or_default(), rules, approval))
        })
        .collect();
    let mut out = Out {
        layers,
        text: String::new(),
        lines: Vec::new(),
    };
    out.table("", &top);
    for (name, items) in &arrays {
        for item in items {
            out.header(&format!("[[{}]]", bare(name)), item.start);
            out.table(name, &item.table);
        }
    }
    Ok((out.text, out.lines, merger.warnings, managed))
}

/// Whether a layer sets a default: `defaultModeId`, or a mode marked `default = true`.
fn sets_default(root: &DeTable<'_>) -> bool {
    root.contains_key("defaultModeId")
        || root
            .get("modes")
            .and_then(|modes| modes.get_ref().as_array())
            .is_some_and(|modes| {
                modes.iter().any(|mode| {
                    mode.get_ref()
                        .as_table()
                        .and_then(|t| t.get("default"))
                        .and_then(|d| d.get_ref().as_bool())
                        == Some(true)
                })
            })
}

/// Whether an array holds tables only (and at least one).
fn is_tables(array: &[Spanned<DeValue<'_>>]) -> bool {
    !array.is_empty() && array.iter().all(|v| v.get_ref().is_table())
}

/// The byte offset of 1-based `line`, `column` (in characters) in `text`.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum::<usize>();
    text[start..]
        .char_indices()
        .take_while(|(_, c)| *c != '\n')
        .nth(column.saturating_sub(1))
        .map_or(start, |(i, _)| start + i)
}

/// A key as TOML writes it: bare when it can be, else quoted.
fn bare(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        key.to_owned()
    } else {
        let escaped: String = key
            .chars()
            .flat_map(|c| match c {
                '"' => vec!['\\', '"'],
                '\\' => vec!['\\', '\\'],
                c if c.is_control() => format!("\\u{:04X}", c as u32).chars().collect(),
                c => vec![c],
            })
            .collect();
        format!("\"{escaped}\"")
    }
}

/// Merges values into tables, checking types and collecting warnings.
struct Merger<'l> {
    layers: &'l [Layer],
    warnings: Vec<ConfigError>,
}

impl Merger<'_> {
    /// The place of `span` in layer `layer`.
    fn place(&self, layer: usize, span: Range<usize>) -> (Location, String) {
        let l = &self.layers[layer];
        Source::new(&l.origin, &l.text).locate(span)
    }

    /// Sets `name` to `entry` in `table`, replacing a lower layer's value of the same type.
    /// `protect`: the mode id when the key is one the managed file cannot have undone.
    fn set<'t, 'a>(
        &mut self,
        table: &mut Merged<'t, 'a>,
        name: &str,
        entry: Entry<'t, 'a>,
        protect: Option<&str>,
    ) -> Result<(), ConfigError> {
        let Some((_, old)) = table.entries.iter_mut().find(|(k, _)| k == name) else {
            table.entries.push((name.to_owned(), entry));
            return Ok(());
        };
        let (lower, higher) = (*old, entry);
        let (lower_at, _) = self.place(lower.layer, lower.value.span());
        let lower_origin = &self.layers[lower.layer].origin;
        if !lower.value.get_ref().same_type(higher.value.get_ref()) {
            let layer = &self.layers[higher.layer];
            let source = Source::new(&layer.origin, &layer.text);
            return Err(ConfigError::at(
                ConfigErrorKind::LayerConflict,
                &source,
                higher.value.span(),
                format!(
                    "`{name}` is {} here but {} in {lower_origin}:{}:{}, a lower layer: layers cannot be merged where one key has values of different types",
                    article(higher.value.get_ref().type_str()),
                    article(lower.value.get_ref().type_str()),
                    lower_at.line,
                    lower_at.column
                ),
            ));
        }
        let is_managed = self.layers[higher.layer].kind == LayerKind::Managed;
        if let Some(mode) = protect
            && is_managed
        {
            let text_of = |e: &Entry<'_, '_>| &self.layers[e.layer].text[e.value.span()];
            if text_of(&lower) != text_of(&higher) {
                let (higher_at, _) = self.place(higher.layer, higher.value.span());
                let layer = &self.layers[lower.layer];
                let source = Source::new(&layer.origin, &layer.text);
                self.warnings.push(ConfigError::at(
                    ConfigErrorKind::ManagedOverride,
                    &source,
                    lower.key.span(),
                    format!(
                        "mode `{mode}`'s `{name}` here is replaced by the managed file's at {}:{}:{}: a managed `{name}` cannot be undone below it",
                        self.layers[higher.layer].origin, higher_at.line, higher_at.column
                    ),
                ));
            }
        }
        *old = higher;
        Ok(())
    }
}

/// `a string`, `an array`.
fn article(kind: &str) -> String {
    let an = kind.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {kind}", if an { "an" } else { "a" })
}

/// The merged text being written, with where each line came from.
struct Out<'l> {
    layers: &'l [Layer],
    text: String,
    lines: Vec<LineOrigin>,
}

impl Out<'_> {
    /// The 1-based line of byte `at` in layer `layer`.
    fn line_of(&self, layer: usize, at: usize) -> usize {
        let text = &self.layers[layer].text;
        text[..at.min(text.len())].matches('\n').count() + 1
    }

    /// A header line (`[[modes]]`) from the place `start` (layer, byte).
    fn header(&mut self, header: &str, start: (usize, usize)) {
        if !self.text.is_empty() {
            self.text.push('\n');
            let last = self.lines.last().copied().unwrap_or(LineOrigin {
                layer: start.0,
                line: 1,
            });
            self.lines.push(last);
        }
        let line = self.line_of(start.0, start.1);
        self.text.push_str(header);
        self.text.push('\n');
        self.lines.push(LineOrigin {
            layer: start.0,
            line,
        });
    }

    /// The keys of `table` (at dotted `path`): plain values first, then sub-tables, then
    /// arrays of tables.
    fn table(&mut self, path: &str, table: &Merged<'_, '_>) {
        let mut tables = Vec::new();
        let mut arrays = Vec::new();
        for (name, entry) in &table.entries {
            let assigned = assigned(&self.layers[entry.layer].text, entry);
            match entry.value.get_ref() {
                DeValue::Table(_) if !assigned => tables.push((name, entry)),
                DeValue::Array(a) if !assigned && is_tables(a) => arrays.push((name, entry)),
                _ => self.value(entry),
            }
        }
        let join = |name: &str| {
            if path.is_empty() {
                bare(name)
            } else {
                format!("{path}.{}", bare(name))
            }
        };
        for (name, entry) in tables {
            let DeValue::Table(sub) = entry.value.get_ref() else {
                continue;
            };
            let sub_path = join(name);
            self.header(
                &format!("[{sub_path}]"),
                (entry.layer, entry.key.span().start),
            );
            self.table(&sub_path, &of_layer(entry.layer, sub));
        }
        for (name, entry) in arrays {
            let DeValue::Array(items) = entry.value.get_ref() else {
                continue;
            };
            let sub_path = join(name);
            for item in items.iter() {
                let DeValue::Table(sub) = item.get_ref() else {
                    continue;
                };
                self.header(&format!("[[{sub_path}]]"), (entry.layer, item.span().start));
                self.table(&sub_path, &of_layer(entry.layer, sub));
            }
        }
    }

    /// `key = value` as its layer wrote it, at the key's column; each line mapped.
    fn value(&mut self, entry: &Entry<'_, '_>) {
        let layer = &self.layers[entry.layer];
        let text = &layer.text;
        let (start, end) = (entry.key.span().start, entry.value.span().end);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let first = self.line_of(entry.layer, start);
        let copied: String = if assigned(text, entry) {
            let pad = " ".repeat(text[line_start..start].chars().count());
            format!("{pad}{}", &text[start..end])
        } else {
            // A dotted key's part: written out whole.
            format!(
                "{} = {}",
                bare(entry.key.get_ref()),
                &text[entry.value.span()]
            )
        };
        for (i, line) in copied.split('\n').enumerate() {
            self.text.push_str(line);
            self.text.push('\n');
            self.lines.push(LineOrigin {
                layer: entry.layer,
                line: first + i,
            });
        }
    }
}

/// The keys of `table` in the order its text has them.
fn in_text_order<'t, 'a>(
    table: &'t DeTable<'a>,
) -> Vec<(&'t Spanned<Cow<'a, str>>, &'t Spanned<DeValue<'a>>)> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    entries
}

/// The keys of a table of one layer, as a merged table.
fn of_layer<'t, 'a>(layer: usize, table: &'t DeTable<'a>) -> Merged<'t, 'a> {
    Merged {
        entries: in_text_order(table)
            .into_iter()
            .map(|(key, value)| (key.get_ref().to_string(), Entry { layer, key, value }))
            .collect(),
    }
}

/// Whether `entry` is written `key = value` (not a `[table]` header or a dotted key's part).
fn assigned(text: &str, entry: &Entry<'_, '_>) -> bool {
    text.get(entry.key.span().end..entry.value.span().start)
        .is_some_and(|between| between.trim() == "=")
}

/// The managed file's size and modification time, as last seen.
type Stamp = (u64, Option<std::time::SystemTime>);

/// Watches the managed config file of [`ConfigSources`] for a running session: before each
/// step the driver asks [`ManagedWatch::refresh`], which looks at the file's size and
/// modification time, and where they changed, at its SHA-256; a changed file merges the layers
/// again, and the session's calls are ruled by the new graph's rules from that step on.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::config::{ConfigSources, ManagedWatch};
/// let dir = tempfile::tempdir()?;
/// let project = dir.path().join("modes.toml");
/// std::fs::write(&project, "[[modes]]\nid = \"build\"\n")?;
/// let managed = dir.path().join("managed.toml");
/// std::fs::write(&managed, "")?;
/// let sources = ConfigSources::new(&project).user_file(None).managed_file(Some(managed.clone()));
/// let graph = sources.load()?.graph()?;
/// let watch = ManagedWatch::new(sources);
/// assert!(watch.refresh(&graph)?.is_none(), "unchanged");
/// std::fs::write(&managed, "[[modes]]\nid = \"build\"\nrequireApproval = [\"write_file\"]\n")?;
/// let now = watch.refresh(&graph)?.expect("changed");
/// assert!(now.get("build").is_some_and(|id| now.mode(id).managed_approval()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ManagedWatch {
    sources: ConfigSources,
    path: Option<PathBuf>,
    state: std::sync::Mutex<WatchState>,
}

/// What a [`ManagedWatch`] saw last.
#[derive(Debug, Default)]
struct WatchState {
    stamp: Option<Stamp>,
    digest: Option<Vec<u8>>,
    graph: Option<std::sync::Arc<ModeGraph>>,
}

impl ManagedWatch {
    /// Watches the managed file `sources` read (named, or the default path), as it is now.
    pub fn new(sources: ConfigSources) -> Self {
        let path = match &sources.managed {
            ManagedSource::Required(path) | ManagedSource::IfPresent(path) => Some(path.clone()),
            ManagedSource::Off => None,
        };
        let stamp = path.as_deref().and_then(stamp_of);
        let digest = path.as_deref().and_then(digest_of);
        Self {
            sources,
            path,
            state: std::sync::Mutex::new(WatchState {
                stamp,
                digest,
                graph: None,
            }),
        }
    }

    /// The graph to rule by now: `None` while the managed file is as it was when the watch
    /// began; else `base`'s layers merged again with the file as it is now.
    ///
    /// # Errors
    /// The managed file changed and now cannot be read, merged or validated, or the merged
    /// config no longer has `base`'s modes in `base`'s order (a session cannot carry on then).
    pub fn refresh(
        &self,
        base: &ModeGraph,
    ) -> Result<Option<std::sync::Arc<ModeGraph>>, ConfigError> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let stamp = stamp_of(path);
        if stamp == state.stamp {
            return Ok(state.graph.clone());
        }
        let digest = digest_of(path);
        state.stamp = stamp;
        if digest == state.digest {
            return Ok(state.graph.clone());
        }
        let graph = self.sources.load()?.graph()?;
        let was: Vec<&str> = base.ids().map(|id| base.mode(id).id()).collect();
        let now: Vec<&str> = graph.ids().map(|id| graph.mode(id).id()).collect();
        if was != now {
            return Err(ConfigError::io(
                &path.display().to_string(),
                format!(
                    "the managed config changed the modes ({} now, {} before): a running session cannot carry on under it",
                    now.join(", "),
                    was.join(", ")
                ),
            ));
        }
        state.digest = digest;
        state.graph = Some(std::sync::Arc::new(graph));
        Ok(state.graph.clone())
    }

    /// The graph [`Self::refresh`] last merged, if the managed file changed.
    pub fn current(&self) -> Option<std::sync::Arc<ModeGraph>> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .graph
            .clone()
    }
}

/// The size and modification time of the file at `path`, if it is there.
fn stamp_of(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()))
}

/// The SHA-256 of the file at `path`, if it can be read.
fn digest_of(path: &Path) -> Option<Vec<u8>> {
    use sha2::Digest;
    let bytes = std::fs::read(path).ok()?;
    Some(sha2::Sha256::digest(&bytes).to_vec())
}
