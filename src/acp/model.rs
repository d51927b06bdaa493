//! The `model` config option (category `model`): offered where several models are configured
//! ([`Session::models`]: the agent's own model and the modes' `defaultModelId`s), its current
//! value the model the session's mode runs with ([`Session::model_id`]); setting it chooses
//! the model through the library ([`Session::choose_model`]), which refuses a model it does not
//! offer.

use agent_client_protocol::v1::schema::SessionConfigOption;

use crate::acp::options::{config_options, model_option};
use crate::acp::slot::Slot;
use crate::acp::{Error, invalid, session_error};
use crate::mode::ModeGraph;
use crate::session::Session;

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
