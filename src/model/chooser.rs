//! Choosing the model of the next mode at approval (issue 23, item 6): a host says which model
//! ids it can build ([`ModelChooser`]), an approval names one ([`crate::Decision::model`]), and
//! the session runs the mode it hands over to with that model until its next change of mode.
//!
//! [`SpecChooser`] builds the CLI's model specs (`scripted`, `openai/NAME`, `anthropic/NAME`,
//! [`crate::model::ModelSpec`]); a closure `Fn(&str) -> Result<Arc<dyn LanguageModel>, String>`
//! is a chooser too.

use std::sync::Arc;

use crate::model::{LanguageModel, ModelSpec};

/// What builds the model an approval names for the next mode ([`crate::Decision::model`]).
/// Set it with `AgentControllerBuilder::model_chooser`; without one, every approval naming a
/// model is refused ([`crate::SessionError::UnknownModel`]) and changes nothing.
///
/// The chooser is asked when the approval is applied ([`crate::Session::decide`]): after the
/// decision is checked ([`crate::PendingDecision::check`] does not ask it) and before anything
/// changes, so a model it cannot build refuses the approval. The model is kept for the next
/// mode once the approval is saved (an approval that cannot be saved leaves the mode's model
/// as it was). A session restored in another process asks again before its next model call in
/// that mode.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use agent_controller::LanguageModel;
/// use agent_controller::model::ModelChooser;
/// use agent_controller::model::scripted::ScriptedModel;
/// let chooser = |id: &str| -> Result<Arc<dyn LanguageModel>, String> {
///     match id {
///         "cheap" => Ok(Arc::new(ScriptedModel::new())),
///         other => Err(format!("no model `{other}` here: use cheap")),
///     }
/// };
/// assert!(chooser.build("cheap").is_ok());
/// assert!(chooser.build("gpt-9").is_err());
/// ```
pub trait ModelChooser: Send + Sync {
    /// The model with id `id`.
    ///
    /// # Errors
    /// Why this host cannot build it (an unknown id, a provider without credentials); the
    /// text becomes [`crate::SessionError::UnknownModel`]'s reason.
    fn build(&self, id: &str) -> Result<Arc<dyn LanguageModel>, String>;
}

impl<F> ModelChooser for F
where
    F: Fn(&str) -> Result<Arc<dyn LanguageModel>, String> + Send + Sync,
{
    fn build(&self, id: &str) -> Result<Arc<dyn LanguageModel>, String> {
        self(id)
    }
}

/// The chooser of model specs, as the CLI's `--model` reads them: the id is parsed as a
/// [`ModelSpec`] and opened ([`ModelSpec::open`]: `scripted`, `openai/NAME`, `anthropic/NAME`,
/// each provider with its settings from the environment).
///
/// # Examples
/// ```
/// use agent_controller::model::{ModelChooser, SpecChooser};
/// assert!(SpecChooser.build("scripted").is_ok());
/// let refused = SpecChooser.build("llama/7b").err().unwrap();
/// assert!(refused.contains("unknown model provider `llama`"), "{refused}");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SpecChooser;

impl ModelChooser for SpecChooser {
    fn build(&self, id: &str) -> Result<Arc<dyn LanguageModel>, String> {
        let spec: ModelSpec = id.parse().map_err(|e| format!("{e}"))?;
        spec.open().map_err(|e| e.message().to_owned())
    }
}
