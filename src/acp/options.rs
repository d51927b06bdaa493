//! The session's config options as ACP sends them: `mode`, a select over every mode (category
//! `mode`), and `model` where several models are configured (category `model`). Pure builders:
//! the `model` option is set through the library in [`crate::acp::model`].

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};

use crate::mode::{ModeGraph, ModeId};

/// The id of the config option that holds the mode.
pub(crate) const MODE_OPTION: &str = "mode";

/// The id of the config option that holds the model.
pub(crate) const MODEL_OPTION: &str = "model";

/// The config options: `mode`, a select over every mode, then `model` when it is offered
/// ([`model_option`]).
pub(crate) fn config_options(
    graph: &ModeGraph,
    current: ModeId,
    model: Option<SessionConfigOption>,
) -> Vec<SessionConfigOption> {
    let options: Vec<SessionConfigSelectOption> = graph
        .modes()
        .iter()
        .map(|m| {
            let description = (!m.description().is_empty()).then(|| m.description().to_owned());
            SessionConfigSelectOption::new(m.id().to_owned(), m.name().to_owned())
                .description(description)
        })
        .collect();
    let option = SessionConfigOption::select(
        MODE_OPTION,
        "Mode",
        graph.mode(current).id().to_owned(),
        options,
    )
    .description("The session's mode: what the agent may do, and where an approved plan leads.")
    // Editors tie their mode picker and mode cycling to this category (Zed).
    .category(SessionConfigOptionCategory::Mode);
    std::iter::once(option).chain(model).collect()
}

/// The `model` option for a session offering `models` whose mode runs with `current`: none
/// unless at least two models are offered and the current one is named.
pub(crate) fn model_option(
    models: &[String],
    current: Option<&str>,
) -> Option<SessionConfigOption> {
    let current = current?;
    if models.len() < 2 {
        return None;
    }
    let options: Vec<SessionConfigSelectOption> = models
        .iter()
        .map(|id| SessionConfigSelectOption::new(id.clone(), id.clone()))
        .collect();
    let option = SessionConfigOption::select(MODEL_OPTION, "Model", current.to_owned(), options)
        .description(
            "The model the session's mode runs with, until the mode changes: then the next \
             mode's own model runs.",
        )
        .category(SessionConfigOptionCategory::Model);
    Some(option)
}
