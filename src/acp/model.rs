//! The `model` config option (category `model`): offered where several models are configured
//! ([`Session::models`]: the agent's own model and the modes' `defaultModelId`s), its current
//! value the model the session's mode runs with ([`Session::model_id`]); setting it chooses
//! the model through the library ([`Session::choose_model`]), which refuses a model it does not
//! offer.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};

use crate::acp::slot::Slot;
use crate::acp::update::config_options;
use crate::acp::{Error, invalid, session_error};
use crate::mode::ModeGraph;
use crate::session::Session;

/// The id of the config option that holds the model.
pub(crate) const MODEL_OPTION: &str = "model";

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

/// The session's config options as they stand: `mode`, and `model` when offered.
pub(crate) fn session_options(graph: &ModeGraph, session: &Session) -> Vec<SessionConfigOption> {
    config_options(
        graph,
        session.mode_id(),
        model_option(session.models(), session.model_id()),
    )
}

/// Sets the `model` option of `slot`'s session to `value`: chosen through the library, which
/// refuses (invalid params, nothing changed) a model it does not offer or cannot build.
/// Returns the options as they now stand.
pub(crate) async fn set_model(
    slot: &Slot,
    value: Option<&str>,
) -> Result<Vec<SessionConfigOption>, Error> {
    let Some(id) = value else {
        return Err(invalid("the `model` option takes a model id"));
    };
    let mut session = slot.session.lock().await;
    session.choose_model(id).await.map_err(session_error)?;
    Ok(session_options(&slot.graph, &session))
}
