//! Model specs: the text that names a model, as the CLI's `--model` takes it (`scripted`,
//! `openai/NAME`, `anthropic/NAME`), parsed into a [`ModelSpec`].

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::model::scripted::ScriptedModel;
use crate::model::{LanguageModel, ModelError};

/// Which model a session runs, named by a spec: `scripted` (the built-in
/// [`ScriptedModel`](crate::model::scripted::ScriptedModel)), `openai` or `openai/NAME` (an
/// OpenAI-compatible endpoint), `anthropic` or `anthropic/NAME` (the Anthropic Messages API).
///
/// The part after `/` is the model name; without it (or empty) the provider's settings from the
/// environment choose (`OPENAI_MODEL`, `ANTHROPIC_MODEL`). Text after `scripted/` is ignored, as
/// the scripted model has no names. Parsing names a provider only and needs no feature;
/// [`ModelSpec::open`] opens the model (a provider built without its feature is refused there).
///
/// # Examples
/// ```
/// use agent_controller::model::{ModelSpec, ModelSpecError};
///
/// assert_eq!("scripted".parse(), Ok(ModelSpec::Scripted));
/// assert_eq!(
///     "openai/gpt-4o-mini".parse(),
///     Ok(ModelSpec::OpenAi { model: Some("gpt-4o-mini".to_owned()) })
/// );
/// assert_eq!("anthropic".parse(), Ok(ModelSpec::Anthropic { model: None }));
/// assert!(matches!(
///     "llama/7b".parse::<ModelSpec>(),
///     Err(ModelSpecError::UnknownProvider { .. })
/// ));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ModelSpec {
    /// The built-in scripted model (`scripted`).
    #[default]
    Scripted,
    /// An OpenAI-compatible endpoint (`openai`, `openai/NAME`).
    OpenAi {
        /// The model name after `/`; `None` for the environment's default.
        model: Option<String>,
    },
    /// The Anthropic Messages API (`anthropic`, `anthropic/NAME`).
    Anthropic {
        /// The model name after `/`; `None` for the environment's default.
        model: Option<String>,
    },
}

/// Why a model spec was refused by [`ModelSpec::from_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelSpecError {
    /// The provider (the part before `/`) is none of `scripted`, `openai`, `anthropic`.
    #[error(
        "unknown model provider `{provider}`: {}use `scripted`, `openai/MODEL` or `anthropic/MODEL`",
        crate::hint::hint(provider, ["scripted", "openai", "anthropic"], "provider names")
            .map(|hint| format!("{hint} "))
            .unwrap_or_default()
    )]
    UnknownProvider {
        /// The provider as given.
        provider: String,
    },
}

impl ModelSpec {
    /// Whether this is the built-in scripted model.
    pub fn is_scripted(&self) -> bool {
        matches!(self, Self::Scripted)
    }

    /// Opens the model this spec names: a plain [`ScriptedModel`] for `scripted`, else the
    /// provider with its settings from the environment (`OPENAI_API_KEY`, `OPENAI_BASE_URL`,
    /// `OPENAI_MODEL`; `ANTHROPIC_API_KEY`, ...) and the spec's model name as its default model
    /// (a mode's `defaultModelId` still wins).
    ///
    /// # Errors
    /// A [`ModelError`] when the provider cannot be set up (no API key for the provider's own
    /// endpoint, an HTTP client that cannot be built), or when this build lacks the provider's
    /// feature (`openai`, `anthropic`).
    ///
    /// # Examples
    /// ```
    /// use agent_controller::model::ModelSpec;
    ///
    /// let spec: ModelSpec = "scripted".parse()?;
    /// let model = spec.open()?;
    /// # let _ = model;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(&self) -> Result<Arc<dyn LanguageModel>, ModelError> {
        match self {
            Self::Scripted => Ok(Arc::new(ScriptedModel::new())),
            #[cfg(feature = "openai")]
            Self::OpenAi { model } => open_http::<crate::model::openai::OpenAi>(model.as_deref()),
            #[cfg(not(feature = "openai"))]
            Self::OpenAi { .. } => Err(not_built("openai")),
            #[cfg(feature = "anthropic")]
            Self::Anthropic { model } => {
                open_http::<crate::model::anthropic::Anthropic>(model.as_deref())
            }
            #[cfg(not(feature = "anthropic"))]
            Self::Anthropic { .. } => Err(not_built("anthropic")),
        }
    }

    /// The model name the spec gives (the part after `/`), if any.
    pub fn model_name(&self) -> Option<&str> {
        match self {
            Self::Scripted => None,
            Self::OpenAi { model } | Self::Anthropic { model } => model.as_deref(),
        }
    }
}

impl FromStr for ModelSpec {
    type Err = ModelSpecError;

    /// Parses `scripted`, `openai[/NAME]` or `anthropic[/NAME]`; see [`ModelSpec`].
    ///
    /// # Errors
    /// [`ModelSpecError::UnknownProvider`] when the part before `/` names no provider.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (provider, name) = match spec.split_once('/') {
            Some((provider, name)) => (provider, Some(name)),
            None => (spec, None),
        };
        let model = name.filter(|n| !n.is_empty()).map(str::to_owned);
        match provider {
            "scripted" => Ok(Self::Scripted),
            "openai" => Ok(Self::OpenAi { model }),
            "anthropic" => Ok(Self::Anthropic { model }),
            other => Err(ModelSpecError::UnknownProvider {
                provider: other.to_owned(),
            }),
        }
    }
}

impl fmt::Display for ModelSpec {
    /// The spec as [`ModelSpec::from_str`] reads it back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (provider, model) = match self {
            Self::Scripted => return f.write_str("scripted"),
            Self::OpenAi { model } => ("openai", model),
            Self::Anthropic { model } => ("anthropic", model),
        };
        match model {
            Some(name) => write!(f, "{provider}/{name}"),
            None => f.write_str(provider),
        }
    }
}

/// A model of provider `P` configured from the environment, with `name` as its default model
/// when given.
#[cfg(any(feature = "openai", feature = "anthropic"))]
fn open_http<P: crate::model::http::HttpProvider>(
    name: Option<&str>,
) -> Result<Arc<dyn LanguageModel>, ModelError>
where
    crate::model::http::HttpModel<P>: LanguageModel,
{
    let mut settings = crate::model::http::HttpSettings::<P>::from_env();
    if let Some(name) = name {
        settings = settings.default_model(name);
    }
    Ok(Arc::new(crate::model::http::HttpModel::new(settings)?))
}

/// The error for a provider whose cargo feature `feature` this build lacks.
#[cfg(not(all(feature = "openai", feature = "anthropic")))]
fn not_built(feature: &str) -> ModelError {
    ModelError::new(format!(
        "this build has no `{feature}` provider: rebuild with `--features {feature}`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_and_names_parse() {
        let cases = [
            ("scripted", ModelSpec::Scripted),
            ("scripted/anything", ModelSpec::Scripted),
            ("openai", ModelSpec::OpenAi { model: None }),
            ("openai/", ModelSpec::OpenAi { model: None }),
            (
                "openai/gpt-4o/mini",
                ModelSpec::OpenAi {
                    model: Some("gpt-4o/mini".to_owned()),
                },
            ),
            ("anthropic", ModelSpec::Anthropic { model: None }),
            (
                "anthropic/claude-x",
                ModelSpec::Anthropic {
                    model: Some("claude-x".to_owned()),
                },
            ),
        ];
        for (text, spec) in cases {
            assert_eq!(text.parse::<ModelSpec>(), Ok(spec), "{text}");
        }
    }

    #[test]
    fn unknown_providers_are_refused_by_name() {
        for text in ["", "/gpt", "OpenAI/gpt", "llama", "scripted:x", " openai"] {
            let provider = text.split_once('/').map_or(text, |(p, _)| p);
            assert_eq!(
                text.parse::<ModelSpec>(),
                Err(ModelSpecError::UnknownProvider {
                    provider: provider.to_owned()
                }),
                "{text:?}"
            );
        }
    }

    #[test]
    fn scripted_opens_in_every_build() {
        assert!(ModelSpec::Scripted.open().is_ok());
    }

    #[cfg(not(feature = "openai"))]
    #[test]
    fn a_provider_this_build_lacks_is_refused_when_opened() {
        let spec = ModelSpec::OpenAi { model: None };
        let Err(error) = spec.open() else {
            panic!("opened openai without the openai feature");
        };
        assert!(error.message().contains("--features openai"), "{error}");
    }

    #[test]
    fn display_reads_back() {
        for text in ["scripted", "openai", "openai/gpt-4o", "anthropic/claude-x"] {
            let spec: ModelSpec = text.parse().expect(text);
            assert_eq!(spec.to_string(), text);
            assert_eq!(spec.to_string().parse(), Ok(spec));
        }
    }
}
