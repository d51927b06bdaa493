//! Mode graphs from code: [`ModeGraphBuilder`] and [`ModeBuilder`], validated by exactly the rules
//! a TOML config is (the builder hands its modes to the same validation), with the same
//! [`ConfigErrorKind`](super::ConfigErrorKind)s and messages, but without file positions.

use std::path::PathBuf;

use super::{ConfigError, ModeGraph};

/// The origin errors of a graph built in code carry, in place of a file name.
pub const BUILDER_ORIGIN: &str = "ModeGraphBuilder";

/// One mode of a [`ModeGraphBuilder`], with the keys of a `[[modes]]` table: `id`, `name`,
/// `description`, `instructions`, `default`, `transitionsTo`, `availableTools`,
/// `requireApproval`, `defaultModelId`, `metadata`, `approvalTimeout`.
#[derive(Debug, Clone, Default)]
pub struct ModeBuilder {
    table: toml::Table,
}

/// `items` as a TOML array of strings.
fn strings<I, S>(items: I) -> toml::Value
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    toml::Value::Array(
        items
            .into_iter()
            .map(|t| toml::Value::String(t.into()))
            .collect(),
    )
}

impl ModeBuilder {
    /// A mode with id `id` (ASCII letters, digits, `-` and `_`; checked by
    /// [`ModeGraphBuilder::build`]).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build")).build()?;
    /// assert_eq!(graph.default_mode().id(), "build", "the only mode");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn new(id: impl Into<String>) -> Self {
        let mut table = toml::Table::new();
        table.insert("id".to_owned(), toml::Value::String(id.into()));
        Self { table }
    }

    fn set(mut self, key: &str, value: toml::Value) -> Self {
        self.table.insert(key.to_owned(), value);
        self
    }

    /// The display name (`name`); the id when not set.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build").name("Build")).build()?;
    /// assert_eq!(graph.default_mode().name(), "Build");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn name(self, name: impl Into<String>) -> Self {
        self.set("name", toml::Value::String(name.into()))
    }

    /// What the mode is for (`description`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build").description("Carry the plan out.")).build()?;
    /// assert_eq!(graph.default_mode().description(), "Carry the plan out.");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn description(self, description: impl Into<String>) -> Self {
        self.set("description", toml::Value::String(description.into()))
    }

    /// The system prompt of the mode (`instructions`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build").instructions("Write the code.")).build()?;
    /// assert_eq!(graph.default_mode().instructions(), "Write the code.");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn instructions(self, instructions: impl Into<String>) -> Self {
        self.set("instructions", toml::Value::String(instructions.into()))
    }

    /// Marks this mode as the default one (`default = true`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new()
    ///     .mode(ModeBuilder::new("plan").transitions_to("build"))
    ///     .mode(ModeBuilder::new("build").default_mode())
    ///     .build()?;
    /// assert_eq!(graph.default_mode().id(), "build");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn default_mode(self) -> Self {
        self.set("default", toml::Value::Boolean(true))
    }

    /// The mode an approved plan hands over to (`transitionsTo`); makes this a planning mode.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new()
    ///     .mode(ModeBuilder::new("plan").transitions_to("build"))
    ///     .mode(ModeBuilder::new("build"))
    ///     .build()?;
    /// let plan = graph.get("plan").unwrap();
    /// assert_eq!(graph.mode(graph.transition_target(plan)).id(), "build");
    /// assert!(ModeGraphBuilder::new().mode(ModeBuilder::new("plan").transitions_to("nowhere")).build().is_err());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn transitions_to(self, target: impl Into<String>) -> Self {
        self.set("transitionsTo", toml::Value::String(target.into()))
    }

    /// The modes an approved plan may hand over to (`transitionsTo = ["build", "build-auto"]`):
    /// the user chooses one when approving ([`crate::Decision::to`]); a plain approval goes to
    /// the first. Makes this a planning mode.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{config::ModeBuilder, config::ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new()
    ///     .mode(ModeBuilder::new("plan").transitions_to_list(["build", "build-auto"]))
    ///     .mode(ModeBuilder::new("build").default_mode())
    ///     .mode(ModeBuilder::new("build-auto"))
    ///     .build()?;
    /// let plan = graph.get("plan").unwrap();
    /// assert_eq!(graph.transition_targets(plan).len(), 2);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn transitions_to_list<I, S>(self, targets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.set("transitionsTo", strings(targets))
    }

    /// The tools the model may call in this mode (`availableTools`); without it, every tool.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build").available_tools(["read_file", "write_file"])).build()?;
    /// assert_eq!(graph.default_mode().available_tools().map(|t| t.len()), Some(2));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn available_tools<I, S>(self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.set("availableTools", strings(tools))
    }

    /// The tools whose calls wait for the user's approval in this mode (`requireApproval =
    /// ["write_file"]`); each must be a tool the mode offers, and never `submit_plan`.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::{config::ModeBuilder, config::ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new()
    ///     .mode(ModeBuilder::new("build").require_approval(["write_file"]))
    ///     .build()?;
    /// assert!(graph.default_mode().requires_approval("write_file"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn require_approval<I, S>(self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.set("requireApproval", strings(tools))
    }

    /// Every tool call in this mode waits for the user's approval (`requireApproval = true`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build").require_approval_all()).build()?;
    /// assert!(graph.default_mode().requires_approval("any_tool"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn require_approval_all(self) -> Self {
        self.set("requireApproval", toml::Value::Boolean(true))
    }

    /// The mode's preferred model (`defaultModelId`, for example `openai/o3`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build").default_model_id("openai/o3")).build()?;
    /// assert_eq!(graph.default_mode().default_model_id(), Some("openai/o3"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn default_model_id(self, model: impl Into<String>) -> Self {
        self.set("defaultModelId", toml::Value::String(model.into()))
    }

    /// Free-form data for the host (`metadata`, for example `color`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let mut metadata = toml::Table::new();
    /// metadata.insert("color".into(), "green".into());
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build").metadata(metadata)).build()?;
    /// assert_eq!(graph.default_mode().metadata()["color"].as_str(), Some("green"));
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn metadata(self, metadata: toml::Table) -> Self {
        self.set("metadata", toml::Value::Table(metadata))
    }

    /// How long a plan submitted in this mode may wait for a decision (`approvalTimeout`, for
    /// example `"24h"` or `"1h30m"`; see [`crate::deadline::ApprovalTimeout`]). A text that is
    /// not such a duration is refused by [`ModeGraphBuilder::build`]
    /// ([`ConfigErrorKind::InvalidApprovalTimeout`](super::ConfigErrorKind::InvalidApprovalTimeout)).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new()
    ///     .mode(ModeBuilder::new("plan").transitions_to("build").approval_timeout("24h"))
    ///     .mode(ModeBuilder::new("build"))
    ///     .build()?;
    /// let plan = graph.mode(graph.get("plan").unwrap());
    /// assert_eq!(plan.approval_timeout().map(|t| t.duration().as_secs()), Some(86_400));
    /// assert!(ModeGraphBuilder::new().mode(ModeBuilder::new("plan").transitions_to("build").approval_timeout("soon")).mode(ModeBuilder::new("build")).build().is_err());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn approval_timeout(self, timeout: impl Into<String>) -> Self {
        self.set("approvalTimeout", toml::Value::String(timeout.into()))
    }
}

/// Builds a [`ModeGraph`] in code instead of from TOML.
///
/// # Examples
/// ```
/// use agent_controller::{config::ConfigErrorKind, config::ModeBuilder, config::ModeGraphBuilder};
///
/// let graph = ModeGraphBuilder::new()
///     .mode(
///         ModeBuilder::new("plan")
///             .instructions("Explore read-only, then submit a plan.")
///             .transitions_to("build")
///             .available_tools(["read_file", "write_plan", "submit_plan"]),
///     )
///     .mode(ModeBuilder::new("build").default_mode())
///     .build()?;
/// assert_eq!(graph.default_mode().id(), "build");
/// let plan = graph.get("plan").unwrap();
/// assert_eq!(graph.mode(graph.transition_target(plan)).id(), "build");
///
/// // The same rules as a TOML config, the same error kinds, no file position.
/// let err = ModeGraphBuilder::new()
///     .mode(ModeBuilder::new("plan").transitions_to("biuld"))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.kind(), ConfigErrorKind::UnknownTarget);
/// assert_eq!(err.location(), None);
/// # Ok::<(), agent_controller::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ModeGraphBuilder {
    modes: Vec<ModeBuilder>,
    default_mode_id: Option<String>,
    plans_dir: Option<PathBuf>,
}

impl ModeGraphBuilder {
    /// A builder with no modes.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let error = ModeGraphBuilder::new().build().unwrap_err();
    /// assert_eq!(error.kind(), agent_controller::config::ConfigErrorKind::NoModes);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a mode; modes keep the order they are added in (the first is the default when no
    /// other rule names one).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("plan").transitions_to("build")).mode(ModeBuilder::new("build")).build()?;
    /// assert_eq!(graph.len(), 2);
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn mode(mut self, mode: ModeBuilder) -> Self {
        self.modes.push(mode);
        self
    }

    /// Names the default mode (`defaultModeId`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new()
    ///     .mode(ModeBuilder::new("plan").transitions_to("build"))
    ///     .mode(ModeBuilder::new("build"))
    ///     .default_mode_id("build")
    ///     .build()?;
    /// assert_eq!(graph.default_mode().id(), "build");
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn default_mode_id(mut self, id: impl Into<String>) -> Self {
        self.default_mode_id = Some(id.into());
        self
    }

    /// The plans directory (`plansDir`): a relative path inside the workspace, without `..`
    /// (`build` refuses others with [`ConfigErrorKind::InvalidPlansDir`](super::ConfigErrorKind)).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ModeBuilder, ModeGraphBuilder};
    /// let graph = ModeGraphBuilder::new().mode(ModeBuilder::new("build")).plans_dir("docs/plans").build()?;
    /// assert_eq!(graph.plans_dir(), std::path::Path::new("docs/plans"));
    /// assert!(ModeGraphBuilder::new().mode(ModeBuilder::new("build")).plans_dir("../outside").build().is_err());
    /// # Ok::<(), agent_controller::ConfigError>(())
    /// ```
    pub fn plans_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.plans_dir = Some(dir.into());
        self
    }

    /// Validates the modes by the rules of [`super::parse`] and returns the graph.
    ///
    /// # Errors
    /// The first problem, of the same [`ConfigErrorKind`](super::ConfigErrorKind) a TOML config
    /// with these values gets (no modes, an invalid or duplicate id, a `transitionsTo` naming
    /// itself or no mode or one mode twice, an unknown `defaultModeId`, two defaults, a conflicting default, a
    /// `transitionsTo` without `submit_plan` in `availableTools`), with origin
    /// [`BUILDER_ORIGIN`] and no location. Tool names are checked when a controller is built.
    ///
    /// # Examples
    /// ```
    /// use agent_controller::config::{ConfigErrorKind, ModeBuilder, ModeGraphBuilder};
    /// let error = ModeGraphBuilder::new().mode(ModeBuilder::new("build")).mode(ModeBuilder::new("build")).build().unwrap_err();
    /// assert_eq!(error.kind(), ConfigErrorKind::DuplicateId);
    /// assert_eq!(error.location(), None, "no file position in code");
    /// ```
    pub fn build(self) -> Result<ModeGraph, ConfigError> {
        let mut root = toml::Table::new();
        if let Some(id) = self.default_mode_id {
            root.insert("defaultModeId".to_owned(), toml::Value::String(id));
        }
        if let Some(dir) = self.plans_dir {
            let dir = dir.to_string_lossy().into_owned();
            root.insert("plansDir".to_owned(), toml::Value::String(dir));
        }
        let modes = self
            .modes
            .into_iter()
            .map(|m| toml::Value::Table(m.table))
            .collect();
        root.insert("modes".to_owned(), toml::Value::Array(modes));
        // The TOML text is only the way into the one validation; its positions mean nothing to
        // the caller and are dropped.
        let text = toml::to_string(&root).map_err(|e| {
            ConfigError::without_position(super::ConfigErrorKind::InvalidType, e.to_string())
        })?;
        match super::parse(&text, BUILDER_ORIGIN) {
            Ok(mut graph) => {
                graph.drop_positions();
                Ok(graph)
            }
            Err(err) => Err(err.stripped()),
        }
    }
}
